#!/bin/sh
# The benchmark in one command (`make bench` runs it): tfenc against the
# engines a user can install, on real models and real text
# (tests/bench/bench.py says what is measured).
#
#   sh tests/bench/run.sh [--builddir DIR] [bench.py options]
#
# DIR is a configured and built tfenc tree (default: the current directory);
# the GEMM timer is built there if missing. On first use it installs the
# tests' venv (tests/setup-python-venv: sentence-transformers on Debian's
# torch) and the bench's own (tests/bench/setup-bench: ONNX Runtime,
# OpenVINO, NNCF, the text, all-mpnet-base-v2).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
srcdir=$(cd "$here/../.." && pwd)
builddir=$(pwd)
if [ "${1:-}" = "--builddir" ]; then
  builddir=$(cd "$2" && pwd)
  shift 2
fi
: "${TFENC_VENV:=${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}"

if [ ! -x "$builddir/drivers/tfenc-batch" ]; then
  echo "bench: $builddir/drivers/tfenc-batch is missing: build tfenc first (make -j2)" >&2
  exit 1
fi
if [ ! -x "$builddir/tests/bench/gemm_rate" ]; then
  make -C "$builddir" tests/bench/gemm_rate >/dev/null
fi
sh "$srcdir/tests/setup-python-venv" >&2
sh "$here/setup-bench" >&2
if ! /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  echo "bench: matplotlib is missing: sh tests/setup-deps installs python3-matplotlib" >&2
  exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
  : "${OMPI_ALLOW_RUN_AS_ROOT:=1}" "${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:=1}"
  export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
fi
exec "$TFENC_VENV/bin/python" "$here/bench.py" --builddir "$builddir" "$@"
