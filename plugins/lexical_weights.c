/* Layer type `lexical_weights`: BGE-M3's sparse head (FlagEmbedding's
 * BGEM3FlagModel, return_sparse), one sparse row per sequence indexed by
 * token id:
 *
 *   w_t   = relu(x_t . weight + bias)          per token (sparse_linear, h -> 1)
 *   row_i = max of w_t over the tokens t whose id is i
 *
 * with the ids of `drop_ids` (the tokenizer's cls, eos, pad and unk) and
 * every weight <= 0 left out, as BGEM3FlagModel's lexical weights are.
 * The sequence's tokens are those its attention mask keeps: the batch holds
 * no padding, and of a sequence whose keys are masked, its keys only.
 * It ends the model and declares the output kind sparse: each row goes to
 * the host with tfenc_batch_sparse_row, columns 0 .. vocab_size - 1.
 *
 * Weights: weight [1, d_model], bias [1] when present. */
#include <errno.h>
#include <stdlib.h>

#include "layers.h"

typedef struct lexical_weights {
    int d_model;
    int vocab;                /* [model] vocab_size: the rows' columns */
    uint8_t *dropped;         /* [vocab]: 1 for an id of drop_ids */
    const tfenc_linear *projection; /* [1, d_model] */
} lexical_weights;

/* drop_ids: ids separated by spaces or commas, each in 0 .. vocab - 1. */
static int read_drop_ids(tfenc_context *ctx, const char *text, int vocab, uint8_t *dropped)
{
    const char *at = text;
    while (*at != '\0') {
        if (*at == ' ' || *at == ',' || *at == '\t') {
            at++;
            continue;
        }
        char *end = NULL;
        errno = 0;
        long id = strtol(at, &end, 10);
        if (end == at || errno != 0 || id < 0 || id >= vocab || (*end != '\0' && *end != ' ' &&
                                                                  *end != ',' && *end != '\t'))
            return tfenc_error(ctx, TFENC_ERR_CONFIG, "lexical_weights: drop_ids = %s: not a "
                               "list of token ids 0 to %d", text, vocab - 1);
        dropped[id] = 1;
        at = end;
    }
    return TFENC_OK;
}

static int lexical_create(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    const char *drop_ids = NULL;
    int status = tfenc_param_string(init->params, "drop_ids", "", &drop_ids);
    if (status)
        return status;
    const int d = init->model.d_model, vocab = init->model.vocab_size;
    if (vocab <= 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "lexical_weights: its rows are indexed by token "
                           "id and need [model] vocab_size");
    lexical_weights *layer = calloc(1, sizeof *layer);
    uint8_t *dropped = calloc((size_t)vocab, 1);
    if (layer == NULL || dropped == NULL) {
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "lexical_weights: out of memory");
        goto fail;
    }
    if ((status = read_drop_ids(ctx, drop_ids, vocab, dropped)))
        goto fail;
    const tfenc_linear *projection = NULL;
    int width = 0;
    status = layers_load_map(init->weights, "weight", "bias", d, &width, &projection);
    if (status == TFENC_OK && width != 1)
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "lexical_weights: weight has %d rows, "
                             "expected 1 (one weight per token)", width);
    if (status != TFENC_OK)
        goto fail;
    layer->d_model = d;
    layer->vocab = vocab;
    layer->dropped = dropped;
    layer->projection = projection;
    *instance = layer;
    return TFENC_OK;
fail:
    free(dropped);
    free(layer);
    return status;
}

/* Workspace pieces: each token's weight [max_tokens], the open sequence's
 * best weight per id [vocab] (0: none yet), and its ids and values [max_seq_len]. */
typedef struct lexical_scratch {
    float *weights, *best, *values;
    int32_t *indices;
} lexical_scratch;

static lexical_scratch scratch_of(const lexical_weights *layer, const tfenc_limits *limits,
                                  void *workspace)
{
    char *at = workspace;
    lexical_scratch s;
    s.weights = (float *)at;
    at += layers_align((size_t)limits->max_tokens * sizeof(float));
    s.best = (float *)at;
    at += layers_align((size_t)layer->vocab * sizeof(float));
    s.values = (float *)at;
    at += layers_align((size_t)limits->max_seq_len * sizeof(float));
    s.indices = (int32_t *)at;
    return s;
}

