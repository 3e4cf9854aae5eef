/* Layer type `multivector`: the per-token head of late-interaction models
 * (ColBERT v2's `linear`, PyLate's and sentence-transformers' `1_Dense`):
 *
 *   v_t = x_t W^T (+ b)              for every token t, W [width, d_model]
 *   v_t = v_t / max(||v_t||_2, 1e-12)  when normalize = true
 *
 * which is ColBERT.doc()/query()'s `self.linear(...)` then
 * torch.nn.functional.normalize(p=2, dim=2). It declares the output kind
 * vectors (plugin.h), so the job writes `vectors [T, width]` and `offsets`
 * (docs/output.md); the host leaves out the tokens of the job's skiplist
 * ([job] skip_punctuation), as ColBERT.doc() does after normalising.
 *
 * Job keys:
 *   normalize  bool, true: each token's vector at unit length
 *   width      int, 0: the rows of weight; else they must agree
 * Weights: weight [width, d_model], bias [width] when present. */
#include <math.h>
#include <stdlib.h>

#include "layers.h"

typedef struct multivector {
    int d_model;
    int width;
    int normalize;
    const tfenc_linear *projection; /* [width, d_model] */
} multivector;

static int multivector_create(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    int normalize;
    long wanted;
    int status;
    if ((status = tfenc_param_bool(init->params, "normalize", 1, &normalize)) ||
        (status = tfenc_param_int_range(init->params, "width", 0, 0, 65536, &wanted)))
        return status;
    multivector *layer = calloc(1, sizeof *layer);
    if (layer == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "multivector: out of memory");
    const int d = init->model.d_model;
    const tfenc_linear *projection = NULL;
    int width = 0;
    status = layers_load_map(init->weights, "weight", "bias", d, &width, &projection);
    if (status == TFENC_OK && wanted > 0 && width != wanted)
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "multivector: width = %ld but weight has "
                             "%d rows", wanted, width);
    /* The vectors travel in the batch's d_model-wide rows. */
    if (status == TFENC_OK && width > d)
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "multivector: weight has %d rows, wider "
                             "than d_model %d", width, d);
    if (status != TFENC_OK) {
        free(layer);
        return status;
    }
    layer->d_model = d;
    layer->width = width;
    layer->normalize = normalize;
    layer->projection = projection;
    *instance = layer;
    return TFENC_OK;
}

static int multivector_forward(void *instance, tfenc_context *ctx, tfenc_batch *batch,
                               void *workspace)
{
    const multivector *layer = instance;
    const int d = layer->d_model, width = layer->width, rows = batch->rows;
    int status = layers_check_width(ctx, "multivector", batch, d);
    if (status)
        return status;
    if (rows != batch->n_tokens)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "multivector: the batch holds %d rows for %d "
                           "tokens: an earlier layer pooled it (a multi-vector model keeps "
                           "every token)", rows, batch->n_tokens);
    float *projected = workspace; /* [rows, width] */
    if ((status = tfenc_linear_forward(ctx, layer->projection, batch->x, rows, projected)))
        return status;
    /* Each token's vector at the start of its row, the output kind's contract. */
#pragma omp parallel for schedule(static)
    for (int t = 0; t < rows; t++) {
        const float *v = projected + (size_t)t * width;
        float *row = batch->x + (size_t)t * d;
        double scale = 1.0;
        if (layer->normalize) {
            double squares = 0.0;
            for (int j = 0; j < width; j++)
                squares += (double)v[j] * v[j];
            double norm = sqrt(squares);
            scale = 1.0 / (norm > 1e-12 ? norm : 1e-12);
        }
        for (int j = 0; j < width; j++)
            row[j] = (float)(v[j] * scale);
        memset(row + width, 0, (size_t)(d - width) * sizeof *row);
    }
    return TFENC_OK;
}

static void multivector_destroy(void *instance)
{
    free(instance); /* the linear map belongs to the host */
}

static size_t multivector_workspace_size(const void *instance, const tfenc_limits *limits)
{
    const multivector *layer = instance;
    return layers_align((size_t)limits->max_tokens * layer->width * sizeof(float));
}

static double multivector_flops(const void *instance, double mean_seq_len)
{
    (void)mean_seq_len;
    const multivector *layer = instance;
    return 2.0 * layer->d_model * layer->width + 3.0 * layer->width;
}

static int multivector_output(const void *instance, tfenc_layer_output *output)
{
    const multivector *layer = instance;
    output->kind = TFENC_LAYER_OUTPUT_VECTORS;
    output->width = layer->width;
    return TFENC_OK;
}

/* The keys multivector_create() reads (shown by --list-plugins). */
static const tfenc_param_info multivector_params[] = {
    {"normalize", TFENC_PARAM_BOOL, "true", "each token's vector scaled to unit length (L2), as "
     "ColBERT and PyLate do", TFENC_PARAM_NO_RANGE},
    {"width", TFENC_PARAM_INT, "0", "values per token; 0 takes the rows of weight, else they "
     "must agree", TFENC_PARAM_RANGE(0, 65536)},
    {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE},
};

TFENC_PLUGIN_TYPES("multivector");

const tfenc_layer_descriptor tfenc_layers_multivector = {
    TFENC_DESCRIPTOR_INIT,
    .key_masking = TFENC_KEY_MASKING_UNAFFECTED,
    .type = "multivector",
    .description = "late-interaction head (ColBERT linear, PyLate Dense): a per-token "
                   "projection, L2-normalised: writes vectors",
    .params = multivector_params,
    .create = multivector_create,
    .forward = multivector_forward,
    .destroy = multivector_destroy,
    .workspace_size = multivector_workspace_size,
    .flops_per_token = multivector_flops,
    .output = multivector_output,
};
