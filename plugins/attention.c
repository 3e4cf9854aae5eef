/* Multi-head self-attention (layer type `mha`) over packed, padding-free batches.
 *
 * Each sequence of a batch attends only to itself, in both directions (no
 * causal mask): the same result as PyTorch's nn.MultiheadAttention with a
 * key_padding_mask, without computing any padding.
 *
 * Job keys (section of a layer with `type = mha`):
 *
 *   n_heads     int, required        heads; must divide d_model
 *   bias        bool, true           Q/K/V and output projections have biases
 *   qkv         auto|separate|fused  auto: fused when `qkv_weight` exists
 *   position    none|rope|alibi      none: positions come from another layer
 *   rope_theta  float, 10000         RoPE base: pair i turns by pos * theta^(-2i/rope_dims)
 *   rope_dims   int, head_dim        rotate the first rope_dims dims of each head (even)
 *   rope_style  half|interleaved     half: GPT-NeoX/LLaMA rotate_half pairs (i, i + rope_dims/2);
 *                                    interleaved: GPT-J pairs (2i, 2i+1)
 *   scale       float, 1/sqrt(head_dim)  multiplies Q K^T before the softmax
 *
 * Weights (group of the layer, d = d_model, docs/weights.md):
 *
 *   q_weight, k_weight, v_weight  [d, d]   (qkv = separate)
 *   q_bias, k_bias, v_bias        [d]      (separate, bias = true)
 *   qkv_weight                    [3d, d]  (qkv = fused: Q rows, then K, then V,
 *                                           as nn.MultiheadAttention.in_proj_weight)
 *   qkv_bias                      [3d]     (fused, bias = true)
 *   out_weight                    [d, d]
 *   out_bias                      [d]      (bias = true)
 *
 * RoPE turns Q and K by each token's batch position (its place in its
 * document). ALiBi adds -slope_h * |i - j| to the scores of head h, i and j
 * being rows of the same sequence (the bidirectional form), with the slopes of
 * the ALiBi paper's reference code, including its rule for a number of heads
 * that is not a power of two.
 *
 * Workspace: qkv [max_tokens, 3d] + context [max_tokens, d] + one tile of
 * scores [128, max_seq_len]; forward() refuses a batch beyond the limits it
 * was created with.
 */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers.h" /* LAYERS_VECTOR_CLONES, layers_exp */
#include "tfenc/plugin.h"

/* Query rows scored at once: the scores of one tile, tile x L floats, stay
 * small even for long sequences, where a full L x L matrix per head would not
 * (128 x 512 floats: 256 KiB, inside L2). 128 rather than 64 scores a whole
 * 128-token sequence in one GEMM per head: 3% less CPU time on MiniLM. */
#define QUERY_TILE 128

enum qkv_layout { QKV_AUTO, QKV_SEPARATE, QKV_FUSED };
enum position_kind { POSITION_NONE, POSITION_ROPE, POSITION_ALIBI };
enum rope_style { ROPE_HALF, ROPE_INTERLEAVED };

static const char *const qkv_names[] = {"auto", "separate", "fused", NULL};
static const char *const position_names[] = {"none", "rope", "alibi", NULL};
static const char *const rope_style_names[] = {"half", "interleaved", NULL};

typedef struct attention {
    int d_model;
    int n_heads;
    int head_dim;          /* d_model / n_heads */
    float scale;           /* applied to Q K^T */
    enum position_kind position;
    enum rope_style rope_style;
    int rope_dims;         /* leading dims of each head that RoPE rotates */
    float *rope_inverse_frequency; /* [rope_dims / 2]: theta^(-2i/rope_dims) */
    float *alibi_slopes;   /* [n_heads] */
    tfenc_linear *qkv;     /* x [rows, d] -> [rows, 3d]: Q, K, V side by side (store-owned) */
    tfenc_linear *out;     /* context [rows, d] -> [rows, d] (store-owned) */
    tfenc_limits limits;   /* the batches forward() was promised */
} attention;

/* Slopes of the ALiBi reference implementation (ofirpress/attention_with_linear_biases):
 * for a power of two n, 2^(-8(i+1)/n); otherwise the slopes of the largest
 * power of two p below n, followed by every other slope of 2p. */
static void alibi_fill_slopes(float *slopes, int n_heads)
{
    int power = 1;
    while (power * 2 <= n_heads)
        power *= 2;
    for (int i = 0; i < power; i++)
        slopes[i] = (float)exp2(-8.0 * (i + 1) / power);
    for (int i = power; i < n_heads; i++) {
        int odd = 2 * (i - power) + 1; /* index 0, 2, 4... of 2p's list, counted from 1 */
        slopes[i] = (float)exp2(-8.0 * odd / (2.0 * power));
    }
}

