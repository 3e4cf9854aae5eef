#!/bin/sh
# Hostile and careless inputs beyond tfenc-batch's job keys
# (those are tests/bad_inputs/*.sh's): every file tfenc-import and
# `tfenc-batch --status` open, sizes read from a model's files, job files
# the importer writes, output files whose datasets contradict their names,
# plugins that crash while loading, and signals during start-up.
#
# Each refusal must be one line of the driver's own on stderr that matches
# a pattern, a non-zero exit, within 60 s (a hang fails instead of
# blocking), never a crash.
set -u
: "${top_builddir:=.}" "${top_srcdir:=.}" "${REFERENCE_PYTHON:=/usr/bin/python3}"
: "${MPIEXEC:=mpiexec}"
work="$top_builddir/tests/data/generated/careless-inputs"
umount "$work/small-shm" 2>/dev/null # left by a run that was killed (item 6)
rm -rf "$work"
mkdir -p "$work"
cd "$work" || exit 1
builddir=$(cd "$OLDPWD" && cd "$top_builddir" && pwd)
srcdir=$(cd "$OLDPWD" && cd "$top_srcdir" && pwd)
batch="$builddir/drivers/tfenc-batch"
import="$builddir/drivers/tfenc-import"
python=$REFERENCE_PYTHON

"$srcdir/tests/harness/generate" checkpoint \
  "$python" "$srcdir/tests/import/make_checkpoint.py" bert checkpoint >/dev/null || exit 1
mkfifo a-fifo
mkdir a-directory

passed=0
failed=0
report() { # NAME WHY
  if [ -z "$2" ]; then
    passed=$((passed + 1))
    echo "ok   $1: $(head -c 300 stderr.txt | tr '\n' ' ')"
  else
    failed=$((failed + 1))
    echo "FAIL $1:$2"
    sed 's/^/     stderr: /' stderr.txt | head -n 20
  fi
}

# one_line PROGRAM PATTERN: the checks every refusal gets, from $code and
# stderr.txt; sets why.
one_line() {
  why=""
  [ "$code" -ne 0 ] || why="exit status 0"
  [ "$code" -ne 124 ] || why="no exit within 60 s"
  [ "$code" -lt 128 ] || why="killed by a signal ($code)"
  lines=$(wc -l < stderr.txt)
  [ "$lines" -eq 1 ] || why="$why; $lines lines on stderr"
  grep -qE -- "^$1: .*$2" stderr.txt || why="$why; message does not match '$2'"
}

# A copy of the good checkpoint to break: copy NAME.
copy() { rm -rf "$1"; cp -r checkpoint "$1"; }

# import_error NAME PATTERN DIR: tfenc-import refuses DIR in one line.
import_error() {
  rm -f imported.h5
  timeout -k 5 60 "$import" "$3" -o imported.h5 --job imported.ini > stdout.txt 2> stderr.txt < /dev/null
  code=$?
  one_line tfenc-import "$2"
  [ ! -e imported.h5 ] || why="$why; imported.h5 was written"
  report "$1 [import]" "$why"
}

# status_error NAME PATTERN FILE: tfenc-batch --status refuses FILE in one line.
status_error() {
  timeout -k 5 60 "$batch" --status "$3" > stdout.txt 2> stderr.txt < /dev/null
  code=$?
  one_line tfenc-batch "$2"
  report "$1 [--status]" "$why"
}

# --- item 5: every file tfenc-import reads, replaced by a FIFO (a reader
# would wait for a writer), a directory, /dev/zero (never ends) or a link to
# one of them; an optional file in such a state is refused, not skipped.
for file in config.json model.safetensors vocab.txt tokenizer.json tokenizer_config.json \
    special_tokens_map.json sentence_bert_config.json modules.json 1_Pooling/config.json \
    config_sentence_transformers.json; do
  for kind in fifo directory zero fifo-link; do
    copy broken
    rm -f "broken/$file"
    case $kind in
    fifo) mkfifo "broken/$file"; what="is a FIFO or pipe" ;;
    directory) mkdir "broken/$file"; what="is a directory" ;;
    zero) ln -s /dev/zero "broken/$file"; what="is a character device" ;;
    fifo-link) ln -s "$PWD/a-fifo" "broken/$file"; what="is a FIFO or pipe" ;;
    esac
    import_error "$file is $kind" "broken/$file: $what" broken
  done
