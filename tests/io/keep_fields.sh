#!/bin/sh
# [job] keep_fields: the named fields of JSON Lines records and Parquet
# rows go into the output beside ids (strings, int64, float64; nulls and
# absent fields in a NAME_valid mask), checked value by value against the
# corpus read in Python; the same file bit for bit at 1 and 2 ranks (as 2
# replicas and as 2 pipeline stages), with small windows over plain, gzip
# and Parquet shards, and after SIGKILL + resume; --status and --status --json list them; tfenc-export writes them
# as nullable Parquet columns; and each bad input is refused in one line.
set -u
. "$(cd "$(dirname "$0")/../pipeline" && pwd)/common.sh"
work=$builddir/tests/data/generated/keep_fields
failed=0
fields="url lang n score big"
exporter=$builddir/drivers/tfenc-export

fail() {
  echo "keep_fields: FAIL $*"
  failed=$((failed + 1))
}

prepare_example bert-text "$work" || { echo "keep_fields: FAIL: cannot make a model"; exit 1; }
# Parquet in and out is part of the feature: CI builds with Arrow
# (tests/setup-python-venv installs the pyarrow wheel before configure).
pyarrow_python=${PYARROW_PYTHON:-${TFENC_VENV_PYTHON:-python3}}
grep -q "^#define HAVE_PARQUET 1" "$builddir/config.h" \
  || { echo "keep_fields: FAIL: this build has no Parquet (run tests/setup-python-venv, then configure)"; exit 1; }
"$pyarrow_python" "$srcdir/tests/io/make_kept.py" "$work/corpus.txt" 4 "$work" --parquet \
  || { echo "keep_fields: FAIL: cannot write the corpora with $pyarrow_python (pyarrow missing?)"; exit 1; }
TFENC_PLUGIN_PATH="$TFENC_PLUGIN_PATH:$builddir/tests/plugins/.libs"
export TFENC_PLUGIN_PATH
common="--set job.id_field=id --set job.window_documents=32"
keep="job.keep_fields=url, lang, n, score, big"

run() { # run RANKS OUTPUT INPUT [SETTINGS...]: the job, quietly
  ranks=$1 out=$2 input=$3
  shift 3
  # shellcheck disable=SC2086
  (cd "$work" && "$mpiexec" -n "$ranks" "$driver" --quiet $common "$@" \
     --set "job.input=$input" --set "job.output=$out" job.ini) > "$work/run.out" 2> "$work/run.err"
}

check() { # check WHAT MODE ARGS...: one line of check_kept.py's
  what=$1
  shift
  if result=$("$pyarrow_python" "$srcdir/tests/io/check_kept.py" "$@"); then
    echo "keep_fields: ok   $what: $result"
  else
    fail "$what: $result"
  fi
}

(cd "$work" && rm -rf one.h5 two.h5 stages.h5 pq-*.h5 killed.h5 export)
# shellcheck disable=SC2086
for ranks in 1 2; do
  out=$([ "$ranks" = 1 ] && echo one.h5 || echo two.h5)
  if run "$ranks" "$out" kept --set "$keep"; then
    check "JSON Lines at $ranks rank(s)" values "$work/$out" "$work/kept" $fields
  else
    fail "JSON Lines at $ranks rank(s): $(head -n 1 "$work/run.err")"
  fi
done
check "1 rank and 2 ranks" same "$work/one.h5" "$work/two.h5"
# Two pipeline stages: the values cross from the first stage to the last
# with the microbatches.
if run 2 stages.h5 kept --set "$keep" --set job.pipeline_stages=2; then
  check "2 ranks as 2 pipeline stages" same "$work/one.h5" "$work/stages.h5"
else
  fail "2 pipeline stages: $(head -n 1 "$work/run.err")"
fi

