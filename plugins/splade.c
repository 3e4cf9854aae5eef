/* Layer type `splade`: the masked-LM head of BERT-like models turned into
 * one sparse vector per sequence over the vocabulary (SPLADE v2/v3,
 * sentence-transformers' MLMTransformer + SpladePooling).
 *
 *   h      = LayerNorm(activation(x W_t^T + b_t))     per token, d -> d
 *   logits = h W_v^T + b_v                            per token, d -> V
 *   row_j  = max over the sequence's tokens of log(1 + relu(logits_j))
 *            (pooling = sum: the sum instead, SPLADE v1)
 *
 * which is, as transformers writes the heads:
 *   bert        cls.predictions: transform.dense, transform_act_fn,
 *               transform.LayerNorm, decoder (tied to the word embeddings) + bias
 *   distilbert  vocab_transform, activation, vocab_layer_norm, vocab_projector
 *
 * The batch holds no padding, so every token of a sequence is one its
 * attention mask keeps, special tokens included, as in SpladePooling.
 * The row is handed to the host with tfenc_batch_sparse_row (output kind SPARSE):
 * V values per sequence do not fit the batch's d_model-wide rows.
 *
 * Weights: transform_weight [d, d], transform_bias [d], norm_weight [d],
 * norm_bias [d], decoder_weight [V, d], decoder_bias [V] (when present).
 * Both maps run on the host's matrix backend at the job's precision. */
#include <math.h>
#include <stdlib.h>

#include "layers.h"

enum activation { ACT_GELU, ACT_GELU_TANH, ACT_RELU };
static const char *const activation_names[] = {"gelu", "gelu_tanh", "relu", NULL};
static const tfenc_activation activation_kinds[] = {
    TFENC_ACTIVATION_GELU, TFENC_ACTIVATION_GELU_TANH, TFENC_ACTIVATION_RELU};
enum pooling { POOL_MAX, POOL_SUM };
static const char *const pooling_names[] = {"max", "sum", NULL};

/* Token rows per pass through the two maps: the workspace holds
 * SPLADE_CHUNK_ROWS x V logits (8 MiB at V = 30,522), whatever the batch. */
#define SPLADE_CHUNK_ROWS 64

typedef struct splade {
    int d_model;
    int vocab;                      /* V, the rows of decoder_weight */
    int activation;                 /* enum activation */
    int pooling;                    /* enum pooling */
    double norm_eps;
    const tfenc_linear *transform;  /* [d, d] */
    const tfenc_linear *decoder;    /* [V, d] */
    const float *norm_weight;       /* [d] */
    const float *norm_bias;         /* [d] or NULL */
} splade;

static int splade_create(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    int activation, pooling;
    double norm_eps;
    int status;
    if ((status = tfenc_param_choice(init->params, "activation", activation_names, ACT_GELU,
                                     &activation)) ||
        (status = tfenc_param_choice(init->params, "pooling", pooling_names, POOL_MAX,
                                     &pooling)) ||
        (status = tfenc_param_float(init->params, "norm_eps", 1e-12, &norm_eps)))
        return status;
    splade *layer = calloc(1, sizeof *layer);
    if (layer == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "splade: out of memory");
    const int d = init->model.d_model;
    layer->d_model = d;
    layer->activation = activation;
    layer->pooling = pooling;
    layer->norm_eps = norm_eps;
    tfenc_weights *weights = init->weights;
    static const char *const transform_weight[] = {"transform_weight"};
    static const char *const transform_bias[] = {"transform_bias"};
    static const char *const decoder_weight[] = {"decoder_weight"};
    static const char *const decoder_bias[] = {"decoder_bias"};
    tfenc_linear *transform = NULL, *decoder = NULL;
    int width = 0;
    status = tfenc_linear_load(weights, 1, transform_weight,
                               tfenc_weight_exists(weights, "transform_bias") ? transform_bias
                                                                              : NULL,
                               d, &width, &transform);
    if (status == TFENC_OK && width != d)
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "splade: transform_weight has %d rows, "
                             "expected d_model %d", width, d);
    int64_t dims[1] = {d};
    if (status == TFENC_OK)
        status = tfenc_weight_load(weights, "norm_weight", 1, dims, &layer->norm_weight);
    if (status == TFENC_OK && tfenc_weight_exists(weights, "norm_bias"))
        status = tfenc_weight_load(weights, "norm_bias", 1, dims, &layer->norm_bias);
    if (status == TFENC_OK)
        status = tfenc_linear_load(weights, 1, decoder_weight,
                                   tfenc_weight_exists(weights, "decoder_bias") ? decoder_bias
                                                                                : NULL,
                                   d, &layer->vocab, &decoder);
    if (status == TFENC_OK && init->model.vocab_size > 0 && layer->vocab != init->model.vocab_size)
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "splade: decoder_weight has %d rows but "
                             "[model] vocab_size is %d", layer->vocab, init->model.vocab_size);
    layer->transform = transform;
    layer->decoder = decoder;
    /* Make forward()'s products now (calls of 0 rows), so it does not allocate. */
    tfenc_linear_args first = {.struct_size = sizeof first, .x_dtype = TFENC_FLOAT32,
                               .y_dtype = TFENC_FLOAT32, .rows = 0,
                               .activation = activation_kinds[activation]};
    tfenc_linear_args second = {.struct_size = sizeof second, .x_dtype = TFENC_FLOAT32,
                                .y_dtype = TFENC_FLOAT32, .rows = 0,
                                .activation = TFENC_ACTIVATION_NONE};
    if (status == TFENC_OK)
        status = tfenc_linear_run(ctx, transform, &first);
    if (status == TFENC_OK)
        status = tfenc_linear_run(ctx, decoder, &second);
    if (status != TFENC_OK) {
        free(layer); /* linear maps and weights belong to the host */
        return status;
    }
    *instance = layer;
    return TFENC_OK;
}

