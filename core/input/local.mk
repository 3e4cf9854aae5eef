# input: the corpus readers (text, JSON Lines, HDF5 token ids) and the
# windows the corpus is cut into.
# may use: base
core_libtfenc_la_SOURCES += \
	core/input/corpus.c core/input/corpus.h \
	core/input/windows.c core/input/windows.h
