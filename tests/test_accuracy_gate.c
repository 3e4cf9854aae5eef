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

/* The int8 accuracy gate on a sample: it meets min_cosine (default 0.999)
 * by its choice of steps, and that choice, run as a model, gives the
 * cosine it reported; a bar it cannot meet refuses the job in one line
 * that names a layer. */
static void test_precision_gate(void)
{
    const tfenc_precision fallback = tfenc_matrix_int8_fallback();
    composed c;
    tfenc_model_options options;
    CU_ASSERT_EQUAL_FATAL(encoder_open(&c, "int8", &options), TFENC_OK);
    if (!precision_runs_here(TFENC_PRECISION_INT8)) {
        release(&c);
        return;
    }
    owned_batch first, second;
    owned_batch_fill(&first, 3, 30, 0.0f);
    owned_batch_fill(&second, 2, 50, 0.0f);
    tfenc_batch samples[2] = {first.batch, second.batch};
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
    owned_batch fp32, int8;
    tfenc_precision everywhere_fp32[16];
    for (int i = 0; i < 16; i++)
        everywhere_fp32[i] = TFENC_PRECISION_FP32;
    CU_ASSERT_EQUAL(encoder_output(&c, options, everywhere_fp32, &second, &fp32), TFENC_OK);
    CU_ASSERT_EQUAL(encoder_output(&c, options, chosen, &second, &int8), TFENC_OK);
    double cosine = smallest_cosine(&fp32, &int8);
    CU_ASSERT(cosine >= report.sample_cosine - 1e-6 && cosine < 1.0);

    /* A bar between all-int8 and all-fallback keeps some steps, not all,
     * out of int8, and is met. */
    for (int i = 0; i < 16; i++)
        chosen[i] = TFENC_PRECISION_INT8;
    owned_batch out;
    double all_int8 = 1.0, all_fallback = 1.0;
    for (int b = 0; b < 2; b++) {
        const owned_batch *in = b == 0 ? &first : &second;
        CU_ASSERT_EQUAL(encoder_output(&c, options, everywhere_fp32, in, &fp32), TFENC_OK);
        CU_ASSERT_EQUAL(encoder_output(&c, options, chosen, in, &out), TFENC_OK);
        all_int8 = fmin(all_int8, smallest_cosine(&fp32, &out));
    }
    for (int i = 0; i < 16; i++)
        chosen[i] = fallback;
    for (int b = 0; b < 2; b++) {
        const owned_batch *in = b == 0 ? &first : &second;
        CU_ASSERT_EQUAL(encoder_output(&c, options, everywhere_fp32, in, &fp32), TFENC_OK);
        CU_ASSERT_EQUAL(encoder_output(&c, options, chosen, in, &out), TFENC_OK);
        all_fallback = fmin(all_fallback, smallest_cosine(&fp32, &out));
    }
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
    double reproduced = 1.0;
    for (int b = 0; b < 2; b++) {
        const owned_batch *in = b == 0 ? &first : &second;
        CU_ASSERT_EQUAL(encoder_output(&c, options, everywhere_fp32, in, &fp32), TFENC_OK);
        CU_ASSERT_EQUAL(encoder_output(&c, options, chosen, in, &out), TFENC_OK);
        reproduced = fmin(reproduced, smallest_cosine(&fp32, &out));
    }
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

static const test_case gate_cases[] = {
    {"int8 accuracy gate", test_precision_gate},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"precision", NULL, NULL, gate_cases},
    {NULL, NULL, NULL, NULL}};
