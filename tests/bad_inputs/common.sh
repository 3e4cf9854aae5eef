# Sourced by the parts of the bad-input test (tests/bad_inputs/*.sh), which
# make runs side by side: a table of bad jobs and inputs, each run at 1 rank
# (no mpirun) and under "$MPIEXEC -n 4" (under the sanitizers once, at 2):
# tfenc-batch must end with exactly one line of its own on stderr that
# names the problem (checked against a pattern), a non-zero exit, within
# 60 s (a hang fails instead of blocking), and no output file marked
# complete. Inputs that are odd but valid (empty lines, a 10 MB line, ...)
# must instead give the documented result. Broken safetensors checkpoints
# go through tfenc-import, a serial tool, once.
#
# This file makes the good model and input to break one thing at a time,
# the broken copies, and the helpers the parts' tables call (error, odd,
# import_error, listing), in the part's own directory; `finish` ends a
# part with its count.
: "${top_builddir:=.}" "${top_srcdir:=.}" "${REFERENCE_PYTHON:=/usr/bin/python3}"
: "${MPIEXEC:=mpiexec}"
# Each part works in a directory of its own, so that the parts run side
# by side (make -j).
part=${0##*/}
part=${part%.sh}
work="$top_builddir/tests/data/generated/bad-inputs/$part"
rm -rf "$work"
mkdir -p "$work"
cd "$work" || exit 1
builddir=$(cd "$OLDPWD" && cd "$top_builddir" && pwd)
srcdir=$(cd "$OLDPWD" && cd "$top_srcdir" && pwd)
batch="$builddir/drivers/tfenc-batch"
import="$builddir/drivers/tfenc-import"

# A good model and input to break one thing at a time.
# (Through tests/harness/generate: the parts, and the sanitizer build after
# the normal one, reuse the first part's.)
generate=$srcdir/tests/harness/generate
"$generate" good "$REFERENCE_PYTHON" "$srcdir/tests/reference/make_reference.py" postnorm_relu good \
  >/dev/null || exit 1
"$generate" checkpoint "$REFERENCE_PYTHON" "$srcdir/tests/import/make_checkpoint.py" bert checkpoint \
  >/dev/null || exit 1
"$REFERENCE_PYTHON" - <<'PY' || exit 1
import json, os, shutil, struct
import h5py, numpy as np

def copy_model(name, change):
    with h5py.File("good/model.h5", "r") as src, h5py.File(name, "w") as dst:
        for key, obj in src.items():
            src.copy(obj, dst, key)
        change(dst)

# Weights: one NaN, one Inf, a missing dataset, a truncated file, not HDF5.
copy_model("nan.h5", lambda f: f["encoder/2/ffn/in_weight"].__setitem__((0, 3), np.nan))
copy_model("inf.h5", lambda f: f["encoder/4/attention/qkv_weight"].__setitem__((1, 1), -np.inf))
copy_model("no-bias.h5", lambda f: f.__delitem__("encoder/3/ffn/out_bias"))
data = open("good/model.h5", "rb").read()
open("truncated-model.h5", "wb").write(data[:len(data) // 2])
open("junk.h5", "wb").write(b"this is not an HDF5 file\n" * 10)

# HDF5 token-id corpora, each wrong in one way.
def ragged(name, tokens, offsets, tokens_dtype=np.int32):
    with h5py.File(name, "w") as f:
        if tokens is not None:
            f["tokens"] = np.array(tokens, dtype=tokens_dtype)
        if offsets is not None:
            f["offsets"] = np.array(offsets, dtype=np.int64)
ragged("big-ids.h5", [1, 2, 5000, 3], [0, 2, 4])
ragged("empty-ids.h5", np.zeros(0), [0])
ragged("float-tokens.h5", [1, 2, 3, 4], [0, 2, 4], np.float32)
ragged("rank2-tokens.h5", [[1], [2], [3], [4]], [0, 2, 4])
ragged("no-offsets.h5", [1, 2, 3, 4], None)
ragged("offsets-start.h5", [1, 2, 3, 4], [1, 2, 4])
ragged("offsets-decrease.h5", [1, 2, 3, 4], [0, 3, 2, 4])
ragged("offsets-end.h5", [1, 2, 3, 4], [0, 2, 3])
ragged("negative-id.h5", [1, 2, 3, -7, 5], [0, 2, 5])
with h5py.File("padded-long.h5", "w") as f:
    f["ids"] = np.array([[1, 2, 3, 4], [5, 6, 0, 0]], dtype=np.int32)
    f["lengths"] = np.array([4, 5], dtype=np.int32)
with h5py.File("padded-rank1.h5", "w") as f:
    f["ids"] = np.array([1, 2, 3, 4], dtype=np.int32)
    f["lengths"] = np.array([4], dtype=np.int32)
with h5py.File("unwritten.h5", "w") as f:
    # Declared but never written: HDF5 would hand back 2.4 MB of fill value.
    f["tokens"] = np.array([1, 2], dtype=np.int32)
    f.create_dataset("offsets", shape=(300000,), dtype=np.int64)
open("text-named.h5", "w").write("hello world\n")
data = open("good/input.h5", "rb").read()
open("truncated-input.h5", "wb").write(data[:len(data) // 2])

# Text and JSON Lines corpora.
vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello", "world", "fine", "line"]
open("vocab.txt", "w").write("\n".join(vocab) + "\n")
open("vocab-no-cls.txt", "w").write("\n".join(v for v in vocab if v != "[CLS]") + "\n")
open("text.txt", "w").write("hello world\n")
open("bad-utf8.txt", "wb").write(b"fine line\nbroken \xff\xfe line\n")
open("nul.txt", "wb").write(b"hello world\nfine\x00line\n")
open("utf16.txt", "wb").write("hello world\n".encode("utf-16"))
open("empty.txt", "w").write("")
open("empty-lines.txt", "w").write("hello world\n\nfine line\n\n")
open("crlf.txt", "wb").write(b"hello world\r\nfine line\r\n")
# One 10 MB line between two short ones: cut to max_seq_len, not a crash.
with open("long-line.txt", "w") as f:
    f.write("fine line\n" + "hello world " * (10 * 1024 * 1024 // 12) + "\nhello\n")
jsonl = {
    "records.jsonl": '{"text": "one"}\n{"body": "two"}\n',
    "invalid.jsonl": '{"text": "one"}\n{"text": "two"\n',
    "blank.jsonl": '{"text": "one"}\n\n{"text": "two"}\n',
    "array.jsonl": '{"text": "one"}\n["two"]\n',
    "number-text.jsonl": '{"text": 12}\n',
    "no-id.jsonl": '{"text": "one", "id": "a"}\n{"text": "two"}\n',
    "empty-text.jsonl": '{"text": ""}\n{"text": "hello"}\n',
}
for name, text in jsonl.items():
    open(name, "w").write(text)
os.mkdir("a-directory")

# Plugin directories holding one file each that is not a tfenc plugin. A
# file provides the type its name says (no TFENC_PLUGIN_TYPES declaration).
for name in ("plugins-fake", "plugins-old", "plugins-no-entry"):
    os.mkdir(name)
open("plugins-fake/fake_layer.so", "w").write("not a shared object\n")

# HDF5 token ids that do not fit int32, stored in wider types.
with h5py.File("huge-id.h5", "w") as f:
    f["tokens"] = np.array([1, 2, 3000000000, 3], dtype=np.int64)
    f["offsets"] = np.array([0, 2, 4], dtype=np.int64)
with h5py.File("huge-unsigned-id.h5", "w") as f:
    f["tokens"] = np.array([1, 2, 3, 2**64 - 1], dtype=np.uint64)
    f["offsets"] = np.array([0, 2, 4], dtype=np.int64)
with h5py.File("huge-negative-id.h5", "w") as f:
    f["tokens"] = np.array([1, 2, -2**40, 3], dtype=np.int64)
    f["offsets"] = np.array([0, 2, 4], dtype=np.int64)
with h5py.File("huge-padded-id.h5", "w") as f:
    f["ids"] = np.array([[1, 2, 0], [4, 2**35, 6]], dtype=np.int64)
    f["lengths"] = np.array([2, 3], dtype=np.int32)

# Special files where a regular file is expected: a FIFO (would block a
# reader forever), a socket, a directory; /dev/zero is the device.
import socket
open("big.ini", "w").write("; a comment line\n" * 70000)  # 1.1 MB of valid INI
os.mkfifo("a-fifo")
listener = socket.socket(socket.AF_UNIX)
listener.bind("a-socket")
listener.close()

# Broken safetensors checkpoints for tfenc-import, from the good one.
good = open("checkpoint/model.safetensors", "rb").read()
header_length = struct.unpack("<Q", good[:8])[0]
header = json.loads(good[8:8 + header_length])
def checkpoint(name, data):
    shutil.copytree("checkpoint", name)
    open(name + "/model.safetensors", "wb").write(data)
checkpoint("st-truncated", good[:-100])
checkpoint("st-header-length", struct.pack("<Q", 1 << 40) + good[8:])
checkpoint("st-not-json", good[:8] + b"{" + b"#" * (header_length - 1) + good[8 + header_length:])
bad = good.replace(b'"F32"', b'"F31"', 1)
checkpoint("st-dtype", bad)
name = next(k for k, v in header.items() if k != "__metadata__" and v["dtype"] == "F32"
            and v["data_offsets"][1] > v["data_offsets"][0])
at = 8 + header_length + header[name]["data_offsets"][0]
checkpoint("st-nan", good[:at] + struct.pack("<f", float("nan")) + good[at + 4:])
open("st-nan/tensor-name", "w").write(name)
PY
cp "$builddir/tests/plugins/.libs/old_abi.so" plugins-old/old_layer.so || exit 1
cp "$builddir/tests/plugins/.libs/no_entry.so" plugins-no-entry/some_layer.so || exit 1
hostile="$builddir/tests/plugins/hostile/.libs"
layers_so="$builddir/plugins/.libs/layers.so"
arithmetic_so="$builddir/tests/plugins/.libs/arithmetic.so"
# One directory per misdeed (core/plugin/plugin_loader.h has the policy).
mkdir plugins-truncated plugins-world plugins-group plugins-shadow plugins-named-pooling \
  plugins-exit plugins-tables plugins-marker plugins-fifo plugins-file-mode plugins-owner \
  plugins-silent plugins-memory \
  plugins-unused-truncated jobdir
for size in 2048 10240 30720; do # 2-30 kB of a real plugin: truncations that once passed the loader's checks
  head -c $size "$layers_so" > plugins-truncated/truncated_$size.so
done
head -c 10240 "$layers_so" > plugins-unused-truncated/layers.so
cp "$arithmetic_so" plugins-world/ && chmod 0777 plugins-world
cp "$arithmetic_so" plugins-group/ && chmod 0775 plugins-group
cp "$arithmetic_so" plugins-file-mode/ && chmod 0666 plugins-file-mode/arithmetic.so
cp "$arithmetic_so" plugins-owner/ && chown 65534 plugins-owner/arithmetic.so 2>/dev/null \
  || rm -f plugins-owner/arithmetic.so # (not root: no file of another user to make)
cp "$hostile/shadow.so" plugins-shadow/
cp "$hostile/marker.so" plugins-named-pooling/pooling.so
cp "$hostile/exit_layer.so" "$hostile/exit_create.so" plugins-exit/
cp "$hostile/undeclared_key.so" plugins-tables/
cp "$hostile/silent_callbacks.so" plugins-silent/
cp "$hostile/memory_errors.so" plugins-memory/
cp "$hostile/marker.so" "$arithmetic_so" plugins-marker/
mkfifo plugins-fifo/fifo_layer.so
# A job in another directory than the one tfenc-batch runs in, with its
# plugin beside it: plugin_path = . is that directory.
cp "$arithmetic_so" jobdir/
sed 's#^input = .*#input = ../good/input.h5#; s#^weights = .*#weights = ../good/model.h5#; s#^output = .*#output = ../out.h5#; s#^\[model\]#[model]\nplugin_path = .#' good/job.ini > jobdir/job.ini
printf '[scaled]\ntype = scale\nfactor = 1\n' >> jobdir/job.ini
cp good/job.ini base.ini
sed -i 's#^input = .*#input = good/input.h5#; s#^output = .*#output = out.h5#; s#^weights = .*#weights = good/model.h5#' base.ini
nan_tensor=$(cat st-nan/tensor-name)

# Sed scripts for the usual changes of base.ini. text_input ends with sed's
# "a" command, which takes the rest of the script.
# (printf, not echo: dash's echo would turn the \n for sed into newlines.)
text_input() { # CORPUS [FORMAT[\\nMORE [job] KEYS]]: a text corpus, the small vocabulary
  printf '%s' "s#^input = .*#input = $1#; s#^input_format = .*#input_format = ${2:-text}#; \$a [tokenizer]\nvocab = vocab.txt"
}
hdf5_input() { printf '%s' "s#^input = .*#input = $1#"; }
json_tokenizer() { # FILE: a text corpus tokenized by the tokenizer.json FILE
  printf '%s' "s#^input = .*#input = text.txt#; s#^input_format = .*#input_format = text#; \$a [tokenizer]\njson = $1"
}
weights() { printf '%s' "s#^weights = .*#weights = $1#"; }
padded() { # CORPUS: padded HDF5 input (ids + lengths)
  printf '%s' "s#^input = .*#input = $1#; s#^input_format = .*#input_format = hdf5\nids_dataset = ids\nlengths_dataset = lengths#"
}

passed=0
failed=0
report() { # NAME WHY ELAPSED
  if [ -z "$2" ]; then
    passed=$((passed + 1))
    echo "ok   $1 (${3}s): $(head -c 300 stderr.txt | tr '\n' ' ')"
  else
    failed=$((failed + 1))
    echo "FAIL $1:$2"
    sed 's/^/     stderr: /' stderr.txt | head -n 20
  fi
}

# Runs tfenc-batch on job.ini (base.ini through TRANSFORM) at LAYOUT ranks.
run_batch() { # LAYOUT TRANSFORM ARGS...
  layout=$1 transform=$2
  shift 2
  rm -f out.h5 job.ini
  sed "$transform" base.ini > job.ini
  start=$(date +%s)
  if [ "$layout" -eq 1 ]; then
    timeout 60 "$batch" --quiet "$@" > stdout.txt 2> raw-stderr.txt < "${stdin:-/dev/null}"
  else
    timeout 60 $MPIEXEC -n "$layout" "$batch" --quiet "$@" > stdout.txt 2> raw-stderr.txt < /dev/null
  fi
  code=$?
  elapsed=$(( $(date +%s) - start ))
  # mpirun frames its own report of a failed rank between lines of dashes
  # and aggregates help messages in "[host:pid] ..." lines: not tfenc's.
  awk '/^-----+$/ { framed = !framed; next } !framed && !/^\[[^]]*\] / { print }' \
    raw-stderr.txt > stderr.txt
}

output_complete() {
  [ -f out.h5 ] && "$REFERENCE_PYTHON" -c 'import h5py,sys; sys.exit(0 if h5py.File("out.h5","r").attrs.get("complete", 0) == 1 else 1)' 2>/dev/null
}

# The layouts of every case that names none: alone (no mpirun) and at 4
# ranks. Under the sanitizers each case runs once, at 2 ranks: rank 0's
# path and another rank's, and the agreement on the error between them,
# in one launch (the paths of a lone rank are the same functions; the
# normal build runs both layouts).
layouts_of_each=${TFENC_SANITIZER_BUILD:+2}
: "${layouts_of_each:=1 4}"

# error NAME PATTERN TRANSFORM [tfenc-batch arguments...]
# PATTERN is an extended regular expression the one stderr line must match.
error() {
  error_at "$layouts_of_each" "$@"
}

# The same at the given layouts only (rank counts, space-separated).
error_at() {
  layouts=$1 name=$2 pattern=$3 transform=$4
  shift 4
  for layout in $layouts; do
    run_batch "$layout" "$transform" "$@"
    why=""
    [ "$code" -ne 0 ] || why="exit status 0"
    [ "$code" -ne 124 ] || why="no exit within 60 s"
    [ "$code" -lt 128 ] || why="killed by a signal ($code)"
    lines=$(wc -l < stderr.txt)
    [ "$lines" -eq 1 ] || why="$why; $lines lines on stderr"
    grep -qE -- "^tfenc-batch: .*$pattern" stderr.txt || why="$why; message does not match '$pattern'"
    ! output_complete || why="$why; out.h5 is marked complete"
    report "$name [$layout]" "$why" "$elapsed"
  done
}

# crash NAME PATTERN TRANSFORM [tfenc-batch arguments...]
# A plugin that crashes the process (SIGSEGV in its forward()): each rank
# that crashed says so in one line of its own matching PATTERN before it
# dies by the signal (alone: an exit status above 128), and the output is
# not marked complete. Run alone and at 2 ranks (each rank runs the layer:
# one line from each, at most).
crash() {
  name=$1 pattern=$2 transform=$3
  shift 3
  for layout in 1 2; do
    run_batch "$layout" "$transform" "$@"
    why=""
    [ "$code" -ne 0 ] || why="exit status 0"
    [ "$code" -ne 124 ] || why="no exit within 60 s"
    [ "$layout" -ne 1 ] || [ "$code" -gt 128 ] || why="$why; exit status $code, not the signal's"
    # (the shell running the test says the signal's name, not tfenc)
    grep -vxE '(Segmentation fault|Bus error)( \(core dumped\))?' stderr.txt > crash-stderr.txt
    mv crash-stderr.txt stderr.txt
    lines=$(grep -c . stderr.txt)
    matching=$(grep -cE -- "^tfenc-batch: .*$pattern" stderr.txt)
    { [ "$lines" -ge 1 ] && [ "$lines" -le "$layout" ] && [ "$matching" -eq "$lines" ]; } \
      || why="$why; $lines lines on stderr, $matching of them matching '$pattern'"
    ! output_complete || why="$why; out.h5 is marked complete"
    report "$name [$layout]" "$why" "$elapsed"
  done
}

# odd NAME PYTHON-CHECK TRANSFORM [tfenc-batch arguments...]
# A valid input at the edge: exit 0, no stderr, a complete out.h5 for which
# the Python expression (over h5py File f) is true.
odd() {
  odd_at "$layouts_of_each" "$@"
}

odd_at() {
  layouts=$1 name=$2 check=$3 transform=$4
  shift 4
  for layout in $layouts; do
    run_batch "$layout" "$transform" "$@"
    why=""
    [ "$code" -eq 0 ] || why="exit status $code"
    [ ! -s stderr.txt ] || why="$why; stderr is not empty"
    if [ -z "$why" ] && ! "$REFERENCE_PYTHON" -c "
import sys, h5py, numpy as np
f = h5py.File('out.h5', 'r')
sys.exit(0 if f.attrs['complete'] == 1 and ($check) else 1)" 2>> stderr.txt; then
      why="$why; output fails: $check"
    fi
    report "$name [$layout]" "$why" "$elapsed"
  done
}

# import_error NAME PATTERN CHECKPOINT_DIR: tfenc-import's one line.
import_error() {
  name=$1 pattern=$2 dir=$3
  rm -f imported.h5
  start=$(date +%s)
  timeout 60 "$import" "$dir" -o imported.h5 > stdout.txt 2> stderr.txt
  code=$?
  elapsed=$(( $(date +%s) - start ))
  why=""
  [ "$code" -ne 0 ] || why="exit status 0"
  [ "$code" -ne 124 ] || why="no exit within 60 s"
  [ "$code" -lt 128 ] || why="killed by a signal ($code)"
  lines=$(wc -l < stderr.txt)
  [ "$lines" -eq 1 ] || why="$why; $lines lines on stderr"
  grep -qE -- "^tfenc-import: .*$pattern" stderr.txt || why="$why; message does not match '$pattern'"
  report "$name [import]" "$why" "$elapsed"
}

# listing NAME PATTERN TFENC_PLUGIN_PATH: --list-plugins loads every file of
# the search path: it must exit 0 within 60 s, not crash, and print a line
# matching PATTERN (a refusal, say).
listing() {
  name=$1 pattern=$2 path=$3
  start=$(date +%s)
  TFENC_PLUGIN_PATH=$path timeout 60 "$batch" --list-plugins > stdout.txt 2> stderr.txt
  code=$?
  elapsed=$(( $(date +%s) - start ))
  why=""
  [ "$code" -eq 0 ] || why="exit status $code"
  grep -qE -- "$pattern" stdout.txt || why="$why; no line matches '$pattern'"
  [ -z "$why" ] || cat stdout.txt >> stderr.txt
  report "$name [--list-plugins]" "$why" "$elapsed"
}

# finish: a part's count and its exit status.
finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
