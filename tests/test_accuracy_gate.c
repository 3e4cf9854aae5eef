/* The int8 accuracy gate (core/run/accuracy_gate) on a random BERT-like
 * encoder: the steps it keeps out of int8 meet the bar and reproduce the
 * cosine it reports, a bar between all-int8 and all-fallback keeps some
 * steps out, and a bar it cannot meet refuses the job in one line naming a
 * layer. The fallback is the matrix backend's (tfenc_matrix_int8_fallback):
 * bf16 where the CPU runs it, else fp32, which is exact, so that no bar
 * refuses a job there. */
#include "encoder_fixture.h"
#include "harness/checks.h"
#include "harness/cunit_main.h"
#include "matrix/matrix.h"
#include "run/accuracy_gate.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* The encoder job at int8, 0 (and nothing open) where int8 does not run. */
static int open_int8_encoder(composed *c, tfenc_model_options *options)
{
    CU_ASSERT_EQUAL_FATAL(encoder_open(c, "int8", options), TFENC_OK);
    if (precision_runs_here(TFENC_PRECISION_INT8))
        return 1;
    release(c);
    return 0;
}

/* The smallest cosine to fp32 over `n` batches at step precisions `chosen`. */
static double sample_cosine_of(composed *c, tfenc_model_options options,
                               const tfenc_precision *chosen, const owned_batch *batches, int n)
{
    tfenc_precision everywhere_fp32[16];
    for (int i = 0; i < 16; i++)
        everywhere_fp32[i] = TFENC_PRECISION_FP32;
    double lowest = 1.0;
    owned_batch fp32, out;
    for (int b = 0; b < n; b++) {
        CU_ASSERT_EQUAL(encoder_output(c, options, everywhere_fp32, &batches[b], &fp32), TFENC_OK);
        CU_ASSERT_EQUAL(encoder_output(c, options, chosen, &batches[b], &out), TFENC_OK);
        lowest = fmin(lowest, smallest_cosine(&fp32, &out));
    }
    return lowest;
}

/* The int8 accuracy gate on a sample: it meets min_cosine (default 0.999)
 * by its choice of steps, and that choice, run as a model, gives the
 * cosine it reported; a bar it cannot meet refuses the job in one line
 * that names a layer. */
static void test_precision_gate(void)
{
    const tfenc_precision fallback = tfenc_matrix_int8_fallback();
    composed c;
    tfenc_model_options options;
    if (!open_int8_encoder(&c, &options))
        return;
    owned_batch batches[2];
    owned_batch_fill(&batches[0], 3, 30, 0.0f);
    owned_batch_fill(&batches[1], 2, 50, 0.0f);
    tfenc_batch samples[2] = {batches[0].batch, batches[1].batch};
    tfenc_precision chosen[16];
    double step_cosines[16];
    tfenc_precision_report report = {.step_precision = chosen, .step_cosine = step_cosines};
    int status = tfenc_precision_gate(&ctx, &options, samples, 2, c.config.min_cosine, 0, &report);
    CU_ASSERT_EQUAL_FATAL(status, TFENC_OK);
    fprintf(stderr, "\n  int8 gate: sample cosine %.6f, %d step%s in %s ", report.sample_cosine,
            report.n_fallbacks, report.n_fallbacks == 1 ? "" : "s",
            tfenc_precision_names[fallback]);
    CU_ASSERT(report.sample_cosine >= 0.9995);
    int kept_out = 0;
    for (int i = 0; i < c.plan.n_steps; i++) {
        CU_ASSERT(chosen[i] == TFENC_PRECISION_INT8 || chosen[i] == fallback);
        CU_ASSERT(step_cosines[i] <= 1.0 && step_cosines[i] > 0.99);
        kept_out += chosen[i] == fallback;
    }
    CU_ASSERT_EQUAL(kept_out, report.n_fallbacks);
    /* The choice reproduces the reported cosine on the sample. The fp32
     * reference must not calibrate again: the store keeps the gate's. */
    double cosine = sample_cosine_of(&c, options, chosen, &batches[1], 1);
    CU_ASSERT(cosine >= report.sample_cosine - 1e-6 && cosine < 1.0);

    /* A bar between all-int8 and all-fallback keeps some steps, not all,
     * out of int8, and is met. */
    for (int i = 0; i < 16; i++)
        chosen[i] = TFENC_PRECISION_INT8;
    const double all_int8 = sample_cosine_of(&c, options, chosen, batches, 2);
    for (int i = 0; i < 16; i++)
        chosen[i] = fallback;
    const double all_fallback = sample_cosine_of(&c, options, chosen, batches, 2);
    /* the gate wants the sample at 1 - (1 - min_cosine) / 2 */
    double target = (all_int8 + all_fallback) / 2, bar = 1.0 - 2.0 * (1.0 - target);
    fprintf(stderr, "all int8 %.8f, all %s %.8f ", all_int8, tfenc_precision_names[fallback],
            all_fallback);
    CU_ASSERT(all_int8 < all_fallback);
    status = tfenc_precision_gate(&ctx, &options, samples, 2, bar, 0, &report);
    CU_ASSERT_EQUAL(status, TFENC_OK);
    CU_ASSERT(report.sample_cosine >= target);
    CU_ASSERT(report.n_fallbacks >= 1 && report.n_fallbacks < 2 * ENCODER_REPEAT);
    kept_out = 0;
    for (int i = 0; i < c.plan.n_steps; i++)
        kept_out += chosen[i] == fallback;
    CU_ASSERT_EQUAL(kept_out, report.n_fallbacks);
    const double reproduced = sample_cosine_of(&c, options, chosen, batches, 2);
    CU_ASSERT(reproduced >= target);
    /* Exactly: the maps are built from the input ranges the gate's choice
     * was measured with, and its runs, resumed from one another's
     * activations, equal whole ones. */
    CU_ASSERT_DOUBLE_EQUAL(reproduced, report.sample_cosine, 1e-9);
    if (fabs(reproduced - report.sample_cosine) > 1e-9)
        fprintf(stderr, "reproduced %.12f, reported %.12f ", reproduced, report.sample_cosine);

    /* A bar above what even bf16 gives is refused, naming the layer. With
     * fp32 as the fallback every bar is met: each inexact step is kept out
     * of int8, and the sample equals fp32's. */
    tfenc_context_init(&ctx);
    status = tfenc_precision_gate(&ctx, &options, samples, 2, 0.99999999, 0, &report);
    if (fallback == TFENC_PRECISION_FP32) {
        CU_ASSERT_EQUAL(status, TFENC_OK);
        CU_ASSERT(report.sample_cosine >= 1.0 - 1e-12);
        CU_ASSERT(report.n_fallbacks >= 1);
    } else {
        CU_ASSERT_EQUAL(status, TFENC_ERR_CONFIG);
        const char *message = tfenc_context_message(&ctx);
        CU_ASSERT(contains(message, "precision = int8: on the corpus sample"));
        CU_ASSERT(contains(message, "(min_cosine = 0.99999999 with half its error to spare)"));
        CU_ASSERT(contains(message, "the least accurate layer is enc."));
        CU_ASSERT_PTR_NULL(strchr(message, '\n'));
    }
    release(&c);
}

