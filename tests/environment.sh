# Sourced by the script tests (two directories below the top, as
# tests/reference/run_jobs.sh): where things are, and how to run tfenc as a
# test. Root in CI needs Open MPI's two ALLOW variables and more ranks than
# cores need oversubscription; users never need either. One OpenBLAS thread
# per rank: the machine is shared and the test models are tiny.
here=$(cd "$(dirname "$0")" && pwd)
srcdir=${abs_top_srcdir:-$(cd "$here/../.." && pwd)}
builddir=${abs_top_builddir:-$(pwd)}
python=${REFERENCE_PYTHON:-/usr/bin/python3}
mpiexec=${MPIEXEC:-mpiexec}
driver=$builddir/drivers/tfenc-batch
: "${TFENC_PLUGIN_PATH:=$builddir/plugins/.libs}"
: "${OMPI_MCA_rmaps_base_oversubscribe:=1}" "${OPENBLAS_NUM_THREADS:=1}"
export TFENC_PLUGIN_PATH OMPI_MCA_rmaps_base_oversubscribe OPENBLAS_NUM_THREADS
# Faster MPI start-up, as tests/local.mk explains (a script run by hand).
: "${OMPI_MCA_pml:=ob1}" "${HWLOC_COMPONENTS:=-pci,-linuxio}" "${OMPI_MCA_odls_base_sigkill_timeout:=0}"
export OMPI_MCA_pml HWLOC_COMPONENTS OMPI_MCA_odls_base_sigkill_timeout
if [ "$(id -u)" -eq 0 ]; then
  : "${OMPI_ALLOW_RUN_AS_ROOT:=1}" "${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:=1}"
  export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
fi
# A job stopped part-way, as a failed node stops it: waits until FILE
# holds FRACTION of its documents finished (tests/resume/progress.py; or
# until PID has ended), then SIGKILLs PID, an mpiexec started in the
# background (not in a subshell, so that its children are the ranks), and
# those children, and reaps it.
kill_part_way() { # PID FILE FRACTION
  "$python" "$srcdir/tests/resume/progress.py" wait "$2" "$3" "$1"
  pkill -KILL -P "$1" 2>/dev/null || true
  kill -KILL "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
# Generators of models and references run through it: it reuses what an
# identical earlier run wrote (tests/harness/generate).
generate=$srcdir/tests/harness/generate
# Examples' make-model scripts find the generators through it when copied.
TFENC_SOURCE_DIR=$srcdir
export TFENC_SOURCE_DIR
