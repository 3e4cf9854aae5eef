#!/bin/sh
# Table-driven test of bad jobs and inputs: each must end tfenc-batch with
# exactly one line on stderr that names the problem, a non-zero exit, within
# the time limit, and must not leave an output file that looks complete.
set -u
: "${top_builddir:=.}" "${top_srcdir:=.}" "${REFERENCE_PYTHON:=/usr/bin/python3}"
batch="$top_builddir/drivers/tfenc-batch"
work="$top_builddir/tests/data/generated/bad-inputs"
rm -rf "$work"
mkdir -p "$work"
cd "$work" || exit 1
batch=$(cd "$OLDPWD" && cd "$(dirname "$batch")" && pwd)/tfenc-batch
srcdir=$(cd "$OLDPWD" && cd "$top_srcdir" && pwd)

# A good model and input to break one thing at a time.
"$REFERENCE_PYTHON" "$srcdir/tests/reference/make_reference.py" postnorm_relu good >/dev/null || exit 1
"$REFERENCE_PYTHON" - <<'PY' || exit 1
import h5py, numpy as np
src = h5py.File("good/model.h5", "r")
# Weights with one NaN, and weights that are not HDF5 at all.
with h5py.File("nan.h5", "w") as dst:
    for name, obj in src.items():
        src.copy(obj, dst, name)
    dst["encoder/2/ffn/in_weight"][0, 3] = np.nan
open("junk.h5", "wb").write(b"this is not an HDF5 file\n" * 10)
# Token ids beyond the vocabulary, and an empty corpus.
with h5py.File("big-ids.h5", "w") as f:
    f["tokens"] = np.array([1, 2, 5000, 3], dtype=np.int32)
    f["offsets"] = np.array([0, 2, 4], dtype=np.int64)
with h5py.File("empty-ids.h5", "w") as f:
    f["tokens"] = np.zeros(0, dtype=np.int32)
    f["offsets"] = np.array([0], dtype=np.int64)
# Text corpora for the tokenizer paths.
open("text.txt", "w").write("hello world\n")
open("bad-utf8.txt", "wb").write(b"fine line\nbroken \xff\xfe line\n")
open("empty.txt", "w").write("")
open("records.jsonl", "w").write('{"text": "one"}\n{"body": "two"}\n')
open("vocab.txt", "w").write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "world", "fine", "line"]) + "\n")
PY
cp good/job.ini base.ini
sed -i 's#^input = .*#input = good/input.h5#; s#^output = .*#output = out.h5#; s#^weights = .*#weights = good/model.h5#' base.ini

passed=0
failed=0
# case NAME EXPECTED-SUBSTRING JOB-TRANSFORM [tfenc-batch arguments...]
# JOB-TRANSFORM is a sed script applied to base.ini to make job.ini ("" = none).
case_() {
  name=$1 expected=$2 transform=$3
  shift 3
  rm -f out.h5 job.ini
  sed "$transform" base.ini > job.ini
  start=$(date +%s)
  timeout 60 "$batch" --quiet "$@" > stdout.txt 2> stderr.txt
  code=$?
  elapsed=$(( $(date +%s) - start ))
  lines=$(wc -l < stderr.txt)
  why=""
  [ "$code" -ne 0 ] || why="exit status 0"
  [ "$code" -ne 124 ] || why="no exit within 60 s"
  [ "$code" -lt 128 ] || why="killed by a signal ($code)"
  [ "$lines" -eq 1 ] || why="$why; $lines lines on stderr"
  grep -qF -- "$expected" stderr.txt || why="$why; message lacks '$expected'"
  if [ -f out.h5 ] && "$REFERENCE_PYTHON" -c 'import h5py,sys; sys.exit(0 if h5py.File("out.h5","r").attrs.get("complete", 0) == 1 else 1)' 2>/dev/null; then
    why="$why; out.h5 is marked complete"
  fi
  if [ -z "$why" ]; then
    passed=$((passed + 1))
    echo "ok   $name (${elapsed}s): $(cat stderr.txt)"
  else
    failed=$((failed + 1))
    echo "FAIL $name:$why"
    sed 's/^/     stderr: /' stderr.txt
  fi
}

