#!/bin/sh
# Runs jobs/slurm/encode.sbatch as Slurm would run its batch step, with a
# stand-in `srun` that starts the tasks with mpiexec and a stand-in
# `scontrol` that records requeues (this machine has no Slurm):
#  1. a whole run: the script's command line must be one tfenc-batch
#     accepts, and the output must be the reference's;
#  2. the time limit: SIGTERM to the batch script alone, as
#     `--signal=B:TERM@120` sends it, while the job runs. The step's exit
#     status then is mpiexec's 1, not tfenc-batch's 75:
#     the script must still requeue, because the output is unfinished, and
#     the requeued run must finish it;
#  3. a job that fails by itself must not be requeued.
set -u
. "$(cd "$(dirname "$0")" && pwd)/common.sh"
work=$builddir/tests/data/generated/pipeline/slurm
TFENC_PLUGIN_PATH="$TFENC_PLUGIN_PATH:$builddir/tests/plugins/.libs"
export TFENC_PLUGIN_PATH
prepare_example bert-text "$work/job" || { echo "slurm: FAIL: cannot make the model"; exit 1; }
mkdir -p "$work/bin"
cat > "$work/bin/srun" <<SH
#!/bin/sh
# Stand-in for srun: drops srun's own options, starts SLURM_NTASKS ranks.
while [ \$# -gt 0 ]; do case "\$1" in --*) shift ;; *) break ;; esac; done
exec "$mpiexec" -n "\$SLURM_NTASKS" "\$@"
SH
cat > "$work/bin/scontrol" <<SH
#!/bin/sh
echo "\$*" >> "$work/requeued"
SH
ln -sf "$driver" "$work/bin/tfenc-batch"
chmod +x "$work/bin/srun" "$work/bin/scontrol"
failed=0
fail() {
  echo "slurm: FAIL $*"
  failed=$((failed + 1))
}

# sbatch SETTINGS...: the script, as the batch step, in the background.
sbatch() {
  (cd "$work/job" && PATH="$work/bin:$PATH" SLURM_NTASKS=4 SLURM_CPUS_PER_TASK=1 \
     SLURM_JOB_ID=4242 exec bash "$srcdir/jobs/slurm/encode.sbatch" job.ini --quiet "$@") \
    > "$work/sbatch.out" 2>&1 &
  script=$!
}

# 1. A whole run.
rm -f "$work/job/embeddings.h5" "$work/requeued"
sbatch --set job.pipeline_stages=2
wait "$script" || fail "encode.sbatch exited with $?: $(tail -n 3 "$work/sbatch.out")"
"$python" "$srcdir/tests/reference/compare.py" "$work/job/embeddings.h5" "$work/job/expected.h5" \
     --label "slurm 2x2" || fail "the output is not the reference's"
[ ! -e "$work/requeued" ] || fail "a finished job was requeued"

# 2. The time limit: a slowed job, SIGTERM to the script once rows are in.
"$python" "$here/make_inputs.py" text "$work/job/corpus.txt" "$work/job/big.txt" 30 || exit 1
printf "\n[pause]\ntype = pause\nmilliseconds = 100\n" >> "$work/job/job.ini"
rm -f "$work/job/big.h5" "$work/requeued"
sbatch --set job.input=big.txt --set job.output=big.h5 --set job.window_documents=100 \
  --set job.batch_tokens=128
"$python" "$srcdir/tests/resume/progress.py" wait "$work/job/big.h5" 0.2 "$script"
kill -TERM "$script"
wait "$script"
status=$?
read -r done total complete <<EOF
$("$python" "$srcdir/tests/resume/progress.py" count "$work/job/big.h5")
EOF
echo "slurm: time limit: the script exited $status with $done of $total documents finished; $(grep -c . "$work/requeued" 2>/dev/null || echo 0) requeue(s)"
[ "$complete" = 0 ] && [ "$done" -gt 0 ] || fail "the signal did not land part-way ($done of $total, complete = $complete)"
grep -qx "requeue 4242" "$work/requeued" 2>/dev/null || fail "the stopped job was not requeued: $(tail -n 3 "$work/sbatch.out")"
[ "$status" -eq 0 ] || fail "the script exited $status after requeueing"
# The requeued run resumes and finishes.
rm -f "$work/requeued"
sbatch --set job.input=big.txt --set job.output=big.h5 --set job.window_documents=100 \
  --set job.batch_tokens=128
wait "$script" || fail "the requeued run exited with $?: $(tail -n 3 "$work/sbatch.out")"
grep -q "resuming" "$work/sbatch.out" || fail "the requeued run did not resume"
[ ! -e "$work/requeued" ] || fail "the finished requeued run was requeued again"
rm -f "$work/job/alone.h5"
(cd "$work/job" && "$driver" --quiet --set job.input=big.txt --set job.output=alone.h5 \
   --set job.window_documents=100 --set job.batch_tokens=128 job.ini) || fail "the reference run failed"
"$python" "$here/compare_layouts.py" "$work/job/alone.h5" "$work/job/big.h5" \
  || fail "the requeued file differs from an uninterrupted run"

# 3. A job that fails by itself: not requeued, its status passed on.
rm -f "$work/requeued" "$work/job/broken.h5"
sbatch --set job.output=broken.h5 --set model.weights=missing.h5
wait "$script"
status=$?
[ "$status" -ne 0 ] || fail "a failing job's script exited 0"
[ ! -e "$work/requeued" ] || fail "a failing job was requeued"

if [ "$failed" -ne 0 ]; then
  echo "slurm: FAIL ($failed)"
  exit 1
fi
echo "slurm: encode.sbatch ran, stopped at the time limit, requeued, resumed to the uninterrupted result, and did not requeue a failure"
