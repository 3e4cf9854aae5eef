#!/bin/sh
# make check: the benchmark harness still runs end to end (a 2-layer model,
# a few thousand tokens, tfenc in both layouts and PyTorch, no ONNX Runtime),
# writes its CSV and PNG, and every engine agrees with PyTorch. It measures
# nothing and asserts no timing; `make bench` is the benchmark.
set -u
here=$(cd "$(dirname "$0")" && pwd)
builddir=${abs_top_builddir:-$(pwd)}
python=${TFENC_VENV_PYTHON:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv/bin/python}
out="$builddir/tests/data/generated/bench-smoke"
if [ "$(id -u)" -eq 0 ]; then
  : "${OMPI_ALLOW_RUN_AS_ROOT:=1}" "${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:=1}"
  export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
fi
rm -rf "$out"
mkdir -p "$out"
if ! "$python" "$here/bench.py" --builddir "$builddir" --smoke --out "$out" >"$out/log" 2>&1; then
  cat "$out/log"
  echo "bench smoke: FAIL: the harness failed (log above)"
  exit 1
fi
rows=$(($(wc -l <"$out/bench.csv") - 1))
# 2 workloads x 3 engines
if [ "$rows" -ne 6 ] || [ ! -s "$out/bench.png" ]; then
  cat "$out/log"
  echo "bench smoke: FAIL: expected 6 CSV rows and a PNG, found $rows rows"
  exit 1
fi
grep '^|' "$out/log"
rm -rf "$out"
echo "bench smoke: ok"
