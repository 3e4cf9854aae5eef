# input: the corpus (corpus.h) and its formats as components: one reader
# per format (reader.h; text lines, JSON Lines with its record parser,
# HDF5 token ids, Parquet rows), the formats' table that names them
# (formats.c), the files and lines the positioned readers share
# (record_files), the files `[job] input` names (sources), their
# decompression beneath every reader (stream), and the windows the corpus
# is cut into.
# may use: base
core_libtfenc_la_SOURCES += \
	core/input/corpus.c core/input/corpus.h \
	core/input/corpus_types.h \
	core/input/formats.c core/input/formats.h \
	core/input/hdf5_corpus.c \
	core/input/jsonl_corpus.c \
	core/input/jsonl_record.c core/input/jsonl_record.h \
	core/input/reader.h \
	core/input/record_files.c core/input/record_files.h \
	core/input/sources.c core/input/sources.h \
	core/input/stream.c core/input/stream.h \
	core/input/text_corpus.c \
	core/input/windows.c core/input/windows.h
# Parquet corpora, when configure found Apache Arrow (--with-parquet): the
# reader (parquet_corpus.c) and its C++ side.
if HAVE_PARQUET
core_libtfenc_la_SOURCES += core/input/parquet_corpus.c core/input/parquet_reader.cc
core_libtfenc_la_LIBADD += $(PARQUET_LIBS)
endif
# Arrow from a pyarrow wheel (configure.ac says why): libtfenc finds it in
# tfenc/arrow beside itself. Installed, that is $(pkglibdir)/arrow, where
# install-exec-local copies the libraries; in the build tree libtfenc lies
# in core/.libs (libtool's objdir), so core/.libs/tfenc/arrow links to
# arrow-lib/, remade whenever `make clean` took .libs away.
if PARQUET_BUNDLED
core_libtfenc_la_LDFLAGS += -Wl,-rpath,'$$ORIGIN/tfenc/arrow'
EXTRA_core_libtfenc_la_DEPENDENCIES += core/.libs/tfenc/arrow
core/.libs/tfenc/arrow:
	$(AM_V_at)$(MKDIR_P) core/.libs/tfenc
	$(AM_V_at)ln -sfn '$(abs_top_builddir)/arrow-lib' $@
install-exec-local: install-bundled-arrow
install-bundled-arrow:
	$(MKDIR_P) '$(DESTDIR)$(pkglibdir)/arrow'
	for library in $(PARQUET_BUNDLED_LIBRARIES); do \
	  $(INSTALL_PROGRAM) "$(abs_top_builddir)/arrow-lib/$$library" \
	    '$(DESTDIR)$(pkglibdir)/arrow'/"$$library" || exit 1; \
	done
uninstall-local: uninstall-bundled-arrow
uninstall-bundled-arrow:
	for library in $(PARQUET_BUNDLED_LIBRARIES); do \
	  rm -f '$(DESTDIR)$(pkglibdir)/arrow'/"$$library"; \
	done
	-rmdir '$(DESTDIR)$(pkglibdir)/arrow'
endif
EXTRA_DIST += core/input/parquet_reader.h
