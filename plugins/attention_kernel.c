/* The fused attention kernel: scores, position terms, online softmax and
 * P V of one (sequence, head, query block), key block by key block. */
#include "attention_kernel.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "layers.h"

/* In a sanitizer build the mha plugin's copy of this file is compiled
 * without the sanitizers, and AddressSanitizer checks the buffers of each
 * call once, over the extents its shape and block give
 * (ATTENTION_KERNEL_REGION_CHECKS, plugins/local.mk): instrumented, the
 * kernel's vector loads (each 32- or 64-byte access checked out of line)
 * and its softmax (its exponential no longer inlined) were 40% of the
 * sanitizer suite's CPU time. The kernel's own accesses are checked one by
 * one where it is tested: tests/test_attention.c compiles this file with
 * the sanitizers and runs every path; the end-to-end tests then check that
 * the plugin hands the kernel buffers as large as the shapes it passes say. */
#ifdef ATTENTION_KERNEL_REGION_CHECKS
#include <sanitizer/asan_interface.h>
static void check_region(const float *first, size_t floats, int is_write)
{
    void *poisoned = __asan_region_is_poisoned((void *)first, floats * sizeof *first);
    if (poisoned != NULL)
        __asan_report_error(__builtin_return_address(0), __builtin_frame_address(0),
                            __builtin_frame_address(0), poisoned, is_write, sizeof(float));
}
#else
static inline void check_region(const float *first, size_t floats, int is_write)
{
    (void)first;
    (void)floats;
    (void)is_write;
}
#endif

/* Tokens attention_kernel_pack_key_pairs() converts at a time: each
 * pair's row then gets 16 words (a cache line) at once, where a token at a
 * time wrote one word per pair row. */
#define PACK_TOKENS 16

/* Scratch of one call, in floats: the scores of the block, the running
 * context, the block's queries times the scale (rows padded to a multiple
 * of 4 with zeros; bf16 pairs in the bf16 kernel), the running maximum and
 * sum per row, the bf16 kernel's probabilities, then what the position
 * terms prepare; or, between calls, attention_kernel_pack_key_pairs()'s
 * bf16 rows. */
size_t attention_kernel_scratch_floats(const attention_kernel_shape *shape,
                                       const attention_position_terms *terms)
{
    const size_t call = (size_t)ATTENTION_QUERY_BLOCK * ATTENTION_KEY_BLOCK +
                        2 * (size_t)ATTENTION_QUERY_BLOCK * shape->head_dim +
                        2 * (size_t)ATTENTION_QUERY_BLOCK +
                        (size_t)ATTENTION_QUERY_BLOCK * ATTENTION_KEY_BLOCK / 2 +
                        (terms != NULL ? terms->prepared_floats : 0);
    const size_t packing = (size_t)PACK_TOKENS * (size_t)shape->value_pair_stride / 2;
    return call > packing ? call : packing;
}

/* Keys [*lo, *hi) that query i sees among the sequence's keys [0, keys). */
static inline void visible_keys(const attention_kernel_shape *shape, int i, int keys, int *lo,
                                int *hi)
{
    attention_visible_keys(shape->causal, shape->window, i, keys, lo, hi);
}

/* Vectors of 16 and of 8 floats: GCC's vector extension, which each clone
 * of the kernel lowers to its own registers. Plain arrays of sums would
 * stay in memory (a load and a store per multiply-add). The 8-float loops
 * are for CPUs without AVX-512: GCC keeps a 16-float vector in registers
 * only where one register holds it (the x86-64-v4 clone); in the
 * x86-64-v3 (AVX2) clone it lowered each one through the stack, which
 * made this kernel ~4x slower than the products there. Each lane is its
 * own key or dim, summed in the same order, so both widths give bitwise
 * the same result. aligned(4) and may_alias: loads and stores at any
 * float address of float data. */
typedef float vector16 __attribute__((vector_size(64), aligned(4), may_alias));
typedef float vector8 __attribute__((vector_size(32), aligned(4), may_alias));
#define LOOP_FUNCTION static inline __attribute__((always_inline))

