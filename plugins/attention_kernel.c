/* The fused attention kernel: scores, position terms, online softmax and
 * P V of one (sequence, head, query block), key block by key block. */
#include "attention_kernel.h"

#include <math.h>

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

/* Scratch of one call, in floats: the scores of the block, the running
 * context, the running maximum and sum per row, then what the position
 * terms prepare. */
size_t attention_kernel_scratch_floats(const attention_kernel_shape *shape,
                                       const attention_position_terms *terms)
{
    return (size_t)ATTENTION_QUERY_BLOCK * ATTENTION_KEY_BLOCK +
           (size_t)ATTENTION_QUERY_BLOCK * shape->head_dim + 2 * (size_t)ATTENTION_QUERY_BLOCK +
           (terms != NULL ? terms->prepared_floats : 0);
}

/* Keys [*lo, *hi) that query i sees among the sequence's keys [0, keys):
 * empty (*lo >= *hi) only for a query whose window lies wholly past them. */
static inline void visible_keys(const attention_kernel_shape *shape, int i, int keys, int *lo,
                                int *hi)
{
    *lo = 0;
    *hi = keys;
    if (shape->window > 0) {
        *lo = i - shape->window > 0 ? i - shape->window : 0;
        *hi = i + shape->window + 1 < keys ? i + shape->window + 1 : keys;
    }
    if (shape->causal && i + 1 < *hi)
        *hi = i + 1;
}

/* 16 floats as one value: GCC's vector extension, which each clone of the
 * kernel lowers to its own registers (one AVX-512 register, two AVX2 or
 * four SSE ones). Plain arrays of sums would stay in memory (a load and a
 * store per multiply-add): the compiler does not keep 64-float arrays in
 * registers. aligned(4) and may_alias: loads and stores at any float
 * address of float data. */
typedef float vector16 __attribute__((vector_size(64), aligned(4), may_alias));
#define LOAD16(p) (*(const vector16 *)(p))
#define STORE16(p, v) (*(vector16 *)(p) = (v))

/* scores[c] = scale q . k_c for the ATTENTION_KEY_BLOCK (64) keys from
 * `transposed` (dim e of key c at transposed[e * transposed_stride + c]),
 * the sums in four vectors. */
static inline void score_row(const float *query, const float *transposed, int transposed_stride,
                             int head_dim, float scale, float *scores)
{
    vector16 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0};
    for (int e = 0; e < head_dim; e++) {
        const float q = query[e] * scale;
        const float *k = transposed + (size_t)e * transposed_stride;
        s0 += q * LOAD16(k);
        s1 += q * LOAD16(k + 16);
        s2 += q * LOAD16(k + 32);
        s3 += q * LOAD16(k + 48);
    }
    STORE16(scores, s0);
    STORE16(scores + 16, s1);
    STORE16(scores + 32, s2);
    STORE16(scores + 48, s3);
}

/* The same at 8 floats a vector, for CPUs without AVX-512: GCC keeps a
 * 16-float vector in registers only where one register holds it (the
 * x86-64-v4 clone); in the x86-64-v3 (AVX2) clone it lowered each one
 * through the stack (the broadcast of q built from 16 scalar stores, the
 * sums spilled after every multiply-add), which made this kernel ~4x
 * slower than the products on AVX2 machines. 8 floats are one AVX2
 * register. Each lane is its own key (here) or dim (below), summed in the
 * same order, so both widths give bitwise the same result. */
typedef float vector8 __attribute__((vector_size(32), aligned(4), may_alias));
#define LOAD8(p) (*(const vector8 *)(p))
#define STORE8(p, v) (*(vector8 *)(p) = (v))

static inline void score_row_8(const float *query, const float *transposed,
                               int transposed_stride, int head_dim, float scale, float *scores)
{
    vector8 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, s4 = {0}, s5 = {0}, s6 = {0}, s7 = {0};
    for (int e = 0; e < head_dim; e++) {
        const float q = query[e] * scale;
        const float *k = transposed + (size_t)e * transposed_stride;
        s0 += q * LOAD8(k);
        s1 += q * LOAD8(k + 8);
        s2 += q * LOAD8(k + 16);
        s3 += q * LOAD8(k + 24);
        s4 += q * LOAD8(k + 32);
        s5 += q * LOAD8(k + 40);
        s6 += q * LOAD8(k + 48);
        s7 += q * LOAD8(k + 56);
    }
    STORE8(scores, s0);
    STORE8(scores + 8, s1);
    STORE8(scores + 16, s2);
    STORE8(scores + 24, s3);
    STORE8(scores + 32, s4);
    STORE8(scores + 40, s5);
    STORE8(scores + 48, s6);
    STORE8(scores + 56, s7);
}

