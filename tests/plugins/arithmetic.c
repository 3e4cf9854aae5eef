/* Test layers with exactly predictable outputs, so composition (order,
 * residuals, pre/post norm, weight groups) can be checked by hand:
 *   scale:  x *= factor           (key factor, default 2); inside a residual
 *           connection whose skip is its input it adds that input itself
 *           (TFENC_EXTENSION_ADDS_INPUT), plus `adding_marker` (default 0),
 *           so that a test sees which of the host's paths ran
 *   add:    x += offset + bias[j] (key offset; optional dataset "bias" [d])
 *   fail:   forward fails when the batch holds token id `on_token`
 *           (to test error propagation across ranks and layers)
 *   pause:  leaves x alone and sleeps `milliseconds` per microbatch plus
 *           `microseconds_per_token` per token, so that a test can stop a
 *           job part-way on any machine speed, or give ranks known speeds;
 *           the environment variable TFENC_TEST_SLOWDOWN (a factor, set
 *           for one rank by the launcher) makes a rank that much slower;
 *           `create_milliseconds` sleeps in create, between the loads of
 *           the layers before it and after it (to change a file meanwhile)
 *   overflow: x *= 1e38 twice over in the sequences that hold token id
 *           `on_token` (per-token batches), as finite but huge weights
 *           would: the host must stop before writing a non-finite row
 *   sparse_overflow: a sparse head over the model's vocabulary: pools each
 *           sequence to one (zero) row and hands over a sparse row of 1.0
 *           at each of its distinct token ids, except `on_token`'s column,
 *           which gets 1e38 twice over (nan = true: that minus itself, a
 *           NaN): the host must refuse it as it refuses dense rows */
#include "tfenc/plugin.h"

#include <stdint.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef struct arithmetic {
    int kind; /* 0 scale, 1 add, 2 fail, 3 pause, 4 overflow, 5 sparse_overflow */
    double factor;
    double adding_marker; /* scale: added by forward_adding_input only */
    double offset;
    long on_token;
    long milliseconds;
    long microseconds_per_token;
    double slowdown;
    const float *bias; /* [d_model] or NULL */
    int vocab_size;    /* sparse_overflow: the row's columns */
    int nan;           /* sparse_overflow: NaN instead of infinity */
    uint8_t *seen;     /* sparse_overflow: [vocab_size] a sequence's token ids */
    int32_t *indices;  /* [vocab_size] the row handed over */
    float *values;
} arithmetic;