#define LOOP_VECTOR vector16
#define LOOP_WIDTH 16
#define LOOP_LOAD(p) (*(const vector16 *)(p))
#define LOOP_STORE(p, v) (*(vector16 *)(p) = (v))
#define LOOP_NAME(name) name##_16
#include "attention_kernel_loops.h"
#undef LOOP_VECTOR
#undef LOOP_WIDTH
#undef LOOP_LOAD
#undef LOOP_STORE
#undef LOOP_NAME

#define LOOP_VECTOR vector8
#define LOOP_WIDTH 8
#define LOOP_LOAD(p) (*(const vector8 *)(p))
#define LOOP_STORE(p, v) (*(vector8 *)(p) = (v))
#define LOOP_NAME(name) name##_8
#include "attention_kernel_loops.h"
#undef LOOP_VECTOR
#undef LOOP_WIDTH
#undef LOOP_LOAD
#undef LOOP_STORE
#undef LOOP_NAME

/* Whether this call runs 8-float vectors: shape->vector_width when set (the
 * tests compare both), else 8 on a CPU without AVX-512F. */
static inline int narrow_vectors(const attention_kernel_shape *shape)
{
    if (shape->vector_width != 0)
        return shape->vector_width == 8;
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
    return !__builtin_cpu_supports("avx512f");
#else
    return 0;
#endif
}

/* Two floats as a pair of bfloat16 in one 32-bit word, the first in the
 * low half: the operand layout of AVX512_BF16's dot products (VDPBF16PS
 * adds lo(a) lo(b) + hi(a) hi(b) to each float lane). */
LOOP_FUNCTION uint32_t bf16_pair(float first, float second)
{
    return (uint32_t)tfenc_round_to_bf16(first) | (uint32_t)tfenc_round_to_bf16(second) << 16;
}

/* Pair i of an array of bf16 (elements 2i and 2i + 1) as one word, read
 * through memcpy: the array is written as uint16_t. */
LOOP_FUNCTION int pair_at(const uint16_t *halves, int i)
{
    uint32_t word;
    memcpy(&word, halves + 2 * (size_t)i, sizeof word);
    return (int)word;
}

/* The bf16 kernel's products: scores over pairs of dims, P V over pairs
 * of keys, in AVX512_BF16 dot products (twice the multiply-adds of an
 * AVX-512 FMA per instruction) with float32 sums. Called only where
 * attention_kernel_bf16_available(); elsewhere the same sums in C keep the
 * file portable. */
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))
#define DOT(sum, a, b) ((sum) = _mm512_dpbf16_ps((sum), (__m512bh)(a), (__m512bh)(b)))

/* tile[r][c] = sum over pairs i of (query r's dims 2i, 2i + 1) .
 * key_pairs[i][c] for 4 rows of queries (2 pairs bf16 apart) and the
 * block's 64 keys. */
