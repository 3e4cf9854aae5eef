#!/bin/sh
# Every command and job file README.md shows is run or checked against the
# test that runs it (tests/readme.py says how each block is exercised).
set -eu
: "${REFERENCE_PYTHON:=/usr/bin/python3}"
exec "$REFERENCE_PYTHON" "$abs_top_srcdir/tests/readme.py"
