#!/bin/sh
# A corpus of several files is the files it is, however their paths are
# spelled (core/input/sources.c, the output's corpus_shards):
#   - a 2-rank job over a directory of compressed shards, stopped part-way
#     (SIGKILL, or SIGTERM), resumes to the uninterrupted run's rows, bit for
#     bit: with the command --status prints, run as printed; from another
#     directory with a relative job path; with the job path spelled
#     ./job/../job/job.ini; through a symbolic link to the job's directory;
#     and a file whose shard table is in the tab-separated attribute older
#     versions wrote (read by --status and resumed alike);
#   - a shard changed before a resume is refused with advice that keeps the
#     finished rows (another output), not resume = false alone;
#   - one file reached twice (a symbolic link, a hard link, ./a and a in a
#     list file) is refused in one line naming both spellings;
#   - ranks that see other files for the same input (a node's lagging file
#     system) are refused in one line before any row is written;
#   - shard names holding a tab or a newline: corpus_shards keeps them
#     exactly (a dataset, one row per file), document_source leads to the
#     right line of the right file, and --status lists them on one line each.
set -u
. "$(cd "$(dirname "$0")/../pipeline" && pwd)/common.sh"
work=$builddir/tests/data/generated/shard_paths
failed=0
fail() {
  echo "shard_paths: FAIL $*"
  failed=$((failed + 1))
}
ok() { echo "shard_paths: ok   $*"; }

rm -rf "$work"
prepare_example bert-text "$work/job" || { echo "shard_paths: FAIL: cannot make a model"; exit 1; }
job=$work/job
# 500 documents in 8 shards: plain, gzip, zstd, xz, one of one document and
# an empty one (tests/io/make_shards.py).
"$python" "$srcdir/tests/io/make_shards.py" "$job/corpus.txt" 10 "$job" 1 || exit 1
command -v zstd >/dev/null || { echo "shard_paths: FAIL: zstd not found (tests/deps/test.txt)"; exit 1; }
for f in "$job"/shards/*.tozst; do
  zstd -q -f "$f" -o "${f%.tozst}.zst" && rm -f "$f" || exit 1
done
TFENC_PLUGIN_PATH="$TFENC_PLUGIN_PATH:$builddir/tests/plugins/.libs"
export TFENC_PLUGIN_PATH
# Every microbatch pauses (the test plugin's pause layer leaves the
# activations alone), so that a job can be stopped part-way; windows of 16
# documents, so that many windows are finished when it is.
sed -i 's/^input = .*/input = shards/' "$job/job.ini"
printf '\n[pause]\ntype = pause\nmilliseconds = 150\n' >> "$job/job.ini"
common="--set job.id_field=id --set job.window_documents=16 --set job.batch_tokens=256"
directory=$(cd "$job" && pwd -P)
ln -s job "$work/link"
# The resume command --status prints names tfenc-batch and mpirun as a
# user types them.
mkdir -p "$work/bin"
ln -sf "$driver" "$work/bin/tfenc-batch"
printf '#!/bin/sh\nexec "%s" "$@"\n' "$mpiexec" > "$work/bin/mpirun"
chmod +x "$work/bin/mpirun"
PATH=$work/bin:$PATH
export PATH

