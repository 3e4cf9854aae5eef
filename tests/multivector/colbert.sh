#!/bin/sh
# Multi-vector (ColBERT) output: a small random ColBERT checkpoint as
# colbert-ai saves it (bert.* + linear.weight, artifact.metadata, the real
# bert-base-uncased vocabulary), written by tests/multivector/reference.py
# with the reference vectors of colbert-ai's ColBERT.doc() and .query()
# written from its published code. tfenc-import makes the job; tfenc-batch
# encodes tests/import/sentences.txt as documents (marker [unused1],
# punctuation skipped) and ten of their beginnings as queries (marker
# [unused0], [MASK]-padded): the same kept tokens, every vector within 1e-4,
# the same MaxSim top 10 for every query. Layouts 1x1, 2x1, 1x2, 2x2 and a
# SIGKILL + resume give bitwise equal files; --status describes them (of
# unit length: the attribute unit_norm). The
# same folder with colbert-ai's default attend_to_mask_tokens = false: its
# queries' [MASK] padding is no key of attention, the vectors equal the
# reference's, and layouts 2x1, 1x2 and 2x2 give 1x1's file. A folder
# without its projection, and a masked query job through a layer that does
# not declare what it does with masked keys, are refused in one line with
# nothing written. The same model saved as PyLate does (Transformer +
# Dense) imports to the same job and file, its Dense module's weights in
# pytorch_model.bin too.
set -eu

