#!/bin/sh
# Table-driven test of bad jobs and inputs, each run at 1 rank (no mpirun)
# and under "$MPIEXEC -n 4" (under the sanitizers once, at 2): tfenc-batch must end with exactly one line of
# its own on stderr that names the problem (checked against a pattern), a
# non-zero exit, within 60 s (a hang fails instead of blocking), and no
# output file marked complete. Inputs that are odd but valid (empty lines,
# a 10 MB line, ...) must instead give the documented result. Broken
# safetensors checkpoints go through tfenc-import, a serial tool, once.
#
# Hostile inputs are here too: FIFOs, sockets, directories and
# devices at every path key the job reads; plugins that are truncated, in a
# directory others can write, duplicate a type, end the process, or whose
# declared keys disagree with their code; plugin files a job must never load;
# integer keys beyond int and long; HDF5 token ids beyond int32.
set -u
: "${top_builddir:=.}" "${top_srcdir:=.}" "${REFERENCE_PYTHON:=/usr/bin/python3}"
: "${MPIEXEC:=mpiexec}"
work="$top_builddir/tests/data/generated/bad-inputs"
rm -rf "$work"
mkdir -p "$work"
cd "$work" || exit 1
builddir=$(cd "$OLDPWD" && cd "$top_builddir" && pwd)
srcdir=$(cd "$OLDPWD" && cd "$top_srcdir" && pwd)
batch="$builddir/drivers/tfenc-batch"
import="$builddir/drivers/tfenc-import"

# A good model and input to break one thing at a time.
"$REFERENCE_PYTHON" "$srcdir/tests/reference/make_reference.py" postnorm_relu good >/dev/null || exit 1
"$REFERENCE_PYTHON" "$srcdir/tests/import/make_checkpoint.py" bert checkpoint >/dev/null || exit 1
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

# --- command line and job files
error "missing job file"        "job file nope.ini: cannot open: No such file" "" nope.ini
error "job file is a directory" "job file a-directory: is a directory, not a regular file" "" a-directory
error "job file is /dev/zero"   "job file /dev/zero: is a character device" "" /dev/zero
error "job file is a FIFO"      "job file a-fifo: is a FIFO or pipe" "" a-fifo
error "job file is a socket"    "job file a-socket: is a socket" "" a-socket
error "job file too large"      "big.ini: larger than 1 MiB: not a job file" "" big.ini
error "unknown option"          "unknown option '--frobnicate'" "" --frobnicate job.ini
error "malformed --set"         "--set 'batch_tokens=5': expected section.key=value" "" --set batch_tokens=5 job.ini
error "not INI syntax"          "job.ini:2: not INI syntax" '2i this line is not ini' job.ini
error "key outside a section"   "job.ini:2: key 'stray' is outside any \[section\]" '2i stray = 1' job.ini
error "section twice"           "section \[encoder.ffn\] appears twice \(first at line [0-9]+\)" '$a [encoder.ffn]\ntype = ffn' job.ini
error "NUL byte in job file"    "job.ini: job file contains a NUL byte" 's/^\[job\]/[job]\x00/' job.ini
error "unknown [job] key"       "job.ini:8: \[job\] unknown key 'batch_size'" 's/^batch_tokens = /batch_size = /' job.ini
error "wrong type"              "\[job\] batch_tokens = 'lots': expected an integer" 's/^batch_tokens = .*/batch_tokens = lots/' job.ini
error "bad choice"              "output_dtype = 'float64': expected one of float32, float16, bfloat16" 's/^\[job\]/[job]\noutput_dtype = float64/' job.ini
error "duplicate key"           "key 'output' is set twice" 's/^\[job\]/[job]\noutput = a.h5/' job.ini
error "missing input key"       "\[job\] requires key 'input'" '/^input = /d' job.ini
error "missing weights key"     "\[model\] requires key 'weights'" '/^weights = /d' job.ini
error "missing [model]"         "job.ini: missing section \[model\]" 's/^\[model\]/[modle]/' job.ini
error "d_model out of range"    "\[model\] d_model = '0': expected an integer in 1..65536" 's/^d_model = .*/d_model = 0/' job.ini
error "max_seq_len too long"    "\[job\] max_seq_len: must be in 2..\[model\] max_positions" 's/^max_seq_len = .*/max_seq_len = 4096/' job.ini
error "batch smaller than doc"  "\[job\] batch_tokens: must be at least max_seq_len" 's/^batch_tokens = .*/batch_tokens = 16/' job.ini
error "pipeline_stages zero"    "\[job\] pipeline_stages = '0': expected an integer in 1..2147483647" 's/^\[job\]/[job]\npipeline_stages = 0/' job.ini
error "unknown layer type"      "no plugin provides layer type 'transformer_magic'" 's/^type = mha/type = transformer_magic/' job.ini
error "unknown plugin key"      "unknown key 'dropout' \(not a parameter of layer type mha\)" 's/^n_heads = 4/n_heads = 4\ndropout = 0.1/' job.ini
error "heads do not divide d"   "n_heads" 's/^n_heads = 4/n_heads = 5/' job.ini
error "section without type"    "section \[extra\] has no 'type' key" '$a [extra]\nfoo = 1' job.ini
error "orphan sublayer"         "no block \(a section with 'repeat'\) precedes it" '$a [nowhere.ffn]\ntype = ffn' job.ini
error "pooled from token model" "output_kind = pooled but the model does not pool" 's/^\[job\]/[job]\noutput_kind = pooled/' job.ini
error "unwritable output"       "/nonexistent-dir/out.h5" 's#^output = .*#output = /nonexistent-dir/out.h5#' job.ini
error "output is the input"     "the output is the same file as the corpus" 's#^output = .*#output = good/input.h5#' job.ini

