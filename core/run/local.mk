# run: a tfenc-batch job from its [job] settings to its report: the first
# stage's feeder, the int8 accuracy gate and the calibration it makes (or a
# file gives), the run that ties the subsystems together.
# may use: base job plugin tokenizer input matrix ranks model output
core_libtfenc_la_SOURCES += \
	core/run/job_settings.c core/run/job_settings.h \
	core/run/run_request.h \
	core/run/multivector_tokens.c core/run/multivector_tokens.h \
	core/run/feeder.c core/run/feeder.h core/run/late_chunks.c core/run/late_chunks.h \
	core/run/gate_checkpoints.c core/run/gate_checkpoints.h \
	core/run/step_timing.c core/run/step_timing.h \
	core/run/path_choice.c core/run/path_choice.h \
	core/run/accuracy_gate.c core/run/accuracy_gate.h \
	core/run/calibration.c core/run/calibration.h \
	core/run/run_parts.c core/run/run_parts.h \
	core/run/job_reading.c core/run/job_reading.h \
	core/run/kind_survey.c core/run/kind_survey.h \
	core/run/precision_choice.c core/run/precision_choice.h \
	core/run/quantization_ranges.c core/run/quantization_ranges.h \
	core/run/work_left.c core/run/work_left.h \
	core/run/output_opening.c core/run/output_opening.h \
	core/run/encode_loop.c core/run/encode_loop.h \
	core/run/heads.c core/run/heads.h \
	core/run/run.c core/run/run.h \
	core/run/run_report.c core/run/run_report.h
