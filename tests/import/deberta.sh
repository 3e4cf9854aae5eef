#!/bin/sh
# DeBERTa-v2/v3 (model_type deberta-v2): checkpoints written by transformers'
# own save_pretrained with random weights (tests/import/deberta.py, one
# Python process), imported by tfenc-import and run by tfenc-batch:
# DebertaV2Model per token within 1e-4 at lengths 1 to 600 (past
# position_buckets and max_relative_positions, and past the 512 of
# max_position_embeddings, which relative positions alone do not bound, as
# transformers does not) and mean-pooled as an
# embedding model; DebertaV2ForSequenceClassification's logits per
# sequence, in a padded batch and through the pipeline's softmax; the other
# branches of the disentangled attention (own position maps, c2p alone,
# exact distances, no LayerNorm, absolute positions, token types);
# DeBERTa-v3's own bucket settings up to distance 599; the classifier from
# real text through a DeBERTa-v3-style tokenizer.json. bf16
# and int8 jobs (whose host products add the terms through the same
# prepare/add steps) stay within the precisions' cosine bars; layouts 2x1
# and 2x2 (ranks x stages; the base model 2x2) give the same bytes as one
# rank. Configs tfenc
# cannot compute (the convolution of v2-xlarge, no c2p/p2c term) are
# refused in one line, with nothing written.
set -eu

. "$(cd "$(dirname "$0")/../.." && pwd)/tests/environment.sh"
: "${TFENC_VENV_PYTHON:=${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python}"
import="$builddir/drivers/tfenc-import"
work=$(mktemp -d "${TMPDIR:-/tmp}/tfenc-deberta.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
checks=0

HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$generate" "$work" "$TFENC_VENV_PYTHON" "$here/deberta.py" make "$work" \
  "$here/sentences.txt"

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# Comparisons are listed here and made by one Python process at the end.
compare() { # REFERENCE DATASET OUTPUT LABEL [MIN-COSINE]
  checks=$((checks + 1))
  if [ -f "$3" ]; then
    echo "$1 $2 $3 ${5:--} $4" >>"$work/compare.txt"
  else
    fail "$4: tfenc-batch wrote no $3"
  fi
}

run() { # DIR JOB OUTPUT [--set ...]: tfenc-batch on the kind's token ids
  dir=$1 job=$2 output=$3
  shift 3
  "$driver" --quiet --set "job.input=$dir/ids.h5" --set job.input_format=hdf5 \
    --set job.max_seq_len=600 --set "job.output=$output" "$@" "$job"
}

for kind in base classifier variant v3-buckets text; do
  dir="$work/$kind"
  "$import" "$dir" -o "$dir/model.h5" --job "$dir/job.ini" >"$dir/import.log" 2>&1 \
    || { fail "$kind: tfenc-import: $(cat "$dir/import.log")"; exit 1; }
  # The same job without its [pooling] section gives the hidden states.
  sed '/^\[pooling\]/,$d' "$dir/job.ini" >"$dir/tokens.ini"
done

dir="$work/base"
run "$dir" "$dir/tokens.ini" "$dir/tokens.h5"
compare "$dir/reference.h5" hidden "$dir/tokens.h5" "DebertaV2Model per token, lengths 1 to 600"
run "$dir" "$dir/job.ini" "$dir/embeddings.h5"
compare "$dir/reference.h5" embeddings "$dir/embeddings.h5" "DebertaV2Model mean-pooled"
for precision in "bf16 0.9999" "int8 0.999"; do
  set -- $precision
  run "$dir" "$dir/tokens.ini" "$dir/tokens-$1.h5" --set "model.precision=$1" 2>/dev/null
  compare "$dir/reference.h5" hidden "$dir/tokens-$1.h5" "DebertaV2Model per token, $1" "$2"
done

dir="$work/variant"
run "$dir" "$dir/tokens.ini" "$dir/tokens.h5"
compare "$dir/reference.h5" hidden "$dir/tokens.h5" \
  "own position maps, c2p alone, exact distances, no norm, absolute positions"

dir="$work/v3-buckets"
run "$dir" "$dir/tokens.ini" "$dir/tokens.h5"
compare "$dir/reference.h5" hidden "$dir/tokens.h5" \
  "DeBERTa-v3's buckets (256, up to 512), lengths to 600"

dir="$work/classifier"
run "$dir" "$dir/job.ini" "$dir/scores.h5"
compare "$dir/reference.h5" scores "$dir/scores.h5" "DebertaV2ForSequenceClassification softmax"
run "$dir" "$dir/job.ini" "$dir/logits.h5" --set head.scores=logits
compare "$dir/reference.h5" logits "$dir/logits.h5" "DebertaV2ForSequenceClassification logits"
compare "$dir/reference.h5" padded "$dir/logits.h5" "logits of a padded batch"
for precision in "bf16 0.9999" "int8 0.999"; do
  set -- $precision
  run "$dir" "$dir/job.ini" "$dir/logits-$1.h5" --set head.scores=logits \
    --set "model.precision=$1" 2>/dev/null
  compare "$dir/reference.h5" logits "$dir/logits-$1.h5" "classifier logits, $1" "$2"
done

# From text: the classifier with its DeBERTa-v3-style tokenizer.json, which
# tfenc-import stores, on the 532 real sentences (truncated at 256 tokens,
# as the reference's tokenizer truncates them).
dir="$work/text"
"$driver" --quiet --set "job.input=$here/sentences.txt" --set job.max_seq_len=256 \
  --set "job.output=$dir/scores.h5" "$dir/job.ini"
compare "$dir/reference.h5" scores "$dir/scores.h5" \
  "classifier from text through the tokenizer.json, against transformers' tokenizer"

# Layouts: the same bytes whatever the ranks and stages (the base model, with
# its 600-token sequence, at 2x2 only: a run of MPI costs CPU time).
for case in "classifier job.ini scores 2:1 2:2" "base tokens.ini hidden 2:2"; do
  set -- $case
  dir="$work/$1" job=$2 dataset=$3
  shift 3
  layouts=$*
  [ "$dir" = "$work/classifier" ] && reference="$dir/scores.h5" || reference="$dir/tokens.h5"
  for layout in $layouts; do
    ranks=${layout%:*} stages=${layout#*:}
    checks=$((checks + 1))
    if ! "$mpiexec" -n "$ranks" "$driver" --quiet --set "job.input=$dir/ids.h5" \
        --set job.input_format=hdf5 --set job.max_seq_len=600 \
        --set "job.output=$dir/layout-$ranks-$stages.h5" \
        --set "job.pipeline_stages=$stages" "$dir/$job"; then
      fail "$dir: layout $ranks ranks, $stages stages: tfenc-batch failed"
      continue
    fi
    "$python" - "$reference" "$dir/layout-$ranks-$stages.h5" "${dir##*/} layout $layout" \
      "$dataset" \
      <<'PY' || failures=$((failures + 1))
import sys
import h5py
import numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:3])
for name in (sys.argv[4], "lengths"):
    if not np.array_equal(a[name][()], b[name][()]) or a[name].dtype != b[name].dtype:
        sys.exit(f"FAIL: {sys.argv[3]}: {name} differs from one rank's")
