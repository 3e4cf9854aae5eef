/* Layer type `sinusoidal`: adds the fixed sine/cosine position encoding of
 * the original Transformer (and of the PyTorch tutorial's PositionalEncoding):
 *
 *   x[t][2i]   += sin(pos / base^(2i/d))
 *   x[t][2i+1] += cos(pos / base^(2i/d))
 *
 * where pos is the token's position inside its sequence, from 0.
 *
 * Job keys: sinusoidal_params at the end of this file (base, the wavelength
 * base; --list-plugins and docs/layers.md show it).
 *
 * Weights: none. The table covers [model] max_positions positions (or the
 * longest sequence the run allows when max_positions is 0); a later position
 * fails forward() with TFENC_ERR_INPUT. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"

typedef struct sinusoidal {
    int d_model;
    int n_positions;
    float *table; /* (n_positions, d_model), 64-byte aligned */
} sinusoidal;

static int sinusoidal_create(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    double base;
    int status = tfenc_param_float(init->params, "base", 10000.0, &base);
    if (status)
        return status; /* base > 0: the declared range, checked by the host */
    const int d = init->model.d_model;
    const int n_positions =
        init->model.max_positions > 0 ? init->model.max_positions : init->limits.max_seq_len;
    if (d <= 0 || n_positions <= 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "sinusoidal: needs d_model > 0 and "
                           "max_positions > 0, found %d and %d", d, n_positions);

    sinusoidal *layer = calloc(1, sizeof *layer);
    if (layer == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "sinusoidal: out of memory");
    layer->d_model = d;
    layer->n_positions = n_positions;
    layer->table = aligned_alloc(64, layers_align((size_t)n_positions * d * sizeof(float)));
    if (layer->table == NULL) {
        free(layer);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "sinusoidal: out of memory for a "
                           "%d x %d position table", n_positions, d);
    }
    /* Double precision: angles reach max_positions radians, where a float
     * argument would already have lost the low digits of the phase. */
    for (int position = 0; position < n_positions; position++) {
        float *row = layer->table + (size_t)position * d;
        for (int i = 0; i < d; i += 2) {
            const double angle = position * pow(base, -(double)i / d);
            row[i] = (float)sin(angle);
            if (i + 1 < d)
                row[i + 1] = (float)cos(angle);
        }
    }
    *instance = layer;
    return TFENC_OK;
}

static int sinusoidal_forward(void *instance, tfenc_context *ctx, tfenc_batch *batch,
                              void *workspace)
{
    const sinusoidal *layer = instance;
    const int d = layer->d_model;
    int status = layers_check_width(ctx, "sinusoidal", batch, d);
    if (status)
        return status;
    for (int s = 0; s < batch->n_seq; s++) {
        const int32_t start = batch->seq_start[s], end = batch->seq_start[s + 1];
        for (int t = start; t < end; t++) {
            const int32_t position = layers_position(batch, t, start);
            if (position < 0 || position >= layer->n_positions)
                return tfenc_error(ctx, TFENC_ERR_INPUT,
                                   "sinusoidal: position %d (sequence %d) is beyond the %d max "
                                   "positions of the model",
                                   (int)position, s, layer->n_positions);
            float *restrict out = batch->x + (size_t)t * d;
            const float *restrict encoding = layer->table + (size_t)position * d;
            for (int j = 0; j < d; j++)
                out[j] += encoding[j];
        }
    }
    return TFENC_OK;
}

static void sinusoidal_destroy(void *instance)
{
    sinusoidal *layer = instance;
    free(layer->table);
    free(layer);
}

static double sinusoidal_flops(const void *instance, double mean_seq_len)
{
    const sinusoidal *layer = instance;
    return layer->d_model; /* one addition per element */
}

/* The keys sinusoidal_create() reads (shown by --list-plugins). */
static const tfenc_param_info sinusoidal_params[] = {
    {"base", TFENC_PARAM_FLOAT, "10000", "wavelength base of the sines and cosines",
     TFENC_PARAM_ABOVE(0)},
    {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE},
};

/* The layer type(s) of this file, readable without loading layers.so. */
TFENC_PLUGIN_TYPES("sinusoidal");

const tfenc_layer_descriptor tfenc_layers_sinusoidal = {
    TFENC_DESCRIPTOR_INIT,
    .key_masking = TFENC_KEY_MASKING_UNAFFECTED,
    .type = "sinusoidal",
    .description = "adds the fixed sine/cosine position encoding of the original Transformer",
    .params = sinusoidal_params,
    .create = sinusoidal_create,
    .forward = sinusoidal_forward,
    .destroy = sinusoidal_destroy,
    .flops_per_token = sinusoidal_flops,
};
