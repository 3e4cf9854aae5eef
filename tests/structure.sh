#!/bin/sh
# The tree depends only downward: each core/<subsystem>/local.mk declares
# what it may use, and tests/structure.py checks the #include lines and the
# built objects of libtfenc against it (no upward reach, no call loop).
set -eu
: "${REFERENCE_PYTHON:=/usr/bin/python3}"
exec "$REFERENCE_PYTHON" "$abs_top_srcdir/tests/structure.py" "$abs_top_srcdir" "$abs_top_builddir"
