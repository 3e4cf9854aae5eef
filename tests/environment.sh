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
# Every auto path takes its default, unmeasured: tests compare bits across
# runs, which a measurement on a busy machine could send down other paths
# (tests/path_choice.sh measures).
: "${TFENC_PATHS:=default}"
export TFENC_PATHS
# Faster MPI start-up, as tests/local.mk explains (a script run by hand).
: "${OMPI_MCA_pml:=ob1}" "${HWLOC_COMPONENTS:=-pci,-linuxio}" "${OMPI_MCA_odls_base_sigkill_timeout:=0}"
export OMPI_MCA_pml HWLOC_COMPONENTS OMPI_MCA_odls_base_sigkill_timeout
if [ "$(id -u)" -eq 0 ]; then
  : "${OMPI_ALLOW_RUN_AS_ROOT:=1}" "${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:=1}"
  export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
fi
# in_private_mounts COMMAND...: runs COMMAND in a mount namespace of its
# own, so that what it mounts (a small tmpfs as a full disk, an empty one
# over a folder to hide it) touches nothing outside and is gone when it
# ends: as root, a plain mount namespace (util-linux makes its mounts
# private); otherwise a user namespace that maps the user to root. A
# chroot allows the first only where its root is a mount point, never the
# second (tests/deps/fresh-debian.sh makes it one). Fails, the reason on
# stderr, where neither can be made.
in_private_mounts() {
  if [ "$(id -u)" -eq 0 ] && unshare --mount true 2>/dev/null; then
    unshare --mount "$@"
  else
    unshare --user --map-root-user --mount "$@"
  fi
}
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
# The python block of DOCUMENT marked `<!-- readme-test: covered by TEST -->`
# (tests/readme.py), printed: the test that covers a recipe runs it.
covered_python_block() { # DOCUMENT TEST
  awk -v mark="readme-test: covered by $2" '
    index($0, mark) { marked = 1; next }
    marked && /^```python/ { inside = 1; next }
    inside && /^```/ { inside = 0; marked = 0; next }
    inside { print }
    !/^$/ && !/^```/ { if (!inside) marked = marked && /readme-test/ }' "$1"
}
# Generators of models and references run through it: it reuses what an
# identical earlier run wrote (tests/harness/generate).
generate=$srcdir/tests/harness/generate
# Examples' make-model scripts find the generators through it when copied.
TFENC_SOURCE_DIR=$srcdir
export TFENC_SOURCE_DIR
