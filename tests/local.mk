# The test harness: environment for every test, and the core's own suites.
# Tests find the build tree's plugins, Debian's PyTorch for reference numbers,
# and run Open MPI as root in CI (never needed by users). Threads that wait
# for work sleep rather than spin (OMP_WAIT_POLICY): tests run four at a time
# on two cores, and a spinning thread takes a core from another test.
# Open MPI starts faster with ob1 named (the PML it selects on one node
# anyway; `--mca pml_base_verbose 10` shows it): it no longer opens the cm
# PML's PSM/PSM2 transports only to drop them, 0.2 s of every MPI_Init here.
# hwloc skips the PCI devices, which tfenc never asks about. mpiexec ends a
# job whose rank failed without its two 1-second waits between SIGCONT,
# SIGTERM and SIGKILL (odls_base_sigkill_timeout): tfenc's ranks agree on
# an error and leave together, so those waits only ever find processes
# already gone, and hundreds of tests' jobs fail on purpose. Most script
# tests run many short jobs one after another. TFENC_PATHS=default: every
# auto path takes its default unmeasured (tests/environment.sh says why).
AM_TESTS_ENVIRONMENT = \
	TFENC_PATHS=default; export TFENC_PATHS; \
	TFENC_PLUGIN_PATH='$(abs_top_builddir)/plugins/.libs'; export TFENC_PLUGIN_PATH; \
	REFERENCE_PYTHON='$(REFERENCE_PYTHON)'; export REFERENCE_PYTHON; \
	PYARROW_PYTHON='$(PYARROW_PYTHON)'; export PYARROW_PYTHON; \
	TFENC_VENV_PYTHON="$${TFENC_VENV:-$${XDG_CACHE_HOME:-$$HOME/.cache}/tfenc/venv}/bin/python"; export TFENC_VENV_PYTHON; \
	MPIEXEC='$(MPIEXEC)'; export MPIEXEC; \
	top_srcdir='$(top_srcdir)'; export top_srcdir; \
	top_builddir='$(top_builddir)'; export top_builddir; \
	abs_top_srcdir='$(abs_top_srcdir)'; export abs_top_srcdir; \
	abs_top_builddir='$(abs_top_builddir)'; export abs_top_builddir; \
	OMPI_ALLOW_RUN_AS_ROOT=1; export OMPI_ALLOW_RUN_AS_ROOT; \
	OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM; \
	OMPI_MCA_rmaps_base_oversubscribe=1; export OMPI_MCA_rmaps_base_oversubscribe; \
	OPENBLAS_NUM_THREADS=1; export OPENBLAS_NUM_THREADS; \
	OMP_WAIT_POLICY=PASSIVE; export OMP_WAIT_POLICY; \
	OMPI_MCA_pml="$${OMPI_MCA_pml:-ob1}"; export OMPI_MCA_pml; \
	HWLOC_COMPONENTS="$${HWLOC_COMPONENTS:--pci,-linuxio}"; export HWLOC_COMPONENTS; \
	OMPI_MCA_odls_base_sigkill_timeout="$${OMPI_MCA_odls_base_sigkill_timeout:-0}"; \
	export OMPI_MCA_odls_base_sigkill_timeout;
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
EXTRA_DIST += tests/harness/timed tests/harness/slowest tests/harness/slow_first tests/harness/generate \
	tests/harness/local_imports.py tests/harness/makefile_lists.py \
	tests/harness/generated_tables.py tests/README.md

# C unit tests: tests/test_MODULE.c tests core/SUBSYSTEM/MODULE.c
# (tests/README.md maps them). A test program defines its suites in a table
# (tests/harness/cunit_main.h) and links UNIT_TEST_LIBS, whose
# tests/harness/cunit_main.c is its main(); CFLAGS TEST_CFLAGS find the
# harness headers. A program with a main() of its own links TEST_LIBS alone.
TEST_CFLAGS = $(AM_CFLAGS) $(CUNIT_CFLAGS) -I$(top_srcdir)/tests
TEST_LIBS = core/libtfenc.la $(CUNIT_LIBS) $(HDF5_LIBS) $(MPI_LIBS) $(DL_LIBS) -lm
check_LTLIBRARIES += tests/harness/libunit.la
tests_harness_libunit_la_SOURCES = tests/harness/cunit_main.c tests/harness/cunit_main.h \
	tests/harness/checks.c tests/harness/checks.h
tests_harness_libunit_la_CFLAGS = $(TEST_CFLAGS)
UNIT_TEST_LIBS = tests/harness/libunit.la $(TEST_LIBS)

