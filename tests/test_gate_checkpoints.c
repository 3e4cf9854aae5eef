/* The accuracy gate's checkpoints (core/run/gate_checkpoints): a run
 * starts from the deepest kept boundary whose steps before it ran at its
 * precisions, an int8 step that equals fp32 on the reference's values
 * counts as fp32 only while the run is on those values, only every
 * stride-th boundary is kept, and the budget drops the least recently
 * used first. */
#include "harness/checks.h"
#include "harness/cunit_main.h"
#include "run/gate_checkpoints.h"

#include <CUnit/CUnit.h>
#include <limits.h>
#include <string.h>

#define STEPS 6
#define D_MODEL 4
#define ROWS 3
#define BOUNDARY_BYTES ((size_t)ROWS * D_MODEL * sizeof(float))

static const tfenc_precision F = TFENC_PRECISION_FP32, I = TFENC_PRECISION_INT8,
                             B = TFENC_PRECISION_BF16;

/* One batch whose values tell which checkpoint it came from. */
typedef struct one_batch {
    float x[ROWS * D_MODEL];
    tfenc_batch batch;
} one_batch;

static void fill(one_batch *b, float value, int rows)
{
    for (int i = 0; i < ROWS * D_MODEL; i++)
        b->x[i] = value;
    b->batch = (tfenc_batch){.x = b->x, .rows = rows, .d_model = D_MODEL, .n_tokens = ROWS};
}

static tfenc_gate_checkpoints *make(size_t budget)
{
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_gate_checkpoints *c = NULL;
    CU_ASSERT_EQUAL(tfenc_gate_checkpoints_create(&ctx, STEPS, 1, BOUNDARY_BYTES, budget, &c),
                    TFENC_OK);
    return c;
}

/* A run starts at the deepest boundary its precisions reach with the same
 * values, and gets those values and row count back. */
static void test_deepest_matching_boundary(void)
{
    tfenc_gate_checkpoints *c = make(1 << 20);
    const tfenc_precision reference[STEPS] = {F, F, F, F, F, F};
    one_batch b;
    for (int boundary = 1; boundary < STEPS; boundary++) {
        fill(&b, (float)boundary, boundary == 4 ? 1 : ROWS); /* pooling at step 3 */
        tfenc_gate_checkpoints_keep(c, boundary, reference, &b.batch);
    }
    fill(&b, -1.0f, ROWS);
    const tfenc_precision late_int8[STEPS] = {F, F, F, I, I, I};
    CU_ASSERT_EQUAL(tfenc_gate_checkpoints_restore(c, late_int8, &b.batch, NULL, 0, INT_MAX), 3);
    CU_ASSERT_EQUAL(b.x[0], 3.0f);
    CU_ASSERT_EQUAL(b.batch.rows, ROWS);
    const tfenc_precision last_int8[STEPS] = {F, F, F, F, F, I};
    CU_ASSERT_EQUAL(tfenc_gate_checkpoints_restore(c, last_int8, &b.batch, NULL, 0, INT_MAX), 5);
    CU_ASSERT_EQUAL(b.x[0], 5.0f);
    /* A run that must pass the trunk's end (boundary 2 here) starts there
     * at the latest. */
    CU_ASSERT_EQUAL(tfenc_gate_checkpoints_restore(c, last_int8, &b.batch, NULL, 0, 2), 2);
    CU_ASSERT_EQUAL(b.x[0], 2.0f);
    const tfenc_precision pooled[STEPS] = {F, F, F, F, I, I};
    CU_ASSERT_EQUAL(tfenc_gate_checkpoints_restore(c, pooled, &b.batch, NULL, 0, INT_MAX), 4);
    CU_ASSERT_EQUAL(b.batch.rows, 1);
    /* Different from the first step on: nothing to start from, the
     * batch untouched. */
    const tfenc_precision first_bf16[STEPS] = {B, F, F, F, F, F};
    fill(&b, -1.0f, ROWS);
    CU_ASSERT_EQUAL(tfenc_gate_checkpoints_restore(c, first_bf16, &b.batch, NULL, 0, INT_MAX), 0);
    CU_ASSERT_EQUAL(b.x[0], -1.0f);
    /* A later run's own boundaries serve runs like it. */
    fill(&b, 30.0f, ROWS);
    tfenc_gate_checkpoints_keep(c, 3, first_bf16, &b.batch);
    const tfenc_precision first_bf16_then_int8[STEPS] = {B, F, F, I, I, I};
    CU_ASSERT_EQUAL(
        tfenc_gate_checkpoints_restore(c, first_bf16_then_int8, &b.batch, NULL, 0, INT_MAX), 3);
    CU_ASSERT_EQUAL(b.x[0], 30.0f);
    tfenc_gate_checkpoints_destroy(c);
}

