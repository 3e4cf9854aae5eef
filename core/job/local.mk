# job: the job file (INI sections as typed values), declared parameters, and
# the rule for a head's label names (id2label) that jobs and outputs share.
# may use: base
core_libtfenc_la_SOURCES += \
	core/job/jobfile.c core/job/jobfile.h \
	core/job/params.c core/job/params.h \
	core/job/id2label.c core/job/id2label.h