done
status_error "output is a FIFO" "--status a-fifo: is a FIFO or pipe" a-fifo
status_error "output is a directory" "--status a-directory: is a directory" a-directory
status_error "output is /dev/zero" "--status /dev/zero: is a character device" /dev/zero
ln -s a-fifo fifo-link.h5
status_error "output is a link to a FIFO" "--status fifo-link.h5: is a FIFO or pipe" fifo-link.h5

# --- item 10: what tfenc-import writes, tfenc-batch loads: a 340-character
# prompt and an output path of 300 characters.
copy prompt
"$python" - <<'PY' || exit 1
import json
prompt = "Represent this sentence for searching relevant passages, " * 6
assert len(prompt) >= 340
json.dump({"prompts": {"query": prompt[:340], "passage": ""}, "default_prompt_name": "query"},
          open("prompt/config_sentence_transformers.json", "w"))
PY
part=$(printf 'long-directory-name-%.0s' 1 2 3 4 5)
long=$part/$part/$part
mkdir -p "$long"
timeout -k 5 60 "$import" prompt -o "$PWD/$long/model.h5" --job "$long/job.ini" > stdout.txt 2> stderr.txt
code=$?
why=""
[ "$code" -eq 0 ] || why="tfenc-import exit status $code"
longest=$(awk '{ if (length($0) > n) n = length($0) } END { print n + 0 }' "$long/job.ini" 2>/dev/null)
[ "${longest:-0}" -gt 300 ] || why="$why; the job file's longest line has ${longest:-0} characters, expected more than 300"
if [ -z "$why" ]; then
  printf 'hello world\n' > "$long/corpus.txt"
  (cd "$long" && timeout -k 5 60 "$batch" --quiet --dry-run job.ini) > stdout.txt 2> stderr.txt
  code=$?
  [ "$code" -eq 0 ] || why="tfenc-batch --dry-run on the imported job: exit status $code"
fi
report "imported job with a 340-character prompt and a long path loads" "$why"

