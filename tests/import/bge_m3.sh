#!/bin/sh
# BGE-M3 (an XLM-R encoder with FlagEmbedding's colbert_linear.pt and
# sparse_linear.pt beside it) on random weights of its structure
# (tests/import/bge_m3.py): imported by `tfenc-import DIR -o M.h5 --job
# M.ini` into one job of three heads over one trunk (colbert first, its
# vectors at the root; dense and sparse in /outputs), run by tfenc-batch on
# the 532 real sentences through the model's XLM-R tokenizer (and on their
# token ids, an HDF5 corpus without a tokenizer), and compared
# with BGEM3FlagModel's formulas in PyTorch over transformers'
# XLMRobertaModel: dense min cosine >= 0.99999, colbert per token and
# sparse per token id within 1e-5 (bars argued in bge_m3.py), the same
# offsets and sparse ids. 2 ranks bitwise equal to 1; a job SIGKILLed
# part-way and run again ends with the uninterrupted file; --status lists
# the three heads. At int8 (the accuracy gate judging the three heads'
# outputs) each head is within its bar of the fp32 file: colbert's token
# vectors, dense's rows and sparse's rows min cosine >= 0.999
# (tests/pipeline/compare_heads.py); 2 ranks and [model] calibration =
# that file give its bits. A .pt of the wrong shape, one without its bias, and a
# folder with one .pt of the two are refused in one line naming the file
# and the tensor, with nothing written.
set -eu

. "$(cd "$(dirname "$0")/../.." && pwd)/tests/environment.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/tfenc-bge-m3.XXXXXX")
trap 'rm -rf "$work"' EXIT
. "$here/folder_checks.sh"
TFENC_PLUGIN_PATH="$TFENC_PLUGIN_PATH:$builddir/tests/plugins/.libs"
export TFENC_PLUGIN_PATH

HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$generate" "$work/generated" "$TFENC_VENV_PYTHON" \
  "$here/bge_m3.py" make "$sentences" "$work/generated"
model="$work/generated/model"
job="$work/bge-m3.ini"

checks=$((checks + 1))
if ! "$import" "$model" -o "$work/bge-m3.h5" --job "$job" >"$work/import.log" 2>&1; then
  fail "tfenc-import: $(cat "$work/import.log")"
  echo "bge_m3.sh: $((checks - failures)) passed, $failures failed"
  exit 1
fi
for head in "colbert" "dense" "sparse"; do
  checks=$((checks + 1))
  grep -q "^head = $head\$" "$job" || fail "the job has no head $head"
done

# The reference's comparison, at fp32.
run() { # OUTPUT [--set ...]
  output=$1
  shift
  rm -f "$output"
  "$batch" --quiet --set "job.input=$sentences" --set "job.output=$output" "$@" "$job"
}
checks=$((checks + 1))
run "$work/out.h5"
"$TFENC_VENV_PYTHON" "$here/bge_m3.py" compare "$work/generated/reference.h5" "$work/out.h5" \
  || fail "the three heads against BGEM3FlagModel's formulas"

# The same sentences as token ids: the first token is left out by its
# place, so a corpus without a tokenizer gives the same rows.
checks=$((checks + 1))
run "$work/ids-out.h5" --set "job.input=$work/generated/ids.h5" --set job.input_format=hdf5
"$TFENC_VENV_PYTHON" "$here/bge_m3.py" compare "$work/generated/reference.h5" "$work/ids-out.h5" \
  || fail "the three heads from token ids"

# --status names the three heads, the first with its first token left out.
checks=$((checks + 1))
"$batch" --status "$work/out.h5" >"$work/status.txt"
if grep -q "heads: 3; the output above is head colbert" "$work/status.txt" &&
   grep -q "each document's first token left out" "$work/status.txt" &&
   grep -q "^output dense (group /outputs/dense): pooled" "$work/status.txt" &&
   grep -q "^output sparse (group /outputs/sparse): sparse" "$work/status.txt"; then
  echo "--status lists the heads colbert, dense and sparse"
else
  fail "--status: $(cat "$work/status.txt")"
fi

# int8: every head against the fp32 file, each by its kind's bar.
checks=$((checks + 1))
run "$work/int8.h5" --set model.precision=int8 2>"$work/int8.err" \
  || fail "int8: $(cat "$work/int8.err")"
grep "precision = int8" "$work/int8.err" || true
if grep -q "head colbert: min cosine .* head dense: min cosine .* head sparse: min cosine" \
     "$work/int8.err" &&
   "$python" "$srcdir/tests/pipeline/compare_heads.py" "$work/out.h5" "$work/int8.h5" 0.999; then
  echo "int8: the gate judged every head, each within its bar of fp32"
