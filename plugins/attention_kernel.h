/* The fused attention kernel of the mha plugin (plugins/attention.c): one
 * call computes the context of one query block of one head of one sequence,
 * visiting the keys block by block (scores, position terms, an online
 * softmax and P V), so that no [L, L] score matrix exists and a local
 * window costs O(L x window); and the interface through which position
 * terms reach a tile of scores, shared with the plugin's other path. */
#ifndef TFENC_PLUGINS_ATTENTION_KERNEL_H
#define TFENC_PLUGINS_ATTENTION_KERNEL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "tfenc/plugin_math.h"

/* Query rows per call and keys per step. A step's working set is the
 * transposed key block [head_dim, 64], the scores [64, 64] and the running
 * context [64, head_dim]: 48 KiB at head_dim 64, within L1/L2. Key blocks
 * start at multiples of ATTENTION_KEY_BLOCK from the sequence start and
 * query blocks at multiples of ATTENTION_QUERY_BLOCK, whatever the thread
 * count: the arithmetic of a row is fixed, so outputs are bitwise the same
 * across layouts and thread counts. */
#define ATTENTION_QUERY_BLOCK 64
#define ATTENTION_KEY_BLOCK 64

/* Position terms added to a tile of one head's scores (after the scale,
 * before the softmax). Every path of the plugin calls them the same way:
 *
 *   add(state, head, first_query, rows, first_key, keys, tile, tile_stride)
 *
 * MUST add the terms of queries first_query .. first_query + rows - 1 and
 * keys first_key .. first_key + keys - 1 (positions inside the sequence)
 * to tile[r * tile_stride + c], and MUST NOT depend on anything else: the
 * kernel calls it for whichever blocks it visits. NULL: no terms (none,
 * RoPE, which turns Q and K before the scores).
 *
 * Terms whose per-query work is a product, not a lookup, split it: DeBERTa-
 * v2/v3's disentangled attention (disentangled_position.h) adds
 *   content-to-position  q_i . k_rel[row(i - j)]
 *   position-to-content  k_j . q_rel[row(i - j)]
 * over 2 span relative embeddings; per query there are only 2 span
 * distinct c2p values (and in a sequence of n tokens at most n), so
 * `prepare` runs once per (query block, head) before the key blocks and
 * fills scratch with c2p[r][b] for the embeddings b the rows meet (rows x
 * 2 span floats, padded; what add() cannot read it may leave unset),
 * p2c[j][b] is filled once per group of sequences on the host side, and
 * `add` only looks both up. Every path calls prepare (the fused
 * kernel per query block; the host-product path per ATTENTION_QUERY_BLOCK
 * rows of its tiles) with at most ATTENTION_QUERY_BLOCK rows. */
typedef struct attention_position_terms {
    const void *state;
    void (*add)(const void *state, int head, int first_query, int rows, int first_key, int keys,
                float *tile, int tile_stride, const float *prepared);
    /* Optional (NULL for ALiBi and relative buckets): fills `prepared`
     * (prepared_floats(state) floats of the kernel's scratch) for one
     * query block of one head from its query rows (row stride
     * query_stride), before any key block; add() receives it. */
    void (*prepare)(const void *state, int head, const float *queries, int query_stride,
                    int first_query, int rows, float *prepared);
    size_t prepared_floats; /* per call of prepare(): ATTENTION_QUERY_BLOCK x 2 span for DeBERTa */
} attention_position_terms;

/* Keys [*lo, *hi) of `keys` that query i (counted from the same first
 * token) sees: causal, none after itself; window > 0, none farther than
 * `window`. Empty (*lo >= *hi) only for a query whose window lies wholly
 * past the keys. The one rule of the fused kernel and the host's products
 * (plugins/attention.c), whose bits must agree. */
static inline void attention_visible_keys(int causal, int window, int i, int keys, int *lo,
                                          int *hi)
{
    *lo = 0;
    *hi = keys;
    if (window > 0) {
        *lo = i - window > 0 ? i - window : 0;
        *hi = i + window + 1 < keys ? i + window + 1 : keys;
    }
    if (causal && i + 1 < *hi)
        *hi = i + 1;
}

