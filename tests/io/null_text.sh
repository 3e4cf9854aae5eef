#!/bin/sh
# [job] null_text: a null text ("text": null in JSON Lines, a null in a
# Parquet text column) is an error naming the file and line, an empty
# document (empty), or left out (skip). Skipping: the output equals, bit
# for bit, that of the same corpus as one file without the null records,
# at 1, 2 and 3 ranks (shares start inside the plain shards) and after
# SIGKILL + resume; document_source traces every row to its shard and line
# (row), and corpus_shards counts what each shard left out.
set -u
. "$(cd "$(dirname "$0")/../pipeline" && pwd)/common.sh"
work=$builddir/tests/data/generated/null_text
failed=0

fail() {
  echo "null_text: FAIL $*"
  failed=$((failed + 1))
}

prepare_example bert-text "$work" || { echo "null_text: FAIL: cannot make a model"; exit 1; }
"$python" "$srcdir/tests/io/make_null_texts.py" "$work/corpus.txt" 4 "$work" || exit 1
TFENC_PLUGIN_PATH="$TFENC_PLUGIN_PATH:$builddir/tests/plugins/.libs"
export TFENC_PLUGIN_PATH
common="--set job.id_field=id --set job.window_documents=64"

run() { # run RANKS OUTPUT INPUT [SETTINGS...]: the job, quietly
  ranks=$1 out=$2 input=$3
  shift 3
  # shellcheck disable=SC2086
  (cd "$work" && "$mpiexec" -n "$ranks" "$driver" --quiet $common "$@" \
     --set "job.input=$input" --set "job.output=$out" job.ini) > "$work/run.out" 2> "$work/run.err"
}

check() { # check OUTPUT WHAT [ROW_BASE]
  if result=$("$python" "$srcdir/tests/io/check_sources.py" "$work/one.h5" "$work/$1" \
                "$work/expected.json" "$work/skipped.json" ${3:-1}); then
    echo "null_text: ok   $2: $result"
  else
    fail "$2: $result"
  fi
}

(cd "$work" && rm -f one.h5 skip-*.h5 empty.h5 killed.h5 pq.h5)
run 1 one.h5 filtered.jsonl || { fail "the filtered file: $(head -n 1 "$work/run.err")"; exit 1; }
for ranks in 1 2 3; do
  if run "$ranks" skip-$ranks.h5 nulls --set job.null_text=skip; then
    check skip-$ranks.h5 "null_text = skip at $ranks ranks"
  else
    fail "null_text = skip at $ranks ranks: $(head -n 1 "$work/run.err")"
  fi
done

# --dry-run and --status say what each file left out.
if (cd "$work" && "$mpiexec" -n 2 "$driver" --dry-run $common --set job.null_text=skip \
      --set job.input=nulls --set job.output=dry.h5 job.ini) > "$work/dry.out" 2>&1 \
   && grep -q "part-01.jsonl.gz: [0-9]* documents, compression gzip, 7 null texts left out" \
        "$work/dry.out"; then
  echo "null_text: ok   --dry-run: $(grep "part-01" "$work/dry.out")"
else
  fail "--dry-run: $(grep -A4 "files of" "$work/dry.out")"
fi
if "$driver" --status "$work/skip-2.h5" > "$work/status.out" 2>&1 \
   && grep -q "^corpus: 3 files (document_source gives each row's file and line)" "$work/status.out" \
   && grep -q "part-01.jsonl.gz: [0-9]* documents from row [0-9]*, 7 null texts left out" \
        "$work/status.out"; then
  echo "null_text: ok   --status: $(grep "part-01" "$work/status.out")"
else
  fail "--status: $(grep -A4 "^corpus" "$work/status.out")"
fi

# The default: the first null text stops the job, naming the file and line.
if run 1 error.h5 nulls; then
  fail "a null text: the run succeeded"
elif grep -q "nulls/part-00.jsonl: line 1: text field 'text' is null (set \[job\] null_text" \
       "$work/run.err"; then
  echo "null_text: ok   a null text: $(head -n 1 "$work/run.err")"
else
  fail "a null text: $(head -n 1 "$work/run.err")"
fi
if run 2 empty.h5 nulls --set job.null_text=empty \
   && "$python" - "$work/empty.h5" "$work/rows.json" <<'PY'
import json, sys, h5py
rows = [r for shard in json.load(open(sys.argv[2])) for r in shard]
with h5py.File(sys.argv[1], "r") as f:
    assert len(f["lengths"]) == len(rows), (len(f["lengths"]), len(rows))
    # An empty document is [CLS] [SEP]: two tokens.
    for i, r in enumerate(rows):
        assert (f["lengths"][i] == 2) == (r["text"] is None or r["text"] == ""), i
PY
then
  echo "null_text: ok   null_text = empty keeps every row, the null ones empty"
else
  fail "null_text = empty: $(head -n 1 "$work/run.err")"
fi

# SIGKILL part-way (the pause layer slows every microbatch), then the same
# job resumes at another layout.
printf '\n[pause]\ntype = pause\nmilliseconds = 400\n' >> "$work/job.ini"
(cd "$work" && exec "$mpiexec" -n 2 "$driver" $common --set job.null_text=skip \
   --set job.input=nulls --set job.output=killed.h5 job.ini) > "$work/run.out" 2> "$work/run.err" &
pid=$!
kill_part_way "$pid" "$work/killed.h5" 0.3
read -r done total complete <<EOF2
$("$python" "$srcdir/tests/resume/progress.py" count "$work/killed.h5")
EOF2
echo "null_text: killed with $done of $total documents finished (complete = $complete)"
[ "$done" -lt "$total" ] || fail "SIGKILL: the run had finished before the kill"
# The resume shows its progress: the last line counts the files read.
if (cd "$work" && "$mpiexec" -n 3 "$driver" $common --set job.null_text=skip \
      --set job.input=nulls --set job.output=killed.h5 job.ini) > "$work/run.out" 2> "$work/run.err"; then
  check killed.h5 "killed at 2 ranks, resumed at 3"
  if grep -q "documents finished (100.0%), .*, files read 3/3$" "$work/run.err"; then
    echo "null_text: ok   the progress line counts files: $(grep -o "files read [0-9]*/[0-9]*" "$work/run.err" | tail -n 1)"
  else
    fail "the progress line: $(grep "documents" "$work/run.err" | tail -n 1)"
  fi
else
  fail "the resume: $(head -n 1 "$work/run.err")"
fi
sed -i '/^\[pause\]/,$d' "$work/job.ini"

# Parquet nulls, left out the same way (rows are 0-based).
pyarrow_python=${PYARROW_PYTHON:-${TFENC_VENV_PYTHON:-python3}}
if ! grep -q "^#define HAVE_PARQUET 1" "$builddir/config.h"; then
  fail "Parquet: this build has none (run tests/setup-python-venv, then configure)"
elif ! "$pyarrow_python" "$srcdir/tests/io/make_null_parquet.py" "$work"; then
  fail "Parquet: cannot write the files with $pyarrow_python (pyarrow missing?)"
elif run 2 pq.h5 pqnulls --set job.null_text=skip; then
  check pq.h5 "Parquet nulls, null_text = skip at 2 ranks" 0
else
  fail "Parquet nulls: $(head -n 1 "$work/run.err")"
fi

[ "$failed" -eq 0 ] || { echo "null_text: FAIL ($failed)"; exit 1; }
echo "null_text: all ok"