# batch DIR OUTPUT JOB [SETTINGS...]: tfenc-batch at $ranks ranks (2 unless
# set), run in DIR.
batch() {
  dir=$1 out=$2 jobfile=$3
  shift 3
  # shellcheck disable=SC2086
  (cd "$dir" && "$mpiexec" -n "${ranks:-2}" "$driver" --quiet $common "$@" --set "job.output=$out" \
     "$jobfile") > "$work/run.out" 2> "$work/run.err"
}
compare() { # compare OUTPUT WHAT
  if result=$("$python" "$srcdir/tests/pipeline/compare_layouts.py" "$job/whole.h5" "$job/$1"); then
    ok "$2: $result"
  else
    fail "$2: $result"
  fi
}
# stop SIGNAL OUTPUT DIR JOB: starts the job in DIR at 2 ranks, and stops it
# with SIGNAL once 40% of its documents are finished.
stop() {
  signal=$1 out=$2 dir=$3 jobfile=$4
  rm -f "$job/$out"
  # shellcheck disable=SC2086
  (cd "$dir" && exec "$mpiexec" -n 2 "$driver" $common --set "job.output=$out" "$jobfile") \
    > "$work/run.out" 2> "$work/run.err" &
  pid=$!
  if [ "$signal" = KILL ]; then
    kill_part_way "$pid" "$job/$out" 0.4
  else
    "$python" "$srcdir/tests/resume/progress.py" wait "$job/$out" 0.4 "$pid"
    kill -TERM "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  fi
  read -r done total complete <<EOF
$("$python" "$srcdir/tests/resume/progress.py" count "$job/$out")
EOF
  if [ "$done" -gt 0 ] && [ "$done" -lt "$total" ]; then
    ok "SIG$signal left $out with $done of $total documents finished"
  else
    fail "SIG$signal: $out has $done of $total documents finished (complete = $complete)"
  fi
}

batch "$job" whole.h5 job.ini || { fail "the uninterrupted run: $(head -n 1 "$work/run.err")"; exit 1; }

# (a) The command --status prints, run as printed from elsewhere: it
# changes to the directory the job ran in and names the job by its
# absolute path, where the first run named it job.ini.
stop KILL printed.h5 "$job" job.ini
resume=$("$driver" --status "$job/printed.h5" 2>&1 | sed -n '/^resume with:$/{n;s/^  //;p;}')
case $resume in
  "cd $directory && mpirun -n 2 tfenc-batch "*"$directory/job.ini") ;;
  *) fail "--status printed the resume command '$resume'" ;;
esac
if (cd / && sh -c "$resume") > "$work/resume.out" 2>&1; then
  compare printed.h5 "killed, resumed with the command --status prints"
else
  fail "the command --status prints: $(grep -v '^\[' "$work/resume.out" | head -n 1)"
fi

# (b) Begun in the job's directory, stopped by SIGTERM, resumed from its
# parent with a relative job path.
stop TERM relative.h5 "$job" job.ini
if batch "$work" relative.h5 job/job.ini; then
  compare relative.h5 "SIGTERM, resumed from another directory as job/job.ini"
else
  fail "resumed from another directory: $(head -n 1 "$work/run.err")"
fi

# (c) The job path spelled another way: through '..', and through a
# symbolic link to the job's directory (begun through the link, resumed
# through the real path, and the other way round).
stop KILL dotdot.h5 "$work" job/job.ini
if batch "$job/shards" dotdot.h5 ./../../job/../job/job.ini; then
  compare dotdot.h5 "resumed as ./../../job/../job/job.ini"
else
  fail "resumed as ./../../job/../job/job.ini: $(head -n 1 "$work/run.err")"
fi
stop KILL linked.h5 "$work" link/job.ini
if batch / linked.h5 "$directory/job.ini"; then
  compare linked.h5 "begun through a symbolic link to the job's directory, resumed by its real path"
else
  fail "begun through a link, resumed by the real path: $(head -n 1 "$work/run.err")"
fi
stop KILL linked2.h5 "$job" job.ini
ranks=1
if batch "$work/link" linked2.h5 ./job.ini; then
  compare linked2.h5 "resumed at 1 rank from inside a symbolic link to the job's directory"
else
  fail "resumed through a link: $(head -n 1 "$work/run.err")"
fi
ranks=2

# The files record each shard by its absolute path, directory resolved,
# whichever way the job was named.
if "$python" - "$job/linked.h5" "$directory/shards" <<'PY'
import os, sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    paths = [p.decode() for p in f["corpus_shards"]["path"]]
assert paths == sorted(os.path.join(sys.argv[2], n) for n in os.listdir(sys.argv[2])), paths
PY
then
  ok "corpus_shards records the shards' resolved paths"
else
  fail "corpus_shards' paths"
fi

