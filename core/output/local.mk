# output: the HDF5 output file, multi-vector rows, the last stage's writer, which window a
# file holds (ownership), a job's fingerprint, the corpus's table of files, the
# description of a file's datasets and attributes with the checks that hold a
# file to it, reading a file back (--status), and an int8 job's calibration
# as a file records it.
# may use: base job ranks
core_libtfenc_la_SOURCES += \
	core/output/output.c core/output/output.h core/output/output_types.h \
	core/output/output_options.h \
	core/output/output_internal.h core/output/output_handle.c core/output/output_attributes.c \
	core/output/output_resume.c core/output/output_rows.c core/output/output_heads.c \
	core/output/output_description.c core/output/output_description.h \
	core/output/output_layout.c core/output/output_layout.h \
	core/output/kinds.c core/output/kinds.h core/output/output_kind.h \
	core/output/quantize.c core/output/quantize.h \
	core/output/multivector.c core/output/multivector.h \
	core/output/writer.c core/output/writer.h \
	core/output/sparse.c core/output/sparse.h \
	core/output/ownership.c core/output/ownership.h \
	core/output/fingerprint.c core/output/fingerprint.h \
	core/output/corpus_shards.c core/output/corpus_shards.h \
	core/output/output_checks.h core/output/output_check_state.c \
	core/output/output_check_state.h core/output/output_attribute_checks.c \
	core/output/output_dataset_checks.c core/output/head_groups.c core/output/head_groups.h \
	core/output/inspect.c core/output/inspect.h \
	core/output/calibration.c core/output/calibration.h
