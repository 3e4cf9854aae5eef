# tests fragment: see Makefile.am
# Multi-vector (ColBERT) output: a random ColBERT checkpoint imported and
# run as documents and queries against colbert-ai's published doc()/query()
# logic (per-token vectors, the kept tokens, a MaxSim ranking), at several
# layouts and after a SIGKILL, and its bad inputs.
dist_check_SCRIPTS += tests/multivector/colbert.sh
TESTS += tests/multivector/colbert.sh
EXTRA_DIST += tests/multivector/reference.py
