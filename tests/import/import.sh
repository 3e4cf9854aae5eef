#!/bin/sh
# tfenc-import on small random checkpoints (BERT in the sentence-transformers
# layout, RoBERTa with its prefix, 16-bit sources): the weights file must hold
# the source tensors exactly, and broken checkpoints must fail with one clear
# line and leave no output behind.
set -eu

: "${REFERENCE_PYTHON:=/usr/bin/python3}"
: "${top_builddir:=.}"
here=$(cd "$(dirname "$0")" && pwd)
generate=$here/../harness/generate
import="$top_builddir/drivers/tfenc-import"
work=$(mktemp -d "${TMPDIR:-/tmp}/tfenc-import-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
checks=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

make_checkpoint() {
  "$generate" "$2" "$REFERENCE_PYTHON" "$here/make_checkpoint.py" "$@" >/dev/null
}

# --- Successful imports, compared tensor by tensor.
make_checkpoint bert "$work/bert"
make_checkpoint roberta "$work/roberta"
make_checkpoint bert "$work/bert-f16" --dtype F16 --prefix bert. --seed 2
make_checkpoint bert "$work/bert-bf16" --dtype BF16 --seed 3
for model in bert roberta bert-f16 bert-bf16; do
  checks=$((checks + 1))
  # The job goes one directory down, so that its weights path must be relative.
  mkdir -p "$work/jobs"
  if "$import" "$work/$model" -o "$work/$model.h5" --job "$work/jobs/$model.ini" >/dev/null; then
    "$REFERENCE_PYTHON" "$here/check_import.py" "$work/$model" "$work/$model.h5" \
      "$work/jobs/$model.ini" float32 || fail "$model: content differs"
  else
    fail "$model: tfenc-import failed"
  fi
done
for dtype in float16 bfloat16; do
  checks=$((checks + 1))
  if "$import" "$work/bert" -o "$work/bert-$dtype.h5" --job "$work/bert-$dtype.ini" \
      --dtype "$dtype" >/dev/null; then
    "$REFERENCE_PYTHON" "$here/check_import.py" "$work/bert" "$work/bert-$dtype.h5" \
      "$work/bert-$dtype.ini" "$dtype" || fail "bert --dtype $dtype: content differs"
  else
    fail "bert --dtype $dtype: tfenc-import failed"
  fi
done

# --- Failures: exit status non-zero, one line on stderr naming the cause,
# and neither the output nor a temporary file left behind.
expect_error() { # NAME DIR PATTERN...
  name=$1 dir=$2
  shift 2
  checks=$((checks + 1))
  out="$work/out-$name.h5"
  job="$work/out-$name.ini"
  if "$import" "$dir" -o "$out" --job "$job" >"$work/stdout" 2>"$work/stderr"; then
    fail "$name: tfenc-import succeeded"
    return
  fi
  lines=$(wc -l <"$work/stderr")
  [ "$lines" -eq 1 ] || fail "$name: $lines lines on stderr, expected one: $(cat "$work/stderr")"
  for pattern in "$@"; do
    grep -qF -- "$pattern" "$work/stderr" || fail "$name: message lacks '$pattern': $(cat "$work/stderr")"
  done
  for leftover in "$out" "$out.tmp" "$job" "$job.tmp"; do
    [ ! -e "$leftover" ] || fail "$name: left $leftover behind"
  done
  echo "ok: $name: $(cat "$work/stderr")"
}

copy() { # SOURCE NAME: a fresh copy of a good checkpoint to break
  rm -rf "$work/$2"
  cp -r "$work/$1" "$work/$2"
  echo "$work/$2"
}

edit_json() { # FILE PYTHON-EXPRESSION-ON-d
  "$REFERENCE_PYTHON" - "$1" "$2" <<'PY'
import json, sys
path, expression = sys.argv[1:3]
d = json.load(open(path))
exec(expression)
json.dump(d, open(path, "w"))
PY
}

dir=$(copy bert gpt2)
edit_json "$dir/config.json" 'd["model_type"] = "gpt2"'
expect_error unsupported-model-type "$dir" "gpt2" "config.json" "not supported"

dir=$(copy bert silu)
edit_json "$dir/config.json" 'd["hidden_act"] = "silu"'
expect_error unsupported-activation "$dir" "silu" "config.json"

dir=$(copy bert rotary)
edit_json "$dir/config.json" 'd["position_embedding_type"] = "relative_key"'
expect_error unsupported-positions "$dir" "relative_key" "config.json"

dir=$(copy bert no-layers)
edit_json "$dir/config.json" 'del d["num_hidden_layers"]'
expect_error missing-config-key "$dir" "num_hidden_layers" "config.json"

make_checkpoint bert "$work/missing" --drop encoder.layer.1.output.dense.bias
expect_error missing-tensor "$work/missing" "encoder.layer.1.output.dense.bias" "model.safetensors"

dir=$(copy bert wide)
edit_json "$dir/config.json" 'd["intermediate_size"] = 32'
expect_error wrong-shape "$dir" "encoder.layer.0.intermediate.dense.weight" "[24, 16]" "[32, 16]"

dir=$(copy bert garbage-header)
"$REFERENCE_PYTHON" - "$dir/model.safetensors" <<'PY'
import sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
data[8:20] = b'{"oops": [1,'  # the JSON is now broken
open(path, "wb").write(data)
PY
expect_error corrupt-header "$dir" "model.safetensors" "not valid JSON"

dir=$(copy bert huge-header)
"$REFERENCE_PYTHON" - "$dir/model.safetensors" <<'PY'
import struct, sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
data[0:8] = struct.pack("<Q", 1 << 40)
open(path, "wb").write(data)
PY
expect_error header-length "$dir" "model.safetensors" "header length"

dir=$(copy bert overlap)
"$REFERENCE_PYTHON" - "$dir/model.safetensors" <<'PY'
import json, struct, sys
path = sys.argv[1]
data = open(path, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
a, b = header["embeddings.LayerNorm.weight"], header["embeddings.LayerNorm.bias"]
b["data_offsets"] = [a["data_offsets"][0] + 4, a["data_offsets"][1] + 4]
text = json.dumps(header).encode()  # offsets count from the data, so n may change
open(path, "wb").write(struct.pack("<Q", len(text)) + text + data[8 + n:])
PY
expect_error overlapping-tensors "$dir" "model.safetensors" "overlap"

dir=$(copy bert truncated)
size=$(wc -c <"$dir/model.safetensors")
truncate -s $((size - 100)) "$dir/model.safetensors"
expect_error truncated-file "$dir" "model.safetensors" "truncated"

# A pytorch_model.bin that is not what torch.save writes (pytorch_model.bin
# itself: tests/import/checkpoints.sh).
dir=$(copy bert pickle-only)
mv "$dir/model.safetensors" "$dir/pytorch_model.bin"
expect_error pytorch-bin-not-torch "$dir" "pytorch_model.bin" "not a zip archive"

dir=$(copy bert no-weights)
rm "$dir/model.safetensors"
expect_error no-weights "$dir" "no model.safetensors" "pytorch_model.bin"

# (Dense modules import in pairs: tests/import/architectures.sh.)
dir=$(copy bert layernorm-head)
edit_json "$dir/modules.json" 'd.insert(2, {"idx": 2, "name": "2", "path": "2_LayerNorm", "type": "sentence_transformers.models.LayerNorm"})'
expect_error unsupported-module "$dir" "modules.json" "sentence_transformers.models.LayerNorm"

dir=$(copy bert two-poolings)
edit_json "$dir/1_Pooling/config.json" 'd["pooling_mode_mean_sqrt_len_tokens"] = True'
expect_error concatenated-pooling "$dir" "1_Pooling/config.json" "exactly one pooling mode"

dir=$(copy bert no-prompt-pooling)
edit_json "$dir/1_Pooling/config.json" 'd["include_prompt"] = False'
expect_error pooling-without-prompt "$dir" "include_prompt"

expect_error not-a-directory "$work/nowhere" "nowhere"

# A tensor the map does not know (here JinaBERT's query norm of its
# qk-post-norm variant) would be left out silently: refused by name.
make_checkpoint bert "$work/extra" --extra encoder.layer.0.attention.self.layer_norm_q.weight
expect_error unknown-tensor "$work/extra" "encoder.layer.0.attention.self.layer_norm_q.weight" \
  "not part of tfenc's map of bert"

dir=$(copy bert electra-small)
edit_json "$dir/config.json" 'd["model_type"] = "electra"; d["embedding_size"] = 8'
expect_error electra-projection "$dir" "embedding_size 8" "config.json"

dir=$(copy bert qwen2-window)
edit_json "$dir/config.json" 'd["model_type"] = "qwen2"; d["hidden_act"] = "silu"; d["use_sliding_window"] = True'
expect_error qwen2-sliding-window "$dir" "use_sliding_window" "config.json"

dir=$(copy bert bad-prompt-name)
echo '{"prompts": {"a query": "query: "}}' >"$dir/config_sentence_transformers.json"
expect_error bad-prompt-name "$dir" "config_sentence_transformers.json" "a query"

# --- Prompts (config_sentence_transformers.json) become the job's [prompts]
# section, each text a JSON string that survives INI (spaces at the ends,
# ';', '#', quotes, non-ASCII), and default_prompt_name its [job] prompt.
checks=$((checks + 1))
dir=$(copy bert prompts)
"$REFERENCE_PYTHON" - "$dir/config_sentence_transformers.json" <<'PY'
import json, sys
json.dump({"prompts": {"query": "query: ", "passage": "passage; #1 \"q\" \u00e9 ", "empty": ""},
           "default_prompt_name": "query"}, open(sys.argv[1], "w"))
PY
if "$import" "$dir" -o "$work/prompts.h5" --job "$work/prompts.ini" >/dev/null; then
  "$REFERENCE_PYTHON" - "$dir/config_sentence_transformers.json" "$work/prompts.ini" <<'PY' || fail "prompts: job differs"
import configparser, json, sys
want = json.load(open(sys.argv[1]))
job = configparser.ConfigParser(interpolation=None, comment_prefixes=(";",),
                                 inline_comment_prefixes=None)
job.optionxform = str
job.read(sys.argv[2])
got = {name: json.loads(text) for name, text in job["prompts"].items()}
assert got == want["prompts"], (got, want["prompts"])
assert job["job"]["prompt"] == "query", job["job"].get("prompt")
print("ok: prompts:", got)
PY
else
  fail "prompts: tfenc-import failed"
fi

echo "import.sh: $((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