# The job subsystem: job files (jobfile) and layer parameters with their
# integer ranges, inline comments and declared tables (params).
check_PROGRAMS += tests/test_jobfile tests/test_params
TESTS += tests/test_jobfile tests/test_params
tests_test_jobfile_SOURCES = tests/test_jobfile.c
tests_test_jobfile_CFLAGS = $(TEST_CFLAGS)
tests_test_jobfile_LDADD = $(UNIT_TEST_LIBS)
tests_test_params_SOURCES = tests/test_params.c
tests_test_params_CFLAGS = $(TEST_CFLAGS)
tests_test_params_LDADD = $(UNIT_TEST_LIBS)

# File checks, identity and plugin files examined without loading them
# (base/files, plugin/shared_object); the plugin loader.
check_PROGRAMS += tests/test_files tests/test_plugin_loader
TESTS += tests/test_files tests/test_plugin_loader
tests_test_files_SOURCES = tests/test_files.c
tests_test_files_CFLAGS = $(TEST_CFLAGS)
tests_test_files_LDADD = $(UNIT_TEST_LIBS)
tests_test_plugin_loader_SOURCES = tests/test_plugin_loader.c
tests_test_plugin_loader_CFLAGS = $(TEST_CFLAGS)
tests_test_plugin_loader_LDADD = $(UNIT_TEST_LIBS)

# The model subsystem: weight stores and linear maps (weights); the model's
# composition, memory promises (checked with a counting allocator) and bf16
# accuracy (model); and the int8 accuracy gate above it (run/accuracy_gate).
# The last two share a random BERT-like encoder (tests/encoder_fixture.c).
# The gate's checkpoints of its trial runs (run/gate_checkpoints), and the
# dry run's timing of each step on a sample (run/step_timing, on the encoder).
check_PROGRAMS += tests/test_weights tests/test_model tests/test_accuracy_gate \
	tests/test_gate_checkpoints tests/test_step_timing
TESTS += tests/test_weights tests/test_model tests/test_accuracy_gate tests/test_gate_checkpoints \
	tests/test_step_timing
tests_test_step_timing_SOURCES = tests/test_step_timing.c tests/encoder_fixture.c \
	tests/encoder_fixture.h
tests_test_step_timing_CFLAGS = $(TEST_CFLAGS)
tests_test_step_timing_LDADD = $(UNIT_TEST_LIBS)
# Late chunking's spans and windows (run/late_chunks): where each span of
# a document is pooled from (tests/pipeline/late_chunking.sh runs them).
check_PROGRAMS += tests/test_late_chunks
TESTS += tests/test_late_chunks
tests_test_late_chunks_SOURCES = tests/test_late_chunks.c
tests_test_late_chunks_CFLAGS = $(TEST_CFLAGS)
tests_test_late_chunks_LDADD = $(UNIT_TEST_LIBS)
tests_test_gate_checkpoints_SOURCES = tests/test_gate_checkpoints.c
tests_test_gate_checkpoints_CFLAGS = $(TEST_CFLAGS)
tests_test_gate_checkpoints_LDADD = $(UNIT_TEST_LIBS)
tests_test_weights_SOURCES = tests/test_weights.c
tests_test_weights_CFLAGS = $(TEST_CFLAGS)
tests_test_weights_LDADD = $(UNIT_TEST_LIBS)
# The matrix backend's OpenBLAS: loaded at the first product, no pool.
check_PROGRAMS += tests/test_openblas
TESTS += tests/test_openblas
tests_test_openblas_SOURCES = tests/test_openblas.c
tests_test_openblas_CFLAGS = $(TEST_CFLAGS)
tests_test_openblas_LDADD = $(UNIT_TEST_LIBS)
# A linear map's rows are bitwise independent of their batch and threads.
check_PROGRAMS += tests/test_batch_invariance
TESTS += tests/test_batch_invariance
tests_test_batch_invariance_SOURCES = tests/test_batch_invariance.c
tests_test_batch_invariance_CFLAGS = $(TEST_CFLAGS)
tests_test_batch_invariance_LDADD = $(UNIT_TEST_LIBS) $(ONEDNN_LIBS)
tests_test_model_SOURCES = tests/test_model.c tests/encoder_fixture.c tests/encoder_fixture.h \
	tests/allocation_counter.c tests/allocation_counter.h