static int ascending(const void *a, const void *b)
{
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int lexical_forward(void *instance, tfenc_context *ctx, tfenc_batch *batch,
                           void *workspace)
{
    const lexical_weights *layer = instance;
    const int d = layer->d_model;
    int status = layers_check_width(ctx, "lexical_weights", batch, d);
    if (status)
        return status;
    if (batch->rows != batch->n_tokens)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "lexical_weights: the batch holds %d rows for "
                           "%d tokens: it was already pooled by an earlier layer (the head pools "
                           "itself)", batch->rows, batch->n_tokens);
    /* The longest sequence bounds the per-sequence lists, whatever the limits said. */
    int longest = 0;
    for (int s = 0; s < batch->n_seq; s++)
        if (batch->seq_start[s + 1] - batch->seq_start[s] > longest)
            longest = batch->seq_start[s + 1] - batch->seq_start[s];
    const tfenc_limits limits = {.max_tokens = batch->n_tokens, .max_seq_len = longest};
    lexical_scratch s = scratch_of(layer, &limits, workspace);
    /* The workspace is shared with other layers: no best weight yet. Each
     * sequence puts back the zeros it used. */
    memset(s.best, 0, (size_t)layer->vocab * sizeof *s.best);
    if ((status = tfenc_linear_forward(ctx, layer->projection, batch->x, batch->n_tokens,
                                       s.weights)))
        return status;
    for (int sequence = 0; sequence < batch->n_seq && status == TFENC_OK; sequence++) {
        const int start = batch->seq_start[sequence], end = layers_keys_end(batch, sequence);
        int n = 0;
        for (int t = start; t < end; t++) {
            const int32_t id = batch->token_ids[t];
            const float weight = s.weights[t]; /* relu: a weight <= 0 is left out */
            if (id < 0 || id >= layer->vocab || layer->dropped[id] || !(weight > 0.0f))
                continue;
            if (s.best[id] == 0.0f)
                s.indices[n++] = id;
            if (weight > s.best[id])
                s.best[id] = weight;
        }
        qsort(s.indices, (size_t)n, sizeof *s.indices, ascending);
        for (int k = 0; k < n; k++) {
            s.values[k] = s.best[s.indices[k]];
            s.best[s.indices[k]] = 0.0f;
        }
        status = tfenc_batch_sparse_row(ctx, batch, sequence, n, s.indices, s.values);
    }
    if (status != TFENC_OK)
        return status;
    /* One row per sequence, as after pooling; the values travel beside it. */
    memset(batch->x, 0, (size_t)batch->n_seq * d * sizeof *batch->x);
    batch->rows = batch->n_seq;
    return TFENC_OK;
}

static void lexical_destroy(void *instance)
{
    lexical_weights *layer = instance;
    free(layer->dropped);
    free(layer); /* the linear map belongs to the host */
}

static size_t lexical_workspace_size(const void *instance, const tfenc_limits *limits)
{
    const lexical_weights *layer = instance;
    /* forward() lays it out for the batch it gets, which the limits bound. */
    return layers_align((size_t)limits->max_tokens * sizeof(float)) +
           layers_align((size_t)layer->vocab * sizeof(float)) +
           layers_align((size_t)limits->max_seq_len * sizeof(float)) +
           layers_align((size_t)limits->max_seq_len * sizeof(int32_t));
}

static double lexical_flops(const void *instance, double mean_seq_len)
{
    (void)mean_seq_len;
    const lexical_weights *layer = instance;
    return 2.0 * layer->d_model + 4.0;
}

static int lexical_output(const void *instance, tfenc_layer_output *output)
{
    const lexical_weights *layer = instance;
    output->kind = TFENC_LAYER_OUTPUT_SPARSE;
    output->width = layer->vocab;
    output->labels = NULL;
    return TFENC_OK;
}

/* The keys lexical_create() reads (shown by --list-plugins). */
static const tfenc_param_info lexical_params[] = {
    {"drop_ids", TFENC_PARAM_STRING, NULL, "token ids given no weight, separated by spaces or "
     "commas (BGE-M3: the tokenizer's cls, eos, pad and unk); none when left out",
     TFENC_PARAM_NO_RANGE},
    {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE},
};

TFENC_PLUGIN_TYPES("lexical_weights");

const tfenc_layer_descriptor tfenc_layers_lexical_weights = {
    TFENC_DESCRIPTOR_INIT,
    .key_masking = TFENC_KEY_MASKING_APPLIED,
    .type = "lexical_weights",
    .description = "BGE-M3's sparse head: relu(Linear(d, 1)) per token, the largest per token "
                   "id, special ids dropped: writes sparse rows",
    .params = lexical_params,
    .create = lexical_create,
    .forward = lexical_forward,
    .destroy = lexical_destroy,
    .workspace_size = lexical_workspace_size,
    .flops_per_token = lexical_flops,
    .output = lexical_output,
};