/* An int8 step marked identical counts as fp32 on the reference's values
 * only: after an inexact int8 step the values differ, and it does not. */
static void test_identical_steps(void)
{
    tfenc_gate_checkpoints *c = make(1 << 20);
    const tfenc_precision reference[STEPS] = {F, F, F, F, F, F};
    one_batch b;
    for (int boundary = 1; boundary < STEPS; boundary++) {
        fill(&b, (float)boundary, ROWS);
        tfenc_gate_checkpoints_keep(c, boundary, reference, &b.batch);
    }
    tfenc_gate_checkpoints_set_identical(c, 0, 1); /* the embedding lookup */
    tfenc_gate_checkpoints_set_identical(c, 2, 1);
    const tfenc_precision exact_int8[STEPS] = {I, F, I, F, I, I};
    CU_ASSERT_EQUAL(tfenc_gate_checkpoints_restore(c, exact_int8, &b.batch, NULL, 0, INT_MAX), 4);
    /* Step 1 in int8 (not identical) moves the values: step 2 after it
     * is no longer on the reference's. */
    const tfenc_precision moved[STEPS] = {I, I, I, F, F, F};
    CU_ASSERT_EQUAL(tfenc_gate_checkpoints_restore(c, moved, &b.batch, NULL, 0, INT_MAX), 1);
    CU_ASSERT_EQUAL(b.x[0], 1.0f);
    fill(&b, 20.0f, ROWS);
    tfenc_gate_checkpoints_keep(c, 3, moved, &b.batch);
    /* ...and a run that ran step 2 in fp32 there does not match it. */
    const tfenc_precision moved_fp32[STEPS] = {I, I, F, F, F, F};
    CU_ASSERT_EQUAL(tfenc_gate_checkpoints_restore(c, moved_fp32, &b.batch, NULL, 0, INT_MAX), 1);
    CU_ASSERT_EQUAL(tfenc_gate_checkpoints_restore(c, moved, &b.batch, NULL, 0, INT_MAX), 3);
    CU_ASSERT_EQUAL(b.x[0], 20.0f);
    tfenc_gate_checkpoints_destroy(c);
}

/* The run's precisions of steps 0-2 for trial `run` (0-17), none the
 * reference's. */
static void trial(int run, tfenc_precision *precision)
{
    static const tfenc_precision kinds[3] = {TFENC_PRECISION_FP32, TFENC_PRECISION_INT8,
                                             TFENC_PRECISION_BF16};
    for (int i = 0; i < STEPS; i++)
        precision[i] = F;
    precision[0] = run < 9 ? B : I;
    precision[1] = kinds[(run % 9) / 3];
    precision[2] = kinds[run % 3];
}

/* Room for 8 boundaries: a run's 5 boundaries would take more than a
 * quarter, so every third is kept (boundary 3); then the least recently
 * used checkpoints go first. */
