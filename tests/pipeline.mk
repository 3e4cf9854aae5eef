# Rank layouts (data-parallel replicas x pipeline stages) against
# the single-rank output, and a failing rank at every layout.
dist_check_SCRIPTS += tests/pipeline/layouts.sh tests/pipeline/failing_rank.sh
TESTS += tests/pipeline/layouts.sh tests/pipeline/failing_rank.sh
# What a run says about its work: the dry run's tokens against what the
# job encodes, the progress line's finished documents against the file.
dist_check_SCRIPTS += tests/pipeline/progress.sh
TESTS += tests/pipeline/progress.sh
# One document, one vector: a row alone, among a few, in the whole corpus,
# at other batch sizes, windows, threads and ranks, bitwise the same.
dist_check_SCRIPTS += tests/pipeline/one_document.sh
TESTS += tests/pipeline/one_document.sh
# Long documents with a scores head (chunk_scores) and late chunking
# (long_documents = late_chunk) against transformers, at 1 and 2 ranks,
# killed and resumed, and their bad keys.
dist_check_SCRIPTS += tests/pipeline/late_chunking.sh
TESTS += tests/pipeline/late_chunking.sh
EXTRA_DIST += tests/pipeline/late_chunking.py
FEWER_CASES_UNDER_SANITIZERS += tests/pipeline/layouts.sh
# Several outputs in one pass: an embedding head and a classifier's scores
# over one trunk, against the two one-head jobs, at 1x1, 2x1 and 1x2,
# killed and resumed, with --status and tfenc-export per head.
dist_check_SCRIPTS += tests/pipeline/several_outputs.sh
TESTS += tests/pipeline/several_outputs.sh
# auto's paths measured, printed, recorded, pinned on resume and by
# [model] paths, the same on 2 ranks (core/run/path_choice.h).
dist_check_SCRIPTS += tests/pipeline/path_choice.sh
TESTS += tests/pipeline/path_choice.sh
# One-rank runs started without a launcher, many at once (drivers/singleton.h):
# Open MPI's start, not memory, so the normal build only.
dist_check_SCRIPTS += tests/pipeline/singletons.sh
NORMAL_BUILD_ONLY_TESTS += tests/pipeline/singletons.sh
EXTRA_DIST += tests/pipeline/common.sh tests/pipeline/compare_layouts.py tests/pipeline/compare_heads.py \
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

# Patient waits: a request completed later by another thread is waited
# for asleep, not by polling a core.
check_PROGRAMS += tests/test_patient_wait
TESTS += tests/test_patient_wait
tests_test_patient_wait_SOURCES = tests/test_patient_wait.c
tests_test_patient_wait_CFLAGS = $(TEST_CFLAGS) -pthread
tests_test_patient_wait_LDADD = $(UNIT_TEST_LIBS) -lpthread

# Jobs killed (SIGKILL) or stopped (SIGTERM) under mpiexec -n 4 and
# run again end with the uninterrupted run's file.
# A disk that fills mid-run: one line with the reason, rows kept, resumable.
# Outputs that are inputs, shared by two jobs, resumed over changed
# inputs, or about to hold non-finite rows are refused.
dist_check_SCRIPTS += tests/resume/kill_resume.sh tests/resume/disk_full.sh \
	tests/resume/guards.sh
TESTS += tests/resume/kill_resume.sh tests/resume/disk_full.sh tests/resume/guards.sh
FEWER_CASES_UNDER_SANITIZERS += tests/resume/kill_resume.sh tests/resume/disk_full.sh
# Data never lost silently: an output aliasing any input key, a second job through
# another name of a running job's output, a resume with rebuilt plugins,
# inputs truncated while they are read.
dist_check_SCRIPTS += tests/resume/data_loss.sh
TESTS += tests/resume/data_loss.sh
FEWER_CASES_UNDER_SANITIZERS += tests/resume/data_loss.sh
EXTRA_DIST += tests/resume/wordpiece_json.py tests/resume/fixture.sh

# Real clusters on this machine: jobs/slurm/encode.sbatch under a one-node
# Slurm (slurmctld, slurmd, munge started by the test), and the real MiniLM
# job across two nodes made of network namespaces (MPI over TCP).
# Normal build only (tests/local.mk): they run tfenc-batch as users do; the
# memory paths they drive (signals, resume, MPI over several processes) run
# under the sanitizers in kill_resume.sh and layouts.sh.
dist_check_SCRIPTS += tests/cluster/slurm.sh tests/cluster/two_nodes.sh
NORMAL_BUILD_ONLY_TESTS += tests/cluster/slurm.sh tests/cluster/two_nodes.sh
