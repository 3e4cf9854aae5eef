/* Layer type `moe`: a mixture-of-experts feed-forward block, as
 * nomic-embed-text-v2-moe computes it (nomic-ai/contrastors with
 * megablocks' dMoE: LearnedRouter and the dropless MLP experts):
 *
 *   p      = softmax(x R^T)                       R: router_weight [E, d]
 *   e_1..k = the k largest p, highest first; equal probabilities in
 *            ascending expert order (the lower index ranks first)
 *   w_r    = p[e_r], or w_r / ||w||_q when normalize = q > 0
 *            (megablocks' moe_normalize_expert_weights)
 *   y      = sum_r w_r expert_{e_r}(x) + out_bias   (summed in rank order)
 *   expert_e(x) = Linear(f -> d)(act(Linear(d -> f)(x))), no biases
 *
 * Job keys:
 *   experts     int, required: E, checked against the weights
 *   top_k       int, default 2 (at most experts)
 *   activation  relu | gelu | gelu_tanh | silu, default gelu (exact erf form)
 *   normalize   float, default 0: no normalization; q > 0 divides the k
 *               weights by their q-norm (1: they sum to 1)
 *   bias        bool, true: the shared out_bias [d] after the experts
 *
 * Weights (in the layer's group):
 *   router_weight         [E, d]
 *   experts/N/in_weight   [f, d]   N = 0 .. E-1
 *   experts/N/out_weight  [d, f]
 *   out_bias              [d]
 *
 * Experts run as grouped products: the rows routed to each expert are
 * gathered, and each expert's two linear maps run once over exactly those
 * rows (no padding to a capacity, no dropped tokens). The host runs every
 * product in row blocks of one fixed shape (core/matrix/block_rows.h), so
 * a token's expert output is a function of its own row whatever other
 * tokens share its expert; the router is a per-row loop, and each token's
 * outputs are summed in its own rank order. So a row does not depend on
 * the other documents of its batch (docs/architecture.md).
 *
 * The router runs in float64 from the float32 weights at every precision:
 * it chooses the experts, and a choice that flipped with the matrix
 * precision would change a token's output by a whole expert's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "layers.h"

enum activation { RELU, GELU, GELU_TANH, SILU };
static const char *const activation_names[] = {"relu", "gelu", "gelu_tanh", "silu", NULL};
static const tfenc_activation activation_kinds[] = {
    TFENC_ACTIVATION_RELU, TFENC_ACTIVATION_GELU, TFENC_ACTIVATION_GELU_TANH,
    TFENC_ACTIVATION_SILU};

/* Largest expert count the job accepts: beyond any published model, and
 * small enough that per-token routing arrays stay small. */
#define MOE_MAX_EXPERTS 1024

typedef struct expert {
    tfenc_linear *in;  /* (f, d) */
    tfenc_linear *out; /* (d, f) */
} expert;

typedef struct moe {
    int d_model;
    int hidden; /* f */
    int experts;
    int top_k;
    int activation;
    double normalize;
    const float *router; /* [E, d], owned by the host */
    const float *bias;   /* [d] or NULL, owned by the host */
    expert *expert;      /* [E]; the linear maps belong to the host */
    long long *routed;   /* [E]: tokens each expert got since create() (the counters
                          * --dry-run prints) */
} moe;

static void moe_destroy(void *instance)
{
    moe *layer = instance;
    if (layer != NULL) {
        free(layer->expert);
        free(layer->routed);
    }
    free(layer);
}

/* Expert n's two maps, checked against d_model and each other. */
static int load_expert(tfenc_context *ctx, tfenc_weights *weights, moe *layer, int n)
{
    char in_name[48], out_name[48];
    snprintf(in_name, sizeof in_name, "experts/%d/in_weight", n);
    snprintf(out_name, sizeof out_name, "experts/%d/out_weight", n);
    const char *const in_names[] = {in_name};
    const char *const out_names[] = {out_name};
    int hidden = 0, width = 0;
    int status = tfenc_linear_load(weights, 1, in_names, NULL, layer->d_model, &hidden,
                                   &layer->expert[n].in);
    if (status)
        return status;
    if (n > 0 && hidden != layer->hidden)
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                           "moe: %s has %d rows, experts/0/in_weight %d: every expert needs "
                           "the same width f", in_name, hidden, layer->hidden);
    layer->hidden = hidden;
    if ((status = tfenc_linear_load(weights, 1, out_names, NULL, hidden, &width,
                                    &layer->expert[n].out)))
        return status;
    if (width != layer->d_model)
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                           "moe: %s has shape [%d, %d], expected [%d, %d] (d_model, f)",
                           out_name, width, hidden, layer->d_model, hidden);
    /* Prepare forward()'s kinds of call (0 rows), so it does not allocate. */
    const tfenc_element_type hidden_dtype = tfenc_linear_dtype(layer->expert[n].in);
    tfenc_linear_args first = {.struct_size = sizeof first, .x_dtype = TFENC_FLOAT32,
                               .y_dtype = hidden_dtype, .rows = 0,
                               .activation = activation_kinds[layer->activation]};
    tfenc_linear_args second = {.struct_size = sizeof second, .x_dtype = hidden_dtype,
                                .y_dtype = TFENC_FLOAT32, .rows = 0,
                                .activation = TFENC_ACTIVATION_NONE};
    if ((status = tfenc_linear_run(ctx, layer->expert[n].in, &first)) ||
        (status = tfenc_linear_run(ctx, layer->expert[n].out, &second)))
        return status;
    return TFENC_OK;
}

