#!/bin/sh
# GTE v1.5 and mGTE (config.json model_type new, Alibaba-NLP new-impl's
# NewModel): checkpoints of gte-base-en-v1.5's and gte-multilingual-base's
# configurations, scaled down, with random weights, written from a PyTorch
# reference of the published modeling code (tests/import/gte.py,
# reference_models.py), imported by `tfenc-import DIR -o M.h5 --job M.ini`
# and run by tfenc-batch: per token within 1e-4 and pooled (CLS, Normalize
# by sentence-transformers) at min cosine 0.99999 on token ids of lengths 1
# to 600, NTK-scaled RoPE (fixed, and the mixed form), packed QKV, the GLU,
# no token types (en) or one (multilingual), the encoder under new. beside a
# one-label token classifier (gte-multilingual-base) or a masked-LM head,
# both left out; NewForSequenceClassification's pooler and classifier (a
# reranker's one label) as the job's head; from the 532 real sentences through the model's own
# tokenizer.json (bert-base-uncased's WordPiece; an XLM-R SentencePiece
# Unigram), every row's token count and per-token states equal to those of
# transformers' tokenizer (the same ids); bf16 and int8 within their bars,
# the int8 job through the accuracy gate;
# 2x1 and 1x2 (replicas x stages) bitwise equal to one rank. A bad or partial
# folder (a missing tensor, a qkv_proj of the wrong shape, a rope_scaling
# type or factor tfenc does not compute, a token classifier of two labels)
# is refused in one line naming the file and the tensor or key, with
# nothing written.
set -eu

. "$(cd "$(dirname "$0")/../.." && pwd)/tests/environment.sh"
: "${TFENC_VENV_PYTHON:=${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python}"
import="$builddir/drivers/tfenc-import"
work=$(mktemp -d "${TMPDIR:-/tmp}/tfenc-gte.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
checks=0

HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$generate" "$work" "$TFENC_VENV_PYTHON" "$here/gte.py" make "$work" \
  "$here/sentences.txt"

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# Comparisons are listed here and made by one Python process at the end.
compare() { # REFERENCE DATASET OUTPUT MIN-COSINE LABEL
  checks=$((checks + 1))
  if [ -f "$3" ]; then
    echo "$1 $2 $3 $4 $5" >>"$work/compare.txt"
  else
    fail "$5: tfenc-batch wrote no $3"
  fi
}

ids() { # DIR JOB OUTPUT [--set ...]: tfenc-batch on the kind's token ids
  dir=$1 job=$2 output=$3
  shift 3
  "$driver" --quiet --set "job.input=$dir/ids.h5" --set job.input_format=hdf5 \
    --set "job.output=$output" "$@" "$job"
}
text() { # DIR JOB OUTPUT [--set ...]: tfenc-batch on the real sentences
  dir=$1 job=$2 output=$3
  shift 3
  "$driver" --quiet --set "job.input=$here/sentences.txt" --set "job.output=$output" "$@" "$job"
}

for kind in en multilingual mixed; do
  dir="$work/$kind"
  "$import" "$dir" -o "$dir/model.h5" --job "$dir/job.ini" >"$dir/import.log" 2>&1 \
    || { fail "$kind: tfenc-import: $(cat "$dir/import.log")"; exit 1; }
  # The same job without its [pooling] section gives the hidden states.
  sed '/^\[pooling\]/,$d' "$dir/job.ini" >"$dir/tokens.ini"
  ids "$dir" "$dir/tokens.ini" "$dir/tokens.h5"
  compare "$dir/reference.h5" hidden "$dir/tokens.h5" 0.99999 "$kind per token, lengths 1 to 600"
  ids "$dir" "$dir/job.ini" "$dir/embeddings.h5"
  compare "$dir/reference.h5" embeddings "$dir/embeddings.h5" 0.99999 "$kind pooled (CLS)"
done

# The positions: RoPE, NTK-scaled at every length, bounds no length (the
# job format's maximum); max_seq_len is the tokenizer's 8192.
checks=$((checks + 1))
if grep -qx "max_positions = 16777216" "$work/en/job.ini" &&
    grep -qx "max_seq_len = 8192" "$work/en/job.ini" &&
    grep -qx "rope_scaling = ntk" "$work/en/job.ini" && grep -qx "rope_factor = 2" "$work/en/job.ini" &&
    grep -qx "rope_mixed_b = 0.9" "$work/mixed/job.ini"; then
  echo "ok: the jobs' positions, lengths and NTK keys"
else
  fail "en or mixed job: positions, max_seq_len or the NTK keys are not the model's"
fi

for kind in en multilingual; do
  dir="$work/$kind"
  text "$dir" "$dir/tokens.ini" "$dir/text-tokens.h5"
  compare "$dir/reference.h5" text_hidden "$dir/text-tokens.h5" 0.99999 \
    "$kind from text per token (token counts and ids as transformers' tokenizer)"
  text "$dir" "$dir/job.ini" "$dir/text.h5"
  compare "$dir/reference.h5" text_embeddings "$dir/text.h5" 0.99999 "$kind from text pooled"
done

# bf16 and int8 as parity.sh holds them: the precisions' cosine bars, and
# the file records the precision that ran and, for int8, what the accuracy
# gate measured on its sample (at least the job's min_cosine, 0.999).
# NewForSequenceClassification (a reranker's one label): its logits from text.
dir="$work/reranker"
"$import" "$dir" -o "$dir/model.h5" --job "$dir/job.ini" >"$dir/import.log" 2>&1 \
  || fail "reranker: tfenc-import: $(cat "$dir/import.log")"
text "$dir" "$dir/job.ini" "$dir/logits.h5" --set head.scores=logits
compare "$dir/reference.h5" text_logits "$dir/logits.h5" 0.99999 \
  "NewForSequenceClassification logits from text"

dir="$work/en"
for precision in "bf16 0.9999" "int8 0.999"; do
  set -- $precision
  text "$dir" "$dir/job.ini" "$dir/text-$1.h5" --set "model.precision=$1" 2>"$dir/notice-$1.txt"
  compare "$dir/reference.h5" text_embeddings "$dir/text-$1.h5" "$2" "en from text pooled, $1"
  checks=$((checks + 1))
  runs=$1
  ! grep -q "fp32 runs instead" "$dir/notice-$1.txt" || runs=fp32
  "$python" "$here/check_precision_attributes.py" "$dir/text-$1.h5" "$1" "$2" "$runs" \
    || fail "en $1: the precision attributes"
done

# Layouts (replicas x stages): the same bytes whatever the ranks and stages.
for layout in 2:1 1:2; do
  replicas=${layout%:*} stages=${layout#*:}
  checks=$((checks + 1))
  if ! "$mpiexec" -n $((replicas * stages)) "$driver" --quiet \
      --set "job.input=$here/sentences.txt" --set "job.output=$dir/layout-$replicas-$stages.h5" \
      --set "job.pipeline_stages=$stages" "$dir/job.ini"; then
    fail "en: layout $replicas x $stages: tfenc-batch failed"
    continue
  fi
  "$python" - "$dir/text.h5" "$dir/layout-$replicas-$stages.h5" "en layout $layout" \
    <<'PY' || failures=$((failures + 1))
import sys
import h5py
import numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:3])
for name in ("embeddings", "lengths"):
    if not np.array_equal(a[name][()], b[name][()]) or a[name].dtype != b[name].dtype:
        sys.exit(f"FAIL: {sys.argv[3]}: {name} differs from one rank's")