# --- plugins that are not tfenc plugins (the job needs the type they would give)
error "plugin not a shared object" "no plugin provides layer type 'fake_layer'.*refused [^ ]*plugins-fake/fake_layer.so: not an ELF shared object" \
  's#^\[model\]#[model]\nplugin_path = plugins-fake#; s/^type = mha/type = fake_layer/' job.ini
error "plugin of an older ABI"  "layer type 'old_layer': plugin [^ ]*plugins-old/old_layer.so: built for plugin ABI 0.9" \
  's#^\[model\]#[model]\nplugin_path = plugins-old#; s/^type = mha/type = old_layer/' job.ini
error "plugin without entry"    "plugin [^ ]*plugins-no-entry/some_layer.so: not a tfenc plugin: .*tfenc_plugin_descriptor" \
  's#^\[model\]#[model]\nplugin_path = plugins-no-entry#; s/^type = mha/type = some_layer/' job.ini

# --- the loading policy (core/plugin/plugin_loader.h): each of these crashed, hung,
# ran foreign code or passed silently before it
with_plugins() { # DIRECTORY [MORE SED]: plugin_path = DIRECTORY, then MORE
  printf '%s' "s#^\[model\]#[model]\nplugin_path = $1#${2:+; $2}"
}
add_layer() { # TYPE: one more layer at the end of the model
  printf '%s' "\$a [extra]\ntype = $1"
}
for size in 2048 10240 30720; do
  error "truncated plugin ($size bytes)" \
    "no plugin provides layer type 'truncated_$size'.*refused [^ ]*plugins-truncated/truncated_$size.so: .*(truncated|too short)" \
    "$(with_plugins plugins-truncated "$(add_layer truncated_$size)")" job.ini
done
listing "truncated plugins" "plugins-truncated/truncated_2048.so: .*truncated" "$PWD/plugins-truncated"
odd "a truncated plugin the job does not need" "f['hidden'].shape[0] > 0" \
  "$(with_plugins plugins-unused-truncated)" job.ini
error "world-writable plugin directory" \
  "no plugin provides layer type 'scale'.*refused [^ ]*plugins-world: search directory writable by every user" \
  "$(with_plugins plugins-world "$(add_layer scale)")" job.ini
error "group-writable plugin directory" \
  "no plugin provides layer type 'scale'.*refused [^ ]*plugins-group: search directory writable by its group" \
  "$(with_plugins plugins-group "$(add_layer scale)")" job.ini
error "world-writable plugin file" \
  "no plugin provides layer type 'scale'.*refused [^ ]*plugins-file-mode/arithmetic.so: writable by every user" \
  "$(with_plugins plugins-file-mode "$(add_layer scale)")" job.ini
if [ -f plugins-owner/arithmetic.so ]; then
  error "plugin of another user" \
    "no plugin provides layer type 'scale'.*refused [^ ]*plugins-owner/arithmetic.so: owned by uid 65534" \
    "$(with_plugins plugins-owner "$(add_layer scale)")" job.ini
