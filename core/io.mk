# I/O: corpus readers, the HDF5 output writer, 16-bit floats, SHA-256.
core_libtfenc_la_SOURCES += \
	core/input/corpus.c core/input/corpus.h \
	core/output/output.c core/output/output.h \
	core/base/float16.c core/base/float16.h \
	core/base/sha256.c core/base/sha256.h \
	core/output/inspect.c core/output/inspect.h