/* Workspace pieces: hidden [R, d], logits [R, V], the open sequence's row
 * [V], and the non-zeros handed to the host, indices [V] and values [V]. */
typedef struct splade_scratch {
    float *hidden, *logits, *pooled, *values;
    int32_t *indices;
} splade_scratch;

static splade_scratch scratch_of(const splade *layer, void *workspace)
{
    const size_t vocab = (size_t)layer->vocab;
    char *at = workspace;
    splade_scratch s;
    s.hidden = (float *)at;
    at += layers_align((size_t)SPLADE_CHUNK_ROWS * layer->d_model * sizeof(float));
    s.logits = (float *)at;
    at += layers_align((size_t)SPLADE_CHUNK_ROWS * vocab * sizeof(float));
    s.pooled = (float *)at;
    at += layers_align(vocab * sizeof(float));
    s.values = (float *)at;
    at += layers_align(vocab * sizeof(float));
    s.indices = (int32_t *)at;
    return s;
}

/* The open sequence's row to the host, then a fresh row for the next. With
 * max pooling the row holds the largest logit of each column (log(1 + z)
 * grows with z, so it is applied once, to the maximum); with sum pooling
 * it holds the sum of log(1 + relu(z)) already. */
static int hand_over(tfenc_context *ctx, const tfenc_batch *batch, const splade *layer,
                     splade_scratch *s, int sequence)
{
    const int sum = layer->pooling == POOL_SUM;
    int n = 0;
    for (int j = 0; j < layer->vocab; j++)
        if (s->pooled[j] > 0.0f) {
            s->indices[n] = j;
            s->values[n] = sum ? s->pooled[j] : log1pf(s->pooled[j]);
            n++;
        }
    memset(s->pooled, 0, (size_t)layer->vocab * sizeof *s->pooled);
    return tfenc_batch_sparse_row(ctx, batch, sequence, n, s->indices, s->values);
}

/* Columns per thread's block in pool_rows: the token rows are read along
 * their length (contiguous) and the block's part of the row stays in cache. */
#define SPLADE_POOL_COLUMNS 2048

/* Folds token rows [first, end) of the chunk's logits (rows from `base`)
 * into the open sequence's row: the maximum of the logits (0 for none
 * above it, which relu would make 0), or the sum of log(1 + relu(z)). */
static void pool_rows(const splade *layer, splade_scratch *s, int base, int first, int end)
{
    const int vocab = layer->vocab;
    const int sum = layer->pooling == POOL_SUM;
    const int blocks = (vocab + SPLADE_POOL_COLUMNS - 1) / SPLADE_POOL_COLUMNS;
    float *pooled = s->pooled;
    const float *logits = s->logits;
#pragma omp parallel for schedule(static)
    for (int block = 0; block < blocks; block++) {
        const int from = block * SPLADE_POOL_COLUMNS;
        const int to = from + SPLADE_POOL_COLUMNS < vocab ? from + SPLADE_POOL_COLUMNS : vocab;
        for (int t = first; t < end; t++) {
            const float *row = logits + (size_t)(t - base) * vocab;
            if (sum) {
                for (int j = from; j < to; j++)
                    pooled[j] += row[j] > 0.0f ? log1pf(row[j]) : 0.0f;
            } else {
                for (int j = from; j < to; j++)
                    pooled[j] = row[j] > pooled[j] ? row[j] : pooled[j];
            }
        }
    }
}

