/* Layer type `embedding`: turns token ids into the first activations.
 *
 *   x[t] = token_embeddings[id[t]] * (scale_by_sqrt_d ? sqrt(d) : 1)
 *          + position_embeddings[position[t] + position_offset]  (learned_positions)
 *          + token_type_embeddings[type[t]]                       (token_types)
 *
 * Job keys: embedding_params at the end of this file (type, default, range,
 * help; --list-plugins and docs/layers.md show it).
 *
 * Weights (in the layer's group):
 *   token_embeddings      [V, d]  V must equal [model] vocab_size when set
 *   position_embeddings   [P, d]  when learned_positions = true
 *   token_type_embeddings [G, d]  when token_types = true
 *
 * An id outside [0, V), a position outside [0, P) or a type outside [0, G)
 * fails forward() with TFENC_ERR_INPUT. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h"

typedef struct embedding {
    int d_model;
    float scale;                  /* sqrt(d) or 1 */
    const float *tokens;          /* (vocab, d_model) */
    int64_t vocab;
    const float *positions;       /* (n_positions, d_model), NULL without learned positions */
    int64_t n_positions;
    long position_offset;
    const float *token_types;     /* (n_types, d_model), NULL without token types */
    int64_t n_types;
} embedding;

static int embedding_create(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    int scale_by_sqrt_d, learned_positions, token_types;
    long position_offset;
    int status;
    /* Every supported key is read before anything can fail, so that the
     * host's unknown-key check sees them all. */
    if ((status = tfenc_param_bool(init->params, "scale_by_sqrt_d", 0, &scale_by_sqrt_d)) ||
        (status = tfenc_param_bool(init->params, "learned_positions", 0, &learned_positions)) ||
        (status = tfenc_param_int(init->params, "position_offset", 0, &position_offset)) ||
        (status = tfenc_param_bool(init->params, "token_types", 0, &token_types)))
        return status; /* position_offset: the declared range, checked by the host */

    embedding *layer = calloc(1, sizeof *layer);
    if (layer == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "embedding: out of memory");
    int d = init->model.d_model;
    layer->d_model = d;
    layer->scale = scale_by_sqrt_d ? (float)sqrt((double)d) : 1.0f;
    layer->position_offset = position_offset;

    /* A known vocabulary size is checked by the weight loader, whose message
     * names the dataset with the expected and the found shape. */
    int64_t dims[2] = {init->model.vocab_size > 0 ? init->model.vocab_size : -1, d};
    if ((status = tfenc_weight_load(init->weights, "token_embeddings", 2, dims, &layer->tokens)))
        goto fail;
    layer->vocab = dims[0];
    if (learned_positions) {
        dims[0] = -1;
        dims[1] = d;
        if ((status = tfenc_weight_load(init->weights, "position_embeddings", 2, dims,
                                        &layer->positions)))
            goto fail;
        layer->n_positions = dims[0];
    }
    if (token_types) {
        dims[0] = -1;
        dims[1] = d;
        if ((status = tfenc_weight_load(init->weights, "token_type_embeddings", 2, dims,
                                        &layer->token_types)))
            goto fail;
        layer->n_types = dims[0];
    }
    *instance = layer;
    return TFENC_OK;
fail:
    free(layer);
    return status;
}

static int embedding_forward(void *instance, tfenc_context *ctx, tfenc_batch *batch,
                             void *workspace)
{
    const embedding *layer = instance;
    const int d = layer->d_model;
    int status = layers_check_width(ctx, "embedding", batch, d);
    if (status)
        return status;

    for (int s = 0; s < batch->n_seq; s++) {
        const int32_t start = batch->seq_start[s], end = batch->seq_start[s + 1];
        for (int t = start; t < end; t++) {
            float *restrict out = batch->x + (size_t)t * d;

            /* token vector, scaled */
            const int32_t id = batch->token_ids[t];
            if (id < 0 || id >= layer->vocab)
                return tfenc_error(ctx, TFENC_ERR_INPUT,
                                   "embedding: token id %d (sequence %d, token %d) is outside "
                                   "[0, %lld), the vocabulary of token_embeddings",
                                   (int)id, s, t - start, (long long)layer->vocab);
            const float *restrict token = layer->tokens + (size_t)id * d;
            for (int j = 0; j < d; j++)
                out[j] = token[j] * layer->scale;

            /* learned position vector */
            if (layer->positions != NULL) {
                const int64_t position =
                    (int64_t)layers_position(batch, t, start) + layer->position_offset;
                if (position < 0 || position >= layer->n_positions)
                    return tfenc_error(ctx, TFENC_ERR_INPUT,
                                       "embedding: position %lld (sequence %d, position "
                                       "offset %ld) is beyond the %lld max positions of "
                                       "position_embeddings",
                                       (long long)position, s, layer->position_offset,
                                       (long long)layer->n_positions);
                const float *restrict vector = layer->positions + (size_t)position * d;
                for (int j = 0; j < d; j++)
                    out[j] += vector[j];
            }

            /* segment vector; an input without types means type 0 */
            if (layer->token_types != NULL) {
                const int32_t type = batch->token_types != NULL ? batch->token_types[t] : 0;
                if (type < 0 || type >= layer->n_types)
                    return tfenc_error(ctx, TFENC_ERR_INPUT,
                                       "embedding: token type %d (sequence %d, token %d) is "
                                       "outside [0, %lld), the types of token_type_embeddings",
                                       (int)type, s, t - start, (long long)layer->n_types);
                const float *restrict vector = layer->token_types + (size_t)type * d;
                for (int j = 0; j < d; j++)
                    out[j] += vector[j];
            }
        }
    }
    batch->rows = batch->n_tokens;
    return TFENC_OK;
}

static void embedding_destroy(void *instance)
{
    free(instance); /* the weights belong to the host */
}

static double embedding_flops(const void *instance, double mean_seq_len)
{
    const embedding *layer = instance;
    return 3.0 * layer->d_model; /* a scale and up to two additions per element */
}

/* The keys embedding_create() reads (shown by --list-plugins). */
static const tfenc_param_info embedding_params[] = {
    {"scale_by_sqrt_d", TFENC_PARAM_BOOL, "false",
     "multiply token vectors by sqrt(d_model) (the original Transformer)", TFENC_PARAM_NO_RANGE},
    {"learned_positions", TFENC_PARAM_BOOL, "false",
     "add a learned position vector, dataset position_embeddings (BERT)", TFENC_PARAM_NO_RANGE},
    {"position_offset", TFENC_PARAM_INT, "0",
     "added to each position before the lookup (RoBERTa: padding_idx + 1 = 2)",
     TFENC_PARAM_RANGE(0, INT32_MAX / 2)},
    {"token_types", TFENC_PARAM_BOOL, "false",
     "add a segment vector, dataset token_type_embeddings (BERT; type 0 for text input)", TFENC_PARAM_NO_RANGE},
    {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE},
};

/* The layer type(s) of this file, readable without loading layers.so. */
TFENC_PLUGIN_TYPES("embedding");

const tfenc_layer_descriptor tfenc_layers_embedding = {
    TFENC_DESCRIPTOR_INIT,
    .key_masking = TFENC_KEY_MASKING_UNAFFECTED,
    .type = "embedding",
    .description = "token embeddings, optionally scaled by sqrt(d), plus learned positions "
                   "and token types",
    .params = embedding_params,
    .create = embedding_create,
    .forward = embedding_forward,
    .destroy = embedding_destroy,
    .flops_per_token = embedding_flops,
};