/* Rotates the first rope_dims dims of every head of `vectors` (a Q or K block
 * of `rows` rows, row stride `stride`) by the angle of each row's position. */
static void rope_apply(const attention *layer, float *vectors, int rows, int stride,
                       const int32_t *positions)
{
    int half = layer->rope_dims / 2;
    for (int r = 0; r < rows; r++) {
        double position = positions[r];
        for (int i = 0; i < half; i++) {
            double angle = position * layer->rope_inverse_frequency[i];
            float c = (float)cos(angle), s = (float)sin(angle);
            for (int h = 0; h < layer->n_heads; h++) {
                float *head = vectors + (size_t)r * stride + (size_t)h * layer->head_dim;
                /* half: dim i pairs with i + half; interleaved: 2i with 2i+1. */
                int a = layer->rope_style == ROPE_HALF ? i : 2 * i;
                int b = layer->rope_style == ROPE_HALF ? i + half : 2 * i + 1;
                float x0 = head[a], x1 = head[b];
                head[a] = x0 * c - x1 * s;
                head[b] = x1 * c + x0 * s;
            }
        }
    }
}

/* exp(x) for the scores once their row maximum is subtracted (x <= 0):
 * layers_exp() (plain arithmetic, so that a loop of it vectorises; libm's
 * expf() would make the softmax cost as much as the GEMMs at L = 512), with
 * NaN and -inf scores turned back into NaN by (x - x), where layers_exp's
 * clamp alone would hide them as exp(-87). */
static inline float exp_nonpositive(float x)
{
    return layers_exp(x) + (x - x);
}

/* Replaces each row of a score tile by exp(score - row maximum) and returns
 * 1 / (row sum) per row: the normalisation is applied later to the context
 * rows (head_dim values) rather than to the probabilities (L values). */
LAYERS_VECTOR_CLONES
static void exponentiate_rows(float *scores, int rows, int length, float *inverse_sums)
{
    for (int r = 0; r < rows; r++) {
        float *row = scores + (size_t)r * length;
        /* Subtracting the row maximum keeps the exponentials <= 1: no overflow. */
        float maximum = row[0];
#pragma omp simd reduction(max : maximum)
        for (int j = 1; j < length; j++)
            maximum = row[j] > maximum ? row[j] : maximum;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int j = 0; j < length; j++) {
            row[j] = exp_nonpositive(row[j] - maximum);
            sum += row[j];
        }
        inverse_sums[r] = 1.0f / sum;
    }
}

/* Attention of one sequence of `length` tokens: its Q/K/V rows start at
 * `qkv` (row stride 3d), its context rows at `context` (row stride d). */
static void attend_sequence(const attention *layer, const float *qkv, int length, float *context,
                            float *scores)
{
    int d = layer->d_model, head_dim = layer->head_dim, stride = 3 * d;
    for (int h = 0; h < layer->n_heads; h++) {
        const float *q = qkv + (size_t)h * head_dim;
        const float *k = q + d;
        const float *v = q + 2 * d;
        for (int first = 0; first < length; first += QUERY_TILE) {
            int rows = length - first < QUERY_TILE ? length - first : QUERY_TILE;
            /* scores[rows, length] = scale * Q_tile K^T */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, length, head_dim,
                        layer->scale, q + (size_t)first * stride, stride, k, stride, 0.0f,
                        scores, length);
            if (layer->position == POSITION_ALIBI) {
                float slope = layer->alibi_slopes[h];
                for (int r = 0; r < rows; r++)
                    for (int j = 0; j < length; j++)
                        scores[(size_t)r * length + j] -= slope * (float)abs(first + r - j);
            }
            float inverse_sums[QUERY_TILE];
            exponentiate_rows(scores, rows, length, inverse_sums);
            /* context_tile[rows, head_dim] = softmax(scores) V, normalised after the product */
            float *out = context + (size_t)first * d + (size_t)h * head_dim;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, head_dim, length, 1.0f,
                        scores, length, v, stride, 0.0f, out, d);
            for (int r = 0; r < rows; r++)
                for (int e = 0; e < head_dim; e++)
                    out[(size_t)r * d + e] *= inverse_sums[r];
        }
    }
}

