# Sourced by the resume tests that try jobs one by one and expect each to
# finish or be refused (guards.sh, data_loss.sh), after
# tests/pipeline/common.sh and with $name set to the test's name: copies the
# bert-text example into tests/data/generated/resume/$name, cds there,
# writes corpus.txt and big.txt (40 lines), lets jobs find the test
# plugins, and defines how a case runs and fails.
failed=0
work=$builddir/tests/data/generated/resume/$name
TFENC_PLUGIN_PATH="$TFENC_PLUGIN_PATH:$builddir/tests/plugins/.libs"
export TFENC_PLUGIN_PATH

prepare_example bert-text "$work" || { echo "$name: FAIL: cannot make a model"; exit 1; }
cd "$work" || exit 1
"$python" "$srcdir/tests/pipeline/make_inputs.py" text corpus.txt big.txt 40 || exit 1

fail() {
  echo "$name: FAIL $*"
  failed=$((failed + 1))
}

# run RANKS ARGS...: tfenc-batch at RANKS ranks (1: no mpiexec); sets
# $status and $message (tfenc-batch's first line on stderr).
run() {
  ranks=$1
  shift
  if [ "$ranks" -eq 1 ]; then
    timeout 120 "$driver" --quiet "$@" > run.out 2> run.err
  else
    timeout 120 "$mpiexec" -n "$ranks" "$driver" --quiet "$@" > run.out 2> run.err
  fi
  status=$?
  message=$(grep -m 1 '^tfenc-batch: ' run.err)
}

# refused WHAT PATTERN RANKS ARGS...: the run must fail with PATTERN.
refused() {
  what=$1 pattern=$2
  shift 2
  run "$@"
  if [ "$status" -eq 0 ] || [ "$status" -ge 124 ] || ! printf '%s\n' "$message" | grep -q -- "$pattern"; then
    fail "$what [$1]: status $status, message: $message"
  else
    echo "$name: ok   $what [$1]: $message"
  fi
}

# complete_of FILE: the output's `complete` attribute (nothing if unreadable).
complete_of() {
  "$python" -c "import h5py, sys; print(int(h5py.File(sys.argv[1], 'r').attrs['complete']))" "$1" 2>/dev/null
}
