/* Multi-head self-attention (layer type `mha`) over packed, padding-free batches.
 *
 * Each sequence of a batch attends only to itself, in both directions (or,
 * with causal = true, to itself up to the current token): the same result as
 * PyTorch's nn.MultiheadAttention with a key_padding_mask (and a causal
 * mask), without computing any padding. When the batch masks keys
 * (seq_keys, ABI 1.4), a sequence's tokens past its keys are queries only,
 * as tokens of attention_mask 0 are in Hugging Face models: they get their
 * context, and no query sees them.
 *
 * Job keys: mha_params at the end of this file declares each once (type,
 * default, range, help); the host checks the ranges before create(), and
 * --list-plugins and docs/layers.md show the table. read_params() checks
 * only what relates keys to each other or to d_model.
 *
 * Weights (group of the layer, d = d_model, q = n_heads * head_dim, which
 * is d unless the job gives head_dim, k = n_kv_heads * head_dim,
 * docs/weights.md):
 *
 *   q_weight                      [q, d]   (qkv = separate)
 *   k_weight, v_weight            [k, d]   (qkv = separate)
 *   q_bias, k_bias, v_bias        [q], [k] (separate, bias = true)
 *   qkv_weight                    [q+2k, d] (qkv = fused: Q rows, then K, then V,
 *                                           as nn.MultiheadAttention.in_proj_weight)
 *   qkv_bias                      [q+2k]   (fused, bias = true)
 *   out_weight                    [d, q]
 *   out_bias                      [d]      (out_bias = true)
 *   relative_attention_bias       [B, n_heads]  (relative_buckets; B >= num_buckets)
 *   q_norm_weight, k_norm_weight  [head_dim]    (qk_norm = true)
 *
 * qk_norm (Qwen3, Gemma3) RMS-normalises each head of Q and of K over its
 * head_dim values and scales it by qk_norm_weight_offset + weight (0 +
 * weight for Qwen3, 1 + weight for Gemma's norms), before RoPE.
 *
 * RoPE turns Q and K by each token's batch position (its place in its
 * document): pair i of the first rope_dims features of a head turns by
 * pos * rope_theta^(-2i/rope_dims), or, with rope_scaling = ntk, by the
 * frequencies of rope_frequency(). window > 0 is ModernBERT's
 * local_attention / 2. ALiBi adds -slope_h * |i - j| to the scores of head h, i and j
 * being rows of the same sequence (the bidirectional form), with the slopes of
 * the ALiBi paper's reference code, including its rule for a number of heads
 * that is not a power of two. relative_buckets (MPNet, T5's bidirectional
 * buckets) adds relative_attention_bias[bucket(j - i), h] to the scores of
 * head h: distances below num_buckets / 4 get a bucket each, longer ones
 * share log-spaced buckets up to max_distance, and keys after the query use
 * the upper half of the buckets (transformers' MPNet relative_position_bucket,
 * its float32 arithmetic included, so that the buckets are the same).
 * disentangled (DeBERTa-v2/v3) adds c2p = q_i . k_rel and p2c = k_j . q_rel
 * over log-bucketed relative embeddings (disentangled_position.h; weights
 * relative_embeddings [>= 2 span, d], relative_norm_weight/bias [d], and
 * without share_att_key position_key_weight/bias, position_query_weight/bias).
 *
 * The fused kernel (attention_kernel.c) computes the context of each
 * (sequence, head, block of 64 queries) over blocks of 64 keys: scores,
 * position terms, an online softmax and P V, so that no score matrix is
 * stored, a local window visits only the key blocks it reaches
 * (O(L x window)), and the pool's threads share the items of a group. It
 * runs fp32 jobs on float32 operands, and bf16 and int8 jobs on bf16 ones
 * where the CPU has AVX512_BF16 (and head_dim is a multiple of 32). Other
 * bf16 and int8 jobs run the products Q K^T and P V on the host
 * (tfenc_matmul: oneDNN's bf16 matmul, on AMX tiles where the CPU has
 * them), every head of a block of 64 queries against a block of 128 keys
 * in one call each, with the same online softmax between them (see "the
 * host's products, in blocks" below); a batch's sequences are spread over
 * the rank's threads, each thread with its own blocks, and a lone
 * sequence's query blocks are (the products are made for one thread, so
 * that a row's bits do not follow the batch). Both paths add the
 * position terms through one interface (attention_position_terms) and
 * take one softmax row (attention_softmax_row). The
 * `kernel` key chooses the path against the default (the fused kernel,
 * float32 where bf16 cannot run; the host's products, fp32 on OpenBLAS in
 * an fp32 job, which is also how a CPU without bf16 products runs that
 * path).
 *
 * A batch runs in groups of whole sequences, each through the Q/K/V map,
 * the scores and the output map before the next (see group_tokens()), so
 * that the workspace does not grow with the batch.
 *
 * Workspace: qkv [group, q+2k] + context [group, q] (+ disentangled's p2c
 * [group, n_heads x 2 span, padded]) + per thread the fused
 * kernel's blocks (independent of L) or the products' blocks (scores and
 * probabilities [n_heads, 64, 128], queries and contexts [n_heads, 64,
 * head_dim], the terms' prepare() scratch per head; independent of L) and
 * a sequence's bf16 keys and values; forward()
 * refuses a batch beyond the limits it was created with.
 */
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "attention_kernel.h"
#include "disentangled_position.h"
#include "layers.h"
#include "tfenc/plugin.h"

/* Tokens a group of sequences may hold (or more: see group_tokens()).
 * all-MiniLM-L6-v2 keeps d + 2k + d = 1536 floats per token of a group:
 * 3 MiB of Q, K, V and context at one thread, where a whole 2048-token
 * batch took 12 MiB. */
#define GROUP_TOKENS 512

enum qkv_layout { QKV_AUTO, QKV_SEPARATE, QKV_FUSED };
enum position_kind {
    POSITION_NONE,
    POSITION_ROPE,
    POSITION_ALIBI,
    POSITION_BUCKETS,
    POSITION_DISENTANGLED
};
enum rope_style { ROPE_HALF, ROPE_INTERLEAVED };

static const char *const qkv_names[] = {"auto", "separate", "fused", NULL};
enum { KERNEL_AUTO, KERNEL_FUSED, KERNEL_PRODUCTS };
static const char *const kernel_names[] = {"auto", "fused", "products", NULL};
static const char *const position_names[] = {"none", "rope", "alibi", "relative_buckets",
                                             "disentangled", NULL};
/* DeBERTa's pos_att_type: which disentangled terms the scores get. */
enum relative_terms { TERMS_BOTH, TERMS_CONTENT_TO_POSITION, TERMS_POSITION_TO_CONTENT };
static const char *const relative_terms_names[] = {"both", "c2p", "p2c", NULL};
static const char *const rope_style_names[] = {"half", "interleaved", NULL};
enum rope_scaling { ROPE_SCALING_NONE, ROPE_SCALING_NTK };
static const char *const rope_scaling_names[] = {"none", "ntk", NULL};