# --- item 7: a token id of 2147483647 in tokenizer.json (its size, id + 1,
# overflowed an int and the check against the model's vocab_size was
# skipped): refused when the tokenizer is read, by tfenc-import and by a job.
copy huge-id
"$python" - <<'PY' || exit 1
import json
tokens = [line.rstrip("\n") for line in open("huge-id/vocab.txt", encoding="utf-8")]
vocab = {token: i for i, token in enumerate(tokens)}
vocab["hugeid"] = 2147483647
json.dump({"version": "1.0", "added_tokens": [], "normalizer": None,
           "pre_tokenizer": {"type": "BertPreTokenizer"}, "post_processor": None,
           "decoder": None,
           "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                     "max_input_chars_per_word": 100, "vocab": vocab}},
          open("huge-id/tokenizer.json", "w"))
PY
import_error "tokenizer.json id 2147483647" "huge-id/tokenizer.json: .*id 2147483647 is outside 0..2147483646" huge-id
# The same file named by a job, whose model imported without it.
rm -f good.h5 good.ini
"$import" checkpoint -o good.h5 --job good.ini > /dev/null 2>&1 || exit 1
printf 'hello world\n' > corpus.txt
timeout -k 5 60 "$batch" --quiet --set tokenizer.json=huge-id/tokenizer.json --set job.output=huge.h5 \
  good.ini > stdout.txt 2> stderr.txt < /dev/null
code=$?
one_line tfenc-batch "huge-id/tokenizer.json: .*id 2147483647 is outside 0..2147483646"
[ ! -e huge.h5 ] || why="$why; huge.h5 was written"
report "[tokenizer] json with id 2147483647 [batch]" "$why"

# --- item 8: every size in config.json bounded before it sizes anything
# (num_hidden_layers = 1e9 overflowed an int, 1e7 asked for 50 GB), the
# message naming the key.
for pair in num_hidden_layers=1e9 num_hidden_layers=1e7 num_hidden_layers=5000 \
    hidden_size=1e9 hidden_size=131072 num_attention_heads=2147483648 \
    intermediate_size=1e12 intermediate_size=4194304 vocab_size=1e9 vocab_size=2147483647 \
    max_position_embeddings=1e30 max_position_embeddings=33554432 type_vocab_size=1e9 \
    pad_token_id=2147483647; do
  key=${pair%%=*} value=${pair#*=}
  copy big-size
  "$python" - "$key" "$value" <<'PY' || exit 1
import json, sys
config = json.load(open("big-size/config.json"))
config[sys.argv[1]] = float(sys.argv[2]) if "e" in sys.argv[2] else int(sys.argv[2])
json.dump(config, open("big-size/config.json", "w"))
PY
  import_error "config.json $key = $value" "big-size/config.json: key '$key' = [0-9.e+]+ is out of range \(expected an integer in [0-9]+\.\.[0-9]+\)" big-size
done

# --- item 11: --status checks types and shapes against the attributes: it
# said "complete, 50 of 50" for each of these. From one complete output:
"$python" - <<'PY' || exit 1
import json
json.dump({"version": "1.0", "added_tokens": [], "normalizer": None,
           "pre_tokenizer": {"type": "BertPreTokenizer"}, "post_processor": None, "decoder": None,
           "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                     "max_input_chars_per_word": 100,
                     "vocab": {t.rstrip("\n"): i for i, t in enumerate(open("checkpoint/vocab.txt"))}}},
          open("no-specials.json", "w"))
open("fifty.txt", "w").write("hello world\n" * 50)
PY
"$batch" --quiet --set job.input=fifty.txt --set job.output=complete.h5 good.ini > /dev/null 2>&1 \
  || { echo "FAIL: cannot write complete.h5"; exit 1; }
"$python" - <<'PY' || exit 1
import shutil
import h5py, numpy as np
def variant(name, change):
    shutil.copy("complete.h5", name)
    with h5py.File(name, "r+") as f:
        change(f)
def int8_rows(f):
    del f["embeddings"]
    f["embeddings"] = np.array([1, 2, 3], dtype=np.int8)
def wide_rows(f):
    rows = f["embeddings"][:]
    del f["embeddings"]
    f["embeddings"] = np.concatenate([rows, rows], axis=1)
def empty_document(f):
    f["lengths"][7] = 0
def unwritten_document(f):
    f["lengths"][9] = -1
def short_lengths(f):
    lengths = f["lengths"][:]
    del f["lengths"]
    f["lengths"] = lengths[:40]
def array_complete(f):
    f.attrs["complete"] = np.array([1, 1, 1], dtype=np.int32)
def float_complete(f):
    f.attrs["complete"] = 1.0
def two_complete(f):
    f.attrs["complete"] = np.int32(2)
for change in (int8_rows, wide_rows, empty_document, unwritten_document, short_lengths,
               array_complete, float_complete, two_complete):
    variant(change.__name__ + ".h5", change)
PY
status_error "embeddings of 3 int8" \
  "int8_rows.h5: inconsistent: dataset 'embeddings' holds \[3\] int8 values, expected \[n_documents 50, d_model 16\] floating-point" int8_rows.h5
status_error "embeddings twice as wide" \
  "wide_rows.h5: inconsistent: dataset 'embeddings' holds \[50, 32\] float32 values" wide_rows.h5
status_error "a finished document of length 0" \
  "empty_document.h5: inconsistent: document 7 has length 0" empty_document.h5
status_error "complete with a document unwritten" \
  "unwritten_document.h5: inconsistent: complete = 1 but 1 of 50 documents are not written" unwritten_document.h5
status_error "lengths shorter than n_documents" \
  "short_lengths.h5: inconsistent: dataset 'lengths' holds \[40\] int32 values, expected \[n_documents 50\]" short_lengths.h5
status_error "complete is an array" \
  "array_complete.h5: inconsistent: attribute 'complete' is \[3\] of int32, expected one integer" array_complete.h5
status_error "complete is a float" \
  "float_complete.h5: inconsistent: attribute 'complete' is a scalar of float64" float_complete.h5
status_error "complete is 2" "two_complete.h5: inconsistent: attribute 'complete' is 2, expected 0 or 1" two_complete.h5
# Resuming onto a file whose attributes are arrays: read into one value,
# they were written past it (a stack overflow) and the first element
# matched, so the job appended to the file.
"$python" - <<'PY' || exit 1
import shutil
import h5py, numpy as np
for name, value in (("n_documents", np.array([50, 50, 50], dtype=np.int64)),
                    ("job_settings", None)):
    path = "array_%s.h5" % name
    shutil.copy("complete.h5", path)
    with h5py.File(path, "r+") as f:
        f.attrs["complete"] = np.int32(0)
        if value is None:
            value = np.array([f.attrs[name]] * 3, dtype=h5py.string_dtype())
        f.attrs[name] = value
PY
for name in n_documents job_settings; do
  timeout -k 5 60 "$batch" --quiet --set job.input=fifty.txt --set job.output=array_$name.h5 \
    good.ini > stdout.txt 2> stderr.txt < /dev/null
  code=$?
  one_line tfenc-batch "array_$name.h5: .*attribute '$name' is an array of 3 values, not one"
  report "resume onto an array '$name' [batch]" "$why"
done
# ... while the file they came from is complete.
timeout -k 5 60 "$batch" --status complete.h5 > stdout.txt 2> stderr.txt
code=$?
why=""
[ "$code" -eq 0 ] || why="exit status $code"
grep -q "^documents: 50 of 50 finished" stdout.txt || why="$why; no '50 of 50 finished' line"
report "the complete file itself [--status]" "$why"

# A text document of no tokens (a tokenizer without special tokens and an
# empty line) is refused as an HDF5 document of no tokens is; it reached the
# pooling layer, which said "forward set rows from 2 to 3".
printf 'hello\n\nworld\n' > empty-line.txt
rm -f empty-line.h5
timeout -k 5 60 "$batch" --quiet --set tokenizer.json=no-specials.json --set job.input=empty-line.txt \
  --set job.output=empty-line.h5 good.ini > stdout.txt 2> stderr.txt < /dev/null
code=$?
one_line tfenc-batch "empty-line.txt: document 1 has no tokens \(an encoder needs at least one\)"
report "text document of no tokens [batch]" "$why"

# batch_error PATTERN RANKS ARGS...: tfenc-batch (alone, or under mpiexec
# at RANKS > 1) refuses in one line; sets why. SIGKILL 5 s after the
# SIGTERM of the 60 s timeout: a rank blocked in open() of a FIFO never
# exits on SIGTERM alone.
batch_error() {
  pattern=$1 ranks=$2
  shift 2
  if [ "$ranks" -eq 1 ]; then
    timeout -k 5 60 "$batch" --quiet "$@" > stdout.txt 2> raw-stderr.txt < /dev/null
  else
    timeout -k 5 60 $MPIEXEC -n "$ranks" "$batch" --quiet "$@" > stdout.txt 2> raw-stderr.txt < /dev/null
  fi
  code=$?
  awk '/^-----+$/ { framed = !framed; next } !framed && !/^\[[^]]*\] / { print }' raw-stderr.txt > stderr.txt
  one_line tfenc-batch "$pattern"
}

# --- issue 46, item 4: [job] output_ranges is a file the job reads, like
# any other: the output may not be it (an earlier int8 output, as
# docs/output.md suggests, was overwritten with resume = false, exit 0),
# and a FIFO, a directory or a device there is refused, never waited on.
"$python" -c 'open("three-hundred.txt", "w").write("hello world\n" * 300)'
"$batch" --quiet --set job.input=three-hundred.txt --set job.output=earlier-int8.h5 \
  --set job.output_dtype=int8 good.ini > /dev/null 2>&1 || { echo "FAIL: cannot write earlier-int8.h5"; exit 1; }
cp earlier-int8.h5 earlier-int8.copy
for ranks in 1 2; do
  batch_error \
    "earlier-int8.h5: the output is the same file as the quantization ranges \(\[job\] output_ranges\) [^ ]*earlier-int8.h5; refusing to overwrite an input" \
    "$ranks" --set job.input=fifty.txt --set job.output=earlier-int8.h5 --set job.output_dtype=int8 \
    --set job.output_ranges=earlier-int8.h5 --set job.resume=false good.ini
  cmp -s earlier-int8.h5 earlier-int8.copy || why="$why; earlier-int8.h5 was changed"
  report "output is the output_ranges file [$ranks]" "$why"
done
ln -sf a-fifo fifo-ranges.npy
for ranges in a-fifo fifo-ranges.npy a-directory /dev/zero; do
  case $ranges in
  a-directory) what="is a directory" ;;
  /dev/zero) what="is a character device" ;;
  *) what="is a FIFO or pipe" ;;
  esac
  rm -f ranges-out.h5
  batch_error "good.ini: \[job\] output_ranges [^ ]*$ranges: $what" 1 \
    --set job.input=fifty.txt --set job.output=ranges-out.h5 --set job.output_dtype=int8 \
    --set job.output_ranges="$ranges" good.ini
  [ ! -e ranges-out.h5 ] || why="$why; ranges-out.h5 was written"
  report "output_ranges is $ranges [1]" "$why"
