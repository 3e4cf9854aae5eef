#!/bin/sh
# Issue 15 item 3's mechanism, one copy per node: the node arena at 1, 2 and
# 4 ranks of one node (tests/io/node_arena.c says what is checked).
set -eu
: "${MPIEXEC:=mpiexec}"
for ranks in 1 2 4; do
  "$MPIEXEC" --oversubscribe -n "$ranks" ./tests/io/node_arena
done