static int moe_create(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    long experts, top_k;
    int activation, bias;
    double normalize;
    int status;
    if ((status = tfenc_param_int_range(init->params, "experts", -1, 1, MOE_MAX_EXPERTS,
                                        &experts)) ||
        (status = tfenc_param_int_range(init->params, "top_k", 2, 1, MOE_MAX_EXPERTS,
                                        &top_k)) ||
        (status = tfenc_param_choice(init->params, "activation", activation_names, GELU,
                                     &activation)) ||
        (status = tfenc_param_float(init->params, "normalize", 0.0, &normalize)) ||
        (status = tfenc_param_bool(init->params, "bias", 1, &bias)))
        return status;
    if (experts < 1)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "moe: experts is required (the number of "
                           "experts the weights hold)");
    if (top_k > experts)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "moe: top_k = %ld exceeds experts = %ld (a "
                           "token cannot go to the same expert twice)", top_k, experts);

    moe *layer = calloc(1, sizeof *layer);
    if (layer == NULL || (layer->expert = calloc((size_t)experts, sizeof *layer->expert)) == NULL ||
        (layer->routed = calloc((size_t)experts, sizeof *layer->routed)) == NULL) {
        moe_destroy(layer);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "moe: out of memory");
    }
    const int d = init->model.d_model;
    layer->d_model = d;
    layer->experts = (int)experts;
    layer->top_k = (int)top_k;
    layer->activation = activation;
    layer->normalize = normalize;

    /* The router's rows are the experts: a count other than the job's
     * means the weights belong to another model. */
    int64_t router_dims[2] = {-1, d};
    if ((status = tfenc_weight_load(init->weights, "router_weight", 2, router_dims,
                                    &layer->router)))
        goto fail;
    if (router_dims[0] != experts) {
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "moe: router_weight has %lld rows (experts) "
                             "but the job says experts = %ld",
                             (long long)router_dims[0], experts);
        goto fail;
    }
    char extra[48];
    snprintf(extra, sizeof extra, "experts/%ld/in_weight", experts);
    if (tfenc_weight_exists(init->weights, extra)) {
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "moe: the weights hold %s, more experts "
                             "than experts = %ld", extra, experts);
        goto fail;
    }
    for (int n = 0; n < layer->experts; n++)
        if ((status = load_expert(ctx, init->weights, layer, n)))
            goto fail;
    if (bias) {
        int64_t bias_dims[1] = {d};
        if ((status = tfenc_weight_load(init->weights, "out_bias", 1, bias_dims, &layer->bias)))
            goto fail;
    }
    *instance = layer;
    return TFENC_OK;
fail:
    moe_destroy(layer);
    return status;
}

/* Rows of the hidden activations at a time, as in ffn.c: a multiple of
 * every block size of the host, so that chunking adds no block edge. */
#define MOE_CHUNK_ROWS 512

/* The pieces of the workspace for `rows` tokens. */
typedef struct moe_workspace {
    int32_t *choice;   /* [rows, k]: expert of each rank */
    float *weight;     /* [rows, k]: its weight */
    int32_t *slot;     /* [rows, k]: the token's row among the gathered ones */
    int32_t *offset;   /* [E + 1]: first gathered row of each expert */
    int32_t *cursor;   /* [E] */
    double *probability; /* [rows, E]: the router's */
    float *gathered;   /* [rows k, d]: inputs by expert, then their outputs */
    void *hidden;      /* [MOE_CHUNK_ROWS, f] in the maps' element type */
} moe_workspace;

