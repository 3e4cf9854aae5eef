#!/bin/sh
# jobs/slurm/encode.sbatch under a real one-node Slurm cluster started by
# this test on this machine (Debian's slurmctld, slurmd and munge; a munge
# key, a slurm.conf and every daemon's state, logs and pid files in the
# test's own directory; daemons stopped at the end, even on failure):
#  1. sbatch the script on a real model and corpus: real srun starts the
#     ranks through the MPI plugin the script documents, and the output is
#     the single-rank reference's, bitwise;
#  2. a time limit that expires mid-run: Slurm's warning signal reaches the
#     script, tfenc-batch stops cleanly, the script requeues, the requeued
#     run (SLURM_RESTART_COUNT 1) resumes, and the final file is bitwise the
#     uninterrupted run's;
#  3. scancel mid-run: not requeued, the output left resumable (`--status`
#     says unfinished), and a resubmission completes it bitwise;
#  4. a job that fails by itself (a bad job file) is not requeued, and its
#     error line is in the job's output file.
# Without what real daemons need (the packages, root, a resolvable
# hostname) it says why and counts as skipped (77); under CI (CI=true),
# whose machine must run it, that is a failure.
set -u
. "$(cd "$(dirname "$0")" && pwd)/../pipeline/common.sh"
work=$builddir/tests/data/generated/cluster/slurm
cluster=$work/cluster

skip() {
  if [ "${CI:-}" = true ]; then
    echo "slurm: FAIL: cannot run a real Slurm cluster here, and CI must: $*"
    exit 1
  fi
  echo "slurm: SKIP: $*"
  exit 77
}
for program in slurmctld slurmd munged munge sbatch srun scontrol squeue sinfo; do
  command -v "$program" > /dev/null 2>&1 || skip "$program is not installed (tests/deps/test.txt lists Slurm's packages)"
done
[ "$(id -u)" -eq 0 ] || skip "slurmd must run as root to start job steps; this test runs as $(id -un)"
node=$(hostname -s)
[ -n "$node" ] || skip "this machine has no host name"

failed=0
fail() {
  echo "slurm: FAIL $*"
  failed=$((failed + 1))
}
# stop WHY: a failure that makes the rest meaningless.
stop() {
  echo "slurm: FAIL $*; the daemons' logs are in $cluster/log"
  exit 1
}

# --- the cluster -------------------------------------------------------------
rm -rf "$cluster"
mkdir -p "$cluster/state" "$cluster/spool" "$cluster/log" "$cluster/munge" "$cluster/tmp"
daemons=""
stop_cluster() {
  scancel --full --quiet --user="$(id -un)" > /dev/null 2>&1
  for pid in $daemons; do kill "$pid" 2>/dev/null; done
  for pid in $daemons; do
    # Up to 10 s for a clean exit, then SIGKILL: a daemon must not outlive the test.
    n=0
    while kill -0 "$pid" 2>/dev/null && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
    kill -KILL "$pid" 2>/dev/null
  done
  daemons=""
  # munged by its socket too, in case its pid file came late.
  [ -z "${munge_socket:-}" ] || munged --stop --socket="$munge_socket" > /dev/null 2>&1
}
trap 'stop_cluster' EXIT
trap 'exit 1' INT TERM HUP

