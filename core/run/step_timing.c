/* Timing the model's steps on a sample (see run/step_timing.h): the
 * sample's activations carried from step to step, each step built alone,
 * run once untimed on a copy of the first batch (oneDNN compiles its
 * kernels and the workspace is touched on first use), then timed twice. */
#include "run/step_timing.h"
#include "base/aligned.h"
#include "base/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A second or two of products on one core (a job microbatch at most):
 * enough tokens to time, few enough that a dry run stays quick. */
#define TIMING_FLOPS 5e10
#define TIMING_MOST_TOKENS 2048

long tfenc_step_timing_tokens(double flops_per_token, long max_seq_len)
{
    double tokens = flops_per_token > 0 ? TIMING_FLOPS / flops_per_token : TIMING_MOST_TOKENS;
    if (tokens > TIMING_MOST_TOKENS)
        tokens = TIMING_MOST_TOKENS;
    return tokens < (double)max_seq_len ? max_seq_len : (long)tokens;
}

/* The sample's batches with activations of their own (the zeros the
 * first step reads), and one more for the warm-up runs. */
typedef struct activations {
    tfenc_batch *batches;
    int n;
    tfenc_batch scratch;
} activations;

static void activations_free(activations *a)
{
    for (int b = 0; a->batches != NULL && b < a->n; b++)
        tfenc_aligned_free(a->batches[b].x);
    free(a->batches);
    tfenc_aligned_free(a->scratch.x);
}

static float *zeros(int rows, int d_model)
{
    size_t bytes = (size_t)(rows > 0 ? rows : 1) * (size_t)d_model * sizeof(float);
    float *x = tfenc_aligned_alloc(bytes);
    if (x != NULL)
        memset(x, 0, bytes);
    return x;
}

static int activations_create(tfenc_context *ctx, const tfenc_gate_sample *sample, int d_model,
                              int max_tokens, activations *a)
{
    a->n = sample->n_batches;
    a->batches = calloc((size_t)a->n, sizeof *a->batches);
    if (a->batches == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "step timing: out of memory");
    int largest = 0;
    for (int b = 0; b < a->n; b++) {
        a->batches[b] = sample->batches[b];
        a->batches[b].d_model = d_model;
        /* Rows never outnumber the batch's tokens (pooling only drops them). */
        int rows = sample->batches[b].n_tokens < max_tokens ? sample->batches[b].n_tokens
                                                            : max_tokens;
        largest = rows > largest ? rows : largest;
        if ((a->batches[b].x = zeros(rows, d_model)) == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "step timing: out of memory");
    }
    a->scratch = a->batches[0];
    if ((a->scratch.x = zeros(largest, d_model)) == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "step timing: out of memory");
    return TFENC_OK;
}

/* Batch b copied into the scratch batch, which it returns. */
static tfenc_batch *copy_to_scratch(activations *a, int b)
{
    float *x = a->scratch.x;
    a->scratch = a->batches[b];
    a->scratch.x = x;
    memcpy(x, a->batches[b].x,
           (size_t)a->batches[b].rows * (size_t)a->batches[b].d_model * sizeof(float));
    return &a->scratch;
}

/* Step `model` over every batch, timed around its forward passes only
 * (wall and the process's CPU time): on copies (the batches keep their
 * input) or in place (they get its output, the next step's input). */
static int timed_pass(tfenc_context *ctx, tfenc_model *model, activations *a, int in_place,
                      double *seconds, double *cpu_seconds)
{
    *seconds = *cpu_seconds = 0.0;
    int status = TFENC_OK;
    for (int b = 0; status == TFENC_OK && b < a->n; b++) {
        tfenc_batch *batch = in_place ? &a->batches[b] : copy_to_scratch(a, b);
        const double started = tfenc_clock_seconds(), cpu_started = tfenc_clock_cpu_seconds();
        status = tfenc_model_forward(ctx, model, batch);
        *seconds += tfenc_clock_seconds() - started;
        *cpu_seconds += tfenc_clock_cpu_seconds() - cpu_started;
    }
    return status;
}

/* Step `step` alone: run once on a copy of the first batch, then timed
 * twice on every batch, on copies and in place, the faster counting: a
 * shared machine's other work only ever slows a pass (one of four dry
 * runs of all-MiniLM-L6-v2 in fp32 timed 24% slow when each step was
 * timed once); returns its seconds per sample token. */
/* The counts of step `step` now into *before (allocated), or NULL when its
 * layer keeps none. */
static int counters_before(tfenc_context *ctx, const tfenc_model *model, int step,
                           long long **before)
{
    const char *label;
    const long long *values;
    int n;
    *before = NULL;
    if (tfenc_model_step_counters(model, step, &label, &n, &values) != TFENC_OK)
        return TFENC_OK;
    *before = malloc((size_t)n * sizeof **before);
    if (*before == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "step timing: out of memory");
    memcpy(*before, values, (size_t)n * sizeof **before);
    return TFENC_OK;
}

