#!/bin/sh
# The benchmark in one command: tfenc against ONNX Runtime and PyTorch on the
# same weights and inputs (tests/bench/bench.py says what is measured).
#
#   sh tests/bench/run.sh [--builddir DIR] [bench.py options]
#
# DIR is a configured and built tfenc tree (default: the current directory);
# the sgemm timer is built there if missing. Installs the test venv
# (tests/setup-python-venv) and ONNX Runtime into it on first use: ONNX Runtime
# is the bench's alone, so it is not in tests/python-requirements.txt.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
srcdir=$(cd "$here/../.." && pwd)
builddir=$(pwd)
if [ "${1:-}" = "--builddir" ]; then
  builddir=$(cd "$2" && pwd)
  shift 2
fi
: "${TFENC_VENV:=${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}"
python="$TFENC_VENV/bin/python"

if [ ! -x "$builddir/drivers/tfenc-batch" ]; then
  echo "bench: $builddir/drivers/tfenc-batch is missing: build tfenc first (make -j2)" >&2
  exit 1
fi
if [ ! -x "$builddir/tests/bench/sgemm_rate" ]; then
  make -C "$builddir" tests/bench/sgemm_rate >/dev/null
fi
sh "$srcdir/tests/setup-python-venv" >&2
# 1.17.3: the newest ONNX Runtime whose wheel runs on Debian 12's numpy 1.24
# and Python 3.11. --no-deps keeps Debian's numpy; the packages it declares
# (coloredlogs, flatbuffers, protobuf, sympy) serve its tools, not inference.
if ! "$python" -c "import onnxruntime" 2>/dev/null; then
  echo "bench: installing onnxruntime 1.17.3 into $TFENC_VENV" >&2
  "$python" -m pip install -q --no-deps onnxruntime==1.17.3
fi
if ! "$python" -c "import matplotlib" 2>/dev/null; then
  echo "bench: matplotlib is missing: sh tests/setup-deps installs python3-matplotlib" >&2
  exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
  : "${OMPI_ALLOW_RUN_AS_ROOT:=1}" "${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:=1}"
  export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
fi
exec "$python" "$here/bench.py" --builddir "$builddir" "$@"
