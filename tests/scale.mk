# The scale tools (benchmarks, not tests: they print figures and
# assert no time): the straggler benchmark, the calibration of the
# 1,000-rank model and the model itself (docs/scale.md).
check_PROGRAMS += tests/scale/calibrate
tests_scale_calibrate_SOURCES = tests/scale/calibrate.c
tests_scale_calibrate_CFLAGS = $(TEST_CFLAGS)
tests_scale_calibrate_LDADD = $(TEST_LIBS)
EXTRA_DIST += tests/scale/straggler.sh tests/scale/calibrate.sh tests/scale/model.py \
	tests/scale/efficiency.sh tests/scale/node_memory.sh tests/scale/calibration-example.json
# The model itself is tested (seeded, so deterministic) on that calibration.
# A Python model: normal build only (tests/local.mk).
dist_check_SCRIPTS += tests/scale/model_check.sh
NORMAL_BUILD_ONLY_TESTS += tests/scale/model_check.sh