/* One row of the online softmax over one block of `width` scores (a
 * multiple of 16), of which the row sees [lo, hi): the one softmax row of
 * the fused kernel and of the host's products (plugins/attention.c), whose
 * bits must not depend on the path's vector width. The scores it does not
 * see become -inf, the row keeps its running *maximum and its *sum of
 * exp(score - maximum), the scores become exp(score - maximum) in place
 * (0 where unseen; all 0 when lo >= hi), and the return value is what the
 * row's running context must be multiplied by before this block's P V is
 * added: exp(old maximum - new maximum) when the block raised the maximum,
 * else 1. The maximum and the sum run in vectors of 8 in a fixed order
 * (two chains over the vectors, then a tree over the lanes), so that every
 * clone of a caller (TFENC_VECTOR_CLONES) gives the same bits; `#pragma
 * omp simd reduction` ended each call with a serial pass over its
 * per-lane array, ~20% of the fused kernel's time at 64 keys a call.
 * Inlined into each caller and so into each of its clones. */
typedef float attention_vector8 __attribute__((vector_size(32), aligned(4), may_alias));
typedef int attention_int_vector8 __attribute__((vector_size(32)));

/* the larger of two vectors lane by lane (a macro: a function returning a
 * vector draws GCC's ABI warning in the baseline clone) */
#define ATTENTION_LARGER8(a, b)                                                          \
    ((attention_vector8)((((a) > (b)) & (attention_int_vector8)(a)) |                   \
                         (~((a) > (b)) & (attention_int_vector8)(b))))

static inline __attribute__((always_inline)) float attention_larger(float a, float b)
{
    return a > b ? a : b;
}

static inline __attribute__((always_inline)) float attention_row_maximum(const float *scores,
                                                                         int width)
{
    const attention_vector8 *v = (const attention_vector8 *)scores;
    attention_vector8 even = v[0], odd = v[1];
    for (int i = 2; i < width / 8; i += 2) {
        even = ATTENTION_LARGER8(even, v[i]);
        odd = ATTENTION_LARGER8(odd, v[i + 1]);
    }
    const attention_vector8 m = ATTENTION_LARGER8(even, odd);
    return attention_larger(
        attention_larger(attention_larger(m[0], m[1]), attention_larger(m[2], m[3])),
        attention_larger(attention_larger(m[4], m[5]), attention_larger(m[6], m[7])));
}