for ranks in 1 2; do
  if run "$ranks" pq-$ranks.h5 pq --set "$keep"; then
    # shellcheck disable=SC2086
    check "Parquet at $ranks rank(s)" values "$work/pq-$ranks.h5" "$work/pq" $fields
  else
    fail "Parquet at $ranks rank(s): $(head -n 1 "$work/run.err")"
  fi
done
check "Parquet at 1 rank and 2 ranks" same "$work/pq-1.h5" "$work/pq-2.h5"

# --status says which datasets hold what, as text and as JSON.
if "$driver" --status "$work/one.h5" > "$work/status.out" 2>&1 \
   && grep -q "^kept fields: url (string, up to [0-9]* bytes), lang (string, up to 2 bytes), n (integer), score (float), big (integer); null where NAME_valid is 0$" \
        "$work/status.out"; then
  echo "keep_fields: ok   --status: $(grep "^kept" "$work/status.out")"
else
  fail "--status: $(grep "^kept" "$work/status.out" || head -n 2 "$work/status.out")"
fi
if "$driver" --status --json "$work/one.h5" > "$work/status.json" 2>&1 \
   && "$python" - "$work/status.json" <<'PY'
import json, sys
kept = json.load(open(sys.argv[1]))["kept_fields"]
assert [k["name"] for k in kept] == ["url", "lang", "n", "score", "big"], kept
assert [k["type"] for k in kept] == ["string", "string", "integer", "float", "integer"], kept
assert kept[0]["valid"] == "url_valid" and kept[2]["bytes"] is None and kept[1]["bytes"] == 2, kept
PY
then
  echo "keep_fields: ok   --status --json: kept_fields lists each with its type and mask"
else
  fail "--status --json: $(head -c 300 "$work/status.json")"
fi

# docs/output.md's h5py recipe (marked readme-test: covered by
# tests/io/keep_fields.sh) reads each field with its nulls masked.
covered_python_block "$srcdir/docs/output.md" tests/io/keep_fields.sh > "$work/recipe.py"
mkdir -p "$work/recipe" && cp "$work/one.h5" "$work/recipe/embeddings.h5"
if [ ! -s "$work/recipe.py" ]; then
  fail "docs/output.md has no python block marked for this test"
elif (cd "$work/recipe" && "$python" "$work/recipe.py") > "$work/recipe.out" 2>&1 \
     && grep -q "^{'url': \['https://example.org/0/café', None, 'https://example.org/2/caféxx'\], 'lang': \['en', 'de', 'fr'\], 'n': \[-1000, -963, -926\], 'score': \[0.1, 1.0, 0.3857142857142857\], 'big': \[9007199254740993, 9007199254740995, 9007199254740997\]}$" \
          "$work/recipe.out"; then
  echo "keep_fields: ok   docs/output.md's recipe: $(cat "$work/recipe.out")"
else
  fail "docs/output.md's recipe: $(tail -n 2 "$work/recipe.out")"
fi

# tfenc-export: nullable Parquet columns, read back with pyarrow and pandas.
if "$exporter" "$work/one.h5" --parquet "$work/export" --rows-per-file 70 \
     > "$work/export.out" 2>&1; then
  # shellcheck disable=SC2086
  check "tfenc-export --parquet" parquet "$work/export" "$work/kept" $fields
else
  fail "tfenc-export: $(head -n 1 "$work/export.out")"
fi

# SIGKILL part-way at 2 ranks (the pause layer slows every microbatch),
# then the same job resumes at 1 rank: the file equals the one-run file.
cp "$work/job.ini" "$work/job.plain"
printf '\n[pause]\ntype = pause\nmilliseconds = 300\n' >> "$work/job.ini"
# shellcheck disable=SC2086
(cd "$work" && exec "$mpiexec" -n 2 "$driver" --quiet $common --set "$keep" \
   --set job.input=kept --set job.output=killed.h5 job.ini) > "$work/run.out" 2> "$work/run.err" &
