# tests fragment: see Makefile.am
# Compact pooled vectors (output_dtype = int8, uint8,
# binary, ubinary) against sentence-transformers' quantize_embeddings, at
# several layouts and after a resume, with calibrated and given ranges, and
# their bad inputs; minilm.sh does the same on all-MiniLM-L6-v2 and real text.
dist_check_SCRIPTS += tests/compact/compact.sh tests/compact/minilm.sh
TESTS += tests/compact/compact.sh
# minilm.sh compares bits with sentence-transformers on a real model: normal
# build only; under the sanitizers compact.sh runs every output_dtype's
# writing, calibration and resume, test_quantize the arithmetic.
NORMAL_BUILD_ONLY_TESTS += tests/compact/minilm.sh
EXTRA_DIST += tests/compact/compare_quantized.py tests/compact/unfinish.py

# The arithmetic itself, and given ranges (.npy, .h5, JSON) with their errors.
check_PROGRAMS += tests/test_quantize
TESTS += tests/test_quantize
tests_test_quantize_SOURCES = tests/test_quantize.c
tests_test_quantize_CFLAGS = $(TEST_CFLAGS)
tests_test_quantize_LDADD = $(UNIT_TEST_LIBS)
