#!/bin/sh
# Runs jobs/slurm/encode.sbatch as Slurm would run its batch step, with a
# stand-in `srun` that starts the tasks with mpiexec (this machine has no
# Slurm): the script's command line must be one tfenc-batch accepts, with
# the threads and environment it sets, and the output must be complete.
set -u
. "$(cd "$(dirname "$0")" && pwd)/common.sh"
work=$builddir/tests/data/generated/pipeline/slurm
prepare_example bert-text "$work/job" || { echo "slurm: FAIL: cannot make the model"; exit 1; }
mkdir -p "$work/bin"
cat > "$work/bin/srun" <<SH
#!/bin/sh
# Stand-in for srun: drops srun's own options, starts SLURM_NTASKS ranks.
while [ \$# -gt 0 ]; do case "\$1" in --*) shift ;; *) break ;; esac; done
exec "$mpiexec" -n "\$SLURM_NTASKS" "\$@"
SH
ln -sf "$driver" "$work/bin/tfenc-batch"
chmod +x "$work/bin/srun"
rm -f "$work/job/embeddings.h5"
(cd "$work/job" && PATH="$work/bin:$PATH" SLURM_NTASKS=4 SLURM_CPUS_PER_TASK=1 \
   bash "$srcdir/jobs/slurm/encode.sbatch" job.ini --quiet --set job.pipeline_stages=2)
status=$?
if [ $status -ne 0 ]; then
  echo "slurm: FAIL: encode.sbatch exited with $status"
  exit 1
fi
"$python" "$srcdir/tests/reference/compare.py" "$work/job/embeddings.h5" "$work/job/expected.h5" \
     --label "slurm 2x2" || { echo "slurm: FAIL: the output is not the reference's"; exit 1; }
echo "slurm: encode.sbatch ran the job on 4 tasks (2 replicas x 2 stages)"
