#!/bin/sh
# Cross-encoders on pairs of texts ([job] text_pair_field): two small random
# CrossEncoder folders (tests/import/pairs.py: a BERT with the real
# bert-base-uncased tokenizer.json, whose TemplateProcessing gives [CLS] A
# [SEP] B [SEP] with types 0 then 1; a RoBERTa whose tokenizer.json has
# RobertaProcessing, <s> A </s></s> B </s>, all type 0) on 580 pairs of the
# real sentences, a third of them longer than max_seq_len 64.
#   - tfenc's pair tokenization, id for id and type for type, against HF
#     tokenizers' encode(a, b) with longest_first truncation;
#   - scores against sentence-transformers' CrossEncoder.predict, 1e-4;
#   - the same pairs gzip'ed and as Parquet columns: the same bytes;
#   - layouts 2x1, 1x2, 2x2 (replicas x stages; single texts 2x2) and a
#     SIGKILL + resume give the bytes of one rank, for pairs and for single
#     texts;
#   - bf16 and int8 scores within what the accuracy gate allows, the gate
#     measuring the scores (their error relative to their spread), keeping
#     layers in bf16 or refusing the job when they are off;
#   - bad pairs (a missing field, one that is not a string, pairs from a
#     plain-text corpus or with chunks, a Parquet file without the second
#     column): one line, non-zero exit, nothing
#     written.
set -eu

