# run: a tfenc-batch job from its [job] settings to its report: the first
# stage's feeder, the int8 accuracy gate and the calibration it makes (or a
# file gives), the run that ties the subsystems together.
# may use: base job plugin tokenizer input matrix ranks model output
core_libtfenc_la_SOURCES += \
	core/run/job_settings.c core/run/job_settings.h \
	core/run/multivector_tokens.c core/run/multivector_tokens.h \
	core/run/feeder.c core/run/feeder.h \
	core/run/gate_checkpoints.c core/run/gate_checkpoints.h \
	core/run/step_timing.c core/run/step_timing.h \
	core/run/path_choice.c core/run/path_choice.h \
	core/run/accuracy_gate.c core/run/accuracy_gate.h \
	core/run/calibration.c core/run/calibration.h \
	core/run/heads.c core/run/heads.h \
	core/run/run.c core/run/run.h \
	core/run/run_report.c core/run/run_report.h
