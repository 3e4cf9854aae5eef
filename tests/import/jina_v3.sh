#!/bin/sh
# jina-embeddings-v3 (xlm-roberta with rotary positions and LoRA task
# adapters) on random weights of its structure (tests/import/jina_v3.py):
# imported with --task for two tasks (one with an instruction, one
# without), run by tfenc-batch on real text through the model's XLM-R
# tokenizer, and compared with the reference that applies the adapters
# unmerged: pooled min cosine >= 0.99999 at fp32, the Matryoshka width cut
# and renormalised, 2 ranks bitwise equal to 1, and [model] precision bf16
# and int8 within the bars of parity.sh. A folder without --task, with an
# unknown task, with an adapter of the wrong rank or without a lora tensor
# is refused in one line naming the file and the tensor, with no output.
# Without adapters, a model whose RoPE turns interleaved pairs
# (rotary_emb_interleaved: the mha's rope_style = interleaved) is compared
# pooled, and an XLMRobertaForSequenceClassification of the implementation
# (RoBERTa's head names, tanh) by its logits.
set -eu

. "$(cd "$(dirname "$0")/../.." && pwd)/tests/environment.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/tfenc-jina-v3.XXXXXX")
trap 'rm -rf "$work"' EXIT
. "$here/folder_checks.sh"

HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$generate" "$work/generated" "$TFENC_VENV_PYTHON" \
  "$here/jina_v3.py" make "$sentences" "$work/generated"
model="$work/generated/model"

for task in retrieval.query text-matching; do
  checks=$((checks + 1))
  if ! "$import" "$model" -o "$work/$task.h5" --job "$work/$task.ini" --task "$task" \
      >"$work/$task.log" 2>&1; then
    fail "$task: tfenc-import: $(cat "$work/$task.log")"
    continue
  fi
  # The weights file says which task's adapter it holds.
  "$python" -c "import h5py, sys
sys.exit(h5py.File(sys.argv[1], 'r').attrs['task'] != sys.argv[2])" "$work/$task.h5" "$task" \
    || fail "$task: the weights file's task attribute is not '$task'"
  "$batch" --quiet --set "job.input=$sentences" --set "job.output=$work/$task-out.h5" \
    "$work/$task.ini"
  "$python" "$here/compare_embeddings.py" "$work/generated/reference-$task.h5" \
    "$work/$task-out.h5" "jina-v3 $task fp32" 0.99999 1e-4 || failures=$((failures + 1))
done

# The rest compares numbers and layouts (normal build); the sanitizer
# build's memory paths are the import, the merge and the jobs above.
if [ -z "${TFENC_SANITIZER_BUILD:-}" ] && [ -f "$work/retrieval.query.ini" ]; then
  job="$work/retrieval.query.ini"
  reference="$work/generated/reference-retrieval.query.h5"
  checks=$((checks + 1))
  "$batch" --quiet --set "job.input=$sentences" --set "job.output=$work/cut.h5" \
    --set job.output_dim=16 "$job"
  "$python" "$here/architectures.py" compare "$reference" embeddings:16 "$work/cut.h5" \
    "jina-v3 output_dim 16" || failures=$((failures + 1))

  ranks_bitwise jina-v3 "$job" "$sentences"
  # The matrix precisions on the float32 weights, with parity.sh's bars.
  precisions jina-v3 "$job" "$sentences" "$reference" 0.9999 0.999
fi

# Interleaved rotary pairs, and the classifier's logits.
checks=$((checks + 1))
if "$import" "$work/generated/interleaved" -o "$work/interleaved.h5" \
    --job "$work/interleaved.ini" >"$work/interleaved.log" 2>&1; then
  "$batch" --quiet --set "job.input=$sentences" --set "job.output=$work/interleaved-out.h5" \
    "$work/interleaved.ini"
  "$python" "$here/compare_embeddings.py" "$work/generated/reference-interleaved.h5" \
    "$work/interleaved-out.h5" "jina-v3 interleaved rotary fp32" 0.99999 1e-4 \
    || failures=$((failures + 1))
else
  fail "interleaved rotary: tfenc-import: $(cat "$work/interleaved.log")"
fi
checks=$((checks + 1))
if "$import" "$work/generated/classifier" -o "$work/classifier.h5" \
    --job "$work/classifier.ini" >"$work/classifier.log" 2>&1; then
  "$batch" --quiet --set "job.input=$sentences" --set "job.output=$work/classifier-out.h5" \
    --set head.scores=logits "$work/classifier.ini"
  "$python" "$here/heads.py" compare "$work/generated/reference-classifier.h5" logits \
    "$work/classifier-out.h5" "jina-v3 XLMRobertaForSequenceClassification logits" \
    || failures=$((failures + 1))
else
  fail "classifier: tfenc-import: $(cat "$work/classifier.log")"
fi

refused "no --task" "$model" \
  "config.json: the model has task adapters: choose one with --task NAME (retrieval.query, retrieval.passage, separation, classification, text-matching)"
refused "unknown --task" "$model" "config.json: --task 'retrieval' is not one of the model's lora_adaptations" \
  --task retrieval
refused "adapter of rank 3" "$work/generated/bad-rank" \
  "bad-rank/model.safetensors: tensor 'roberta.encoder.layers.1.mlp.fc2.parametrizations.weight.0.lora_A' has shape [5, 3, 128], config.json's 5 lora_adaptations and lora_rank 4 imply [5, 4, 128]" \
  --task separation
refused "missing lora_B" "$work/generated/missing-lora" \
  "missing-lora/model.safetensors: tensor 'roberta.encoder.layers.0.mixer.out_proj.parametrizations.weight.0.lora_B' not found" \
  --task classification
no_adapters="$work/no-adapters"
cp -r "$model" "$no_adapters"
"$python" -c "import json, sys
path = sys.argv[1] + '/config.json'
d = json.load(open(path)); del d['lora_adaptations']
json.dump(d, open(path, 'w'))" "$no_adapters"
refused "--task without adapters" "$no_adapters" \
  "config.json: --task text-matching: the model has no task adapters (no lora_adaptations)" \
  --task text-matching

echo "jina_v3.sh: $((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
