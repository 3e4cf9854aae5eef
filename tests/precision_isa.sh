#!/bin/sh
# Where oneDNN sees no AVX512_BF16, AVX512_VNNI or AMX (ONEDNN_MAX_CPU_ISA
# hides them from it, as a CPU without them would), a bf16 or int8 job says
# so in one line and names the precision that runs: under AVX2 bf16 falls
# back to fp32 (and gives fp32's numbers, bit for bit), int8 runs without
# VNNI; under plain AVX-512 bf16 runs emulated. A CPU with AMX needs no
# code change: oneDNN picks its AMX kernels itself, which ONEDNN_VERBOSE=1
# shows (implementation names such as brg:avx512_core_amx). Under every cap
# a linear map's rows stay independent of their batch, fp32 on oneDNN's
# included.
set -u
: "${top_builddir:=.}" "${top_srcdir:=.}" "${REFERENCE_PYTHON:=/usr/bin/python3}"
builddir=$(cd "$top_builddir" && pwd)
srcdir=$(cd "$top_srcdir" && pwd)
work="$builddir/tests/data/generated/precision_isa"
rm -rf "$work"
mkdir -p "$work"
: "${TFENC_PLUGIN_PATH:=$builddir/plugins/.libs}"
export TFENC_PLUGIN_PATH
batch="$builddir/drivers/tfenc-batch"
passed=0 failed=0

"$srcdir/tests/harness/generate" "$work" \
  "$REFERENCE_PYTHON" "$srcdir/tests/reference/make_reference.py" bert_like "$work" --seed 5 \
  --text "$srcdir/jobs/bert-text/corpus.txt" --vocab "$srcdir/jobs/bert-text/vocab.txt" >/dev/null \
  || { echo "precision_isa: FAIL: cannot generate the model"; exit 1; }
cp "$srcdir/jobs/bert-text/corpus.txt" "$srcdir/jobs/bert-text/vocab.txt" "$work/"

# run NAME ISA PRECISION: runs the job, keeping stderr in $work/NAME.err
run() {
  name=$1 isa=$2 precision=$3
  if [ -n "$isa" ]; then
    ONEDNN_MAX_CPU_ISA=$isa "$batch" --set "job.output=$work/$name.h5" --set job.resume=false \
      --set "model.precision=$precision" "$work/job.ini" 2>"$work/$name.err"
  else
    "$batch" --set "job.output=$work/$name.h5" --set job.resume=false \
      --set "model.precision=$precision" "$work/job.ini" 2>"$work/$name.err"
  fi
}

# check NAME PATTERN: the run's stderr has exactly one precision line, matching PATTERN
check() {
  name=$1 pattern=$2
  lines=$(grep -c "precision = [a-z0-9]*: this CPU lacks" "$work/$name.err")
  if [ "$lines" -eq 1 ] && grep -Eq "$pattern" "$work/$name.err"; then
    echo "ok   $name: $(grep 'this CPU lacks' "$work/$name.err")"
    passed=$((passed + 1))
  else
    echo "FAIL $name: expected one line matching '$pattern' in:"
    cat "$work/$name.err"
    failed=$((failed + 1))
  fi
}

run fp32 "" fp32 || { echo "precision_isa: FAIL: the fp32 job failed"; cat "$work/fp32.err"; exit 1; }
if grep -q "this CPU lacks" "$work/fp32.err"; then
  echo "FAIL fp32: an fp32 job has nothing to say about instruction sets"
  failed=$((failed + 1))
fi

run bf16-avx2 AVX2 bf16 || { echo "FAIL bf16-avx2: the job failed"; failed=$((failed + 1)); }
check bf16-avx2 "precision = bf16: this CPU lacks AVX512_BF16 and AMX \(oneDNN runs avx2\); fp32 runs instead"
# What ran is fp32: the same numbers as the fp32 job.
if "$REFERENCE_PYTHON" - "$work/fp32.h5" "$work/bf16-avx2.h5" <<'PY'
import sys, h5py, numpy
a, b = (h5py.File(p, "r")["embeddings"][...] for p in sys.argv[1:3])
sys.exit(0 if numpy.array_equal(a, b) else 1)
PY
then
  echo "ok   bf16-avx2: the embeddings equal the fp32 job's"
  passed=$((passed + 1))