tests_test_model_CFLAGS = $(TEST_CFLAGS)
tests_test_model_LDADD = $(UNIT_TEST_LIBS)
tests_test_accuracy_gate_SOURCES = tests/test_accuracy_gate.c tests/encoder_fixture.c \
	tests/encoder_fixture.h
tests_test_accuracy_gate_CFLAGS = $(TEST_CFLAGS)
tests_test_accuracy_gate_LDADD = $(UNIT_TEST_LIBS)

# Paths chosen by measurement (run/path_choice): the rule from injected
# times, records and keys, no timing; end to end with real timing (the
# dry run, the file, resume, [model] paths, 2 ranks) in pipeline/path_choice.sh.
check_PROGRAMS += tests/test_path_choice
TESTS += tests/test_path_choice
tests_test_path_choice_SOURCES = tests/test_path_choice.c
tests_test_path_choice_CFLAGS = $(TEST_CFLAGS)
tests_test_path_choice_LDADD = $(UNIT_TEST_LIBS)

# What a run reports about itself (run/run_report), on MPI_COMM_SELF.
check_PROGRAMS += tests/test_run_report
TESTS += tests/test_run_report
tests_test_run_report_SOURCES = tests/test_run_report.c
tests_test_run_report_CFLAGS = $(TEST_CFLAGS)
tests_test_run_report_LDADD = $(UNIT_TEST_LIBS)

# The job's inputs are exactly the keys read as input paths.
check_PROGRAMS += tests/test_job_inputs
TESTS += tests/test_job_inputs
tests_test_job_inputs_SOURCES = tests/test_job_inputs.c
tests_test_job_inputs_CFLAGS = $(TEST_CFLAGS)
tests_test_job_inputs_LDADD = $(UNIT_TEST_LIBS)

# Job-file lines without a length cap.
check_PROGRAMS += tests/test_jobfile_lines
TESTS += tests/test_jobfile_lines
tests_test_jobfile_lines_SOURCES = tests/test_jobfile_lines.c
tests_test_jobfile_lines_CFLAGS = $(TEST_CFLAGS)
tests_test_jobfile_lines_LDADD = $(UNIT_TEST_LIBS)

# Plugins that the loader must refuse: an older ABI, and no entry symbol.
check_LTLIBRARIES += tests/plugins/old_abi.la tests/plugins/no_entry.la
tests_plugins_old_abi_la_SOURCES = tests/plugins/old_abi.c
tests_plugins_old_abi_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere $(SANITIZER_FLAGS)
tests_plugins_no_entry_la_SOURCES = tests/plugins/no_entry.c
tests_plugins_no_entry_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere $(SANITIZER_FLAGS)
# A plugin as an ABI 1.1 build made it (shorter parameter entries): it must load.
check_LTLIBRARIES += tests/plugins/minor1_params.la
tests_plugins_minor1_params_la_SOURCES = tests/plugins/minor1_params.c
tests_plugins_minor1_params_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere $(SANITIZER_FLAGS)
tests_plugins_minor1_params_la_LIBADD = core/libtfenc.la
check_LTLIBRARIES += tests/plugins/arithmetic.la
tests_plugins_arithmetic_la_SOURCES = tests/plugins/arithmetic.c
tests_plugins_arithmetic_la_CFLAGS = $(AM_CFLAGS)
tests_plugins_arithmetic_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere $(SANITIZER_FLAGS)
tests_plugins_arithmetic_la_LIBADD = core/libtfenc.la
# Plugins that misbehave in one way each, for the loading policy
# (core/plugin/plugin_loader.h) and tests/bad_inputs/plugins.sh: a constructor that calls
# _exit(0), a create() that calls exit(0), a second `pooling`, a constructor
# that leaves a trace, declared parameter tables that create() contradicts.
# In their own directory, so that jobs searching tests/plugins/.libs never
# meet them.
HOSTILE_PLUGIN_FLAGS = -module -avoid-version -shared -rpath /nowhere $(SANITIZER_FLAGS)
check_LTLIBRARIES += tests/plugins/hostile/exit_layer.la tests/plugins/hostile/exit_create.la \
	tests/plugins/hostile/shadow.la tests/plugins/hostile/marker.la \
	tests/plugins/hostile/undeclared_key.la tests/plugins/hostile/crash_layer.la
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
tests_plugins_hostile_crash_layer_la_SOURCES = tests/plugins/hostile/crash_layer.c tests/plugins/hostile/common.h
tests_plugins_hostile_crash_layer_la_LDFLAGS = $(HOSTILE_PLUGIN_FLAGS)
tests_plugins_hostile_undeclared_key_la_LIBADD = core/libtfenc.la
# Callbacks that fail or answer nonsense without a message, and plugin
# memory errors (tests/bad_inputs/plugins.sh); the latter built without the
# sanitizers, as a third party's plugin is, so that the host's own guards
# are what sees them in the sanitizer build too.
check_LTLIBRARIES += tests/plugins/hostile/silent_callbacks.la \
	tests/plugins/hostile/memory_errors.la