typedef struct attention {
    int d_model;
    int n_heads;
    int n_kv_heads;        /* heads of K and V; n_heads / n_kv_heads query heads share one */
    int head_dim;          /* d_model / n_heads, unless the job gives head_dim */
    int q_width;           /* n_heads * head_dim: the width of Q and of the context */
    int kv_width;          /* n_kv_heads * head_dim: the width of K and of V */
    float scale;           /* applied to Q K^T */
    int causal;            /* token i sees tokens j <= i only */
    int window;            /* > 0: token i sees tokens |i - j| <= window only */
    enum position_kind position;
    enum rope_style rope_style;
    int rope_dims;         /* leading dims of each head that RoPE rotates */
    float *rope_inverse_frequency; /* [rope_dims / 2]: theta^(-2i/rope_dims) */
    double qk_norm_eps;    /* qk_norm: added to each head's mean square */
    float *q_norm_scale;   /* qk_norm: [head_dim], weight_offset + q_norm_weight; else NULL */
    float *k_norm_scale;   /* qk_norm: [head_dim], weight_offset + k_norm_weight */
    float *alibi_slopes;   /* [n_heads] */
    int num_buckets;       /* relative_buckets: buckets, and distance of the last one */
    int max_distance;
    float *relative_bias;  /* [n_heads][2 max_seq_len - 1]: the bias of head h for key j
                            * and query i at [h][j - i + max_seq_len - 1] */
    tfenc_linear *qkv;     /* x [rows, d] -> [rows, q+2k]: Q, K, V side by side (host-owned) */
    tfenc_linear *out;     /* context [rows, q] -> [rows, d] (host-owned) */
    tfenc_matmul_plan *scores_plan;  /* Q_block K_block^T, every head (host-owned) */
    tfenc_matmul_plan *context_plan; /* P V_block, every head (host-owned) */
    int in_place;          /* 1: every operand of the products (bf16) in their own layout
                            * (tfenc_matmul_padded_layout); 0: float32 rows with strides */
    tfenc_limits limits;   /* the batches forward() was promised */
    int threads;           /* the rank's pool at create(): each thread scores its own sequences */
    int kernel;            /* the job's `kernel` key: KERNEL_AUTO, _FUSED or _PRODUCTS */
    int fused;             /* 1: the fused kernel (attention_kernel.c) computes the context
                            * (by default, but for bf16 and int8 jobs without the bf16
                            * kernel); 0: the host's products (bf16 in bf16 and int8 jobs,
                            * float32 in fp32 ones) */
    int fused_bf16;        /* with fused: on bf16 operands (bf16 and int8 jobs on CPUs with
                            * AVX512_BF16; attention_kernel_run_bf16) */
    disentangled_settings disentangled_settings; /* position = disentangled (DeBERTa) */
    disentangled_position disentangled;          /* its tables */
    attention_position_terms terms; /* ALiBi, relative buckets or disentangled (whose state
                                     * is set per sequence: sequence_terms()); add == NULL:
                                     * none */
    attention_kernel_shape shape;   /* of the fused kernel */
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

/* The bucket of relative position j - i (key j, query i), as transformers'
 * MPNetEncoder.relative_position_bucket computes it: half of the buckets for
 * keys after the query, exact distances below a quarter of num_buckets, then
 * logarithmic steps up to max_distance. The logarithm is taken in float32,
 * as torch does: at distances max_exact * 2^k the quotient is an integer
 * that one ulp less would truncate to the bucket below. */
static int relative_bucket(int relative_position, int num_buckets, int max_distance)
{
    int n = -relative_position;
    int half = num_buckets / 2;
    int bucket = n < 0 ? half : 0;
    n = abs(n);
    int max_exact = half / 2;
    if (n < max_exact)
        return bucket + n;
    float large = logf((float)n / (float)max_exact)
                  / (float)log((double)max_distance / max_exact) * (float)(half - max_exact);
    int value = max_exact + (int)large;
    return bucket + (value < half - 1 ? value : half - 1);
}

/* Rotates the first rope_dims dims of each of `heads` heads of `vectors` (a Q
 * or K block of `rows` rows, row stride `stride`) by the angle of each row's
 * position. */
static void rope_apply(const attention *layer, float *vectors, int rows, int stride, int heads,
                       const int32_t *positions)
{
    int half = layer->rope_dims / 2;
    for (int r = 0; r < rows; r++) {
        double position = positions[r];
        for (int i = 0; i < half; i++) {
            double angle = position * layer->rope_inverse_frequency[i];
            float c = (float)cos(angle), s = (float)sin(angle);
            for (int h = 0; h < heads; h++) {
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

/* One head of Q or K (head_dim values) divided by its root mean square
 * and scaled, as Qwen3RMSNorm and Gemma3RMSNorm do over head_dim; the
 * mean is summed in double, as plugins/norm.c does. */
TFENC_VECTOR_CLONES
static void qk_normalise_head(float *restrict head, const float *restrict scale, int head_dim,
                              double eps)
{
    double squares = 0.0;
#pragma omp simd reduction(+ : squares)
    for (int e = 0; e < head_dim; e++)
        squares += (double)head[e] * head[e];
    const float rstd = (float)(1.0 / sqrt(squares / head_dim + eps));
#pragma omp simd
    for (int e = 0; e < head_dim; e++)
        head[e] = head[e] * rstd * scale[e];
}

/* qk_norm over `heads` heads of each of `rows` rows (stride `stride`) of
 * a Q or K block. */
static void qk_normalise(const attention *layer, float *vectors, int rows, int stride, int heads,
                         const float *scale)
{
    TFENC_PARALLEL_FOR(r, rows, (double)rows * heads * layer->head_dim * 4,
                       for (int h = 0; h < heads; h++)
                           qk_normalise_head(vectors + (size_t)r * stride +
                                                 (size_t)h * layer->head_dim,
                                             scale, layer->head_dim, layer->qk_norm_eps));
}

/* The position terms (attention_kernel.h's interface): ALiBi subtracts
 * slope_h |i - j|. */
TFENC_VECTOR_CLONES
static void alibi_add(const void *state, int h, int first_query, int rows, int first_key,
                      int keys, float *tile, int tile_stride, const float *prepared)
{
    const attention *layer = state;
    (void)prepared;
    const float slope = layer->alibi_slopes[h];
    for (int r = 0; r < rows; r++) {
        float *row = tile + (size_t)r * tile_stride;
        const int distance = first_key - (first_query + r); /* j - i at c = 0 */
#pragma omp simd
        for (int c = 0; c < keys; c++)
            row[c] -= slope * (float)abs(distance + c);
    }
}

/* relative_buckets adds the bias of bucket(j - i) of head h, read from the
 * table of every relative position (load_relative_bias()). */
TFENC_VECTOR_CLONES
static void buckets_add(const void *state, int h, int first_query, int rows, int first_key,
                        int keys, float *tile, int tile_stride, const float *prepared)
{
    const attention *layer = state;
    (void)prepared;
    const int longest = layer->limits.max_seq_len;
    for (int r = 0; r < rows; r++) {
        /* bias[c] is the bias of key first_key + c for query first_query + r */
        const float *bias = layer->relative_bias + (size_t)h * (2 * longest - 1) + (longest - 1) +
                            first_key - (first_query + r);
        float *row = tile + (size_t)r * tile_stride;
#pragma omp simd
        for (int c = 0; c < keys; c++)
            row[c] += bias[c];
    }
}

/* The position terms of one sequence of `length` tokens from token `start`
 * of the group whose keys' p2c rows start at position_to_content: the
 * disentangled terms read their sequence's rows and length through their
 * state (`sequence`, the caller's); the others' state is the layer. */
static attention_position_terms sequence_terms(const attention *layer,
                                               disentangled_sequence *sequence,
                                               const float *position_to_content, int start,
                                               int length)
{
    attention_position_terms terms = layer->terms;
    if (layer->position == POSITION_DISENTANGLED) {
        *sequence = (disentangled_sequence){
            &layer->disentangled,
            position_to_content != NULL
                ? position_to_content +
                      disentangled_position_to_content_floats(&layer->disentangled, start)
                : NULL,
            length};
        terms.state = sequence;
    }
    return terms;
}

static int group_tokens(const attention *layer, const tfenc_limits *limits);

/* Floats of the keys transposed for the fused kernel: [kv_width]
 * rows of shape.transposed_stride (a group's tokens + one key block); on
 * bf16 operands the key pairs, [kv_width / 2] such rows of words, then
 * the value pairs, each sequence's from the row of its first token (a
 * group's tokens of rows of kv_width words: a sequence of n tokens has
 * (n + 1) / 2 pairs, so the sequences' pairs never overlap). */
static size_t transposed_key_floats(const attention *layer)
{
    if (layer->fused_bf16)
        return (size_t)layer->kv_width / 2 * (size_t)layer->shape.transposed_stride +
               (size_t)layer->kv_width * (size_t)group_tokens(layer, &layer->limits);
    return (size_t)layer->kv_width * (size_t)layer->shape.transposed_stride;
}

/* Tokens a group of sequences holds at most: GROUP_TOKENS, or two longest
 * sequences per thread (so that the threads, taking a group's sequences
 * one at a time, have work to balance), never more than a batch. */
static int group_tokens(const attention *layer, const tfenc_limits *limits)
{
    if (limits->max_tokens <= 0)
        return 0;
    long tokens = GROUP_TOKENS;
    long per_thread = 2L * layer->threads * (limits->max_seq_len > 0 ? limits->max_seq_len : 0);
    tokens = per_thread > tokens ? per_thread : tokens;
    return tokens < limits->max_tokens ? (int)tokens : limits->max_tokens;
}

/* Floats of the p2c rows of a group's keys (position = disentangled). */
static size_t position_to_content_floats(const attention *layer, const tfenc_limits *limits)
{
    return layer->position == POSITION_DISENTANGLED
               ? disentangled_position_to_content_floats(&layer->disentangled,
                                                         group_tokens(layer, limits))
               : 0;
}

/* ------------------------------------------- the host's products, in blocks
 *
 * A query block of PRODUCT_QUERY_BLOCK rows of one sequence meets its keys
 * PRODUCT_KEY_BLOCK at a time: S = Q K_b^T for every head in one call of
 * the host's products, the position terms and one step of the online
 * softmax on S (float32, attention_softmax_row: the fused kernel's row)
 * while it is in cache, P rounded to bf16 where the products read it, and
 * P V_b for every head in a second call, added to the running context
 * after the step's rescale. No score matrix is larger than [heads, query
 * block, key block] (the old tiles held [heads, 128, L]: 12 MiB at 2048
 * tokens and 12 heads), and a query block visits only the key blocks that
 * hold a key one of its rows sees: a local window costs O(L x window).
 *
 * Key blocks start at multiples of PRODUCT_KEY_BLOCK from the sequence's
 * first token and query blocks at multiples of PRODUCT_QUERY_BLOCK, and a
 * block's padded sizes (the products' shape) follow from the sequence's
 * length and the block's place alone: a row's bits are a function of its
 * document, never of the batch, its other sequences or the threads (each
 * product runs on one thread).
 *
 * In bf16 and int8 jobs (oneDNN, where the products have a layout of their
 * own, tfenc_matmul_padded_layout) every operand stays in that layout:
 * the sequence's K and V laid out once in bf16, block by block, the query
 * block's Q times the scale in bf16, S read where the product wrote it and
 * P written where the next product reads it. fp32 jobs (OpenBLAS) pass
 * their float32 rows with strides, P in place of S. */

/* Query rows of a block: the fused kernel's, so that the terms' prepare()
 * covers a block in one call per head. */
#define PRODUCT_QUERY_BLOCK ATTENTION_QUERY_BLOCK

/* Keys of a block: [12 heads, 64, 128] scores are 384 KiB of float32 and
 * 192 KiB of bf16 probabilities, within a core's L2; a sequence of up to
 * 128 keys is one block, with no rescale at all. A multiple of 16 (the
 * softmax row's vectors) and a size of the products' grid of shapes. */
#define PRODUCT_KEY_BLOCK 128

/* Where one thread's blocks live (the workspace's per-thread part). */
typedef struct block_scratch {
    float *scores;            /* S, then P in fp32 jobs: [heads][m_padded][n_padded] */
    uint16_t *probabilities;  /* bf16: P, [heads][m_padded][n_padded] */
    uint16_t *queries;        /* bf16: scale Q, [heads][m_padded][head_padded] */
    float *block_context;     /* P V_b: [heads][m_padded][head_padded] */
    float *running;           /* the running context, the same layout */
    float *maximum, *sum, *rescale; /* per head and row: [heads][PRODUCT_QUERY_BLOCK] */
    float *prepared;          /* the terms' prepare(): [heads][prepared_floats] */
    uint16_t *keys, *values;  /* bf16: the sequence's, [key block][heads][block slot] */
} block_scratch;

/* The sizes of a block of `rows` queries and `keys` keys as the products
 * read and write it. */
typedef struct block_shape {
    int rows, keys, first_key;
    int score_stride;         /* floats between two rows of S (and P) */
    size_t score_head;        /* between two heads' S */
    int context_stride;       /* between two rows of P V */
    size_t context_head;      /* between two heads' P V */
    int head_padded;          /* head_dim as the products pad it */
} block_shape;

static int round_up16(int value)
{
    return (value + 15) / 16 * 16;
}

/* The shape of a block; TFENC_ERR_INTERNAL when the two products' layouts
 * do not agree (P is the A of P V: the rows and keys of S, padded alike). */
static int block_shape_of(tfenc_context *ctx, const attention *layer, int rows, int keys,
                          int first_key, block_shape *shape)
{
    *shape = (block_shape){.rows = rows, .keys = keys, .first_key = first_key};
    if (!layer->in_place) {
        /* float32 rows: S's rows rounded up to the softmax row's vectors */
        shape->score_stride = round_up16(keys);
        shape->score_head = (size_t)rows * shape->score_stride;
        shape->context_stride = shape->head_padded = layer->head_dim;
        shape->context_head = (size_t)PRODUCT_QUERY_BLOCK * layer->head_dim;
        return TFENC_OK;
    }
    tfenc_matmul_layout scores = {.struct_size = sizeof scores};
    tfenc_matmul_layout context = {.struct_size = sizeof context};
    if (tfenc_matmul_padded_layout(layer->scores_plan, rows, keys, layer->head_dim, &scores) !=
            TFENC_OK ||
        tfenc_matmul_padded_layout(layer->context_plan, rows, layer->head_dim, keys, &context) !=
            TFENC_OK ||
        context.m_padded != scores.m_padded || context.k_padded != scores.n_padded ||
        context.n_padded != scores.k_padded || scores.n_padded % 16 != 0)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL,
                           "mha: no common layout for a block of %d queries and %d keys", rows,
                           keys);
    shape->score_stride = scores.n_padded;
    shape->score_head = (size_t)scores.m_padded * scores.n_padded;
    shape->context_stride = shape->head_padded = scores.k_padded;
    shape->context_head = (size_t)scores.m_padded * scores.k_padded;
    return TFENC_OK;
}

/* The largest block within `limits` (its padded rows, keys and head_dim). */
static void largest_block(const attention *layer, const tfenc_limits *limits, size_t *rows,
                          size_t *keys, size_t *head_padded)
{
    const int longest = limits->max_seq_len > 0 ? limits->max_seq_len : 1;
    const int m = longest < PRODUCT_QUERY_BLOCK ? longest : PRODUCT_QUERY_BLOCK;
    const int n = longest < PRODUCT_KEY_BLOCK ? longest : PRODUCT_KEY_BLOCK;
    tfenc_matmul_layout layout = {.struct_size = sizeof layout};
    if (layer->in_place &&
        tfenc_matmul_padded_layout(layer->scores_plan, m, n, layer->head_dim, &layout) ==
            TFENC_OK) {
        *rows = (size_t)layout.m_padded;
        *keys = (size_t)layout.n_padded;
        *head_padded = (size_t)layout.k_padded;
        return;
    }
    *rows = PRODUCT_QUERY_BLOCK;
    *keys = (size_t)round_up16(n);
    *head_padded = (size_t)layer->head_dim;
}

/* Key blocks of a sequence of up to max_seq_len keys. */
static size_t key_blocks(const tfenc_limits *limits)
{
    const int longest = limits->max_seq_len > 0 ? limits->max_seq_len : 1;
    return (size_t)(longest + PRODUCT_KEY_BLOCK - 1) / PRODUCT_KEY_BLOCK;
}

/* Places one thread's blocks from `base` (64-byte aligned, or NULL to
 * size them) and returns their floats, a multiple of 16 (each part starts
 * on a cache line). */
static size_t block_scratch_place(const attention *layer, const tfenc_limits *limits, float *base,
                                  block_scratch *scratch)
{
    size_t rows, keys, head_padded;
    largest_block(layer, limits, &rows, &keys, &head_padded);
    const size_t heads = (size_t)layer->n_heads, bf16 = layer->in_place != 0;
    const size_t parts[] = {
        heads * rows * keys,                                   /* scores */
        bf16 * (heads * rows * keys + 1) / 2,                  /* probabilities */
        bf16 * (heads * rows * head_padded + 1) / 2,           /* queries */
        heads * rows * head_padded,                            /* block_context */
        heads * rows * head_padded,                            /* running */
        heads * PRODUCT_QUERY_BLOCK,                           /* maximum */
        heads * PRODUCT_QUERY_BLOCK,                           /* sum */
        heads * PRODUCT_QUERY_BLOCK,                           /* rescale */
        heads * layer->terms.prepared_floats,                  /* prepared */
        bf16 * key_blocks(limits) * heads * PRODUCT_KEY_BLOCK * head_padded / 2, /* keys */
        bf16 * key_blocks(limits) * heads * PRODUCT_KEY_BLOCK * head_padded / 2, /* values */
    };
    enum { N_PARTS = sizeof parts / sizeof *parts };
    float *at[N_PARTS];
    size_t total = 0;
    for (size_t i = 0; i < N_PARTS; i++) {
        at[i] = base != NULL ? base + total : NULL;
        total += (parts[i] + 15) / 16 * 16;
    }
    if (scratch != NULL)
        *scratch = (block_scratch){.scores = at[0], .probabilities = (uint16_t *)at[1],
                                   .queries = (uint16_t *)at[2], .block_context = at[3],
                                   .running = at[4], .maximum = at[5], .sum = at[6],
                                   .rescale = at[7], .prepared = at[8],
                                   .keys = (uint16_t *)at[9], .values = (uint16_t *)at[10]};
    return total;
}

/* Floats of one thread's part of the workspace (the products' path). */
static size_t thread_floats(const attention *layer, const tfenc_limits *limits)
{
    return block_scratch_place(layer, limits, NULL, NULL);
}

/* bf16 words between two key blocks of a sequence's laid-out K (or V). */
static size_t key_block_slot(const attention *layer, int head_padded)
{
    return (size_t)layer->n_heads * PRODUCT_KEY_BLOCK * (size_t)head_padded;
}

/* Head h's keys and values of key block `block` of one sequence (Q/K/V
 * rows from qkv, keys_seen keys) in bf16 as the products read them: keys
 * [n_padded][head_padded] (B of Q K^T, stored transposed) and values
 * alike (B of P V), zero past the block's keys and head_dim, each query
 * head with its key/value head's copy. Laid out once per sequence, not
 * for each query block that visits them. */
TFENC_VECTOR_CLONES
static void layout_key_block(const attention *layer, const float *qkv, int keys_seen, int h,
                             int block, int head_padded, const block_scratch *scratch)
{
    const int stride = layer->q_width + 2 * layer->kv_width, head_dim = layer->head_dim;
    const int kv_head = h / (layer->n_heads / layer->n_kv_heads);
    const int first = block * PRODUCT_KEY_BLOCK;
    const int keys = keys_seen - first < PRODUCT_KEY_BLOCK ? keys_seen - first : PRODUCT_KEY_BLOCK;
    tfenc_matmul_layout layout = {.struct_size = sizeof layout};
    if (tfenc_matmul_padded_layout(layer->scores_plan, 1, keys, head_dim, &layout) != TFENC_OK)
        return; /* block_shape_of() reports it before a product reads the block */
    const float *key = qkv + layer->q_width + (size_t)first * stride + (size_t)kv_head * head_dim;
    const float *value = key + layer->kv_width;
    const size_t at = (size_t)block * key_block_slot(layer, head_padded) +
                      (size_t)h * layout.n_padded * head_padded;
    uint16_t *key_out = scratch->keys + at, *value_out = scratch->values + at;
    for (int t = 0; t < keys; t++) {
        uint16_t *restrict key_row = key_out + (size_t)t * head_padded;
        uint16_t *restrict value_row = value_out + (size_t)t * head_padded;
        const float *restrict key_in = key + (size_t)t * stride;
        const float *restrict value_in = value + (size_t)t * stride;
#pragma omp simd
        for (int e = 0; e < head_dim; e++) {
            key_row[e] = tfenc_round_to_bf16(key_in[e]);
            value_row[e] = tfenc_round_to_bf16(value_in[e]);
        }
        for (int e = head_dim; e < head_padded; e++)
            key_row[e] = value_row[e] = 0;
    }
    const size_t tail = (size_t)(layout.n_padded - keys) * head_padded;
    memset(key_out + (size_t)keys * head_padded, 0, tail * sizeof *key_out);
    memset(value_out + (size_t)keys * head_padded, 0, tail * sizeof *value_out);
}

/* Head h's queries of a block (bf16): scale Q rounded once, as the fused
 * bf16 kernel rounds them, zero past the rows and head_dim. */
TFENC_VECTOR_CLONES
static void layout_queries(const attention *layer, const float *qkv, int first, int h,
                           const block_shape *shape, int rows_padded, uint16_t *queries)
{
    const int stride = layer->q_width + 2 * layer->kv_width, head_dim = layer->head_dim;
    const int head_padded = shape->head_padded;
    uint16_t *out = queries + (size_t)h * rows_padded * head_padded;
    const float scale = layer->scale;
    for (int r = 0; r < shape->rows; r++) {
        uint16_t *restrict row = out + (size_t)r * head_padded;
        const float *restrict in = qkv + (size_t)(first + r) * stride + (size_t)h * head_dim;
#pragma omp simd
        for (int e = 0; e < head_dim; e++)
            row[e] = tfenc_round_to_bf16(in[e] * scale);
        for (int e = head_dim; e < head_padded; e++)
            row[e] = 0;
    }
    memset(out + (size_t)shape->rows * head_padded, 0,
           (size_t)(rows_padded - shape->rows) * head_padded * sizeof *out);
}

/* Head h's part of a block of scores: the position terms, then per row
 * one step of the online softmax over the keys it sees (the others, and
 * the padding, get probability 0), P rounded to bf16 beside S in bf16
 * jobs (its padded rows zero), the rescale kept for the running context. */
TFENC_VECTOR_CLONES
static void softmax_block_head(const attention *layer, const attention_position_terms *terms,
                               int h, int first, int keys_seen, const block_shape *shape,
                               int rows_padded, const block_scratch *scratch)
{
    float *head = scratch->scores + (size_t)h * shape->score_head;
    const int width = shape->score_stride, first_key = shape->first_key;
    if (terms->add != NULL)
        terms->add(terms->state, h, first, shape->rows, first_key, shape->keys, head, width,
                   terms->prepare != NULL ? scratch->prepared + (size_t)h * terms->prepared_floats
                                          : NULL);
    float *maximum = scratch->maximum + (size_t)h * PRODUCT_QUERY_BLOCK;
    float *sum = scratch->sum + (size_t)h * PRODUCT_QUERY_BLOCK;
    float *rescale = scratch->rescale + (size_t)h * PRODUCT_QUERY_BLOCK;
    uint16_t *probabilities =
        layer->in_place ? scratch->probabilities + (size_t)h * shape->score_head : NULL;
    for (int r = 0; r < shape->rows; r++) {
        float *row = head + (size_t)r * width;
        int lo, hi;
        attention_visible_keys(layer->causal, layer->window, first + r, keys_seen, &lo, &hi);
        lo = lo > first_key ? lo - first_key : 0;
        hi = hi < first_key + shape->keys ? hi - first_key : shape->keys;
        rescale[r] = attention_softmax_row(row, width, lo, hi, &maximum[r], &sum[r]);
        if (probabilities != NULL) {
            uint16_t *probability = probabilities + (size_t)r * width;
            /* a loop of its own: the rounding inside the exponentials'
             * loop took longer than the exponentials */
#pragma omp simd
            for (int c = 0; c < width; c++)
                probability[c] = tfenc_round_to_bf16(row[c]);
        }
    }
    if (probabilities != NULL)
        memset(probabilities + (size_t)shape->rows * width, 0,
               (size_t)(rows_padded - shape->rows) * width * sizeof *probabilities);
}

/* Head h's running context += this block's P V, after the rescale of its
 * softmax step. */
TFENC_VECTOR_CLONES
static void add_block_context(const attention *layer, int h, const block_shape *shape,
                              const block_scratch *scratch)
{
    const int head_dim = layer->head_dim;
    const float *rescale = scratch->rescale + (size_t)h * PRODUCT_QUERY_BLOCK;
    for (int r = 0; r < shape->rows; r++) {
        const size_t at = (size_t)h * shape->context_head + (size_t)r * shape->context_stride;
        float *restrict running = scratch->running + at;
        const float *restrict block = scratch->block_context + at;
        const float factor = rescale[r];
#pragma omp simd
        for (int e = 0; e < head_dim; e++)
            running[e] = running[e] * factor + block[e];
    }
}

/* Context row r of a block: each head's running context divided by its
 * row's sum (0 for a row that saw no key). */
TFENC_VECTOR_CLONES
static void normalise_row(const attention *layer, const block_shape *shape,
                          const block_scratch *scratch, int r, float *out)
{
    const int head_dim = layer->head_dim;
    for (int h = 0; h < layer->n_heads; h++) {
        const float sum = scratch->sum[(size_t)h * PRODUCT_QUERY_BLOCK + r];
        const float inverse = sum > 0.0f ? 1.0f / sum : 0.0f;
        const float *restrict running =
            scratch->running + (size_t)h * shape->context_head + (size_t)r * shape->context_stride;
        float *restrict values = out + (size_t)h * head_dim;
#pragma omp simd
        for (int e = 0; e < head_dim; e++)
            values[e] = running[e] * inverse;
    }
}

/* Q K_b^T and, after the softmax step, P V_b of one key block, every head
 * in one call each: P V into the running context itself for the block's
 * first key block, else beside it and then added. */
static int attend_key_block(tfenc_context *ctx, const attention *layer,
                            const attention_position_terms *terms, const float *qkv, int first,
                            int keys_seen, const block_shape *shape, int rows_padded,
                            int first_of_block, const block_scratch *scratch)
{
    const int d = layer->q_width, head_dim = layer->head_dim, heads = layer->n_heads;
    const int stride = d + 2 * layer->kv_width, group = heads / layer->n_kv_heads;
    const float *keys = qkv + d + (size_t)shape->first_key * stride;
    const size_t slot = key_block_slot(layer, shape->head_padded) *
                        (size_t)(shape->first_key / PRODUCT_KEY_BLOCK);
    float *out = first_of_block ? scratch->running : scratch->block_context;
    tfenc_matmul_args qk = {.struct_size = sizeof qk, .m = shape->rows, .n = shape->keys,
                            .k = head_dim, .b_shared_by = group};
    tfenc_matmul_args pv = {.struct_size = sizeof pv, .m = shape->rows, .n = head_dim,
                            .k = shape->keys, .alpha = 1.0f, .b_shared_by = group};
    if (layer->in_place) {
        qk.alpha = 1.0f; /* the queries hold the scale */
        qk.a_bf16 = scratch->queries;
        qk.b_bf16 = scratch->keys + slot;
        qk.c_padded = scratch->scores;
        pv.a_bf16 = scratch->probabilities;
        pv.b_bf16 = scratch->values + slot;
        pv.c_padded = out;
    } else {
        qk.alpha = layer->scale;
        qk.a = qkv + (size_t)first * stride;
        qk.a_row_stride = stride;
        qk.a_batch_stride = head_dim;
        qk.b = keys;
        qk.b_row_stride = stride;
        qk.b_batch_stride = head_dim;
        qk.c = scratch->scores;
        qk.c_row_stride = shape->score_stride;
        qk.c_batch_stride = (long)shape->score_head;
        pv.a = scratch->scores;
        pv.a_row_stride = shape->score_stride;
        pv.a_batch_stride = (long)shape->score_head;
        pv.b = keys + layer->kv_width;
        pv.b_row_stride = stride;
        pv.b_batch_stride = head_dim;
        pv.c = out;
        pv.c_row_stride = shape->context_stride;
        pv.c_batch_stride = (long)shape->context_head;
    }
    int status = tfenc_matmul(ctx, layer->scores_plan, &qk);
    if (status != TFENC_OK)
        return status;
    TFENC_PARALLEL_FOR(h, heads, (double)heads * shape->rows * shape->keys,
                       softmax_block_head(layer, terms, h, first, keys_seen, shape, rows_padded,
                                          scratch));
    if ((status = tfenc_matmul(ctx, layer->context_plan, &pv)) != TFENC_OK)
        return status;
    if (!first_of_block)
        TFENC_PARALLEL_FOR(h, heads, (double)heads * shape->rows * head_dim,
                           add_block_context(layer, h, shape, scratch));
    return TFENC_OK;
}

/* Query block `first` (PRODUCT_QUERY_BLOCK rows, fewer in the last) of a
 * sequence of `length` tokens of which the first keys_seen are keys, over
 * the key blocks that hold a key one of its rows sees. */
static int attend_query_block(tfenc_context *ctx, const attention *layer,
                              const attention_position_terms *terms, const float *qkv, int length,
                              int keys_seen, int first, float *context,
                              const block_scratch *scratch)
{
    const int d = layer->q_width, stride = d + 2 * layer->kv_width, heads = layer->n_heads;
    const int rows = length - first < PRODUCT_QUERY_BLOCK ? length - first : PRODUCT_QUERY_BLOCK;
    /* The keys any row sees: from the first row's first (a window's start
     * only moves forward with the row) to the last row's last. */
    int lo, hi, unused;
    attention_visible_keys(layer->causal, layer->window, first, keys_seen, &lo, &unused);
    attention_visible_keys(layer->causal, layer->window, first + rows - 1, keys_seen, &unused,
                           &hi);
    if (hi <= lo) { /* a window wholly past the keys: zero contexts */
        for (int r = 0; r < rows; r++)
            memset(context + (size_t)(first + r) * d, 0, (size_t)d * sizeof *context);
        return TFENC_OK;
    }
    block_shape shape;
    int status = block_shape_of(ctx, layer, rows, keys_seen < PRODUCT_KEY_BLOCK ? keys_seen
                                                                                : PRODUCT_KEY_BLOCK,
                                0, &shape);
    if (status != TFENC_OK)
        return status;
    const int rows_padded = layer->in_place ? (int)(shape.context_head / shape.head_padded) : rows;
    if (layer->in_place)
        TFENC_PARALLEL_FOR(h, heads, (double)heads * rows * layer->head_dim,
                           layout_queries(layer, qkv, first, h, &shape, rows_padded,
                                          scratch->queries));
    for (size_t i = 0; i < (size_t)heads * PRODUCT_QUERY_BLOCK; i++) {
        scratch->maximum[i] = -INFINITY;
        scratch->sum[i] = 0.0f;
    }
    if (terms->add != NULL && terms->prepare != NULL)
        for (int h = 0; h < heads; h++)
            terms->prepare(terms->state, h,
                           qkv + (size_t)first * stride + (size_t)h * layer->head_dim, stride,
                           first, rows, scratch->prepared + (size_t)h * terms->prepared_floats);
    const int first_block = lo / PRODUCT_KEY_BLOCK, end_block = (hi - 1) / PRODUCT_KEY_BLOCK + 1;
    for (int block = first_block; status == TFENC_OK && block < end_block; block++) {
        const int first_key = block * PRODUCT_KEY_BLOCK;
        const int keys =
            keys_seen - first_key < PRODUCT_KEY_BLOCK ? keys_seen - first_key : PRODUCT_KEY_BLOCK;
        if ((status = block_shape_of(ctx, layer, rows, keys, first_key, &shape)) == TFENC_OK)
            status = attend_key_block(ctx, layer, terms, qkv, first, keys_seen, &shape,
                                      rows_padded, block == first_block, scratch);
    }
    if (status != TFENC_OK)
        return status;
    TFENC_PARALLEL_FOR(r, rows, (double)rows * d,
                       normalise_row(layer, &shape, scratch, r, context + (size_t)(first + r) * d));
    return TFENC_OK;
}

/* Attention of one sequence of `length` tokens, of which the first
 * `keys_seen` are keys (tfenc_batch.seq_keys): its Q/K/V rows start at
 * `qkv` (row stride q + 2k), its context rows at `context` (row stride q).
 * bf16 products: its K and V laid out once for every query block.
 * thread_part > 0 (a lone sequence, called outside a parallel region):
 * the pool's threads take its query blocks, thread t with the scratch
 * placed thread_part floats * t further on (the laid-out K and V are the
 * first thread's). Each block is the same rows whichever thread runs it,
 * and the products are made for one thread, so the rows' bits do not
 * depend on the threads. */
static int attend_sequence(tfenc_context *ctx, const attention *layer,
                           const attention_position_terms *terms, const float *qkv, int length,
                           int keys_seen, float *context, float *base, size_t thread_part)
{
    const int heads = layer->n_heads;
    block_scratch scratch;
    block_scratch_place(layer, &layer->limits, base, &scratch);
    if (layer->in_place) {
        size_t rows, keys, head_padded;
        largest_block(layer, &layer->limits, &rows, &keys, &head_padded);
        const int blocks = (keys_seen + PRODUCT_KEY_BLOCK - 1) / PRODUCT_KEY_BLOCK;
        TFENC_PARALLEL_FOR(i, heads * blocks, (double)heads * keys_seen * layer->head_dim,
                           layout_key_block(layer, qkv, keys_seen, i % heads, i / heads,
                                            (int)head_padded, &scratch));
    }
    const int query_blocks = (length + PRODUCT_QUERY_BLOCK - 1) / PRODUCT_QUERY_BLOCK;
    if (thread_part > 0 && query_blocks > 1 && layer->threads > 1 && !omp_in_parallel()) {
        int failed = TFENC_OK;
#pragma omp parallel for schedule(dynamic, 1) num_threads(layer->threads)
        for (int block = 0; block < query_blocks; block++) {
            block_scratch own;
            block_scratch_place(layer, &layer->limits,
                                base + (size_t)omp_get_thread_num() * thread_part, &own);
            own.keys = scratch.keys;
            own.values = scratch.values;
            int status = attend_query_block(ctx, layer, terms, qkv, length, keys_seen,
                                            block * PRODUCT_QUERY_BLOCK, context, &own);
            if (status != TFENC_OK) {
#pragma omp atomic write
                failed = status;
            }
        }
        return failed;
    }
    for (int first = 0; first < length; first += PRODUCT_QUERY_BLOCK) {
        int status =
            attend_query_block(ctx, layer, terms, qkv, length, keys_seen, first, context, &scratch);
        if (status != TFENC_OK)
            return status;
    }
    return TFENC_OK;
}

/* Sequence s with the calling thread's blocks (from `base`); the first
 * failure is kept in *failed and stops the sequences not yet started.
 * position_to_content: the group's p2c rows (disentangled), or NULL.
 * thread_part > 0: the threads share the sequence's query blocks. */
static void attend_in_thread(tfenc_context *ctx, const attention *layer, const tfenc_batch *batch,
                             int s, int group_start, const float *qkv, float *context,
                             const float *position_to_content, float *base, size_t thread_part,
                             int *failed)
{
    const int d = layer->q_width, stride = d + 2 * layer->kv_width;
    /* qkv and context start at the group's first token */
    const int start = batch->seq_start[s] - group_start,
              length = batch->seq_start[s + 1] - batch->seq_start[s];
    const int keys_seen = batch->seq_keys != NULL ? batch->seq_keys[s] : length;
    int already;
#pragma omp atomic read
    already = *failed;
    if (length <= 0 || already != TFENC_OK)
        return;
    disentangled_sequence sequence;
    const attention_position_terms terms =
        sequence_terms(layer, &sequence, position_to_content, start, length);
    int status = attend_sequence(ctx, layer, &terms, qkv + (size_t)start * stride, length,
                                 keys_seen, context + (size_t)start * d, base, thread_part);
    if (status != TFENC_OK) {
#pragma omp atomic write
        *failed = status;
    }
}

/* The fused kernel over the (head, query block) items of sequences first ..
 * end - 1 of a group. With shared = 1 the calling thread is one of a team
 * that shares the items (dynamically: blocks near a sequence's edges see
 * fewer keys); each item writes its own context rows and columns. */
static void attend_fused(const attention *layer, const tfenc_batch *batch, int first, int end,
                         int group_start, const float *qkv, float *context,
                         const float *position_to_content, float *transposed, float *scratch,
                         int shared)
{
    const int d = layer->q_width, stride = d + 2 * layer->kv_width, heads = layer->n_heads;
    /* K transposed once for the group (each query block reads each key
     * block it visits; transposing there cost a quarter of the time) */
    const int tokens = batch->seq_start[end] - group_start;
    uint32_t *key_pairs = (uint32_t *)transposed;
    uint32_t *value_pairs =
        key_pairs + (size_t)layer->kv_width / 2 * layer->shape.transposed_stride;
    /* bf16 operands: the keys in pairs of dims once for the group, each
     * sequence's values in pairs of tokens from the row of its first token */
#define PACK_VALUES(s)                                                                        \
    attention_kernel_pack_value_pairs(                                                        \
        &layer->shape, qkv + (size_t)(batch->seq_start[s] - group_start) * stride,            \
        batch->seq_start[(s) + 1] - batch->seq_start[s],                                      \
        value_pairs + (size_t)(batch->seq_start[s] - group_start) * layer->kv_width)
    if (layer->fused_bf16 && shared) {
#pragma omp for schedule(static)
        for (int block = 0; block < tokens; block += ATTENTION_KEY_BLOCK)
            attention_kernel_pack_key_pairs(
                &layer->shape, qkv, block,
                tokens - block < ATTENTION_KEY_BLOCK ? tokens - block : ATTENTION_KEY_BLOCK,
                key_pairs, (uint16_t *)scratch);
#pragma omp for schedule(dynamic, 1)
        for (int s = first; s < end; s++)
            PACK_VALUES(s);
    } else if (layer->fused_bf16) {
        attention_kernel_pack_key_pairs(&layer->shape, qkv, 0, tokens, key_pairs,
                                        (uint16_t *)scratch);
        for (int s = first; s < end; s++)
            PACK_VALUES(s);
    } else if (shared) {
#pragma omp for schedule(static)
        for (int dim = 0; dim < layer->kv_width; dim++)
            attention_kernel_transpose_keys(&layer->shape, qkv, tokens, dim, transposed);
    } else {
        for (int dim = 0; dim < layer->kv_width; dim++)
            attention_kernel_transpose_keys(&layer->shape, qkv, tokens, dim, transposed);
    }
#undef PACK_VALUES
    for (int s = first; s < end; s++) {
        const int start = batch->seq_start[s] - group_start;
        const int length = batch->seq_start[s + 1] - batch->seq_start[s];
        const int keys_seen = batch->seq_keys != NULL ? batch->seq_keys[s] : length;
        const int items = heads * ((length + ATTENTION_QUERY_BLOCK - 1) / ATTENTION_QUERY_BLOCK);
        const float *sequence = qkv + (size_t)start * stride;
        float *out = context + (size_t)start * d;
        disentangled_sequence sequence_state;
        const attention_position_terms terms =
            sequence_terms(layer, &sequence_state, position_to_content, start, length);
#define ATTEND_ITEM(item)                                                                     \
    do {                                                                                      \
        const int h = (item) % heads, first_query = (item) / heads * ATTENTION_QUERY_BLOCK;   \
        const int rows = length - first_query < ATTENTION_QUERY_BLOCK ? length - first_query  \
                                                                      : ATTENTION_QUERY_BLOCK; \
        if (layer->fused_bf16)                                                                \
            attention_kernel_run_bf16(&layer->shape, &terms, sequence, key_pairs + start,     \
                                      value_pairs + (size_t)start * layer->kv_width,         \
                                      keys_seen, h, first_query, rows, out, scratch);         \
        else                                                                                  \
            attention_kernel_run(&layer->shape, &terms, sequence, transposed + start,        \
                                 keys_seen, h, first_query, rows, out, scratch);              \
    } while (0)
        if (shared) {
#pragma omp for schedule(dynamic, 1) nowait
            for (int item = 0; item < items; item++)
                ATTEND_ITEM(item);
        } else {
            for (int item = 0; item < items; item++)
                ATTEND_ITEM(item);
        }
#undef ATTEND_ITEM
    }
}

/* x = attention(x), or with add_input x = x + attention(x), the add in the
 * output projection's epilogue (TFENC_EXTENSION_ADDS_INPUT). */
static int attention_run(const attention *layer, tfenc_context *ctx, tfenc_batch *batch,
                         void *workspace, int add_input)
{
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
        if (batch->seq_keys != NULL && length > 0 &&
            (batch->seq_keys[s] < 1 || batch->seq_keys[s] > length))
            return tfenc_error(ctx, TFENC_ERR_INTERNAL,
                               "mha: sequence %d of %d tokens has %d keys (seq_keys), not "
                               "1..%d", s, length, batch->seq_keys[s], length);
    }
    if (layer->position == POSITION_ROPE && batch->positions == NULL)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "mha: position = rope needs batch positions");

    /* Workspace layout: qkv [group, q+2k] | context [group, q] | disentangled:
     * p2c [group, key_stride] | fused:
     * transposed keys [k, group + 64] and per thread the kernel's blocks;
     * otherwise per thread the products' blocks (block_scratch_place), from
     * the first cache line after the shared parts, where oneDNN reads its
     * operands fastest. The shared parts' offsets are multiples of 16 floats
     * only when d is; the fused kernel needs no more than float alignment. */
    const int q_width = layer->q_width, qkv_width = q_width + 2 * layer->kv_width;
    const int capacity = group_tokens(layer, &layer->limits);
    float *qkv = workspace;
    float *context = qkv + (size_t)capacity * qkv_width;
    float *position_to_content = context + (size_t)capacity * q_width;
    float *scores = position_to_content + position_to_content_floats(layer, &layer->limits);
    if (!layer->fused)
        scores = (float *)(((uintptr_t)scores + 63) / 64 * 64);
    if (layer->position != POSITION_DISENTANGLED)
        position_to_content = NULL;
    const size_t thread_part = thread_floats(layer, &layer->limits);

    int status = TFENC_OK;
    for (int first = 0; status == TFENC_OK && first < batch->n_seq;) {
        /* The group: sequences first .. end - 1, as many as fit. */
        const int group_start = batch->seq_start[first];
        int end = first + 1;
        while (end < batch->n_seq && batch->seq_start[end + 1] - group_start <= capacity)
            end++;
        const int tokens = batch->seq_start[end] - group_start;
        float *x = batch->x + (size_t)group_start * d;

        /* Q, K and V of the group's tokens in one GEMM. */
        status = tfenc_linear_forward(ctx, layer->qkv, x, tokens, qkv);
        if (status != TFENC_OK)
            return status;

        /* qk_norm normalises each head of Q and K, then RoPE turns them
         * (not V) before they meet in the scores. */
        if (layer->q_norm_scale != NULL) {
            qk_normalise(layer, qkv, tokens, qkv_width, layer->n_heads, layer->q_norm_scale);
            qk_normalise(layer, qkv + q_width, tokens, qkv_width, layer->n_kv_heads,
                         layer->k_norm_scale);
        }
        if (layer->position == POSITION_ROPE) {
            const int32_t *positions = batch->positions + group_start;
            rope_apply(layer, qkv, tokens, qkv_width, layer->n_heads, positions);
            rope_apply(layer, qkv + q_width, tokens, qkv_width, layer->n_kv_heads, positions);
        }
        /* DeBERTa's p2c terms: every key against the relative embeddings it meets. */
        if (position_to_content != NULL)
            disentangled_fill_position_to_content(&layer->disentangled, qkv + q_width, qkv_width,
                                                  batch->seq_start + first, end - first,
                                                  position_to_content);

        int failed = TFENC_OK;
        if (layer->fused) {
            /* Every (sequence, head, query block) is independent: the pool's
             * threads share them, each with its own scratch; a long lone
             * sequence keeps them all busy too. */
            const size_t per_thread =
                attention_kernel_scratch_floats(&layer->shape, &layer->terms);
            float *transposed = scores; /* then each thread's scratch */
            float *scratch = transposed + transposed_key_floats(layer);
            if (layer->threads > 1 && !omp_in_parallel()) {
#pragma omp parallel num_threads(layer->threads)
                attend_fused(layer, batch, first, end, group_start, qkv, context,
                             position_to_content, transposed,
                             scratch + (size_t)omp_get_thread_num() * per_thread, 1);
            } else {
                attend_fused(layer, batch, first, end, group_start, qkv, context,
                             position_to_content, transposed, scratch, 0);
            }
        /* Sequences are independent: with several, the pool's threads take
         * them one at a time (one parallel region per group, each thread
         * with its own tile of scores); a lone sequence's query tiles are
         * shared by the threads instead (not DeBERTa's: its terms keep
         * per-sequence state that its tiles would share). */
        } else if (end - first > 1 && layer->threads > 1 && !omp_in_parallel()) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(layer->threads)
            for (int s = first; s < end; s++)
                attend_in_thread(ctx, layer, batch, s, group_start, qkv, context,
                                 position_to_content,
                                 scores + (size_t)omp_get_thread_num() * thread_part, 0,
                                 &failed);
        } else {
            /* (no parallel region at all: libgomp allocates a team even for one thread) */
            const size_t tiles_shared =
                layer->position != POSITION_DISENTANGLED ? thread_part : 0;
            for (int s = first; s < end; s++)
                attend_in_thread(ctx, layer, batch, s, group_start, qkv, context,
                                 position_to_content, scores, tiles_shared, &failed);
        }
        if (failed != TFENC_OK)
            return failed;

        /* Output projection back into the group's activations (which
         * hold the group's input until then). */
        tfenc_linear_args projection = {.struct_size = sizeof projection, .x = context,
                                        .x_dtype = TFENC_FLOAT32, .y = x,
                                        .y_dtype = TFENC_FLOAT32, .rows = tokens,
                                        .activation = TFENC_ACTIVATION_NONE,
                                        .residual = add_input ? x : NULL};
        status = tfenc_linear_run(ctx, layer->out, &projection);
        first = end;
    }
    return status;
}

static int attention_forward(void *instance, tfenc_context *ctx, tfenc_batch *batch,
                             void *workspace)
{
    return attention_run(instance, ctx, batch, workspace, 0);
}

static int attention_forward_adding_input(void *instance, tfenc_context *ctx,
                                          tfenc_batch *batch, void *workspace)
{
    return attention_run(instance, ctx, batch, workspace, 1);
}

static const void *attention_extension(const char *uri)
{
    static const tfenc_forward_adding_input adds_input = {sizeof adds_input,
                                                          attention_forward_adding_input};
    return strcmp(uri, TFENC_EXTENSION_ADDS_INPUT) == 0 ? &adds_input : NULL;
}

static size_t attention_workspace_size(const void *instance, const tfenc_limits *limits)
{
    const attention *layer = instance;
    size_t tokens = (size_t)group_tokens(layer, limits);
    /* the group's keys transposed and per thread the fused kernel's blocks,
     * or per thread the products' blocks (from a cache line: 16 floats more) */
    size_t per_thread = layer->fused
                            ? attention_kernel_scratch_floats(&layer->shape, &layer->terms)
                            : thread_floats(layer, limits);
    size_t shared = (layer->fused ? transposed_key_floats(layer) : 16) +
                    position_to_content_floats(layer, limits);
    return (tokens * (2 * (size_t)layer->q_width + 2 * (size_t)layer->kv_width) + shared +
            (size_t)layer->threads * per_thread) *
           sizeof(float);
}

static double attention_flops_per_token(const void *instance, double mean_seq_len)
{
    const attention *layer = instance;
    double d = layer->d_model, q = layer->q_width, k = layer->kv_width;
    /* Projections: 2 flops per weight (QKV is (q + 2k) x d, output d x q);
     * attention: Q K^T and P V, each 2 * L * q per token summed over heads;
     * disentangled: each term a token's Q (c2p) or K (p2c) against the
     * relative embeddings it meets (disentangled_position.h). */
    double terms = 0.0;
    if (layer->position == POSITION_DISENTANGLED)
        terms = disentangled_flops_per_token(&layer->disentangled, mean_seq_len);
    return 2.0 * ((q + 2.0 * k) * d + d * q) + 4.0 * mean_seq_len * q + terms;
}

static void attention_destroy(void *instance)
{
    attention *layer = instance;
    if (layer == NULL)
        return;
    /* The linear maps and products belong to the host, which frees them after destroy(). */
    free(layer->rope_inverse_frequency);
    free(layer->q_norm_scale);
    free(layer->k_norm_scale);
    free(layer->alibi_slopes);
    free(layer->relative_bias);
    disentangled_position_free(&layer->disentangled);
    free(layer);
}

/* The keys of position = disentangled (DeBERTa-v2/v3), with the scale's
 * default, 1 / sqrt(head_dim (1 + the number of terms)), where *scale is
 * NAN (absent). */
static int read_disentangled_params(tfenc_context *ctx, tfenc_params *params, attention *layer,
                                    double *scale)
{
    disentangled_settings *settings = &layer->disentangled_settings;
    long buckets, max_relative;
    int terms, status;
    if ((status = tfenc_param_int(params, "position_buckets", 256, &buckets)) != TFENC_OK ||
        (status = tfenc_param_int(params, "max_relative_positions", 512, &max_relative)) !=
            TFENC_OK ||
        (status = tfenc_param_choice(params, "relative_terms", relative_terms_names, TERMS_BOTH,
                                     &terms)) != TFENC_OK ||
        (status = tfenc_param_bool(params, "share_att_key", 1, &settings->share_att_key)) !=
            TFENC_OK ||
        (status = tfenc_param_bool(params, "relative_norm", 1, &settings->relative_norm)) !=
            TFENC_OK ||
        (status = tfenc_param_float(params, "relative_norm_eps", 1e-7,
                                    &settings->relative_norm_eps)) != TFENC_OK)
        return status;
    settings->position_buckets = (int)buckets;
    settings->max_relative_positions = (int)max_relative;
    settings->content_to_position = terms != TERMS_POSITION_TO_CONTENT;
    settings->position_to_content = terms != TERMS_CONTENT_TO_POSITION;
    if (layer->position != POSITION_DISENTANGLED)
        return TFENC_OK;
    /* transformers' log buckets divide by log((max - 1) / (buckets / 2)) */
    if (buckets > 0 && (buckets < 2 || max_relative - 1 <= buckets / 2))
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "mha: max_relative_positions = %ld must exceed position_buckets / 2 "
                           "+ 1 = %ld (and position_buckets, when not 0, be at least 2)",
                           max_relative, buckets / 2 + 1);
    if (layer->n_kv_heads != layer->n_heads)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "mha: position = disentangled needs n_kv_heads = n_heads (%d), found "
                           "%d", layer->n_heads, layer->n_kv_heads);
    if (isnan(*scale))
        *scale = 1.0 / sqrt((double)layer->head_dim *
                            (1 + settings->content_to_position + settings->position_to_content));
    return TFENC_OK;
}