/* context += sum over keys [lo, hi) of p_c v_c, v_c at values + c * stride,
 * for a head of 64 dims (the four running sums in vectors) or 32. */
static inline void accumulate_values_64(float *context, const float *p, const float *values,
                                        int stride, int lo, int hi)
{
    vector16 c0 = LOAD16(context), c1 = LOAD16(context + 16), c2 = LOAD16(context + 32),
             c3 = LOAD16(context + 48);
    for (int c = lo; c < hi; c++) {
        const float *value = values + (size_t)c * stride;
        c0 += p[c] * LOAD16(value);
        c1 += p[c] * LOAD16(value + 16);
        c2 += p[c] * LOAD16(value + 32);
        c3 += p[c] * LOAD16(value + 48);
    }
    STORE16(context, c0);
    STORE16(context + 16, c1);
    STORE16(context + 32, c2);
    STORE16(context + 48, c3);
}

static inline void accumulate_values_32(float *context, const float *p, const float *values,
                                        int stride, int lo, int hi)
{
    vector16 c0 = LOAD16(context), c1 = LOAD16(context + 16);
    for (int c = lo; c < hi; c++) {
        const float *value = values + (size_t)c * stride;
        c0 += p[c] * LOAD16(value);
        c1 += p[c] * LOAD16(value + 16);
    }
    STORE16(context, c0);
    STORE16(context + 16, c1);
}

static inline void accumulate_values_64_8(float *context, const float *p, const float *values,
                                          int stride, int lo, int hi)
{
    vector8 c0 = LOAD8(context), c1 = LOAD8(context + 8), c2 = LOAD8(context + 16),
            c3 = LOAD8(context + 24), c4 = LOAD8(context + 32), c5 = LOAD8(context + 40),
            c6 = LOAD8(context + 48), c7 = LOAD8(context + 56);
    for (int c = lo; c < hi; c++) {
        const float *value = values + (size_t)c * stride;
        c0 += p[c] * LOAD8(value);
        c1 += p[c] * LOAD8(value + 8);
        c2 += p[c] * LOAD8(value + 16);
        c3 += p[c] * LOAD8(value + 24);
        c4 += p[c] * LOAD8(value + 32);
        c5 += p[c] * LOAD8(value + 40);
        c6 += p[c] * LOAD8(value + 48);
        c7 += p[c] * LOAD8(value + 56);
    }
    STORE8(context, c0);
    STORE8(context + 8, c1);
    STORE8(context + 16, c2);
    STORE8(context + 24, c3);
    STORE8(context + 32, c4);
    STORE8(context + 40, c5);
    STORE8(context + 48, c6);
    STORE8(context + 56, c7);
}

static inline void accumulate_values_32_8(float *context, const float *p, const float *values,
                                          int stride, int lo, int hi)
{
    vector8 c0 = LOAD8(context), c1 = LOAD8(context + 8), c2 = LOAD8(context + 16),
            c3 = LOAD8(context + 24);
    for (int c = lo; c < hi; c++) {
        const float *value = values + (size_t)c * stride;
        c0 += p[c] * LOAD8(value);
        c1 += p[c] * LOAD8(value + 8);
        c2 += p[c] * LOAD8(value + 16);
        c3 += p[c] * LOAD8(value + 24);
    }
    STORE8(context, c0);
    STORE8(context + 8, c1);
    STORE8(context + 16, c2);
    STORE8(context + 24, c3);
}

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

/* What one call reads and writes (see check_region): the block's query
 * rows; every dim's transposed keys over the visited key blocks (whole
 * blocks, past the last key); the value rows of keys [lo, hi); the context
 * rows; the scratch. */
static void check_buffers(const attention_kernel_shape *shape,
                          const attention_position_terms *terms, const float *queries,
                          const float *transposed, const float *values, int lo, int hi,
                          int first_query, int rows, float *context, float *scratch)
{
    const size_t head_dim = (size_t)shape->head_dim, stride = (size_t)shape->row_stride;
    check_region(queries + (size_t)first_query * stride, (size_t)(rows - 1) * stride + head_dim, 0);
    if (hi > lo) {
        const size_t last_block = (size_t)lo + (size_t)(hi - 1 - lo) / ATTENTION_KEY_BLOCK *
                                                  ATTENTION_KEY_BLOCK;
        check_region(transposed + lo,
                     (head_dim - 1) * (size_t)shape->transposed_stride + last_block +
                         ATTENTION_KEY_BLOCK - (size_t)lo,
                     0);
        check_region(values + (size_t)lo * stride, (size_t)(hi - 1 - lo) * stride + head_dim, 0);
    }
    check_region(context + (size_t)first_query * (size_t)shape->context_stride,
                 (size_t)(rows - 1) * (size_t)shape->context_stride + head_dim, 1);
    check_region(scratch, attention_kernel_scratch_floats(shape, terms), 1);
}

