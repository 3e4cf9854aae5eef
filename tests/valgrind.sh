#!/bin/sh
# valgrind memcheck over one small end-to-end job: tfenc-batch alone (one
# rank, no mpirun) encodes a text corpus with a BERT-like model (tokenizer,
# embeddings, attention, feed-forward, norms, pooling, HDF5 output). It must
# report no memory error and no definite leak; Open MPI's own never-freed
# allocations are suppressed by tests/valgrind.supp, which names no tfenc
# function. The output must also match PyTorch, so the run did the work.
# Runs in the normal build only: valgrind cannot run an ASan binary.
set -u
: "${top_builddir:=.}" "${top_srcdir:=.}" "${REFERENCE_PYTHON:=/usr/bin/python3}"
builddir=$(cd "$top_builddir" && pwd)
srcdir=$(cd "$top_srcdir" && pwd)
work="$builddir/tests/data/generated/valgrind"
rm -rf "$work"
mkdir -p "$work"

command -v valgrind >/dev/null || { echo "valgrind: FAIL: valgrind is not installed (sh tests/setup-deps)"; exit 1; }
: "${TFENC_PLUGIN_PATH:=$builddir/plugins/.libs}"
export TFENC_PLUGIN_PATH
# valgrind 3.19 decodes AVX2 but not AVX-512: keep OpenBLAS on AVX2 kernels
# on machines that have AVX-512. One thread keeps the report deterministic.
# hwloc's x86 backend only says it cannot work under valgrind: leave it out.
OPENBLAS_CORETYPE=Haswell OPENBLAS_NUM_THREADS=1 HWLOC_COMPONENTS=-x86
export OPENBLAS_CORETYPE OPENBLAS_NUM_THREADS HWLOC_COMPONENTS

"$REFERENCE_PYTHON" "$srcdir/tests/reference/make_reference.py" bert_like "$work" --seed 21 \
  --text "$srcdir/jobs/bert-text/corpus.txt" --vocab "$srcdir/jobs/bert-text/vocab.txt" >/dev/null \
  || { echo "valgrind: FAIL: cannot generate the reference model"; exit 1; }
cp "$srcdir/jobs/bert-text/corpus.txt" "$srcdir/jobs/bert-text/vocab.txt" "$work/"

# libtool runs the real binary (not its wrapper script) with the build
# tree's libtfenc. --errors-for-leak-kinds=definite: still-reachable memory
# (Open MPI's and HDF5's globals) is not an error; a lost block is.
"$builddir/libtool" --mode=execute valgrind --tool=memcheck --leak-check=full \
  --errors-for-leak-kinds=definite --error-exitcode=1 --num-callers=60 \
  --suppressions="$srcdir/tests/valgrind.supp" --log-file="$work/memcheck.log" \
  "$builddir/drivers/tfenc-batch" --quiet --set "job.output=$work/output.h5" "$work/job.ini"
code=$?
summary=$(grep -E "ERROR SUMMARY|definitely lost:" "$work/memcheck.log" | sed 's/^==[0-9]*== *//' | tr '\n' ' ')
if [ "$code" -ne 0 ]; then
  echo "valgrind: FAIL: exit $code: $summary"
  grep -v '^==[0-9]*== *$' "$work/memcheck.log" | tail -n 80
  exit 1
fi
echo "valgrind: ok   memcheck: $summary"
"$REFERENCE_PYTHON" "$srcdir/tests/reference/compare.py" --label "valgrind bert_like" \
  "$work/output.h5" "$work/expected.h5" || { echo "valgrind: FAIL: output differs from PyTorch"; exit 1; }
rm -rf "$work"
echo "1 passed, 0 failed"
