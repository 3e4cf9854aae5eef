/* The int8 accuracy gate (core/run/accuracy_gate) on a random BERT-like
 * encoder: the steps it keeps out of int8 meet the bar and reproduce the
 * cosine it reports, a bar between all-int8 and all-fallback keeps some
 * steps out, and a bar it cannot meet refuses the job in one line naming a
 * layer; a further head (a classifier beside mean pooling) is judged with
 * the first, and keeps steps out of int8 that the first alone would not. The fallback is the matrix backend's (tfenc_matrix_int8_fallback):
 * bf16 where the CPU runs it, else fp32, which is exact, so that no bar
 * refuses a job there. */
#include "encoder_fixture.h"
#include "harness/checks.h"
#include "harness/cunit_main.h"
#include "matrix/matrix.h"
#include "output/kinds.h"
#include "output/calibration.h"
#include "output/output.h"
#include "run/accuracy_gate.h"
#include "run/calibration.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The sample of two batches most tests gate on. */
static void two_batches(owned_batch batches[2], tfenc_batch samples[2])
{
    owned_batch_fill(&batches[0], 3, 30, 0.0f);
    owned_batch_fill(&batches[1], 2, 50, 0.0f);
    samples[0] = batches[0].batch;
    samples[1] = batches[1].batch;
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
    tfenc_batch samples[2];
    two_batches(batches, samples);
    tfenc_precision chosen[16];
    double step_cosines[16];
    tfenc_precision_report report = {.step_precision = chosen, .step_cosine = step_cosines};
    int status = tfenc_precision_gate(&ctx, &options, samples, 2, c.config.min_cosine, 0, NULL,
                                      0, &report);
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
    status = tfenc_precision_gate(&ctx, &options, samples, 2, bar, 0, NULL, 0, &report);
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
    status = tfenc_precision_gate(&ctx, &options, samples, 2, 0.99999999, 0, NULL, 0, &report);
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
    CU_ASSERT_EQUAL_FATAL(
        tfenc_precision_gate(&ctx, &options, samples, 8, 0.5, 0, NULL, 0, &report),
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
    CU_ASSERT_EQUAL_FATAL(
        tfenc_precision_gate(&ctx, &options, samples, 8, bar, 0, NULL, 0, &report),
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

/* A file's int8 calibration made from a model and read back: every map's
 * ranges bitwise, the steps and the digest the same; put into another
 * store of the same weights, the int8 model it makes gives the first
 * one's rows bit for bit. Taken into other weights or another plan it is
 * refused; a store whose calibration is fixed refuses an int8 map it
 * holds no ranges for. */
static void test_calibration_recorded_and_taken(void)
{
    const tfenc_precision fallback = tfenc_matrix_int8_fallback();
    composed first, second;
    tfenc_model_options options, second_options;
    if (!open_int8_encoder(&first, &options))
        return;
    owned_batch batches[2];
    tfenc_batch samples[2];
    two_batches(batches, samples);
    tfenc_precision chosen[16];
    tfenc_precision_report report = {.step_precision = chosen};
    CU_ASSERT_EQUAL_FATAL(
        tfenc_precision_gate(&ctx, &options, samples, 2, 0.999, 0, NULL, 0, &report),
        TFENC_OK);
    chosen[3] = fallback; /* a step kept out of int8, whatever the gate chose */
    static const char weights[] =
        "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    tfenc_int8_calibration made = {0}, back = {0};
    CU_ASSERT_EQUAL_FATAL(tfenc_calibration_from_model(&ctx, first.store, &first.plan, chosen,
                                                       &made), TFENC_OK);
    made.min_cosine = 0.999;
    made.sample_min_cosine = report.sample_cosine;
    made.sample_documents = 5;
    made.source = strdup("calibrated: the test's sample");
    memcpy(made.weights_sha256, weights, sizeof made.weights_sha256);
    CU_ASSERT_EQUAL_FATAL(tfenc_int8_calibration_digest(&ctx, &made), TFENC_OK);
    CU_ASSERT(made.n_maps >= 2 * ENCODER_REPEAT); /* attention's and the ffn's, per layer */

    /* Recorded in an output file and read back. */
    char directory[] = "/tmp/tfenc-calibration-XXXXXX", path[64];
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(directory));
    snprintf(path, sizeof path, "%s/out.h5", directory);
    tfenc_output_options output = {
        .path = path, .kind = &tfenc_output_kinds[TFENC_OUTPUT_POOLED], .width = ENCODER_D,
        .n_documents = 1,
        .weights_sha256 = weights, .precision = "int8", .calibration = &made,
        .precision_steps = made.precision_steps,
        .layout = "ranks=1 data_parallel=1 pipeline_stages=1"};
    tfenc_output *out = NULL;
    CU_ASSERT_EQUAL_FATAL(tfenc_output_create(&ctx, MPI_COMM_NULL, &output, &out), TFENC_OK);
    tfenc_output_close(out);
    CU_ASSERT_EQUAL_FATAL(tfenc_int8_calibration_read(&ctx, "[model] calibration", path, &back),
        TFENC_OK);
    unlink(path);
    rmdir(directory);
    CU_ASSERT_EQUAL_FATAL(back.n_maps, made.n_maps);
    for (int i = 0; i < made.n_maps; i++) {
        CU_ASSERT_STRING_EQUAL(back.maps[i], made.maps[i]);
        CU_ASSERT_EQUAL_FATAL(back.widths[i], made.widths[i]);
        CU_ASSERT(memcmp(back.ranges[i], made.ranges[i],
                         (size_t)made.widths[i] * sizeof(float)) == 0);
    }
    CU_ASSERT_STRING_EQUAL(back.precision_steps, made.precision_steps);
    CU_ASSERT_STRING_EQUAL(back.sha256, made.sha256);
    CU_ASSERT_STRING_EQUAL(back.source, made.source);
    CU_ASSERT_EQUAL(back.sample_documents, 5);
    CU_ASSERT(back.sample_min_cosine == made.sample_min_cosine);

    /* Taken into another store of the same weights: the same int8 model. */
    CU_ASSERT_FATAL(open_int8_encoder(&second, &second_options));
    tfenc_precision taken[16];
    int changed = -1;
    CU_ASSERT_EQUAL_FATAL(tfenc_calibration_to_model(&ctx, &back, path, weights, &second.plan,
                                                     second.store, taken, &changed), TFENC_OK);
    CU_ASSERT_EQUAL(changed, 0);
    CU_ASSERT(memcmp(taken, chosen, (size_t)first.plan.n_steps * sizeof *taken) == 0);
    CU_ASSERT_EQUAL(tfenc_weight_store_calibration_fix(&ctx, second.store, "[model] calibration x"),
                    TFENC_OK);
    owned_batch mine, theirs;
    CU_ASSERT_EQUAL(encoder_output(&first, options, chosen, &batches[1], &mine), TFENC_OK);
    CU_ASSERT_EQUAL(encoder_output(&second, second_options, taken, &batches[1], &theirs),
                    TFENC_OK);
    CU_ASSERT(memcmp(mine.x, theirs.x,
                     (size_t)mine.batch.rows * ENCODER_D * sizeof(float)) == 0);
    /* ...whose ranges matter: without them (all zero) the rows differ. */
    for (int i = 0; i < back.n_maps; i++)
        memset(back.ranges[i], 0, (size_t)back.widths[i] * sizeof(float));
    CU_ASSERT_EQUAL(tfenc_calibration_to_model(&ctx, &back, path, weights, &second.plan,
                                               second.store, taken, &changed), TFENC_OK);
    CU_ASSERT_EQUAL(encoder_output(&second, second_options, taken, &batches[1], &theirs),
                    TFENC_OK);
    CU_ASSERT(memcmp(mine.x, theirs.x,
                     (size_t)mine.batch.rows * ENCODER_D * sizeof(float)) != 0);
    release(&second);

    /* Other weights, another plan: refused naming the file. */
    CU_ASSERT_FATAL(open_int8_encoder(&second, &second_options));
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_calibration_to_model(&ctx, &made, "a.h5", "ff", &second.plan,
                                               second.store, taken, &changed), TFENC_ERR_CONFIG);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "[model] calibration a.h5: is of other "
                                                    "weights"));
    char *renamed = strstr(made.precision_steps, "enc.1.ffn");
    CU_ASSERT_PTR_NOT_NULL_FATAL(renamed);
    renamed[4] = '2';
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_calibration_to_model(&ctx, &made, "a.h5", weights, &second.plan,
                                               second.store, taken, &changed), TFENC_ERR_CONFIG);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "is of another plan: its step 6 is "
                                                    "enc.2.ffn, this job's is enc.1.ffn"));
    /* A fixed calibration without a map's ranges: the map is refused. */
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_weight_store_calibration_fix(&ctx, second.store, "[model] calibration "
                                                       "b.h5"), TFENC_OK);
    CU_ASSERT_EQUAL(encoder_output(&second, second_options, NULL, &batches[1], &theirs),
                    TFENC_ERR_CONFIG);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "[model] calibration b.h5: holds no input "
                                                    "ranges for the linear map /enc/0/"));
    release(&second);
    tfenc_int8_calibration_free(&made);
    tfenc_int8_calibration_free(&back);
    release(&first);
}