else
  echo "FAIL bf16-avx2: the embeddings differ from the fp32 job's"
  failed=$((failed + 1))
fi

run int8-avx2 AVX2 int8 || { echo "FAIL int8-avx2: the job failed"; tail -3 "$work/int8-avx2.err"; failed=$((failed + 1)); }
check int8-avx2 "precision = int8: this CPU lacks AVX512_VNNI and AMX \(oneDNN runs avx2\); int8 runs \(without VNNI, slower\)"

# Plain AVX-512 where this CPU has it: bf16 runs, emulated.
run bf16-avx512 AVX512_CORE bf16 || { echo "FAIL bf16-avx512: the job failed"; failed=$((failed + 1)); }
if grep -q "oneDNN runs avx2)" "$work/bf16-avx512.err"; then
  check bf16-avx512 "lacks AVX512_BF16 and AMX \(oneDNN runs avx2\); fp32 runs instead"
else
  check bf16-avx512 "precision = bf16: this CPU lacks AVX512_BF16 and AMX \(oneDNN runs avx512_core\); bf16 runs \(emulated, slower\)"
fi

# fp32 on oneDNN ([model] fp32_products = onednn) under each cap: its own
# kernels for the instruction set, within the fp32 bar of OpenBLAS's rows
# (tests/import/parity.sh: cosine 1 - 1e-5, 1e-4 absolute), and nothing
# to say about instruction sets.
for isa in AVX2 AVX512_CORE; do
  name=fp32-onednn-$isa
  if ONEDNN_MAX_CPU_ISA=$isa "$batch" --set "job.output=$work/$name.h5" --set job.resume=false \
       --set model.fp32_products=onednn "$work/job.ini" 2>"$work/$name.err" &&
     ! grep -q "this CPU lacks" "$work/$name.err" &&
     "$REFERENCE_PYTHON" - "$work/fp32.h5" "$work/$name.h5" <<'PY'
import sys, h5py, numpy
a, b = (h5py.File(p, "r")["embeddings"][...].astype(numpy.float64) for p in sys.argv[1:3])
cosine = (a * b).sum(1) / numpy.linalg.norm(a, axis=1) / numpy.linalg.norm(b, axis=1)
sys.exit(0 if cosine.min() >= 0.99999 and numpy.abs(a - b).max() <= 1e-4 else 1)
PY
  then
    echo "ok   $name: within the fp32 bar of OpenBLAS's rows"
    passed=$((passed + 1))
  else
    echo "FAIL $name: failed, or outside the fp32 bar of OpenBLAS's rows:"
    cat "$work/$name.err"
    failed=$((failed + 1))
  fi
done

# Each instruction set's kernels keep a linear map's rows independent of
# their batch and threads (tests/test_batch_invariance under each cap; the
# uncapped run is its own test). The cap that hides everything is AVX2.
for isa in AVX2 AVX512_CORE AVX512_CORE_VNNI AVX512_CORE_BF16; do
  if ONEDNN_MAX_CPU_ISA=$isa "$builddir/tests/test_batch_invariance" >"$work/invariance-$isa.log" 2>&1; then
    echo "ok   rows independent of their batch with oneDNN capped at $isa"
    passed=$((passed + 1))
  else
    echo "FAIL rows depend on their batch with oneDNN capped at $isa:"
    grep -E 'differ|FAIL' "$work/invariance-$isa.log" | head -5
    failed=$((failed + 1))
  fi
done

rm -rf "$work"
echo "precision_isa.sh: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