BF16_TARGET static void score_4_rows_bf16(const uint16_t *queries, int pairs,
                                          const uint32_t *key_pairs, int key_stride, float *tile)
{
    const uint16_t *q0 = queries, *q1 = q0 + 2 * pairs, *q2 = q1 + 2 * pairs, *q3 = q2 + 2 * pairs;
    __m512 s00 = _mm512_setzero_ps(), s01 = s00, s02 = s00, s03 = s00, s10 = s00, s11 = s00,
           s12 = s00, s13 = s00, s20 = s00, s21 = s00, s22 = s00, s23 = s00, s30 = s00,
           s31 = s00, s32 = s00, s33 = s00;
    for (int i = 0; i < pairs; i++) {
        const uint32_t *k = key_pairs + (size_t)i * key_stride;
        const __m512i k0 = _mm512_loadu_si512(k), k1 = _mm512_loadu_si512(k + 16),
                      k2 = _mm512_loadu_si512(k + 32), k3 = _mm512_loadu_si512(k + 48);
        __m512i q = _mm512_set1_epi32(pair_at(q0, i));
        DOT(s00, k0, q), DOT(s01, k1, q), DOT(s02, k2, q), DOT(s03, k3, q);
        q = _mm512_set1_epi32(pair_at(q1, i));
        DOT(s10, k0, q), DOT(s11, k1, q), DOT(s12, k2, q), DOT(s13, k3, q);
        q = _mm512_set1_epi32(pair_at(q2, i));
        DOT(s20, k0, q), DOT(s21, k1, q), DOT(s22, k2, q), DOT(s23, k3, q);
        q = _mm512_set1_epi32(pair_at(q3, i));
        DOT(s30, k0, q), DOT(s31, k1, q), DOT(s32, k2, q), DOT(s33, k3, q);
    }
    _mm512_storeu_ps(tile, s00), _mm512_storeu_ps(tile + 16, s01);
    _mm512_storeu_ps(tile + 32, s02), _mm512_storeu_ps(tile + 48, s03);
    tile += ATTENTION_KEY_BLOCK;
    _mm512_storeu_ps(tile, s10), _mm512_storeu_ps(tile + 16, s11);
    _mm512_storeu_ps(tile + 32, s12), _mm512_storeu_ps(tile + 48, s13);
    tile += ATTENTION_KEY_BLOCK;
    _mm512_storeu_ps(tile, s20), _mm512_storeu_ps(tile + 16, s21);
    _mm512_storeu_ps(tile + 32, s22), _mm512_storeu_ps(tile + 48, s23);
    tile += ATTENTION_KEY_BLOCK;
    _mm512_storeu_ps(tile, s30), _mm512_storeu_ps(tile + 16, s31);
    _mm512_storeu_ps(tile + 32, s32), _mm512_storeu_ps(tile + 48, s33);
}

/* running[r] += sum over key pairs [lo, hi) of (row r's probabilities of
 * keys 2j, 2j + 1) . value_pairs[j] for 4 rows (running rows head_dim
 * apart, probability rows ATTENTION_KEY_BLOCK bf16 apart); head_dim a
 * multiple of 32. */
BF16_TARGET static void accumulate_4_rows_bf16(float *running, int head_dim,
                                               const uint16_t *probabilities,
                                               const uint32_t *value_pairs, int value_stride,
                                               int lo, int hi)
{
    const uint16_t *p0 = probabilities, *p1 = p0 + ATTENTION_KEY_BLOCK,
                   *p2 = p1 + ATTENTION_KEY_BLOCK, *p3 = p2 + ATTENTION_KEY_BLOCK;
    for (int e = 0; e < head_dim; e += 32) {
        float *c0 = running + e, *c1 = c0 + head_dim, *c2 = c1 + head_dim, *c3 = c2 + head_dim;
        __m512 a00 = _mm512_loadu_ps(c0), a01 = _mm512_loadu_ps(c0 + 16),
               a10 = _mm512_loadu_ps(c1), a11 = _mm512_loadu_ps(c1 + 16),
               a20 = _mm512_loadu_ps(c2), a21 = _mm512_loadu_ps(c2 + 16),
               a30 = _mm512_loadu_ps(c3), a31 = _mm512_loadu_ps(c3 + 16);
        for (int j = lo; j < hi; j++) {
            const uint32_t *v = value_pairs + (size_t)j * value_stride + e;
            const __m512i v0 = _mm512_loadu_si512(v), v1 = _mm512_loadu_si512(v + 16);
            __m512i p = _mm512_set1_epi32(pair_at(p0, j));
            DOT(a00, v0, p), DOT(a01, v1, p);
            p = _mm512_set1_epi32(pair_at(p1, j));
            DOT(a10, v0, p), DOT(a11, v1, p);
            p = _mm512_set1_epi32(pair_at(p2, j));
            DOT(a20, v0, p), DOT(a21, v1, p);
            p = _mm512_set1_epi32(pair_at(p3, j));
            DOT(a30, v0, p), DOT(a31, v1, p);
        }
        _mm512_storeu_ps(c0, a00), _mm512_storeu_ps(c0 + 16, a01);
        _mm512_storeu_ps(c1, a10), _mm512_storeu_ps(c1 + 16, a11);
        _mm512_storeu_ps(c2, a20), _mm512_storeu_ps(c2 + 16, a21);
        _mm512_storeu_ps(c3, a30), _mm512_storeu_ps(c3 + 16, a31);
    }
}
#undef DOT

