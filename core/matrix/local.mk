# matrix: the matrix backend (core/matrix/matrix.h): OpenBLAS fp32, oneDNN
# bf16 and int8 when configure found it, on the rank's one OpenMP thread
# pool. A library of its own for its flags: OpenMP for the parallel
# epilogues, and the vectorisation flags of the plugins' loops
# (plugins/local.mk says why).
# may use: base
noinst_LTLIBRARIES += core/libtfenc_matrix.la
core_libtfenc_matrix_la_SOURCES = core/matrix/matrix.c core/matrix/matrix.h \
	core/matrix/block_rows.h core/matrix/matrix_onednn.h core/matrix/openblas.c \
	core/matrix/openblas.h
if HAVE_ONEDNN
core_libtfenc_matrix_la_SOURCES += core/matrix/matrix_onednn.c core/matrix/onednn_f32.c \
	core/matrix/onednn_f32.h
endif
core_libtfenc_matrix_la_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS) -fno-trapping-math -ffp-contract=fast
core_libtfenc_la_LIBADD += core/libtfenc_matrix.la $(ONEDNN_LIBS)
core_libtfenc_la_LDFLAGS += $(OPENMP_CFLAGS)