/* The turning rate of RoPE pair `pair` of `dims` rotated features.
 * rope_scaling = ntk is the NTK-aware scaling of the GTE v1.5 and mGTE code
 * (Alibaba-NLP new-impl, NTKScalingRotaryEmbedding, after
 * https://kexue.fm/archives/9706), which builds its table for
 * max_position_embeddings x factor positions at creation, so that the
 * scaled rates apply to every length: without mixed_b the base is theta x
 * factor and every rate is divided by factor^(2/dims) (the lowest rate ends
 * divided by factor exactly, the highest by hardly anything); with mixed_b
 * the base stays and rate i (from 0) is divided by
 * factor^(((i + 1) / (dims / 2))^mixed_b). mixed_b NAN: absent. */
static double rope_frequency(int pair, int dims, double theta, int scaling, double factor,
                             double mixed_b)
{
    double exponent = -2.0 * pair / (double)dims;
    if (scaling != ROPE_SCALING_NTK)
        return pow(theta, exponent);
    if (isnan(mixed_b))
        return pow(theta * factor, exponent) / pow(factor, 2.0 / dims);
    return pow(theta, exponent) / pow(factor, pow((pair + 1) / (dims / 2.0), mixed_b));
}

/* Reads every key of the section, so that the host's unknown-key check sees
 * them all as known even when the layer does not use them. */
