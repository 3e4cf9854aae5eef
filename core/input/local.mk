# input: the corpus readers (lines of text and JSON Lines, a JSON Lines
# record, HDF5 token ids, Parquet rows), the files
# `[job] input` names (sources), their decompression (stream), and the
# windows the corpus is cut into.
# may use: base
core_libtfenc_la_SOURCES += \
	core/input/corpus.c core/input/corpus.h \
	core/input/hdf5_corpus.c core/input/hdf5_corpus.h \
	core/input/jsonl_record.c core/input/jsonl_record.h \
	core/input/sources.c core/input/sources.h \
	core/input/stream.c core/input/stream.h \
	core/input/windows.c core/input/windows.h
# Parquet corpora, when configure found Apache Arrow (--with-parquet).
if HAVE_PARQUET
core_libtfenc_la_SOURCES += core/input/parquet_reader.cc
core_libtfenc_la_LIBADD += $(PARQUET_LIBS)
endif
EXTRA_DIST += core/input/parquet_reader.h