int attention_kernel_bf16_available(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bf16");
}
#else
static float bf16_value(uint32_t half)
{
    const uint32_t bits = half << 16;
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

static float pair_dot(uint32_t a, uint32_t b)
{
    return bf16_value(a & 0xffffu) * bf16_value(b & 0xffffu) +
           bf16_value(a >> 16) * bf16_value(b >> 16);
}

static void score_4_rows_bf16(const uint16_t *queries, int pairs, const uint32_t *key_pairs,
                              int key_stride, float *tile)
{
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < ATTENTION_KEY_BLOCK; c++) {
            float sum = 0.0f;
            for (int i = 0; i < pairs; i++)
                sum += pair_dot((uint32_t)pair_at(queries + (size_t)r * 2 * pairs, i),
                                key_pairs[(size_t)i * key_stride + c]);
            tile[(size_t)r * ATTENTION_KEY_BLOCK + c] = sum;
        }
}

static void accumulate_4_rows_bf16(float *running, int head_dim, const uint16_t *probabilities,
                                   const uint32_t *value_pairs, int value_stride, int lo, int hi)
{
    for (int r = 0; r < 4; r++)
        for (int j = lo; j < hi; j++)
            for (int e = 0; e < head_dim; e++)
                running[(size_t)r * head_dim + e] +=
                    pair_dot((uint32_t)pair_at(probabilities + (size_t)r * ATTENTION_KEY_BLOCK, j),
                             value_pairs[(size_t)j * value_stride + e]);
}

int attention_kernel_bf16_available(void)
{
    return 0;
}
#endif

/* P V of one key block in the bf16 kernel: 4 rows at a time over the key
 * pairs any of them sees (a pair a row does not see has probability 0;
 * rows that skipped the block, or pad it, have zeros). */
LOOP_FUNCTION void accumulate_block_bf16(float *running, int head_dim,
                                         const uint16_t *probabilities,
                                         const uint32_t *value_pairs, int value_stride,
                                         const int *row_lo, const int *row_hi, int rows,
                                         int score_rows)
{
    for (int r = 0; r < score_rows; r += 4) {
        int lo = ATTENTION_KEY_BLOCK / 2, hi = 0;
        for (int i = r; i < r + 4 && i < rows; i++)
            if (row_lo[i] < row_hi[i]) {
                lo = row_lo[i] / 2 < lo ? row_lo[i] / 2 : lo;
                hi = (row_hi[i] + 1) / 2 > hi ? (row_hi[i] + 1) / 2 : hi;
            }
        if (lo < hi)
            accumulate_4_rows_bf16(running + (size_t)r * head_dim, head_dim,
                                   probabilities + (size_t)r * ATTENTION_KEY_BLOCK,
                                   value_pairs, value_stride, lo, hi);
    }
}

/* P V of one row for a head_dim the vector loops do not take (not a
 * multiple of 16 floats, or of 32 with 16-float vectors). */
static inline void accumulate_values(float *context, const float *p, const float *values,
                                     int stride, int width, int lo, int hi)
{
    for (int c = lo; c < hi; c++) {
        const float *value = values + (size_t)c * stride;
#pragma omp simd
        for (int e = 0; e < width; e++)
            context[e] += p[c] * value[e];
    }
}

void attention_kernel_transpose_keys(const attention_kernel_shape *shape, const float *qkv,
                                     int tokens, int dim, float *transposed)
{
    const float *key = qkv + shape->key_offset + dim;
    float *row = transposed + (size_t)dim * shape->transposed_stride;
    if (tokens > 0) {
        check_region(key, (size_t)(tokens - 1) * (size_t)shape->row_stride + 1, 0);
        check_region(row, (size_t)tokens, 1);
    }
    for (int t = 0; t < tokens; t++)
        row[t] = key[(size_t)t * shape->row_stride];
}

