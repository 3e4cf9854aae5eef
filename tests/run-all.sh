#!/bin/sh
# Installs what tfenc needs, builds it out of tree, and runs the whole test
# suite (make check, valgrind memcheck of an end-to-end job included). This
# is the README's test command. Options, which CI passes both of:
#   --sanitizers  also the suite in a second build with AddressSanitizer
#                 and UndefinedBehaviorSanitizer; the normal build then
#                 runs only the tests that build leaves out or runs fewer
#                 cases of (tests/local.mk), each other test once, there
#   --fuzz        the libFuzzer targets for a fixed total time
#                 (tests/fuzz/run.sh --budget)
# With either, the builds' suites and the fuzzers run side by side, their
# tests taking turns for the same job slots (below). After each suite it
# prints its time and its ten slowest tests (tests/harness/slowest),
# whether it passed or not.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

# ccache, when it is installed (tests/deps/test.txt): a machine that built
# these sources before, in this clone or another (CCACHE_BASEDIR makes paths
# under the clone relative, CCACHE_NOHASHDIR leaves the build directory out
# of the hash), compiles only what changed. The three builds cost ~240 CPU-s
# from nothing.
if command -v ccache >/dev/null 2>&1; then
  CCACHE_BASEDIR=$top CCACHE_NOHASHDIR=1
  export CCACHE_BASEDIR CCACHE_NOHASHDIR
fi
# Under the make file that runs the suites side by side, a make started here
# takes its job slots from that one's (GNU make's jobserver, in MAKEFLAGS):
# it must not be given a -j of its own, which would leave the shared count.
jobs_option() {
  case " ${MAKEFLAGS:-} " in
    *jobserver*) echo "" ;;
    *) echo "-j$1" ;;
  esac
}

# build_in DIR [CONFIGURE_OPTIONS]: configures DIR once and builds there,
# with its test programs (`make check` with no tests only builds them).
build_in() {
  build=$1
  shift
  mkdir -p "$build"
  if [ -n "${CCACHE_BASEDIR:-}" ]; then
    set -- "$@" "CC=ccache gcc" "CXX=ccache g++"
  fi
  (cd "$build" && { [ -f Makefile ] || "$top/configure" -q "$@"; } \
     && make $(jobs_option 2) && make $(jobs_option 2) check TESTS=)
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

# check_in DIR JOBS LISTS: make check there of the make variables LISTS,
# JOBS tests at a time (or as many as the shared job slots give), then its
# time and ten slowest tests, and every failing test's log when something
# failed.
check_in() {
  build=$1
  jobs=${TFENC_CHECK_JOBS:-${2:-4}}
  lists=$3
  (
    cd "$build"
    status=0
    started=$(date +%s)
    tests=$(slow_first "$lists") || exit 1
    make $(jobs_option "$jobs") check TESTS="$tests" || status=$?
    echo "run-all: make check in $build: $(($(date +%s) - started)) s"
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

# The steps the make file below runs (not for users).
case ${1:-} in
  --build-tree) shift; build_in "$@"; exit ;;
  --check-tree) shift; check_in "$1" "" "$2"; exit ;;
esac

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

build_in "$top/build"
stage_done "normal build"
if [ "$sanitizers" -eq 0 ] && [ "$fuzz" -eq 0 ]; then
  # Four tests at a time on two cores: most of the slow ones wait (MPI
  # start-up, Slurm's time limits, the resume tests' pauses, timeouts),
  # so two at a time left the CPU idle for 40% of the suite.
  check_in "$top/build" 4 TESTS
  stage_done "make check"
  echo "run-all: every test passed; stages:$stages"
  exit 0
fi

# The normal suite, the sanitizer tree's build and suite, and the fuzzers,
# side by side under one make: their jobs (a test, a compiler) take turns
# for the same slots, so that the CPU one leaves idle while its tests wait
# (Slurm's time limits, the resume tests' pauses, MPI start-up) goes to
# another's. One after the other, the normal suite kept the two cores 79%
# busy and the sanitizer suite 91%.
#
# With the sanitizer build, the normal build runs only what that build
# leaves out or runs fewer cases of (tests/local.mk): a test that runs
# whole under the sanitizers checks there all that it checks here, and
# memory besides. A test of the second list then runs only the cases the
# sanitizer build does not (TFENC_ONLY_UNSANITIZED_CASES), where it has
# such a split (tests/README.md).
#
# The fuzzers run one target at a time, in one slot, for a budget of wall
# time: each target still replays its whole committed corpus first, then
# explores.
plan=$top/build/run-all.mk
logs=$top/build
normal_lists=TESTS
[ "$sanitizers" -eq 0 ] || normal_lists="NORMAL_BUILD_ONLY_TESTS FEWER_CASES_UNDER_SANITIZERS"
targets="normal"
{
  echo ".PHONY: run-all normal sanitizer-tree sanitizer fuzz"
  echo "run-all: \$(targets)"
  echo "normal:"
  printf '\t+@TFENC_ONLY_UNSANITIZED_CASES=%s sh %s/tests/run-all.sh --check-tree %s/build "%s"\n' \
    "$( [ "$sanitizers" -eq 1 ] && echo 1 )" "$top" "$top" "$normal_lists"
  echo "sanitizer-tree:"
  printf '\t+@sh %s/tests/run-all.sh --build-tree %s/build-sanitizers --enable-sanitizers > %s/run-all-sanitizer-build.log 2>&1 || { tail -n 60 %s/run-all-sanitizer-build.log; exit 1; }\n' \
    "$top" "$top" "$logs" "$logs"
  echo "sanitizer: sanitizer-tree"
  printf '\t+@sh %s/tests/run-all.sh --check-tree %s/build-sanitizers TESTS\n' "$top" "$top"
  echo "fuzz:"
  printf '\t@sh %s/tests/fuzz/run.sh --budget %s %s/build > %s/run-all-fuzz.log 2>&1; status=$$?; cat %s/run-all-fuzz.log; exit $$status\n' \
    "$top" "${TFENC_FUZZ_BUDGET:-90}" "$top" "$logs" "$logs"
} > "$plan"
[ "$sanitizers" -eq 0 ] || targets="$targets sanitizer"
[ "$fuzz" -eq 0 ] || targets="$targets fuzz"
# Six jobs at a time on two cores: at five the sanitizer suite alone kept
# the cores 91% busy; six of the two suites' tests, most of them waiting
# part of their time, keep them busy without stretching the slowest.
status=0
make -k -j"${TFENC_CHECK_JOBS:-6}" -f "$plan" targets="$targets" run-all || status=$?
stage_done "the suites ($targets) side by side"
[ "$status" -eq 0 ] || { echo "run-all: something failed (above); stages:$stages"; exit 1; }
echo "run-all: every test passed; stages:$stages"