case_ "missing job file"        "nope.ini: cannot open job file: No such file" "" nope.ini
case_ "unknown option"          "unknown option '--frobnicate'" "" --frobnicate job.ini
case_ "unknown [job] key"       "job.ini:8: [job] unknown key 'batch_size'" 's/^batch_tokens = /batch_size = /' job.ini
case_ "wrong type"              "[job] batch_tokens = 'lots': expected an integer" 's/^batch_tokens = .*/batch_tokens = lots/' job.ini
case_ "bad choice"              "output_dtype = 'float64': expected one of float32, float16, bfloat16" 's/^\[job\]/[job]\noutput_dtype = float64/' job.ini
case_ "duplicate key"           "key 'output' is set twice" 's/^\[job\]/[job]\noutput = a.h5/' job.ini
case_ "missing input key"       "[job] requires key 'input'" '/^input = /d' job.ini
case_ "missing weights key"     "[model] requires key 'weights'" '/^weights = /d' job.ini
case_ "missing input file"      "nothere.h5" 's#^input = .*#input = nothere.h5#' job.ini
case_ "missing weights file"    "weights good/absent.h5: cannot open" 's#^weights = .*#weights = good/absent.h5#' job.ini
case_ "weights not HDF5"        "weights junk.h5: not an HDF5 file" 's#^weights = .*#weights = junk.h5#' job.ini
case_ "NaN in weights"          "dataset /encoder/2/ffn/in_weight holds a non-finite value" 's#^weights = .*#weights = nan.h5#' job.ini
case_ "d_model disagrees"       "expected shape [1000, 32], found [1000, 64]" 's/^d_model = .*/d_model = 32/' job.ini
case_ "vocab_size disagrees"    "dataset /embeddings/token_embeddings: expected shape [999, 64]" 's/^vocab_size = .*/vocab_size = 999/' job.ini
case_ "id out of vocabulary"    "token id 5000 is outside the vocabulary" 's#^input = .*#input = big-ids.h5#' job.ini
case_ "empty corpus"            "the corpus holds no documents" 's#^input = .*#input = empty-ids.h5#' job.ini
case_ "unwritable output"       "/nonexistent-dir/out.h5" 's#^output = .*#output = /nonexistent-dir/out.h5#' job.ini
case_ "output is the input"     "[job] output: is the same file as the input" 's#^output = .*#output = good/input.h5#' job.ini
case_ "unknown layer type"      "no plugin provides layer type 'transformer_magic'" 's/^type = mha/type = transformer_magic/' job.ini
case_ "unknown plugin key"      "unknown key 'dropout' (not a parameter of layer type mha)" 's/^n_heads = 4/n_heads = 4\ndropout = 0.1/' job.ini
case_ "heads do not divide d"   "n_heads" 's/^n_heads = 4/n_heads = 5/' job.ini
case_ "section without type"    "section [extra] has no 'type' key" '$a [extra]\nfoo = 1' job.ini
case_ "orphan sublayer"         "no block (a section with 'repeat') precedes it" '$a [nowhere.ffn]\ntype = ffn' job.ini
case_ "max_seq_len too long"    "[job] max_seq_len: must be in 2..[model] max_positions" 's/^max_seq_len = .*/max_seq_len = 4096/' job.ini
case_ "batch smaller than doc"  "[job] batch_tokens: must be at least max_seq_len" 's/^batch_tokens = .*/batch_tokens = 16/' job.ini
case_ "pipeline_stages zero"    "[job] pipeline_stages: must be >= 1" 's/^\[job\]/[job]\npipeline_stages = 0/' job.ini
case_ "pooled from token model" "output_kind = pooled but the model does not pool" 's/^\[job\]/[job]\noutput_kind = pooled/' job.ini
case_ "malformed --set"         "--set 'batch_tokens=5': expected section.key=value" "" --set batch_tokens=5 job.ini
case_ "text without vocabulary" "text input needs a vocabulary" 's#^input = .*#input = text.txt#; s#^input_format = .*#input_format = text#' job.ini
case_ "invalid UTF-8 refused"   "bad-utf8.txt: document 1 (0-based): tokenizer: invalid UTF-8 at byte offset 7" 's#^input = .*#input = bad-utf8.txt#; s#^input_format = .*#input_format = text\ninvalid_utf8 = error#; $a [tokenizer]\nvocab = vocab.txt' job.ini
case_ "empty text corpus"       "the corpus holds no documents" 's#^input = .*#input = empty.txt#; s#^input_format = .*#input_format = text#; $a [tokenizer]\nvocab = vocab.txt' job.ini
case_ "JSON field missing"      "records.jsonl: line 2: text field 'text' is missing" 's#^input = .*#input = records.jsonl#; s#^input_format = .*#input_format = jsonl#; $a [tokenizer]\nvocab = vocab.txt' job.ini
case_ "truncation refused"      "more than max_seq_len" 's/^max_seq_len = .*/max_seq_len = 8\ntruncation = false/' job.ini
case_ "tokenizer with ids"      "[tokenizer] is not used: the input holds token ids" '$a [tokenizer]\nvocab = vocab.txt' job.ini

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