else
  echo "note plugin of another user: not run (making a file of another user needs root)"
fi
error "a second pooling (declared)" \
  "layer type 'pooling' is provided by both [^ ]*plugins-shadow/shadow.so and [^ ]*layers.so" \
  "$(with_plugins plugins-shadow "$(add_layer pooling)")" job.ini
error "a second pooling (by name)" \
  "layer type 'pooling' is provided by both [^ ]*plugins-named-pooling/pooling.so and [^ ]*layers.so" \
  "$(with_plugins plugins-named-pooling "$(add_layer pooling)")" job.ini
error "constructor calls _exit(0)" \
  "plugin [^ ]*plugins-exit/exit_layer.so: ends the process while loading, with exit status 0" \
  "$(with_plugins plugins-exit "$(add_layer exit_layer)")" job.ini
error "create() calls exit(0)"  "the process was ended by exit\(\) from inside a plugin" \
  "$(with_plugins plugins-exit "$(add_layer exit_create)")" job.ini
error "plugin reads an undeclared key" \
  "layer type reads_undeclared reads key 'alpha', which its declared parameter table lacks" \
  "$(with_plugins plugins-tables "$(add_layer reads_undeclared)")" job.ini
error "plugin ignores a declared key" \
  "layer type ignores_declared declares key 'gamma' but its create\(\) never reads it" \
  "$(with_plugins plugins-tables "$(add_layer ignores_declared)")" job.ini
error "type described, not declared" "no plugin provides layer type 'undeclared_type'" \
  "$(with_plugins plugins-tables "$(add_layer undeclared_type)")" job.ini
listing "type described, not declared" \
  "undeclared_key.so: describes layer type 'undeclared_type' but does not declare it" "$PWD/plugins-tables"
error "FIFO named like a plugin" \
  "no plugin provides layer type 'fifo_layer'.*refused [^ ]*plugins-fifo/fifo_layer.so: is a FIFO" \
  "$(with_plugins plugins-fifo "$(add_layer fifo_layer)")" job.ini
listing "hostile plugins" "plugins-exit/exit_layer.so: ends the process while loading" \
  "$PWD/plugins-exit:$PWD/plugins-fifo:$PWD/plugins-truncated:$PWD/plugins-world"
# marker.so's constructor creates $TFENC_TEST_MARKER; the job needs only
# `scale` from that directory, so marker.so must never be loaded.
rm -f marker-trace
TFENC_TEST_MARKER=$PWD/marker-trace
export TFENC_TEST_MARKER
odd "only the plugin files the job needs" "f['hidden'].shape[0] > 0" \
  "$(with_plugins plugins-marker "$(add_layer scale)")" job.ini
if [ -e marker-trace ]; then
  failed=$((failed + 1))
  echo "FAIL only the plugin files the job needs: marker.so was loaded (its constructor ran)"
else
  passed=$((passed + 1))
  echo "ok   only the plugin files the job needs: marker.so never loaded"
fi
unset TFENC_TEST_MARKER
# plugin_path = . is the job file's directory, not where tfenc-batch runs.
odd "plugin_path = . beside the job file" "f['hidden'].shape[0] > 0" "" jobdir/job.ini

