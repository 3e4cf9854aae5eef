#!/bin/sh
# Sequence-classification heads: *ForSequenceClassification checkpoints
# written by transformers' own save_pretrained (tests/import/heads.py), for
# bert, roberta, xlm-roberta, electra and distilbert, each with another
# problem_type and label count, and ModernBertForSequenceClassification
# checkpoints in transformers 4.48's layout (cls and mean pooling, with and
# without its optional biases, and a CrossEncoder-style reranker folder). tfenc-import writes the head's weights and
# [head] section; tfenc-batch writes `scores` that must match transformers'
# logits (each sequence alone, and in a padded batch) and the pipeline's
# default scores within 1e-4; layouts 1x1, 2x1 and 1x2 give the same bytes.
# Bad checkpoints and jobs fail in one line and leave nothing behind: a
# tensor beside the encoder that no map knows (the classifier of a config
# that does not say ForSequenceClassification), a head tfenc does not map,
# label counts that disagree (id2label, num_labels, the weights, the job), an
# unknown problem_type, a head tensor of the wrong shape, a ModernBERT
# classifier_activation or classifier_pooling tfenc does not compute. A pretraining
# checkpoint (masked-LM and next-sentence heads, which sentence-transformers
# drops too) still imports as its encoder.
set -eu

. "$(cd "$(dirname "$0")/../.." && pwd)/tests/environment.sh"
: "${TFENC_VENV_PYTHON:=${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python}"
import="$builddir/drivers/tfenc-import"
work=$(mktemp -d "${TMPDIR:-/tmp}/tfenc-heads.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
checks=0

# The real-text cases compare all-MiniLM-L6-v2's scores with transformers'
# and sentence-transformers': normal build only. Under the sanitizers the
# random-weight kinds take every path of the classifier, and
# st_features.sh and st_chunks.sh the tokenizer on real text.
real_text="$here/sentences.txt"
[ -z "${TFENC_SANITIZER_BUILD:-}" ] || real_text=
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$generate" "$work" "$TFENC_VENV_PYTHON" "$here/heads.py" make "$work" \
  ${real_text:+"$real_text"}

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

compare() { # REFERENCE DATASET OUTPUT LABEL
  checks=$((checks + 1))
  "$python" "$here/heads.py" compare "$@" || failures=$((failures + 1))
}

run() { # DIR OUTPUT [--set ...]: tfenc-batch on the kind's token ids
  dir=$1 output=$2
  shift 2
  "$driver" --quiet --set "job.input=$dir/ids.h5" --set job.input_format=hdf5 \
    --set "job.output=$output" "$@" "$dir/job.ini"
}

for kind in bert roberta xlm-roberta electra distilbert \
    modernbert-cls modernbert-mean modernbert-reranker; do
  dir="$work/$kind"
  if ! "$import" "$dir" -o "$dir/model.h5" --job "$dir/job.ini" >"$dir/import.log" 2>&1; then
    checks=$((checks + 1))
    fail "$kind: tfenc-import: $(cat "$dir/import.log")"
    continue
  fi
  run "$dir" "$dir/scores.h5"
  compare "$dir/reference.h5" scores "$dir/scores.h5" "$kind scores (pipeline default)"
  run "$dir" "$dir/logits.h5" --set head.scores=logits
  compare "$dir/reference.h5" logits "$dir/logits.h5" "$kind logits"
  compare "$dir/reference.h5" padded "$dir/logits.h5" "$kind logits, padded batch"
done

# The classifier's mean pooling, GELU and LayerNorm (ModernBERT's head
# shape), on the bert kind's encoder with the norm added to its weights.
checks=$((checks + 1))
mkdir -p "$work/mean-norm"
cp "$work/bert/job.ini" "$work/bert/ids.h5" "$work/mean-norm/"
"$python" - "$work/bert/model.h5" "$work/bert/norm.h5" "$work/mean-norm/model.h5" <<'PY'
import shutil, sys
import h5py
shutil.copy(sys.argv[1], sys.argv[3])
with h5py.File(sys.argv[2], "r") as norm, h5py.File(sys.argv[3], "a") as f:
    for name in ("norm_weight", "norm_bias"):
        f["/head/" + name] = norm[name][()]
PY
if run "$work/mean-norm" "$work/mean-norm/scores.h5" --set head.pooling=mean \
    --set head.activation=gelu --set head.norm=true; then
  checks=$((checks - 1))
  compare "$work/bert/reference.h5" mean_norm "$work/mean-norm/scores.h5" \
    "bert head with mean pooling, GELU and LayerNorm"
else
  fail "mean pooling, GELU and LayerNorm: tfenc-batch failed"
fi

# The file: scores [N, k] float32, output_kind scores, id2label as in config.json.
checks=$((checks + 1))
"$python" - "$work/bert/scores.h5" "$work/bert/config.json" <<'PY' || failures=$((failures + 1))
import json, sys
import h5py
f = h5py.File(sys.argv[1], "r")
want = json.load(open(sys.argv[2]))["id2label"]
got = json.loads(f.attrs["id2label"])
assert got == want, (got, want)
assert f.attrs["output_kind"] == "scores" and f["scores"].shape == (12, 3), f["scores"].shape
assert f["scores"].dtype == "float32" and "embeddings" not in f
print("ok: scores [12, 3] float32, id2label", got)
PY

# --dry-run and --status describe scores: their shape and labels.
checks=$((checks + 1))
run "$work/bert" "$work/bert/dry.h5" --dry-run >"$work/dry-run.txt"
"$driver" --status "$work/bert/scores.h5" >"$work/status.txt"
grep -qF 'scores [12, 3] of the model'"'"'s head' "$work/dry-run.txt" \
  || fail "--dry-run does not describe the scores: $(grep output "$work/dry-run.txt")"
grep -qF 'output: scores [12 documents, 3 labels], float32, id2label {"0":"label 0' \
  "$work/status.txt" || fail "--status does not describe the scores: $(grep output "$work/status.txt")"

# Real text: all-MiniLM-L6-v2 (packaged in the venv) with a two-label head
# as AutoModelForSequenceClassification makes it, through tfenc's tokenizer
# on the 532 real sentences (up to 357 tokens), against transformers' own
# tokenizer (its truncation at model_max_length) and model in padded
# batches; save_pretrained leaves id2label out (the default labels).
# Then a sentence-transformers CrossEncoder folder (CrossEncoder.save) whose
# config names its default activation, Identity: tfenc writes logits where
# the pipeline would apply a sigmoid, as CrossEncoder.predict does; on the
# real sentences, each scored alone (predict on one-text lists). heads.py
# made both folders and references.
[ -n "$real_text" ] || echo "heads.sh: sanitizer build: the real-text cases run in the normal build"
for name in ${real_text:+minilm cross-encoder}; do
  checks=$((checks + 1))
  real="$work/$name"
  if "$import" "$real" -o "$real/model.h5" --job "$real/job.ini" >/dev/null \
      && "$driver" --quiet --set "job.input=$here/sentences.txt" \
        --set "job.output=$real/scores.h5" "$real/job.ini"; then
    checks=$((checks - 1))
    compare "$real/reference.h5" scores "$real/scores.h5" "$name + head, real text"
  else
    fail "$name with a head: importing or running it failed"
  fi
done

# Layouts: the same bytes whatever the ranks.
dir="$work/bert"
for layout in 2:1 2:2; do
  ranks=${layout%:*} stages=${layout#*:}
  checks=$((checks + 1))
  if ! "$mpiexec" -n "$ranks" "$driver" --quiet --set "job.input=$dir/ids.h5" \
      --set job.input_format=hdf5 --set "job.output=$dir/layout-$ranks-$stages.h5" \
      --set "job.pipeline_stages=$stages" "$dir/job.ini"; then
    fail "layout $ranks ranks, $stages stages: tfenc-batch failed"
    continue
  fi
  "$python" - "$dir/scores.h5" "$dir/layout-$ranks-$stages.h5" "$layout" <<'PY' || failures=$((failures + 1))
import sys
import h5py
import numpy as np
a, b = (h5py.File(p, "r") for p in sys.argv[1:3])
for name in ("scores", "lengths"):
    if not np.array_equal(a[name][()], b[name][()]) or a[name].dtype != b[name].dtype:
        sys.exit(f"FAIL: layout {sys.argv[3]}: {name} differs from one rank's")
print(f"ok: layout {sys.argv[3]} (ranks:stages) bitwise equal to 1:1")
PY
done

# --- Bad input: one line, non-zero exit, nothing written.
expect_error() { # NAME COMMAND-KIND DIR PATTERN...: COMMAND-KIND import or batch
  name=$1 how=$2 dir=$3
  shift 3
  checks=$((checks + 1))
  out="$work/out-$name.h5" job="$work/out-$name.ini"
  if [ "$how" = import ]; then
    set -- "$@" END
    "$import" "$dir" -o "$out" --job "$job" >"$work/stdout" 2>"$work/stderr" && status=0 || status=$?
  else
    run "$dir" "$out" $extra >"$work/stdout" 2>"$work/stderr" && status=0 || status=$?
    set -- "$@" END
  fi
  if [ "$status" -eq 0 ]; then
    fail "$name: succeeded"
    return
  fi
  before=$failures
  lines=$(wc -l <"$work/stderr")
  [ "$lines" -eq 1 ] || fail "$name: $lines lines on stderr: $(cat "$work/stderr")"
  while [ "$1" != END ]; do
    grep -qF -- "$1" "$work/stderr" || fail "$name: message lacks '$1': $(cat "$work/stderr")"
    shift
  done
  for leftover in "$out" "$out.tmp" "$job" "$job.tmp"; do
    [ ! -e "$leftover" ] || fail "$name: left $leftover behind"
  done
  [ "$failures" -ne "$before" ] || echo "ok: $name: $(cat "$work/stderr")"
}

edit_json() { # FILE PYTHON-EXPRESSION-ON-d
  "$python" - "$1" "$2" <<'PY'
import json, sys
path, expression = sys.argv[1:3]
d = json.load(open(path))
exec(expression)
json.dump(d, open(path, "w"))
PY
}

copy() { # SOURCE NAME: a checkpoint to break, without tfenc's files
  rm -rf "$work/$2"
  mkdir "$work/$2"
  cp "$work/$1/config.json" "$work/$1/model.safetensors" "$work/$2/"
  echo "$work/$2"
}

# A classifier whose config does not say so: its head would be dropped.
for kind in bert roberta distilbert; do
  dir=$(copy "$kind" "$kind-as-encoder")
  edit_json "$dir/config.json" 'd["architectures"] = ["Model"]'
  expect_error "$kind-unknown-tensor" import "$dir" "tensor '" "classifier." \
    "not part of tfenc's map of $kind"
done
expect_error unmapped-head import "$work/mpnet" "config.json" "MPNetForSequenceClassification"
dir=$(copy bert fewer-labels)
edit_json "$dir/config.json" 'd["id2label"] = {"0": "a", "1": "b"}; d["label2id"] = {"a": 0, "b": 1}'
expect_error labels-disagree-weights import "$dir" "classifier.weight" "[3, 32]" "[2, 32]"
dir=$(copy bert num-labels)
edit_json "$dir/config.json" 'd["num_labels"] = 5'
expect_error num-labels-disagree import "$dir" "config.json" "num_labels 5" "3 labels"
dir=$(copy bert problem)
edit_json "$dir/config.json" 'd["problem_type"] = "ranking"'
expect_error unknown-problem-type import "$dir" "config.json" "problem_type 'ranking'"
# ModernBERT's head settings that the classifier layer does not compute.
dir=$(copy modernbert-cls modernbert-silu)
edit_json "$dir/config.json" 'd["classifier_activation"] = "silu"'
expect_error modernbert-unknown-activation import "$dir" "config.json" \
  "classifier_activation 'silu'"
dir=$(copy modernbert-mean modernbert-max)
edit_json "$dir/config.json" 'd["classifier_pooling"] = "max"'
expect_error modernbert-unknown-pooling import "$dir" "config.json" "classifier_pooling 'max'"

# A CrossEncoder's activation: sentence-transformers 4's key wins over the
# older one, as CrossEncoder reads them; an activation the classifier layer
# does not compute is refused by its key.
imports_scores() { # DIR SCORES WHY: tfenc-import of DIR writes `scores = SCORES`
  checks=$((checks + 1))
  if "$import" "$1" -o "$1/model.h5" --job "$1/job.ini" >/dev/null \
      && grep -qx "scores = $2" "$1/job.ini"; then
    checks=$((checks - 1))
  else
    fail "$(basename "$1"): $3"
  fi
}
dir=$(copy modernbert-reranker reranker-both-keys)
edit_json "$dir/config.json" \
  'd["sbert_ce_default_activation_function"] = "torch.nn.modules.activation.Sigmoid"'
imports_scores "$dir" logits "sentence_transformers.activation_fn Identity did not give logits"
# A sentence-transformers 4 folder that names no activation: CrossEncoder's
# default for one label, Sigmoid.
dir=$(copy modernbert-reranker reranker-default)
edit_json "$dir/config.json" 'del d["sentence_transformers"]["activation_fn"]'
imports_scores "$dir" sigmoid "a CrossEncoder folder without activation_fn did not get Sigmoid"
dir=$(copy modernbert-reranker reranker-tanh)
edit_json "$dir/config.json" \
  'd["sentence_transformers"]["activation_fn"] = "torch.nn.modules.activation.Tanh"'
expect_error reranker-unknown-activation import "$dir" "config.json" \
  "sentence_transformers.activation_fn 'torch.nn.modules.activation.Tanh'"

dir="$work/bert"
extra="--set head.labels={\"0\":\"a\",\"1\":\"b\"}"
expect_error job-labels-disagree batch "$dir" "head" "2 labels" "3 scores"
extra="--set head.n_labels=2"
expect_error job-n-labels-disagree batch "$dir" "head" "n_labels = 2" "3 rows"
extra="--set head.problem_type=ranking"
expect_error job-unknown-problem-type batch "$dir" "job.ini" "problem_type" "ranking"
extra=
mkdir -p "$work/bad-shape"
cp "$dir/job.ini" "$dir/ids.h5" "$work/bad-shape/"
"$python" - "$dir/model.h5" "$work/bad-shape/model.h5" <<'PY'
import shutil, sys
import h5py
shutil.copy(sys.argv[1], sys.argv[2])
with h5py.File(sys.argv[2], "a") as f:
    weight = f["/head/dense_weight"][()]
    del f["/head/dense_weight"]
    f["/head/dense_weight"] = weight[:, :16]
PY
expect_error head-tensor-shape batch "$work/bad-shape" "/head/dense_weight" "[32, 16]"

checks=$((checks + 1))
if "$import" "$work/pretraining" -o "$work/pretraining.h5" --job "$work/pretraining.ini" \
    >/dev/null 2>"$work/stderr"; then
  echo "ok: pretraining heads left out"
else
  fail "pretraining: $(cat "$work/stderr")"
fi

echo "heads.sh: $((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