static size_t moe_layout(const moe *layer, size_t rows, moe_workspace *w, char *base)
{
    const size_t k = (size_t)layer->top_k, experts = (size_t)layer->experts;
    const size_t chunk = rows < MOE_CHUNK_ROWS ? rows : MOE_CHUNK_ROWS;
    const size_t sizes[] = {rows * k * sizeof(int32_t), rows * k * sizeof(float),
                            rows * k * sizeof(int32_t), (experts + 1) * sizeof(int32_t),
                            experts * sizeof(int32_t), rows * experts * sizeof(double),
                            rows * k * (size_t)layer->d_model * sizeof(float),
                            chunk * (size_t)layer->hidden * sizeof(float)};
    void **pieces[] = {(void **)&w->choice, (void **)&w->weight, (void **)&w->slot,
                       (void **)&w->offset, (void **)&w->cursor, (void **)&w->probability,
                       (void **)&w->gathered,
                       &w->hidden};
    size_t used = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (base != NULL)
            *pieces[i] = base + used;
        used += layers_align(sizes[i]);
    }
    return used;
}

static size_t moe_workspace_size(const void *instance, const tfenc_limits *limits)
{
    moe_workspace unused;
    return moe_layout(instance, limits->max_tokens > 0 ? (size_t)limits->max_tokens : 0,
                      &unused, NULL);
}

/* Token `row`'s experts and weights: the router's softmax, its top k
 * (highest first, equal probabilities by ascending expert), normalized
 * when the job says so. */
static void route(const moe *layer, const float *row, int32_t *choice, float *weight,
                  double *probability)
{
    const int d = layer->d_model, experts = layer->experts;
    double largest = -INFINITY;
    for (int e = 0; e < experts; e++) {
        const float *r = layer->router + (size_t)e * d;
        double logit = 0.0;
        for (int j = 0; j < d; j++)
            logit += (double)r[j] * row[j];
        probability[e] = logit;
        largest = fmax(largest, logit);
    }
    double sum = 0.0;
    for (int e = 0; e < experts; e++)
        sum += probability[e] = exp(probability[e] - largest);
    for (int e = 0; e < experts; e++)
        probability[e] /= sum;
    for (int r = 0; r < layer->top_k; r++) {
        /* Strictly greater: an equal probability keeps the lower index. A
         * chosen expert is marked -1, so none is chosen twice; a NaN (a
         * non-finite input, which the host then reports) still leaves a
         * valid expert chosen. */
        int best = -1;
        for (int e = 0; e < experts; e++)
            if (probability[e] != -1.0 && (best < 0 || probability[e] > probability[best]))
                best = e;
        choice[r] = best;
        weight[r] = (float)probability[best];
        probability[best] = -1.0;
    }
    if (layer->normalize > 0.0) {
        double norm = 0.0;
        for (int r = 0; r < layer->top_k; r++)
            norm += pow(fabs((double)weight[r]), layer->normalize);
        norm = pow(norm, 1.0 / layer->normalize);
        for (int r = 0; r < layer->top_k; r++)
            weight[r] = (float)(weight[r] / norm);
    }
}

