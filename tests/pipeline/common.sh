# Sourced by the pipeline tests: where things are, and how to run MPI as a
# test (root in CI needs Open MPI's two ALLOW variables; more ranks than
# cores need oversubscription). Users never need these.
here=$(cd "$(dirname "$0")" && pwd)
srcdir=${abs_top_srcdir:-$(cd "$here/../.." && pwd)}
builddir=${abs_top_builddir:-$(pwd)}
python=${REFERENCE_PYTHON:-/usr/bin/python3}
mpiexec=${MPIEXEC:-mpiexec}
driver=$builddir/drivers/tfenc-batch
: "${TFENC_PLUGIN_PATH:=$builddir/plugins/.libs}"
: "${OMPI_MCA_rmaps_base_oversubscribe:=1}" "${OPENBLAS_NUM_THREADS:=1}"
export TFENC_PLUGIN_PATH OMPI_MCA_rmaps_base_oversubscribe OPENBLAS_NUM_THREADS
if [ "$(id -u)" -eq 0 ]; then
  : "${OMPI_ALLOW_RUN_AS_ROOT:=1}" "${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:=1}"
  export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
fi
TFENC_SOURCE_DIR=$srcdir
export TFENC_SOURCE_DIR

# The layouts of issue 4, as RANKS:STAGES (data_parallel = RANKS / STAGES).
layouts="1:1 2:1 2:2 4:2 8:2 8:4"

# prepare_example NAME DIR: copies jobs/NAME to DIR and makes its model.
prepare_example() {
  rm -rf "$2" && mkdir -p "$(dirname "$2")" && cp -R "$srcdir/jobs/$1" "$2" && chmod -R u+w "$2" \
    && (cd "$2" && ./make-model >/dev/null)
}
