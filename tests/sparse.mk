# tests fragment: see Makefile.am
# SPLADE sparse output: the splade head and the CSR writer against
# transformers' masked-LM models through SpladePooling's formula, imports of
# *ForMaskedLM checkpoints and a SparseEncoder folder, layouts, a resume
# after SIGKILL, bf16 and int8, top-k and threshold, and its bad inputs.
dist_check_SCRIPTS += tests/sparse/sparse.sh
TESTS += tests/sparse/sparse.sh
EXTRA_DIST += tests/sparse/sparse.py tests/sparse/checkpoints.sh

# The rows' logs and the job's end: a disk that fills up as the CSR is
# written, a killed run's damaged log, another job's output on a log, and
# non-finite values from a sparse head, at 1 and 2 ranks.
dist_check_SCRIPTS += tests/sparse/logs.sh
TESTS += tests/sparse/logs.sh

# A microbatch's rows as the sink keeps them: top-k, threshold, bad rows.
check_PROGRAMS += tests/test_sparse
TESTS += tests/test_sparse
tests_test_sparse_SOURCES = tests/test_sparse.c
tests_test_sparse_CFLAGS = $(TEST_CFLAGS)
tests_test_sparse_LDADD = $(UNIT_TEST_LIBS)