tests_plugins_hostile_silent_callbacks_la_SOURCES = tests/plugins/hostile/silent_callbacks.c \
	tests/plugins/hostile/common.h
tests_plugins_hostile_silent_callbacks_la_LDFLAGS = $(HOSTILE_PLUGIN_FLAGS)
tests_plugins_hostile_silent_callbacks_la_LIBADD = core/libtfenc.la
tests_plugins_hostile_memory_errors_la_SOURCES = tests/plugins/hostile/memory_errors.c \
	tests/plugins/hostile/common.h
tests_plugins_hostile_memory_errors_la_CFLAGS = -std=c11 $(WARN_CFLAGS)
tests_plugins_hostile_memory_errors_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere
tests_plugins_hostile_memory_errors_la_LIBADD = core/libtfenc.la

# The sanitizer build (configure --enable-sanitizers, tests/run-all.sh
# --sanitizers) runs what exercises memory: every C unit test, every plugin
# and reader path, one end-to-end job per input format, precision and
# layout, the error, kill and resume paths. What only compares numbers or
# text with a reference (PyTorch, sentence-transformers, Hugging Face
# tokenizers), or checks something no sanitizer looks at (exported
# symbols, documentation, Python tools), runs in the normal build only:
# each fragment adds such tests to NORMAL_BUILD_ONLY_TESTS, with the tests
# that cover their memory paths in the sanitizer build named beside them.
# A script that runs fewer of its cases when TFENC_SANITIZER_BUILD is set
# is also added to FEWER_CASES_UNDER_SANITIZERS (tests/structure.sh checks
# both lists). tests/run-all.sh --sanitizers runs the normal build's
# suite as those two lists only: a test that the sanitizer build runs
# whole runs there alone, as it checks there all that it checks in the
# normal build, and memory besides (tests/README.md lists the sets).
if !SANITIZERS
TESTS += $(NORMAL_BUILD_ONLY_TESTS)
endif

# Reference models, example outputs and other data the tests generate.
clean-local:
	rm -rf tests/data/generated

# Bad jobs and inputs, in four parts that run side by side (the cases of
# each run one after the other, most of their time MPI start-up).
BAD_INPUTS_TESTS = tests/bad_inputs/job_files.sh tests/bad_inputs/plugins.sh \
	tests/bad_inputs/integers.sh tests/bad_inputs/inputs.sh
dist_check_SCRIPTS += $(BAD_INPUTS_TESTS)
TESTS += $(BAD_INPUTS_TESTS)
FEWER_CASES_UNDER_SANITIZERS += $(BAD_INPUTS_TESTS)
EXTRA_DIST += tests/bad_inputs/common.sh

# Careless inputs beyond the job keys: the files tfenc-import and
# --status open, sizes in a model's files, imported job files, inconsistent
# outputs, crashing plugins, early signals.
dist_check_SCRIPTS += tests/careless_inputs.sh
TESTS += tests/careless_inputs.sh
# Preloaded by careless_inputs.sh: SIGTERM raised at MPI_Init's entry.
check_LTLIBRARIES += tests/preload/signal_in_mpi_init.la
tests_preload_signal_in_mpi_init_la_SOURCES = tests/preload/signal_in_mpi_init.c
tests_preload_signal_in_mpi_init_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere \
	$(SANITIZER_FLAGS)
tests_preload_signal_in_mpi_init_la_LIBADD = $(MPI_LIBS)

# The plugin ABI is plugin.h: libtfenc's exports against the header (nm -D).
# The same symbols in both builds: normal build only.
dist_check_SCRIPTS += tests/exports.sh
NORMAL_BUILD_ONLY_TESTS += tests/exports.sh

dist_check_SCRIPTS += tests/many_documents.sh
TESTS += tests/many_documents.sh

# bf16 and int8 where the CPU lacks their instruction sets (ONEDNN_MAX_CPU_ISA);
# their accuracy on all-MiniLM-L6-v2 and real text is tests/import/parity.sh's.
dist_check_SCRIPTS += tests/precision_isa.sh
TESTS += tests/precision_isa.sh
