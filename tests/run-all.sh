#!/bin/sh
# Installs what tfenc needs, builds it out of tree, and runs the whole test
# suite (make check, valgrind memcheck of an end-to-end job included). This
# is the README's test command. Options, which CI passes both of:
#   --sanitizers  then the suite in a second build with AddressSanitizer
#                 and UndefinedBehaviorSanitizer; the normal build then
#                 runs only the tests that build leaves out or runs fewer
#                 cases of (tests/local.mk), each other test once, there
#   --fuzz        the libFuzzer targets for a fixed total time
#                 (tests/fuzz/run.sh --budget), beside the sanitizer suite
# After each stage it prints the stage's time and the ten slowest tests
# (tests/harness/slowest), whether the stage passed or not.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
sanitizers=0
fuzz=0
for option in "$@"; do
  case $option in
    --sanitizers) sanitizers=1 ;;
    --fuzz) fuzz=1 ;;
    *) echo "usage: tests/run-all.sh [--sanitizers] [--fuzz]" >&2; exit 2 ;;
  esac
done
started=$(date +%s)
stage_started=$started
stages=""
# One line per finished stage: its own time and the run's so far; the
# summary at the end repeats them all.
stage_done() {
  now=$(date +%s)
  line="$1: $((now - stage_started)) s (run so far $((now - started)) s)"
  echo "run-all: $line"
  stages="$stages
  $line"
  stage_started=$now
}
sh tests/setup-deps
[ -x configure ] || autoreconf -fi
stage_done "dependencies and configure script"

# build_in DIR [CONFIGURE_OPTIONS]: configures DIR and builds there
# (under $nice when set), through ccache when it is installed
# (tests/deps/test.txt): a machine that built these sources before, in this
# clone or another (CCACHE_BASEDIR makes paths under the clone relative,
# CCACHE_NOHASHDIR leaves the build directory out of the hash), compiles
# only what changed. The three builds cost ~240 CPU-s from nothing.
# configure runs every time (~5 s): a build configured before something it
# looks for was installed (the demo's build, before the test venv brought
# pyarrow) would otherwise keep what it found then. A configure that finds
# the same rewrites no header, so nothing is compiled again.
nice=""
if command -v ccache >/dev/null 2>&1; then
  CCACHE_BASEDIR=$top CCACHE_NOHASHDIR=1
  export CCACHE_BASEDIR CCACHE_NOHASHDIR
fi
build_in() {
  build=$1
  shift
  mkdir -p "$build"
  if [ -n "${CCACHE_BASEDIR:-}" ]; then
    set -- "$@" "CC=ccache gcc" "CXX=ccache g++"
  fi
  (cd "$build" && $nice "$top/configure" -q "$@" && $nice make -j2)
}

# slow_first LISTS: the tests of the build's make variables LISTS (in the
# current directory's Makefile; "TESTS" is the whole suite) with those of
# tests/harness/slow_first first, in that file's order.
slow_first() {
  references=""
  for list in $1; do references="$references \$($list)"; done
  all=$(printf 'tfenc-print-tests:\n\t@echo %s\n' "$references" \
    | make -s -f Makefile -f - tfenc-print-tests) || return 1
  first=""
  for name in $(grep -v '^#' "$top/tests/harness/slow_first"); do
    case " $all " in *" $name "*) first="$first $name" ;; esac
  done
  rest=""
  for name in $all; do
    case " $first " in *" $name "*) ;; *) rest="$rest $name" ;; esac
  done
  echo $first $rest
}

# check_in DIR JOBS [LISTS]: make check there of the make variables LISTS
# (default TESTS, the whole suite), JOBS tests at a time (each caller says
# why its count), then the ten slowest tests, and every failing test's log
# when something failed.
check_in() {
  build=$1
  jobs=${TFENC_CHECK_JOBS:-$2}
  lists=${3:-TESTS}
  (
    cd "$build"
    status=0
    tests=$(slow_first "$lists") || exit 1
    make -j"$jobs" check TESTS="$tests" || status=$?
    sh "$top/tests/harness/slowest" "$build" 10
    if [ "$status" -ne 0 ]; then
      # Show why, not only that: every failing test's log.
      for log in $(find . -name '*.log' ! -name 'config.log' ! -name 'test-suite.log'); do
        trs="${log%.log}.trs"
        if [ -f "$trs" ] && grep -qE '^:test-result: (FAIL|ERROR)' "$trs"; then
          echo "==== $log"
          tail -n 60 "$log"
        fi
      done
      exit 1
    fi
  )
}

