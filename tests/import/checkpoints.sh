#!/bin/sh
# Checkpoints as they are found (tests/import/checkpoints.py writes them
# with transformers' save_pretrained and torch.save, and the references
# from transformers' own from_pretrained of each folder): LayerNorm tensors
# under their legacy names gamma and beta, sharded safetensors through
# their index, pytorch_model.bin in float32, float16 and bfloat16, sharded
# and in torch.save's legacy format, each imported by tfenc-import and run by tfenc-batch per token,
# pooled (within 1e-4, pooled min cosine >= 0.99999) and, for the legacy
# names, as SPLADE (--sparse). Folders that are bad or partial (a missing
# shard, index and shards that disagree, two tensors loading under one
# name, a pickle with a forbidden global or opcode, a truncated zip or
# legacy file) are refused in one line naming the file and
# the tensor or opcode, with nothing written and nothing of the pickle run.
set -eu

. "$(cd "$(dirname "$0")/../.." && pwd)/tests/environment.sh"
: "${TFENC_VENV_PYTHON:=${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python}"
import="$builddir/drivers/tfenc-import"
work=$(mktemp -d "${TMPDIR:-/tmp}/tfenc-checkpoints.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
checks=0

HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$generate" "$work" "$TFENC_VENV_PYTHON" \
  "$here/checkpoints.py" make "$work"

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

compare() { # REFERENCE DATASET OUTPUT LABEL
  checks=$((checks + 1))
  "$python" "$here/checkpoints.py" compare "$@" || failures=$((failures + 1))
}

run() { # DIR JOB OUTPUT: tfenc-batch on the folder's token ids
  "$driver" --quiet --set "job.input=$1/ids.h5" --set job.input_format=hdf5 \
    --set "job.output=$3" "$2"
}

for kind in legacy sharded bin bin-half bin-bfloat16 bin-sharded bin-legacy; do
  dir="$work/$kind"
  checks=$((checks + 1))
  if ! "$import" "$dir" -o "$dir/model.h5" --job "$dir/job.ini" --verbose >"$dir/import.log" 2>&1
  then
    fail "$kind: tfenc-import: $(cat "$dir/import.log")"
    continue
  fi
  echo "ok: $kind: $(grep -m1 'tensors in' "$dir/import.log")"
  sed '/^\[pooling\]/,$d' "$dir/job.ini" >"$dir/tokens.ini"
  run "$dir" "$dir/tokens.ini" "$dir/tokens.h5"
  compare "$dir/reference.h5" hidden "$dir/tokens.h5" "$kind per token"
  run "$dir" "$dir/job.ini" "$dir/pooled.h5"
  compare "$dir/reference.h5" embeddings "$dir/pooled.h5" "$kind pooled"
done

# --verbose names every tensor it renamed, as transformers renames it.
dir="$work/legacy"
checks=$((checks + 1))
renamed=$(grep -c "loads as" "$dir/import.log" || true)
if grep -qF "tensor 'bert.embeddings.LayerNorm.gamma' loads as 'bert.embeddings.LayerNorm.weight'" \
    "$dir/import.log" && [ "$renamed" -eq 12 ]; then
  echo "ok: legacy: --verbose lists the $renamed renamed tensors"
else
  fail "legacy: --verbose should list 12 renamed tensors: $(cat "$dir/import.log")"
fi
# The masked-LM head's LayerNorm too: the SPLADE job of the same folder.
checks=$((checks + 1))
if "$import" "$dir" -o "$dir/sparse.h5" --job "$dir/sparse.ini" --sparse >"$dir/sparse.log" 2>&1
then
  run "$dir" "$dir/sparse.ini" "$dir/splade.h5"
  compare "$dir/reference.h5" splade "$dir/splade.h5" "legacy names as SPLADE"
else
  fail "legacy --sparse: tfenc-import: $(cat "$dir/sparse.log")"
fi

# --- Refused: one line naming the file and the tensor (or opcode), non-zero
# exit, nothing written.
refuse() { # NAME PATTERN...
  checks=$((checks + 1))
  name=$1
  dir="$work/bad/$name"
  shift
  if "$import" "$dir" -o "$dir/out.h5" --job "$dir/out.ini" >/dev/null 2>"$dir/stderr"; then
    fail "$name: imported"
    return
  fi
  if [ "$(wc -l <"$dir/stderr")" -ne 1 ]; then
    fail "$name: not one line: $(cat "$dir/stderr")"
    return
  fi
  for pattern in "$@"; do
    grep -qF -- "$pattern" "$dir/stderr" || { fail "$name: no '$pattern' in: $(cat "$dir/stderr")"; return; }
  done
  if [ -e "$dir/out.h5" ] || [ -e "$dir/out.ini" ]; then
    fail "$name: left output behind"
  else
    echo "ok: $name: $(cat "$dir/stderr")"
  fi
}
refuse missing-shard "model.safetensors.index.json" "model-00006-of-00006.safetensors" \
  "is missing"
refuse unlisted-in-shard "of-00006.safetensors: tensor 'bert.encoder.layer.0.extra.weight' is not in it" \
  "model.safetensors.index.json lists it there"
refuse elsewhere "of-00006.safetensors: holds tensor 'bert." \
  "model.safetensors.index.json assigns to model-00006-of-00006.safetensors"
refuse escaping-shard "model.safetensors.index.json" "must name a shard file beside the index"
refuse legacy-clash "model.safetensors" "'bert.embeddings.LayerNorm.gamma'" \
  "both load as 'bert.embeddings.LayerNorm.weight'"
refuse global-os-system "pytorch_model.bin (pytorch_model/data.pkl)" "GLOBAL" "at byte 2" \
  "'os.system'" "nothing run"
refuse opcode-inst "pytorch_model.bin (pytorch_model/data.pkl)" "INST (0x69) at byte 12"
refuse truncated-zip "pytorch_model.bin" "not a zip archive"
refuse truncated-legacy "pytorch_model.bin" "legacy format" "past the end of the file"
checks=$((checks + 1))
if [ -e "$work/bad/RAN" ]; then
  fail "global-os-system: the pickle's os.system ran"
else
  echo "ok: global-os-system: nothing of the pickle ran"
fi

echo "checkpoints.sh: $((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
