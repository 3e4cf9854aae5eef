/* What a run reports about itself (core/run/run_report), on one rank
 * (MPI_COMM_SELF): the summary's counts, rates, load imbalance and idle
 * fraction from a rank's work, this process's memory figures, and the FLOP
 * rate remembered for the next dry run (in $XDG_CACHE_HOME, pointed at a
 * scratch directory here). */
#include "harness/checks.h"
#include "harness/cunit_main.h"
#include "run/run_report.h"

#include <CUnit/CUnit.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char work[512]; /* this test's $XDG_CACHE_HOME */

static int suite_init(void)
{
    MPI_Init(NULL, NULL);
    snprintf(work, sizeof work, "%s/tests/data/generated/test_run_report-XXXXXX", build_dir());
    char parents[600];
    snprintf(parents, sizeof parents, "mkdir -p '%s/tests/data/generated'", build_dir());
    if (system(parents) != 0 || mkdtemp(work) == NULL)
        return 1;
    /* Never the user's own cache: the figures here are made up. */
    return setenv("XDG_CACHE_HOME", work, 1);
}

static int suite_clean(void)
{
    int failed = CU_get_number_of_failures() != 0;
    MPI_Finalize();
    if (failed)
        return 0;
    char command[600];
    snprintf(command, sizeof command, "rm -rf '%s'", work);
    return system(command) != 0;
}

static void test_summary_of_one_rank(void)
{
    CU_ASSERT_EQUAL(tfenc_run_last_flop_rate(), 0.0); /* nothing remembered yet */
    tfenc_rank_work mine = {.tokens = 5000, .microbatches = 7, .windows = 3,
                            .busy_seconds = 3.0, .writing_seconds = 0.5, .waiting_seconds = 0.25,
                            .encode_seconds = 4.0, .encode_cpu_seconds = 7.5, .flops = 2e10,
                            .shared_mib = 12.0, .replica = 0, .stage = 0};
    tfenc_run_summary summary;
    tfenc_run_summary_gather(MPI_COMM_SELF, &mine, 100, 2, 5000, 6.0, &summary);
    CU_ASSERT_EQUAL(summary.documents, 100);
    CU_ASSERT_EQUAL(summary.truncated_documents, 2);
    CU_ASSERT_EQUAL(summary.tokens, 5000);
    CU_ASSERT_DOUBLE_EQUAL(summary.wall_seconds, 6.0, 1e-12);
    CU_ASSERT_EQUAL(summary.n_ranks, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(summary.ranks);
    CU_ASSERT_EQUAL(summary.ranks[0].tokens, 5000);
    CU_ASSERT_EQUAL(summary.ranks[0].windows, 3);
    CU_ASSERT_DOUBLE_EQUAL(summary.encode_seconds, 4.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(summary.encode_cpu_seconds, 7.5, 1e-12);
    /* 2e10 FLOPs in 4 s on one rank. */
    CU_ASSERT_DOUBLE_EQUAL(summary.flops_per_rank, 5e9, 1.0);
    /* One rank is its own mean: no imbalance. Idle is what neither the
     * layers nor the writing took: (4 - 3 - 0.5) / 4. */
    CU_ASSERT_DOUBLE_EQUAL(summary.load_imbalance, 1.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(summary.mean_idle_fraction, 0.125, 1e-12);
    /* Memory: this process's own figures, and the node is this rank. */
    CU_ASSERT(summary.peak_rss_mib > 0);
    CU_ASSERT_DOUBLE_EQUAL(summary.ranks[0].peak_rss_mib, summary.peak_rss_mib, 1e-12);
    CU_ASSERT(summary.node_memory_mib > 0);
    CU_ASSERT_DOUBLE_EQUAL(summary.node_shared_mib, 12.0, 1e-12);
    CU_ASSERT_EQUAL(summary.node_ranks, 1);
    tfenc_run_summary_free(&summary);
    CU_ASSERT_PTR_NULL(summary.ranks);

    /* The rate is remembered for the next dry run. */
    double remembered = tfenc_run_last_flop_rate();
    CU_ASSERT_DOUBLE_EQUAL(remembered, 5e9, 5e9 * 1e-5);
}

static void test_no_rate_without_work(void)
{
    /* A run that encoded nothing (all resumed, say) keeps the last rate. */
    double before = tfenc_run_last_flop_rate();
    tfenc_rank_work idle = {0};
    tfenc_run_summary summary;
    tfenc_run_summary_gather(MPI_COMM_SELF, &idle, 0, 0, 0, 0.5, &summary);
    CU_ASSERT_EQUAL(summary.documents, 0);
    CU_ASSERT_EQUAL(summary.flops_per_rank, 0.0);
    CU_ASSERT_EQUAL(summary.load_imbalance, 0.0);
    CU_ASSERT_EQUAL(summary.mean_idle_fraction, 0.0);
    tfenc_run_summary_free(&summary);
    CU_ASSERT_DOUBLE_EQUAL(tfenc_run_last_flop_rate(), before, 0.0);
}

static void test_memory_figures(void)
{
    /* The peak never falls below what the process holds now. */
    double now = tfenc_proportional_mib(), peak = tfenc_peak_rss_mib();
    CU_ASSERT(now > 0);
    CU_ASSERT(peak > 0);
    size_t size = 64u << 20;
    /* volatile: the compiler may not drop a block nobody reads. */
    volatile char *block = malloc(size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(block);
    for (size_t i = 0; i < size; i += 4096)
        block[i] = 1;
    CU_ASSERT(tfenc_peak_rss_mib() >= now + 60 && tfenc_peak_rss_mib() >= peak);
    CU_ASSERT(tfenc_proportional_mib() >= now + 60);
    free((void *)block);
}

static const test_case report_cases[] = {
    {"summary of one rank and its remembered rate", test_summary_of_one_rank},
    {"no rate remembered without work", test_no_rate_without_work},
    {"memory figures follow the process", test_memory_figures},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"run report", suite_init, suite_clean, report_cases},
    {NULL, NULL, NULL, NULL}};