pid=$!
kill_part_way "$pid" "$work/killed.h5" 0.3
read -r done total complete <<EOF2
$("$python" "$srcdir/tests/resume/progress.py" count "$work/killed.h5")
EOF2
echo "keep_fields: killed with $done of $total documents finished (complete = $complete)"
[ "$done" -lt "$total" ] || fail "SIGKILL: the run had finished before the kill"
if run 1 killed.h5 kept --set "$keep"; then
  check "killed at 2 ranks, resumed at 1" same "$work/one.h5" "$work/killed.h5"
else
  fail "the resume: $(head -n 1 "$work/run.err")"
fi
mv "$work/job.plain" "$work/job.ini"

# Bad input: one line each, naming the file, line (or document) and field.
refused() { # refused WHAT PATTERN RANKS INPUT [SETTINGS...]
  what=$1 pattern=$2 ranks=$3 input=$4
  shift 4
  if run "$ranks" refused.h5 "$input" "$@"; then
    fail "$what: the run succeeded"
  elif [ "$(grep -c "^tfenc-batch:" "$work/run.err")" -eq 1 ] && grep -q "$pattern" "$work/run.err"; then
    echo "keep_fields: ok   $what: $(grep "^tfenc-batch:" "$work/run.err")"
  else
    fail "$what: $(head -n 3 "$work/run.err")"
  fi
}
refused "a field no record has" \
  "\[job\] keep_fields: no record of .*bad/nowhere.jsonl has a field 'url'" \
  1 bad/nowhere.jsonl --set job.keep_fields=url
refused "an object" "bad/object.jsonl: line 4: keep_fields 'url' is an object; a kept field holds" \
  1 bad/object.jsonl --set job.keep_fields=url
refused "an array" "bad/array.jsonl: line 2: keep_fields 'lang' is an array" \
  2 bad/array.jsonl --set "job.keep_fields=url, lang"
refused "a boolean" "bad/boolean.jsonl: line 3: keep_fields 'n' is a boolean" \
  1 bad/boolean.jsonl --set job.keep_fields=n
refused "a string longer than max_field_bytes" \
  "bad/long.jsonl: line 5: keep_fields 'url' is 40 bytes long, more than \[job\] max_field_bytes = 32" \
  1 bad/long.jsonl --set job.keep_fields=url --set job.max_field_bytes=32
for ranks in 1 2; do
  refused "strings and integers in one field at $ranks rank(s)" \
    "\[job\] keep_fields 'url': document 0 (.*mixed/part-0.jsonl) holds a string but document 22 (.*mixed/part-1.jsonl) an integer" \
    "$ranks" bad/mixed --set job.keep_fields=url
done
refused "a field named like a dataset" "\[job\] keep_fields: 'ids' is the name of a dataset or group tfenc writes" \
  1 kept --set "job.keep_fields=url, ids"
refused "a field named like the further heads' group" \
  "\[job\] keep_fields: 'outputs' is the name of a dataset or group tfenc writes" \
  1 kept --set "job.keep_fields=url, outputs"
refused "a field named like another's mask" "'url_valid' is the name of the null mask of 'url'" \
  1 kept --set "job.keep_fields=url, url_valid"
common="--set job.window_documents=32" # no id_field: a text corpus has no fields
refused "keep_fields on a text corpus" \
  "\[job\] keep_fields: names a field of JSON Lines records or a Parquet column, but the corpus is text" \
  1 corpus.txt --set job.keep_fields=url
refused "keep_fields on an HDF5 token-id corpus" \
  "\[job\] keep_fields: names a field of JSON Lines records or a Parquet column, but the corpus is hdf5" \
  1 input.h5 --set job.keep_fields=url
common="--set job.id_field=id --set job.window_documents=32"
refused "a Parquet column not in the schema" "pq/part-0.parquet: no column 'site' (keep_fields)" \
  1 pq --set job.keep_fields=site
refused "a Parquet list column" "bad/list.parquet: column 'url' (keep_fields) holds list<" \
  1 bad/list.parquet --set job.keep_fields=url

[ "$failed" -eq 0 ] || exit 1
