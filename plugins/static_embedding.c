/* Layer type `static_embedding`: a static-embedding model (model2vec,
 * potion) whole, as one step: each sequence's vector is the mean of its
 * tokens' rows of a table, each row scaled by its token's weight when the
 * model has weights, optionally L2-normalised as model2vec does.
 *
 *   x[s] = (1 / n_s) sum_{t in s} weight[id[t]] * token_embeddings[id[t]]
 *   x[s] = x[s] / (||x[s]||_2 + 1e-32)                  (normalize = true)
 *
 * A sequence without tokens (model2vec drops unknown tokens, so a text can
 * keep none) gets zeros. The tokens are looked up and summed per sequence
 * straight into its output row: no per-token activations are made, no
 * matrix product runs, so the job runs at the tokenizer's speed. The sum is
 * over the sequence's tokens in order in double precision, so a row does
 * not depend on the batch it is in, nor on threads or ranks.
 *
 * Job keys: static_embedding_params at the end of this file.
 *
 * Weights (in the layer's group):
 *   token_embeddings [V, d]  V must equal [model] vocab_size when set
 *                            (tfenc-import expands model2vec's token mapping
 *                            of a vocabulary-quantized model into this table)
 *   token_weights    [V]     when token_weights = true (model2vec's "weights")
 *
 * An id outside [0, V) fails forward() with TFENC_ERR_INPUT. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"

typedef struct static_embedding {
    int d_model;
    int normalize;
    const float *tokens;  /* (vocab, d_model) */
    const float *weights; /* (vocab), or NULL: every token weighs 1 */
    int64_t vocab;
} static_embedding;

static int static_embedding_create(tfenc_context *ctx, const tfenc_layer_init *init,
                                   void **instance)
{
    int weighted, normalize;
    int status;
    if ((status = tfenc_param_bool(init->params, "token_weights", 0, &weighted)) ||
        (status = tfenc_param_bool(init->params, "normalize", 0, &normalize)))
        return status;
    static_embedding *layer = calloc(1, sizeof *layer);
    if (layer == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "static_embedding: out of memory");
    const int d = init->model.d_model;
    layer->d_model = d;
    layer->normalize = normalize;
    /* The loader's messages name the dataset with the expected and found
     * shapes: a table of the wrong width or vocabulary, weights of another
     * length than the table. */
    int64_t dims[2] = {init->model.vocab_size > 0 ? init->model.vocab_size : -1, d};
    if ((status = tfenc_weight_load(init->weights, "token_embeddings", 2, dims, &layer->tokens)))
        goto fail;
    layer->vocab = dims[0];
    if (weighted) {
        int64_t length[1] = {layer->vocab};
        if ((status = tfenc_weight_load(init->weights, "token_weights", 1, length,
                                        &layer->weights)))
            goto fail;
    }
    *instance = layer;
    return TFENC_OK;
fail:
    free(layer);
    return status;
}

/* Tokens ahead whose rows are fetched early (a few DRAM latencies' worth
 * of summing rows). */
#define PREFETCH_AHEAD 8

/* sum[0..d) += weight * row, for each token of the sequence in order
 * (`following` tokens of the batch come after them: prefetched, not read).
 * Returns -1, or the index of the first id outside [0, vocab), after which
 * nothing was added. The products are exact in double (a float times a
 * float), so a fused multiply-add in the AVX2 and AVX-512 clones gives the
 * bits of the baseline's multiply and add. */
TFENC_VECTOR_CLONES
static int sum_sequence(double *restrict sum, const static_embedding *layer,
                        const int32_t *restrict ids, int n, int following)
{
    const int d = layer->d_model;
    for (int t = 0; t < n; t++)
        if (ids[t] < 0 || ids[t] >= layer->vocab)
            return t;
    for (int j = 0; j < d; j++)
        sum[j] = 0.0;
    for (int t = 0; t < n; t++) {
        /* The rows are scattered over a table larger than the caches: ask
         * for a later token's row while this one is summed. */
        if (t + PREFETCH_AHEAD < n + following &&
            ids[t + PREFETCH_AHEAD] >= 0 && ids[t + PREFETCH_AHEAD] < layer->vocab) {
            const char *later = (const char *)(layer->tokens + (size_t)ids[t + PREFETCH_AHEAD] * d);
            for (size_t byte = 0; byte < (size_t)d * sizeof(float); byte += 64)
                __builtin_prefetch(later + byte);
        }
        const float *restrict row = layer->tokens + (size_t)ids[t] * d;
        const double weight = layer->weights != NULL ? layer->weights[ids[t]] : 1.0;
#pragma omp simd
        for (int j = 0; j < d; j++)
            sum[j] += weight * row[j];
    }
    return -1;
}

