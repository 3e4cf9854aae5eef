#!/bin/sh
# Installs what tfenc needs, builds it out of tree, and runs the whole test
# suite (make check, valgrind memcheck of an end-to-end job included). This
# is the README's test command. Options, which CI passes both of:
#   --sanitizers  then the same suite in a second build with
#                 AddressSanitizer and UndefinedBehaviorSanitizer
#   --fuzz        then each libFuzzer target for 100000 inputs or 60 s,
#                 whichever comes first (tests/fuzz/run.sh)
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
sh tests/setup-deps

[ -x configure ] || autoreconf -fi

check_in() {
  build=$1
  shift
  mkdir -p "$build"
  (
    cd "$build"
    [ -f Makefile ] || "$top/configure" -q "$@"
    make -j2
    if ! make -j2 check; then
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

started=$(date +%s)
elapsed() { echo "run-all: $1 after $(( $(date +%s) - started )) s"; }
check_in "$top/build"
elapsed "normal build: every test passed"
if [ "$sanitizers" -eq 1 ]; then
  check_in "$top/build-sanitizers" --enable-sanitizers
  elapsed "sanitizer build: every test passed"
fi
if [ "$fuzz" -eq 1 ]; then
  sh tests/fuzz/run.sh "$top/build"
  elapsed "fuzzers: no finding"
fi
echo "run-all: every test passed"
