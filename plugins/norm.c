/* Layer types `layernorm` and `rmsnorm`: per-token normalisation over the
 * d_model features, in place.
 *
 * layernorm (torch.nn.LayerNorm): y = (x - mean) / sqrt(var + eps) * weight + bias,
 *   with the biased variance (divided by d), as PyTorch.
 *   Weights:  weight [d], bias [d] (bias absent when bias = false)
 *
 * rmsnorm (LLaMA, T5): y = x / sqrt(mean(x^2) + eps) * (weight_offset + weight)
 *   Weights:  weight [d]
 *   weight_offset is 0 but for Gemma's norms, which store weight - 1 and
 *   scale by 1 + weight (Gemma3RMSNorm); the sum is taken once, in float32
 *   as there.
 *
 * Job keys: layernorm_params and rmsnorm_params at the end of this file
 * (type, default, range, help; --list-plugins and docs/layers.md show them).
 *
 * The statistics are accumulated in double: the two passes over a row are
 * cheap next to the GEMMs, and they keep rows with a large mean exact. Rows
 * are spread over the rank's OpenMP threads. */
#include <math.h>
#include <stdlib.h>

#include "layers.h"

typedef struct norm {
    int d_model;
    double eps;
    const float *weight; /* (d_model): the weights, or offset_weight */
    const float *bias;   /* (d_model), NULL for rmsnorm or bias = false */
    float *offset_weight; /* (d_model): weight_offset + weight when the offset is not 0 */
} norm;

/* Reads eps (and for layernorm the bias key) and the weights. */
static int norm_create(tfenc_context *ctx, const tfenc_layer_init *init, void **instance,
                       const char *type, double default_eps, int has_bias_key)
{
    double eps, weight_offset = 0.0;
    int bias = 0;
    int status;
    if ((status = tfenc_param_float(init->params, "eps", default_eps, &eps)))
        return status;
    if (has_bias_key && (status = tfenc_param_bool(init->params, "bias", 1, &bias)))
        return status;
    if (!has_bias_key &&
        (status = tfenc_param_float(init->params, "weight_offset", 0.0, &weight_offset)))
        return status;
    /* eps >= 0: the declared range, checked by the host */

    norm *layer = calloc(1, sizeof *layer);
    if (layer == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", type);
    layer->d_model = init->model.d_model;
    layer->eps = eps;
    int64_t dims[1] = {layer->d_model};
    if ((status = tfenc_weight_load(init->weights, "weight", 1, dims, &layer->weight)))
        goto fail;
    if (weight_offset != 0.0) {
        layer->offset_weight = malloc((size_t)layer->d_model * sizeof(float));
        if (layer->offset_weight == NULL) {
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", type);
            goto fail;
        }
        for (int j = 0; j < layer->d_model; j++)
            layer->offset_weight[j] = (float)weight_offset + layer->weight[j];
        layer->weight = layer->offset_weight;
    }
    if (bias) {
        dims[0] = layer->d_model;
        if ((status = tfenc_weight_load(init->weights, "bias", 1, dims, &layer->bias)))
            goto fail;
    }
    *instance = layer;
    return TFENC_OK;
fail:
    free(layer->offset_weight);
    free(layer);
    return status;
}

static int layernorm_create(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    return norm_create(ctx, init, instance, "layernorm", 1e-5, 1);
}

static int rmsnorm_create(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    return norm_create(ctx, init, instance, "rmsnorm", 1e-6, 0);
}

/* One row of layer normalisation: out = (x - mean) * rstd * weight (+ bias). */
TFENC_VECTOR_CLONES
static void layernorm_row(float *restrict x, const float *restrict weight,
                          const float *restrict bias, int d, double eps)
{
    /* `omp simd` lets the sums be split across vector lanes (a reordering
     * in double precision, harmless here), which plain C forbids. */
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < d; j++)
        sum += x[j];
    const double mean = sum / d;
    /* second pass on the centred values: no cancellation as in E[x^2] - mean^2 */
    double squares = 0.0;
#pragma omp simd reduction(+ : squares)
    for (int j = 0; j < d; j++) {
        const double centred = x[j] - mean;
        squares += centred * centred;
    }
    const float rstd = (float)(1.0 / sqrt(squares / d + eps));
    const float mean_f = (float)mean;
    if (bias != NULL) {
#pragma omp simd
        for (int j = 0; j < d; j++)
            x[j] = (x[j] - mean_f) * rstd * weight[j] + bias[j];
    } else {
#pragma omp simd
        for (int j = 0; j < d; j++)
            x[j] = (x[j] - mean_f) * rstd * weight[j];
    }
}

