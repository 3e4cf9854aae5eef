#!/bin/sh
# End-to-end check that tfenc-batch, run alone and under mpiexec -n 1,
# reproduces PyTorch's nn.TransformerEncoder on the three reference models
# (and on BERT-like weights with separate Q/K/V), six layers deep.
#
# Runs from `make check` (tests/reference.mk) or by hand from a build
# directory: tests/reference/run_reference.sh. Data goes to
# BUILDDIR/tests/data/generated/reference/CASE and is rebuilt every run.
set -u

. "$(cd "$(dirname "$0")/../.." && pwd)/tests/environment.sh"

if [ ! -x "$driver" ]; then
  echo "run_reference: FAIL: $driver is missing (build tfenc first)"
  exit 1
fi

passed=0
failed=0
record() { # record STATUS WHAT
  if [ "$1" -eq 0 ]; then
    passed=$((passed + 1)); echo "run_reference: ok   $2"
  else
    failed=$((failed + 1)); echo "run_reference: FAIL $2"
  fi
}

run_case() { # run_case NAME KIND GENERATOR-OPTIONS...
  name=$1; kind=$2; shift 2
  dir=$builddir/tests/data/generated/reference/$name
  rm -rf "$dir" && mkdir -p "$dir" || { record 1 "$name: cannot create $dir"; return; }
  "$generate" "$dir" "$python" "$srcdir/tests/reference/make_reference.py" "$kind" "$dir" "$@"
  status=$?
  record $status "$name: PyTorch reference generated and self-checked"
  [ $status -eq 0 ] || return

  # The job names its files relative to itself: run it from elsewhere.
  "$driver" --quiet --set "job.output=$dir/serial.h5" "$dir/job.ini"
  record $? "$name: tfenc-batch $dir/job.ini"
  "$python" "$srcdir/tests/reference/compare.py" --label "$name serial" "$dir/serial.h5" "$dir/expected.h5"
  record $? "$name: serial output matches PyTorch"

  "$mpiexec" -n 1 "$driver" --quiet --set "job.output=$dir/mpi1.h5" "$dir/job.ini"
  record $? "$name: $mpiexec -n 1 tfenc-batch $dir/job.ini"
  "$python" "$srcdir/tests/reference/compare.py" --label "$name mpi-n1" "$dir/mpi1.h5" "$dir/expected.h5"
  record $? "$name: mpiexec -n 1 output matches PyTorch"
}

run_case postnorm_relu postnorm_relu --seed 11
run_case prenorm_gelu prenorm_gelu --seed 12
run_case bert_like bert_like --seed 13
run_case bert_like_separate_qkv bert_like --seed 14 --separate-qkv

# Negative control: the same weights composed the wrong way (GELU's tanh
# approximation instead of erf, a 1e-3 relative change per activation) must
# fail the comparison, or the bars would not be telling anything.
dir=$builddir/tests/data/generated/reference/prenorm_gelu
if [ -f "$dir/expected.h5" ]; then
  rm -f "$dir/wrong.h5"
  "$driver" --quiet --set "job.output=$dir/wrong.h5" --set encoder.ffn.activation=gelu_tanh \
    "$dir/job.ini" \
    && ! "$python" "$srcdir/tests/reference/compare.py" --label "negative control" \
         "$dir/wrong.h5" "$dir/expected.h5"
  record $? "negative control: gelu_tanh in place of gelu is detected"
fi

echo "run_reference: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
