# ranks: the MPI layout (replicas x stages), the pipeline between stages,
# the node's shared weights window, the window counter, running totals sent
# to rank 0, waiting for other ranks without spinning a core, and whether
# ranks computed alike what each computes alone.
# may use: base
core_libtfenc_la_SOURCES += \
	core/ranks/agreement.c core/ranks/agreement.h \
	core/ranks/layout.c core/ranks/layout.h \
	core/ranks/pipeline.c core/ranks/pipeline.h \
	core/ranks/node_arena.c core/ranks/node_arena.h \
	core/ranks/patient_wait.c core/ranks/patient_wait.h \
	core/ranks/tally.c core/ranks/tally.h \
	core/ranks/work_queue.c core/ranks/work_queue.h
