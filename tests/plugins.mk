# tests fragment: see Makefile.am

# attention plugin against a naive double-precision reference.
check_PROGRAMS += tests/test_attention
TESTS += tests/test_attention
tests_test_attention_SOURCES = tests/test_attention.c
tests_test_attention_CPPFLAGS = $(AM_CPPFLAGS) $(CUNIT_CFLAGS) -I$(top_srcdir)/tests
tests_test_attention_LDADD = tests/harness/libunit.la core/libtfenc.la $(CUNIT_LIBS) -lm
# The plugin's workspace depends on the rank's OpenMP pool (one tile of
# scores per thread).
tests_test_attention_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS)

# per-token and pooling layers against naive double-precision references.
check_PROGRAMS += tests/test_layers
TESTS += tests/test_layers
tests_test_layers_SOURCES = tests/test_layers.c
tests_test_layers_CPPFLAGS = $(AM_CPPFLAGS) $(CUNIT_CFLAGS) -I$(top_srcdir)/tests
tests_test_layers_LDADD = tests/harness/libunit.la core/libtfenc.la $(CUNIT_LIBS) $(DL_LIBS) -lm
