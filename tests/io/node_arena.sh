#!/bin/sh
# One copy of the weights per node: the node arena at 1, 2 and
# 4 ranks of one node (tests/io/node_arena.c says what is checked).
set -eu
: "${MPIEXEC:=mpiexec}"
for ranks in 1 2 4; do
  "$MPIEXEC" --oversubscribe -n "$ranks" ./tests/io/node_arena
done
