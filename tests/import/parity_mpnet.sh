#!/bin/sh
# The real all-mpnet-base-v2 (MPNet: relative position buckets, positions
# from padding_idx + 1, <s> and </s> around the text) imported with
# tfenc-import and run by tfenc-batch over tests/import/sentences.txt must
# reproduce sentence-transformers' normalised embeddings, and the token count
# of every line must be the same.
#
# usage: parity_mpnet.sh [ids|text]
#   ids (default): from the token ids sentence-transformers' own tokenizer
#     gives: the weights and the layers alone;
#   text: from the text, tfenc's tokenizer included (parity_mpnet_text.sh).
set -eu
input=${1:-ids}

. "$(cd "$(dirname "$0")/../.." && pwd)/tests/environment.sh"
: "${TFENC_VENV_PYTHON:=${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python}"
export TFENC_VENV_PYTHON
import="$builddir/drivers/tfenc-import"
batch=$driver
sentences="$here/sentences.txt"
work=$(mktemp -d "${TMPDIR:-/tmp}/tfenc-parity-mpnet.XXXXXX")
trap 'rm -rf "$work"' EXIT

if ! "$TFENC_VENV_PYTHON" -c "import sentence_transformers" 2>"$work/venv.err"; then
  echo "FAIL: $TFENC_VENV_PYTHON cannot import sentence_transformers:"
  tail -n 3 "$work/venv.err"
  echo "Run tests/setup-python-venv (it installs tests/python-requirements.txt)."
  exit 1
fi
model=$("$here/fetch_mpnet.sh")

"$import" "$model" -o "$work/mpnet.h5" --job "$work/mpnet.ini"
# Offline: the reference must come from the fetched files, never the hub.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# Same bar as the MiniLM parity test (parity.sh): float32 summation order
# leaves ~1e-7 per layer; a wrong bucket, position or token moves cosines by
# more than 1e-3.
# From ids, the first 100 lines: the weights and layers are the same on
# every line, and the test stays within its share of CI time; from text,
# every line (the tokenizer meets all of them). Under the sanitizers, which
# look for memory errors rather than numbers and run BERT-base size 5-10
# times slower, 30 and 100 lines take every path as well.
if [ -n "${TFENC_SANITIZER_BUILD:-}" ]; then
  lines_ids=30 lines_text=100
else
  lines_ids=100 lines_text=$(wc -l <"$sentences")
fi
if [ "$input" = ids ]; then
  head -n "$lines_ids" "$sentences" >"$work/first.txt"
  "$TFENC_VENV_PYTHON" "$here/st_reference.py" "$model" "$work/first.txt" \
    "$work/reference.h5" "$work/ids.h5"
  "$batch" --quiet --set "job.input=$work/ids.h5" --set job.input_format=hdf5 \
    --set "job.output=$work/out.h5" "$work/mpnet.ini"
else
  head -n "$lines_text" "$sentences" >"$work/first.txt"
  "$TFENC_VENV_PYTHON" "$here/st_reference.py" "$model" "$work/first.txt" "$work/reference.h5"
  "$batch" --quiet --set "job.input=$work/first.txt" --set "job.output=$work/out.h5" \
    "$work/mpnet.ini"
fi
status=0
"$python" "$here/compare_embeddings.py" "$work/reference.h5" "$work/out.h5" \
  "mpnet from $input" 0.99999 1e-4 || status=1
echo "parity_mpnet.sh $input: $((1 - status)) passed, $status failed"
exit $status
