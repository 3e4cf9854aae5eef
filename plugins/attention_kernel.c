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
 * context, the block's queries times the scale (rows padded to a multiple
 * of 4 with zeros), the running maximum and sum per row, then what the
 * position terms prepare. */
size_t attention_kernel_scratch_floats(const attention_kernel_shape *shape,
                                       const attention_position_terms *terms)
{
    return (size_t)ATTENTION_QUERY_BLOCK * ATTENTION_KEY_BLOCK +
           2 * (size_t)ATTENTION_QUERY_BLOCK * shape->head_dim +
           2 * (size_t)ATTENTION_QUERY_BLOCK + (terms != NULL ? terms->prepared_floats : 0);
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

/* The maximum and the sum of a block's 64 scores of one row, in vectors
 * of 8 whatever the clone: `#pragma omp simd reduction` ended each call
 * with a serial pass over its per-lane array (16 dependent scalar
 * operations on AVX-512), which was ~20% of the kernel's time at 64
 * keys a call. The sum's order is fixed here (lanes over the 8 vectors,
 * then a tree over the lanes), so every clone gives the same bits. */
_Static_assert(ATTENTION_KEY_BLOCK == 64, "the block reductions read 8 vectors of 8");
typedef int int_vector8 __attribute__((vector_size(32)));

/* the larger of two vectors lane by lane (a macro: a function returning
 * a vector draws GCC's ABI warning in the baseline clone) */
#define LARGER8(a, b)                                                                     \
    ((vector8)((((a) > (b)) & (int_vector8)(a)) | (~((a) > (b)) & (int_vector8)(b))))

LOOP_FUNCTION float larger(float a, float b)
{
    return a > b ? a : b;
}

LOOP_FUNCTION float block_maximum_of(const float *scores)
{
    const vector8 *v = (const vector8 *)scores;
    const vector8 m01 = LARGER8(v[0], v[1]), m23 = LARGER8(v[2], v[3]), m45 = LARGER8(v[4], v[5]),
                  m67 = LARGER8(v[6], v[7]), m03 = LARGER8(m01, m23), m47 = LARGER8(m45, m67),
                  m = LARGER8(m03, m47);
    return larger(larger(larger(m[0], m[1]), larger(m[2], m[3])),
                  larger(larger(m[4], m[5]), larger(m[6], m[7])));
}

LOOP_FUNCTION float block_sum_of(const float *p)
{
    const vector8 *v = (const vector8 *)p;
    const vector8 s = (((v[0] + v[2]) + v[4]) + v[6]) + (((v[1] + v[3]) + v[5]) + v[7]);
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
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
    float *scaled = running + (size_t)ATTENTION_QUERY_BLOCK * head_dim;  /* [QUERY_BLOCK][head_dim] */
    float *maximum = scaled + (size_t)ATTENTION_QUERY_BLOCK * head_dim;  /* [QUERY_BLOCK] */
    float *sum = maximum + ATTENTION_QUERY_BLOCK;                         /* [QUERY_BLOCK] */
    float *prepared = sum + ATTENTION_QUERY_BLOCK;

    /* The score loops take 4 rows at a time: the rows past the block's
     * last are zeros, their scores computed and never read. */
    const int score_rows = (rows + 3) / 4 * 4;
    for (int r = 0; r < score_rows; r++)
        for (int e = 0; e < head_dim; e++)
            scaled[(size_t)r * head_dim + e] =
                r < rows ? queries[(size_t)(first_query + r) * stride + e] * shape->scale : 0.0f;
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
    const int vector_loops = head_dim % (narrow ? 16 : 32) == 0;

    for (int first_key = lo; first_key < hi; first_key += ATTENTION_KEY_BLOCK) {
        const int block = hi - first_key < ATTENTION_KEY_BLOCK ? hi - first_key
                                                               : ATTENTION_KEY_BLOCK;
        /* tile = scale Q_block K_block^T; a short last block reads past the
         * sequence's keys (columns the rows below never use) */
        for (int r = 0; r < score_rows; r += 4) {
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
            for (int c = 0; c < row_lo[r]; c++)
                scores[c] = -INFINITY;
            for (int c = row_hi[r]; c < ATTENTION_KEY_BLOCK; c++)
                scores[c] = -INFINITY;
            const float block_maximum = block_maximum_of(scores);
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
#pragma omp simd
            for (int c = 0; c < ATTENTION_KEY_BLOCK; c++)
                scores[c] = tfenc_exp_nonpositive(scores[c] - row_maximum);
            sum[r] += block_sum_of(scores);
        }

        /* running += P_block V_block */
        const float *block_values = values + (size_t)first_key * stride;
        if (vector_loops && narrow)
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
