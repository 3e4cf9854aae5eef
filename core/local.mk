# libtfenc: the engine. This fragment defines the library; each subsystem's
# own fragment (core/<subsystem>/local.mk, included from Makefile.am in the
# order they may depend on one another) adds exactly its files.
lib_LTLIBRARIES += core/libtfenc.la
core_libtfenc_la_SOURCES =
core_libtfenc_la_LIBADD = $(HDF5_LIBS) $(MPI_LIBS) $(INIH_LIBS) \
	$(UTF8PROC_LIBS) $(JANSSON_LIBS) $(CRYPTO_LIBS) $(COMPRESSION_LIBS) $(DL_LIBS) -lm
# Exports: the plugin ABI (plugin.h) and, versioned apart, what tfenc's own
# programs use; nothing else (core/libtfenc.map, checked by tests/exports.sh).
core_libtfenc_la_LDFLAGS = -version-info 0:0:0 $(SANITIZER_FLAGS) \
	-Wl,--version-script=$(top_srcdir)/core/libtfenc.map
EXTRA_core_libtfenc_la_DEPENDENCIES = core/libtfenc.map
EXTRA_DIST += core/libtfenc.map
# The plugin SDK, where installs expect it: the ABI (plugin.h), and two
# header-only services that add no symbol: element-wise math that
# vectorises (plugin_math.h) and loops on the rank's thread pool
# (plugin_parallel.h), which the matrix backend uses too.
tfencincludedir = $(includedir)/tfenc
tfencinclude_HEADERS = core/include/tfenc/plugin.h core/include/tfenc/plugin_math.h \
	core/include/tfenc/plugin_parallel.h