static inline __attribute__((always_inline)) float attention_row_sum(const float *p, int width)
{
    const attention_vector8 *v = (const attention_vector8 *)p;
    attention_vector8 even = v[0], odd = v[1];
    for (int i = 2; i < width / 8; i += 2) {
        even += v[i];
        odd += v[i + 1];
    }
    const attention_vector8 s = even + odd;
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

static inline __attribute__((always_inline)) float
attention_softmax_row(float *scores, int width, int lo, int hi, float *maximum, float *sum)
{
    if (lo >= hi) {
        for (int c = 0; c < width; c++)
            scores[c] = 0.0f;
        return 1.0f;
    }
    for (int c = 0; c < lo; c++)
        scores[c] = -INFINITY;
    for (int c = hi; c < width; c++)
        scores[c] = -INFINITY;
    const float block_maximum = attention_row_maximum(scores, width);
    float rescale = 1.0f;
    /* Subtracting the row's maximum keeps the exponentials <= 1: no overflow. */
    if (block_maximum > *maximum) {
        if (*maximum != -INFINITY) {
            rescale = tfenc_exp_nonpositive(*maximum - block_maximum);
            *sum *= rescale;
        }
        *maximum = block_maximum;
    }
    const float row_maximum = *maximum;
#pragma omp simd
    for (int c = 0; c < width; c++)
        scores[c] = tfenc_exp_nonpositive(scores[c] - row_maximum);
    *sum += attention_row_sum(scores, width);
    return rescale;
}

typedef struct attention_kernel_shape {
    int head_dim;
    int heads_per_kv;  /* query heads sharing one key/value head (grouped-query) */
    int row_stride;    /* floats between two tokens' Q/K/V rows */
    int key_offset;    /* of K in a row (Q is at 0); V follows at key_offset + value_offset */
    int value_offset;
    int context_stride; /* floats between two tokens' context rows */
    float scale;
    int causal;        /* query i sees keys j <= i */
    int window;        /* > 0: query i sees keys |i - j| <= window */
    int transposed_stride; /* floats between two dims of the transposed keys: at least the
                            * tokens transposed + ATTENTION_KEY_BLOCK */
    int vector_width;  /* 0: by the CPU (8 floats without AVX-512F, else 16); 8 or 16: that
                        * width (the tests compare both; the result is bitwise the same) */
    int value_pair_stride; /* bf16 kernel: words between two pairs of value rows (the
                            * width of V: heads of K x head_dim) */
} attention_kernel_shape;

/* The keys transposed once per group of sequences, so that a query's
 * scores are a loop over consecutive keys: dim `dim` (< heads of K x
 * head_dim) of the `tokens` K rows of qkv goes to transposed[dim *
 * transposed_stride + t]. The ATTENTION_KEY_BLOCK floats past the last
 * token of each dim MUST be readable (their values are never used). */
void attention_kernel_transpose_keys(const attention_kernel_shape *shape, const float *qkv,
                                     int tokens, int dim, float *transposed);

/* Floats of scratch one call needs (per thread), independent of L; also
 * enough for attention_kernel_pack_key_pairs(). */
size_t attention_kernel_scratch_floats(const attention_kernel_shape *shape,
                                       const attention_position_terms *terms);

/* The context of query rows first_query .. first_query + rows - 1 (first_query
 * a multiple of ATTENTION_QUERY_BLOCK, rows <= ATTENTION_QUERY_BLOCK) of head
 * `head` of a sequence whose Q/K/V rows start at qkv and whose transposed
 * keys start at transposed_keys (column of its first token), of whose
 * tokens the first keys_seen are keys of attention (its length, unless the
 * batch masks keys: tfenc_batch.seq_keys): softmax(scale Q K^T + position
 * terms, keys outside the window or after the query excluded) V, written
 * to context rows of the same tokens (columns head * head_dim ...). A query
 * row that sees no key at all (a window wholly past the keys) gets zeros.
 * scratch: attention_kernel_scratch_floats(). */
void attention_kernel_run(const attention_kernel_shape *shape,
                          const attention_position_terms *terms, const float *qkv,
                          const float *transposed_keys, int keys_seen, int head,
                          int first_query, int rows, float *context, float *scratch);

/* The same kernel on bfloat16 operands, for CPUs with AVX512_BF16
 * (attention_kernel_bf16_available()): Q (times the scale), K, the
 * probabilities and V rounded to bf16, every sum and the softmax in
 * float32, as the host's bf16 products compute attention. The keys and
 * values come packed in pairs, the layout of the CPU's bf16 dot products:
 *
 * - key pairs, once per group of sequences like the transposed keys (a
 *   call packs tokens first_token .. first_token + tokens - 1, so that
 *   threads can share a group): dims 2i and 2i + 1 of token t in one word
 *   at key_pairs[i * transposed_stride + t] (low half the first), i <
 *   heads of K x head_dim / 2; the ATTENTION_KEY_BLOCK words past the last
 *   token MUST be readable;
 * - value pairs, per sequence: tokens 2j and 2j + 1 of dim e in one word
 *   at value_pairs[j * value_pair_stride + e], a zero past an odd
 *   length: attention_kernel_value_pair_rows(length) rows.
 *
 * head_dim MUST be a multiple of 32. The result is bitwise the same for a
 * sequence whatever the batch, layout and thread count, but not the
 * float32 kernel's. */
int attention_kernel_bf16_available(void);
void attention_kernel_pack_key_pairs(const attention_kernel_shape *shape, const float *qkv,
                                     int first_token, int tokens, uint32_t *key_pairs,
                                     uint16_t *scratch /* attention_kernel_scratch_floats() */);
size_t attention_kernel_value_pair_rows(int length);
void attention_kernel_pack_value_pairs(const attention_kernel_shape *shape, const float *qkv,
                                       int length, uint32_t *value_pairs);
void attention_kernel_run_bf16(const attention_kernel_shape *shape,
                               const attention_position_terms *terms, const float *qkv,
                               const uint32_t *key_pairs, const uint32_t *value_pairs,
                               int keys_seen, int head, int first_query, int rows,
                               float *context, float *scratch);

#endif
