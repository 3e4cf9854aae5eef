# Install and first-run tests: a staged `make install` used as an installed
# tfenc (SDK header, tfenc.pc, the out-of-tree example plugin), and the
# README's commands and job files.

# Where `make install` puts things, so that the staged test knows where to
# look under DESTDIR; the compiler and sanitizer flags of this build, so that
# what it compiles against the staged libtfenc runs like the build's own.
AM_TESTS_ENVIRONMENT += \
	TFENC_BINDIR='$(bindir)'; export TFENC_BINDIR; \
	TFENC_LIBDIR='$(libdir)'; export TFENC_LIBDIR; \
	TFENC_INCLUDEDIR='$(includedir)'; export TFENC_INCLUDEDIR; \
	TFENC_PKGLIBDIR='$(pkglibdir)'; export TFENC_PKGLIBDIR; \
	TFENC_MANDIR='$(mandir)'; export TFENC_MANDIR; \
	TFENC_CC='$(CC)'; export TFENC_CC; \
	TFENC_SANITIZER_FLAGS='$(SANITIZER_FLAGS)'; export TFENC_SANITIZER_FLAGS; \
	TFENC_PARQUET_BUNDLED='$(PARQUET_BUNDLED_LIBRARIES)'; export TFENC_PARQUET_BUNDLED;

# One staged install for the tests that use tfenc as installed
# (install/staged.sh, and readme.sh for pkg-config), made before any test
# starts (check_DATA is built before the tests run). A test that ran
# `make install` itself raced the tests beside it: installing relinks the
# plugins, and libtool moves the build tree's plugins/.libs/*.so aside
# while it relinks, so their jobs found no plugin for a moment (seen
# under make -j4 check: "attention.so: cannot open", jobs ended by a
# signal). Staged again whenever something it installs changed.
TFENC_STAGE = $(abs_top_builddir)/tests/data/generated/install-stage
AM_TESTS_ENVIRONMENT += TFENC_STAGE='$(TFENC_STAGE)'; export TFENC_STAGE;
check_DATA = tests/data/generated/install-stage.log
tests/data/generated/install-stage.log: Makefile $(LTLIBRARIES) $(PROGRAMS) $(HEADERS) $(DATA) $(MANS)
	@rm -rf '$(TFENC_STAGE)' && mkdir -p '$(TFENC_STAGE)'
	@echo "  INSTALL  $(TFENC_STAGE) (for the install tests)"
	@$(MAKE) $(AM_MAKEFLAGS) install DESTDIR='$(TFENC_STAGE)' > $@.tmp 2>&1 \
	  || { tail -n 30 $@.tmp; exit 1; }
	@mv $@.tmp $@

dist_check_SCRIPTS += tests/install/staged.sh
TESTS += tests/install/staged.sh

EXTRA_DIST += plugins/examples/attention-pooling/Makefile \
	plugins/examples/attention-pooling/README \
	plugins/examples/attention-pooling/attention_pooling.c \
	plugins/examples/attention-pooling/compare.py \
	plugins/examples/attention-pooling/job.ini \
	plugins/examples/attention-pooling/make-model \
	plugins/examples/attention-pooling/make_model.py \
	plugins/examples/scale-norm/Makefile \
	plugins/examples/scale-norm/README \
	plugins/examples/scale-norm/scale_norm.c \
	plugins/examples/scale-norm/compare.py \
	plugins/examples/scale-norm/job.ini \
	plugins/examples/scale-norm/one-layer.ini \
	plugins/examples/scale-norm/make-model \
	plugins/examples/scale-norm/make_model.py \
	plugins/examples/scores-head/Makefile \
	plugins/examples/scores-head/README \
	plugins/examples/scores-head/scores_head.c \
	plugins/examples/scores-head/compare.py \
	plugins/examples/scores-head/job.ini \
	plugins/examples/scores-head/make-model \
	plugins/examples/scores-head/make_model.py

# The commands of the documentation: the same in both builds, so normal
# build only (tests/local.mk).
dist_check_SCRIPTS += tests/readme.sh
NORMAL_BUILD_ONLY_TESTS += tests/readme.sh
EXTRA_DIST += tests/readme.py
