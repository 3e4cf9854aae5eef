/* The accuracy gate that decides, on a sample of the corpus, which steps of
 * an int8 model run in int8 and which stay in bf16 (see run/accuracy_gate.h). */
#include "run/accuracy_gate.h"
#include "base/aligned.h"
#include "base/context.h"
#include "matrix/matrix.h"
#include "model/model.h"

#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One copy of the sample's activations: the batches as the caller gave
 * them, each with its own x. */
typedef struct stream {
    tfenc_batch *batches;
    int n;
} stream;

static int stream_create(tfenc_context *ctx, stream *s, const tfenc_batch *samples, int n,
                         int max_tokens, int d_model)
{
    s->n = n;
    s->batches = calloc((size_t)n, sizeof *s->batches);
    if (s->batches == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "accuracy gate: out of memory");
    for (int b = 0; b < n; b++) {
        s->batches[b] = samples[b];
        s->batches[b].d_model = d_model;
        /* Rows never outnumber the batch's tokens (pooling only drops
         * them): the sample's activations take no more than they use. */
        int rows = samples[b].n_tokens < max_tokens ? samples[b].n_tokens : max_tokens;
        s->batches[b].x = tfenc_aligned_alloc((size_t)(rows > 0 ? rows : 1) * (size_t)d_model *
                                              sizeof(float));
        if (s->batches[b].x == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "accuracy gate: out of memory");
    }
    return TFENC_OK;
}

static void stream_destroy(stream *s)
{
    for (int b = 0; s->batches != NULL && b < s->n; b++)
        tfenc_aligned_free(s->batches[b].x);
    free(s->batches);
    s->batches = NULL;
}

/* Back to the model's input: zeros, one row per token. */
static void stream_reset(stream *s, const tfenc_batch *samples)
{
    for (int b = 0; b < s->n; b++) {
        memset(s->batches[b].x, 0,
               (size_t)samples[b].n_tokens * (size_t)s->batches[b].d_model * sizeof(float));
        s->batches[b].rows = samples[b].n_tokens;
    }
}

static void stream_copy(stream *to, const stream *from)
{
    for (int b = 0; b < to->n; b++) {
        memcpy(to->batches[b].x, from->batches[b].x,
               (size_t)from->batches[b].rows * (size_t)from->batches[b].d_model * sizeof(float));
        to->batches[b].rows = from->batches[b].rows;
    }
}

/* The smallest cosine between matching rows of two streams. Two zero rows
 * agree (cosine 1); a zero row against a non-zero one does not (0). */
static double stream_cosine(const stream *a, const stream *b)
{
    double lowest = 1.0;
    for (int i = 0; i < a->n; i++) {
        const tfenc_batch *x = &a->batches[i], *y = &b->batches[i];
        if (x->rows != y->rows)
            return 0.0;
        for (int r = 0; r < x->rows; r++) {
            const float *u = x->x + (size_t)r * x->d_model, *v = y->x + (size_t)r * y->d_model;
            double dot = 0.0, uu = 0.0, vv = 0.0;
            for (int j = 0; j < x->d_model; j++) {
                dot += (double)u[j] * v[j];
                uu += (double)u[j] * u[j];
                vv += (double)v[j] * v[j];
            }
            double cosine = uu == 0.0 && vv == 0.0 ? 1.0
                            : uu == 0.0 || vv == 0.0 ? 0.0
                                                     : dot / sqrt(uu * vv);
            if (!(cosine >= lowest)) /* NaN counts as the worst */
                lowest = isnan(cosine) ? -1.0 : cosine;
        }
    }
    return lowest;
}

/* Builds step `step` alone at `precision` and runs every batch of `s`
 * through it. */
static int run_step(tfenc_context *ctx, const tfenc_model_options *options, tfenc_precision *chosen,
                    int step, tfenc_precision precision, stream *s)
{
    tfenc_model_options one = *options;
    one.first_step = step;
    one.end_step = step + 1;
    /* The fp32 reference calibrates the int8 maps' input smoothing. */
    one.calibrate = precision == TFENC_PRECISION_FP32;
    tfenc_precision kept = chosen[step];
    chosen[step] = precision;
    one.step_precision = chosen;
    tfenc_model *model = NULL;
    int status = tfenc_model_create(ctx, &one, &model);
    chosen[step] = kept;
    for (int b = 0; status == TFENC_OK && b < s->n; b++)
        status = tfenc_model_forward(ctx, model, &s->batches[b]);
    tfenc_model_destroy(model);
    return status;
}