static void test_budget_and_stride(void)
{
    tfenc_gate_checkpoints *c = make(8 * BOUNDARY_BYTES);
    const tfenc_precision reference[STEPS] = {F, F, F, F, F, F};
    one_batch b;
    for (int boundary = 1; boundary < STEPS; boundary++) {
        fill(&b, (float)boundary, ROWS);
        tfenc_gate_checkpoints_keep(c, boundary, reference, &b.batch);
    }
    const tfenc_precision last_int8[STEPS] = {F, F, F, F, F, I};
    CU_ASSERT_EQUAL(tfenc_gate_checkpoints_restore(c, last_int8, &b.batch, NULL, 0, INT_MAX), 3);
    CU_ASSERT_EQUAL(b.x[0], 3.0f);
    /* Ten trials' checkpoints, the reference used again after the fourth:
     * eleven in the room of eight, trials 0-2 are dropped. */
    tfenc_precision precision[STEPS];
    for (int run = 0; run < 10; run++) {
        if (run == 4)
            CU_ASSERT_EQUAL(
                tfenc_gate_checkpoints_restore(c, last_int8, &b.batch, NULL, 0, INT_MAX), 3);
        trial(run, precision);
        fill(&b, 100.0f + (float)run, ROWS);
        tfenc_gate_checkpoints_keep(c, 3, precision, &b.batch);
    }
    for (int run = 0; run < 10; run++) {
        trial(run, precision);
        fill(&b, -1.0f, ROWS);
        CU_ASSERT_EQUAL(tfenc_gate_checkpoints_restore(c, precision, &b.batch, NULL, 0, INT_MAX),
                        run < 3 ? 0 : 3);
        CU_ASSERT_EQUAL(b.x[0], run < 3 ? -1.0f : 100.0f + (float)run);
    }
    CU_ASSERT_EQUAL(tfenc_gate_checkpoints_restore(c, last_int8, &b.batch, NULL, 0, INT_MAX), 3);
    CU_ASSERT_EQUAL(b.x[0], 3.0f);
    tfenc_gate_checkpoints_destroy(c);

    /* A boundary larger than the whole budget is never kept. */
    c = make(BOUNDARY_BYTES - 1);
    fill(&b, 1.0f, ROWS);
    tfenc_gate_checkpoints_keep(c, 1, reference, &b.batch);
    CU_ASSERT_EQUAL(tfenc_gate_checkpoints_restore(c, reference, &b.batch, NULL, 0, INT_MAX), 0);
    tfenc_gate_checkpoints_destroy(c);
}

/* A run on some of the sample's batches (the gate's hard part) restores
 * the checkpoint of the whole sample's, each of its batches from the one
 * it stands for, in its own order. */
static void test_some_batches(void)
{
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_gate_checkpoints *c = NULL;
    CU_ASSERT_EQUAL_FATAL(
        tfenc_gate_checkpoints_create(&ctx, STEPS, 3, 3 * BOUNDARY_BYTES, 1 << 20, &c), TFENC_OK);
    const tfenc_precision reference[STEPS] = {F, F, F, F, F, F};
    one_batch whole[3];
    tfenc_batch batches[3];
    for (int b = 0; b < 3; b++) {
        fill(&whole[b], 10.0f * (float)(b + 1), b + 1);
        batches[b] = whole[b].batch;
    }
    tfenc_gate_checkpoints_keep(c, 2, reference, batches);
    one_batch part[2];
    tfenc_batch part_batches[2];
    for (int i = 0; i < 2; i++) {
        fill(&part[i], -1.0f, ROWS);
        part_batches[i] = part[i].batch;
    }
    const int which[2] = {2, 0};
    const tfenc_precision late_int8[STEPS] = {F, F, F, I, I, I};
    CU_ASSERT_EQUAL(tfenc_gate_checkpoints_restore(c, late_int8, part_batches, which, 2, INT_MAX), 2);
    CU_ASSERT_EQUAL(part[0].x[0], 30.0f);
    CU_ASSERT_EQUAL(part_batches[0].rows, 3);
    CU_ASSERT_EQUAL(part[1].x[0], 10.0f);
    CU_ASSERT_EQUAL(part_batches[1].rows, 1);
    CU_ASSERT_EQUAL(part[1].x[D_MODEL], -1.0f); /* batch 0 had one row: the rest untouched */
    tfenc_gate_checkpoints_destroy(c);
}

static const test_case checkpoint_cases[] = {
    {"a run on some batches restores theirs", test_some_batches},
    {"a run starts at the deepest boundary it shares", test_deepest_matching_boundary},
    {"identical int8 steps count as fp32 on the reference only", test_identical_steps},
    {"the stride and the budget", test_budget_and_stride},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"gate checkpoints", NULL, NULL, checkpoint_cases},
    {NULL, NULL, NULL, NULL}};
