# tests fragment: see Makefile.am
# The WordPiece tokenizer: unit tests, and token-for-token agreement with
# Hugging Face's `tokenizers` on a generated corpus (needs tests/setup-python-venv).
check_PROGRAMS += tests/test_tokenizer tests/tokenizer/tokenize_corpus
TESTS += tests/test_tokenizer tests/tokenizer/test-reference.sh
tests_test_tokenizer_SOURCES = tests/test_tokenizer.c
tests_test_tokenizer_CPPFLAGS = $(AM_CPPFLAGS) $(CUNIT_CFLAGS)
tests_test_tokenizer_LDADD = core/libtfenc.la $(CUNIT_LIBS)
tests_tokenizer_tokenize_corpus_SOURCES = tests/tokenizer/tokenize_corpus.c
tests_tokenizer_tokenize_corpus_LDADD = core/libtfenc.la
dist_check_SCRIPTS += tests/tokenizer/test-reference.sh
EXTRA_DIST += tests/tokenizer/make_corpus.py tests/tokenizer/reference_ids.py \
	tests/tokenizer/compare.py tests/setup-python-venv tests/python-requirements.txt
CLEANFILES += tests/data/generated/tokenizer/*
