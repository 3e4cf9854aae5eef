#!/bin/sh
# SPLADE sparse output (plugins/splade.c, core/output/sparse.c): random-weight
# BertForMaskedLM, DistilBertForMaskedLM, RobertaForMaskedLM,
# XLMRobertaForMaskedLM, MPNetForMaskedLM and ModernBertForMaskedLM (written
# from its published code) checkpoints with the real
# 30,522-token vocabulary, and a sentence-transformers SparseEncoder folder
# (tests/sparse/sparse.py, one Python process), imported by tfenc-import
# (--sparse for the plain checkpoints) and run on 40 real sentences. Each
# file's CSR must be SpladePooling's formula over transformers' MLM logits:
# the same non-zero set, values within 1e-4. Layouts 1x1, 2x1, 1x2, 2x2 and
# a SIGKILL with a resume at another rank count give the same CSR bit for
# bit; bf16 and int8 run within their tolerance; sparse_top_k and
# sparse_threshold keep what they say; --status and --dry-run describe the
# output and the vocabulary projection's cost. Bad input (a top-k larger
# than the vocabulary, sparse keys on a dense model, --sparse on a
# checkpoint without a masked-LM head) fails in one line and writes nothing.
set -u
. "$(cd "$(dirname "$0")/../pipeline" && pwd)/common.sh"
. "$here/checkpoints.sh"
work=$builddir/tests/data/generated/sparse
failed=0

fail() {
  echo "sparse: FAIL $*"
  failed=$((failed + 1))
}

make_checkpoints sparse "$work" || exit 1
corpus=$work/sentences.txt

# Each rank one thread: the file must not depend on the layout, and these
# runs share two cores.
encode() { # encode KIND RANKS STAGES OUTPUT [--set ...]
  run_kind=$1 run_ranks=$2 run_stages=$3 run_out=$4
  shift 4
  rm -f "$work/$run_kind/$run_out"
  (cd "$work/$run_kind" && timeout 300 "$mpiexec" -n "$run_ranks" "$driver" --quiet \
     --set "job.input=$corpus" --set job.window_documents=8 --set job.batch_tokens=512 \
     --set job.threads=1 --set job.pipeline_stages="$run_stages" --set "job.output=$run_out" \
     "$@" job.ini)
}

for kind in bert distilbert roberta xlm-roberta mpnet modernbert; do
  "$import" "$work/$kind" -o "$work/$kind/model.h5" --job "$work/$kind/job.ini" --sparse \
    > "$work/$kind.import" 2>&1 || { fail "$kind: tfenc-import --sparse: $(cat "$work/$kind.import")"; continue; }
done
"$import" "$work/splade" -o "$work/splade/model.h5" --job "$work/splade/job.ini" \
  > "$work/splade.import" 2>&1 || fail "SparseEncoder folder: tfenc-import: $(cat "$work/splade.import")"
for kind in bert distilbert roberta xlm-roberta mpnet modernbert splade; do
  encode "$kind" 1 1 fp32.h5 || { fail "$kind: the job failed"; continue; }
  "$TFENC_VENV_PYTHON" "$script" compare "$work/$kind/reference.h5" "$work/$kind/fp32.h5" \
    "sparse: $kind" || fail "$kind: not SpladePooling's rows"
done
ls "$work/bert" | grep -q 'sparse-' && fail "the rows' logs stay beside a complete file"

# Without --sparse the masked-LM head stays a pretraining head: a dense job.
"$import" "$work/bert" -o "$work/dense.h5" --job "$work/dense.ini" > /dev/null 2>&1 \
  && ! grep -q "type = splade" "$work/dense.ini" \
  || fail "a masked-LM checkpoint without --sparse does not import as its encoder"

