/* Each step timed on a sample (core/run/step_timing), on the random
 * BERT-like encoder of tests/encoder_fixture.c: every step of the range
 * asked for gets a finite, positive time per token, the caller's batches
 * are not touched, and the sample size follows the model's cost. No time
 * is compared with a figure: only that there is one. */
#include "encoder_fixture.h"
#include "harness/checks.h"
#include "harness/cunit_main.h"
#include "run/step_timing.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <string.h>

static void test_every_step_timed(void)
{
    composed c;
    tfenc_model_options options;
    CU_ASSERT_EQUAL_FATAL(encoder_open(&c, "fp32", &options), TFENC_OK);
    owned_batch first, second;
    owned_batch_fill(&first, 3, 30, 0.0f);
    owned_batch_fill(&second, 2, 50, 0.0f);
    tfenc_batch batches[2] = {first.batch, second.batch};
    float before[128 * ENCODER_D];
    memcpy(before, first.x, sizeof before);
    tfenc_gate_sample sample = {.batches = batches, .n_batches = 2,
                                .n_tokens = first.batch.n_tokens + second.batch.n_tokens,
                                .batch_tokens = 128};
    double seconds[16];
    for (int i = 0; i < 16; i++)
        seconds[i] = -1.0;
    options.first_step = 0;
    options.end_step = c.plan.n_steps;
    CU_ASSERT_EQUAL(tfenc_step_timing_measure(&ctx, &options, &sample, seconds), TFENC_OK);
    for (int i = 0; i < c.plan.n_steps; i++)
        CU_ASSERT(isfinite(seconds[i]) && seconds[i] > 0.0);
    CU_ASSERT_EQUAL(seconds[c.plan.n_steps], -1.0); /* nothing past the last step */
    /* The caller's activations are left as they were (the timing has its own). */
    CU_ASSERT_EQUAL(memcmp(before, first.x, sizeof before), 0);

    /* Part of the model: steps 1 .. 2 only, stored from index 0. */
    double part[16];
    options.first_step = 1;
    options.end_step = 3;
    CU_ASSERT_EQUAL(tfenc_step_timing_measure(&ctx, &options, &sample, part), TFENC_OK);
    CU_ASSERT(part[0] > 0.0 && part[1] > 0.0);

    /* No batch: an error, not a time. */
    tfenc_gate_sample empty = {0};
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_step_timing_measure(&ctx, &options, &empty, part), TFENC_ERR_INTERNAL);
    tfenc_context_init(&ctx);
    release(&c);
}

/* A second or two of products: fewer tokens for a costlier model, never
 * fewer than one document of max_seq_len, never more than 2,048. */
static void test_sample_size(void)
{
    CU_ASSERT_EQUAL(tfenc_step_timing_tokens(20e6, 256), 2048);  /* MiniLM-sized */
    CU_ASSERT_EQUAL(tfenc_step_timing_tokens(50e6, 256), 1000);
    CU_ASSERT_EQUAL(tfenc_step_timing_tokens(170e6, 512), 512);  /* BERT-base: a document */
    CU_ASSERT_EQUAL(tfenc_step_timing_tokens(14e9, 512), 512);   /* 7B: one document */
    CU_ASSERT_EQUAL(tfenc_step_timing_tokens(0.0, 128), 2048);
}

static const test_case timing_cases[] = {
    {"every step timed on the sample", test_every_step_timed},
    {"the sample's size follows the model's cost", test_sample_size},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"step timing", NULL, NULL, timing_cases},
    {NULL, NULL, NULL, NULL}};
