#!/bin/sh
# Long documents with a scores head, and late chunking, against
# transformers (tests/pipeline/late_chunking.py makes a BERT of 2048
# positions and its classifier of 3 labels, random weights, and documents
# of 5 to 1600 word pieces):
#  - long_documents = chunk with chunk_scores = mean | max | first | all:
#    the classifier's softmax scores of each chunk alone, aggregated per
#    document (or every chunk's, with chunk_offsets and chunk_starts);
#  - each at 2 x 1 ranks bit for bit the 1 x 1 file, and a run killed with
#    SIGKILL part-way resumed to it bit for bit;
#  - long_documents = late_chunk (context max_seq_len 1024, spans of
#    chunk_tokens 100 pieces every 80): transformers' token vectors of each
#    whole document (of a window of whole spans for the two longer than the
#    context) averaged over each span and normalised, as chunk_pooling =
#    none, and each document's normalised mean of them (mean), within 1e-4
#    (fp32 against PyTorch, architectures.py's bar; a span encoded alone
#    misses by 0.1); 2 x 1 and a SIGKILL and resume bit for bit; a
#    document alone gets the rows it gets in the corpus, bit for bit;
#  - late_chunk with chunk_spans = sentences (spans of at most 40 pieces)
#    over documents of abbreviations, decimals, runs of marks, full-width
#    marks, one sentence, a sentence longer than 40 pieces, and the
#    documents above (two longer than the context: windows of the most
#    whole sentence spans that fit): the reference finds the sentences from
#    the text and transformers' tokenizer's offsets, pools transformers'
#    token vectors likewise (within 1e-4); 2 x 1 and a SIGKILL and resume
#    bit for bit; the same with an XLM-R of a SentencePiece tokenizer
#    (within 1e-4, 2 x 1 bit for bit);
#  - chunk_scores without a scores head or without long_documents = chunk,
#    chunk_pooling with a scores head, late_chunk with a model that does
#    not pool vectors (a scores head, token states), and late chunking's
#    other keys out of place (chunk_spans without late_chunk, chunk_overlap
#    with chunk_spans = sentences), refused in one line naming the key,
#    with nothing written.
set -u
. "$(cd "$(dirname "$0")/../.." && pwd)/tests/environment.sh"
: "${TFENC_VENV_PYTHON:=${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python}"
import="$builddir/drivers/tfenc-import"
generate="$srcdir/tests/harness/generate"
work=$(mktemp -d "${TMPDIR:-/tmp}/tfenc-late-chunking.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
fail() { failures=$((failures + 1)); echo "FAIL: $*"; }

HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$generate" "$work/generated" "$TFENC_VENV_PYTHON" \
  "$here/late_chunking.py" make "$work/generated" "$srcdir/tests/import/sentences.txt" || exit 1
reference=$work/generated/reference.h5
for model in encoder classifier xlmr; do
  "$import" "$work/generated/$model" -o "$work/$model.h5" --job "$work/$model.ini" >/dev/null \
    || { echo "FAIL: tfenc-import $model"; exit 1; }
done

# job RANKS JOB OUTPUT [--set ...]: the documents ($documents), windows of
# 3 documents.
documents=$work/generated/documents.txt
job() {
  ranks=$1 job_file=$2 output=$3
  shift 3
  "$mpiexec" -n "$ranks" "$driver" --quiet --set "job.input=$documents" \
    --set "job.output=$output" --set job.window_documents=3 "$@" "$job_file"
}
compare() { # KIND FILE: against transformers (late_chunking.py compare)
  "$TFENC_VENV_PYTHON" "$here/late_chunking.py" compare "$reference" "$1" "$2" \
    || fail "$1: $2 differs from the reference"
}
bitwise() { # LABEL BASELINE OTHER
  if "$python" "$srcdir/tests/pipeline/compare_layouts.py" "$2" "$3" >"$work/layouts.out"; then
    echo "$1: bitwise equal"
  else
    fail "$1: $(cat "$work/layouts.out")"
  fi
}

# killed_and_resumed LABEL BASELINE JOB [--set ...]: the job with a pause
# before its last layer (tests/plugins' `pause`), killed with SIGKILL once
# some documents are finished, then run again: the baseline bit for bit.
killed_and_resumed() {
  label=$1 baseline=$2 job_file=$3
  shift 3
  awk 'BEGIN { done = 0 }
       /^\[(pooling|head)\]/ && !done { print "[pause]\ntype = pause\nmilliseconds = 400\n"; done = 1 }
       { print }' "$job_file" >"$work/paused.ini"
  rm -f "$work/killed.h5"
  TFENC_PLUGIN_PATH="$TFENC_PLUGIN_PATH:$builddir/tests/plugins/.libs" \
    "$mpiexec" -n 2 "$driver" --quiet --set "job.input=$documents" \
    --set "job.output=$work/killed.h5" --set job.window_documents=3 "$@" "$work/paused.ini" \
    >/dev/null 2>&1 &
  pid=$!
  "$python" "$srcdir/tests/resume/progress.py" wait "$work/killed.h5" 0.1 "$pid"
  pkill -KILL -P "$pid" 2>/dev/null
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  set -- $("$python" "$srcdir/tests/resume/progress.py" count "$work/killed.h5") "$@"
  echo "$label: killed with $1 of $2 documents finished"
  [ "$3" = 0 ] && [ "$1" -gt 0 ] && [ "$1" -lt "$2" ] \
    || fail "$label: the kill did not land part-way (make the pause longer)"
  shift 3
  TFENC_PLUGIN_PATH="$TFENC_PLUGIN_PATH:$builddir/tests/plugins/.libs" \
    job 1 "$work/paused.ini" "$work/killed.h5" "$@" || fail "$label: the resume failed"
  bitwise "$label: killed and resumed" "$baseline" "$work/killed.h5"
}

# ---------------------------------------------------- chunk_scores
chunked="--set job.max_seq_len=64 --set job.long_documents=chunk --set job.chunk_overlap=8 \
  --set job.batch_tokens=256"
for aggregate in mean max first all; do
  # shellcheck disable=SC2086
  job 1 "$work/classifier.ini" "$work/scores-$aggregate.h5" $chunked \
    --set job.chunk_scores=$aggregate || fail "chunk_scores = $aggregate: the job failed"
  compare "scores_$aggregate" "$work/scores-$aggregate.h5"
  # shellcheck disable=SC2086
  job 2 "$work/classifier.ini" "$work/scores-$aggregate-2.h5" $chunked \
    --set job.chunk_scores=$aggregate || fail "chunk_scores = $aggregate at 2 x 1: the job failed"
  bitwise "chunk_scores = $aggregate at 2 x 1" "$work/scores-$aggregate.h5" \
    "$work/scores-$aggregate-2.h5"
done
for aggregate in mean all; do
  # shellcheck disable=SC2086
  killed_and_resumed "chunk_scores = $aggregate" "$work/scores-$aggregate.h5" \
    "$work/classifier.ini" $chunked --set job.chunk_scores=$aggregate
done

# ---------------------------------------------------- late_chunk
# Context 1024 tokens, spans of 100 pieces every 80: documents of up to
# 1022 pieces are encoded whole (spans past 512 included), the two longer
# ones in windows of 12 spans.
late="--set job.max_seq_len=1024 --set job.long_documents=late_chunk --set job.chunk_tokens=100 \
  --set job.chunk_overlap=20 --set job.batch_tokens=1024"
for pooling in none mean; do
  # shellcheck disable=SC2086
  job 1 "$work/encoder.ini" "$work/late-$pooling.h5" $late --set job.chunk_pooling=$pooling \
    || fail "late_chunk, chunk_pooling = $pooling: the job failed"
  compare "late_$pooling" "$work/late-$pooling.h5"
  # shellcheck disable=SC2086
  job 2 "$work/encoder.ini" "$work/late-$pooling-2.h5" $late --set job.chunk_pooling=$pooling \
    || fail "late_chunk, chunk_pooling = $pooling at 2 x 1: the job failed"
  bitwise "late_chunk, chunk_pooling = $pooling at 2 x 1" "$work/late-$pooling.h5" \
    "$work/late-$pooling-2.h5"
  # shellcheck disable=SC2086
  killed_and_resumed "late_chunk, chunk_pooling = $pooling" "$work/late-$pooling.h5" \
    "$work/encoder.ini" $late --set job.chunk_pooling=$pooling
done
# One document, one set of rows: the longest document (two windows) and one
# of 900 pieces, each alone in a corpus of its own, get the rows they get
# among the others, bit for bit.
for line in 1 3; do
  sed -n "${line}p" "$work/generated/documents.txt" >"$work/alone.txt"
  # shellcheck disable=SC2086
  "$driver" --quiet --set "job.input=$work/alone.txt" --set "job.output=$work/alone-$line.h5" \
    $late --set job.chunk_pooling=none "$work/encoder.ini" \
    || fail "late_chunk: document $line alone: the job failed"
  "$python" - "$work/late-none.h5" "$work/alone-$line.h5" "$line" <<'PY' \
    || fail "late_chunk: document $line alone differs from the same document in the corpus"
import sys
import h5py
corpus, alone = (h5py.File(p, "r") for p in sys.argv[1:3])
i = int(sys.argv[3]) - 1
offsets = corpus["chunk_offsets"][()]
rows = corpus["embeddings"][offsets[i]:offsets[i + 1]]
sys.exit(rows.tobytes() != alone["embeddings"][()].tobytes())
PY
  echo "late_chunk: document $line alone: bitwise its rows in the corpus"
done

# ---------------------------------------------------- late_chunk by sentence
documents=$work/generated/sentences.jsonl
by_sentence="--set job.max_seq_len=1024 --set job.long_documents=late_chunk \
  --set job.chunk_spans=sentences --set job.chunk_tokens=40 --set job.batch_tokens=1024"
for pooling in none mean; do
  # shellcheck disable=SC2086
  job 1 "$work/encoder.ini" "$work/sentence-$pooling.h5" $by_sentence \
    --set job.chunk_pooling=$pooling || fail "chunk_spans = sentences, $pooling: the job failed"
  compare "sentence_$pooling" "$work/sentence-$pooling.h5"
  # shellcheck disable=SC2086
  job 2 "$work/encoder.ini" "$work/sentence-$pooling-2.h5" $by_sentence \
    --set job.chunk_pooling=$pooling \
    || fail "chunk_spans = sentences, $pooling at 2 x 1: the job failed"
  bitwise "chunk_spans = sentences, chunk_pooling = $pooling at 2 x 1" \
    "$work/sentence-$pooling.h5" "$work/sentence-$pooling-2.h5"
  # shellcheck disable=SC2086
  killed_and_resumed "chunk_spans = sentences, chunk_pooling = $pooling" \
    "$work/sentence-$pooling.h5" "$work/encoder.ini" $by_sentence --set job.chunk_pooling=$pooling
done
# The same with XLM-R's SentencePiece pieces (▁ starts a word): at 1 and 2
# ranks.
for pooling in none mean; do
  # shellcheck disable=SC2086
  job 1 "$work/xlmr.ini" "$work/xlmr-$pooling.h5" $by_sentence --set job.chunk_pooling=$pooling \
    || fail "chunk_spans = sentences, XLM-R, $pooling: the job failed"
  compare "xlmr_$pooling" "$work/xlmr-$pooling.h5"
  # shellcheck disable=SC2086
  job 2 "$work/xlmr.ini" "$work/xlmr-$pooling-2.h5" $by_sentence --set job.chunk_pooling=$pooling \
    || fail "chunk_spans = sentences, XLM-R, $pooling at 2 x 1: the job failed"
  bitwise "chunk_spans = sentences, XLM-R, chunk_pooling = $pooling at 2 x 1" \
    "$work/xlmr-$pooling.h5" "$work/xlmr-$pooling-2.h5"
done
# A file of spans by token is not resumed by a job of spans by sentence.
# shellcheck disable=SC2086
job 1 "$work/encoder.ini" "$work/by-token.h5" --set job.max_seq_len=1024 \
  --set job.long_documents=late_chunk --set job.chunk_tokens=40 --set job.batch_tokens=1024 \
  --set job.chunk_pooling=none || fail "spans of 40 tokens: the job failed"
# shellcheck disable=SC2086
if "$driver" --quiet --set "job.input=$documents" --set "job.output=$work/by-token.h5" \
     --set job.window_documents=3 $by_sentence --set job.chunk_pooling=none "$work/encoder.ini" \
     2>"$work/resume.err"; then
  fail "chunk_spans = sentences resumed a file of spans by token"
elif ! grep -q "by-token.h5: was written by a different job: attribute 'job_settings'" \
       "$work/resume.err"; then
  fail "chunk_spans = sentences on a file by token: $(grep -v 'fp32 products' "$work/resume.err")"
else
  echo "chunk_spans = sentences does not resume a file by token: $(grep -v 'fp32 products' "$work/resume.err")"
fi
documents=$work/generated/documents.txt

# ---------------------------------------------------- bad input
# refused LABEL EXPECTED JOB [--set ...]: one line holding EXPECTED, no
# file (one rank: mpiexec adds its own lines to a failure).
refused() {
  label=$1 expected=$2 job_file=$3
  shift 3
  rm -f "$work/refused.h5"
  if "$driver" --quiet --set "job.input=$work/generated/documents.txt" \
       --set "job.output=$work/refused.h5" "$@" "$job_file" 2>"$work/refused.err"; then
    fail "$label: accepted"
  elif [ "$(wc -l <"$work/refused.err")" -ne 1 ] || ! grep -qF "$expected" "$work/refused.err"; then
    fail "$label: expected one line with '$expected', got: $(cat "$work/refused.err")"
  elif [ -e "$work/refused.h5" ]; then
    fail "$label: refused, but wrote the output"
  else
    echo "$label: refused: $(cat "$work/refused.err")"
  fi
}
refused "chunk_scores without long_documents = chunk" \
  "[job] chunk_scores: applies to chunked documents: set long_documents = chunk too" \
  "$work/classifier.ini" --set job.chunk_scores=max
refused "chunk_scores without a scores head" \
  "[job] chunk_scores: aggregates the chunks' scores of a model that ends in a scores head, but the model pools its output" \
  "$work/encoder.ini" --set job.long_documents=chunk --set job.chunk_scores=max
refused "chunk_pooling with a scores head" \
  "[job] chunk_pooling: pools chunk vectors, but the model ends in a head that writes scores" \
  "$work/classifier.ini" --set job.long_documents=chunk --set job.chunk_pooling=none
refused "chunk_scores with chunk_pooling" "[job] chunk_scores: aggregates a scores head's chunks" \
  "$work/classifier.ini" --set job.long_documents=chunk --set job.chunk_pooling=mean \
  --set job.chunk_scores=mean

sed '/^\[pooling\]/,$d' "$work/encoder.ini" >"$work/tokens.ini"
refused "late_chunk with a scores head" \
  "[job] long_documents: late_chunk pools each span's token vectors with the model's pooling, but the model ends in a head that writes scores" \
  "$work/classifier.ini" --set job.long_documents=late_chunk
refused "late_chunk with a model that does not pool" \
  "[job] long_documents: late_chunk pools each span's token vectors with the model's pooling, but the model does not pool its output" \
  "$work/tokens.ini" --set job.long_documents=late_chunk
refused "chunk_tokens without late_chunk" \
  "[job] chunk_tokens: gives late chunking's spans: set long_documents = late_chunk too" \
  "$work/encoder.ini" --set job.long_documents=chunk --set job.chunk_tokens=50
refused "chunk_spans without late_chunk" \
  "[job] chunk_spans: gives late chunking's spans: set long_documents = late_chunk too" \
  "$work/encoder.ini" --set job.long_documents=chunk --set job.chunk_spans=sentences
refused "chunk_overlap with chunk_spans = sentences" \
  "[job] chunk_overlap: overlaps late chunking's spans of tokens; chunk_spans = sentences cuts each sentence once" \
  "$work/encoder.ini" --set job.long_documents=late_chunk --set job.chunk_spans=sentences \
  --set job.chunk_overlap=10
refused "chunk_spans of another kind" "chunk_spans=paragraphs: expected one of tokens, sentences" \
  "$work/encoder.ini" --set job.long_documents=late_chunk --set job.chunk_spans=paragraphs
refused "chunk_scores with late_chunk" "[job] chunk_scores: aggregates the scores of long_documents = chunk's chunks" \
  "$work/classifier.ini" --set job.long_documents=late_chunk --set job.chunk_scores=max
refused "late_chunk with pipeline stages" "[job] pipeline_stages: long_documents = late_chunk pools spans" \
  "$work/encoder.ini" --set job.long_documents=late_chunk --set job.pipeline_stages=2
refused "chunk_tokens past max_seq_len" "[job] chunk_tokens = 600: must be in 1..510" \
  "$work/encoder.ini" --set job.long_documents=late_chunk --set job.max_seq_len=512 \
  --set job.chunk_tokens=600

[ "$failures" -eq 0 ] || { echo "late_chunking: $failures failures"; exit 1; }
echo "late_chunking: all checks passed"
