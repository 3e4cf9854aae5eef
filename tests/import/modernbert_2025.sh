#!/bin/sh
# The ModernBERT checkpoints of 2025 (tests/import/modernbert_2025.py):
# mmBERT (Gemma 2's 256,000-piece byte-fallback BPE, local and global RoPE
# base 160000, a masked-LM folder), Ettin (as transformers 5 re-saves it:
# layer_types and rope_parameters) and granite-embedding-english-r2 (base
# 80000/10000, CLS pooling and Normalize), on random weights of their
# structure: imported, run by tfenc-batch on real text through the
# folder's own tokenizer.json, and compared with the reference pooled as
# sentence-transformers pools them: token counts equal, min cosine >=
# 0.99999 at fp32, 2 ranks bitwise equal to 1, and [model] precision bf16
# and int8 within the bars of parity.sh. A tokenizer of another model, a
# missing layer tensor, YaRN rope_scaling, a scaled rope_type and
# layer_types of the wrong length are refused in one line naming the file
# and the key or tensor, with no output.
set -eu

. "$(cd "$(dirname "$0")/../.." && pwd)/tests/environment.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/tfenc-modernbert-2025.XXXXXX")
trap 'rm -rf "$work"' EXIT
. "$here/folder_checks.sh"

HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$generate" "$work/generated" "$TFENC_VENV_PYTHON" \
  "$here/modernbert_2025.py" make "$sentences" "$work/generated"

for family in mmbert ettin granite; do
  model="$work/generated/$family"
  checks=$((checks + 1))
  if ! "$import" "$model" -o "$work/$family.h5" --job "$work/$family.ini" \
      >"$work/$family.log" 2>&1; then
    fail "$family: tfenc-import: $(cat "$work/$family.log")"
    continue
  fi
  grep -q '^max_seq_len = 8192$' "$work/$family.ini" \
    || fail "$family: the job's max_seq_len is not the tokenizer's 8192"
  "$batch" --quiet --set "job.input=$sentences" --set "job.output=$work/$family-out.h5" \
    "$work/$family.ini"
  "$python" "$here/compare_embeddings.py" "$work/generated/reference-$family.h5" \
    "$work/$family-out.h5" "$family fp32" 0.99999 1e-4 || failures=$((failures + 1))
done

# The rest compares numbers and layouts (normal build); the sanitizer
# build's memory paths are the imports and the jobs above.
if [ -z "${TFENC_SANITIZER_BUILD:-}" ]; then
  for family in mmbert ettin granite; do
    job="$work/$family.ini"
    [ -f "$job" ] || continue
    reference="$work/generated/reference-$family.h5"
    ranks_bitwise "$family" "$job" "$sentences"
    precisions "$family" "$job" "$sentences" "$reference" 0.9999 0.999
  done
fi

bad="$work/generated"
refused "mmBERT with ModernBERT's tokenizer" "$bad/bad-vocab" \
  "bad-vocab/tokenizer.json: 2005 tokens, but config.json vocab_size is 256000"
refused "a layer tensor missing" "$bad/bad-missing" \
  "bad-missing/model.safetensors: tensor 'model.layers.2.mlp.Wo.weight' not found"
refused "YaRN rope_scaling (mmBERT-32k)" "$bad/bad-yarn" \
  "bad-yarn/config.json: rope_scaling is not supported"
refused "a scaled rope_type" "$bad/bad-rope-type" \
  "bad-rope-type/config.json: rope_parameters rope_type 'linear' is not supported"
refused "layer_types of 2 for 7 layers" "$bad/bad-layer-types" \
  "bad-layer-types/config.json: layer_types must list one type for each of the 7 layers"

echo "modernbert_2025.sh: $((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
