# tests fragment: see Makefile.am
# The tokenizers: unit tests, WordPiece (vocab.txt) against Hugging Face's
# `tokenizers` on a generated corpus, and tokenizer.json tokenizers (trained
# and real ones) against it on real multilingual and generated text (both
# need tests/setup-python-venv).
check_PROGRAMS += tests/test_tokenizer tests/tokenizer/tokenize_corpus
TESTS += tests/test_tokenizer tests/tokenizer/test-reference.sh tests/tokenizer/test-weights.sh
# Real tokenizer.json files on real text against Hugging Face's ids: normal
# build only (tests/local.mk); under the sanitizers test_tokenizer's BPE,
# Unigram and byte-level cases and fuzz_tokenizer_json cover those paths.
NORMAL_BUILD_ONLY_TESTS += tests/tokenizer/test-json.sh
tests_test_tokenizer_SOURCES = tests/test_tokenizer.c
tests_test_tokenizer_CPPFLAGS = $(AM_CPPFLAGS) $(CUNIT_CFLAGS) -I$(top_srcdir)/tests
tests_test_tokenizer_LDADD = tests/harness/libunit.la core/libtfenc.la $(CUNIT_LIBS) $(HDF5_LIBS)
tests_tokenizer_tokenize_corpus_SOURCES = tests/tokenizer/tokenize_corpus.c
tests_tokenizer_tokenize_corpus_LDADD = core/libtfenc.la
dist_check_SCRIPTS += tests/tokenizer/test-reference.sh tests/tokenizer/test-json.sh \
	tests/tokenizer/test-weights.sh
EXTRA_DIST += tests/tokenizer/make_corpus.py tests/tokenizer/reference_ids.py \
	tests/tokenizer/compare.py tests/tokenizer/real_text.py tests/tokenizer/train_tokenizers.py \
	tests/tokenizer/reference_json.py tests/tokenizer/bench.py tests/tokenizer/bench.sh \
	tests/tokenizer/reference_sentences.py tests/tokenizer/sentence_ends.txt \
	tests/setup-python-venv tests/python-requirements.txt
CLEANFILES += tests/data/generated/tokenizer/* tests/data/generated/tokenizer-json/*
EXTRA_DIST += docs/tokenizers.md tests/tokenizer/codepoints.py tests/tokenizer/small_tokenizer.py \
	tests/tokenizer/gemma_style.py