print(f"ok: {sys.argv[3]} (ranks:stages) bitwise equal to 1:1")
PY
  done
done

# --- Configs tfenc does not compute: one line, non-zero exit, nothing written.
refuse() { # NAME PYTHON-EDIT-OF-d PATTERN
  checks=$((checks + 1))
  dir="$work/$1"
  mkdir "$dir"
  cp "$work/base/config.json" "$work/base/model.safetensors" "$dir/"
  "$python" - "$dir/config.json" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
exec(sys.argv[2])
json.dump(d, open(sys.argv[1], "w"))
PY
  if "$import" "$dir" -o "$dir/out.h5" --job "$dir/out.ini" >/dev/null 2>"$dir/stderr"; then
    fail "$1: imported"
  elif [ "$(wc -l <"$dir/stderr")" -ne 1 ] || ! grep -qF -- "$3" "$dir/stderr"; then
    fail "$1: message is not one line with '$3': $(cat "$dir/stderr")"
  elif [ -e "$dir/out.h5" ] || [ -e "$dir/out.ini" ]; then
    fail "$1: left output behind"
  else
    echo "ok: $1: $(cat "$dir/stderr")"
  fi
}
# A learned position table (position_biased_input) does bound the length:
# its 1024 rows.
checks=$((checks + 1))
if run "$work/variant" "$work/variant/tokens.ini" "$work/variant/long.h5" \
    --set job.max_seq_len=1025 2>"$work/variant/long.err"; then
  fail "variant: max_seq_len 1025 accepted beyond a position table of 1024"
elif ! grep -q "max_seq_len" "$work/variant/long.err"; then
  fail "variant: max_seq_len 1025 not refused by name: $(cat "$work/variant/long.err")"
else
  echo "ok: variant: $(cat "$work/variant/long.err")"
fi

refuse convolution 'd["conv_kernel_size"] = 3' "conv_kernel_size 3"
refuse no-terms 'd["pos_att_type"] = []' "pos_att_type"

status=0
"$python" "$here/deberta.py" compare "$work/compare.txt" >"$work/compare.log" 2>&1 || status=$?
cat "$work/compare.log"
failed=$(grep -c '^FAIL' "$work/compare.log" || true)
# a comparison that could not run at all counts too
[ "$status" -eq 0 ] || [ "$failed" -gt 0 ] || failed=1
failures=$((failures + failed))

echo "deberta.sh: $((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