static int read_params(tfenc_context *ctx, const tfenc_layer_init *init, attention *layer,
                       int *bias, int *out_bias, int *qkv_layout, int *qk_norm,
                       double *qk_norm_weight_offset)
{
    tfenc_params *params = init->params;
    long n_heads, n_kv_heads, head_dim, rope_dims, num_buckets, max_distance, window;
    double rope_theta, rope_factor, rope_mixed_b, scale;
    int position, rope_style, rope_scaling, status;

    /* Each key's own range is declared in mha_params and checked by the
     * host before create(), on the whole value (no long-to-int wrap); what
     * is left here relates keys to each other or to the model. */
    if ((status = tfenc_param_int(params, "n_heads", 0, &n_heads)) != TFENC_OK ||
        (status = tfenc_param_int(params, "n_kv_heads", -1, &n_kv_heads)) != TFENC_OK ||
        (status = tfenc_param_int(params, "head_dim", 0, &head_dim)) != TFENC_OK ||
        (status = tfenc_param_bool(params, "qk_norm", 0, qk_norm)) != TFENC_OK ||
        (status = tfenc_param_float(params, "qk_norm_eps", 1e-6, &layer->qk_norm_eps)) !=
            TFENC_OK ||
        (status = tfenc_param_float(params, "qk_norm_weight_offset", 0.0,
                                    qk_norm_weight_offset)) != TFENC_OK ||
        (status = tfenc_param_bool(params, "bias", 1, bias)) != TFENC_OK ||
        (status = tfenc_param_bool(params, "out_bias", *bias, out_bias)) != TFENC_OK ||
        (status = tfenc_param_choice(params, "qkv", qkv_names, QKV_AUTO, qkv_layout)) != TFENC_OK ||
        (status = tfenc_param_choice(params, "kernel", kernel_names, KERNEL_AUTO,
                                     &layer->kernel)) != TFENC_OK ||
        (status = tfenc_param_bool(params, "causal", 0, &layer->causal)) != TFENC_OK ||
        (status = tfenc_param_int(params, "window", 0, &window)) != TFENC_OK ||
        (status = tfenc_param_choice(params, "position", position_names, POSITION_NONE,
                                     &position)) != TFENC_OK ||
        (status = tfenc_param_int(params, "num_buckets", 32, &num_buckets)) != TFENC_OK ||
        (status = tfenc_param_int(params, "max_distance", 128, &max_distance)) != TFENC_OK ||
        (status = tfenc_param_float(params, "rope_theta", 10000.0, &rope_theta)) != TFENC_OK ||
        (status = tfenc_param_int(params, "rope_dims", -1, &rope_dims)) != TFENC_OK ||
        (status = tfenc_param_choice(params, "rope_style", rope_style_names, ROPE_HALF,
                                     &rope_style)) != TFENC_OK ||
        (status = tfenc_param_choice(params, "rope_scaling", rope_scaling_names,
                                     ROPE_SCALING_NONE, &rope_scaling)) != TFENC_OK ||
        (status = tfenc_param_float(params, "rope_factor", 1.0, &rope_factor)) != TFENC_OK ||
        (status = tfenc_param_float(params, "rope_mixed_b", NAN, &rope_mixed_b)) != TFENC_OK ||
        (status = tfenc_param_float(params, "scale", NAN, &scale)) != TFENC_OK)
        return status;

    int d = init->model.d_model;
    if (d <= 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "mha: d_model must be positive, found %d", d);
    if (n_heads == 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "mha: key 'n_heads' is required");
    /* Without head_dim the heads split d_model; with it (Qwen3, Gemma3) Q
     * may be wider or narrower than d_model, and the output map brings it
     * back. */
    if (head_dim == 0 && d % n_heads != 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "mha: n_heads = %ld does not divide d_model = %d (or give head_dim)",
                           n_heads, d);
    if (n_kv_heads < 0)
        n_kv_heads = n_heads;
    if (n_heads % n_kv_heads != 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "mha: n_kv_heads = %ld must divide n_heads = %ld", n_kv_heads,
                           n_heads);
    layer->d_model = d;
    layer->n_heads = (int)n_heads;
    layer->n_kv_heads = (int)n_kv_heads;
    layer->head_dim = head_dim > 0 ? (int)head_dim : d / (int)n_heads;
    if ((long long)layer->head_dim * n_heads > INT32_MAX / 4)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "mha: n_heads = %ld times head_dim = %d is too wide", n_heads,
                           layer->head_dim);
    layer->q_width = layer->n_heads * layer->head_dim;
    layer->kv_width = layer->n_kv_heads * layer->head_dim;
    layer->position = (enum position_kind)position;
    layer->rope_style = (enum rope_style)rope_style;

    if (rope_dims < 0)
        rope_dims = layer->head_dim;
    if (layer->position == POSITION_ROPE &&
        (rope_dims > layer->head_dim || rope_dims % 2 != 0))
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "mha: rope_dims = %ld must be even and at most head_dim = %d",
                           rope_dims, layer->head_dim);
    layer->rope_dims = (int)rope_dims;
    /* A quarter of the buckets are exact distances; the logarithmic ones
     * must reach beyond them. */
    if (layer->position == POSITION_BUCKETS && max_distance <= num_buckets / 4)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "mha: max_distance = %ld must be above num_buckets / 4 = %ld",
                           max_distance, num_buckets / 4);
    layer->window = (int)window;
    layer->num_buckets = (int)num_buckets;
    layer->max_distance = (int)max_distance;

    if ((status = read_disentangled_params(ctx, params, layer, &scale)) != TFENC_OK)
        return status;
    /* NAN stands for "absent": no job can spell the default, which depends on head_dim. */
    if (isnan(scale))
        scale = 1.0 / sqrt((double)layer->head_dim);
    layer->scale = (float)scale;

    if (layer->position == POSITION_ROPE) {
        int pairs = layer->rope_dims / 2;
        layer->rope_inverse_frequency = malloc((size_t)pairs * sizeof(float));
        if (layer->rope_inverse_frequency == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "mha: out of memory for RoPE table");
        /* float, as the references' tables are */
        for (int i = 0; i < pairs; i++)
            layer->rope_inverse_frequency[i] = (float)rope_frequency(
                i, layer->rope_dims, rope_theta, rope_scaling, rope_factor, rope_mixed_b);
    }
    if (layer->position == POSITION_ALIBI) {
        layer->alibi_slopes = malloc((size_t)layer->n_heads * sizeof(float));
        if (layer->alibi_slopes == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "mha: out of memory for ALiBi slopes");
        alibi_fill_slopes(layer->alibi_slopes, layer->n_heads);
    }
    return TFENC_OK;
}