/* The whole model at precisions `chosen`, step by step, on the sample. */
static int run_model(tfenc_context *ctx, const tfenc_model_options *options,
                     tfenc_precision *chosen, const tfenc_batch *samples, stream *s)
{
    stream_reset(s, samples);
    int status = TFENC_OK;
    for (int i = 0; status == TFENC_OK && i < options->plan->n_steps; i++)
        status = run_step(ctx, options, chosen, i, chosen[i], s);
    return status;
}

/* Each step alone at `precision` against fp32 on fp32 inputs; `reference`
 * ends holding the fp32 model's output. */
static int step_cosines(tfenc_context *ctx, const tfenc_model_options *options,
                        tfenc_precision *chosen, const tfenc_batch *samples,
                        tfenc_precision precision, stream *reference, stream *tested,
                        double *cosines)
{
    stream_reset(reference, samples);
    int status = TFENC_OK;
    for (int i = 0; status == TFENC_OK && i < options->plan->n_steps; i++) {
        stream_copy(tested, reference);
        status = run_step(ctx, options, chosen, i, TFENC_PRECISION_FP32, reference);
        if (status == TFENC_OK)
            status = run_step(ctx, options, chosen, i, precision, tested);
        if (status == TFENC_OK)
            cosines[i] = stream_cosine(reference, tested);
    }
    return status;
}

/* The least accurate step by `cosines`, or -1 when every one is exact. */
static int worst_step(const double *cosines, int n)
{
    int worst = -1;
    for (int i = 0; i < n; i++)
        if (cosines[i] < 1.0 && (worst < 0 || cosines[i] < cosines[worst]))
            worst = i;
    return worst;
}

/* int8 with the `k` least accurate int8 steps (order[0..k)) in bf16 (fp32
 * where bf16 does not run). */
static void assign(tfenc_precision *chosen, int n_steps, const int *order, int k)
{
    for (int i = 0; i < n_steps; i++)
        chosen[i] = TFENC_PRECISION_INT8;
    for (int i = 0; i < k; i++)
        chosen[order[i]] = tfenc_matrix_int8_fallback();
}

/* Orders step indices by their cosine, least accurate first (a model has
 * tens of steps: insertion sort). */
static void sort_by_cosine(int *order, int n, const double *cosines)
{
    for (int i = 1; i < n; i++) {
        int step = order[i], j = i;
        for (; j > 0 && cosines[order[j - 1]] > cosines[step]; j--)
            order[j] = order[j - 1];
        order[j] = step;
    }
}