/* A further head (a classifier's scores beside the first head's mean
 * pooling) is judged with the first: its figure is reported, and a bar
 * the first head meets at int8 but the scores do not keeps steps out of
 * int8, where the gate of the first head alone keeps none. */
static void test_further_head_judged(void)
{
    composed c;
    tfenc_model_options options;
    CU_ASSERT_EQUAL_FATAL(
        encoder_open_with(&c, "int8",
                          "[mean]\ntype = pooling\nmode = mean\nhead = mean\n"
                          "[scores]\ntype = classifier\npooling = mean\ndense = false\n"
                          "scores = logits\nhead = scores\n",
                          &options),
        TFENC_OK);
    if (!precision_runs_here(TFENC_PRECISION_INT8)) {
        release(&c);
        return;
    }
    CU_ASSERT_EQUAL_FATAL(c.plan.n_extra_heads, 1);
    /* Three labels over the trunk's rows, weights of the encoder's scale. */
    float weight[3 * ENCODER_D], bias[3];
    for (int i = 0; i < 3 * ENCODER_D; i++)
        weight[i] = 0.125f * sinf((float)(i * 13 + 1));
    for (int i = 0; i < 3; i++)
        bias[i] = 0.1f * (float)i;
    const int64_t weight_dims[2] = {3, ENCODER_D}, bias_dims[1] = {3};
    CU_ASSERT_EQUAL_FATAL(
        tfenc_weight_store_add(&ctx, c.store, "/scores/out_weight", 2, weight_dims, weight),
        TFENC_OK);
    CU_ASSERT_EQUAL_FATAL(
        tfenc_weight_store_add(&ctx, c.store, "/scores/out_bias", 1, bias_dims, bias), TFENC_OK);
    owned_batch batches[2];
    tfenc_batch samples[2];
    two_batches(batches, samples);
    const tfenc_gate_head heads[1] = {{.name = "scores", .plan = &c.plan.extra_heads[0]}};
    tfenc_precision chosen[16];
    double values[2];
    int scores[2];
    tfenc_precision_report report = {.step_precision = chosen, .output_cosine = values,
                                      .output_scores = scores};
    /* A bar all int8 meets: each output's figure at all int8. */
    CU_ASSERT_EQUAL_FATAL(
        tfenc_precision_gate(&ctx, &options, samples, 2, 0.5, 0, heads, 1, &report), TFENC_OK);
    CU_ASSERT_EQUAL(report.n_fallbacks, 0);
    CU_ASSERT_EQUAL(scores[0], 0);
    CU_ASSERT_EQUAL(scores[1], 1);
    CU_ASSERT_EQUAL(report.sample_cosine, fmin(values[0], values[1]));
    const double first = values[0], further = values[1];
    printf("\n  at int8: the first head's min cosine %.6f, the scores' %.6f (cos of %.3g%%)\n",
           first, further, 100.0 * acos(fmin(further, 1.0)));
    /* The fixture's scores move more than the pooled rows' angle: the
     * case this test is about. */
    CU_ASSERT_FATAL(further < first && first < 1.0);
    /* The gate's bar (1 - (1 - min_cosine) / 2) halfway between them. */
    const double bar = (first + further) / 2.0, min_cosine = 1.0 - 2.0 * (1.0 - bar);
    tfenc_precision_report alone = {.step_precision = chosen};
    CU_ASSERT_EQUAL_FATAL(
        tfenc_precision_gate(&ctx, &options, samples, 2, min_cosine, 0, NULL, 0, &alone),
        TFENC_OK);
    CU_ASSERT_EQUAL(alone.n_fallbacks, 0);
    CU_ASSERT_EQUAL_FATAL(
        tfenc_precision_gate(&ctx, &options, samples, 2, min_cosine, 0, heads, 1, &report),
        TFENC_OK);
    printf("  bar %.6f: the first head alone keeps %d steps out of int8, with the scores %d "
           "(scores at %.6f)\n", bar, alone.n_fallbacks, report.n_fallbacks, values[1]);
    CU_ASSERT(report.n_fallbacks > 0);
    CU_ASSERT(values[1] >= bar);
    CU_ASSERT(report.sample_cosine >= bar);
    release(&c);
}

static const test_case gate_cases[] = {
    {"int8 accuracy gate", test_precision_gate},
    {"fewest fallbacks, confirmed on the whole sample", test_fewest_on_whole_sample},
    {"calibration recorded and taken again", test_calibration_recorded_and_taken},
    {"a further head judged with the first", test_further_head_judged},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"precision", NULL, NULL, gate_cases},
    {NULL, NULL, NULL, NULL}};
