# Rank layouts (data-parallel replicas x pipeline stages) against
# the single-rank output, and a failing rank at every layout.
dist_check_SCRIPTS += tests/pipeline/layouts.sh tests/pipeline/failing_rank.sh \
	tests/pipeline/slurm.sh
TESTS += tests/pipeline/layouts.sh tests/pipeline/failing_rank.sh
# The batch script's requeue logic, normal build only (tests/local.mk): the
# SIGTERM path it drives runs under the sanitizers in kill_resume.sh.
if !SANITIZERS
TESTS += tests/pipeline/slurm.sh
endif
EXTRA_DIST += tests/pipeline/common.sh tests/pipeline/compare_layouts.py \
	tests/pipeline/make_inputs.py tests/pipeline/bench.sh jobs/slurm/encode.sbatch \
	tests/resume/progress.py

# The layout rules and the cost-balanced split of steps into stages.
check_PROGRAMS += tests/test_layout
TESTS += tests/test_layout
tests_test_layout_SOURCES = tests/test_layout.c
tests_test_layout_CFLAGS = $(TEST_CFLAGS)
tests_test_layout_LDADD = tests/harness/libunit.la $(TEST_LIBS)

# The work queue's order and end, on one process (MPI_COMM_SELF).
check_PROGRAMS += tests/test_work_queue
TESTS += tests/test_work_queue
tests_test_work_queue_SOURCES = tests/test_work_queue.c
tests_test_work_queue_CFLAGS = $(TEST_CFLAGS)
tests_test_work_queue_LDADD = $(UNIT_TEST_LIBS)

# Jobs killed (SIGKILL) or stopped (SIGTERM) under mpiexec -n 4 and
# run again end with the uninterrupted run's file.
# A disk that fills mid-run: one line with the reason, rows kept, resumable.
# Outputs that are inputs, shared by two jobs, resumed over changed
# inputs, or about to hold non-finite rows are refused.
dist_check_SCRIPTS += tests/resume/kill_resume.sh tests/resume/disk_full.sh \
	tests/resume/guards.sh
TESTS += tests/resume/kill_resume.sh tests/resume/disk_full.sh tests/resume/guards.sh