TFENC_VECTOR_CLONES
void attention_kernel_run(const attention_kernel_shape *shape,
                          const attention_position_terms *terms, const float *qkv,
                          const float *transposed_keys, int keys_seen, int head,
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
    float *tile = scratch;                                         /* [QUERY_BLOCK][KEY_BLOCK] */
    float *running = tile + ATTENTION_QUERY_BLOCK * ATTENTION_KEY_BLOCK; /* [QUERY_BLOCK][head_dim] */
    float *maximum = running + (size_t)ATTENTION_QUERY_BLOCK * head_dim; /* [QUERY_BLOCK] */
    float *sum = maximum + ATTENTION_QUERY_BLOCK;                         /* [QUERY_BLOCK] */
    float *prepared = sum + ATTENTION_QUERY_BLOCK;

    for (int r = 0; r < rows; r++) {
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
    check_buffers(shape, terms, queries, transposed, values, lo, hi, first_query, rows,
                  context + (size_t)head * head_dim, scratch);

    for (int first_key = lo; first_key < hi; first_key += ATTENTION_KEY_BLOCK) {
        const int block = hi - first_key < ATTENTION_KEY_BLOCK ? hi - first_key
                                                               : ATTENTION_KEY_BLOCK;
        /* tile = scale Q_block K_block^T; a short last block reads past the
         * sequence's keys (columns the rows below never use) */
        for (int r = 0; r < rows; r++) {
            if (narrow)
                score_row_8(queries + (size_t)(first_query + r) * stride, transposed + first_key,
                            shape->transposed_stride, head_dim, shape->scale,
                            tile + (size_t)r * ATTENTION_KEY_BLOCK);
            else
                score_row(queries + (size_t)(first_query + r) * stride, transposed + first_key,
                          shape->transposed_stride, head_dim, shape->scale,
                          tile + (size_t)r * ATTENTION_KEY_BLOCK);
        }
        if (terms != NULL && terms->add != NULL)
            terms->add(terms->state, head, first_query, rows, first_key, block, tile,
                       ATTENTION_KEY_BLOCK, prepared);

        /* Online softmax: each row keeps its running maximum m, its sum of
         * exp(s - m) and its context sum of exp(s - m) v; a larger maximum
         * rescales both by exp(m_old - m_new). Rows that see no key of this
         * block skip it, so a row's arithmetic depends on its own keys only. */
        for (int r = 0; r < rows; r++) {
            int row_lo, row_hi;
            visible_keys(shape, first_query + r, keys_seen, &row_lo, &row_hi);
            row_lo = row_lo > first_key ? row_lo - first_key : 0;
            row_hi = row_hi < first_key + block ? row_hi - first_key : block;
            if (row_lo >= row_hi)
                continue;
            float *scores = tile + (size_t)r * ATTENTION_KEY_BLOCK;
            /* from -inf over the whole range: 64 keys are four vectors, where
             * 63 left a 15-key scalar tail */
            float block_maximum = -INFINITY;
#pragma omp simd reduction(max : block_maximum)
            for (int c = row_lo; c < row_hi; c++)
                block_maximum = scores[c] > block_maximum ? scores[c] : block_maximum;
            float *context_row = running + (size_t)r * head_dim;
            if (block_maximum > maximum[r]) {
                if (maximum[r] != -INFINITY) {
                    const float rescale = tfenc_exp_nonpositive(maximum[r] - block_maximum);
                    sum[r] *= rescale;
#pragma omp simd
                    for (int e = 0; e < head_dim; e++)
                        context_row[e] *= rescale;
                }
                maximum[r] = block_maximum;
            }
            const float row_maximum = maximum[r];
            float block_sum = 0.0f;
#pragma omp simd reduction(+ : block_sum)
            for (int c = row_lo; c < row_hi; c++) {
                scores[c] = tfenc_exp_nonpositive(scores[c] - row_maximum);
                block_sum += scores[c];
            }
            sum[r] += block_sum;
            /* running += P_block V_block */
            const float *block_values = values + (size_t)first_key * stride;
            if (head_dim == 64 && narrow)
                accumulate_values_64_8(context_row, scores, block_values, stride, row_lo, row_hi);
            else if (head_dim == 64)
                accumulate_values_64(context_row, scores, block_values, stride, row_lo, row_hi);
            else if (head_dim == 32 && narrow)
                accumulate_values_32_8(context_row, scores, block_values, stride, row_lo, row_hi);
            else if (head_dim == 32)
                accumulate_values_32(context_row, scores, block_values, stride, row_lo, row_hi);
            else
                accumulate_values(context_row, scores, block_values, stride, head_dim, row_lo,
                                  row_hi);
        }
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