# Two free ports on loopback for slurmctld and slurmd, so that a Slurm the
# machine already runs (or another copy of this test) is not disturbed.
ports=$("$python" -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(" ".join(str(x.getsockname()[1]) for x in s))')
set -- $ports
controller_port=$1
node_port=$2

head -c 1024 /dev/urandom > "$cluster/munge/munge.key"
chmod 600 "$cluster/munge/munge.key"
munge_socket=$cluster/munge/socket
munged --force --key-file="$cluster/munge/munge.key" --socket="$munge_socket" \
  --pid-file="$cluster/munge/munged.pid" --seed-file="$cluster/munge/seed" \
  --log-file="$cluster/log/munged.log" \
  || skip "munged did not start: $(tail -n 2 "$cluster/log/munged.log" 2>/dev/null)"
n=0
until [ -s "$cluster/munge/munged.pid" ] || [ $n -ge 50 ]; do sleep 0.1; n=$((n + 1)); done
daemons="$(cat "$cluster/munge/munged.pid" 2>/dev/null)"

# The node as slurmd sees it (CPUs, sockets, cores, memory), reached on
# loopback so that no name service is needed.
hardware=$(slurmd -C 2>/dev/null | sed -n 's/^NodeName=[^ ]* //p' | sed 's/ *UpTime=.*//')
[ -n "$hardware" ] || skip "slurmd -C does not describe this machine"
cat > "$cluster/slurm.conf" <<EOF
ClusterName=tfenctest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$controller_port
SlurmdPort=$node_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$munge_socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$cluster/state
SlurmdSpoolDir=$cluster/spool
TmpFS=$cluster/tmp
SlurmctldPidFile=$cluster/slurmctld.pid
SlurmdPidFile=$cluster/slurmd.pid
SlurmctldLogFile=$cluster/log/slurmctld.log
SlurmdLogFile=$cluster/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobRequeue=1
KillWait=10
OverTimeLimit=1
MinJobAge=600
NodeName=$node NodeAddr=127.0.0.1 $hardware State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
SLURM_CONF=$cluster/slurm.conf
export SLURM_CONF
slurmctld -D -i > "$cluster/log/slurmctld.out" 2>&1 &
daemons="$daemons $!"
slurmd -D -N "$node" > "$cluster/log/slurmd.out" 2>&1 &
daemons="$daemons $!"
n=0
until sinfo --noheader --states=idle --format=%n 2>/dev/null | grep -qx "$node"; do
  n=$((n + 1))
  if [ $n -ge 60 ]; then
    skip "the node did not come up in 30 s: $(tail -n 3 "$cluster/log/slurmctld.log" "$cluster/log/slurmd.log" 2>/dev/null | tr '\n' ' ')"
  fi
  sleep 0.5
done
echo "slurm: $(slurmctld -V), munge $(munged --version 2>&1 | sed -n 's/^munge-\([^ ]*\).*/\1/p'), node $node ($hardware)"
echo "slurm: srun --mpi=${TFENC_SRUN_MPI:-pmix} (the script's default; srun offers: $(srun --mpi=list 2>&1 | sed -n 's/^\t//p' | tr '\n' ' '))"

# --- the job -------------------------------------------------------------
prepare_example bert-text "$work/job" || { echo "slurm: FAIL: cannot make the model"; exit 1; }
mkdir -p "$work/bin"
ln -sf "$driver" "$work/bin/tfenc-batch"
PATH="$work/bin:$PATH"
TFENC_PLUGIN_PATH="$TFENC_PLUGIN_PATH:$builddir/tests/plugins/.libs"
export PATH TFENC_PLUGIN_PATH

# job_state ID: Slurm's state of the job (PENDING, RUNNING, COMPLETED, ...).
job_state() {
  scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'
}
job_restarts() {
  scontrol show job "$1" 2>/dev/null | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p'
}
# wait_for ID SECONDS STATE...: waits until the job is in one of the states.
wait_for() {
  id=$1
  limit=$2
  shift 2
  n=0
  while [ $n -lt $((limit * 2)) ]; do
    state=$(job_state "$id")
    for wanted in "$@"; do [ "$state" = "$wanted" ] && return 0; done
    sleep 0.5
    n=$((n + 1))
  done
  return 1
}
# submit LOG SBATCH_OPTIONS... -- TFENC_OPTIONS...: the script on 2 tasks of
# this node, from the job's directory; prints the job id.
submit() {
  log=$1
  shift
  options=""
  while [ "$1" != "--" ]; do options="$options $1"; shift; done
  shift
  (cd "$work/job" && sbatch --parsable --nodes=1 --ntasks=2 --ntasks-per-node=2 --cpus-per-task=1 \
     --output="$log" --open-mode=append $options "$srcdir/jobs/slurm/encode.sbatch" job.ini --quiet "$@")
}

# 1. A whole run through real srun, two pipeline stages.
rm -f "$work/job/embeddings.h5" "$work/run1.log"
id=$(submit "$work/run1.log" --time=5 -- --set job.pipeline_stages=2) || stop "sbatch refused the script"
wait_for "$id" 300 COMPLETED FAILED CANCELLED TIMEOUT NODE_FAIL OUT_OF_MEMORY \
  || fail "job $id did not end in 300 s (state $(job_state "$id"))"
[ "$(job_state "$id")" = COMPLETED ] || fail "job $id ended $(job_state "$id"): $(tail -n 5 "$work/run1.log")"
"$python" "$srcdir/tests/reference/compare.py" "$work/job/embeddings.h5" "$work/job/expected.h5" \
  --label "slurm srun 2 tasks, 2 stages" || fail "the output is not the reference's"
echo "slurm: 1. job $id ran through srun on $node and equals the reference"

# The longer job of 2 and 3: 1,000 documents, ~125 microbatches of 128
# tokens, slowed by a pause layer to about a minute on 2 ranks, so that
# Slurm's warning (some 5 to 35 s into a run) lands mid-run.
"$python" "$here/../pipeline/make_inputs.py" text "$work/job/corpus.txt" "$work/job/big.txt" 20 || exit 1
printf "\n[pause]\ntype = pause\nmilliseconds = 1000\n" >> "$work/job/job.ini"
big="--set job.input=big.txt --set job.window_documents=100 --set job.batch_tokens=128"
rm -f "$work/job/alone.h5"
# shellcheck disable=SC2086
(cd "$work/job" && sed '/^\[pause\]/,$d' job.ini > alone.ini && "$driver" --quiet $big \
   --set job.output=alone.h5 alone.ini) || fail "the uninterrupted reference run failed"

# 2. The time limit: 1 minute, the warning (SIGUSR1) 55 s before it. Slurm
# checks limits periodically (every 30 s), so the warning comes 5 to 35 s
# into the run.
rm -f "$work/job/limit.h5" "$work/run2.log"
# shellcheck disable=SC2086
id=$(submit "$work/run2.log" --time=1 --signal=B:USR1@55 -- $big --set job.output=limit.h5) \
  || stop "sbatch refused the script"
n=0
until [ "$(job_restarts "$id")" = 1 ] || [ $n -ge 240 ]; do sleep 0.5; n=$((n + 1)); done
[ "$(job_restarts "$id")" = 1 ] || fail "job $id was not requeued at its time limit (state $(job_state "$id")): $(tail -n 5 "$work/run2.log")"
read -r done total complete <<EOF
$("$python" "$srcdir/tests/resume/progress.py" count "$work/job/limit.h5")
EOF
echo "slurm: 2. job $id was requeued at its time limit with $done of $total documents finished"
# The signal reached the ranks (tfenc-batch says so when it stops), before
# the end (rows may be none yet when Slurm warns within seconds of the
# start on a loaded machine; the resumed runs must finish the file either way).
[ "$complete" != 1 ] || fail "the job finished before its time limit's warning: nothing to requeue"
grep -q "stopped by a signal" "$work/run2.log" \
  || fail "Slurm's warning did not reach the ranks: $(tail -n 5 "$work/run2.log")"
# Slurm holds a requeued job for about two minutes before it may start
# again; release it each time, as an administrator would, once the second
# of the requeue has passed: slurmd stamps the revoked credential of the
# run that ended with a one-second clock, and a run started within that
# second is killed as "Job credential revoked" (seen). (A StartTime in
# the future waits for the scheduler's next pass instead, half a minute
# of the next run's time limit.) Each run may be
# warned of its limit again before the job is done (Slurm checks limits
# every 30 s or so), so the job may take a few runs.
n=0
while [ $n -lt 20 ]; do
  wait_for "$id" 300 PENDING COMPLETED FAILED CANCELLED TIMEOUT NODE_FAIL \
    || fail "job $id did not end or requeue in 300 s (state $(job_state "$id"))"
  [ "$(job_state "$id")" = PENDING ] || break
  sleep 2
  scontrol update jobid="$id" StartTime=now > /dev/null 2>&1
  wait_for "$id" 60 RUNNING COMPLETED FAILED CANCELLED || fail "requeued job $id did not start"
  n=$((n + 1))
done
echo "slurm: 2. job $id ended $(job_state "$id") after $(job_restarts "$id") requeue(s)"
[ "$(job_state "$id")" = COMPLETED ] || fail "requeued job $id ended $(job_state "$id"): $(tail -n 5 "$work/run2.log")"
grep -q "run 2 of job $id (requeued): resuming" "$work/run2.log" \
  || fail "the requeued run did not see SLURM_RESTART_COUNT: $(tail -n 5 "$work/run2.log")"
grep -q "resuming" "$work/run2.log" || fail "the requeued run did not resume"
"$python" "$here/../pipeline/compare_layouts.py" "$work/job/alone.h5" "$work/job/limit.h5" \
  || fail "the file finished by the requeued run differs from an uninterrupted run"

# 3. scancel mid-run: the job ends CANCELLED, is not requeued, and leaves a
# resumable file that a resubmission completes.
rm -f "$work/job/cancel.h5" "$work/run3.log"
# shellcheck disable=SC2086
id=$(submit "$work/run3.log" --time=10 -- $big --set job.output=cancel.h5) || stop "sbatch refused the script"
timeout 240 "$python" "$srcdir/tests/resume/progress.py" wait "$work/job/cancel.h5" 0.2 $$ \
  || fail "job $id wrote nothing in 240 s: $(tail -n 5 "$work/run3.log")"
scancel "$id"
wait_for "$id" 120 CANCELLED COMPLETED FAILED || fail "cancelled job $id did not end (state $(job_state "$id"))"
sleep 2
[ "$(job_state "$id")" = CANCELLED ] || fail "cancelled job $id ended $(job_state "$id")"
[ "$(job_restarts "$id")" = 0 ] || fail "a cancelled job was requeued"
(cd "$work/job" && "$driver" --status job.ini $big --set job.output=cancel.h5 > "$work/status3.out" 2>&1)
status=$?
[ "$status" -eq 3 ] || fail "--status of the cancelled job's output exited $status, not 3 (unfinished): $(head -n 3 "$work/status3.out")"
# shellcheck disable=SC2086
id=$(submit "$work/run3.log" --time=10 -- $big --set job.output=cancel.h5) || stop "sbatch refused the script"
wait_for "$id" 300 COMPLETED FAILED CANCELLED TIMEOUT || fail "resubmitted job $id did not end"
[ "$(job_state "$id")" = COMPLETED ] || fail "resubmitted job $id ended $(job_state "$id"): $(tail -n 5 "$work/run3.log")"
"$python" "$here/../pipeline/compare_layouts.py" "$work/job/alone.h5" "$work/job/cancel.h5" \
  || fail "the file completed after scancel differs from an uninterrupted run"
echo "slurm: 3. scancel left the output resumable (--status: unfinished) and a resubmission completed it"

# 4. A job that fails by itself: not requeued, its error line in its log.
rm -f "$work/job/broken.h5" "$work/run4.log"
id=$(submit "$work/run4.log" --time=5 -- --set job.output=broken.h5 --set model.weights=missing.h5) \
  || stop "sbatch refused the script"
wait_for "$id" 120 FAILED COMPLETED CANCELLED TIMEOUT || fail "failing job $id did not end"
[ "$(job_state "$id")" = FAILED ] || fail "a failing job ended $(job_state "$id")"
[ "$(job_restarts "$id")" = 0 ] || fail "a failing job was requeued"
grep -q "missing.h5" "$work/run4.log" || fail "the job's output file does not name the missing weights: $(tail -n 3 "$work/run4.log")"
echo "slurm: 4. a failing job ended FAILED, not requeued: $(grep -m 1 "missing.h5" "$work/run4.log")"

if [ "$failed" -ne 0 ]; then
  echo "slurm: FAIL ($failed); the daemons' logs are in $cluster/log"
  exit 1
fi
echo "slurm: real Slurm ran encode.sbatch to the reference, requeued at the time limit and resumed, left a cancelled job resumable, and did not requeue a failure"