# A file that keeps its shard table as older versions did (one
# tab-separated line per shard, paths as the job spelled them, the corpus
# fingerprint over those spellings): --status lists the shards, and the
# job resumes it.
stop KILL older.h5 "$job" job.ini
if "$python" - "$job/older.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    rows = f["corpus_shards"][()]
    del f["corpus_shards"]
    f.attrs["corpus_fingerprint"] = "0" * 64
    f.attrs["corpus_shards"] = "".join(
        "shards/%s\t%d\t%s\t%d\t%d\t%d\n" % (r["path"].decode().rsplit("/", 1)[1], r["bytes"],
                                           r["fingerprint"].decode(), r["first_document"],
                                           r["documents"], r["skipped"]) for r in rows)
PY
then
  "$driver" --status "$job/older.h5" > "$work/status.out" 2>&1
  if grep -q '^corpus: 8 files' "$work/status.out" \
     && grep -q '^  shards/part-04.jsonl.gz: [0-9]* documents from row' "$work/status.out"; then
    ok "--status reads the older tab-separated table"
  else
    fail "--status on the older table: $(grep -A3 '^corpus' "$work/status.out" | head -n 4)"
  fi
  if batch "$work" older.h5 job/job.ini; then
    compare older.h5 "the older table, resumed from another directory"
  else
    fail "the older table, resumed: $(head -n 1 "$work/run.err")"
  fi
else
  fail "cannot rewrite the table as older versions wrote it"
fi

# A shard changed before a resume is refused, naming it, with advice that
# keeps the finished rows.
rm -rf "$work/changed" && mkdir "$work/changed" && cp -R "$job/." "$work/changed/"
find "$work/changed" -name '*.h5' ! -name model.h5 -exec rm -f {} +
job=$work/changed
stop KILL changed.h5 "$job" job.ini
sed -i '1s/a/A/' "$job/shards/part-03.jsonl"
if batch "$job" changed.h5 job.ini; then
  fail "a shard changed before a resume: the run succeeded"
elif grep -q "shard .*/changed/shards/part-03.jsonl changed since the run that began this file read it" "$work/run.err" \
     && grep -q "choose another \[job\] output, which keeps this file and its finished rows" "$work/run.err"; then
  ok "a changed shard: $(head -n 1 "$work/run.err")"
else
  fail "a changed shard: $(head -n 1 "$work/run.err")"
fi
job=$work/job

# One file reached twice is refused, naming both spellings.
rm -rf "$work/twice" && mkdir -p "$work/twice"
cp "$job/shards/part-00.jsonl" "$job/shards/part-03.jsonl" "$work/twice/"
twice() { # twice WHAT INPUT PATTERN
  rm -f "$job/twice.h5"
  if batch "$work" twice.h5 job/job.ini --set "job.input=$2"; then
    fail "$1: the run succeeded"
  elif [ "$(grep -c . "$work/run.err")" -ge 1 ] && grep -q "$3" "$work/run.err"; then
    ok "$1: $(grep "$3" "$work/run.err" | head -n 1)"
  else
    fail "$1: expected '$3', got: $(head -n 1 "$work/run.err")"
  fi
}
ln -s part-03.jsonl "$work/twice/part-99.jsonl"
twice "a symbolic link in the directory" ../twice \
  "twice/part-03.jsonl and .*twice/part-99.jsonl are the same file"
rm "$work/twice/part-99.jsonl" && ln "$work/twice/part-03.jsonl" "$work/twice/part-99.jsonl"
twice "a hard link in the directory" ../twice \
  "twice/part-03.jsonl and .*twice/part-99.jsonl are the same file"
rm "$work/twice/part-99.jsonl"
printf 'part-00.jsonl\n./part-03.jsonl\npart-03.jsonl\n' > "$work/twice/list.txt"
twice "./a and a in a list file" @../twice/list.txt \
  "twice/\./part-03.jsonl and .*twice/part-03.jsonl are the same file"
printf 'part-00.jsonl\n%s/part-00.jsonl\n' "$work/link/../twice" > "$work/twice/list.txt"
twice "a relative and an absolute path in a list file" @../twice/list.txt \
  "part-00.jsonl and .*part-00.jsonl are the same file"

