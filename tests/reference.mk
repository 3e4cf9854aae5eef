# End-to-end comparisons with PyTorch: the reference models (tests/reference/)
# and the example jobs (jobs/), each run by tfenc-batch alone and under
# mpiexec -n 1. The PyTorch side runs with $(REFERENCE_PYTHON) (Debian's torch).
dist_check_SCRIPTS += tests/reference/run_reference.sh
TESTS += tests/reference/run_reference.sh
EXTRA_DIST += tests/reference/make_reference.py tests/reference/compare.py \
	tests/reference/wordpiece.py