TFENC_VECTOR_CLONES
void attention_kernel_pack_key_pairs(const attention_kernel_shape *shape, const float *qkv,
                                     int first_token, int tokens, uint32_t *key_pairs,
                                     uint16_t *scratch)
{
    const int width = shape->value_pair_stride; /* K's: heads of K x head_dim, as V's */
    const float *keys = qkv + shape->key_offset;
    if (tokens <= 0)
        return;
    check_region(keys + (size_t)first_token * shape->row_stride,
                 (size_t)(tokens - 1) * (size_t)shape->row_stride + (size_t)width, 0);
    for (int t0 = first_token; t0 < first_token + tokens; t0 += PACK_TOKENS) {
        const int count = first_token + tokens - t0 < PACK_TOKENS ? first_token + tokens - t0
                                                                  : PACK_TOKENS;
        for (int t = 0; t < count; t++) {
            const float *key = keys + (size_t)(t0 + t) * shape->row_stride;
            uint16_t *half = scratch + (size_t)t * width;
#pragma omp simd
            for (int e = 0; e < width; e++)
                half[e] = tfenc_round_to_bf16(key[e]);
        }
        for (int i = 0; i < width / 2; i++) {
            uint32_t *row = key_pairs + (size_t)i * shape->transposed_stride + t0;
            check_region((const float *)row, (size_t)count, 1);
            for (int t = 0; t < count; t++)
                row[t] = (uint32_t)pair_at(scratch + (size_t)t * width, i);
        }
    }
}

TFENC_VECTOR_CLONES
void attention_kernel_pack_value_pairs(const attention_kernel_shape *shape, const float *qkv,
                                       int length, uint32_t *value_pairs)
{
    const float *values = qkv + shape->key_offset + shape->value_offset;
    const size_t stride = (size_t)shape->row_stride, width = (size_t)shape->value_pair_stride;
    if (length <= 0)
        return;
    check_region(values, (size_t)(length - 1) * stride + width, 0);
    check_region((const float *)value_pairs, attention_kernel_value_pair_rows(length) * width, 1);
    for (int j = 0; 2 * j < length; j++) {
        const float *first = values + (size_t)(2 * j) * stride;
        uint32_t *out = value_pairs + (size_t)j * width;
        if (2 * j + 1 < length) {
            const float *second = first + stride;
#pragma omp simd
            for (size_t e = 0; e < width; e++)
                out[e] = bf16_pair(first[e], second[e]);
        } else {
#pragma omp simd
            for (size_t e = 0; e < width; e++)
                out[e] = bf16_pair(first[e], 0.0f);
        }
    }
}

size_t attention_kernel_value_pair_rows(int length)
{
    return length > 0 ? ((size_t)length + 1) / 2 : 0;
}

/* What one call reads and writes (see check_region): the block's query
 * rows, the context rows and the scratch (check_call); the float32
 * kernel's transposed keys over the visited key blocks (whole blocks, past
 * the last key) and the value rows of keys [lo, hi) (check_buffers); the
 * bf16 kernel's key and value pairs alike (check_pairs). */
static void check_call(const attention_kernel_shape *shape, const attention_position_terms *terms,
                       const float *queries, int first_query, int rows, float *context,
                       float *scratch)
{
    const size_t head_dim = (size_t)shape->head_dim, stride = (size_t)shape->row_stride;
    check_region(queries + (size_t)first_query * stride, (size_t)(rows - 1) * stride + head_dim, 0);
    check_region(context + (size_t)first_query * (size_t)shape->context_stride,
                 (size_t)(rows - 1) * (size_t)shape->context_stride + head_dim, 1);
    check_region(scratch, attention_kernel_scratch_floats(shape, terms), 1);
}

/* Keys [lo, hi) read as whole key blocks from lo: the extent past lo. */
static inline size_t visited_extent(int lo, int hi)
{
    return (size_t)(hi - 1 - lo) / ATTENTION_KEY_BLOCK * ATTENTION_KEY_BLOCK + ATTENTION_KEY_BLOCK;
}