static int moe_forward(void *instance, tfenc_context *ctx, tfenc_batch *batch, void *workspace)
{
    moe *layer = instance;
    int status = layers_check_width(ctx, "moe", batch, layer->d_model);
    if (status)
        return status;
    const int rows = batch->rows, k = layer->top_k, d = layer->d_model;
    const int experts = layer->experts;
    moe_workspace w;
    moe_layout(layer, (size_t)rows, &w, workspace);

    /* Routing: each token on its own, over the rank's threads. */
    TFENC_PARALLEL_FOR(t, rows, (double)rows * experts * d,
                       route(layer, batch->x + (size_t)t * d, w.choice + (size_t)t * k,
                             w.weight + (size_t)t * k, w.probability + (size_t)t * experts));

    /* Group the tokens by expert, in token order within each. */
    for (int e = 0; e <= experts; e++)
        w.offset[e] = 0;
    for (size_t i = 0; i < (size_t)rows * k; i++)
        w.offset[w.choice[i] + 1]++;
    for (int e = 0; e < experts; e++) {
        layer->routed[e] += w.offset[e + 1];
        w.offset[e + 1] += w.offset[e];
        w.cursor[e] = w.offset[e];
    }
    for (size_t i = 0; i < (size_t)rows * k; i++) {
        const int32_t slot = w.cursor[w.choice[i]]++;
        w.slot[i] = slot;
        memcpy(w.gathered + (size_t)slot * d, batch->x + (i / (size_t)k) * d,
               (size_t)d * sizeof(float));
    }

    /* One product per expert over exactly its rows; an expert without
     * tokens runs nothing. Outputs replace their inputs in place. */
    for (int e = 0; e < experts; e++) {
        const tfenc_element_type hidden_dtype = tfenc_linear_dtype(layer->expert[e].in);
        for (int first = w.offset[e]; first < w.offset[e + 1]; first += MOE_CHUNK_ROWS) {
            const int count = w.offset[e + 1] - first < MOE_CHUNK_ROWS ? w.offset[e + 1] - first
                                                                       : MOE_CHUNK_ROWS;
            float *x = w.gathered + (size_t)first * d;
            tfenc_linear_args up = {.struct_size = sizeof up, .x = x, .x_dtype = TFENC_FLOAT32,
                                    .y = w.hidden, .y_dtype = hidden_dtype, .rows = count,
                                    .activation = activation_kinds[layer->activation]};
            tfenc_linear_args down = {.struct_size = sizeof down, .x = w.hidden,
                                      .x_dtype = hidden_dtype, .y = x,
                                      .y_dtype = TFENC_FLOAT32, .rows = count,
                                      .activation = TFENC_ACTIVATION_NONE};
            if ((status = tfenc_linear_run(ctx, layer->expert[e].in, &up)) ||
                (status = tfenc_linear_run(ctx, layer->expert[e].out, &down)))
                return status;
        }
    }

    /* Each token's weighted outputs, summed in its rank order, then the
     * shared bias (the reference adds it after the experts' sum). */
    const float *bias = layer->bias;
    TFENC_PARALLEL_FOR(t, rows, (double)rows * k * d, {
        float *out = batch->x + (size_t)t * d;
        for (int j = 0; j < d; j++)
            out[j] = 0.0f;
        for (int r = 0; r < k; r++) {
            const float weight = w.weight[(size_t)t * k + r];
            const float *y = w.gathered + (size_t)w.slot[(size_t)t * k + r] * d;
            for (int j = 0; j < d; j++)
                out[j] += weight * y[j];
        }
        if (bias != NULL)
            for (int j = 0; j < d; j++)
                out[j] += bias[j];
    });
    return TFENC_OK;
}

static double moe_flops(const void *instance, double mean_seq_len)
{
    const moe *layer = instance;
    (void)mean_seq_len;
    /* the router, then k experts of two maps of d f weights each */
    return 2.0 * layer->d_model * layer->experts +
           2.0 * layer->top_k * 2.0 * layer->d_model * layer->hidden;
}

/* The tokens each expert got: --dry-run prints them for its timing sample
 * (tfenc/plugin.h's counters), so that a user sees how the corpus spreads
 * over the experts, which the per-token FLOPs cannot tell. */
static int moe_counters(const void *instance, const char **label, int *n,
                        const long long **values)
{
    const moe *layer = instance;
    *label = "tokens per expert";
    *n = layer->experts;
    *values = layer->routed;
    return TFENC_OK;
}

static const tfenc_counters_extension moe_counters_extension = {
    .struct_size = sizeof moe_counters_extension, .counters = moe_counters};

static const void *moe_extension(const char *uri)
{
    return strcmp(uri, TFENC_COUNTERS_URI) == 0 ? &moe_counters_extension : NULL;
}

/* The keys moe_create() reads (shown by --list-plugins). */
static const tfenc_param_info moe_params[] = {
    {"experts", TFENC_PARAM_INT, NULL, "number of experts (rows of router_weight)",
     TFENC_PARAM_RANGE(1, MOE_MAX_EXPERTS)},
    {"top_k", TFENC_PARAM_INT, "2", "experts per token (at most experts)",
     TFENC_PARAM_RANGE(1, MOE_MAX_EXPERTS)},
    {"activation", TFENC_PARAM_CHOICE, "gelu",
     "the experts' activation: relu, gelu (the exact erf form), gelu_tanh or silu",
     TFENC_PARAM_NO_RANGE},
    {"normalize", TFENC_PARAM_FLOAT, "0",
     "0: the top-k probabilities as they are; q > 0: divided by their q-norm",
     TFENC_PARAM_AT_LEAST(0)},
    {"bias", TFENC_PARAM_BOOL, "true", "a shared out_bias after the experts' sum",
     TFENC_PARAM_NO_RANGE},
    {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE},
};

TFENC_PLUGIN_TYPES("moe");

const tfenc_layer_descriptor tfenc_layers_moe = {
    TFENC_DESCRIPTOR_INIT,
    .key_masking = TFENC_KEY_MASKING_UNAFFECTED,
    .type = "moe",
    .description = "mixture-of-experts feed-forward block: softmax router, top-k experts "
                   "(Linear(d->f), activation, Linear(f->d)) as grouped products, shared bias",
    .params = moe_params,
    .create = moe_create,
    .forward = moe_forward,
    .destroy = moe_destroy,
    .workspace_size = moe_workspace_size,
    .flops_per_token = moe_flops,
    .extension = moe_extension,
};