/* The bias of every head for every relative position a sequence within the
 * limits can hold, from the bucket table [rows >= num_buckets, n_heads]. */
static int load_relative_bias(tfenc_context *ctx, const tfenc_layer_init *init, attention *layer)
{
    int64_t dims[2] = {-1, layer->n_heads};
    const float *table;
    int status = tfenc_weight_load(init->weights, "relative_attention_bias", 2, dims, &table);
    if (status != TFENC_OK)
        return status;
    if (dims[0] < layer->num_buckets)
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                           "mha: relative_attention_bias has %lld rows, fewer than num_buckets "
                           "= %d", (long long)dims[0], layer->num_buckets);
    int longest = layer->limits.max_seq_len > 0 ? layer->limits.max_seq_len : 1;
    size_t span = 2 * (size_t)longest - 1;
    layer->relative_bias = malloc((size_t)layer->n_heads * span * sizeof(float));
    if (layer->relative_bias == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY,
                           "mha: out of memory for the relative position bias");
    for (int delta = 1 - longest; delta < longest; delta++) {
        int bucket = relative_bucket(delta, layer->num_buckets, layer->max_distance);
        for (int h = 0; h < layer->n_heads; h++)
            layer->relative_bias[(size_t)h * span + (size_t)(delta + longest - 1)] =
                table[(size_t)bucket * layer->n_heads + h];
    }
    return TFENC_OK;
}

