# drivers fragment: see Makefile.am
# tfenc-import: Hugging Face checkpoint -> tfenc weights file + job file.
# The safetensors reader lives in libtfenc so that tests and fuzzers reach it.
core_libtfenc_la_SOURCES += core/safetensors.c core/safetensors.h

bin_PROGRAMS += drivers/tfenc-import
drivers_tfenc_import_SOURCES = drivers/tfenc-import.c
drivers_tfenc_import_LDADD = core/libtfenc.la $(HDF5_LIBS) $(JANSSON_LIBS) $(UTF8PROC_LIBS) -lm