/* "label: the counts since `before`" into note. */
static void write_note(const tfenc_model *model, int step, const long long *before, char *note)
{
    const char *label;
    const long long *values;
    int n;
    note[0] = '\0';
    if (before == NULL || tfenc_model_step_counters(model, step, &label, &n, &values) != TFENC_OK)
        return;
    size_t used = (size_t)snprintf(note, TFENC_STEP_NOTE_BYTES, "%s:", label);
    for (int i = 0; i < n && used < TFENC_STEP_NOTE_BYTES; i++)
        used += (size_t)snprintf(note + used, TFENC_STEP_NOTE_BYTES - used, " %lld",
                                 values[i] - before[i]);
    if (used >= TFENC_STEP_NOTE_BYTES)
        strcpy(note + TFENC_STEP_NOTE_BYTES - 4, "...");
}

static int time_step(tfenc_context *ctx, const tfenc_model_options *options, int step,
                     activations *a, int64_t tokens, double *seconds_per_token,
                     double *cpu_seconds_per_token, char *note)
{
    tfenc_model_options one = *options;
    one.first_step = step;
    one.end_step = step + 1;
    one.calibrate = 0;
    tfenc_model *model = NULL;
    int status = tfenc_model_create(ctx, &one, &model);
    if (status == TFENC_OK)
        status = tfenc_model_forward(ctx, model, copy_to_scratch(a, 0));
    double on_copies = 0.0, in_place = 0.0, cpu_on_copies = 0.0, cpu_in_place = 0.0;
    if (status == TFENC_OK)
        status = timed_pass(ctx, model, a, 0, &on_copies, &cpu_on_copies);
    /* The pass in place runs every sample batch once: its counts are the
     * sample's. */
    long long *before = NULL;
    if (status == TFENC_OK && note != NULL)
        status = counters_before(ctx, model, step, &before);
    if (status == TFENC_OK)
        status = timed_pass(ctx, model, a, 1, &in_place, &cpu_in_place);
    if (status == TFENC_OK && note != NULL)
        write_note(model, step, before, note);
    free(before);
    const double fastest = on_copies < in_place ? on_copies : in_place;
    const double least_cpu = cpu_on_copies < cpu_in_place ? cpu_on_copies : cpu_in_place;
    *seconds_per_token = fastest / (double)(tokens > 0 ? tokens : 1);
    *cpu_seconds_per_token = least_cpu / (double)(tokens > 0 ? tokens : 1);
    tfenc_model_destroy(model);
    return status;
}

int tfenc_step_timing_measure(tfenc_context *ctx, const tfenc_model_options *options,
                              const tfenc_gate_sample *sample, double *seconds_per_token)
{
    return tfenc_step_timing_measure_cpu(ctx, options, sample, seconds_per_token, NULL);
}

/* Wall and CPU time per step, and each step's note, each optional but the
 * first. */
static int measure(tfenc_context *ctx, const tfenc_model_options *options,
                   const tfenc_gate_sample *sample, double *seconds_per_token,
                   double *cpu_seconds_per_token, char *notes);

int tfenc_step_timing_measure_cpu(tfenc_context *ctx, const tfenc_model_options *options,
                                  const tfenc_gate_sample *sample, double *seconds_per_token,
                                  double *cpu_seconds_per_token)
{
    return measure(ctx, options, sample, seconds_per_token, cpu_seconds_per_token, NULL);
}

int tfenc_step_timing_measure_noting(tfenc_context *ctx, const tfenc_model_options *options,
                                     const tfenc_gate_sample *sample, double *seconds_per_token,
                                     char *notes)
{
    return measure(ctx, options, sample, seconds_per_token, NULL, notes);
}

static int measure(tfenc_context *ctx, const tfenc_model_options *options,
                   const tfenc_gate_sample *sample, double *seconds_per_token,
                   double *cpu_seconds_per_token, char *notes)
{
    if (sample->n_batches < 1)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "step timing: no sample batches");
    activations a = {0};
    int status = activations_create(ctx, sample, options->config->d_model,
                                    options->limits.max_tokens, &a);
    for (int i = options->first_step; status == TFENC_OK && i < options->end_step; i++) {
        double cpu = 0.0;
        status = time_step(ctx, options, i, &a, sample->n_tokens,
                           &seconds_per_token[i - options->first_step], &cpu,
                           notes != NULL ? notes + (size_t)(i - options->first_step) *
                                                       TFENC_STEP_NOTE_BYTES
                                         : NULL);
        if (cpu_seconds_per_token != NULL)
            cpu_seconds_per_token[i - options->first_step] = cpu;
    }
    activations_free(&a);
    return status;
}