/* A sample of 8 batches, where the gate's bisection probes on its hardest
 * quarter first and confirms on the whole: the choice is the fewest steps
 * out of int8 (in the gate's order, least accurate first: one fewer
 * misses the bar on the whole sample), and the cosine it reports is the
 * whole sample's, reproduced by whole runs, not the hard part's. */
static void test_fewest_on_whole_sample(void)
{
    const tfenc_precision fallback = tfenc_matrix_int8_fallback();
    composed c;
    tfenc_model_options options;
    if (!open_int8_encoder(&c, &options))
        return;
    static const int shapes[8][2] = {{2, 20}, {3, 17}, {1, 60}, {4, 9},
                                     {2, 33}, {5, 11}, {1, 41}, {3, 25}};
    owned_batch batches[8];
    tfenc_batch samples[8];
    for (int b = 0; b < 8; b++) {
        owned_batch_fill(&batches[b], shapes[b][0], shapes[b][1], 0.0f);
        for (int t = 0; t < batches[b].batch.n_tokens; t++)
            batches[b].ids[t] = (t * 37 + 11 + 29 * b) % ENCODER_VOCAB;
        samples[b] = batches[b].batch;
    }
    tfenc_precision chosen[16];
    double step_cosines[16];
    tfenc_precision_report report = {.step_precision = chosen, .step_cosine = step_cosines};
    /* Calibrates the store (the first run of the gate does) before the
     * all-int8 and all-fallback runs below build int8 maps. */
    CU_ASSERT_EQUAL_FATAL(tfenc_precision_gate(&ctx, &options, samples, 8, 0.5, 0, &report),
                          TFENC_OK);
    tfenc_precision uniform[16];
    for (int i = 0; i < 16; i++)
        uniform[i] = TFENC_PRECISION_INT8;
    const double all_int8 = sample_cosine_of(&c, options, uniform, batches, 8);
    for (int i = 0; i < 16; i++)
        uniform[i] = fallback;
    const double all_fallback = sample_cosine_of(&c, options, uniform, batches, 8);
    /* close to all-fallback, so that more than the worst step goes */
    const double target = all_fallback - (all_fallback - all_int8) / 20;
    const double bar = 1.0 - 2.0 * (1.0 - target);
    CU_ASSERT_EQUAL_FATAL(tfenc_precision_gate(&ctx, &options, samples, 8, bar, 0, &report),
                          TFENC_OK);
    const double reproduced = sample_cosine_of(&c, options, chosen, batches, 8);
    fprintf(stderr, "\n  8 batches: all int8 %.8f, all %s %.8f; %d kept out, sample %.8f ",
            all_int8, tfenc_precision_names[fallback], all_fallback, report.n_fallbacks,
            report.sample_cosine);
    CU_ASSERT(report.n_fallbacks >= 1);
    CU_ASSERT(report.sample_cosine >= target);
    CU_ASSERT_DOUBLE_EQUAL(reproduced, report.sample_cosine, 1e-9);
    /* One fewer: the most accurate of the steps kept out (the last the
     * gate's order took; of equal cosines, the later step) back in int8. */
    int last_taken = -1;
    for (int i = 0; i < c.plan.n_steps; i++)
        if (chosen[i] == fallback &&
            (last_taken < 0 || step_cosines[i] >= step_cosines[last_taken]))
            last_taken = i;
    if (last_taken >= 0) {
        chosen[last_taken] = TFENC_PRECISION_INT8;
        const double fewer = sample_cosine_of(&c, options, chosen, batches, 8);
        fprintf(stderr, "one fewer %.8f ", fewer);
        CU_ASSERT(fewer < target);
    }
    release(&c);
}

static const test_case gate_cases[] = {
    {"int8 accuracy gate", test_precision_gate},
    {"fewest fallbacks, confirmed on the whole sample", test_fewest_on_whole_sample},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"precision", NULL, NULL, gate_cases},
    {NULL, NULL, NULL, NULL}};