/* qk_norm's scales, weight_offset + q_norm_weight and + k_norm_weight
 * (each [head_dim]), added in float32 as Gemma3RMSNorm adds 1.0. */
static int load_qk_norm(tfenc_context *ctx, const tfenc_layer_init *init, attention *layer,
                        float weight_offset)
{
    static const char *const names[2] = {"q_norm_weight", "k_norm_weight"};
    float **scales[2] = {&layer->q_norm_scale, &layer->k_norm_scale};
    for (int i = 0; i < 2; i++) {
        int64_t dims[1] = {layer->head_dim};
        const float *weight;
        int status = tfenc_weight_load(init->weights, names[i], 1, dims, &weight);
        if (status != TFENC_OK)
            return status;
        *scales[i] = malloc((size_t)layer->head_dim * sizeof(float));
        if (*scales[i] == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "mha: out of memory for qk_norm");
        for (int e = 0; e < layer->head_dim; e++)
            (*scales[i])[e] = weight_offset + weight[e];
    }
    return TFENC_OK;
}

static int load_weights(tfenc_context *ctx, const tfenc_layer_init *init, attention *layer,
                        int bias, int out_bias, int qkv_layout)
{
    static const char *const separate_weights[] = {"q_weight", "k_weight", "v_weight"};
    static const char *const separate_biases[] = {"q_bias", "k_bias", "v_bias"};
    static const char *const fused_weight[] = {"qkv_weight"};
    static const char *const fused_bias[] = {"qkv_bias"};
    static const char *const out_weight[] = {"out_weight"};
    static const char *const out_bias_name[] = {"out_bias"};
    int d = layer->d_model, qkv_width = layer->q_width + 2 * layer->kv_width, width, status;

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
    if (width != qkv_width)
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                           "mha: %s has %d output rows, expected (n_heads + 2 * n_kv_heads) * "
                           "head_dim = %d",
                           qkv_layout == QKV_FUSED ? "qkv_weight" : "q_weight+k_weight+v_weight",
                           width, qkv_width);

    status = tfenc_linear_load(init->weights, 1, out_weight, out_bias ? out_bias_name : NULL,
                               layer->q_width, &width, &layer->out);
    if (status != TFENC_OK)
        return status;
    if (width != d)
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                           "mha: out_weight has %d output rows, expected d_model = %d", width, d);
    /* The output projection's kind that adds the block's input where it
     * writes (attention_forward_adding_input; any residual prepares it). */
    const float any_residual = 0.0f;
    tfenc_linear_args adding = {.struct_size = sizeof adding, .x_dtype = TFENC_FLOAT32,
                                .y_dtype = TFENC_FLOAT32, .rows = 0,
                                .activation = TFENC_ACTIVATION_NONE, .residual = &any_residual};
    if ((status = tfenc_linear_run(ctx, layer->out, &adding)) != TFENC_OK)
        return status;

    /* fp32 runs the fused kernel, and so do bf16 and int8 jobs where the
     * CPU has AVX512_BF16 dot products (the kernel on bf16 operands: level
     * with oneDNN's products at head_dim 32, 3-15% ahead at 64, and no
     * [heads, tile, L] scores); elsewhere their products run on the host
     * (oneDNN's bf16 beats the float32 kernel there). The job may choose
     * (`kernel`): the fused kernel (float32 where bf16 cannot run), or the
     * host's products (fp32 on OpenBLAS in an fp32 job, which lets a
     * machine without bf16 products run that path too). */
    const int products_in_float32 = tfenc_linear_dtype(layer->qkv) == TFENC_FLOAT32;
    const int bf16_kernel = !products_in_float32 && layer->head_dim % 32 == 0 &&
                            attention_kernel_bf16_available();
    layer->fused = layer->kernel == KERNEL_FUSED ||
                   (layer->kernel == KERNEL_AUTO && (products_in_float32 || bf16_kernel));
    layer->fused_bf16 = layer->fused && bf16_kernel;
    if (layer->position == POSITION_BUCKETS && (status = load_relative_bias(ctx, init, layer)) !=
                                                   TFENC_OK)
        return status;
    if (layer->position == POSITION_DISENTANGLED &&
        (status = disentangled_position_load(ctx, init->weights, &layer->disentangled_settings,
                                             d, layer->n_heads, layer->limits.max_seq_len,
                                             layer->scale, qkv_layout == QKV_FUSED, bias,
                                             &layer->disentangled)) != TFENC_OK)
        return status;
    if (layer->fused)
        return TFENC_OK;
    /* The products of forward(): one block of queries against one block of
     * keys, every head at once, whatever the sequences' lengths. */
    const int longest = init->limits.max_seq_len > 0 ? init->limits.max_seq_len : 1;
    const int rows = longest < PRODUCT_QUERY_BLOCK ? longest : PRODUCT_QUERY_BLOCK;
    const int keys = longest < PRODUCT_KEY_BLOCK ? longest : PRODUCT_KEY_BLOCK;
    tfenc_matmul_shape scores = {.struct_size = sizeof scores, .batch = layer->n_heads,
                                 .m = rows, .n = keys, .k = layer->head_dim,
                                 .b_transposed = 1};
    tfenc_matmul_shape context = {.struct_size = sizeof context, .batch = layer->n_heads,
                                  .m = rows, .n = layer->head_dim, .k = keys,
                                  .b_transposed = 0};
    if ((status = tfenc_matmul_plan_create(init->weights, &scores, &layer->scores_plan)) !=
            TFENC_OK ||
        (status = tfenc_matmul_plan_create(init->weights, &context, &layer->context_plan)) !=
            TFENC_OK)
        return status;
    /* bf16 products copy their operands into a padded layout: keep every
     * operand in it (float32 products read ours). */
    tfenc_matmul_layout layout = {.struct_size = sizeof layout};
    layer->in_place = tfenc_matmul_padded_layout(layer->scores_plan, 1, 1, 1, &layout) == TFENC_OK;
    return TFENC_OK;
}