# Layouts, and a resume after SIGKILL: the same CSR bit for bit.
others=""
for layout in 2:1 1:2 2:2; do
  ranks=${layout%:*} stages=${layout#*:}
  if encode bert "$((ranks * stages))" "$stages" "layout-$ranks-$stages.h5"; then
    others="$others $work/bert/layout-$ranks-$stages.h5"
  else
    fail "$ranks ranks x $stages stages: the job failed"
  fi
done
# The test plugin's pause layer (before the head, which must stay last)
# makes each microbatch take a while, so that the kill lands part-way.
TFENC_PLUGIN_PATH="$TFENC_PLUGIN_PATH:$builddir/tests/plugins/.libs"
export TFENC_PLUGIN_PATH
sed 's/^\[head\]$/[pause]\ntype = pause\nmilliseconds = 1500\n\n[head]/' "$work/bert/job.ini" \
  > "$work/bert/paused.ini"
paused() { # paused RANKS
  (cd "$work/bert" && exec "$mpiexec" -n "$1" "$driver" --quiet --set "job.input=$corpus" \
     --set job.window_documents=8 --set job.batch_tokens=512 --set job.threads=1 \
     --set job.output=killed.h5 paused.ini)
}
rm -f "$work/bert/killed.h5"
# The subshell execs mpiexec, so that $pid's children are the ranks (a
# function in the background would put one more shell between them, and
# the kill would leave the ranks running).
(cd "$work/bert" && exec "$mpiexec" -n 2 "$driver" --quiet --set "job.input=$corpus" \
   --set job.window_documents=8 --set job.batch_tokens=512 --set job.threads=1 \
   --set job.output=killed.h5 paused.ini) > "$work/killed.out" 2>&1 &
pid=$!
kill_part_way "$pid" "$work/bert/killed.h5" 0.3
left=$("$python" "$srcdir/tests/resume/progress.py" count "$work/bert/killed.h5")
echo "sparse: killed with $left (finished, total, complete) in the file"
case "$left" in
  "40 40 1"|"0 0 0") fail "the kill did not land part-way ($left)" ;;
esac
"$driver" --status "$work/bert/killed.h5" | grep -q "^output: sparse .*written when the job completes" \
  || fail "--status does not say where an unfinished file's sparse rows are"
if paused 1 > "$work/resumed.out" 2>&1; then
  others="$others $work/bert/killed.h5"
else
  fail "the resume after SIGKILL failed: $(tail -n 1 "$work/resumed.out")"
fi
# shellcheck disable=SC2086
"$TFENC_VENV_PYTHON" "$script" same "$work/bert/fp32.h5" $others > "$work/same.out" 2>&1 \
  || fail "layouts or the resume differ: $(cat "$work/same.out")"