done

# --- issue 46, items 9 and 10: a scores model (good.ini with a classifier
# head for its pooling). A compact output_dtype asked for ranges of
# d_model values, then called the scores "per-token rows"; float16 wrote
# float32 scores without a word; duplicate keys in head.labels were stored
# as given.
"$python" - <<'PY' || exit 1
import shutil
import h5py, numpy as np
shutil.copy("good.h5", "scores.h5")
rng = np.random.default_rng(1)
with h5py.File("scores.h5", "r+") as f:
    f["head/dense_weight"] = (0.1 * rng.standard_normal((16, 16))).astype(np.float32)
    f["head/dense_bias"] = np.zeros(16, np.float32)
    f["head/out_weight"] = (0.1 * rng.standard_normal((2, 16))).astype(np.float32)
    f["head/out_bias"] = np.zeros(2, np.float32)
text = open("good.ini").read().replace("weights = good.h5", "weights = scores.h5")
text = text[:text.index("[pooling]")] + '[head]\ntype = classifier\nlabels = {"0": "no", "1": "yes"}\n'
open("scores.ini", "w").write(text)
PY
for dtype in int8 uint8 binary ubinary float16 bfloat16; do
  for ranks in 1 2; do
    rm -f scores-out.h5
    batch_error "scores.ini: \[job\] output_dtype: $dtype cannot apply: the model ends in a head that writes scores, which are written as float32" \
      "$ranks" --set job.input=three-hundred.txt --set job.output=scores-out.h5 \
      --set job.output_dtype=$dtype scores.ini
    [ ! -e scores-out.h5 ] || why="$why; scores-out.h5 was written"
    report "output_dtype = $dtype on a scores model [$ranks]" "$why"
  done
