# job: the job file (INI sections as typed values) and declared parameters.
# may use: base
core_libtfenc_la_SOURCES += \
	core/job/jobfile.c core/job/jobfile.h \
	core/job/params.c core/job/params.h
