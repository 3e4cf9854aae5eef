#!/bin/sh
# Installs what tfenc needs, builds it out of tree, and runs the whole test
# suite (make check, valgrind memcheck of an end-to-end job included). This
# is the README's test command. Options, which CI passes both of:
#   --sanitizers  then the same suite in a second build with
#                 AddressSanitizer and UndefinedBehaviorSanitizer
#   --fuzz        then the libFuzzer targets for a fixed total time
#                 (tests/fuzz/run.sh --budget)
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

check_in() {
  build=$1
  shift
  mkdir -p "$build"
  (
    cd "$build"
    [ -f Makefile ] || "$top/configure" -q "$@"
    make -j2
    status=0
    make -j2 check || status=$?
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

check_in "$top/build"
stage_done "normal build and its make check"
if [ "$sanitizers" -eq 1 ]; then
  check_in "$top/build-sanitizers" --enable-sanitizers
  stage_done "sanitizer build and its make check"
fi
if [ "$fuzz" -eq 1 ]; then
  sh tests/fuzz/run.sh --budget "${TFENC_FUZZ_BUDGET:-90}" "$top/build"
  stage_done "fuzzers"
fi
echo "run-all: every test passed; stages:$stages"