static void check_buffers(const attention_kernel_shape *shape, const float *transposed,
                          const float *values, int lo, int hi)
{
    if (hi <= lo)
        return;
    const size_t head_dim = (size_t)shape->head_dim, stride = (size_t)shape->row_stride;
    check_region(transposed + lo,
                 (head_dim - 1) * (size_t)shape->transposed_stride + visited_extent(lo, hi), 0);
    check_region(values + (size_t)lo * stride, (size_t)(hi - 1 - lo) * stride + head_dim, 0);
}

static void check_pairs(const attention_kernel_shape *shape, const uint32_t *key_pairs,
                        const uint32_t *value_pairs, int kv_head, int lo, int hi)
{
    if (hi <= lo)
        return;
    const size_t pairs = (size_t)shape->head_dim / 2;
    check_region((const float *)key_pairs + (size_t)kv_head * pairs * shape->transposed_stride + lo,
                 (pairs - 1) * (size_t)shape->transposed_stride + visited_extent(lo, hi), 0);
    check_region((const float *)value_pairs + (size_t)(lo / 2) * shape->value_pair_stride +
                     (size_t)kv_head * shape->head_dim,
                 (size_t)((hi - 1) / 2 - lo / 2) * shape->value_pair_stride + shape->head_dim, 0);
}

/* One call of either kernel: float32 operands (key_pairs NULL: the keys
 * transposed, the values read in place) or bf16 pairs (key_pairs and
 * value_pairs, attention_kernel_pack_*). Inlined into each entry point and
 * so into each of its clones. */
