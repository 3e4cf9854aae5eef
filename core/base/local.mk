# base: the leaves every subsystem may use (the error context, files,
# aligned memory, arrays that grow by doubling, clocks, 16-bit floats, SHA-256, HDF5 error text and
# attributes, the
# file-size check after HDF5 reads, the precision names, the guards around
# what plugins write with the marker of the running plugin call, the text
# a record's kept fields travel in). The
# element-wise kernels and parallel loops the matrix backend shares with the
# plugins are SDK headers (core/local.mk).
# may use: nothing (only libraries: libc, HDF5)
core_libtfenc_la_SOURCES += \
	core/base/context.c core/base/context.h \
	core/base/aligned.c core/base/aligned.h \
	core/base/files.c core/base/files.h \
	core/base/float16.c core/base/float16.h \
	core/base/sha256.c core/base/sha256.h \
	core/base/hdf5_error.c core/base/hdf5_error.h \
	core/base/hdf5_attributes.c core/base/hdf5_attributes.h \
	core/base/growth.c core/base/growth.h \
	core/base/hdf5_intact.c core/base/hdf5_intact.h \
	core/base/precision.c core/base/precision.h \
	core/base/plugin_guard.c core/base/plugin_guard.h \
	core/base/kept_values.c core/base/kept_values.h \
	core/base/clock.h core/base/names.h
