/* Rank layout: the checks, the rank -> replica/stage map, and the split of
 * steps into stages against a brute-force search over every split. */
#include "harness/cunit_main.h"
#include "base/context.h"
#include "ranks/layout.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_refuses_impossible_layouts(void)
{
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_layout_check(&ctx, "j.ini: [job]", 6, 4, 10), TFENC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(ctx.message, "j.ini: [job]: 6 ranks"));
    CU_ASSERT_PTR_NOT_NULL(strstr(ctx.message, "multiple of the stage count"));
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_layout_check(&ctx, "j.ini: [job]", 8, 8, 5), TFENC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(ctx.message, "pipeline_stages = 8 but the model has only 5 steps"));
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_layout_check(&ctx, "j", 4, 0, 5), TFENC_ERR_CONFIG);
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_layout_check(&ctx, "j", 8, 4, 4), TFENC_OK);
    CU_ASSERT_EQUAL(tfenc_layout_check(&ctx, "j", 1, 1, 1), TFENC_OK);
}

static void test_ranks_map_to_replicas_and_stages(void)
{
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    double cost[6] = {1, 1, 1, 1, 1, 1};
    for (int rank = 0; rank < 8; rank++) {
        tfenc_layout layout;
        CU_ASSERT_EQUAL_FATAL(tfenc_layout_create(&ctx, "j", rank, 8, 2, 6, cost, &layout), TFENC_OK);
        CU_ASSERT_EQUAL(layout.data_parallel, 4);
        CU_ASSERT_EQUAL(layout.replica, rank / 2);
        CU_ASSERT_EQUAL(layout.stage, rank % 2);
        CU_ASSERT_EQUAL(tfenc_layout_first_step(&layout, 0), 0);
        CU_ASSERT_EQUAL(tfenc_layout_end_step(&layout, 0), 3);
        CU_ASSERT_EQUAL(tfenc_layout_end_step(&layout, 1), 6);
        tfenc_layout_free(&layout);
    }
}

/* The smallest possible largest-stage cost, by trying every split. */
static double brute_force_best(const double *cost, int n, int stages, int first)
{
    if (stages == 1) {
        double sum = 0;
        for (int i = first; i < n; i++)
            sum += cost[i];
        return sum;
    }
    double best = -1, head = 0;
    for (int end = first + 1; end <= n - (stages - 1); end++) {
        head += cost[end - 1];
        double rest = brute_force_best(cost, n, stages - 1, end);
        double worst = head > rest ? head : rest;
        if (best < 0 || worst < best)
            best = worst;
    }
    return best;
}

static void test_split_is_optimal_and_contiguous(void)
{
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    srand(7);
    int checked = 0;
    for (int trial = 0; trial < 300; trial++) {
        int n = 1 + rand() % 12;
        int stages = 1 + rand() % n;
        double cost[12];
        for (int i = 0; i < n; i++)
            /* Costs like a real plan: cheap norms/embeddings, costly blocks. */
            cost[i] = rand() % 4 == 0 ? 0.0 : (double)(1 + rand() % 100);
        tfenc_layout layout;
        CU_ASSERT_EQUAL_FATAL(tfenc_layout_create(&ctx, "j", 0, stages, stages, n, cost, &layout),
                              TFENC_OK);
        double worst = 0;
        CU_ASSERT_EQUAL(tfenc_layout_first_step(&layout, 0), 0);
        CU_ASSERT_EQUAL(tfenc_layout_end_step(&layout, stages - 1), n);
        for (int s = 0; s < stages; s++) {
            int first = tfenc_layout_first_step(&layout, s), end = tfenc_layout_end_step(&layout, s);
            CU_ASSERT(end > first); /* every stage holds a step */
            if (s > 0)
                CU_ASSERT_EQUAL(first, tfenc_layout_end_step(&layout, s - 1));
            double sum = 0;
            for (int i = first; i < end; i++)
                sum += cost[i];
            CU_ASSERT_DOUBLE_EQUAL(sum, layout.stage_cost[s], 1e-9);
            if (sum > worst)
                worst = sum;
        }
        /* Optimal up to the tiny per-step weight that spreads zero-cost steps. */
        double best = brute_force_best(cost, n, stages, 0);
        CU_ASSERT(worst <= best + 1e-3 * (best > 1 ? best : 1));
        if (worst > best + 1e-3 * (best > 1 ? best : 1))
            fprintf(stderr, "\nn %d stages %d: split worst %g, best %g\n", n, stages, worst, best);
        checked++;
        tfenc_layout_free(&layout);
    }
    CU_ASSERT_EQUAL(checked, 300);
}

static void test_steps_without_cost_spread_evenly(void)
{
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    double cost[8] = {0};
    tfenc_layout layout;
    CU_ASSERT_EQUAL_FATAL(tfenc_layout_create(&ctx, "j", 0, 4, 4, 8, cost, &layout), TFENC_OK);
    for (int s = 0; s < 4; s++)
        CU_ASSERT_EQUAL(tfenc_layout_end_step(&layout, s) - tfenc_layout_first_step(&layout, s), 2);
    tfenc_layout_free(&layout);
}

static const test_case layout_cases[] = {
    {"refuses impossible layouts", test_refuses_impossible_layouts},
    {"ranks map to replicas and stages", test_ranks_map_to_replicas_and_stages},
    {"split is optimal and contiguous", test_split_is_optimal_and_contiguous},
    {"steps without cost spread evenly", test_steps_without_cost_spread_evenly},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"layout", NULL, NULL, layout_cases},
    {NULL, NULL, NULL, NULL}};
