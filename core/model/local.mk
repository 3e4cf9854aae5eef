# model: the plan of steps from the job file, the weights the layers load
# (HDF5, and the safetensors reader tfenc-import uses).
# may use: base job plugin matrix ranks
core_libtfenc_la_SOURCES += \
	core/model/model.c core/model/model.h \
	core/model/weights.c core/model/weights.h \
	core/model/safetensors.c core/model/safetensors.h
