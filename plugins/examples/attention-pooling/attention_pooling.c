/* Example out-of-tree layer plugin `attention_pooling`: learned attention
 * pooling, built against an installed tfenc with pkg-config (see Makefile).
 *
 * Mean pooling weighs every token alike; attention pooling learns which
 * tokens matter (Yang et al. 2016, "Hierarchical Attention Networks"). For
 * the tokens x_t of one sequence:
 *
 *   u_t = tanh(W x_t + b)              W [a, d], b [a]: a learned projection
 *   e_t = u_t . q                      q [a]: the learned query vector
 *   alpha_t = softmax over t of e_t    (only this sequence's tokens)
 *   y = sum over t of alpha_t x_t      one row of width d per sequence
 *
 * Job keys:
 *   normalize  bool, false  divide y by max(||y||_2, 1e-12), as
 *              torch.nn.functional.normalize
 *
 * Weights (in the layer's group, default the section name):
 *   projection_weight [a, d], projection_bias [a], query [a]
 * `a` (the attention width) is whatever the file holds.
 *
 * After this layer, rows 0..n_seq-1 of the batch hold the pooled vectors and
 * batch->rows = n_seq, as after the built-in `pooling`. An empty sequence
 * pools to zeros. docs/plugins.md walks through this file. */
#include <tfenc/plugin.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct attention_pooling {
    int d_model;
    int width;                /* a, the attention width */
    int normalize;
    tfenc_linear *projection; /* W and b; owned by the host */
    const float *query;       /* [a]; owned by the host */
} attention_pooling;

/* Workspace pieces start on 64-byte boundaries, as the workspace itself does,
 * so the projection GEMM writes to memory as aligned as the host's own. */
static size_t align64(size_t bytes)
{
    return (bytes + 63) / 64 * 64;
}

static int pooling_create(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    /* Every supported key is read here, even when the job keeps its default:
     * the host refuses keys that no getter asked for. */
    int normalize;
    int status = tfenc_param_bool(init->params, "normalize", 0, &normalize);
    if (status != TFENC_OK)
        return status;

    attention_pooling *layer = calloc(1, sizeof *layer);
    if (layer == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "attention_pooling: out of memory");
    layer->d_model = init->model.d_model;
    layer->normalize = normalize;

    /* The host checks the shape [a, d] (a taken from the file) and names the
     * dataset if it is missing or wrong; it keeps W in its GEMM layout. */
    const char *const weight_names[] = {"projection_weight"};
    const char *const bias_names[] = {"projection_bias"};
    status = tfenc_linear_load(init->weights, 1, weight_names, bias_names, layer->d_model,
                               &layer->width, &layer->projection);
    if (status == TFENC_OK) {
        int64_t dims[1] = {layer->width}; /* the query must match the projection */
        status = tfenc_weight_load(init->weights, "query", 1, dims, &layer->query);
    }
    if (status != TFENC_OK) {
        free(layer); /* the host frees what it loaded; create() frees only its own */
        return status;
    }
    *instance = layer;
    return TFENC_OK;
}

/* The workspace, carved in the order workspace_size() adds it up. */
typedef struct scratch {
    float *projected; /* [max_tokens, a]: u_t */
    float *scores;    /* [max_tokens]: e_t, then alpha_t */
    float *pooled;    /* [max_seqs, d]: y, moved into the batch at the end */
    double *sum;      /* [d]: one sequence's weighted sum */
} scratch;

static size_t carve(const attention_pooling *layer, int max_tokens, int max_seqs, void *base,
                    scratch *parts)
{
    size_t offset = 0;
    char *bytes = base;
    if (parts != NULL)
        parts->projected = (float *)(bytes + offset);
    offset += align64((size_t)max_tokens * layer->width * sizeof(float));
    if (parts != NULL)
        parts->scores = (float *)(bytes + offset);
    offset += align64((size_t)max_tokens * sizeof(float));
    if (parts != NULL)
        parts->pooled = (float *)(bytes + offset);
    offset += align64((size_t)max_seqs * layer->d_model * sizeof(float));
    if (parts != NULL)
        parts->sum = (double *)(bytes + offset);
    offset += align64((size_t)layer->d_model * sizeof(double));
    return offset;
}

/* alpha = softmax(e) over one sequence's scores, in place. Subtracting the
 * largest score first keeps exp() from overflowing. */
static void softmax(float *scores, int n)
{
    float largest = scores[0];
    for (int t = 1; t < n; t++)
        largest = scores[t] > largest ? scores[t] : largest;
    double total = 0.0;
    for (int t = 0; t < n; t++) {
        scores[t] = expf(scores[t] - largest);
        total += scores[t];
    }
    const float inverse = (float)(1.0 / total); /* total >= 1: the largest gives exp(0) */
    for (int t = 0; t < n; t++)
        scores[t] *= inverse;
}

