#!/bin/sh
# Runs each example of jobs/ as its README tells a user to (make-model, then
# tfenc-batch job.ini, then mpiexec -n 1 tfenc-batch job.ini, from inside the
# example's directory) and checks each output file against the PyTorch
# reference that make-model wrote beside it (tests/reference/compare.py).
#
# The examples are copied to BUILDDIR/tests/data/generated/jobs/ first, so
# the source tree stays clean and read-only source trees work.
set -u

. "$(cd "$(dirname "$0")/../.." && pwd)/tests/environment.sh"

if [ ! -x "$driver" ]; then
  echo "run_jobs: FAIL: $driver is missing (build tfenc first)"
  exit 1
fi

passed=0
failed=0
record() { # record STATUS WHAT
  if [ "$1" -eq 0 ]; then
    passed=$((passed + 1)); echo "run_jobs: ok   $2"
  else
    failed=$((failed + 1)); echo "run_jobs: FAIL $2"
  fi
}

run_example() { # run_example NAME
  name=$1
  dir=$builddir/tests/data/generated/jobs/$name
  rm -rf "$dir" && mkdir -p "$(dirname "$dir")" && cp -R "$srcdir/jobs/$name" "$dir" \
    && chmod -R u+w "$dir" || { record 1 "$name: cannot copy the example to $dir"; return; }
  output=$(sed -n 's/^output *= *//p' "$dir/job.ini" | head -n 1)
  [ -n "$output" ] || { record 1 "$name: job.ini names no output"; return; }

  (cd "$dir" && ./make-model)
  status=$?
  record $status "$name: ./make-model"
  [ $status -eq 0 ] || return

  (cd "$dir" && "$driver" --quiet job.ini)
  record $? "$name: tfenc-batch job.ini"
  if [ -f "$dir/$output" ]; then
    mv "$dir/$output" "$dir/serial-$output"
  fi
  "$python" "$srcdir/tests/reference/compare.py" --label "$name serial" \
    "$dir/serial-$output" "$dir/expected.h5"
  record $? "$name: tfenc-batch output matches PyTorch"

  (cd "$dir" && "$mpiexec" -n 1 "$driver" --quiet job.ini)
  record $? "$name: $mpiexec -n 1 tfenc-batch job.ini"
  "$python" "$srcdir/tests/reference/compare.py" --label "$name mpi-n1" \
    "$dir/$output" "$dir/expected.h5"
  record $? "$name: mpiexec -n 1 output matches PyTorch"
}

for example in original-postnorm prenorm-gpt bert-text shards; do
  run_example "$example"
done

# jobs/shards' Parquet file gives the same rows (CI builds with Arrow and
# has pyarrow, so make-model wrote it).
dir=$builddir/tests/data/generated/jobs/shards
if ! grep -q "^#define HAVE_PARQUET 1" "$builddir/config.h"; then
  record 1 "shards: Parquet: this build has none (run tests/setup-python-venv, then configure)"
elif [ ! -f "$dir/parquet/part-0.parquet" ]; then
  record 1 "shards: make-model wrote no parquet/ (no pyarrow in the tests' Python?)"
else
  (cd "$dir" && "$driver" --quiet --set job.input=parquet --set job.output=parquet.h5 job.ini)
  record $? "shards: tfenc-batch --set job.input=parquet job.ini"
  "$python" "$srcdir/tests/reference/compare.py" --label "shards parquet" \
    "$dir/parquet.h5" "$dir/expected.h5"
  record $? "shards: the Parquet file's output matches PyTorch"
fi

echo "run_jobs: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
