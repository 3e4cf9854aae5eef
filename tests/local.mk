# The test harness: environment for every test, and the core's own suites.
# Tests find the build tree's plugins, Debian's PyTorch for reference numbers,
# and run Open MPI as root in CI (never needed by users).
AM_TESTS_ENVIRONMENT = \
	TFENC_PLUGIN_PATH='$(abs_top_builddir)/plugins/.libs'; export TFENC_PLUGIN_PATH; \
	REFERENCE_PYTHON='$(REFERENCE_PYTHON)'; export REFERENCE_PYTHON; \
	TFENC_VENV_PYTHON="$${TFENC_VENV:-$${XDG_CACHE_HOME:-$$HOME/.cache}/tfenc/venv}/bin/python"; export TFENC_VENV_PYTHON; \
	MPIEXEC='$(MPIEXEC)'; export MPIEXEC; \
	top_srcdir='$(top_srcdir)'; export top_srcdir; \
	top_builddir='$(top_builddir)'; export top_builddir; \
	abs_top_srcdir='$(abs_top_srcdir)'; export abs_top_srcdir; \
	abs_top_builddir='$(abs_top_builddir)'; export abs_top_builddir; \
	OMPI_ALLOW_RUN_AS_ROOT=1; export OMPI_ALLOW_RUN_AS_ROOT; \
	OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM; \
	OMPI_MCA_rmaps_base_oversubscribe=1; export OMPI_MCA_rmaps_base_oversubscribe; \
	OPENBLAS_NUM_THREADS=1; export OPENBLAS_NUM_THREADS;
# ASan's leak checker cannot follow Open MPI's and HDF5's process-lifetime
# allocations; leaks are checked with valgrind on an end-to-end job instead.
# TFENC_SANITIZER_BUILD tells the slowest tests (BERT-base parity) that
# they may run on fewer lines here.
if SANITIZERS
AM_TESTS_ENVIRONMENT += ASAN_OPTIONS=detect_leaks=0; export ASAN_OPTIONS; \
	TFENC_SANITIZER_BUILD=1; export TFENC_SANITIZER_BUILD;
endif

# Every test runs under tests/harness/timed, which ends its log with its wall
# time; `tests/harness/slowest BUILD` (tests/run-all.sh calls it after each
# stage) names the slowest. Tests of other fragments need nothing for this.
LOG_COMPILER = $(SHELL) $(top_srcdir)/tests/harness/timed
EXTRA_DIST += tests/harness/timed tests/harness/slowest

TEST_CFLAGS = $(AM_CFLAGS) $(CUNIT_CFLAGS)
TEST_LIBS = core/libtfenc.la $(CUNIT_LIBS) $(HDF5_LIBS) $(MPI_LIBS) $(DL_LIBS) -lm

check_PROGRAMS += tests/test_core
TESTS += tests/test_core
tests_test_core_SOURCES = tests/test_core.c tests/allocation_counter.c tests/allocation_counter.h
tests_test_core_CFLAGS = $(TEST_CFLAGS)
tests_test_core_LDADD = $(TEST_LIBS)

# The safety stream's units: integer ranges, inline comments and declared
# parameter tables (params); file checks, identity and plugin files examined
# without loading them (files, shared_object).
check_PROGRAMS += tests/test_params tests/test_files
TESTS += tests/test_params tests/test_files
tests_test_params_SOURCES = tests/test_params.c
tests_test_params_CFLAGS = $(TEST_CFLAGS)
tests_test_params_LDADD = $(TEST_LIBS)
tests_test_files_SOURCES = tests/test_files.c
tests_test_files_CFLAGS = $(TEST_CFLAGS)
tests_test_files_LDADD = $(TEST_LIBS)

# Plugins that the loader must refuse: an older ABI, and no entry symbol.
check_LTLIBRARIES += tests/plugins/old_abi.la tests/plugins/no_entry.la
tests_plugins_old_abi_la_SOURCES = tests/plugins/old_abi.c
tests_plugins_old_abi_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere $(SANITIZER_FLAGS)
tests_plugins_no_entry_la_SOURCES = tests/plugins/no_entry.c
tests_plugins_no_entry_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere $(SANITIZER_FLAGS)
check_LTLIBRARIES += tests/plugins/arithmetic.la
tests_plugins_arithmetic_la_SOURCES = tests/plugins/arithmetic.c
tests_plugins_arithmetic_la_CFLAGS = $(AM_CFLAGS)
tests_plugins_arithmetic_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere $(SANITIZER_FLAGS)
tests_plugins_arithmetic_la_LIBADD = core/libtfenc.la
# Plugins that misbehave in one way each, for the loading policy
# (core/plugin/plugin_loader.h) and tests/bad_inputs.sh: a constructor that calls
# _exit(0), a create() that calls exit(0), a second `pooling`, a constructor
# that leaves a trace, declared parameter tables that create() contradicts.
# In their own directory, so that jobs searching tests/plugins/.libs never
# meet them.
HOSTILE_PLUGIN_FLAGS = -module -avoid-version -shared -rpath /nowhere $(SANITIZER_FLAGS)
check_LTLIBRARIES += tests/plugins/hostile/exit_layer.la tests/plugins/hostile/exit_create.la \
	tests/plugins/hostile/shadow.la tests/plugins/hostile/marker.la \
	tests/plugins/hostile/undeclared_key.la
tests_plugins_hostile_exit_layer_la_SOURCES = tests/plugins/hostile/exit_layer.c tests/plugins/hostile/common.h
tests_plugins_hostile_exit_layer_la_LDFLAGS = $(HOSTILE_PLUGIN_FLAGS)
tests_plugins_hostile_exit_create_la_SOURCES = tests/plugins/hostile/exit_create.c tests/plugins/hostile/common.h
tests_plugins_hostile_exit_create_la_LDFLAGS = $(HOSTILE_PLUGIN_FLAGS)
tests_plugins_hostile_shadow_la_SOURCES = tests/plugins/hostile/shadow.c tests/plugins/hostile/common.h
tests_plugins_hostile_shadow_la_LDFLAGS = $(HOSTILE_PLUGIN_FLAGS)
tests_plugins_hostile_marker_la_SOURCES = tests/plugins/hostile/marker.c tests/plugins/hostile/common.h
tests_plugins_hostile_marker_la_LDFLAGS = $(HOSTILE_PLUGIN_FLAGS)
tests_plugins_hostile_undeclared_key_la_SOURCES = tests/plugins/hostile/undeclared_key.c tests/plugins/hostile/common.h
tests_plugins_hostile_undeclared_key_la_LDFLAGS = $(HOSTILE_PLUGIN_FLAGS)
tests_plugins_hostile_undeclared_key_la_LIBADD = core/libtfenc.la

# Reference models, example outputs and other data the tests generate.
clean-local:
	rm -rf tests/data/generated

dist_check_SCRIPTS += tests/bad_inputs.sh
TESTS += tests/bad_inputs.sh

# The plugin ABI is plugin.h: libtfenc's exports against the header (nm -D).
dist_check_SCRIPTS += tests/exports.sh
TESTS += tests/exports.sh

dist_check_SCRIPTS += tests/many_documents.sh
TESTS += tests/many_documents.sh

# bf16 and int8 where the CPU lacks their instruction sets (ONEDNN_MAX_CPU_ISA);
# their accuracy on all-MiniLM-L6-v2 and real text is tests/import/parity.sh's.
dist_check_SCRIPTS += tests/precision_isa.sh
TESTS += tests/precision_isa.sh