static int pooling_forward(void *instance, tfenc_context *ctx, tfenc_batch *batch,
                           void *workspace)
{
    const attention_pooling *layer = instance;
    const int d = layer->d_model, a = layer->width;
    if (batch->d_model != d)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL,
                           "attention_pooling: batch has d_model %d, the layer was made for %d",
                           batch->d_model, d);
    if (batch->rows != batch->n_tokens)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "attention_pooling: the batch holds %d rows for %d tokens: an "
                           "earlier layer already pooled it", batch->rows, batch->n_tokens);

    /* Sized for this batch; the host allocated workspace_size() for the largest. */
    scratch parts;
    carve(layer, batch->n_tokens, batch->n_seq, workspace, &parts);

    /* u = tanh(x W^T + b): one GEMM over every token of every sequence. */
    int status = tfenc_linear_forward(ctx, layer->projection, batch->x, batch->rows,
                                      parts.projected);
    if (status != TFENC_OK)
        return status;
    for (int t = 0; t < batch->n_tokens; t++) {
        const float *u = parts.projected + (size_t)t * a;
        double score = 0.0;
        for (int i = 0; i < a; i++)
            score += tanh((double)u[i]) * layer->query[i];
        parts.scores[t] = (float)score;
    }

    /* Pooled rows go to the workspace first: with an empty sequence, pooled
     * row s could land on a token row that a later sequence still reads. */
    for (int s = 0; s < batch->n_seq; s++) {
        /* The sequence's keys: all its tokens, unless the batch masks
         * some (seq_keys: a query's padding), which pooling leaves out as
         * an attention mask would. */
        const int start = batch->seq_start[s];
        const int end = batch->seq_keys != NULL ? start + batch->seq_keys[s]
                                                : batch->seq_start[s + 1];
        float *out = parts.pooled + (size_t)s * d;
        if (end <= start) {
            memset(out, 0, (size_t)d * sizeof *out);
            continue;
        }
        softmax(parts.scores + start, end - start);
        for (int j = 0; j < d; j++)
            parts.sum[j] = 0.0;
        for (int t = start; t < end; t++) {
            const float weight = parts.scores[t];
            const float *row = batch->x + (size_t)t * d;
            for (int j = 0; j < d; j++)
                parts.sum[j] += (double)weight * row[j];
        }
        double squares = 0.0;
        for (int j = 0; j < d; j++)
            squares += parts.sum[j] * parts.sum[j];
        const double norm = sqrt(squares);
        const double scale = layer->normalize ? 1.0 / (norm > 1e-12 ? norm : 1e-12) : 1.0;
        for (int j = 0; j < d; j++)
            out[j] = (float)(parts.sum[j] * scale);
    }
    memcpy(batch->x, parts.pooled, (size_t)batch->n_seq * d * sizeof(float));
    batch->rows = batch->n_seq;
    return TFENC_OK;
}

static void pooling_destroy(void *instance)
{
    free(instance); /* the projection and the query belong to the host */
}

static size_t pooling_workspace_size(const void *instance, const tfenc_limits *limits)
{
    return carve(instance, limits->max_tokens, limits->max_seqs, NULL, NULL);
}

/* Per token: the projection (2 d a), tanh and the dot product with q (about
 * 10 a, tanh being ~8), exp, and the weighted sum (2 d). Pipeline stages are
 * balanced by these figures. */
static double pooling_flops_per_token(const void *instance, double mean_seq_len)
{
    (void)mean_seq_len; /* no term grows with the sequence length */
    const attention_pooling *layer = instance;
    return 2.0 * layer->d_model * layer->width + 10.0 * layer->width + 2.0 * layer->d_model;
}

static const tfenc_layer_descriptor attention_pooling_descriptor = {
    TFENC_DESCRIPTOR_INIT,
    .key_masking = TFENC_KEY_MASKING_APPLIED, /* it reads seq_keys (above) */
    .type = "attention_pooling",
    .description = "learned attention pooling: softmax(tanh(W x + b) . q) weighted sum of "
                   "each sequence's tokens (example plugin)",
    .create = pooling_create,
    .forward = pooling_forward,
    .destroy = pooling_destroy,
    .workspace_size = pooling_workspace_size,
    .flops_per_token = pooling_flops_per_token,
};

/* The one symbol tfenc looks for: descriptor 0, then NULL for "no more". */
TFENC_EXPORT const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index);

TFENC_EXPORT const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index)
{
    return index == 0 ? &attention_pooling_descriptor : NULL;
}
