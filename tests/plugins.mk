# tests fragment: see Makefile.am

# attention plugin against a naive double-precision reference.
check_PROGRAMS += tests/test_attention
TESTS += tests/test_attention
FEWER_CASES_UNDER_SANITIZERS += tests/test_attention
tests_test_attention_SOURCES = tests/test_attention.c plugins/attention_kernel.c \
	plugins/attention_kernel_loops.h
tests_test_attention_CPPFLAGS = $(AM_CPPFLAGS) $(CUNIT_CFLAGS) -I$(top_srcdir)/tests \
	-I$(top_srcdir)/plugins
tests_test_attention_LDADD = tests/harness/libunit.la core/libtfenc.la $(CUNIT_LIBS) -lm
# The plugin's workspace depends on the rank's OpenMP pool (one tile of
# scores per thread).
tests_test_attention_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS)

# head_dim apart from d_model / n_heads and qk_norm (Qwen3, Gemma3) against
# a naive double-precision reference, fp32 and bf16.
check_PROGRAMS += tests/test_attention_heads
TESTS += tests/test_attention_heads
tests_test_attention_heads_SOURCES = tests/test_attention_heads.c
tests_test_attention_heads_CPPFLAGS = $(AM_CPPFLAGS) $(CUNIT_CFLAGS) -I$(top_srcdir)/tests
tests_test_attention_heads_LDADD = tests/harness/libunit.la core/libtfenc.la $(CUNIT_LIBS) -lm

# Tokens/s of the mha layer alone, two plugin builds side by side
# (asserts nothing: `make check` only builds it so that it keeps compiling):
# tests/bench/attention_bench OLD.so NEW.so [d heads reps] (ATTENTION_BENCH_A and _B add
# a job line to either side: two paths of one build).
check_PROGRAMS += tests/bench/attention_bench
tests_bench_attention_bench_SOURCES = tests/bench/attention_bench.c
tests_bench_attention_bench_LDADD = core/libtfenc.la -ldl -lm
tests_bench_attention_bench_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS)

# per-token and pooling layers against naive double-precision references.
check_PROGRAMS += tests/test_layers
TESTS += tests/test_layers
tests_test_layers_SOURCES = tests/test_layers.c
tests_test_layers_CPPFLAGS = $(AM_CPPFLAGS) $(CUNIT_CFLAGS) -I$(top_srcdir)/tests
tests_test_layers_LDADD = tests/harness/libunit.la core/libtfenc.la $(CUNIT_LIBS) $(DL_LIBS) -lm

# What a plugin author meets: declared ranges, an ABI 1.1 plugin, ignored
# getter failures, did-you-mean, missing plugin_path, norms in --dry-run,
# output_ids, and docs/layers.md against --list-plugins.
dist_check_SCRIPTS += tests/plugin_authoring.sh tests/layers_doc.py
TESTS += tests/plugin_authoring.sh

# The SDK's fast math (tfenc/plugin_math.h) against float64 libm, in each
# instruction set a plugin's vector clones may run: arithmetic on two
# arrays, no memory path for the sanitizers to watch (36 million values).
check_PROGRAMS += tests/test_fast_math
NORMAL_BUILD_ONLY_TESTS += tests/test_fast_math
tests_test_fast_math_SOURCES = tests/test_fast_math.c
tests_test_fast_math_CPPFLAGS = $(AM_CPPFLAGS) $(CUNIT_CFLAGS) -I$(top_srcdir)/tests
tests_test_fast_math_LDADD = tests/harness/libunit.la $(CUNIT_LIBS) -lm
# The plugins' flags (plugins/local.mk): the loops vectorise as theirs do.
tests_test_fast_math_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS) -fno-trapping-math -ffp-contract=fast
