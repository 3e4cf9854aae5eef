/* Layer type `pooling`: turns each sequence's token rows into one vector
 * (the document embedding), optionally L2-normalised.
 *
 * Job keys:
 *   mode       cls | mean | max | mean_sqrt_len | weightedmean | lasttoken | none,
 *              default mean. The modes of sentence-transformers' Pooling:
 *              cls: the first token of each sequence; mean: the average over
 *              the sequence's tokens (a packed batch has no padding, so every
 *              row counts); max: the elementwise maximum; mean_sqrt_len: the
 *              sum divided by sqrt(tokens); weightedmean: the mean weighted
 *              by position, token t (from 0) counting t + 1 (as
 *              sentence-transformers with right padding); lasttoken: the
 *              last token (decoder embedders, whose last token has seen the
 *              whole sequence); none: keep one row per token (only normalize
 *              applies).
 *   normalize  bool, false  divide each output row by max(||row||_2, 1e-12),
 *              as torch.nn.functional.normalize
 *
 * Weights: none.
 *
 * After cls, mean or max, rows 0..n_seq-1 of the batch hold the pooled
 * vectors and batch->rows = n_seq. An empty sequence pools to zeros (what
 * sentence-transformers' mean pooling gives, which clamps the token count). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"

enum mode { CLS, MEAN, MAX, NONE, MEAN_SQRT_LEN, WEIGHTED_MEAN, LAST_TOKEN };
static const char *const mode_names[] = {"cls",          "mean",      "max", "none",
                                         "mean_sqrt_len", "weightedmean", "lasttoken", NULL};

typedef struct pooling {
    int d_model;
    int mode;      /* enum mode */
    int normalize;
} pooling;

static int pooling_create(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    int mode, normalize;
    int status;
    if ((status = tfenc_param_choice(init->params, "mode", mode_names, MEAN, &mode)) ||
        (status = tfenc_param_bool(init->params, "normalize", 0, &normalize)))
        return status;
    pooling *layer = calloc(1, sizeof *layer);
    if (layer == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "pooling: out of memory");
    layer->d_model = init->model.d_model;
    layer->mode = mode;
    layer->normalize = normalize;
    *instance = layer;
    return TFENC_OK;
}

/* row /= max(||row||, 1e-12); the norm is summed in double. */
static void normalize_row(float *restrict row, int d)
{
    double squares = 0.0;
    for (int j = 0; j < d; j++)
        squares += (double)row[j] * row[j];
    const double norm = sqrt(squares);
    const float inverse = (float)(1.0 / (norm > 1e-12 ? norm : 1e-12));
    for (int j = 0; j < d; j++)
        row[j] *= inverse;
}

/* The pooled vector of the tokens rows [start, end) of x into out. `sum` is
 * d doubles of scratch for the mean. */
static void pool_sequence(float *restrict out, const float *restrict x, int start, int end,
                          int d, int mode, double *restrict sum)
{
    if (end <= start) {
        memset(out, 0, (size_t)d * sizeof *out);
        return;
    }
    const float *first = x + (size_t)start * d;
    switch (mode) {
    case CLS:
        memcpy(out, first, (size_t)d * sizeof *out);
        break;
    case LAST_TOKEN:
        memcpy(out, x + (size_t)(end - 1) * d, (size_t)d * sizeof *out);
        break;
    case MAX:
        memcpy(out, first, (size_t)d * sizeof *out);
        for (int t = start + 1; t < end; t++) {
            const float *restrict row = x + (size_t)t * d;
            for (int j = 0; j < d; j++)
                out[j] = row[j] > out[j] ? row[j] : out[j];
        }
        break;
    default: /* MEAN, MEAN_SQRT_LEN, WEIGHTED_MEAN */
        /* double sums: a 512-token mean in float would lose about 9 bits */
        for (int j = 0; j < d; j++)
            sum[j] = 0.0;
        double total_weight = 0.0;
        for (int t = start; t < end; t++) {
            const float *restrict row = x + (size_t)t * d;
            const double weight = mode == WEIGHTED_MEAN ? t - start + 1 : 1.0;
            for (int j = 0; j < d; j++)
                sum[j] += weight * row[j];
            total_weight += weight;
        }
        /* mean_sqrt_len divides the plain sum by sqrt(tokens) */
        const double divisor = mode == MEAN_SQRT_LEN ? sqrt((double)(end - start)) : total_weight;
        for (int j = 0; j < d; j++)
            out[j] = (float)(sum[j] / divisor);
        break;
    }
}

