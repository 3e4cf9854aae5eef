# model: the plan of steps from the job file, the weights the layers load
# (HDF5), and the checkpoint readers tfenc-import uses: safetensors files,
# their sharded index, torch.save's zip (libzip). A library of its
# own for OpenMP: the forward pass's residual copies and adds run on the
# rank's thread pool (tfenc/plugin_parallel.h).
# may use: base job plugin matrix ranks
noinst_LTLIBRARIES += core/libtfenc_model.la
core_libtfenc_model_la_SOURCES = \
	core/model/model.c core/model/model.h \
	core/model/weights.c core/model/weights.h \
	core/model/safetensors.c core/model/safetensors.h \
	core/model/torch_checkpoint.c core/model/torch_checkpoint.h \
	core/model/checkpoint.c core/model/checkpoint.h
core_libtfenc_model_la_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS) $(LIBZIP_CFLAGS)
core_libtfenc_la_LIBADD += core/libtfenc_model.la $(LIBZIP_LIBS)