static int attention_forward(void *instance, tfenc_context *ctx, tfenc_batch *batch,
                             void *workspace)
{
    const attention *layer = instance;
    int d = layer->d_model;
    if (batch->d_model != d)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "mha: batch has d_model %d, layer expects %d",
                           batch->d_model, d);
    if (batch->rows != batch->n_tokens)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL,
                           "mha: batch has %d rows for %d tokens (attention after pooling?)",
                           batch->rows, batch->n_tokens);
    if (batch->n_tokens > layer->limits.max_tokens)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "mha: batch of %d tokens exceeds max_tokens %d",
                           batch->n_tokens, layer->limits.max_tokens);
    for (int s = 0; s < batch->n_seq; s++) {
        int length = batch->seq_start[s + 1] - batch->seq_start[s];
        if (length > layer->limits.max_seq_len)
            return tfenc_error(ctx, TFENC_ERR_INTERNAL,
                               "mha: sequence %d has %d tokens, more than max_seq_len %d", s, length,
                               layer->limits.max_seq_len);
    }
    if (layer->position == POSITION_ROPE && batch->positions == NULL)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "mha: position = rope needs batch positions");

    /* Workspace layout: qkv [tokens, 3d] | context [tokens, d] | scores [tile, L].
     * Offsets are multiples of 16 floats only when d is; sgemm needs no more
     * than float alignment, so that is enough. */
    float *qkv = workspace;
    float *context = qkv + (size_t)batch->n_tokens * 3 * d;
    float *scores = context + (size_t)batch->n_tokens * d;

    /* Q, K and V of every token in one GEMM. */
    int status = tfenc_linear_forward(ctx, layer->qkv, batch->x, batch->n_tokens, qkv);
    if (status != TFENC_OK)
        return status;

    /* RoPE turns Q and K (not V) before they meet in the scores. */
    if (layer->position == POSITION_ROPE) {
        rope_apply(layer, qkv, batch->n_tokens, 3 * d, batch->positions);
        rope_apply(layer, qkv + d, batch->n_tokens, 3 * d, batch->positions);
    }

    for (int s = 0; s < batch->n_seq; s++) {
        int start = batch->seq_start[s];
        int length = batch->seq_start[s + 1] - start;
        if (length > 0)
            attend_sequence(layer, qkv + (size_t)start * 3 * d, length,
                            context + (size_t)start * d, scores);
    }

    /* Output projection back into the activations. */
    return tfenc_linear_forward(ctx, layer->out, context, batch->n_tokens, batch->x);
}

static size_t attention_workspace_size(const void *instance, const tfenc_limits *limits)
{
    const attention *layer = instance;
    size_t tokens = limits->max_tokens > 0 ? (size_t)limits->max_tokens : 0;
    size_t longest = limits->max_seq_len > 0 ? (size_t)limits->max_seq_len : 0;
    size_t tile = longest < QUERY_TILE ? longest : QUERY_TILE;
    return (tokens * 4 * (size_t)layer->d_model + tile * longest) * sizeof(float);
}

static double attention_flops_per_token(const void *instance, double mean_seq_len)
{
    const attention *layer = instance;
    double d = layer->d_model;
    /* Projections: 2 flops per weight (QKV is 3d x d, output d x d); attention:
     * Q K^T and P V, each 2 * L * d per token summed over heads. */
    return 2.0 * (3.0 * d * d + d * d) + 4.0 * mean_seq_len * d;
}

static void attention_destroy(void *instance)
{
    attention *layer = instance;
    if (layer == NULL)
        return;
    /* The linear maps belong to the weight store. */
    free(layer->rope_inverse_frequency);
    free(layer->alibi_slopes);
    free(layer);
}

/* Reads every key of the section, so that the host's unknown-key check sees
 * them all as known even when the layer does not use them. */