# Names with a tab and a newline.
rm -rf "$work/odd" && mkdir -p "$work/odd"
tab=$(printf '\t')
newline='
'
cp "$job/shards/part-00.jsonl" "$work/odd/a${tab}b.jsonl"
cp "$job/shards/part-03.jsonl" "$work/odd/c${newline}d.jsonl"
cp "$job/shards/part-06.jsonl.xz" "$work/odd/e.jsonl.xz"
if batch "$job" odd.h5 job.ini --set job.input=../odd; then
  if result=$("$python" - "$job/odd.h5" "$(cd "$work/odd" && pwd -P)" <<'PY'
import json, lzma, os, sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    table = f["corpus_shards"][()]
    source, ids = f["document_source"][()], f["ids"][()]
paths = [p.decode() for p in table["path"]]
expected = sorted(os.path.join(sys.argv[2], n) for n in os.listdir(sys.argv[2]))
assert paths == expected, (paths, expected)
def lines(path):
    data = open(path, "rb").read()
    return (lzma.decompress(data) if path.endswith(".xz") else data).decode().splitlines()
files = [lines(p) for p in paths]
assert [len(x) for x in files] == list(table["documents"]), table
for row, (shard, line) in enumerate(zip(source["shard"], source["line"])):
    assert json.loads(files[shard][line - 1])["id"] == ids[row].decode(), row
print(f"{len(ids)} rows traced to their lines in {len(files)} files")
PY
  ); then
    ok "names with a tab and a newline: $result"
  else
    fail "names with a tab and a newline: $result"
  fi
  "$driver" --status "$job/odd.h5" > "$work/status.out" 2>&1
  if grep -q '^corpus: 3 files' "$work/status.out" \
     && grep -q '^  .*/odd/a\\tb.jsonl: [0-9]* documents from row 0$' "$work/status.out" \
     && grep -q '^  .*/odd/c\\nd.jsonl: [0-9]* documents from row' "$work/status.out" \
     && [ "$(sed -n '/^corpus:/,/^[^ ]/p' "$work/status.out" | grep -c '^  ')" -eq 3 ]; then
    ok "--status lists the odd names, one line each"
  else
    fail "--status on the odd names: $(sed -n '/^corpus:/,/^[^ ]/p' "$work/status.out")"
  fi
else
  fail "names with a tab and a newline: $(head -n 1 "$work/run.err")"
fi

# Ranks that see other files (a node whose file system lags): each rank
# expands `input = shards` in its own directory, one of which holds a shard
# more; the job is refused in one line naming the rank, before any row.
rm -rf "$work/node_a" "$work/node_b"
mkdir -p "$work/node_a" "$work/node_b"
for node in node_a node_b; do
  cp -r "$job/shards" "$job/model.h5" "$job/vocab.txt" "$job/job.ini" "$work/$node/"
done
printf '{"id": "late", "text": "a shard the other node does not see yet"}\n' \
  > "$work/node_b/shards/z-late.jsonl"
seen=$(find "$work/node_a/shards" -type f | wc -l)
# shellcheck disable=SC2086
(cd "$work" && "$mpiexec" -n 1 --wdir node_a "$driver" --quiet $common --set job.output=out.h5 \
   job.ini : -n 1 --wdir node_b "$driver" --quiet $common --set job.output=out.h5 job.ini) \
  > "$work/run.out" 2> "$work/run.err"
code=$?
if [ "$code" -ne 0 ] && [ "$(grep -c "^tfenc-batch:" "$work/run.err")" -eq 1 ] \
   && grep -q "rank 1 sees other files than rank 0 ($seen to $((seen + 1)) files" "$work/run.err" \
   && [ ! -e "$work/node_a/out.h5" ] && [ ! -e "$work/node_b/out.h5" ]; then
  ok "ranks that see other files are refused in one line: $(grep "^tfenc-batch:" "$work/run.err")"
else
  fail "ranks that see other files (exit $code): $(head -n 3 "$work/run.err")"
fi

[ "$failed" -eq 0 ] || { echo "shard_paths: FAIL ($failed)"; exit 1; }
echo "shard_paths: all ok"
