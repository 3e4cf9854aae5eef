/* Example out-of-tree layer plugin `scale_norm`: ScaleNorm, a per-token
 * normalisation with one learned scalar (Nguyen and Salazar 2019,
 * "Transformers without Tears"), built against an installed tfenc with
 * pkg-config (see Makefile).
 *
 * LayerNorm learns a gain and a bias per feature; ScaleNorm keeps only the
 * direction of each token vector and learns one length g for all of them:
 *
 *   y = g * x / max(||x||_2, eps)        per token x of width d_model
 *
 * Job keys:
 *   eps  float, 1e-5  lower bound of the norm, > 0: a (near) zero vector
 *        is scaled by g / eps instead of blowing up
 *
 * Weights (in the layer's group, default the section name):
 *   scale [1]  g, the learned length
 *
 * It is the smallest useful plugin: one parameter, one weight, no
 * workspace, and a forward() that treats the batch as one [rows, d] matrix
 * without looking at the sequences. docs/plugins.md walks through it. */
#include <tfenc/plugin.h>

#include <math.h>
#include <stdlib.h>

typedef struct scale_norm {
    int d_model;
    double eps;
    const float *scale; /* [1]: g; owned by the host */
} scale_norm;

/* The keys create() reads: --list-plugins prints them, and the host holds
 * create() to this table (a key read but not declared is refused). */
static const tfenc_param_info scale_norm_params[] = {
    {"eps", TFENC_PARAM_FLOAT, "1e-5", "lower bound of each token's norm", TFENC_PARAM_ABOVE(0)},
    {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE},
};

static int scale_norm_create(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    double eps;
    int status = tfenc_param_float(init->params, "eps", 1e-5, &eps);
    if (status != TFENC_OK)
        return status; /* eps > 0, the table's range, was checked by the host */

    scale_norm *layer = calloc(1, sizeof *layer);
    if (layer == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "scale_norm: out of memory");
    layer->d_model = init->model.d_model;
    layer->eps = eps;
    /* The host checks the shape and names the dataset when it is missing or
     * wrong; the data stays the host's. */
    int64_t dims[1] = {1};
    status = tfenc_weight_load(init->weights, "scale", 1, dims, &layer->scale);
    if (status != TFENC_OK) {
        free(layer);
        return status;
    }
    *instance = layer;
    return TFENC_OK;
}

static int scale_norm_forward(void *instance, tfenc_context *ctx, tfenc_batch *batch,
                              void *workspace)
{
    (void)workspace; /* none needed: each row is scaled in place */
    const scale_norm *layer = instance;
    const int d = layer->d_model;
    if (batch->d_model != d)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL,
                           "scale_norm: batch has d_model %d, the layer was made for %d",
                           batch->d_model, d);
    const double g = layer->scale[0];
    /* Every row alike, tokens or (after pooling) sequences: batch->rows. */
    for (int r = 0; r < batch->rows; r++) {
        float *x = batch->x + (size_t)r * d;
        double squares = 0.0; /* in double: d terms of float squares */
        for (int j = 0; j < d; j++)
            squares += (double)x[j] * x[j];
        const double norm = sqrt(squares);
        const float factor = (float)(g / (norm > layer->eps ? norm : layer->eps));
        for (int j = 0; j < d; j++)
            x[j] *= factor;
    }
    return TFENC_OK;
}

static void scale_norm_destroy(void *instance)
{
    free(instance); /* `scale` belongs to the host */
}

/* Per token: d squares and sums, a square root and a division, d products. */
static double scale_norm_flops_per_token(const void *instance, double mean_seq_len)
{
    (void)mean_seq_len;
    const scale_norm *layer = instance;
    return 3.0 * layer->d_model + 20.0;
}

/* The type this file provides, readable without loading it: a job that
 * names no scale_norm layer never opens this file. */
TFENC_PLUGIN_TYPES("scale_norm");

static const tfenc_layer_descriptor scale_norm_descriptor = {
    TFENC_DESCRIPTOR_INIT,
    .key_masking = TFENC_KEY_MASKING_UNAFFECTED, /* each token's row alone */
    .type = "scale_norm",
    .description = "ScaleNorm: g * x / max(||x||, eps) per token, one learned scalar g "
                   "(example plugin)",
    .params = scale_norm_params,
    .create = scale_norm_create,
    .forward = scale_norm_forward,
    .destroy = scale_norm_destroy,
    .flops_per_token = scale_norm_flops_per_token,
};

/* The one symbol tfenc looks for: descriptor 0, then NULL for "no more". */
TFENC_EXPORT const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index);

TFENC_EXPORT const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index)
{
    return index == 0 ? &scale_norm_descriptor : NULL;
}