static int splade_forward(void *instance, tfenc_context *ctx, tfenc_batch *batch,
                          void *workspace)
{
    const splade *layer = instance;
    const int d = layer->d_model;
    int status = layers_check_width(ctx, "splade", batch, d);
    if (status)
        return status;
    if (batch->rows != batch->n_tokens)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "splade: the batch holds %d rows for %d "
                           "tokens: it was already pooled by an earlier layer (the head pools "
                           "itself)", batch->rows, batch->n_tokens);
    splade_scratch s = scratch_of(layer, workspace);
    memset(s.pooled, 0, (size_t)layer->vocab * sizeof *s.pooled);
    int sequence = 0; /* the open sequence: its row collects its tokens */
    for (int first = 0; first < batch->n_tokens; first += SPLADE_CHUNK_ROWS) {
        const int end = batch->n_tokens - first < SPLADE_CHUNK_ROWS ? batch->n_tokens
                                                                    : first + SPLADE_CHUNK_ROWS;
        const int rows = end - first;
        tfenc_linear_args transform = {.struct_size = sizeof transform,
                                       .x = batch->x + (size_t)first * d,
                                       .x_dtype = TFENC_FLOAT32, .y = s.hidden,
                                       .y_dtype = TFENC_FLOAT32, .rows = rows,
                                       .activation = activation_kinds[layer->activation]};
        if ((status = tfenc_linear_run(ctx, layer->transform, &transform)))
            return status;
        for (int t = 0; t < rows; t++)
            layers_head_layer_norm(s.hidden + (size_t)t * d, d, layer->norm_eps,
                                   layer->norm_weight, layer->norm_bias);
        tfenc_linear_args decode = {.struct_size = sizeof decode, .x = s.hidden,
                                    .x_dtype = TFENC_FLOAT32, .y = s.logits,
                                    .y_dtype = TFENC_FLOAT32, .rows = rows,
                                    .activation = TFENC_ACTIVATION_NONE};
        if ((status = tfenc_linear_run(ctx, layer->decoder, &decode)))
            return status;
        /* The chunk's rows, sequence by sequence; a sequence that goes on
         * past the chunk stays open for the next. */
        for (int t = first; t < end;) {
            while (sequence < batch->n_seq && batch->seq_start[sequence + 1] <= t)
                if ((status = hand_over(ctx, batch, layer, &s, sequence++)))
                    return status;
            const int stop = batch->seq_start[sequence + 1] < end ? batch->seq_start[sequence + 1]
                                                                  : end;
            /* Of a sequence whose keys are masked, its keys only. */
            const int keys_end = layers_keys_end(batch, sequence);
            const int pooled_end = keys_end < stop ? keys_end : stop;
            if (t < pooled_end)
                pool_rows(layer, &s, first, t, pooled_end);
            t = stop;
        }
    }
    while (sequence < batch->n_seq)
        if ((status = hand_over(ctx, batch, layer, &s, sequence++)))
            return status;
    /* One row per sequence, as after pooling; the values travel beside it. */
    memset(batch->x, 0, (size_t)batch->n_seq * d * sizeof *batch->x);
    batch->rows = batch->n_seq;
    return TFENC_OK;
}

static void splade_destroy(void *instance)
{
    free(instance);
}

static size_t splade_workspace_size(const void *instance, const tfenc_limits *limits)
{
    (void)limits; /* the chunk bounds it, whatever the batch */
    const splade *layer = instance;
    const size_t vocab = (size_t)layer->vocab;
    return layers_align((size_t)SPLADE_CHUNK_ROWS * layer->d_model * sizeof(float)) +
           layers_align((size_t)SPLADE_CHUNK_ROWS * vocab * sizeof(float)) +
           2 * layers_align(vocab * sizeof(float)) + layers_align(vocab * sizeof(int32_t));
}

static double splade_flops(const void *instance, double mean_seq_len)
{
    (void)mean_seq_len;
    const splade *layer = instance;
    const double d = layer->d_model, vocab = layer->vocab;
    /* both maps per token, then the norm and the pooling's log1p and max */
    return 2.0 * d * d + 2.0 * vocab * d + 10.0 * d + 4.0 * vocab;
}

static int splade_output(const void *instance, tfenc_layer_output *output)
{
    const splade *layer = instance;
    output->kind = TFENC_LAYER_OUTPUT_SPARSE;
    output->width = layer->vocab;
    output->labels = NULL;
    return TFENC_OK;
}

/* The keys splade_create() reads (shown by --list-plugins). */
static const tfenc_param_info splade_params[] = {
    {"activation", TFENC_PARAM_CHOICE, "gelu", "after the transform map: gelu, gelu_tanh or relu "
     "(config.json's hidden_act)", TFENC_PARAM_NO_RANGE},
    {"pooling", TFENC_PARAM_CHOICE, "max", "over a sequence's tokens: max (SPLADE v2/v3) or sum "
     "(SPLADE v1)", TFENC_PARAM_NO_RANGE},
    {"norm_eps", TFENC_PARAM_FLOAT, "1e-12", "the transform's LayerNorm eps",
     TFENC_PARAM_AT_LEAST(0)},
    {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE},
};

TFENC_PLUGIN_TYPES("splade");

const tfenc_layer_descriptor tfenc_layers_splade = {
    TFENC_DESCRIPTOR_INIT,
    .key_masking = TFENC_KEY_MASKING_APPLIED,
    .type = "splade",
    .description = "masked-LM head to one sparse vector per sequence over the vocabulary "
                   "(transform, norm, vocabulary map, log(1 + relu), max): writes sparse rows",
    .params = splade_params,
    .create = splade_create,
    .forward = splade_forward,
    .destroy = splade_destroy,
    .workspace_size = splade_workspace_size,
    .flops_per_token = splade_flops,
    .output = splade_output,
};
