#!/bin/sh
# Installs what tfenc needs, builds it out of tree, and runs the whole test
# suite (make check). With --sanitizers it then does the same again in a
# second build with AddressSanitizer and UndefinedBehaviorSanitizer.
# This is the README's test command and what CI runs.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
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

check_in "$top/build"
if [ "${1:-}" = "--sanitizers" ]; then
  check_in "$top/build-sanitizers" --enable-sanitizers
fi
echo "run-all: every test passed"