# --- every path key the job reads against special files: refused in one
# line naming the key, never a wait (60 s is a failure)
for pair in "a-fifo|is a FIFO or pipe" "a-socket|is a socket" "a-directory|is a directory" "/dev/zero|is a character device"; do
  file=${pair%%|*} what=${pair#*|}
  # A directory is a corpus of its files ; this one has none.
  corpus_what=$what
  [ "$file" = a-directory ] && corpus_what="the directory holds no file"
  error "HDF5 corpus is $file"  "\[job\] input $file: $corpus_what" "$(hdf5_input "$file")" job.ini
  error "text corpus is $file"  "\[job\] input $file: $corpus_what" "$(text_input "$file")" job.ini
  error "weights are $file"     "\[model\] weights $file: $what" "$(weights "$file")" job.ini
  error "vocabulary is $file"   "vocabulary $file: $what" "$(text_input text.txt)" --set "tokenizer.vocab=$file" job.ini
  error "tokenizer.json is $file" "tokenizer $file: $what" "$(json_tokenizer "$file")" job.ini
done
error "plugin_path is a FIFO" "no plugin provides layer type 'scale'.*refused a-fifo: search directory is not a directory" \
  "$(with_plugins a-fifo "$(add_layer scale)")" job.ini
# /dev/stdin names whatever stdin is: a regular file works (one rank: under
# mpirun only rank 0 has the shell's stdin), a pipe is refused like a FIFO.
stdin=text.txt
odd_at 1 "corpus /dev/stdin from a file" "list(f['lengths'][:]) == [4]" "$(text_input /dev/stdin)" job.ini
rm -f pipe-fifo
mkfifo pipe-fifo
(sleep 5 > pipe-fifo &) # a writer that keeps the pipe open, as `cat x |` would
stdin=pipe-fifo
error_at 1 "corpus /dev/stdin from a pipe" "\[job\] input /dev/stdin: is a FIFO or pipe" "$(text_input /dev/stdin)" job.ini
stdin=
# A symbolic link and a hard link to the corpus are the corpus.
ln -sf good/input.h5 input-link.h5
ln -f good/input.h5 input-hardlink.h5
odd "corpus through a symbolic link" "f['hidden'].shape[0] > 0" "$(hdf5_input input-link.h5)" job.ini
odd "corpus through a hard link" "f['hidden'].shape[0] > 0" "$(hdf5_input input-hardlink.h5)" job.ini
error "output on /proc"         "\[job\] output /proc/x.h5: /proc is on a file system that cannot hold files" \
  's#^output = .*#output = /proc/x.h5#' job.ini

# --- integers: every integer key over its whole range, beyond int and long.
# Each value must be refused naming the key (no wrap to a small int).
for value in -1 2147483648 4294967297 9223372036854775808 -9223372036854775809; do
  for key in d_model vocab_size max_positions; do
    error_at 1 "[model] $key = $value" "$key.*'?$value'?.*(expected an integer|must)" \
      "s/^\[model\]/[model]\n$key = $value/; /^$key = [0-9]*\$/d" job.ini
  done
  # (at 4 ranks too for one value: the stage count decides the layout)
  layouts=1
  [ "$value" != 4294967297 ] || layouts="1 4"
  for key in max_seq_len batch_tokens window_documents max_id_bytes chunk_overlap output_dim \
      pipeline_stages threads; do
    error_at "$layouts" "[job] $key = $value" "$key.*'?$value'?.*(expected an integer|must)" \
      "/^$key = /d; s/^\[job\]/[job]\n$key = $value/" job.ini
  done
  error_at 1 "[encoder] repeat = $value" "repeat.*'?$value'?.*expected an integer" "s/^repeat = .*/repeat = $value/" job.ini
  error_at 1 "mha n_heads = $value" "n_heads.*$value" "s/^n_heads = .*/n_heads = $value/" job.ini
  error_at 1 "mha rope_dims = $value" "rope_dims.*$value" "s/^n_heads = .*/n_heads = 4\nrope_dims = $value/" job.ini
  error_at 1 "embedding position_offset = $value" "position_offset.*$value" \
    "s/^scale_by_sqrt_d = .*/scale_by_sqrt_d = true\nposition_offset = $value/" job.ini
done
error "threads above the range" "\[job\] threads = '4097': expected an integer in 0..4096" \
  's/^\[job\]/[job]\nthreads = 4097/' job.ini
error "vocab_size beyond int32" "\[model\] vocab_size = '2147483648': expected an integer in 0..2147483647" \
  's/^vocab_size = .*/vocab_size = 2147483648/' job.ini

# --- small cases that once passed silently
error "repeat below the weights' layers" \
  "\[encoder\] repeat = 5, but weights good/model.h5 hold group /encoder/5 too.*extra_layers = ignore" \
  's/^repeat = .*/repeat = 5/' job.ini
odd "repeat below the weights' layers, on purpose" "f['hidden'].shape[0] > 0" \
  's/^repeat = .*/repeat = 5\nextra_layers = ignore/' job.ini
rm -f 'out.h5   # a note' 'out.h5 ; a note'
odd "inline # comment"          "f['hidden'].shape[0] > 0" 's/^output = .*/output = out.h5   # a note/' job.ini
[ ! -e 'out.h5   # a note' ] || { failed=$((failed + 1)); echo "FAIL inline # comment: a file named with the comment exists"; }
odd "inline ; comment"          "f['hidden'].shape[0] > 0" 's/^output = .*/output = out.h5 ; a note/' job.ini
cp good/input.h5 'in#put.h5'
odd "# inside a value (no space before it)" "f['hidden'].shape[0] > 0" 's|^input = .*|input = in#put.h5|' job.ini
# No line cap: a 20,000-character line is read whole.
odd "20,000-character line"     "f['hidden'].shape[0] > 0" "\$a ; $(head -c 20000 /dev/zero | tr '\0' x)" job.ini

# --- weights
error "missing weights file"    "weights good/absent.h5: cannot open" "$(weights good/absent.h5)" job.ini
error "weights not HDF5"        "weights junk.h5: not an HDF5 file" "$(weights junk.h5)" job.ini
error "truncated weights"       "weights truncated-model.h5: " "$(weights truncated-model.h5)" job.ini
error "NaN in weights"          "dataset /encoder/2/ffn/in_weight holds a non-finite value" "$(weights nan.h5)" job.ini
error "Inf in weights"          "dataset /encoder/4/attention/qkv_weight holds a non-finite value" "$(weights inf.h5)" job.ini
error "weights dataset missing" "/encoder/3/ffn/out_bias" "$(weights no-bias.h5)" job.ini
error "d_model disagrees"       "expected shape \[1000, 32\], found \[1000, 64\]" 's/^d_model = .*/d_model = 32/' job.ini
error "vocab_size disagrees"    "dataset /embeddings/token_embeddings: expected shape \[999, 64\]" 's/^vocab_size = .*/vocab_size = 999/' job.ini

# --- HDF5 token-id corpora
error "id out of vocabulary"    "token id 5000 is outside the vocabulary" "$(hdf5_input big-ids.h5)" job.ini
error "empty corpus"            "the corpus holds no documents" "$(hdf5_input empty-ids.h5)" job.ini
error "input not HDF5"          "text-named.h5: cannot open the HDF5 corpus" "$(hdf5_input text-named.h5)" job.ini
error "truncated HDF5 input"    "truncated-input.h5: cannot open the HDF5 corpus" "$(hdf5_input truncated-input.h5)" job.ini
error "tokens of floats"        "float-tokens.h5: dataset 'tokens' must hold integers" "$(hdf5_input float-tokens.h5)" job.ini
error "tokens of rank 2"        "rank2-tokens.h5: dataset 'tokens' must have rank 1, found rank 2" "$(hdf5_input rank2-tokens.h5)" job.ini
error "offsets missing"         "no-offsets.h5: dataset 'offsets' not found" "$(hdf5_input no-offsets.h5)" job.ini
error "offsets not from 0"      "dataset 'offsets' must start at 0, found 1" "$(hdf5_input offsets-start.h5)" job.ini
error "offsets decrease"        "dataset 'offsets' decreases at entry 2" "$(hdf5_input offsets-decrease.h5)" job.ini
error "offsets end short"       "dataset 'offsets' ends at 3 but 'tokens' holds 4 tokens" "$(hdf5_input offsets-end.h5)" job.ini
error "negative token id"       "dataset 'tokens': document 1 has a negative token id -7" "$(hdf5_input negative-id.h5)" job.ini
error "int64 id beyond int32"   "dataset 'tokens': document 1 has token id 3000000000 at position 0, outside 0..2147483646" "$(hdf5_input huge-id.h5)" job.ini
error "uint64 id beyond int32"  "dataset 'tokens': document 1 has token id 18446744073709551615 at position 1" "$(hdf5_input huge-unsigned-id.h5)" job.ini
error "int64 negative id"       "dataset 'tokens': document 1 has a negative token id -1099511627776 at position 0" "$(hdf5_input huge-negative-id.h5)" job.ini
error "padded id beyond int32"  "dataset 'ids': document 1 has token id 34359738368 at position 1" "$(padded huge-padded-id.h5)" job.ini
error "never-written dataset"   "dataset 'offsets' declares 2400000 bytes of data but stores only 0" "$(hdf5_input unwritten.h5)" job.ini
error "padded length too long"  "dataset 'lengths': entry 1 is 5, outside \[0, 4\]" "$(padded padded-long.h5)" job.ini
error "padded ids of rank 1"    "dataset 'ids' must have rank 2, found rank 1" "$(padded padded-rank1.h5)" job.ini
error "padded half configured"  "needs both ids_dataset and lengths_dataset \(only ids_dataset is set\)" 's/^input_format = .*/input_format = hdf5\nids_dataset = tokens/' job.ini
error "tokenizer with ids"      "job.ini:[0-9]+: \[tokenizer\] is not used: the input holds token ids" '$a [tokenizer]\nvocab = vocab.txt' job.ini
error "truncation refused"      "more than max_seq_len" 's/^max_seq_len = .*/max_seq_len = 8\ntruncation = false/' job.ini

# --- text and JSON Lines corpora
error "text without vocabulary" "text input needs a vocabulary" 's#^input = .*#input = text.txt#; s#^input_format = .*#input_format = text#' job.ini
error "vocabulary missing"      "vocabulary [^ ]*absent.txt: cannot open: No such file" "$(text_input text.txt)" --set tokenizer.vocab=absent.txt job.ini
error "vocabulary lacks [CLS]"  "vocab-no-cls.txt lacks the special token \[CLS\]" "$(text_input text.txt)" --set tokenizer.vocab=vocab-no-cls.txt job.ini
error "vocabulary is /dev/zero" "vocabulary /dev/zero: is a character device" "$(text_input text.txt)" --set tokenizer.vocab=/dev/zero job.ini
error "corpus is an empty directory" "\[job\] input a-directory: the directory holds no file" "$(text_input a-directory)" job.ini
error "empty text corpus"       "the corpus holds no documents" "$(text_input empty.txt)" job.ini
error "NUL byte in a line"      "nul.txt: line 2: NUL byte at byte offset 16" "$(text_input nul.txt)" job.ini
error "UTF-16 text"             "utf16.txt: line 1: NUL byte at byte offset 3 \(is the file UTF-16 or binary\?\)" "$(text_input utf16.txt)" job.ini
error "invalid UTF-8 refused"   "bad-utf8.txt: document 1 \(0-based\): tokenizer: invalid UTF-8 at byte offset 7" \
  "$(text_input bad-utf8.txt 'text\ninvalid_utf8 = error')" job.ini
error "JSON field missing"      "records.jsonl: line 2: text field 'text' is missing" "$(text_input records.jsonl jsonl)" job.ini
error "JSON invalid"            "invalid.jsonl: line 2, column [0-9]+: invalid JSON" "$(text_input invalid.jsonl jsonl)" job.ini
error "JSON blank line"         "blank.jsonl: line 2: blank line" "$(text_input blank.jsonl jsonl)" job.ini
error "JSON not an object"      "array.jsonl: line 2: expected a JSON object, found an array" "$(text_input array.jsonl jsonl)" job.ini
error "JSON text not a string"  "number-text.jsonl: line 1: text field 'text' is an integer, expected a string" "$(text_input number-text.jsonl jsonl)" job.ini
error "JSON id missing"         "no-id.jsonl: line 2: id field 'id' is missing" "$(text_input no-id.jsonl 'jsonl\nid_field = id')" job.ini

# --- odd but valid corpora: the documented behaviour (docs/job-file.md, core/input/corpus.h)
odd "empty lines are empty documents" "list(f['lengths'][:]) == [4, 2, 4, 2]" "$(text_input empty-lines.txt)" job.ini
odd "CRLF line ends"            "list(f['lengths'][:]) == [4, 4]" "$(text_input crlf.txt)" job.ini
odd "10 MB line is truncated"   "list(f['lengths'][:]) == [4, 128, 3] and f['truncated'][1] == 2 * (10 * 1024 * 1024 // 12) - 126" \
  "$(text_input long-line.txt)" job.ini
odd "invalid UTF-8 replaced"    "list(f['lengths'][:]) == [4, 4]" "$(text_input bad-utf8.txt)" job.ini
odd "empty JSON text"           "list(f['lengths'][:]) == [2, 3]" "$(text_input empty-text.jsonl jsonl)" job.ini

# --- safetensors checkpoints (tfenc-import)
import_error "safetensors truncated"     "model.safetensors: tensor '.*' ends at data byte [0-9]+ but the file holds only [0-9]+ data bytes \(truncated file\?\)" st-truncated
import_error "safetensors header length" "model.safetensors: safetensors header length 1099511627776 does not fit the file" st-header-length
import_error "safetensors not JSON"      "model.safetensors: safetensors header is not valid JSON" st-not-json
import_error "safetensors unknown dtype" "model.safetensors: safetensors header: tensor '.*' has unknown dtype 'F31'" st-dtype
import_error "safetensors NaN"           "model.safetensors: tensor '$nan_tensor' holds a non-finite value at element 0" st-nan

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