print(f"ok: {sys.argv[3]} (replicas:stages) bitwise equal to 1:1")
PY
done

# --- Bad or partial folders: one line naming the file and the tensor or
# key, non-zero exit, nothing written.
refuse() { # NAME FROM PYTHON-EDIT PATTERN: the edit run in a copy of FROM
  checks=$((checks + 1))
  bad="$work/bad-$1"
  mkdir "$bad"
  cp "$work/$2/config.json" "$work/$2/model.safetensors" "$bad/"
  (cd "$bad" && "$TFENC_VENV_PYTHON" -c "import json
from safetensors.torch import load_file, save_file
import torch
d = json.load(open('config.json'))
w = load_file('model.safetensors')
$3
json.dump(d, open('config.json', 'w'))
save_file(w, 'model.safetensors')")
  if "$import" "$bad" -o "$bad/out.h5" --job "$bad/out.ini" >/dev/null 2>"$bad/stderr"; then
    fail "$1: imported"
  elif [ "$(wc -l <"$bad/stderr")" -ne 1 ] || ! grep -qF -- "$4" "$bad/stderr"; then
    fail "$1: message is not one line with '$4': $(cat "$bad/stderr")"
  elif [ -e "$bad/out.h5" ] || [ -e "$bad/out.ini" ]; then
    fail "$1: left output behind"
  else
    echo "ok: $1: $(cat "$bad/stderr")"
  fi
}
refuse missing-tensor en "del w['encoder.layer.1.mlp.up_gate_proj.weight']" \
  "model.safetensors: tensor 'encoder.layer.1.mlp.up_gate_proj.weight' not found"
refuse qkv-shape multilingual \
  "w['new.encoder.layer.0.attention.qkv_proj.weight'] = torch.zeros(2 * 64, 64)" \
  "model.safetensors: tensor 'new.encoder.layer.0.attention.qkv_proj.weight' has shape [128, 64], config.json implies [192, 64]"
refuse rope-linear en "d['rope_scaling'] = {'type': 'linear', 'factor': 2.0}" \
  "config.json: rope_scaling type 'linear' is not supported"
refuse rope-factor en "d['rope_scaling'] = {'type': 'ntk', 'factor': 0.5}" \
  "config.json: rope_scaling factor must be a number of at least 1"
refuse logn en "d['logn_attention_scale'] = True" "config.json: logn_attention_scale"
refuse unpacked en "d['pack_qkv'] = False" "config.json: pack_qkv = false"
refuse two-labels multilingual \
  "w['classifier.weight'] = torch.zeros(2, 64); w['classifier.bias'] = torch.zeros(2)" \
  "model.safetensors: tensor 'classifier.weight' is a task head of more than one label"

status=0
"$python" "$here/gte.py" compare "$work/compare.txt" >"$work/compare.log" 2>&1 || status=$?
cat "$work/compare.log"
failed=$(grep -c '^FAIL' "$work/compare.log" || true)
# a comparison that could not run at all counts too
[ "$status" -eq 0 ] || [ "$failed" -gt 0 ] || failed=1
failures=$((failures + failed))

echo "gte.sh: $((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