static int pooling_forward(void *instance, tfenc_context *ctx, tfenc_batch *batch,
                           void *workspace)
{
    const pooling *layer = instance;
    const int d = layer->d_model;
    int status = layers_check_width(ctx, "pooling", batch, d);
    if (status)
        return status;

    if (layer->mode == NONE) {
        if (layer->normalize)
            for (int r = 0; r < batch->rows; r++)
                normalize_row(batch->x + (size_t)r * d, d);
        return TFENC_OK;
    }
    if (batch->rows != batch->n_tokens)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "pooling: the batch holds %d rows for %d tokens: it was already "
                           "pooled by an earlier layer", batch->rows, batch->n_tokens);

    /* Pooled rows go to the workspace first: with empty sequences, pooled row s
     * could land on a token row that a later sequence still has to read. */
    float *pooled = workspace;                                      /* (n_seq, d) */
    double *sum = (double *)((char *)workspace +
                             layers_align((size_t)batch->n_seq * d * sizeof(float))); /* (d) */
    for (int s = 0; s < batch->n_seq; s++) {
        float *out = pooled + (size_t)s * d;
        pool_sequence(out, batch->x, batch->seq_start[s], layers_keys_end(batch, s), d,
                      layer->mode, sum);
        if (layer->normalize)
            normalize_row(out, d);
    }
    memcpy(batch->x, pooled, (size_t)batch->n_seq * d * sizeof(float));
    batch->rows = batch->n_seq;
    return TFENC_OK;
}

static void pooling_destroy(void *instance)
{
    free(instance);
}

static size_t pooling_workspace_size(const void *instance, const tfenc_limits *limits)
{
    const pooling *layer = instance;
    if (layer->mode == NONE)
        return 0;
    return layers_align((size_t)limits->max_seqs * layer->d_model * sizeof(float)) +
           layers_align((size_t)layer->d_model * sizeof(double));
}

static double pooling_flops(const void *instance, double mean_seq_len)
{
    const pooling *layer = instance;
    return 3.0 * layer->d_model; /* an addition or comparison per element, and the norm */
}

/* The keys pooling_create() reads (shown by --list-plugins). */
static const tfenc_param_info pooling_params[] = {
    {"mode", TFENC_PARAM_CHOICE, "mean",
     "sentence-transformers' modes: cls, mean, max, mean_sqrt_len (the sum over sqrt(tokens)), "
     "weightedmean (token t, from 0, weighs t + 1), lasttoken, or none (keep per-token rows)", TFENC_PARAM_NO_RANGE},
    {"normalize", TFENC_PARAM_BOOL, "false", "L2-normalise each output row: x / max(|x|, 1e-12)", TFENC_PARAM_NO_RANGE},
    {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE},
};

/* The layer type(s) of this file, readable without loading layers.so. */
TFENC_PLUGIN_TYPES("pooling");

const tfenc_layer_descriptor tfenc_layers_pooling = {
    TFENC_DESCRIPTOR_INIT,
    .key_masking = TFENC_KEY_MASKING_APPLIED,
    .type = "pooling",
    .description = "pools each sequence (cls, mean, max, mean_sqrt_len, weightedmean, "
                   "lasttoken, or none) with optional L2 normalisation",
    .params = pooling_params,
    .create = pooling_create,
    .forward = pooling_forward,
    .destroy = pooling_destroy,
    .workspace_size = pooling_workspace_size,
    .flops_per_token = pooling_flops,
};
