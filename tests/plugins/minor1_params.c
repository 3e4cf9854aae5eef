/* A plugin as an ABI 1.1 build produced it: descriptor minor 1 and a
 * declared parameter table whose entries have the four fields of 1.1
 * (name, type, default, help), shorter than today's. The host must read
 * that table with its own stride and run the plugin as before: layer type
 * `minor1_scale` multiplies x by `factor` (float, default 2) `times` times
 * (int, default 1), so that a test sees both values arrive.
 * The 1.1 entry layout is spelt out here, since this tree's header is 1.2. */
#include "tfenc/plugin.h"

#include <stdlib.h>

typedef struct param_info_1_1 {
    const char *name;
    tfenc_param_type type;
    const char *default_value;
    const char *help;
} param_info_1_1;

typedef struct minor1_scale {
    float factor;
    int d_model;
} minor1_scale;

static int create(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    double factor;
    long times;
    int status = tfenc_param_float(init->params, "factor", 2.0, &factor);
    if (status == TFENC_OK)
        status = tfenc_param_int_range(init->params, "times", 1, 0, 8, &times);
    if (status != TFENC_OK)
        return status;
    minor1_scale *layer = malloc(sizeof *layer);
    if (layer == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "minor1_scale: out of memory");
    layer->factor = 1.0f;
    for (long i = 0; i < times; i++)
        layer->factor *= (float)factor;
    layer->d_model = init->model.d_model;
    *instance = layer;
    return TFENC_OK;
}

static int forward(void *instance, tfenc_context *ctx, tfenc_batch *batch, void *workspace)
{
    const minor1_scale *layer = instance;
    (void)ctx, (void)workspace;
    for (size_t i = 0; i < (size_t)batch->rows * (size_t)layer->d_model; i++)
        batch->x[i] *= layer->factor;
    return TFENC_OK;
}

static void destroy(void *instance)
{
    free(instance);
}

static const param_info_1_1 keys[] = {
    {"factor", TFENC_PARAM_FLOAT, "2", "multiplies x"},
    {"times", TFENC_PARAM_INT, "1", "how many times, 0..8"},
    {NULL, 0, NULL, NULL},
};

TFENC_PLUGIN_TYPES("minor1_scale");

static const tfenc_layer_descriptor layer = {
    .abi_major = 1,
    .abi_minor = 1,
    .struct_size = sizeof(tfenc_layer_descriptor), /* 1.2 appended no descriptor field */
    .type = "minor1_scale",
    .description = "x *= factor^times, built against ABI 1.1",
    .create = create,
    .forward = forward,
    .destroy = destroy,
    .params = (const tfenc_param_info *)(const void *)keys,
};

TFENC_EXPORT const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index);

TFENC_EXPORT const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index)
{
    return index == 0 ? &layer : NULL;
}
