# tfenc-batch: the job runner users call (under mpirun or alone): arguments,
# MPI, signals and printing around the library's tfenc_run_job (core/run/run.h).
bin_PROGRAMS += drivers/tfenc-batch
drivers_tfenc_batch_SOURCES = drivers/tfenc-batch.c \
	drivers/status.c drivers/status.h drivers/singleton.c drivers/singleton.h \
	drivers/launcher.c drivers/launcher.h
drivers_tfenc_batch_LDADD = core/libtfenc.la $(HDF5_LIBS) $(MPI_LIBS) $(JANSSON_LIBS) -lm