static int attention_create(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    attention *layer = calloc(1, sizeof *layer);
    if (layer == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "mha: out of memory");
    layer->limits = init->limits;
    layer->threads = omp_get_max_threads();
    int bias, out_bias, qkv_layout, qk_norm;
    double qk_norm_weight_offset;
    int status = read_params(ctx, init, layer, &bias, &out_bias, &qkv_layout, &qk_norm,
                             &qk_norm_weight_offset);
    if (status == TFENC_OK)
        status = load_weights(ctx, init, layer, bias, out_bias, qkv_layout);
    if (status == TFENC_OK && qk_norm)
        status = load_qk_norm(ctx, init, layer, (float)qk_norm_weight_offset);
    if (status == TFENC_OK) {
        layer->terms = (attention_position_terms){
            .state = layer,
            .add = layer->position == POSITION_ALIBI          ? alibi_add
                   : layer->position == POSITION_BUCKETS      ? buckets_add
                   : layer->position == POSITION_DISENTANGLED ? disentangled_add
                                                              : NULL};
        if (layer->position == POSITION_DISENTANGLED && layer->disentangled.content_to_position) {
            layer->terms.prepare = disentangled_prepare;
            layer->terms.prepared_floats = disentangled_prepared_floats(&layer->disentangled);
        }
        layer->shape = (attention_kernel_shape){
            .head_dim = layer->head_dim, .heads_per_kv = layer->n_heads / layer->n_kv_heads,
            .row_stride = layer->q_width + 2 * layer->kv_width, .key_offset = layer->q_width,
            .value_offset = layer->kv_width, .context_stride = layer->q_width,
            .scale = layer->scale, .causal = layer->causal, .window = layer->window,
            .transposed_stride = group_tokens(layer, &layer->limits) + ATTENTION_KEY_BLOCK,
            .value_pair_stride = layer->kv_width};
    }
    if (status != TFENC_OK) {
        attention_destroy(layer);
        return status;
    }
    *instance = layer;
    return TFENC_OK;
}

