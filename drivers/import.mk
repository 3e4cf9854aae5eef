# drivers fragment: see Makefile.am
# tfenc-import: Hugging Face checkpoint -> tfenc weights file + job file.
# The safetensors reader lives in libtfenc (core/model/) so that tests and
# fuzzers reach it.

# Its parts in drivers/import/: reading the model folder, the tensor map,
# and the writers of the weights and of the job.
bin_PROGRAMS += drivers/tfenc-import
drivers_tfenc_import_SOURCES = drivers/tfenc-import.c \
	drivers/import/importer.h \
	drivers/import/files.c drivers/import/files.h \
	drivers/import/hf_config.c drivers/import/hf_config.h \
	drivers/import/sentence_transformers.c drivers/import/sentence_transformers.h \
	drivers/import/colbert.c drivers/import/colbert.h \
	drivers/import/bge_m3.c drivers/import/bge_m3.h \
	drivers/import/tokenizer_files.c drivers/import/tokenizer_files.h \
	drivers/import/tensor_map.c drivers/import/tensor_map.h \
	drivers/import/tensor_names.c drivers/import/tensor_names.h \
	drivers/import/adapters.c drivers/import/adapters.h \
	drivers/import/weights_writer.c drivers/import/weights_writer.h \
	drivers/import/job_writer.c drivers/import/job_writer.h \
	drivers/import/static_model.c drivers/import/static_model.h
drivers_tfenc_import_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/drivers
drivers_tfenc_import_LDADD = core/libtfenc.la $(HDF5_LIBS) $(JANSSON_LIBS) $(UTF8PROC_LIBS) -lm
# What it reads and how each architecture is verified.
EXTRA_DIST += docs/models.md