done
batch_error "scores.ini: \[job\] output_dtype: int8 cannot apply: the model ends in a head that writes scores" 1 \
  --set job.input=three-hundred.txt --set job.output=scores-out.h5 --set job.output_dtype=int8 \
  --set job.output_ranges=earlier-int8.h5 scores.ini
report "output_dtype = int8 with output_ranges on a scores model [1]" "$why"
batch_error "layer head \(classifier\): labels \(id2label\) names label \"0\" twice" 1 \
  --set job.input=fifty.txt --set job.output=scores-out.h5 \
  --set 'head.labels={"0": "no", "0": "maybe", "1": "yes"}' scores.ini
[ ! -e scores-out.h5 ] || why="$why; scores-out.h5 was written"
report "head.labels names a label twice [1]" "$why"
# The same rule holds a file's id2label (tfenc-batch --status): a scores
# output whose attribute names a label twice.
rm -f scores-out.h5
"$batch" --quiet --set job.input=fifty.txt --set job.output=scores-out.h5 scores.ini > /dev/null 2>&1 \
  || { echo "FAIL: cannot write scores-out.h5"; exit 1; }
"$python" -c '
import h5py
with h5py.File("scores-out.h5", "r+") as f:
    f.attrs["id2label"] = "{\"0\": \"no\", \"0\": \"maybe\", \"1\": \"yes\"}"