static int create_kind(tfenc_context *ctx, const tfenc_layer_init *init, void **instance, int kind)
{
    arithmetic *layer = calloc(1, sizeof *layer);
    if (layer == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    layer->kind = kind;
    int status = TFENC_OK;
    if (kind == 0)
        status = tfenc_param_float(init->params, "factor", 2.0, &layer->factor);
    if (kind == 0 && status == TFENC_OK)
        status = tfenc_param_float(init->params, "adding_marker", 0.0, &layer->adding_marker);
    if (kind == 1) {
        status = tfenc_param_float(init->params, "offset", 0.0, &layer->offset);
        if (status == TFENC_OK && tfenc_weight_exists(init->weights, "bias")) {
            int64_t dims[1] = {init->model.d_model};
            status = tfenc_weight_load(init->weights, "bias", 1, dims, &layer->bias);
        }
    }
    if (kind == 2 || kind == 4 || kind == 5)
        status = tfenc_param_int(init->params, "on_token", -1, &layer->on_token);
    if (kind == 5 && status == TFENC_OK) {
        status = tfenc_param_bool(init->params, "nan", 0, &layer->nan);
        layer->vocab_size = init->model.vocab_size;
        layer->seen = calloc((size_t)layer->vocab_size + 1, 1);
        layer->indices = malloc(((size_t)layer->vocab_size + 1) * sizeof *layer->indices);
        layer->values = malloc(((size_t)layer->vocab_size + 1) * sizeof *layer->values);
        if (status == TFENC_OK &&
            (layer->seen == NULL || layer->indices == NULL || layer->values == NULL))
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    }
    if (kind == 3) {
        status = tfenc_param_int(init->params, "milliseconds", 10, &layer->milliseconds);
        if (status == TFENC_OK)
            status = tfenc_param_int(init->params, "microseconds_per_token", 0,
                                     &layer->microseconds_per_token);
        long create_milliseconds = 0;
        if (status == TFENC_OK)
            status = tfenc_param_int(init->params, "create_milliseconds", 0,
                                     &create_milliseconds);
        struct timespec wait = {.tv_sec = (time_t)(create_milliseconds / 1000),
                                .tv_nsec = (create_milliseconds % 1000) * 1000000L};
        /* A test waits for every rank to be inside this pause (the
         * tokenizer has read its vocabulary by then): each create() that
         * pauses appends its process id to TFENC_TEST_CREATE_MARKER. */
        const char *marker = getenv("TFENC_TEST_CREATE_MARKER");
        if (status == TFENC_OK && create_milliseconds > 0 && marker != NULL) {
            FILE *file = fopen(marker, "a");
            if (file != NULL) {
                fprintf(file, "%ld\n", (long)getpid());
                fclose(file);
            }
        }
        if (status == TFENC_OK && create_milliseconds > 0)
            nanosleep(&wait, NULL);
        const char *slowdown = getenv("TFENC_TEST_SLOWDOWN");
        layer->slowdown = slowdown != NULL ? atof(slowdown) : 1.0;
        if (!(layer->slowdown > 0))
            layer->slowdown = 1.0;
    }
    if (status != TFENC_OK) {
        free(layer->seen);
        free(layer->indices);
        free(layer->values);
        free(layer);
        return status;
    }
    *instance = layer;
    return TFENC_OK;
}

static int create_scale(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    return create_kind(ctx, init, instance, 0);
}

static int create_add(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    return create_kind(ctx, init, instance, 1);
}

static int create_fail(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    return create_kind(ctx, init, instance, 2);
}

static int create_pause(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    return create_kind(ctx, init, instance, 3);
}

static int create_overflow(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    return create_kind(ctx, init, instance, 4);
}

static int create_sparse_overflow(tfenc_context *ctx, const tfenc_layer_init *init,
                                  void **instance)
{
    return create_kind(ctx, init, instance, 5);
}

static int sparse_rows(arithmetic *layer, tfenc_context *ctx, tfenc_batch *batch)
{
    const volatile float huge = 1e38f; /* volatile: computed at run time, as a model would */
    for (int s = 0; s < batch->n_seq; s++) {
        for (int t = batch->seq_start[s]; t < batch->seq_start[s + 1]; t++)
            if (batch->token_ids[t] >= 0 && batch->token_ids[t] < layer->vocab_size)
                layer->seen[batch->token_ids[t]] = 1;
        int n = 0;
        for (int id = 0; id < layer->vocab_size; id++) {
            if (!layer->seen[id])
                continue;
            layer->seen[id] = 0;
            float value = 1.0f;
            if (id == layer->on_token) {
                value = huge * huge;
                if (layer->nan)
                    value -= value;
            }
            layer->indices[n] = id;
            layer->values[n++] = value;
        }
        int status = tfenc_sparse_row(ctx, s, n, layer->indices, layer->values);
        if (status != TFENC_OK)
            return status;
    }
    memset(batch->x, 0, (size_t)batch->n_seq * (size_t)batch->d_model * sizeof *batch->x);
    batch->rows = batch->n_seq;
    return TFENC_OK;
}

static int sparse_output(const void *instance, tfenc_layer_output *output)
{
    const arithmetic *layer = instance;
    output->kind = TFENC_LAYER_OUTPUT_SPARSE;
    output->width = layer->vocab_size;
    output->labels = NULL;
    return TFENC_OK;
}

static int forward(void *instance, tfenc_context *ctx, tfenc_batch *batch, void *workspace)
{
    arithmetic *layer = instance;
    const int d = batch->d_model;
    if (layer->kind == 3) {
        double microseconds = layer->slowdown *
                              (1000.0 * (double)layer->milliseconds +
                               (double)layer->microseconds_per_token * batch->n_tokens);
        long long nanoseconds = (long long)(1000.0 * microseconds);
        struct timespec pause = {.tv_sec = (time_t)(nanoseconds / 1000000000LL),
                                 .tv_nsec = (long)(nanoseconds % 1000000000LL)};
        nanosleep(&pause, NULL);
        return TFENC_OK;
    }
    if (layer->kind == 5)
        return sparse_rows(layer, ctx, batch);
    if (layer->kind == 2) {
        for (int t = 0; t < batch->n_tokens; t++)
            if (batch->token_ids[t] == layer->on_token)
                return tfenc_error(ctx, TFENC_ERR_INPUT, "token %ld seen: failing as asked",
                                   layer->on_token);
        return TFENC_OK;
    }
    if (layer->kind == 4) {
        for (int s = 0; s < batch->n_seq && batch->rows == batch->n_tokens; s++) {
            int hit = 0;
            for (int t = batch->seq_start[s]; t < batch->seq_start[s + 1]; t++)
                hit |= batch->token_ids[t] == layer->on_token;
            for (int t = batch->seq_start[s]; hit && t < batch->seq_start[s + 1]; t++)
                for (int j = 0; j < d; j++)
                    batch->x[(size_t)t * d + j] = batch->x[(size_t)t * d + j] * 1e38f * 1e38f;
        }
        return TFENC_OK;
    }
    for (int r = 0; r < batch->rows; r++)
        for (int j = 0; j < d; j++) {
            float *value = &batch->x[(size_t)r * d + j];
            if (layer->kind == 0)
                *value = (float)(*value * layer->factor);
            else
                *value = (float)(*value + layer->offset + (layer->bias ? layer->bias[j] : 0.0f));
        }
    return TFENC_OK;
}

/* scale's x = x + x * factor (+ adding_marker), the add as the host makes it. */
static int forward_adding_input(void *instance, tfenc_context *ctx, tfenc_batch *batch,
                                void *workspace)
{
    const arithmetic *layer = instance;
    const size_t values = (size_t)batch->rows * (size_t)batch->d_model;
    for (size_t i = 0; i < values; i++) {
        const float scaled = (float)(batch->x[i] * layer->factor);
        batch->x[i] = scaled + batch->x[i];
        if (layer->adding_marker != 0.0)
            batch->x[i] += (float)layer->adding_marker;
    }
    return TFENC_OK;
}

static const void *scale_extension(const char *uri)
{
    static const tfenc_forward_adding_input adds_input = {sizeof adds_input,
                                                          forward_adding_input};
    return strcmp(uri, TFENC_EXTENSION_ADDS_INPUT) == 0 ? &adds_input : NULL;
}

static void destroy(void *instance)
{
    arithmetic *layer = instance;
    free(layer->seen);
    free(layer->indices);
    free(layer->values);
    free(layer);
}

TFENC_PLUGIN_TYPES("scale add fail pause overflow sparse_overflow");

static const tfenc_layer_descriptor layers[] = {
    {TFENC_DESCRIPTOR_INIT, .type = "scale", .description = "x *= factor (test)",
     .create = create_scale, .forward = forward, .destroy = destroy,
     .extension = scale_extension},
    {TFENC_DESCRIPTOR_INIT, .type = "add", .description = "x += offset + bias (test)",
     .create = create_add, .forward = forward, .destroy = destroy},
    {TFENC_DESCRIPTOR_INIT, .type = "fail", .description = "fails on a chosen token (test)",
     .create = create_fail, .forward = forward, .destroy = destroy},
    {TFENC_DESCRIPTOR_INIT, .type = "pause", .description = "sleeps per microbatch (test)",
     .create = create_pause, .forward = forward, .destroy = destroy},
    {TFENC_DESCRIPTOR_INIT, .type = "overflow", .description = "overflows on a chosen token (test)",
     .create = create_overflow, .forward = forward, .destroy = destroy},
    {TFENC_DESCRIPTOR_INIT, .type = "sparse_overflow",
     .description = "sparse rows, non-finite on a chosen token (test)",
     .key_masking = TFENC_KEY_MASKING_APPLIED, .create = create_sparse_overflow,
     .forward = forward, .destroy = destroy, .output = sparse_output},
};

TFENC_EXPORT const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index);

const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index)
{
    return index < sizeof layers / sizeof *layers ? &layers[index] : NULL;
}