int tfenc_precision_gate(tfenc_context *ctx, const tfenc_model_options *options,
                         const tfenc_batch *samples, int n_samples, double min_cosine,
                         tfenc_precision_report *report)
{
    const int n_steps = options->plan->n_steps;
    const tfenc_precision requested = options->config->precision;
    tfenc_precision *chosen = report->step_precision;
    for (int i = 0; i < n_steps; i++)
        chosen[i] = requested;
    report->sample_cosine = 1.0;
    report->n_fallbacks = 0;
    report->worst_step = -1;
    if (report->step_cosine != NULL)
        for (int i = 0; i < n_steps; i++)
            report->step_cosine[i] = 1.0;
    if (requested == TFENC_PRECISION_FP32)
        return TFENC_OK;
    if (n_samples < 1)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "accuracy gate: no sample batches");

    stream reference = {0}, tested = {0};
    double *cosines = calloc((size_t)n_steps, sizeof *cosines);
    int *order = calloc((size_t)n_steps, sizeof *order);
    int status = cosines == NULL || order == NULL
                     ? tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "accuracy gate: out of memory")
                     : TFENC_OK;
    const int max_tokens = options->limits.max_tokens, d = options->config->d_model;
    if (status == TFENC_OK)
        status = stream_create(ctx, &reference, samples, n_samples, max_tokens, d);
    if (status == TFENC_OK)
        status = stream_create(ctx, &tested, samples, n_samples, max_tokens, d);
    if (status == TFENC_OK)
        status = step_cosines(ctx, options, chosen, samples, requested, &reference, &tested,
                              cosines);
    /* reference now holds the fp32 model's output. */
    if (status == TFENC_OK) {
        if (report->step_cosine != NULL)
            memcpy(report->step_cosine, cosines, (size_t)n_steps * sizeof *cosines);
        report->worst_step = worst_step(cosines, n_steps);
        status = run_model(ctx, options, chosen, samples, &tested);
    }
    double sample_cosine = status == TFENC_OK ? stream_cosine(&reference, &tested) : 0.0;
    int refuse = 0;
    double refused_cosine = 0.0;
    /* A corpus holds documents less accurate than its sample's worst: the
     * sample must meet the bar with half the error to spare (the figures
     * that set the margin are in docs/performance.md, "int8 accuracy"). */
    const double bar = 1.0 - (1.0 - min_cosine) / 2.0;
    if (status == TFENC_OK && sample_cosine < bar) {
        if (requested == TFENC_PRECISION_INT8) {
            /* Candidates for bf16: the int8 steps that are not exact,
             * least accurate first. */
            int n_candidates = 0;
            for (int i = 0; i < n_steps; i++)
                if (cosines[i] < 1.0)
                    order[n_candidates++] = i;
            sort_by_cosine(order, n_candidates, cosines);
            assign(chosen, n_steps, order, n_candidates);
            status = run_model(ctx, options, chosen, samples, &tested);
            double all_bf16 = status == TFENC_OK ? stream_cosine(&reference, &tested) : 0.0;
            if (status == TFENC_OK && all_bf16 < bar) {
                refuse = 1;
                sample_cosine = all_bf16;
            } else if (status == TFENC_OK) {
                /* The fewest steps in bf16 that meet the bar: bisection over
                 * k, with k = 0 known to fail and k = n_candidates to pass.
                 * The first guess comes from the steps' errors adding up
                 * (1 - cosine of the model ~ the sum over its int8 steps),
                 * which is close enough that a pass or two confirm it. */
                int low = 0, high = n_candidates;
                double high_cosine = all_bf16;
                double total = 0.0;
                for (int i = 0; i < n_candidates; i++)
                    total += 1.0 - cosines[order[i]];
                double left = total, int8_error = (1.0 - sample_cosine) - (1.0 - all_bf16);
                int guess = 0;
                while (guess < n_candidates && total > 0.0 &&
                       (1.0 - all_bf16) + int8_error * left / total > 1.0 - bar) {
                    left -= 1.0 - cosines[order[guess]];
                    guess++;
                }
                /* The guess, then its neighbour on the side of the answer,
                 * then plain bisection if the guess was far off. */
                for (int probes = 0; status == TFENC_OK && high - low > 1; probes++) {
                    int middle = probes < 2 && guess > low && guess < high ? guess
                                                                           : (low + high) / 2;
                    assign(chosen, n_steps, order, middle);
                    status = run_model(ctx, options, chosen, samples, &tested);
                    double cosine = status == TFENC_OK ? stream_cosine(&reference, &tested) : 0.0;
                    if (cosine >= bar) {
                        high = middle;
                        high_cosine = cosine;
                        guess = middle - 1;
                    } else {
                        low = middle;
                        guess = middle + 1;
                    }
                }
                assign(chosen, n_steps, order, high);
                report->n_fallbacks = high;
                sample_cosine = high_cosine;
            }
            if (status == TFENC_OK && refuse) {
                /* Name the layer that bf16 itself serves worst. */
                status = step_cosines(ctx, options, chosen, samples,
                                      tfenc_matrix_int8_fallback(), &reference, &tested, cosines);
                int worst = worst_step(cosines, n_steps);
                report->worst_step = worst;
                refused_cosine = worst >= 0 ? cosines[worst] : 1.0;
            }
        } else {
            refuse = 1;
            refused_cosine = report->worst_step >= 0 ? cosines[report->worst_step] : 1.0;
        }
    }
    report->sample_cosine = sample_cosine;
    if (status == TFENC_OK && refuse) {
        const char *name =
            report->worst_step >= 0 ? options->plan->steps[report->worst_step].name : "(none)";
        status = tfenc_error(
            ctx, TFENC_ERR_CONFIG,
            "precision = %s: on the corpus sample the output's min cosine to fp32 is %.8f, below "
            "%.8f (min_cosine = %.8f with half its error to spare)%s; the least accurate layer "
            "is %s (cosine %.8f in %s alone)",
            tfenc_precision_names[requested], sample_cosine, bar, min_cosine,
            requested == TFENC_PRECISION_INT8 ? " even with every layer out of int8" : "", name,
            refused_cosine,
            tfenc_precision_names[requested == TFENC_PRECISION_INT8 ? tfenc_matrix_int8_fallback()
                                                                    : requested]);
    }
    stream_destroy(&reference);
    stream_destroy(&tested);
    free(cosines);
    free(order);
    malloc_trim(0); /* the sample's activations and the steps built for it */
    return status;
}