'
status_error "id2label names a label twice" "scores-out.h5: .*attribute .id2label. names label \"0\" twice" scores-out.h5

# --- item 5, continued: tfenc-batch's own file, the remembered throughput: a FIFO in its place
# blocked every job forever (in --dry-run's estimate, then in the summary).
mkdir -p fifo-home/.cache/tfenc
mkfifo fifo-home/.cache/tfenc/throughput
rm -f fifo-home.h5
HOME=$PWD/fifo-home XDG_CACHE_HOME= timeout -k 5 60 "$batch" --quiet --set job.input=fifty.txt \
  --set job.output=fifo-home.h5 good.ini > stdout.txt 2> stderr.txt < /dev/null
code=$?
why=""
[ "$code" -eq 0 ] || why="exit status $code"
[ ! -s stderr.txt ] || why="$why; stderr is not empty"
[ -p fifo-home/.cache/tfenc/throughput ] || why="$why; the FIFO was replaced"
report "throughput file is a FIFO [batch]" "$why"

# --- item 12: SIGTERM while MPI_Init runs (the first ~0.2 s of a job)
# ended the process with 143 and no word; the handler is installed before
# MPI_Init now, and the job stops as a later SIGTERM stops it. The preloaded
# shim raises the signal at MPI_Init's entry, at 1 and 2 ranks.
shim="$builddir/tests/preload/.libs/signal_in_mpi_init.so"
# (Under AddressSanitizer a preloaded library comes before its runtime.)
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
export ASAN_OPTIONS
for ranks in 1 2; do
  rm -f stopped.h5
  if [ "$ranks" -eq 1 ]; then
    LD_PRELOAD=$shim timeout -k 5 60 "$batch" --quiet --set job.input=fifty.txt --set job.output=stopped.h5 \
      good.ini > stdout.txt 2> raw-stderr.txt < /dev/null
  else
    timeout -k 5 60 $MPIEXEC -n 2 -x LD_PRELOAD="$shim" "$batch" --quiet --set job.input=fifty.txt \
      --set job.output=stopped.h5 good.ini > stdout.txt 2> raw-stderr.txt < /dev/null
  fi
  code=$?
  # mpirun's own framed report is not tfenc's line.
  awk '/^-----+$/ { framed = !framed; next } !framed && !/^\[[^]]*\] / { print }' raw-stderr.txt > stderr.txt
  one_line tfenc-batch "stopped by a signal: 0 of 50 documents are finished in stopped.h5 \(not marked complete\)"
  [ "$code" -eq 75 ] || why="$why; exit status $code, expected 75"
  report "SIGTERM during MPI_Init [$ranks]" "$why"
done

