#!/bin/sh
# A job killed with SIGKILL at seeded random points of its run (all
# of mpiexec -n 4's processes at once, as a node failure or a hard time limit
# does) and run again with the same command must end with the file an
# uninterrupted run writes, bitwise, also when resumed at another rank count
# (microbatches are cut inside fixed windows of the corpus, so they are the
# same at any layout). A resume encodes only what the killed run did not
# finish: exactly the documents not marked finished in the file, not whole
# windows again. Then SIGTERM (what Slurm sends first)
# must stop the job cleanly with a message saying how to resume, and the
# resumed file must be whole too. Pooled output from a text corpus (4
# replicas) and per-token output from an HDF5 corpus (2 replicas x 2 stages).
set -u
. "$(cd "$(dirname "$0")/../pipeline" && pwd)/common.sh"
work=$builddir/tests/data/generated/resume
failed=0
partial=0 # kills that left some but not all documents finished
seed=${TFENC_TEST_SEED:-20261122}
# Three kill points per case, then SIGTERM; under the sanitizers, which
# look for memory errors in the resume paths rather than at many points,
# the last point only (the resume at another rank count) and SIGTERM. Where
# the sanitizer build runs that share (tests/run-all.sh --sanitizers), the
# first two points only.
first_point=1 last_point=3 sigterm=1
[ -z "${TFENC_SANITIZER_BUILD:-}" ] || first_point=3
[ -z "${TFENC_ONLY_UNSANITIZED_CASES:-}" ] || last_point=2 sigterm=

prepare_example bert-text "$work/pooled" || { echo "kill_resume: FAIL: cannot make a model"; exit 1; }
prepare_example original-postnorm "$work/tokens" || { echo "kill_resume: FAIL: cannot make a model"; exit 1; }
"$python" "$srcdir/tests/pipeline/make_inputs.py" text "$work/pooled/corpus.txt" "$work/pooled/big.txt" 50 || exit 1
"$python" "$srcdir/tests/pipeline/make_inputs.py" hdf5 "$work/tokens/big.h5" 1000 1000 128 11 || exit 1
# The test plugin's `pause` layer (it leaves the activations alone) makes
# every microbatch take a while, so that a run lasts about 5 s whatever the
# machine's speed: finished documents show in the file once a second, and a
# signal lands part-way. The pauses do that, not the encoding: 2,500 and
# 1,000 documents (35 and 85 microbatches a rank) with twice the pause cost
# half the CPU time of twice as many with the pause halved, for runs as long.
TFENC_PLUGIN_PATH="$TFENC_PLUGIN_PATH:$builddir/tests/plugins/.libs"
export TFENC_PLUGIN_PATH
printf '\n[pause]\ntype = pause\nmilliseconds = 120\n' >> "$work/pooled/job.ini"
printf '\n[pause]\ntype = pause\nmilliseconds = 40\n' >> "$work/tokens/job.ini"

fail() {
  echo "kill_resume: FAIL $*"
  failed=$((failed + 1))
}

# finished FILE: "DONE TOTAL COMPLETE" read from the file a run left.
finished() {
  "$python" "$srcdir/tests/resume/progress.py" count "$1"
}

# start DIR RANKS OUTPUT SETTINGS...: runs the job in the background; sets $pid.
start() {
  dir=$1 ranks=$2 out=$3
  shift 3
  (cd "$dir" && exec "$mpiexec" -n "$ranks" "$driver" "$@" --set job.output="$out" job.ini) \
    > "$dir/run.out" 2> "$dir/run.err" &
  pid=$!
}

# wait_until FILE FRACTION: until that fraction of the documents is
# finished in FILE, or the run has ended.
wait_until() {
  "$python" "$srcdir/tests/resume/progress.py" wait "$1" "$2" "$pid"
}

# kill_all SIGNAL: the ranks first (as a node failure would), then mpiexec.
kill_all() {
  pkill "-$1" -P "$pid" 2>/dev/null
  [ "$1" = KILL ] && kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  status=$?
}

compare() { # compare BASELINE OTHER WHAT
  result=$("$python" "$srcdir/tests/pipeline/compare_layouts.py" "$1" "$2")
  code=$?
  echo "kill_resume:   $result"
  [ $code -eq 0 ] || fail "$3: the resumed file differs from the uninterrupted run"
}

# redone DONE TOTAL ERRFILE WHAT: the resumed run's summary must count
# exactly the documents the killed run left unfinished.
check_redone() {
  encoded=$(sed -n 's/.*: wrote .*: \([0-9]*\) documents (.*/\1/p' "$3" | tail -n 1)
  if [ -z "$encoded" ]; then
    fail "$4: the resumed run printed no summary"
  elif [ "$encoded" -ne $(($2 - $1)) ]; then
    fail "$4: the resume encoded $encoded documents; $(($2 - $1)) were unfinished"
  else
    echo "kill_resume:   the resume encoded $encoded documents, the $(($2 - $1)) left unfinished"
  fi
}

