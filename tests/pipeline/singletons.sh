#!/bin/sh
# One-rank runs started without a launcher, many at once: Open MPI makes
# each a singleton, which tfenc-batch starts without its daemon
# (drivers/singleton.h). Such singletons all take job family 0, and with a
# shared session directory two starting together collided ('mkdir ...
# jf.0: File exists', 2 of 160 starts with 16 at a time, so this finds that
# regression only some of the time): every start must succeed, each run
# must equal the others, and the private session directories must be gone
# afterwards.
set -u
. "$(cd "$(dirname "$0")" && pwd)/common.sh"
work=$builddir/tests/data/generated/pipeline/singletons
failed=0
prepare_example bert-text "$work" || { echo "singletons: FAIL: cannot make the model"; exit 1; }
# A TMPDIR of the test's own: what the runs leave in it is theirs.
TMPDIR=$work/tmp
export TMPDIR
mkdir -p "$TMPDIR"
# The PML and MTL too (the suite names ob1): the runs here take what
# tfenc-batch chooses for a singleton, as a user's do.
unset OMPI_MCA_ess_singleton_isolated OMPI_MCA_orte_tmpdir_base OMPI_MCA_btl \
  OMPI_MCA_pml OMPI_MCA_mtl

# Jobs that fail at once (no such input) start and end fastest, so their
# session directories come and go closest together: 16 at a time, 5 rounds.
round=1
while [ "$round" -le 5 ]; do
  run=1
  while [ "$run" -le 16 ]; do
    "$driver" --quiet --set "job.input=$work/missing-$run.txt" \
      --set "job.output=$work/never-$run.h5" "$work/job.ini" >"$work/start-$round-$run.txt" 2>&1 &
    run=$((run + 1))
  done
  wait
  for message in "$work"/start-"$round"-*.txt; do
    # The one line a missing input gives, and nothing from MPI_Init.
    if [ "$(wc -l <"$message")" -ne 1 ] || ! grep -q "missing-" "$message"; then
      echo "singletons: FAIL: a run started beside 15 others did not end with its one line:"
      head -n 5 "$message"
      failed=$((failed + 1))
    fi
  done
  round=$((round + 1))
done

# Real jobs at once: each writes the same encodings.
for run in 1 2 3 4; do
  "$driver" --quiet --set "job.output=$work/out-$run.h5" "$work/job.ini" \
    >"$work/job-$run.txt" 2>&1 &
done
wait
for run in 1 2 3 4; do
  if [ ! -s "$work/out-$run.h5" ] || [ -s "$work/job-$run.txt" ]; then
    echo "singletons: FAIL: job $run of 4 at once: $(head -n 3 "$work/job-$run.txt")"
    failed=$((failed + 1))
  elif [ "$run" -gt 1 ] && ! h5diff "$work/out-1.h5" "$work/out-$run.h5" embeddings embeddings >/dev/null; then
    echo "singletons: FAIL: job $run of 4 at once wrote other embeddings than job 1"
    failed=$((failed + 1))
  fi
done

left=$(ls -A "$TMPDIR")
if [ -n "$left" ]; then
  echo "singletons: FAIL: the runs left in TMPDIR: $left"
  failed=$((failed + 1))
fi
rm -rf "$work"
if [ "$failed" -ne 0 ]; then
  echo "singletons: FAIL ($failed)"
  exit 1
fi
echo "singletons: PASS (84 one-rank runs, 16 and 4 at a time)"
