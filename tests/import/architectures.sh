#!/bin/sh
# Every architecture tfenc-import maps, on random weights: a checkpoint saved
# by transformers' own classes (or, for NomicBERT, ModernBERT and JinaBERT v2,
# which transformers 4.40 lacks, by references written from their published
# code: tests/import/reference_models.py), imported, run by tfenc-batch on
# token ids, and compared per token with the model's forward pass and pooled
# with sentence-transformers' Pooling and Normalize modules. The bert kind is
# also pooled in every sentence-transformers pooling mode.
set -eu

. "$(cd "$(dirname "$0")/../.." && pwd)/tests/environment.sh"
: "${TFENC_VENV_PYTHON:=${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python}"
export TFENC_VENV_PYTHON
import="$builddir/drivers/tfenc-import"
batch=$driver
work=$(mktemp -d "${TMPDIR:-/tmp}/tfenc-architectures.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
checks=0

HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$TFENC_VENV_PYTHON" "$here/architectures.py" make "$work"

compare() { # REFERENCE DATASET OUTPUT LABEL
  checks=$((checks + 1))
  "$python" "$here/architectures.py" compare "$@" || failures=$((failures + 1))
}

run() { # JOB OUTPUT [--set ...]: tfenc-batch on the kind's token ids
  job=$1 output=$2
  shift 2
  "$batch" --quiet --set "job.input=$dir/ids.h5" --set job.input_format=hdf5 \
    --set "job.output=$output" "$@" "$job"
}

for kind in bert roberta xlm-roberta electra distilbert mpnet qwen2 nomic_bert modernbert \
    jina_bert; do
  dir="$work/$kind"
  if ! "$import" "$dir" -o "$dir/model.h5" --job "$dir/job.ini" >"$dir/import.log" 2>&1; then
    checks=$((checks + 1))
    failures=$((failures + 1))
    echo "FAIL: $kind: tfenc-import: $(cat "$dir/import.log")"
    continue
  fi
  # The same job without its [pooling] section gives the hidden states.
  sed '/^\[pooling\]/,$d' "$dir/job.ini" >"$dir/tokens.ini"
  run "$dir/tokens.ini" "$dir/tokens.h5"
  compare "$dir/reference.h5" hidden "$dir/tokens.h5" "$kind per token"
  run "$dir/job.ini" "$dir/pooled.h5"
  compare "$dir/reference.h5" embeddings "$dir/pooled.h5" "$kind pooled"
done

dir="$work/bert"
for mode in cls mean max mean_sqrt_len weightedmean lasttoken; do
  run "$dir/job.ini" "$dir/pooled-$mode.h5" --set "pooling.mode=$mode" \
    --set pooling.normalize=false
  compare "$dir/reference.h5" "pooled_$mode" "$dir/pooled-$mode.h5" "bert pooling $mode"
done

echo "architectures.sh: $((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
