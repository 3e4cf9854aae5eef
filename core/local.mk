# libtfenc: the engine. Owned by the core; other fragments append sources.
lib_LTLIBRARIES += core/libtfenc.la
core_libtfenc_la_SOURCES = \
	core/context.c core/context.h \
	core/aligned.c core/aligned.h
core_libtfenc_la_LIBADD = $(HDF5_LIBS) $(MPI_LIBS) $(OPENBLAS_LIBS) $(INIH_LIBS) \
	$(UTF8PROC_LIBS) $(JANSSON_LIBS) $(CRYPTO_LIBS) $(DL_LIBS) -lm
# Exports: the plugin ABI (plugin.h) and, versioned apart, what tfenc's own
# programs use; nothing else (core/libtfenc.map, checked by tests/exports.sh).
core_libtfenc_la_LDFLAGS = -version-info 0:0:0 $(SANITIZER_FLAGS) \
	-Wl,--version-script=$(top_srcdir)/core/libtfenc.map
EXTRA_core_libtfenc_la_DEPENDENCIES = core/libtfenc.map
EXTRA_DIST += core/libtfenc.map
tfencincludedir = $(includedir)/tfenc
tfencinclude_HEADERS = core/include/tfenc/plugin.h
core_libtfenc_la_SOURCES += \
	core/files.c core/files.h \
	core/jobfile.c core/jobfile.h \
	core/params.c core/params.h \
	core/weights.c core/weights.h \
	core/plugin_loader.c core/plugin_loader.h \
	core/shared_object.c core/shared_object.h \
	core/model.c core/model.h \
	core/hdf5_error.c core/hdf5_error.h \
	core/layout.c core/layout.h \
	core/pipeline.c core/pipeline.h \
	core/names.h core/clock.h \
	core/precision.c core/precision.h

# A tfenc-batch job: the [job] settings, the corpus's windows and the queue
# that hands them out, the first stage's feeder, the last stage's writer,
# the run that ties them together and its report.
core_libtfenc_la_SOURCES += \
	core/job_settings.c core/job_settings.h \
	core/windows.c core/windows.h \
	core/work_queue.c core/work_queue.h \
	core/feeder.c core/feeder.h \
	core/writer.c core/writer.h \
	core/ownership.c core/ownership.h \
	core/fingerprint.c core/fingerprint.h \
	core/node_arena.c core/node_arena.h \
	core/run.c core/run.h \
	core/run_report.c core/run_report.h

# The matrix backend (core/matrix.h): OpenBLAS fp32, oneDNN bf16 and int8
# when configure found it, on the rank's one OpenMP thread pool. A library
# of its own for its flags: OpenMP for the parallel epilogues, and the
# vectorisation flags of the plugins' loops (plugins/local.mk says why).
noinst_LTLIBRARIES += core/libtfenc_matrix.la
core_libtfenc_matrix_la_SOURCES = core/matrix.c core/matrix.h core/matrix_onednn.h \
	core/fast_math.h core/parallel.h
if HAVE_ONEDNN
core_libtfenc_matrix_la_SOURCES += core/matrix_onednn.c
endif
core_libtfenc_matrix_la_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS) -fno-trapping-math -ffp-contract=fast
core_libtfenc_la_LIBADD += core/libtfenc_matrix.la $(ONEDNN_LIBS)
core_libtfenc_la_LDFLAGS += $(OPENMP_CFLAGS)
