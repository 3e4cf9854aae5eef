#!/bin/sh
# The corpus formats as one table (core/input/formats.c): --list-formats
# prints it (and whether this build reads Parquet, as configure decided),
# docs/job-file.md's table of formats agrees with it, the file names choose
# a format through it (.ndjson, and .json behind gzip, are JSON Lines), and
# --dry-run says which format's reader reads the corpus and what it reads.
set -u
. "$(cd "$(dirname "$0")/../pipeline" && pwd)/common.sh"
work=$builddir/tests/data/generated/formats
failed=0

fail() {
  echo "formats: FAIL $*"
  failed=$((failed + 1))
}

prepare_example bert-text "$work" || { echo "formats: FAIL: cannot make a model"; exit 1; }

# --- the table, as --list-formats prints it
if ! "$driver" --list-formats > "$work/list.txt" 2>&1; then
  fail "--list-formats: $(head -n 1 "$work/list.txt")"
else
  for line in "  text     plain text: a document is a line; any file name the others do not claim" \
              "  jsonl    JSON Lines: a document is a line's object; .jsonl .ndjson, and .json before .gz .zst .zstd .xz" \
              "  hdf5     HDF5 token ids: a document is a run of token ids; .h5 .hdf5"; do
    if grep -qxF "$line" "$work/list.txt"; then
      echo "formats: ok   --list-formats:$line"
    else
      fail "--list-formats lacks '$line': $(cat "$work/list.txt")"
    fi
  done
  # Parquet is listed either way; configure decided whether it is read.
  parquet=$(grep "^  parquet  Parquet: a document is a row; .parquet .pq" "$work/list.txt")
  if grep -q "^#define HAVE_PARQUET 1" "$builddir/config.h"; then
    expected="  parquet  Parquet: a document is a row; .parquet .pq"
  else
    expected="  parquet  Parquet: a document is a row; .parquet .pq; not in this build: Apache Arrow was not found: run tests/setup-python-venv and configure --with-parquet"
  fi
  if [ "$parquet" = "$expected" ]; then
    echo "formats: ok   --list-formats says whether this build reads Parquet:$parquet"
  else
    fail "--list-formats' Parquet line: '$parquet', expected '$expected'"
  fi
fi

# --- docs/job-file.md's table is the same table
if "$python" "$srcdir/tests/formats_doc.py" "$driver" "$srcdir/docs/job-file.md" \
     > "$work/doc.txt" 2>&1; then
  echo "formats: ok   $(tail -n 1 "$work/doc.txt")"
else
  cat "$work/doc.txt"
  fail "docs/job-file.md's table of formats disagrees with --list-formats"
fi
# ... and the check notices a table that drifted.
sed 's/| `.h5` `.hdf5` |/| `.h5` |/' "$srcdir/docs/job-file.md" > "$work/drifted.md"
if "$python" "$srcdir/tests/formats_doc.py" "$driver" "$work/drifted.md" > "$work/doc.txt" 2>&1; then
  fail "formats_doc.py took a table without .hdf5"
else
  echo "formats: ok   formats_doc.py refuses a table without .hdf5"
fi

# --- the file names choose through the table, and --dry-run says what reads
"$python" - "$work/corpus.txt" "$work" <<'PY' || exit 1
import gzip, json, sys
texts = open(sys.argv[1]).read().splitlines()[:20]
lines = "".join(json.dumps({"text": t, "id": str(i)}) + "\n" for i, t in enumerate(texts))
open(sys.argv[2] + "/docs.ndjson", "w").write(lines)
with gzip.open(sys.argv[2] + "/c4-0001.json.gz", "wt") as f:
    f.write(lines)
PY
dry() { # dry INPUT WHAT EXPECTED [SETTINGS...]: --dry-run prints EXPECTED
  input=$1 what=$2 expected=$3
  shift 3
  if (cd "$work" && "$driver" --dry-run --set "job.input=$input" "$@" job.ini) \
       > "$work/dry.out" 2>&1 && grep -qxF "$expected" "$work/dry.out"; then
    echo "formats: ok   $what:$expected"
  else
    fail "$what: $(grep -e '^  read as' -e 'tfenc-batch:' "$work/dry.out" || tail -n 2 "$work/dry.out")"
  fi
}
dry corpus.txt "a text file" "  read as text (plain text: one document a line)"
dry docs.ndjson ".ndjson, ids" \
    "  read as jsonl (JSON Lines: the text in field 'text', ids in field 'id')" \
    --set job.id_field=id
dry c4-0001.json.gz ".json behind gzip, null texts left out" \
    "  read as jsonl (JSON Lines: the text in field 'text', null texts left out)" \
    --set job.null_text=skip

[ "$failed" -eq 0 ] || { echo "formats: $failed failed"; exit 1; }
echo "formats: all passed"
