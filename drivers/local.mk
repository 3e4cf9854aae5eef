# tfenc-batch: the job runner users call (under mpirun or alone). Its parts
# in drivers/batch/: reading the job, feeding the first stage, writing from
# the last, and reporting.
bin_PROGRAMS += drivers/tfenc-batch
drivers_tfenc_batch_SOURCES = drivers/tfenc-batch.c \
	drivers/batch/settings.c drivers/batch/settings.h \
	drivers/batch/feeder.c drivers/batch/feeder.h \
	drivers/batch/writer.c drivers/batch/writer.h \
	drivers/batch/report.c drivers/batch/report.h
drivers_tfenc_batch_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/drivers
drivers_tfenc_batch_LDADD = core/libtfenc.la $(HDF5_LIBS) $(MPI_LIBS) $(OPENBLAS_LIBS) -lm
