# drivers fragment: see Makefile.am
# tfenc-export: a tfenc output file (HDF5) as Parquet files, for corpus
# pipelines (pyarrow, pandas, Polars, DuckDB). Its parts in drivers/export/:
# reading the output back in blocks (output_reader), the Parquet writer
# through Arrow's C++ library (parquet.cc; parquet_none.c in a build
# without Arrow, where the program says in one line that it cannot), and
# the two together (export).
bin_PROGRAMS += drivers/tfenc-export
drivers_tfenc_export_SOURCES = drivers/tfenc-export.c \
	drivers/export/export.c drivers/export/export.h \
	drivers/export/output_reader.c drivers/export/output_reader.h \
	drivers/export/parquet.h
drivers_tfenc_export_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/drivers
drivers_tfenc_export_LDADD = core/libtfenc.la $(HDF5_LIBS) $(JANSSON_LIBS)
if HAVE_PARQUET
drivers_tfenc_export_SOURCES += drivers/export/parquet.cc
drivers_tfenc_export_LDADD += $(PARQUET_LIBS)
else
drivers_tfenc_export_SOURCES += drivers/export/parquet_none.c
endif

# Arrow from a pyarrow wheel (configure.ac) is installed in
# $(pkglibdir)/arrow, and libtfenc finds it relative to itself
# (core/input/local.mk). The program calls Arrow itself, so it needs its
# own way there: a RUNPATH from the program's directory to that one,
# relative too, so that the install stands alone wherever it is copied.
# In the build tree libtool runs the program from drivers/.libs, where the
# same relative path is made to lead to arrow-lib/ (within the build tree;
# a layout whose bindir and pkglibdir lie too far apart for that runs
# tfenc-export installed only).
if PARQUET_BUNDLED
export_arrow_path = $(shell realpath -m --relative-to='$(bindir)' '$(pkglibdir)/arrow')
drivers_tfenc_export_LDFLAGS = $(AM_LDFLAGS) -Wl,-rpath,'$$ORIGIN/$(export_arrow_path)'
EXTRA_drivers_tfenc_export_DEPENDENCIES = drivers/.libs/arrow-link.stamp
drivers/.libs/arrow-link.stamp: Makefile
	$(AM_V_at)$(MKDIR_P) drivers/.libs
	$(AM_V_at)link=`realpath -m -s '$(abs_top_builddir)/drivers/.libs/$(export_arrow_path)'`; \
	case $$link in \
	  '$(abs_top_builddir)'/*) $(MKDIR_P) "$${link%/*}" && ln -sfn '$(abs_top_builddir)/arrow-lib' "$$link" ;; \
	  *) echo "tfenc-export: $(bindir) and $(pkglibdir) lie too far apart for a link in the build tree: run it installed" >&2 ;; \
	esac
	$(AM_V_at)touch $@
endif