. "$(cd "$(dirname "$0")/../.." && pwd)/tests/environment.sh"
: "${TFENC_VENV_PYTHON:=${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python}"
import="$builddir/drivers/tfenc-import"
tokenize="$builddir/tests/tokenizer/tokenize_corpus"
work=$(mktemp -d "${TMPDIR:-/tmp}/tfenc-pairs.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
checks=0

HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$generate" "$work" "$TFENC_VENV_PYTHON" "$here/pairs.py" make "$work" \
  "$here/sentences.txt"

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

check() { # COMMAND...: one check, counted; its output is its report
  checks=$((checks + 1))
  "$@" || failures=$((failures + 1))
}

pairs="--set job.text_field=query --set job.text_pair_field=passage --set job.max_seq_len=64"

run() { # DIR INPUT OUTPUT [--set ...]: tfenc-batch on the folder's job, pairs by default
  dir=$1 input=$2 output=$3
  shift 3
  # shellcheck disable=SC2086
  "$driver" --quiet $pairs --set "job.input=$input" --set "job.output=$output" "$@" \
    "$dir/job.ini"
}

for kind in bert roberta; do
  dir="$work/$kind"
  "$tokenize" --json "$dir/tokenizer.json" "$work/pairs.tsv" 64 --pairs >"$dir/tfenc-ids.txt"
  check "$python" "$here/pairs.py" ids "$dir/ids.txt" "$dir/tfenc-ids.txt" "$kind pair tokenizer"
  if ! "$import" "$dir" -o "$dir/model.h5" --job "$dir/job.ini" >"$dir/import.log" 2>&1; then
    checks=$((checks + 1))
    fail "$kind: tfenc-import: $(cat "$dir/import.log")"
    continue
  fi
  run "$dir" "$work/pairs.jsonl" "$dir/scores.h5"
  check "$python" "$here/pairs.py" compare "$dir/reference.h5" "$dir/scores.h5" \
    "$kind CrossEncoder.predict on pairs"
done

# --dry-run says the documents are pairs, and of which fields.
checks=$((checks + 1))
run "$work/bert" "$work/pairs.jsonl" "$work/dry.h5" --dry-run >"$work/dry-run.txt"
grep -qF "pairs: each document is the texts of 'query' and 'passage'" "$work/dry-run.txt" \
  && echo "ok: --dry-run: $(grep '^pairs:' "$work/dry-run.txt")" \
  || fail "--dry-run does not say the documents are pairs: $(grep corpus "$work/dry-run.txt")"

same() { # BASELINE OTHER LABEL: bitwise equal rows, lengths, ids
  checks=$((checks + 1))
  if result=$("$python" "$srcdir/tests/pipeline/compare_layouts.py" "$1" "$2"); then
    echo "ok: $3: $result"
  else
    fail "$3: $result"
  fi
}

dir="$work/bert"
run "$dir" "$work/pairs.jsonl.gz" "$work/gzip.h5" --set job.id_field=id
run "$dir" "$work/pairs.jsonl" "$work/ids.h5" --set job.id_field=id
same "$work/ids.h5" "$work/gzip.h5" "pairs from JSON Lines behind gzip"
if grep -q "^#define HAVE_PARQUET 1" "$builddir/config.h"; then
  run "$dir" "$work/pairs.parquet" "$work/parquet.h5" --set job.id_field=id
  same "$work/ids.h5" "$work/parquet.h5" "pairs from Parquet columns"
else
  echo "pairs: tfenc built without Arrow: Parquet pairs not tried"
fi

# Layouts and a kill: small windows so that every rank gets work; single
# texts are the queries alone, through the same head.
layout_args="--set job.window_documents=64 --set job.batch_tokens=128"
# Single texts take the layout that splits most, 2x2 (heads.sh covers 2x1
# and 1x2 on token ids): each launch of mpiexec costs a CPU-second.
layouts="2:1 2:2 4:2"
for what in pairs single; do
  if [ "$what" = single ]; then
    pairs="--set job.text_field=query --set job.max_seq_len=64"
    layouts="4:2"
  fi
  # shellcheck disable=SC2086
  run "$dir" "$work/pairs.jsonl" "$work/$what-1x1.h5" $layout_args
  for layout in $layouts; do
    ranks=${layout%:*} stages=${layout#*:}
    name="$what-$((ranks / stages))x$stages"
    # shellcheck disable=SC2086
    if ! "$mpiexec" -n "$ranks" "$driver" --quiet $pairs $layout_args \
        --set "job.input=$work/pairs.jsonl" --set "job.output=$work/$name.h5" \
        --set "job.pipeline_stages=$stages" "$dir/job.ini"; then
      checks=$((checks + 1))
      fail "$name: tfenc-batch failed"
      continue
    fi
    same "$work/$what-1x1.h5" "$work/$name.h5" "$what, layout $((ranks / stages))x$stages"
  done

  # SIGKILL part-way (every process at once, as a node failure), then the
  # same command again: it resumes to the bytes of the uninterrupted run.
  # The test plugin's pause layer (before the head; it leaves the rows
  # alone) makes each microbatch last 40 ms, so that the kill lands mid-run.
  awk '/^\[head\]/ { print "[pause]\ntype = pause\nmilliseconds = 40\n" } { print }' \
    "$dir/job.ini" >"$dir/paused.ini"
  cp "$dir/job.ini" "$dir/plain.ini"
  cp "$dir/paused.ini" "$dir/job.ini"
  killed="$work/$what-killed.h5"
  # shellcheck disable=SC2086
  TFENC_PLUGIN_PATH="$TFENC_PLUGIN_PATH:$builddir/tests/plugins/.libs" \
    "$mpiexec" -n 2 "$driver" --quiet $pairs $layout_args --set "job.input=$work/pairs.jsonl" \
    --set "job.output=$killed" "$dir/job.ini" >"$work/killed.out" 2>&1 &
  pid=$!
  kill_part_way "$pid" "$killed" 0.4
  read -r done total complete <<EOF
$("$python" "$srcdir/tests/resume/progress.py" count "$killed")
EOF
  echo "$what: SIGKILL with $done of $total documents finished (complete = $complete)"
  checks=$((checks + 1))
  if [ "$done" -le 0 ] || [ "$done" -ge "$total" ]; then
    fail "$what: the kill left $done of $total documents finished: nothing to resume"
  else
    checks=$((checks - 1))
    # shellcheck disable=SC2086
    if TFENC_PLUGIN_PATH="$TFENC_PLUGIN_PATH:$builddir/tests/plugins/.libs" \
        "$mpiexec" -n 2 "$driver" $pairs $layout_args --set "job.input=$work/pairs.jsonl" \
        --set "job.output=$killed" "$dir/job.ini" 2>"$work/resume.err" >/dev/null \
        && grep -q resuming "$work/resume.err"; then
      same "$work/$what-1x1.h5" "$killed" "$what, SIGKILL and resume"
    else
      checks=$((checks + 1))
      fail "$what: the resumed run failed or did not resume: $(head -n 2 "$work/resume.err")"
    fi
  fi
  cp "$dir/plain.ini" "$dir/job.ini"
done
pairs="--set job.text_field=query --set job.text_pair_field=passage --set job.max_seq_len=64"

# bf16 and int8: scores within the error the accuracy gate allows, measured
# on the scores (their error relative to their spread over the documents,
# as an angle: min_cosine 0.999 allows 4.47%), not as a cosine of rows of
# one score, which is 1 whenever the sign holds. At 0.9999 (1.41%) int8
# alone misses the gate's bar (1%, half the error to spare) and the gate
# keeps layers out of int8: in bf16 where the CPU runs it; at 0.99999 even
# bf16 misses it and the job is refused. A CPU without bf16 (its bf16 job
# says "fp32 runs instead") keeps them in fp32, which is exact, so that
# there no bar refuses the job.
head -n 150 "$work/pairs.jsonl" >"$work/few.jsonl"
run "$dir" "$work/few.jsonl" "$work/bf16.h5" --set model.precision=bf16 2>"$work/bf16.err" \
  || fail "bf16: $(cat "$work/bf16.err")"
fallback=bf16
! grep -q "fp32 runs instead" "$work/bf16.err" || fallback=fp32
check "$python" "$here/pairs.py" within "$dir/reference.h5" "$work/bf16.h5" 0.999 "bf16 scores"
run "$dir" "$work/few.jsonl" "$work/int8.h5" --set model.precision=int8 \
  --set model.min_cosine=0.9999 2>"$work/int8.err" || fail "int8: $(cat "$work/int8.err")"
checks=$((checks + 1))
if grep -q "scores off fp32's by at most .* kept in $fallback:" "$work/int8.err"; then
  echo "ok: int8 gate: $(grep 'scores off' "$work/int8.err")"
else
  fail "int8: the gate did not measure the scores or kept nothing in $fallback: $(cat "$work/int8.err")"
fi
check "$python" "$here/pairs.py" within "$dir/reference.h5" "$work/int8.h5" 0.9999 "int8 scores"

# --- Bad pairs: one line, non-zero exit, nothing written.
expect_error() { # NAME INPUT PATTERN... -- [--set ...]
  name=$1 input=$2
  shift 2
  checks=$((checks + 1))
  patterns=""
  while [ "$1" != -- ]; do
    patterns="$patterns$1
"
    shift
  done
  shift
  out="$work/bad-$name.h5"
  # The notice of which instructions this CPU has is no error line.
  run "$dir" "$input" "$out" "$@" >"$work/stdout" 2>"$work/stderr.all" && status=0 || status=$?
  grep -v "this CPU lacks" "$work/stderr.all" >"$work/stderr" || true
  if [ "$status" -eq 0 ]; then
    fail "$name: succeeded"
    return
  fi
  before=$failures
  lines=$(wc -l <"$work/stderr")
  [ "$lines" -eq 1 ] || fail "$name: $lines lines on stderr: $(cat "$work/stderr")"
  echo "$patterns" | while IFS= read -r pattern; do
    [ -z "$pattern" ] || grep -qF -- "$pattern" "$work/stderr" \
      || echo "FAIL: $name: message lacks '$pattern': $(cat "$work/stderr")"
  done | grep FAIL && failures=$((failures + 1))
  for leftover in "$out" "$out.tmp"; do
    [ ! -e "$leftover" ] || fail "$name: left $leftover behind"
  done
  [ "$failures" -ne "$before" ] || echo "ok: $name: $(cat "$work/stderr")"
}

bad="$work/bad.jsonl"
head -n 2 "$work/pairs.jsonl" >"$bad"
echo '{"query": "where is the passage?"}' >>"$bad"
expect_error missing-pair-field "$bad" "bad.jsonl: line 3" "'passage'" "is missing" --
head -n 4 "$work/pairs.jsonl" >"$bad"
echo '{"query": "a number", "passage": 42}' >>"$bad"
expect_error pair-field-not-a-string "$bad" "bad.jsonl: line 5" "'passage'" "an integer" \
  "expected a string" --
echo '{"passage": "no query"}' >"$bad"
expect_error missing-text-field "$bad" "bad.jsonl: line 1" "'query'" "is missing" --
cut -f 1 "$work/pairs.tsv" >"$work/plain.txt"
expect_error pairs-from-text "$work/plain.txt" "text_pair_field" "JSON Lines or Parquet" --
expect_error pairs-and-chunks "$work/pairs.jsonl" "text_pair_field" "long_documents" -- \
  --set job.long_documents=chunk
if grep -q "^#define HAVE_PARQUET 1" "$builddir/config.h"; then
  expect_error parquet-without-pair-column "$work/no-passage.parquet" "no-passage.parquet" \
    "no column 'passage' (text_pair_field)" --
fi
if [ "$fallback" = bf16 ]; then
  expect_error int8-gate-on-scores "$work/few.jsonl" "precision = int8" "scores are off" \
    "least accurate layer" -- --set model.precision=int8 --set model.min_cosine=0.99999
else
  checks=$((checks + 1))
  if run "$dir" "$work/few.jsonl" "$work/int8-strict.h5" --set model.precision=int8 \
       --set model.min_cosine=0.99999 2>"$work/int8-strict.err" \
     && grep -q "scores off fp32's by at most .* kept in fp32:" "$work/int8-strict.err"; then
    echo "ok: int8 gate at 0.99999 without bf16: $(grep 'scores off' "$work/int8-strict.err")"
  else
    fail "int8 at 0.99999 without bf16: $(cat "$work/int8-strict.err")"
  fi
fi

echo "pairs.sh: $((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
