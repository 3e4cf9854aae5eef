# I/O: corpus readers, the HDF5 output writer, 16-bit floats, SHA-256.
core_libtfenc_la_SOURCES += \
	core/corpus.c core/corpus.h \
	core/output.c core/output.h \
	core/float16.c core/float16.h \
	core/sha256.c core/sha256.h \
	core/inspect.c core/inspect.h