LOOP_FUNCTION void attend_block(const attention_kernel_shape *shape,
                                const attention_position_terms *terms, const float *qkv,
                                const float *transposed_keys, const uint32_t *key_pairs,
                                const uint32_t *value_pairs, int keys_seen, int head,
                                int first_query, int rows, float *context, float *scratch)
{
    const int head_dim = shape->head_dim, stride = shape->row_stride;
    const int narrow = narrow_vectors(shape);
    const int kv_head = head / shape->heads_per_kv;
    const float *queries = qkv + (size_t)head * head_dim;
    const float *keys = qkv + shape->key_offset + (size_t)kv_head * head_dim;
    const float *values = keys + shape->value_offset;

    const float *transposed = transposed_keys + (size_t)kv_head * head_dim *
                                                    shape->transposed_stride; /* [head_dim][...] */
    /* scratch: tile [QUERY_BLOCK][KEY_BLOCK], running and scaled
     * [QUERY_BLOCK][head_dim] each, maximum and sum [QUERY_BLOCK] each */
    float *tile = scratch;
    float *running = tile + ATTENTION_QUERY_BLOCK * ATTENTION_KEY_BLOCK;
    float *scaled = running + (size_t)ATTENTION_QUERY_BLOCK * head_dim;
    float *maximum = scaled + (size_t)ATTENTION_QUERY_BLOCK * head_dim;
    float *sum = maximum + ATTENTION_QUERY_BLOCK;
    /* bf16 operands as arrays of bf16 (uint16_t), two to a 32-bit pair in
     * the order the dot products pair them: dims 2i, 2i + 1 of a query,
     * keys 2j, 2j + 1 of a probability row */
    uint16_t *probabilities = (uint16_t *)(sum + ATTENTION_QUERY_BLOCK); /* [QUERY_BLOCK][64] */
    float *prepared = sum + ATTENTION_QUERY_BLOCK +
                      ATTENTION_QUERY_BLOCK * ATTENTION_KEY_BLOCK / 2;
    const int bf16 = key_pairs != NULL;
    const int pairs = head_dim / 2;
    uint16_t *query_halves = (uint16_t *)scaled; /* bf16: [QUERY_BLOCK][head_dim] */

    /* The score loops take 4 rows at a time: the rows past the block's
     * last are zeros, their scores computed and never read. */
    const int score_rows = (rows + 3) / 4 * 4;
    for (int r = 0; r < rows; r++) {
        const float *q = queries + (size_t)(first_query + r) * stride;
        uint16_t *half = query_halves + (size_t)r * head_dim;
        float *row = scaled + (size_t)r * head_dim;
        if (bf16) {
#pragma omp simd
            for (int e = 0; e < head_dim; e++)
                half[e] = tfenc_round_to_bf16(q[e] * shape->scale);
        } else {
#pragma omp simd
            for (int e = 0; e < head_dim; e++)
                row[e] = q[e] * shape->scale;
        }
    }
    if (bf16)
        memset(query_halves + (size_t)rows * head_dim, 0,
               sizeof *query_halves * (size_t)(score_rows - rows) * head_dim);
    else
        memset(scaled + (size_t)rows * head_dim, 0,
               sizeof *scaled * (size_t)(score_rows - rows) * head_dim);
    for (int r = 0; r < score_rows; r++) {
        maximum[r] = -INFINITY;
        sum[r] = 0.0f;
        for (int e = 0; e < head_dim; e++)
            running[(size_t)r * head_dim + e] = 0.0f;
    }
    if (terms != NULL && terms->prepare != NULL)
        terms->prepare(terms->state, head, queries + (size_t)first_query * stride, stride,
                       first_query, rows, prepared);

    /* The keys any row of the block sees: the union of the rows' ranges,
     * from the key block that holds its first key. */
    int lo, hi, last_lo, last_hi;
    visible_keys(shape, first_query, keys_seen, &lo, &last_hi);
    visible_keys(shape, first_query + rows - 1, keys_seen, &last_lo, &hi);
    lo = lo / ATTENTION_KEY_BLOCK * ATTENTION_KEY_BLOCK;
    if (bf16)
        check_pairs(shape, key_pairs, value_pairs, kv_head, lo, hi);
    else
        check_buffers(shape, transposed, values, lo, hi);
    check_call(shape, terms, queries, first_query, rows, context + (size_t)head * head_dim,
               scratch);
    const int vector_loops = head_dim % (narrow ? 16 : 32) == 0;

    for (int first_key = lo; first_key < hi; first_key += ATTENTION_KEY_BLOCK) {
        const int block = hi - first_key < ATTENTION_KEY_BLOCK ? hi - first_key
                                                               : ATTENTION_KEY_BLOCK;
        /* tile = scale Q_block K_block^T; a short last block reads past the
         * sequence's keys (columns the rows below never use) */
        for (int r = 0; r < score_rows && bf16; r += 4)
            score_4_rows_bf16(query_halves + (size_t)r * head_dim, pairs,
                              key_pairs + (size_t)kv_head * pairs * shape->transposed_stride +
                                  first_key,
                              shape->transposed_stride, tile + (size_t)r * ATTENTION_KEY_BLOCK);
        for (int r = 0; r < score_rows && !bf16; r += 4) {
            if (narrow)
                score_4_rows_8(scaled + (size_t)r * head_dim, head_dim, transposed + first_key,
                               shape->transposed_stride, tile + (size_t)r * ATTENTION_KEY_BLOCK);
            else
                score_4_rows_16(scaled + (size_t)r * head_dim, head_dim, transposed + first_key,
                                shape->transposed_stride, tile + (size_t)r * ATTENTION_KEY_BLOCK);
        }
        if (terms != NULL && terms->add != NULL)
            terms->add(terms->state, head, first_query, rows, first_key, block, tile,
                       ATTENTION_KEY_BLOCK, prepared);

        /* Online softmax: each row keeps its running maximum m, its sum of
         * exp(s - m) and its context sum of exp(s - m) v; a larger maximum
         * rescales both by exp(m_old - m_new). Rows that see no key of this
         * block skip it, so a row's arithmetic depends on its own keys only. */
        int row_lo[ATTENTION_QUERY_BLOCK], row_hi[ATTENTION_QUERY_BLOCK];
        for (int r = 0; r < rows; r++) {
            visible_keys(shape, first_query + r, keys_seen, &row_lo[r], &row_hi[r]);
            row_lo[r] = row_lo[r] > first_key ? row_lo[r] - first_key : 0;
            row_hi[r] = row_hi[r] < first_key + block ? row_hi[r] - first_key : block;
            if (row_lo[r] >= row_hi[r])
                continue;
            /* Keys of the block the row does not see score -inf, whose
             * exponential is 0: the loops below then run over all 64. */
            float *scores = tile + (size_t)r * ATTENTION_KEY_BLOCK;
            const float rescale = attention_softmax_row(scores, ATTENTION_KEY_BLOCK, row_lo[r],
                                                        row_hi[r], &maximum[r], &sum[r]);
            float *context_row = running + (size_t)r * head_dim;
            if (rescale != 1.0f) {
#pragma omp simd
                for (int e = 0; e < head_dim; e++)
                    context_row[e] *= rescale;
            }
        }

        /* running += P_block V_block */
        const float *block_values = values + (size_t)first_key * stride;
        if (bf16) {
            /* pairs of keys from the block's start (a multiple of 64, so
             * even): the probabilities of keys a row does not see are 0,
             * and the rows that skipped the block (or pad it) get zeros */
            for (int r = 0; r < score_rows; r++) {
                uint16_t *row = probabilities + (size_t)r * ATTENTION_KEY_BLOCK;
                const float *p = tile + (size_t)r * ATTENTION_KEY_BLOCK;
                if (r < rows && row_lo[r] < row_hi[r]) {
#pragma omp simd
                    for (int c = 0; c < ATTENTION_KEY_BLOCK; c++)
                        row[c] = tfenc_round_to_bf16(p[c]);
                } else {
                    memset(row, 0, sizeof *row * ATTENTION_KEY_BLOCK);
                }
            }
            accumulate_block_bf16(running, head_dim, probabilities,
                                  value_pairs + (size_t)(first_key / 2) * shape->value_pair_stride +
                                      (size_t)kv_head * head_dim,
                                  shape->value_pair_stride, row_lo, row_hi, rows, score_rows);
        } else if (vector_loops && narrow)
            accumulate_block_8(running, head_dim, tile, block_values, stride, row_lo, row_hi,
                               rows);
        else if (vector_loops)
            accumulate_block_16(running, head_dim, tile, block_values, stride, row_lo, row_hi,
                                rows);
        else
            for (int r = 0; r < rows; r++)
                accumulate_values(running + (size_t)r * head_dim,
                                  tile + (size_t)r * ATTENTION_KEY_BLOCK, block_values, stride,
                                  head_dim, row_lo[r], row_hi[r]);
    }

    /* Normalise once per row: head_dim divisions rather than one per key.
     * A row that saw no key (its sum still 0) gets a zero context. */
    for (int r = 0; r < rows; r++) {
        const float inverse = sum[r] != 0.0f ? 1.0f / sum[r] : 0.0f;
        const float *context_row = running + (size_t)r * head_dim;
        float *out = context + (size_t)(first_query + r) * shape->context_stride +
                     (size_t)head * head_dim;
#pragma omp simd
        for (int e = 0; e < head_dim; e++)
            out[e] = context_row[e] * inverse;
    }
}

TFENC_VECTOR_CLONES
void attention_kernel_run(const attention_kernel_shape *shape,
                          const attention_position_terms *terms, const float *qkv,
                          const float *transposed_keys, int keys_seen, int head,
                          int first_query, int rows, float *context, float *scratch)
{
    attend_block(shape, terms, qkv, transposed_keys, NULL, NULL, keys_seen, head, first_query,
                 rows, context, scratch);
}

TFENC_VECTOR_CLONES
void attention_kernel_run_bf16(const attention_kernel_shape *shape,
                               const attention_position_terms *terms, const float *qkv,
                               const uint32_t *key_pairs, const uint32_t *value_pairs,
                               int keys_seen, int head, int first_query, int rows,
                               float *context, float *scratch)
{
    attend_block(shape, terms, qkv, NULL, key_pairs, value_pairs, keys_seen, head,
                 first_query, rows, context, scratch);
}