static int read_params(tfenc_context *ctx, const tfenc_layer_init *init, attention *layer,
                       int *bias, int *qkv_layout)
{
    tfenc_params *params = init->params;
    long n_heads, rope_dims;
    double rope_theta, scale;
    int position, rope_style, status;

    if ((status = tfenc_param_int(params, "n_heads", 0, &n_heads)) != TFENC_OK ||
        (status = tfenc_param_bool(params, "bias", 1, bias)) != TFENC_OK ||
        (status = tfenc_param_choice(params, "qkv", qkv_names, QKV_AUTO, qkv_layout)) != TFENC_OK ||
        (status = tfenc_param_choice(params, "position", position_names, POSITION_NONE,
                                     &position)) != TFENC_OK ||
        (status = tfenc_param_float(params, "rope_theta", 10000.0, &rope_theta)) != TFENC_OK ||
        (status = tfenc_param_int(params, "rope_dims", -1, &rope_dims)) != TFENC_OK ||
        (status = tfenc_param_choice(params, "rope_style", rope_style_names, ROPE_HALF,
                                     &rope_style)) != TFENC_OK ||
        (status = tfenc_param_float(params, "scale", NAN, &scale)) != TFENC_OK)
        return status;

    int d = init->model.d_model;
    if (d <= 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "mha: d_model must be positive, found %d", d);
    if (n_heads <= 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "mha: key 'n_heads' is required and must be positive, found %ld",
                           n_heads);
    if (d % n_heads != 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "mha: n_heads = %ld does not divide d_model = %d", n_heads, d);
    layer->d_model = d;
    layer->n_heads = (int)n_heads;
    layer->head_dim = d / (int)n_heads;
    layer->position = (enum position_kind)position;
    layer->rope_style = (enum rope_style)rope_style;

    if (rope_dims < 0)
        rope_dims = layer->head_dim;
    if (layer->position == POSITION_ROPE) {
        if (rope_dims == 0 || rope_dims > layer->head_dim || rope_dims % 2 != 0)
            return tfenc_error(ctx, TFENC_ERR_CONFIG,
                               "mha: rope_dims = %ld must be even and in 2..head_dim = %d",
                               rope_dims, layer->head_dim);
        if (!(rope_theta > 0.0) || !isfinite(rope_theta))
            return tfenc_error(ctx, TFENC_ERR_CONFIG, "mha: rope_theta = %g must be positive",
                               rope_theta);
    }
    layer->rope_dims = (int)rope_dims;

    /* NAN stands for "absent": no job can spell the default, which depends on head_dim. */
    if (isnan(scale))
        scale = 1.0 / sqrt((double)layer->head_dim);
    if (!isfinite(scale))
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "mha: scale = %g is not finite", scale);
    layer->scale = (float)scale;

    if (layer->position == POSITION_ROPE) {
        int pairs = layer->rope_dims / 2;
        layer->rope_inverse_frequency = malloc((size_t)pairs * sizeof(float));
        if (layer->rope_inverse_frequency == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "mha: out of memory for RoPE table");
        for (int i = 0; i < pairs; i++)
            layer->rope_inverse_frequency[i] =
                (float)pow(rope_theta, -2.0 * i / (double)layer->rope_dims);
    }
    if (layer->position == POSITION_ALIBI) {
        layer->alibi_slopes = malloc((size_t)layer->n_heads * sizeof(float));
        if (layer->alibi_slopes == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "mha: out of memory for ALiBi slopes");
        alibi_fill_slopes(layer->alibi_slopes, layer->n_heads);
    }
    return TFENC_OK;
}

static int load_weights(tfenc_context *ctx, const tfenc_layer_init *init, attention *layer,
                        int bias, int qkv_layout)
{
    static const char *const separate_weights[] = {"q_weight", "k_weight", "v_weight"};
    static const char *const separate_biases[] = {"q_bias", "k_bias", "v_bias"};
    static const char *const fused_weight[] = {"qkv_weight"};
    static const char *const fused_bias[] = {"qkv_bias"};
    static const char *const out_weight[] = {"out_weight"};
    static const char *const out_bias[] = {"out_bias"};
    int d = layer->d_model, width, status;

    if (qkv_layout == QKV_AUTO)
        qkv_layout = tfenc_weight_exists(init->weights, "qkv_weight") ? QKV_FUSED : QKV_SEPARATE;
    /* Separate Q, K, V are stacked by the host into one map: one GEMM either way. */
    if (qkv_layout == QKV_FUSED)
        status = tfenc_linear_load(init->weights, 1, fused_weight, bias ? fused_bias : NULL, d,
                                   &width, &layer->qkv);
    else
        status = tfenc_linear_load(init->weights, 3, separate_weights,
                                   bias ? separate_biases : NULL, d, &width, &layer->qkv);
    if (status != TFENC_OK)
        return status;
    if (width != 3 * d)
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                           "mha: %s has %d output rows, expected 3 * d_model = %d",
                           qkv_layout == QKV_FUSED ? "qkv_weight" : "q_weight+k_weight+v_weight",
                           width, 3 * d);

    status = tfenc_linear_load(init->weights, 1, out_weight, bias ? out_bias : NULL, d, &width,
                               &layer->out);
    if (status != TFENC_OK)
        return status;
    if (width != d)
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                           "mha: out_weight has %d output rows, expected d_model = %d", width, d);
    return TFENC_OK;
}

static int attention_create(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    attention *layer = calloc(1, sizeof *layer);
    if (layer == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "mha: out of memory");
    layer->limits = init->limits;
    int bias, qkv_layout;
    int status = read_params(ctx, init, layer, &bias, &qkv_layout);
    if (status == TFENC_OK)
        status = load_weights(ctx, init, layer, bias, qkv_layout);
    if (status != TFENC_OK) {
        attention_destroy(layer);
        return status;
    }
    *instance = layer;
    return TFENC_OK;
}

static const tfenc_layer_descriptor mha_descriptor = {
    TFENC_DESCRIPTOR_INIT,
    .type = "mha",
    .description = "multi-head self-attention over packed sequences (RoPE, ALiBi)",
    .create = attention_create,
    .forward = attention_forward,
    .destroy = attention_destroy,
    .workspace_size = attention_workspace_size,
    .flops_per_token = attention_flops_per_token,
    .extension = NULL,
};

TFENC_EXPORT const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index);

TFENC_EXPORT const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index)
{
    return index == 0 ? &mha_descriptor : NULL;
}
