/* An int8 job's calibration between the model and the file
 * (run/calibration.h). */
#include "run/calibration.h"
#include "base/context.h"
#include "matrix/matrix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tfenc_calibration_from_model(tfenc_context *ctx, const tfenc_weight_store *store,
                                 const tfenc_model_plan *plan,
                                 const tfenc_precision *step_precision,
                                 tfenc_int8_calibration *calibration)
{
    int status = TFENC_OK;
    const char *key;
    int in;
    const float *range;
    for (int i = 0; status == TFENC_OK &&
                    tfenc_weight_store_calibration_entry(store, i, &key, &in, &range);
         i++)
        status = tfenc_int8_calibration_add_map(ctx, calibration, key, in, range);
    size_t size = 1;
    for (int i = 0; i < plan->n_steps; i++)
        size += strlen(plan->steps[i].name) + 8;
    if (status == TFENC_OK && (calibration->precision_steps = calloc(size, 1)) == NULL)
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    for (int i = 0, used = 0; status == TFENC_OK && i < plan->n_steps; i++)
        used += snprintf(calibration->precision_steps + used, size - (size_t)used, "%s %s\n",
                         plan->steps[i].name, tfenc_precision_names[step_precision[i]]);
    return status;
}

/* Step `index` of a recorded "NAME PRECISION\n..." list: its name's
 * length and its precision; 0 past the last line. */
static int recorded_step(const char *steps, int index, const char **name, int *length,
                         tfenc_precision *precision)
{
    const char *line = steps;
    for (int i = 0; i < index && line != NULL; i++) {
        const char *next = strchr(line, '\n');
        line = next != NULL ? next + 1 : NULL;
    }
    const char *end = line != NULL ? strchr(line, '\n') : NULL;
    if (end == NULL)
        return 0;
    const char *space = end;
    while (space > line && space[-1] != ' ')
        space--;
    *name = line;
    *length = space > line ? (int)(space - line) - 1 : 0;
    *precision = TFENC_PRECISION_FP32;
    for (int p = 0; p < TFENC_PRECISION_COUNT; p++)
        if ((size_t)(end - space) == strlen(tfenc_precision_names[p]) &&
            strncmp(space, tfenc_precision_names[p], (size_t)(end - space)) == 0)
            *precision = (tfenc_precision)p;
    return 1;
}

/* The recorded steps are this plan's, by name and in order. */
static int same_plan(tfenc_context *ctx, const tfenc_int8_calibration *calibration,
                     const char *path, const tfenc_model_plan *plan)
{
    int recorded = 0;
    const char *name;
    int length;
    tfenc_precision precision;
    while (recorded_step(calibration->precision_steps, recorded, &name, &length, &precision))
        recorded++;
    if (recorded != plan->n_steps)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "[model] calibration %s: is of another plan: %d steps, this job's "
                           "model has %d", path, recorded, plan->n_steps);
    for (int i = 0; i < plan->n_steps; i++) {
        recorded_step(calibration->precision_steps, i, &name, &length, &precision);
        if ((size_t)length != strlen(plan->steps[i].name) ||
            strncmp(name, plan->steps[i].name, (size_t)length) != 0)
            return tfenc_error(ctx, TFENC_ERR_CONFIG,
                               "[model] calibration %s: is of another plan: its step %d is %.*s, "
                               "this job's is %s", path, i + 1, length, name,
                               plan->steps[i].name);
    }
    return TFENC_OK;
}

/* Whether `name` is one of the comma-separated `names`. */
static int listed(const char *names, const char *name)
{
    const size_t length = strlen(name);
    for (const char *p = names; p != NULL && *p != '\0';) {
        const char *comma = strchr(p, ',');
        const size_t n = comma != NULL ? (size_t)(comma - p) : strlen(p);
        if (n == length && strncmp(p, name, n) == 0)
            return 1;
        p = comma != NULL ? comma + 1 : NULL;
    }
    return 0;
}

/* A job of several heads takes a calibration whose gate judged each of
 * its further heads: one judged by the first head's output alone can
 * leave another head's off by more than min_cosine allows (a classifier's
 * scores over the same trunk: tests/pipeline/several_outputs.sh). */
static int judged_heads(tfenc_context *ctx, const tfenc_int8_calibration *calibration,
                        const char *path, const tfenc_model_plan *plan)
{
    for (int i = 0; i < plan->n_extra_heads; i++)
        if (!listed(calibration->heads, plan->extra_head_names[i]))
            return tfenc_error(ctx, TFENC_ERR_CONFIG,
                               "[model] calibration %s: its accuracy gate judged the output of "
                               "head%s %s only, not this job's head %s: run the job without "
                               "[model] calibration (its gate judges every head), or take the "
                               "calibration of a job with these heads",
                               path, calibration->heads != NULL ? "s" : "",
                               calibration->heads != NULL ? calibration->heads
                                                          : plan->first_head,
                               plan->extra_head_names[i]);
    return TFENC_OK;
}

int tfenc_calibration_to_model(tfenc_context *ctx, const tfenc_int8_calibration *calibration,
                               const char *path, const char *weights_sha256,
                               const tfenc_model_plan *plan, tfenc_weight_store *store,
                               tfenc_precision *step_precision, int *changed)
{
    *changed = 0;
    /* With layers' weights_files the digest covers them too (run.c). */
    int heads = 0;
    for (int i = 0; i < tfenc_model_plan_count_every_step(plan); i++)
        heads |= tfenc_model_plan_every_step(plan, i)->weights_file != NULL;
    if (strcmp(calibration->weights_sha256, weights_sha256) != 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "[model] calibration %s: is of other weights (its weights_sha256 is "
                           "%.12s..., this job's %s%s is %.12s...)", path,
                           calibration->weights_sha256, tfenc_weight_store_name(store),
                           heads ? " with its layers' weights_files" : "", weights_sha256);
    int status = same_plan(ctx, calibration, path, plan);
    if (status == TFENC_OK)
        status = judged_heads(ctx, calibration, path, plan);
    const tfenc_precision fallback = tfenc_matrix_int8_fallback();
    for (int i = 0; status == TFENC_OK && i < plan->n_steps; i++) {
        const char *name;
        int length;
        tfenc_precision recorded;
        recorded_step(calibration->precision_steps, i, &name, &length, &recorded);
        step_precision[i] = recorded == TFENC_PRECISION_BF16 ? fallback : recorded;
        *changed += step_precision[i] != recorded;
    }
    for (int i = 0; status == TFENC_OK && i < calibration->n_maps; i++)
        status = tfenc_weight_store_calibration_set(ctx, store, calibration->maps[i],
                                                    calibration->widths[i],
                                                    calibration->ranges[i]);
    return status;
}