# A plugin whose constructor crashes: refused in one line naming the file;
# the probe process printed Open MPI's 25-line crash report first.
mkdir plugins-crash
cp "$builddir/tests/plugins/hostile/.libs/crash_layer.so" plugins-crash/
sed 's#^\[model\]#[model]\nplugin_path = plugins-crash#' good.ini > crash.ini
printf '\n[crash]\ntype = crash_layer\n' >> crash.ini
for ranks in 1 2; do
  if [ "$ranks" -eq 1 ]; then
    timeout -k 5 60 "$batch" --quiet --set job.input=fifty.txt --set job.output=crash.h5 crash.ini \
      > stdout.txt 2> raw-stderr.txt < /dev/null
  else
    timeout -k 5 60 $MPIEXEC -n 2 "$batch" --quiet --set job.input=fifty.txt --set job.output=crash.h5 \
      crash.ini > stdout.txt 2> raw-stderr.txt < /dev/null
  fi
  code=$?
  awk '/^-----+$/ { framed = !framed; next } !framed && !/^\[[^]]*\] / { print }' raw-stderr.txt > stderr.txt
  one_line tfenc-batch "plugin [^ ]*plugins-crash/crash_layer.so: crashes while loading: Segmentation fault"
  # Open MPI's handler prints "[host:pid] *** Process received signal ***".
  ! grep -q "Process received signal" raw-stderr.txt || why="$why; a crash report on stderr"
  report "plugin crashes while loading [$ranks]" "$why"
done

# --- item 6: Open MPI's shared-memory directory cannot back the node's
# window (a 4 MiB tmpfs, when root can mount one; a directory that does not
# exist, always): the job ended with MPI_ERR_INTERN in
# MPI_Win_allocate_shared; now one line says why and each rank keeps its own
# copy, with the vectors of the 1-rank run (complete.h5), at 2 ranks.
backing_dirs=$PWD/no-such-directory
if [ "$(id -u)" -eq 0 ] && mkdir -p small-shm && mount -t tmpfs -o size=4m tmpfs small-shm 2>/dev/null; then
  work_abs=$PWD
  trap 'umount "$work_abs/small-shm" 2>/dev/null' EXIT
  backing_dirs="$PWD/small-shm $backing_dirs"
else
  echo "note shared window on a 4 MiB tmpfs: not run (mounting one needs root); the missing directory is"
fi
for backing in $backing_dirs; do
  rm -f per-rank.h5
  OMPI_MCA_osc_sm_backing_directory=$backing timeout -k 5 60 $MPIEXEC -n 2 \
    -x OMPI_MCA_osc_sm_backing_directory "$batch" --quiet --set job.input=fifty.txt \
    --set job.output=per-rank.h5 good.ini > stdout.txt 2> raw-stderr.txt < /dev/null
  code=$?
  awk '/^-----+$/ { framed = !framed; next } !framed && !/^\[[^]]*\] / { print }' raw-stderr.txt > stderr.txt
  why=""
  [ "$code" -eq 0 ] || why="exit status $code"
  [ "$(wc -l < stderr.txt)" -eq 1 ] || why="$why; $(wc -l < stderr.txt) lines on stderr"
  grep -qE "^tfenc-batch: weights good.h5 are not shared by the ranks of a node \(cannot make a [0-9.]+ MiB shared window for the node's weights: Open MPI's shared-memory directory $backing \(osc_sm_backing_directory\).*\): each rank keeps its own copy" \
    stderr.txt || why="$why; no line saying the weights are not shared, and why"
  ! grep -q "MPI_ERR\|not enough space" raw-stderr.txt || why="$why; Open MPI's error on stderr"
  if [ -z "$why" ] && ! "$python" -c '
import sys, h5py, numpy as np
a, b = h5py.File("per-rank.h5", "r"), h5py.File("complete.h5", "r")
sys.exit(0 if a.attrs["complete"] == 1 and np.array_equal(a["embeddings"][:], b["embeddings"][:]) else 1)'; then
    why="per-rank.h5 is not complete or differs from the 1-rank output"
  fi
  report "shared window in $(basename "$backing") [2]" "$why"
done

# --- item 9: a pooling mode tfenc does not know, set to true, was ignored
# (the model imported with the known mode that was also true).
copy unknown-pooling
"$python" - <<'PY' || exit 1
import json
path = "unknown-pooling/1_Pooling/config.json"
config = json.load(open(path))
config["pooling_mode_attention_tokens"] = True
json.dump(config, open(path, "w"))
PY
import_error "unknown pooling mode set" \
  "unknown-pooling/1_Pooling/config.json: unknown pooling mode 'pooling_mode_attention_tokens' is set" \
  unknown-pooling

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