/* out = sum / n, divided by its norm + 1e-32 when normalize is set. */
TFENC_VECTOR_CLONES
static void write_mean(float *restrict out, double *restrict sum, int n, int d, int normalize)
{
    double squares = 0.0;
    for (int j = 0; j < d; j++) {
        sum[j] /= n;
        squares += sum[j] * sum[j];
    }
    /* model2vec divides by the norm plus 1e-32 (numpy), not by a clamp */
    const double scale = normalize ? 1.0 / (sqrt(squares) + 1e-32) : 1.0;
#pragma omp simd
    for (int j = 0; j < d; j++)
        out[j] = (float)(sum[j] * scale);
}

static int static_embedding_forward(void *instance, tfenc_context *ctx, tfenc_batch *batch,
                                    void *workspace)
{
    const static_embedding *layer = instance;
    const int d = layer->d_model;
    int status = layers_check_width(ctx, "static_embedding", batch, d);
    if (status)
        return status;
    double *restrict sum = workspace; /* (d) */
    /* Row s is written after sequence s's tokens are read; the tokens are
     * ids, not rows of x, so no sequence reads what another wrote. */
    for (int s = 0; s < batch->n_seq; s++) {
        const int32_t start = batch->seq_start[s];
        const int n = layers_keys_end(batch, s) - start;
        float *restrict out = batch->x + (size_t)s * d;
        /* the next sequences' tokens follow: their rows are fetched early too */
        const int bad = sum_sequence(sum, layer, batch->token_ids + start, n,
                                     batch->n_tokens - start - n);
        if (bad >= 0)
            return tfenc_error(ctx, TFENC_ERR_INPUT,
                               "static_embedding: token id %d (sequence %d, token %d) is "
                               "outside [0, %lld), the vocabulary of token_embeddings",
                               (int)batch->token_ids[start + bad], s, bad,
                               (long long)layer->vocab);
        if (n == 0)
            memset(out, 0, (size_t)d * sizeof *out);
        else
            write_mean(out, sum, n, d, layer->normalize);
    }
    batch->rows = batch->n_seq;
    return TFENC_OK;
}

static void static_embedding_destroy(void *instance)
{
    free(instance); /* the weights belong to the host */
}

static size_t static_embedding_workspace_size(const void *instance, const tfenc_limits *limits)
{
    const static_embedding *layer = instance;
    return layers_align((size_t)layer->d_model * sizeof(double));
}

static double static_embedding_flops(const void *instance, double mean_seq_len)
{
    const static_embedding *layer = instance;
    return 2.0 * layer->d_model; /* a multiply and an addition per element */
}

/* The keys static_embedding_create() reads (shown by --list-plugins). */
static const tfenc_param_info static_embedding_params[] = {
    {"token_weights", TFENC_PARAM_BOOL, "false",
     "scale each token's row by its weight, dataset token_weights [V] (model2vec's weights)",
     TFENC_PARAM_NO_RANGE},
    {"normalize", TFENC_PARAM_BOOL, "false",
     "divide each mean by its L2 norm + 1e-32, as model2vec does (config.json's normalize)",
     TFENC_PARAM_NO_RANGE},
    {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE},
};

/* The layer type(s) of this file, readable without loading layers.so. */
TFENC_PLUGIN_TYPES("static_embedding");

const tfenc_layer_descriptor tfenc_layers_static_embedding = {
    TFENC_DESCRIPTOR_INIT,
    .key_masking = TFENC_KEY_MASKING_APPLIED,
    .type = "static_embedding",
    .description = "a static-embedding model (model2vec): the (weighted) mean of each "
                   "sequence's token rows, optionally L2-normalised",
    .params = static_embedding_params,
    .create = static_embedding_create,
    .forward = static_embedding_forward,
    .destroy = static_embedding_destroy,
    .workspace_size = static_embedding_workspace_size,
    .flops_per_token = static_embedding_flops,
};
