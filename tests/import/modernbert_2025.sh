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
: "${TFENC_VENV_PYTHON:=${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python}"
import="$builddir/drivers/tfenc-import"
batch=$driver
sentences="$here/sentences.txt"
work=$(mktemp -d "${TMPDIR:-/tmp}/tfenc-modernbert-2025.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
checks=0
fail() { failures=$((failures + 1)); echo "FAIL: $*"; }

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
    # Two ranks in windows of 8 documents: the 1x1 file bit for bit.
    for ranks in 1 2; do
      "$mpiexec" -n "$ranks" "$batch" --quiet --set "job.input=$sentences" \
        --set "job.output=$work/$family-ranks-$ranks.h5" --set job.window_documents=8 \
        --set job.threads=1 "$job"
    done
    checks=$((checks + 1))
    "$python" -c "import h5py, sys
a, b = (h5py.File(p, 'r') for p in sys.argv[1:3])
sys.exit(not (a.attrs['complete'] == b.attrs['complete'] == 1
              and a['embeddings'][()].tobytes() == b['embeddings'][()].tobytes()))" \
      "$work/$family-ranks-1.h5" "$work/$family-ranks-2.h5" \
      && echo "$family at 2 x 1: bitwise equal to 1x1" || fail "$family at 2 x 1 differs from 1x1"

    # The matrix precisions on the float32 weights, with parity.sh's bars.
    for case in "bf16 0.9999" "int8 0.999"; do
      set -- $case
      checks=$((checks + 1))
      if "$batch" --quiet --set "job.input=$sentences" --set "job.output=$work/$family-$1.h5" \
           --set job.threads=2 --set "model.precision=$1" "$job" 2>"$work/notice-$1.txt"; then
        "$python" "$here/compare_embeddings.py" "$reference" "$work/$family-$1.h5" \
          "$family precision $1" "$2" 1 || failures=$((failures + 1))
        runs=$1
        ! grep -q "fp32 runs instead" "$work/notice-$1.txt" || runs=fp32
        "$python" "$here/check_precision_attributes.py" "$work/$family-$1.h5" "$1" "$2" "$runs" \
          || failures=$((failures + 1))
      else
        fail "$family: the precision = $1 job failed: $(cat "$work/notice-$1.txt")"
      fi
    done
  done
fi

refused() { # LABEL FOLDER EXPECTED-TEXT: one line, non-zero, no output
  checks=$((checks + 1))
  rm -f "$work/refused.h5" "$work/refused.ini"
  if "$import" "$2" -o "$work/refused.h5" --job "$work/refused.ini" >"$work/refused.log" 2>&1
  then
    fail "$1: tfenc-import accepted it"
  elif [ "$(wc -l <"$work/refused.log")" -ne 1 ] || ! grep -qF "$3" "$work/refused.log" \
      || [ -e "$work/refused.h5" ] || [ -e "$work/refused.ini" ]; then
    fail "$1: expected one line with '$3' and no output, got: $(cat "$work/refused.log")"
  else
    echo "$1: refused: $(cat "$work/refused.log")"
  fi
}
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