/* The keys read_params() reads (shown by --list-plugins). */
static const tfenc_param_info mha_params[] = {
    {"n_heads", TFENC_PARAM_INT, NULL, "query heads, required; must divide d_model unless "
     "head_dim is given",
     TFENC_PARAM_RANGE(1, 65536)},
    {"n_kv_heads", TFENC_PARAM_INT, NULL,
     "key/value heads (grouped-query attention; default: n_heads), must divide n_heads; query "
     "head h uses key/value head h / (n_heads / n_kv_heads)",
     TFENC_PARAM_RANGE(1, 65536)},
    {"head_dim", TFENC_PARAM_INT, NULL,
     "features of each head (default: d_model / n_heads); Q and the context are n_heads * "
     "head_dim wide, and out_weight maps them back to d_model (Qwen3, Gemma3)",
     TFENC_PARAM_RANGE(1, 65536)},
    {"qk_norm", TFENC_PARAM_BOOL, "false",
     "RMS-normalise each head of Q and K (weights q_norm_weight, k_norm_weight [head_dim]) "
     "before RoPE (Qwen3, Gemma3)", TFENC_PARAM_NO_RANGE},
    {"qk_norm_eps", TFENC_PARAM_FLOAT, "1e-6", "qk_norm: added to the mean square",
     TFENC_PARAM_AT_LEAST(0)},
    {"qk_norm_weight_offset", TFENC_PARAM_FLOAT, "0",
     "qk_norm: scale by weight_offset + weight (Gemma's norms: 1)", TFENC_PARAM_NO_RANGE},
    {"bias", TFENC_PARAM_BOOL, "true", "the Q/K/V and output projections have biases", TFENC_PARAM_NO_RANGE},
    {"out_bias", TFENC_PARAM_BOOL, NULL,
     "the output projection has a bias (default: bias; Qwen2: Q/K/V do, the output does not)", TFENC_PARAM_NO_RANGE},
    {"qkv", TFENC_PARAM_CHOICE, "auto",
     "auto, separate or fused (auto: fused when qkv_weight exists)", TFENC_PARAM_NO_RANGE},
    {"kernel", TFENC_PARAM_CHOICE, "auto",
     "auto, fused or products: the fused kernel (key blocks in cache; bf16 operands in bf16 "
     "and int8 jobs on CPUs with AVX512_BF16 when head_dim is a multiple of 32, else float32) "
     "or the host's batched products (bf16 on oneDNN in bf16 and int8 jobs, float32 on "
     "OpenBLAS in fp32 ones); auto: fused, except in bf16 and int8 jobs that the bf16 kernel "
     "cannot run (products there)", TFENC_PARAM_NO_RANGE},
    {"causal", TFENC_PARAM_BOOL, "false",
     "token i attends to tokens j <= i only (decoder embedders)", TFENC_PARAM_NO_RANGE},
    {"window", TFENC_PARAM_INT, "0",
     "> 0: token i attends to tokens with |i - j| <= window only (ModernBERT's local layers)",
     TFENC_PARAM_RANGE(0, INT32_MAX / 2)},
    {"position", TFENC_PARAM_CHOICE, "none",
     "none, rope (rotary, on Q and K), alibi, relative_buckets (MPNet's bucketed relative "
     "bias) or disentangled (DeBERTa-v2/v3's c2p and p2c terms)", TFENC_PARAM_NO_RANGE},
    {"num_buckets", TFENC_PARAM_INT, "32",
     "relative_buckets: buckets; a quarter are exact distances, a quarter logarithmic, each "
     "for keys before and after the query",
     TFENC_PARAM_RANGE(4, 65536)},
    {"max_distance", TFENC_PARAM_INT, "128",
     "relative_buckets: distance from which the last bucket applies, above num_buckets / 4",
     TFENC_PARAM_RANGE(1, INT32_MAX / 2)},
    {"position_buckets", TFENC_PARAM_INT, "256",
     "disentangled: relative embeddings per side; distances up to half of them exact, "
     "log-spaced beyond (0: exact distances up to max_relative_positions)",
     TFENC_PARAM_RANGE(0, 65536)},
    {"max_relative_positions", TFENC_PARAM_INT, "512",
     "disentangled: the distance the last log bucket reaches", TFENC_PARAM_RANGE(1, 65536)},
    {"relative_terms", TFENC_PARAM_CHOICE, "both",
     "disentangled: both, c2p or p2c (DeBERTa's pos_att_type; c2p = q_i . k_rel, p2c = k_j . "
     "q_rel)", TFENC_PARAM_NO_RANGE},
    {"share_att_key", TFENC_PARAM_BOOL, "true",
     "disentangled: the relative embeddings go through the layer's K and Q maps; false: "
     "through position_key_* and position_query_*", TFENC_PARAM_NO_RANGE},
    {"relative_norm", TFENC_PARAM_BOOL, "true",
     "disentangled: a LayerNorm of the relative embeddings (relative_norm_weight, "
     "relative_norm_bias)", TFENC_PARAM_NO_RANGE},
    {"relative_norm_eps", TFENC_PARAM_FLOAT, "1e-7",
     "disentangled: eps of that LayerNorm", TFENC_PARAM_AT_LEAST(0)},
    {"rope_theta", TFENC_PARAM_FLOAT, "10000", "RoPE frequency base", TFENC_PARAM_ABOVE(0)},
    {"rope_dims", TFENC_PARAM_INT, NULL,
     "rotate the first rope_dims features of each head, even, at most the head size (default: "
     "the head size)",
     TFENC_PARAM_RANGE(2, 65536)},
    {"rope_style", TFENC_PARAM_CHOICE, "half",
     "half (GPT-NeoX/LLaMA pairs i, i + rope_dims/2) or interleaved (GPT-J pairs 2i, 2i+1)", TFENC_PARAM_NO_RANGE},
    {"rope_scaling", TFENC_PARAM_CHOICE, "none",
     "none, or ntk: the fixed NTK-aware scaling of GTE v1.5 and mGTE (Alibaba-NLP new-impl) at "
     "every length: base rope_theta x rope_factor, rates divided by rope_factor^(2/rope_dims); "
     "with rope_mixed_b, base rope_theta and rate i divided by "
     "rope_factor^(((i+1)/(rope_dims/2))^rope_mixed_b)", TFENC_PARAM_NO_RANGE},
    {"rope_factor", TFENC_PARAM_FLOAT, "1", "rope_scaling = ntk: the factor",
     TFENC_PARAM_AT_LEAST(1)},
    {"rope_mixed_b", TFENC_PARAM_FLOAT, NULL,
     "rope_scaling = ntk: the mixed form's exponent b (default: the fixed form)",
     TFENC_PARAM_ABOVE(0)},
    {"scale", TFENC_PARAM_FLOAT, NULL,
     "multiplies Q K^T (default: 1/sqrt(head size); disentangled: 1/sqrt(head size x (1 + "
     "terms)))", TFENC_PARAM_NO_RANGE},
    {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE},
};

TFENC_PLUGIN_TYPES("mha");

static const tfenc_layer_descriptor mha_descriptor = {
    TFENC_DESCRIPTOR_INIT,
    .key_masking = TFENC_KEY_MASKING_APPLIED,
    .type = "mha",
    .description = "multi-head self-attention over packed sequences (RoPE, ALiBi, relative "
                   "buckets, DeBERTa's disentangled terms, causal, grouped-query)",
    .params = mha_params,
    .create = attention_create,
    .forward = attention_forward,
    .destroy = attention_destroy,
    .workspace_size = attention_workspace_size,
    .flops_per_token = attention_flops_per_token,
    .extension = attention_extension,
};

TFENC_EXPORT const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index);

TFENC_EXPORT const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index)
{
    return index == 0 ? &mha_descriptor : NULL;
}