. "$(cd "$(dirname "$0")/../.." && pwd)/tests/environment.sh"
: "${TFENC_VENV_PYTHON:=${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python}"
import="$builddir/drivers/tfenc-import"
reference="$here/reference.py"
sentences="$srcdir/tests/import/sentences.txt"
work=$(mktemp -d "${TMPDIR:-/tmp}/tfenc-colbert.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# Ten real queries: the first seven words of sentences spread over the file.
sed -n '1p;40p;90p;150p;200p;260p;320p;400p;480p;530p' "$sentences" | cut -d' ' -f1-7 \
  > "$work/queries.txt"
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$generate" "$work" "$TFENC_VENV_PYTHON" "$reference" make "$work" \
  "$sentences" "$work/queries.txt"
"$import" "$work/colbert" -o "$work/model.h5" --job "$work/job.ini" > /dev/null

# Windows of 40 documents and microbatches of 256 tokens: many of each, in
# every run below (the killed one too), so that the files can be equal.
encode() { # RANKS STAGES OUTPUT JOB: the sentences as documents
  "$mpiexec" -n "$1" "$driver" --quiet --set "job.input=$sentences" \
    --set "job.output=$work/$3" --set job.output_ids=true --set "job.pipeline_stages=$2" \
    --set job.window_documents=40 --set job.batch_tokens=256 "$work/$4"
}

encode 1 1 documents.h5 job.ini
"$driver" --quiet --set "job.input=$work/queries.txt" --set "job.output=$work/queries.h5" \
  --set job.output_ids=true --set job.multivector_mode=query "$work/job.ini"
"$python" "$reference" compare "$work/reference.h5" "$work/documents.h5" "$work/queries.h5" \
  || fail "tfenc's vectors differ from the reference's"

# The same model as a PyLate folder: the same job keys and the same file.
"$import" "$work/pylate" -o "$work/pylate.h5" --job "$work/pylate.ini" > /dev/null
grep -v '^;' "$work/job.ini" | sed 's/model\.h5/WEIGHTS/' > "$work/job.keys"
grep -v '^;' "$work/pylate.ini" | sed 's/pylate\.h5/WEIGHTS/' > "$work/pylate.keys"
if ! diff "$work/job.keys" "$work/pylate.keys" > "$work/keys.diff"; then
  fail "the PyLate folder's job differs from the ColBERT folder's: $(cat "$work/keys.diff")"
elif encode 1 1 pylate-documents.h5 pylate.ini; then
  "$python" "$reference" same "$work/documents.h5" "$work/pylate-documents.h5" \
    && echo "ok: the PyLate folder's vectors are the ColBERT folder's, bitwise" \
    || fail "the PyLate folder's vectors differ from the ColBERT folder's"
else
  fail "the PyLate folder's job failed"
fi

# PyLate's projection as sentence-transformers 2 saved Dense modules, in
# pytorch_model.bin (torch.save's zip): the same weights file, bit for bit.
cp -R "$work/pylate" "$work/pylate-bin"
"$TFENC_VENV_PYTHON" -c "import sys, torch; from safetensors.torch import load_file
torch.save(load_file(sys.argv[1] + '/model.safetensors'), sys.argv[1] + '/pytorch_model.bin')" \
  "$work/pylate-bin/1_Dense"
rm "$work/pylate-bin/1_Dense/model.safetensors"
if "$import" "$work/pylate-bin" -o "$work/pylate-bin.h5" > "$work/pylate-bin.log" 2>&1 \
    && "$python" -c "import h5py, sys
a, b = (h5py.File(p, 'r') for p in sys.argv[1:3])
names = []
a.visititems(lambda name, item: names.append(name) if isinstance(item, h5py.Dataset) else None)
# Strings (the vocabulary) by value: their bytes are references.
same = lambda x, y: x.tolist() == y.tolist() if x.dtype.kind == 'O' else x.tobytes() == y.tobytes()
sys.exit(not all(same(a[n][()], b[n][()]) for n in names))" \
      "$work/pylate.h5" "$work/pylate-bin.h5"; then
  echo "ok: PyLate's projection from pytorch_model.bin: the same weights, bitwise"
else
  fail "PyLate's projection from pytorch_model.bin: $(cat "$work/pylate-bin.log")"
fi

# RUN (encode or query) at each data_parallel:stages layout: each file
# bitwise equal to the 1x1 file BASE.
same_at_layouts() { # RUN JOB BASE LABEL LAYOUT...
  run=$1 job=$2 base=$3 label=$4
  shift 4
  for layout in "$@"; do
    replicas=${layout%:*} stages=${layout#*:}
    ranks=$((replicas * stages))
    if "$run" "$ranks" "$stages" "$label-$ranks-$stages.h5" "$job"; then
      "$python" "$reference" same "$work/$base" "$work/$label-$ranks-$stages.h5" \
        && echo "ok: $label, $ranks ranks, $stages stages: bitwise equal to 1x1" \
        || fail "$label, $ranks ranks, $stages stages: the file differs from 1x1's"
    else
      fail "$label, $ranks ranks, $stages stages: tfenc-batch failed"
    fi
  done
}
same_at_layouts encode job.ini documents.h5 layout 2:1 1:2 2:2

# SIGKILL part-way, then resume at another layout: the same file. The test
# plugin's `pause` layer (before the head, which must end the model) makes
# each microbatch take a while so that the kill lands part-way.
TFENC_PLUGIN_PATH="$TFENC_PLUGIN_PATH:$builddir/tests/plugins/.libs"
export TFENC_PLUGIN_PATH
sed 's/^\[head\]$/[pause]\ntype = pause\nmilliseconds = 100\n\n[head]/' "$work/job.ini" \
  > "$work/paused.ini"
# mpiexec itself in the background (not a function's subshell), so that
# $pid's children are the ranks: a SIGKILL of a subshell's mpiexec left
# its ranks running, holding the output, when the resume started (seen).
"$mpiexec" -n 2 "$driver" --quiet --set "job.input=$sentences" \
  --set "job.output=$work/killed.h5" --set job.output_ids=true --set job.pipeline_stages=1 \
  --set job.window_documents=40 --set job.batch_tokens=256 "$work/paused.ini" \
  > "$work/killed.out" 2>&1 &
pid=$!
kill_part_way "$pid" "$work/killed.h5" 0.3
left=$("$python" "$srcdir/tests/resume/progress.py" count "$work/killed.h5")
echo "colbert: killed with $left (finished, total, complete) in the file"
case "$left" in
  "532 532 1"|"0 0 0") fail "the kill did not land part-way ($left)" ;;
esac
if encode 1 1 killed.h5 paused.ini > "$work/resumed.out" 2>&1; then
  "$python" "$reference" same "$work/documents.h5" "$work/killed.h5" \
    && echo "ok: killed and resumed: bitwise equal to the uninterrupted run" \
    || fail "killed and resumed, the file differs"
else
  fail "the resume after SIGKILL failed: $(tail -n 1 "$work/resumed.out")"
fi

# --status says what the rows are.
"$driver" --status "$work/documents.h5" > "$work/status.txt"
grep -q "^output: vectors (multi-vector, unit length; .*) \[[0-9]* rows, width 16\], float32, document mode, marker \[unused1\], skiplist string.punctuation's tokens left out" \
  "$work/status.txt" || fail "--status does not describe the vectors: $(grep '^output' "$work/status.txt")"
# The head normalises each token's vector: the file says so (unit_norm).
grep -q "^rows: unit length (L2 norm 1, attribute unit_norm = 1)" "$work/status.txt" \
  || fail "--status does not say the vectors have unit length: $(grep '^rows' "$work/status.txt")"
"$driver" --status "$work/queries.h5" | grep -q "^output: vectors .*\[240 rows, width 16\], float32, query mode, marker \[unused0\], skiplist (none.*, \[MASK\] padding attended to" \
  || fail "--status does not describe the query vectors"

# --dry-run counts the rows the skiplist keeps (the 1x1 file's).
rows=$("$python" -c "import h5py, sys; print(h5py.File(sys.argv[1], 'r')['vectors'].shape[0])" \
  "$work/documents.h5")
"$driver" --dry-run --set "job.input=$sentences" --set "job.output=$work/dry.h5" \
  --set job.window_documents=40 --set job.batch_tokens=256 "$work/job.ini" > "$work/dry-run.txt"
grep -qF "(vectors [$rows, 16] of the model's multi-vector head, float32, and offsets [533])" \
  "$work/dry-run.txt" || fail "--dry-run does not describe the vectors: $(grep '^output' "$work/dry-run.txt")"

# Bad input: one line, a non-zero exit, nothing written.
expect_error() { # NAME OUTPUT PATTERN COMMAND...
  name=$1 output=$2 pattern=$3
  shift 3
  if "$@" > "$work/stdout" 2> "$work/stderr"; then
    fail "$name: succeeded"
    return
  fi
  lines=$(wc -l < "$work/stderr")
  if [ "$lines" -ne 1 ]; then
    fail "$name: $lines lines on stderr: $(cat "$work/stderr")"
  elif ! grep -qF -- "$pattern" "$work/stderr"; then
    fail "$name: the message lacks '$pattern': $(cat "$work/stderr")"
  elif [ -e "$output" ] || [ -e "$output.tmp" ]; then
    fail "$name: left $output behind"
  else
    echo "ok: $name: $(cat "$work/stderr")"
  fi
}
expect_error no-projection "$work/broken.h5" "tensor 'linear.weight' [dim, 32] not found" \
  "$import" "$work/no-projection" -o "$work/broken.h5" --job "$work/broken.ini"
cp -R "$work/pylate" "$work/pylate-no-projection"
rm "$work/pylate-no-projection/1_Dense/model.safetensors"
expect_error pylate-no-projection "$work/broken.h5" "a PyLate model without its projection" \
  "$import" "$work/pylate-no-projection" -o "$work/broken.h5" --job "$work/broken.ini"

# colbert-ai's default, attend_to_mask_tokens = false (a folder whose
# metadata does not name it): a query's [MASK] padding is left out of the
# keys of attention and still gets its vectors. Microbatches of two
# queries, so that the keys of several sequences travel between stages.
"$import" "$work/colbert-default" -o "$work/default.h5" --job "$work/default.ini" > /dev/null
grep -q '^attend_to_mask_tokens = false$' "$work/default.ini" \
  || fail "tfenc-import did not write colbert-ai's default attend_to_mask_tokens = false"
query() { # RANKS STAGES OUTPUT JOB
  "$mpiexec" -n "$1" "$driver" --quiet --set "job.input=$work/queries.txt" \
    --set "job.output=$work/$3" --set job.output_ids=true \
    --set job.multivector_mode=query --set "job.pipeline_stages=$2" \
    --set job.batch_tokens=48 "$work/$4"
}
if query 1 1 masked.h5 default.ini; then
  "$python" "$reference" compare "$work/reference.h5" "$work/documents.h5" "$work/masked.h5" \
    masked_queries || fail "queries with masked padding differ from the reference's"
  same_at_layouts query default.ini masked.h5 masked-queries 2:1 1:2 2:2
  "$driver" --status "$work/masked.h5" | grep -q "^output: vectors .*query mode.*, \[MASK\] padding not attended to" \
    || fail "--status does not say that the queries' padding was not attended to"
else
  fail "the query job with attend_to_mask_tokens = false failed"
fi
# The test plugin's `pause` layer (ABI 1.4, key_masking left undeclared)
# could mix the padding back in: such a job is refused before it starts.
sed 's/^\[head\]$/[pause]\ntype = pause\nmilliseconds = 1\n\n[head]/' "$work/default.ini" \
  > "$work/default-paused.ini"
expect_error undeclared-key-masking "$work/undeclared.h5" \
  "[pause]: layer pause (pause): [job] attend_to_mask_tokens = false leaves" \
  "$driver" --quiet --set "job.input=$work/queries.txt" --set "job.output=$work/undeclared.h5" \
  --set job.multivector_mode=query "$work/default-paused.ini"

# Markers the stored tokenizer lacks (issue 46, item 11): PyLate's default
# prefixes "[Q] " and "[D] " are added tokens of its tokenizer.json; a
# folder whose tokenizer lacks them was imported, exit 0, and every job of
# it failed. tfenc-import refuses it naming the file and the marker; a
# tokenizer.json that has them (here in the places of [unused0] and
# [unused1], so that the embeddings keep their size) imports.
for case in vocab json json-with-markers colbert no-tokenizer; do
  folder="$work/markers-$case"
  rm -rf "$folder"
  if [ "$case" = colbert ]; then cp -R "$work/colbert" "$folder"; else cp -R "$work/pylate" "$folder"; fi
  "$TFENC_VENV_PYTHON" - "$folder" "$case" <<'PY'
import json, os, sys
folder, case = sys.argv[1:3]
if case == "colbert":
    path = os.path.join(folder, "artifact.metadata")
    metadata = json.load(open(path))
    metadata["doc_token_id"] = "[D]"
    json.dump(metadata, open(path, "w"))
    sys.exit(0)
path = os.path.join(folder, "config_sentence_transformers.json")
config = json.load(open(path))
config["query_prefix"], config["document_prefix"] = "[Q] ", "[D] "
json.dump(config, open(path, "w"))
vocab = os.path.join(folder, "vocab.txt")
if case.startswith("json"):
    import transformers
    if case == "json-with-markers":
        tokens = open(vocab, encoding="utf-8").read().split("\n")
        tokens[tokens.index("[unused0]")], tokens[tokens.index("[unused1]")] = "[Q]", "[D]"
        open(vocab, "w", encoding="utf-8").write("\n".join(tokens))
    tokenizer = transformers.BertTokenizerFast(vocab, do_lower_case=True)
    if case == "json-with-markers":
        tokenizer.add_tokens(["[Q]", "[D]"])
        assert len(tokenizer) == tokenizer.vocab_size
    tokenizer.backend_tokenizer.save(os.path.join(folder, "tokenizer.json"))
if case in ("json", "json-with-markers", "no-tokenizer"):
    os.remove(vocab)
PY
  case $case in
  vocab) expect_error "PyLate markers not in vocab.txt" "$work/broken.h5" \
    "markers-vocab/vocab.txt: the query marker '[Q]' (query_prefix of $folder/config_sentence_transformers.json) is not a token of the tokenizer" \
    "$import" "$folder" -o "$work/broken.h5" --job "$work/broken.ini" ;;
  json) expect_error "PyLate markers not in tokenizer.json" "$work/broken.h5" \
    "markers-json/tokenizer.json: the query marker '[Q]' (query_prefix of $folder/config_sentence_transformers.json) is not a token of the tokenizer" \
    "$import" "$folder" -o "$work/broken.h5" --job "$work/broken.ini" ;;
  colbert) expect_error "ColBERT document marker not in vocab.txt" "$work/broken.h5" \
    "markers-colbert/vocab.txt: the document marker '[D]' (doc_token_id of $folder/artifact.metadata) is not a token of the tokenizer" \
    "$import" "$folder" -o "$work/broken.h5" --job "$work/broken.ini" ;;
  no-tokenizer) expect_error "PyLate folder without a tokenizer" "$work/broken.h5" \
    "markers-no-tokenizer: the query marker '[Q]' (query_prefix of $folder/config_sentence_transformers.json) needs a tokenizer, but the folder has no tokenizer.json or vocab.txt" \
    "$import" "$folder" -o "$work/broken.h5" --job "$work/broken.ini" ;;
  json-with-markers)
    if "$import" "$folder" -o "$work/markers.h5" --job "$work/markers.ini" > /dev/null 2> "$work/stderr" \
        && "$driver" --quiet --set "job.input=$work/queries.txt" --set "job.output=$work/markers-queries.h5" \
          --set job.multivector_mode=query "$work/markers.ini" 2>> "$work/stderr"; then
      echo "ok: a tokenizer.json with the markers [Q] and [D] imports, and its query job runs"
    else
      fail "a tokenizer.json with the markers [Q] and [D]: $(head -n 2 "$work/stderr")"
    fi ;;
  esac
done

echo "colbert.sh: $failures failed"
[ "$failures" -eq 0 ]