# bf16 and int8: the vocabulary projection on oneDNN. bf16 keeps 8
# significant bits, so each product and sum on the way (the embedding, two
# layers, the head) adds a relative error up to 2^-9; the logits reach 20
# in size (unit-gain weights over 32 dimensions), so theirs reach 0.1 to
# 0.2, which log(1 + z) passes on damped by 1 / (1 + z). int8 (127 steps
# per token's row, the gate keeping sensitive steps in bf16) about doubles
# it. Measured here: 0.20 (bf16) and 0.32 (int8); the bars, 0.4 and 0.6,
# leave room for other CPUs' rounding, while a wrong tensor, a lost decoder
# bias (-12) or another activation moves values by more than 1.
for precision in bf16:0.4 int8:0.6; do
  tolerance=${precision#*:} precision=${precision%:*}
  if encode bert 1 1 "$precision.h5" --set "model.precision=$precision" > "$work/$precision.out" 2>&1; then
    "$TFENC_VENV_PYTHON" "$script" compare "$work/bert/reference.h5" "$work/bert/$precision.h5" \
      "sparse: $precision" "$tolerance" || fail "$precision: beyond its tolerance"
    # int8's accuracy gate must have compared the sparse rows, which the
    # head hands over instead of writing them into the batch's rows (all
    # zeros, whose cosine would be exactly 1).
    [ "$precision" = bf16 ] || "$TFENC_VENV_PYTHON" -c "
import h5py, sys
cosine = h5py.File(sys.argv[1], 'r').attrs['precision_sample_min_cosine']
print(f'sparse: int8 gate: sample cosine {cosine:.6f}')
sys.exit(not 0.99 < cosine < 1.0)" "$work/bert/int8.h5" \
      || fail "int8: the accuracy gate did not compare the sparse rows"
  elif grep -q "not available\|does not offer\|no oneDNN" "$work/$precision.out"; then
    echo "sparse: $precision: this build or CPU has no $precision products: $(tail -n 1 "$work/$precision.out")"
  else
    fail "$precision: the job failed: $(tail -n 1 "$work/$precision.out")"
  fi
done

# sparse_top_k and sparse_threshold: each row keeps its k largest values
# above the threshold, the rest as computed.
encode bert 1 1 top.h5 --set job.sparse_top_k=64 --set job.sparse_threshold=0.5 \
  && "$TFENC_VENV_PYTHON" "$script" thinned "$work/bert/fp32.h5" "$work/bert/top.h5" 64 0.5 \
  || fail "sparse_top_k = 64, sparse_threshold = 0.5: not the rows' 64 largest values above 0.5"

# docs/output.md's scipy.sparse recipe (marked readme-test: covered by
# tests/sparse/sparse.sh) runs on this output and prints five documents and
# five tokens (with random weights the ranking itself means nothing).
cp "$work/bert/fp32.h5" "$work/bert/sparse.h5"
covered_python_block "$srcdir/docs/output.md" tests/sparse/sparse.sh > "$work/recipe.py"
if [ ! -s "$work/recipe.py" ]; then
  fail "docs/output.md has no python block marked for this test"
elif (cd "$work/bert" && "$python" "$work/recipe.py") > "$work/recipe.out" 2>&1; then
  { sed -n 1p "$work/recipe.out" | grep -Eq '^\[ *[0-9]+( +[0-9]+){4}\]$' \
      && sed -n 2p "$work/recipe.out" | grep -Eq "^\[('[^']*', ){4}'[^']*'\]$"; } \
    || fail "docs/output.md's recipe does not print five documents and five tokens: $(cat "$work/recipe.out")"
else
  fail "docs/output.md's recipe fails: $(tail -n 1 "$work/recipe.out")"
fi

# SPLADE v1's sum over the tokens (pooling = sum) instead of the max: sums
# of up to 60 values reach about 100, where float32 in another order leaves
# a few 1e-4 (1e-6 relative), hence 1e-3.
encode bert 1 1 sum.h5 --set head.pooling=sum \
  && "$TFENC_VENV_PYTHON" "$script" compare "$work/bert/reference.h5" "$work/bert/sum.h5" \
    "sparse: pooling = sum" 1e-3 dense_sum \
  || fail "pooling = sum: not the sum over the tokens"

# --status and --dry-run say what the file holds and what the head costs.
"$driver" --status "$work/bert/top.h5" \
  | grep -q "^output: sparse \[40 documents, 30522 columns, named by vocabulary\].* the 64 largest above 0.5" \
  || fail "--status does not describe the sparse output"
(cd "$work/bert" && "$driver" --dry-run --set "job.input=$corpus" job.ini) > "$work/dry-run.txt" 2>&1
grep -q "^output: sparse.h5 (sparse \[40, 30522\] over the vocabulary" "$work/dry-run.txt" \
  && grep -q "^vocabulary projection: [0-9.]* TFLOP (2 x 30522 x d_model 32 per token)" "$work/dry-run.txt" \
  && grep -q "splade  *2.07[0-9] MFLOP/token" "$work/dry-run.txt" \
  || fail "--dry-run does not describe the sparse output and its cost: $(grep -e output -e splade "$work/dry-run.txt")"

# Bad input: one line, a non-zero exit, no file.
refused() { # refused LABEL EXPECTED-TEXT OUTPUT COMMAND...
  label=$1 expected=$2 out=$3
  shift 3
  rm -f "$out"
  if "$@" > "$work/refused.out" 2>&1; then
    fail "$label: accepted"
  elif [ "$(grep -c . "$work/refused.out")" -ne 1 ] || ! grep -q "$expected" "$work/refused.out"; then
    fail "$label: not one line saying '$expected': $(cat "$work/refused.out")"
  elif [ -e "$out" ]; then
    fail "$label: left $out behind"
  fi
}
refused "sparse_top_k = 30523" "sparse_top_k = 30523 is larger than the vocabulary" \
  "$work/big-k.h5" "$driver" --quiet --set "job.input=$corpus" --set "job.output=$work/big-k.h5" \
  --set job.sparse_top_k=30523 "$work/bert/job.ini"
refused "sparse_top_k on a dense model" "sparse_top_k applies to sparse rows" "$work/dense-k.h5" \
  "$driver" --quiet --set "job.input=$corpus" --set "job.output=$work/dense-k.h5" \
  --set job.sparse_top_k=10 "$work/dense.ini"
mkdir -p "$work/encoder" && cp "$work/bert/model.safetensors" "$work/bert/vocab.txt" "$work/encoder/" \
  && sed 's/BertForMaskedLM/BertModel/' "$work/bert/config.json" > "$work/encoder/config.json"
refused "--sparse without a masked-LM head" "sparse output needs a masked-LM head" \
  "$work/encoder/model.h5" "$import" "$work/encoder" -o "$work/encoder/model.h5" --sparse
mkdir -p "$work/untied" && cp "$work/bert/model.safetensors" "$work/bert/vocab.txt" "$work/untied/" \
  && sed 's/"architectures"/"tie_word_embeddings": false, "architectures"/' \
    "$work/bert/config.json" > "$work/untied/config.json"
refused "an untied decoder" "tie_word_embeddings is false" "$work/untied/model.h5" \
  "$import" "$work/untied" -o "$work/untied/model.h5" --sparse

if [ "$failed" -eq 0 ]; then
  echo "sparse: all checks passed"
  exit 0
fi
exit 1