/* One row of RMS normalisation: out = x * rms^-1 * weight. */
TFENC_VECTOR_CLONES
static void rmsnorm_row(float *restrict x, const float *restrict weight, int d, double eps)
{
    double squares = 0.0;
#pragma omp simd reduction(+ : squares)
    for (int j = 0; j < d; j++)
        squares += (double)x[j] * x[j];
    const float rstd = (float)(1.0 / sqrt(squares / d + eps));
#pragma omp simd
    for (int j = 0; j < d; j++)
        x[j] = x[j] * rstd * weight[j];
}

static int layernorm_forward(void *instance, tfenc_context *ctx, tfenc_batch *batch,
                             void *workspace)
{
    const norm *layer = instance;
    const int d = layer->d_model;
    int status = layers_check_width(ctx, "layernorm", batch, d);
    if (status)
        return status;
    TFENC_PARALLEL_FOR(r, batch->rows, (double)batch->rows * d,
                       layernorm_row(batch->x + (size_t)r * d, layer->weight, layer->bias, d,
                                     layer->eps));
    return TFENC_OK;
}

static int rmsnorm_forward(void *instance, tfenc_context *ctx, tfenc_batch *batch,
                           void *workspace)
{
    const norm *layer = instance;
    const int d = layer->d_model;
    int status = layers_check_width(ctx, "rmsnorm", batch, d);
    if (status)
        return status;
    TFENC_PARALLEL_FOR(r, batch->rows, (double)batch->rows * d,
                       rmsnorm_row(batch->x + (size_t)r * d, layer->weight, d, layer->eps));
    return TFENC_OK;
}

static void norm_destroy(void *instance)
{
    norm *layer = instance;
    if (layer != NULL)
        free(layer->offset_weight); /* the weights themselves belong to the host */
    free(layer);
}

static double norm_flops(const void *instance, double mean_seq_len)
{
    const norm *layer = instance;
    return 8.0 * layer->d_model; /* two reduction passes and a scale-shift */
}

/* The keys layernorm_create() and rmsnorm_create() read (--list-plugins). */
static const tfenc_param_info layernorm_params[] = {
    {"eps", TFENC_PARAM_FLOAT, "1e-5", "added to the variance (BERT: 1e-12)",
     TFENC_PARAM_AT_LEAST(0)},
    {"bias", TFENC_PARAM_BOOL, "true", "add the bias dataset after scaling", TFENC_PARAM_NO_RANGE},
    {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE},
};

static const tfenc_param_info rmsnorm_params[] = {
    {"eps", TFENC_PARAM_FLOAT, "1e-6", "added to the mean square", TFENC_PARAM_AT_LEAST(0)},
    {"weight_offset", TFENC_PARAM_FLOAT, "0",
     "scale by weight_offset + weight (Gemma's norms: 1)", TFENC_PARAM_NO_RANGE},
    {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE},
};

/* The layer type(s) of this file, readable without loading layers.so. */
TFENC_PLUGIN_TYPES("layernorm rmsnorm");

const tfenc_layer_descriptor tfenc_layers_layernorm = {
    TFENC_DESCRIPTOR_INIT,
    .key_masking = TFENC_KEY_MASKING_UNAFFECTED,
    .type = "layernorm",
    .description = "layer normalisation over d_model (torch.nn.LayerNorm), optional bias",
    .params = layernorm_params,
    .create = layernorm_create,
    .forward = layernorm_forward,
    .destroy = norm_destroy,
    .flops_per_token = norm_flops,
};

const tfenc_layer_descriptor tfenc_layers_rmsnorm = {
    TFENC_DESCRIPTOR_INIT,
    .key_masking = TFENC_KEY_MASKING_UNAFFECTED,
    .type = "rmsnorm",
    .description = "root-mean-square normalisation over d_model (LLaMA, T5)",
    .params = rmsnorm_params,
    .create = rmsnorm_create,
    .forward = rmsnorm_forward,
    .destroy = norm_destroy,
    .flops_per_token = norm_flops,
};
