#!/bin/sh
# A corpus of many files, compressed or not. The same 1,000
# documents as one JSON Lines file, as 8 shards (plain, gzip, zstd, a
# two-member gzip, xz, a shard of one document and an empty one) named by a
# directory, a glob and a list file, and 10,000 one-document shards: every
# output bitwise equal to the single file's, at 1, 2 and 3 ranks and after
# SIGKILL + resume. Then the bad inputs, each one line naming the shard and
# the line: truncated and bit-flipped gzip and zstd, a glob that matches
# nothing, a FIFO among the shards, the output among the inputs, and a
# shard changed before a resume.
set -u
. "$(cd "$(dirname "$0")/../pipeline" && pwd)/common.sh"
work=$builddir/tests/data/generated/shards
failed=0

fail() {
  echo "shards: FAIL $*"
  failed=$((failed + 1))
}

prepare_example bert-text "$work" || { echo "shards: FAIL: cannot make a model"; exit 1; }
# 10,000 one-document shards; under the sanitizers 1,000 take the same
# paths (10,000 were more than half of the test's CPU time there). The
# normal build keeps the scale, where a descriptor or memory kept per shard
# would show.
tiny=10000
[ -z "${TFENC_SANITIZER_BUILD:-}" ] || tiny=1000
"$python" "$srcdir/tests/io/make_shards.py" "$work/corpus.txt" 20 "$work" "$tiny" || exit 1
command -v zstd >/dev/null || { echo "shards: FAIL: zstd not found (tests/deps/test.txt)"; exit 1; }
for f in "$work"/shards/*.tozst; do
  zstd -q -f "$f" -o "${f%.tozst}.zst" && rm -f "$f" || exit 1
done
TFENC_PLUGIN_PATH="$TFENC_PLUGIN_PATH:$builddir/tests/plugins/.libs"
export TFENC_PLUGIN_PATH
# Windows of 64 documents: the shards' boundaries fall inside windows, and
# windows start inside compressed shards.
common="--set job.id_field=id --set job.window_documents=64"

run() { # run RANKS OUTPUT INPUT [SETTINGS...]: the job, quietly
  ranks=$1 out=$2 input=$3
  shift 3
  # shellcheck disable=SC2086
  (cd "$work" && "$mpiexec" -n "$ranks" "$driver" --quiet $common "$@" \
     --set "job.input=$input" --set "job.output=$out" job.ini) > "$work/run.out" 2> "$work/run.err"
}

compare() { # compare BASELINE OTHER WHAT
  if result=$("$python" "$srcdir/tests/pipeline/compare_layouts.py" "$work/$1" "$work/$2"); then
    echo "shards: ok   $3: $result"
  else
    fail "$3: $result"
  fi
}

(cd "$work" && rm -f one.h5 dir-*.h5 glob.h5 list.h5 tiny*.h5 killed.h5 bad.h5 changed.h5 pq*.h5)
run 1 one.h5 one.jsonl || { fail "the single file: $(head -n 1 "$work/run.err")"; exit 1; }
for ranks in 1 2 3; do
  if run "$ranks" dir-$ranks.h5 shards; then
    compare one.h5 dir-$ranks.h5 "a directory of 8 shards at $ranks ranks"
  else
    fail "a directory at $ranks ranks: $(head -n 1 "$work/run.err")"
  fi
done
if run 2 glob.h5 'shards/part-*.jsonl*'; then
  compare one.h5 glob.h5 "a glob at 2 ranks"
else
  fail "a glob: $(head -n 1 "$work/run.err")"
fi
if run 3 list.h5 @list.txt; then
  compare one.h5 list.h5 "a list file (shuffled) at 3 ranks"
else
  fail "a list file: $(head -n 1 "$work/run.err")"
fi
# The output keeps the shard list: paths, bytes, fingerprints, and each
# shard's first document and count (the part-01 shard holds documents 1..).
if "$python" - "$work/dir-2.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    rows = f["corpus_shards"][()]
paths = [p.decode() for p in rows["path"]]
assert paths == sorted(paths) and all(p.startswith("/") for p in paths), paths
first = rows[0]
assert paths[0].endswith("/shards/part-00.jsonl"), paths[0]
assert (first["first_document"], first["documents"], first["skipped"]) == (0, 1, 0), first
assert paths[1].endswith("part-01.jsonl.gz") and rows[1]["first_document"] == 1, rows[1]
assert paths[-1].endswith("part-07.jsonl") and rows[-1]["documents"] == 0, rows[-1]
assert rows["documents"].sum() == 1000, rows
PY
then
  echo "shards: ok   the output lists the 8 shards with their documents"
else
  fail "the output's shard list"
fi
# document_source traces each row to its shard and line: the id on that
# line of that file (decompressed by Python, or by the zstd program) is the
# row's id.
if result=$("$python" - "$work/dir-2.h5" "$work" <<'PY'
import gzip, json, lzma, subprocess, sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    paths = [p.decode() for p in f["corpus_shards"]["path"]]
    source, ids = f["document_source"][()], f["ids"][()]
def lines(path):
    data = open(path, "rb").read()
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    elif path.endswith(".xz"):
        data = lzma.decompress(data)
    elif path.endswith(".zst"):
        data = subprocess.run(["zstd", "-dc", path], capture_output=True, check=True).stdout
    return data.decode().splitlines()
files = [lines(p) for p in paths]
for row, (shard, line) in enumerate(zip(source["shard"], source["line"])):
    found = json.loads(files[shard][line - 1])["id"]
    assert found == ids[row].decode(), (row, shard, line, found, ids[row])
print(f"{len(ids)} rows traced to their lines in {len(files)} shards")
PY
); then
  echo "shards: ok   document_source: $result"
else
  fail "document_source: $result"
fi

# The third way: Parquet files written by pyarrow (several row groups,
# large strings, a dictionary-encoded text column, a file of one row and
# one of none), read through Arrow's C++ library. CI builds with it
# (tests/setup-python-venv installs the pyarrow wheel before configure).
pyarrow_python=${PYARROW_PYTHON:-${TFENC_VENV_PYTHON:-python3}}
if ! grep -q "^#define HAVE_PARQUET 1" "$builddir/config.h"; then
  fail "Parquet: this build has none (run tests/setup-python-venv, then configure)"
elif ! "$pyarrow_python" "$srcdir/tests/io/make_parquet.py" "$work/one.jsonl" "$work"; then
  fail "Parquet: cannot write the files with $pyarrow_python (pyarrow missing?)"
else
  for ranks in 1 2 3; do
    if run "$ranks" pq-$ranks.h5 pq; then
      compare one.h5 pq-$ranks.h5 "4 Parquet files at $ranks ranks"
    else
      fail "Parquet at $ranks ranks: $(head -n 1 "$work/run.err")"
    fi
  done
  if run 2 pqnull.h5 pqnull; then
    fail "a null text: the run succeeded"
  elif grep -q "pqnull/part-0.parquet: row 9 (row group 2): column 'text' is null" "$work/run.err"; then
    echo "shards: ok   a null text: $(head -n 1 "$work/run.err")"
  else
    fail "a null text: $(head -n 1 "$work/run.err")"
  fi
  if run 2 pqnull.h5 pqnull --set job.null_text=empty; then
    echo "shards: ok   null_text = empty reads it as an empty document"
  else
    fail "null_text = empty: $(head -n 1 "$work/run.err")"
  fi
  for case in "text_field=body|no column 'body' (text_field)" \
              "text_field=n|column 'n' (text_field) holds int64, not strings"; do
    setting=${case%%|*} pattern=${case#*|}
    if run 2 pqcol.h5 pq --set "job.$setting"; then
      fail "Parquet $setting: the run succeeded"
    elif grep -q "pq/part-[0-9].parquet: $pattern" "$work/run.err"; then
      echo "shards: ok   Parquet $setting: $(head -n 1 "$work/run.err")"
    else
      fail "Parquet $setting: $(head -n 1 "$work/run.err")"
    fi
  done
  if run 2 pqbad.h5 pqbad; then
    fail "a truncated Parquet file: the run succeeded"
  elif grep -q "pqbad/part-0.parquet: not a Parquet file" "$work/run.err"; then
    echo "shards: ok   a truncated Parquet file: $(head -n 1 "$work/run.err")"
  else
    fail "a truncated Parquet file: $(head -n 1 "$work/run.err")"
  fi
fi

# --dry-run shows the files with their compressions and documents, and
# --status the files an output was made from.
if (cd "$work" && "$mpiexec" -n 2 "$driver" --dry-run $common --set job.input=shards \
      --set job.output=dry.h5 job.ini) > "$work/dry.out" 2>&1 \
   && grep -q "^  8 files of jsonl, 5 compressed" "$work/dry.out" \
   && grep -q "part-04.jsonl.gz: 250 documents, compression gzip" "$work/dry.out" \
   && grep -q "part-05.jsonl.zst: 249 documents, compression zstd" "$work/dry.out"; then
  echo "shards: ok   --dry-run lists the shards"
else
  fail "--dry-run: $(grep -A9 '^corpus' "$work/dry.out")"
fi
if "$driver" --status "$work/dir-2.h5" > "$work/status.out" 2>&1 \
   && grep -q "^corpus: 8 files" "$work/status.out" \
   && grep -q "part-04.jsonl.gz: 250 documents from row 500" "$work/status.out"; then
  echo "shards: ok   --status lists the shards"
else
  fail "--status: $(grep -A9 '^corpus' "$work/status.out")"
fi

# The one-document shards (the time it takes is for make bench).
if run 2 tiny-one.h5 tiny.jsonl && run 2 tiny.h5 tiny; then
  compare tiny-one.h5 tiny.h5 "$tiny one-document shards at 2 ranks"
else
  fail "$tiny shards: $(head -n 1 "$work/run.err")"
fi

# SIGKILL part-way (the test plugin's pause layer slows every microbatch,
# and leaves the activations alone), then the same command resumes.
printf '\n[pause]\ntype = pause\nmilliseconds = 40\n' >> "$work/job.ini"
rm -f "$work/killed.h5"
(cd "$work" && exec "$mpiexec" -n 2 "$driver" $common --set job.input=shards \
   --set job.output=killed.h5 job.ini) > "$work/run.out" 2> "$work/run.err" &
pid=$!
kill_part_way "$pid" "$work/killed.h5" 0.4
read -r done total complete <<EOF
$("$python" "$srcdir/tests/resume/progress.py" count "$work/killed.h5")
EOF
echo "shards: killed with $done of $total documents finished (complete = $complete)"
[ "$done" -lt "$total" ] || fail "SIGKILL: the run had finished before the kill"
if run 3 killed.h5 shards; then
  compare one.h5 killed.h5 "killed at 2 ranks, resumed at 3"
else
  fail "the resume: $(head -n 1 "$work/run.err")"
fi

# refused WHAT PATTERN INPUT [SETTINGS...]: the run must fail with one line
# that matches PATTERN.
refused() {
  what=$1 pattern=$2
  shift 2
  if run 2 bad.h5 "$@"; then
    fail "$what: the run succeeded"
  elif ! grep -q "$pattern" "$work/run.err"; then
    fail "$what: expected '$pattern', got: $(head -n 1 "$work/run.err")"
  else
    echo "shards: ok   $what: $(grep "$pattern" "$work/run.err" | head -n 1)"
  fi
}
sed -i '/^\[pause\]/,$d' "$work/job.ini"
rm -rf "$work/bad" && cp -R "$work/shards" "$work/bad"
gz=part-04.jsonl.gz zst=part-05.jsonl.zst
head -c 2000 "$work/shards/$gz" > "$work/bad/$gz"
refused "a truncated gzip shard" "bad/$gz: line [0-9]*: truncated gzip stream" bad
cp "$work/shards/$gz" "$work/bad/$gz"
head -c 1500 "$work/shards/$zst" > "$work/bad/$zst"
refused "a truncated zstd shard" "bad/$zst: line [0-9]*: truncated zstd stream" bad
cp "$work/shards/$zst" "$work/bad/$zst"
flip() { # flip FILE: one bit in the middle
  "$python" -c "import sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[len(b) // 2] ^= 0x10; open(p, 'wb').write(b)" "$1"
}
flip "$work/bad/$gz"
# The CRC comes at the end of the member: the flipped bytes may be read as
# a line first and fail as JSON; either way the shard and line are named.
refused "a bit-flipped gzip shard" \
  "bad/$gz: line [0-9]*\(: corrupt gzip stream\|, column [0-9]*: invalid JSON\)" bad
cp "$work/shards/$gz" "$work/bad/$gz"
flip "$work/bad/$zst"
refused "a bit-flipped zstd shard" "bad/$zst: line [0-9]*: corrupt zstd stream" bad
cp "$work/shards/$zst" "$work/bad/$zst"
refused "a glob that matches nothing" "input bad/\*.txt: the pattern matches no file" 'bad/*.txt'
# Positions keep a file's index above bit 40: a plain file of 1 TiB or more
# in a corpus of several is refused (a sparse file: nothing is written).
rm -rf "$work/huge" && mkdir -p "$work/huge" && cp "$work/shards/part-00.jsonl" "$work/huge/"
if truncate -s 1100G "$work/huge/part-01.jsonl"; then
  refused "a plain shard over 1 TiB" "huge/part-01.jsonl: 1181116006400 bytes, more than the 1 TiB" huge
else
  fail "cannot make a sparse 1100 GB file for the 1 TiB check"
fi
rm -rf "$work/huge"
mkfifo "$work/bad/part-99.jsonl"
refused "a FIFO among the shards" "bad/part-99.jsonl: .*not a regular file" bad
rm -f "$work/bad/part-99.jsonl"
if run 2 bad/part-03.jsonl bad; then
  fail "the output among the shards: the run succeeded"
elif ! grep -q "bad/part-03.jsonl: the output is the same file as a corpus shard" "$work/run.err"; then
  fail "the output among the shards: $(head -n 1 "$work/run.err")"
else
  echo "shards: ok   the output among the shards: $(head -n 1 "$work/run.err")"
fi
# A resume over a changed shard names it.
rm -f "$work/changed.h5"
run 2 changed.h5 bad || fail "the run before the change: $(head -n 1 "$work/run.err")"
sed -i '1s/a/A/' "$work/bad/part-03.jsonl"
if run 2 changed.h5 bad; then
  fail "a shard changed before a resume: the run succeeded"
elif ! grep -q "shard .*bad/part-03.jsonl changed since the run that began this file" "$work/run.err"; then
  fail "a shard changed before a resume: $(head -n 1 "$work/run.err")"
else
  echo "shards: ok   a changed shard: $(head -n 1 "$work/run.err")"
fi

[ "$failed" -eq 0 ] || { echo "shards: FAIL ($failed)"; exit 1; }
echo "shards: all ok"