else
  fail "int8: a head beyond its bar of fp32, or the gate did not name each head"
fi
checks=$((checks + 1))
run "$work/int8-given.h5" --set model.precision=int8 --set "model.calibration=$work/int8.h5"
"$TFENC_VENV_PYTHON" "$here/bge_m3.py" same "$work/int8.h5" "$work/int8-given.h5" \
  && echo "int8 with [model] calibration = the int8 file: its bits" \
  || fail "int8 with [model] calibration = the int8 file differs"

if [ -z "${TFENC_SANITIZER_BUILD:-}" ]; then
  # int8 at 2 ranks: rank 0's gate, every head bitwise 1 rank's.
  checks=$((checks + 1))
  for ranks in 1 2; do
    rm -f "$work/int8-ranks-$ranks.h5"
    "$mpiexec" -n "$ranks" "$batch" --quiet --set "job.input=$sentences" \
      --set "job.output=$work/int8-ranks-$ranks.h5" --set job.window_documents=8 \
      --set job.threads=1 --set model.precision=int8 "$job" 2>/dev/null
  done
  "$TFENC_VENV_PYTHON" "$here/bge_m3.py" same "$work/int8-ranks-1.h5" "$work/int8-ranks-2.h5" \
    && echo "bge-m3 at int8, 2 x 1: every head bitwise equal to 1x1" \
    || fail "bge-m3 at int8, 2 x 1 differs"

  # 2 ranks in windows of 8 documents: every dataset of every head bitwise.
  checks=$((checks + 1))
  for ranks in 1 2; do
    rm -f "$work/ranks-$ranks.h5"
    "$mpiexec" -n "$ranks" "$batch" --quiet --set "job.input=$sentences" \
      --set "job.output=$work/ranks-$ranks.h5" --set job.window_documents=8 \
      --set job.threads=1 "$job"
  done
  "$TFENC_VENV_PYTHON" "$here/bge_m3.py" same "$work/ranks-1.h5" "$work/ranks-2.h5" \
    && echo "bge-m3 at 2 x 1: every head bitwise equal to 1x1" || fail "bge-m3 at 2 x 1 differs"

  # SIGKILL part-way (a pause in the trunk makes the job last), then the
  # same command: the uninterrupted file, every head bitwise.
  slow="$work/slow.ini"
  awk '/^\[colbert\]/ { print "[pause]\ntype = pause\nmilliseconds = 40\n" } { print }' "$job" \
    >"$slow"
  sed -i "s|^weights = .*|weights = $work/bge-m3.h5|" "$slow"
  slow_run() { # OUTPUT
    "$batch" --quiet --set "job.input=$sentences" --set "job.output=$1" \
      --set job.window_documents=16 "$slow"
  }
  checks=$((checks + 1))
  slow_run "$work/slow-whole.h5"
  # The driver itself in the background, so that $! is its pid.
  "$batch" --quiet --set "job.input=$sentences" --set "job.output=$work/slow-killed.h5" \
    --set job.window_documents=16 "$slow" 2>"$work/slow.err" &
  pid=$!
  "$python" "$srcdir/tests/resume/progress.py" wait "$work/slow-killed.h5" 0.3 "$pid"
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  left=$("$python" "$srcdir/tests/resume/progress.py" count "$work/slow-killed.h5")
  set -- $left
  if [ "$1" -gt 0 ] && [ "$1" -lt "$2" ]; then
    echo "killed with $left (finished, documents, complete)"
    slow_run "$work/slow-killed.h5"
    "$TFENC_VENV_PYTHON" "$here/bge_m3.py" same "$work/slow-whole.h5" "$work/slow-killed.h5" && echo "resumed after SIGKILL: the uninterrupted file" \
      || fail "the file resumed after SIGKILL differs"
  else
    fail "the kill left $left"
  fi
fi

refused "sparse_linear.pt of the wrong shape" "$work/generated/bad-shape" \
  "bad-shape/sparse_linear.pt: tensor 'weight' has shape [2, 64], config.json implies [1, 64]"
refused "colbert_linear.pt without its bias" "$work/generated/no-bias" \
  "no-bias/colbert_linear.pt: tensor 'bias' not found (needed for /colbert/bias)"
one="$work/only-colbert"
cp -r "$model" "$one"
rm "$one/sparse_linear.pt"
refused "colbert_linear.pt alone" "$one" \
  "only-colbert/sparse_linear.pt: not found beside $one/colbert_linear.pt"

echo "bge_m3.sh: $((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