run_case() { # run_case NAME DIR RANKS SETTINGS...
  name=$1 dir=$2 ranks=$3
  shift 3
  rm -f "$dir/baseline.h5"
  if ! (cd "$dir" && "$mpiexec" -n "$ranks" "$driver" --quiet "$@" --set job.output=baseline.h5 job.ini); then
    fail "$name: the uninterrupted run failed"
    return
  fi

  point=$((first_point - 1))
  for fraction in $("$python" -c "import random; r = random.Random($seed + len('$name')); print(' '.join(f'{r.uniform(0.1, 0.8):.2f}' for _ in range(3)))" | cut -d' ' -f"$first_point-$last_point"); do
    point=$((point + 1))
    out=killed-$point.h5
    rm -f "$dir/$out"
    start "$dir" "$ranks" "$out" "$@"
    wait_until "$dir/$out" "$fraction"
    kill_all KILL
    read -r done total complete <<EOF2
$(finished "$dir/$out")
EOF2
    echo "kill_resume: $name point $point: SIGKILL once ${fraction} of the documents were finished: $done of $total documents finished, complete = $complete"
    [ "$done" -gt 0 ] && [ "$done" -lt "$total" ] && partial=$((partial + 1))
    if [ "$complete" = 1 ] && [ "$done" -lt "$total" ]; then
      fail "$name point $point: a killed run's file says complete"
    fi
    # The last point resumes at another rank count (2 replicas x 1 stage).
    resume_ranks=$ranks extra=""
    [ $point -eq 3 ] && resume_ranks=2 extra="--set job.pipeline_stages=1"
    # shellcheck disable=SC2086
    if ! (cd "$dir" && "$mpiexec" -n "$resume_ranks" "$driver" "$@" $extra --set job.output="$out" job.ini) \
         > "$dir/resume.out" 2> "$dir/resume.err"; then
      fail "$name point $point: the resumed run failed: $(head -n 2 "$dir/resume.err")"
      continue
    fi
    if [ "$done" -gt 0 ] && ! grep -q "resuming" "$dir/resume.err"; then
      fail "$name point $point: the second run did not say it resumes"
    fi
    check_redone "$done" "$total" "$dir/resume.err" "$name point $point"
    compare "$dir/baseline.h5" "$dir/$out" "$name point $point (resumed at $resume_ranks ranks)"
  done

  # SIGTERM to every rank, as Slurm signals a job step at its time limit.
  [ -n "$sigterm" ] || return 0
  out=terminated.h5
  rm -f "$dir/$out"
  start "$dir" "$ranks" "$out" "$@"
  wait_until "$dir/$out" 0.3
  kill_all TERM
  if [ "$status" -ne 75 ]; then
    fail "$name: SIGTERM: exit status $status, expected 75 (stopped, resumable)"
  fi
  if ! grep -q "stopped by a signal: .* run the same command again to resume" "$dir/run.err"; then
    fail "$name: SIGTERM: no clean-stop message; stderr: $(grep -v documents, "$dir/run.err" | head -n 3)"
  else
    echo "kill_resume: $name: $(grep 'stopped by a signal' "$dir/run.err")"
  fi
  read -r done total complete <<EOF2
$(finished "$dir/$out")
EOF2
  if ! (cd "$dir" && "$mpiexec" -n "$ranks" "$driver" "$@" --set job.output="$out" job.ini) \
       > "$dir/resume.out" 2> "$dir/resume.err"; then
    fail "$name: resuming after SIGTERM failed"
  else
    check_redone "$done" "$total" "$dir/resume.err" "$name after SIGTERM"
    compare "$dir/baseline.h5" "$dir/$out" "$name after SIGTERM"
  fi
}

run_case pooled "$work/pooled" 4 --set job.input=big.txt --set job.batch_tokens=256 \
  --set job.window_documents=100
run_case tokens "$work/tokens" 4 --set job.input=big.h5 --set job.batch_tokens=256 \
  --set job.pipeline_stages=2 --set job.window_documents=50

# Resuming is only tested when a kill left a partly finished file.
[ "$partial" -gt 0 ] || fail "no kill point left a partly finished file; nothing was resumed"
if [ "$failed" -ne 0 ]; then
  echo "kill_resume: FAIL ($failed)"
  exit 1
fi
echo "kill_resume: every killed or stopped run resumed to the uninterrupted result"