build_in "$top/build"
stage_done "normal build"
# While the normal suite runs, the sanitizer tree and the fuzz targets are
# compiled in the background at low priority: the suite leaves the CPU idle
# whenever its tests wait (MPI start-up, the resume tests' pauses, a
# single-threaded reference generator), and the compilers take that time
# instead of a stage of their own.
background=""
background_log="$top/build/run-all-background.log"
if [ "$sanitizers" -eq 1 ] || [ "$fuzz" -eq 1 ]; then
  (
    set -e
    nice="nice -n 10"
    if [ "$sanitizers" -eq 1 ]; then
      build_in "$top/build-sanitizers" --enable-sanitizers
      # The test programs too: `make check` with no tests only builds them.
      (cd "$top/build-sanitizers" && $nice make -j2 check TESTS=)
    fi
    if [ "$fuzz" -eq 1 ]; then
      $nice sh tests/fuzz/build.sh "$top/build/tests/fuzz" "$top/build"
    fi
  ) > "$background_log" 2>&1 &
  background=$!
fi
# With the sanitizer build to follow, the normal build runs only what the
# sanitizer build leaves out or runs fewer cases of (tests/local.mk): a test
# that runs whole under the sanitizers checks there all that it checks
# here, and memory besides. A test of the second list then runs only the
# cases the sanitizer build does not (TFENC_ONLY_UNSANITIZED_CASES), where
# it has such a split (tests/README.md).
if [ "$sanitizers" -eq 1 ]; then
  TFENC_ONLY_UNSANITIZED_CASES=1
  export TFENC_ONLY_UNSANITIZED_CASES
  # Five at a time: this share waits more than the whole suite does
  # (Slurm's time limits, the resume tests' pauses), and at four it kept
  # the two cores busy 1.0-1.1 of 2 for its first 90 s.
  check_in "$top/build" 5 "NORMAL_BUILD_ONLY_TESTS FEWER_CASES_UNDER_SANITIZERS"
  unset TFENC_ONLY_UNSANITIZED_CASES
else
  # Four tests at a time on two cores: most of the slow ones wait (MPI
  # start-up, Slurm's time limits, the resume tests' pauses, timeouts),
  # so two at a time left the CPU idle for 40% of the suite.
  check_in "$top/build" 4
fi
stage_done "normal make check"
if [ -n "$background" ]; then
  if ! wait "$background"; then
    echo "run-all: the background build of the sanitizer tree or the fuzzers failed:"
    tail -n 60 "$background_log"
    exit 1
  fi
  stage_done "rest of the sanitizer and fuzz builds"
fi
# The fuzzers run beside the sanitizer suite, one target at a time on one
# core: that suite waits much of its time (MPI start-up under the
# sanitizers, the resume tests' pauses), and one after the other they
# added their whole budget to the run. Their budget is wall time, so each
# target still replays its whole committed corpus first, then explores.
# 60 s (10 s a target; it was 90): on one core beside a CPU-bound suite
# the fuzzers' time is the suite's, and the CI runs at 15 s a target found
# nothing. TFENC_FUZZ_BUDGET sets more for a run of its own.
fuzz_pid=""
fuzz_log="$top/build/run-all-fuzz.log"
if [ "$fuzz" -eq 1 ]; then
  sh tests/fuzz/run.sh --budget "${TFENC_FUZZ_BUDGET:-60}" "$top/build" > "$fuzz_log" 2>&1 &
  fuzz_pid=$!
fi
sanitizer_status=0
if [ "$sanitizers" -eq 1 ]; then
  build_in "$top/build-sanitizers" --enable-sanitizers
  # Five at a time there: at four its tests kept the two cores 83% busy
  # (the resume tests' pauses and MPI start-up wait longer under the
  # sanitizers), while the normal suite's keep them 95% busy at four.
  check_in "$top/build-sanitizers" 5 || sanitizer_status=$?
  stage_done "sanitizer make check"
fi
if [ -n "$fuzz_pid" ]; then
  fuzz_status=0
  wait "$fuzz_pid" || fuzz_status=$?
  cat "$fuzz_log"
  stage_done "rest of the fuzzers"
  [ "$fuzz_status" -eq 0 ] || exit "$fuzz_status"
fi
[ "$sanitizer_status" -eq 0 ] || exit "$sanitizer_status"
echo "run-all: every test passed; stages:$stages"
