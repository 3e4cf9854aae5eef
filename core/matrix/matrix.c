/* The matrix backend's front: linear maps and activation products at each
 * layer's precision (fp32 here on OpenBLAS; bf16 and int8 handed to
 * core/matrix/matrix_onednn.c), their epilogues (per-token int8 scales, bias,
 * activations, element types), the rank's OpenMP thread pool, and what the
 * CPU offers each precision.
 *
 * One pool: OpenBLAS brings a thread pool of its own (pthreads in Debian's
 * default build), and two pools on the same cores spin against each other
 * between calls. So OpenBLAS always runs single-threaded, and fp32
 * products are split by rows (linear maps) or by batch entry (activation
 * products) over OpenMP's threads, which oneDNN and the element-wise loops
 * use too. Its OpenMP build would not do better: its threaded GEMM
 * allocates a 512 KiB job table on every call. */
#include "config.h"

#include "matrix/matrix.h"
#include "base/aligned.h"
#include "tfenc/plugin_math.h"
#include "matrix/matrix_onednn.h"
#ifdef HAVE_ONEDNN
#include "matrix/onednn_f32.h"
#endif
#include "matrix/openblas.h"
#include "tfenc/plugin_parallel.h"

#include <malloc.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tfenc_matrix_scratch {
    void *data;
    size_t bytes;
    int threads;   /* the pool's size when the first oneDNN product was made */
    size_t thread_stride; /* activation products from a parallel region: thread t uses
                           * the scratch from t * thread_stride (the largest product's
                           * need, so that no two threads' parts overlap) */
    void **streams; /* [threads] oneDNN streams (products from a parallel region use
                     * their thread's); NULL until the first oneDNN product */
};

struct tfenc_linear {
    tfenc_precision precision;
    int in, out;
    float *weight;          /* fp32: [out, in]; NULL in bf16 and int8 */
    float *bias;            /* [out] or NULL */
    onednn_linear *onednn;  /* bf16 and int8 */
#ifdef HAVE_ONEDNN
    onednn_f32_linear *onednn_f32; /* fp32 with fp32_products = onednn (weight NULL) */
#endif
    tfenc_matrix_scratch *scratch;
    float *record_input_range;  /* fp32 calibration: max |x[., j]| seen, or NULL */
    float *input_smoothing;     /* int8: [in] 1 / s_j applied to x before quantizing, or NULL */
    int borrowed;               /* weight, bias and smoothing live in a block
                                 * (tfenc_matrix_block), not in the map's own memory */
};

struct tfenc_matmul_plan {
    tfenc_precision precision; /* FP32, or BF16 for bf16 and int8 layers */
    tfenc_matmul_shape largest;
    onednn_matmul *onednn;
    tfenc_matrix_scratch *scratch;
    int threads;               /* threads that may call it at once (a parallel region's) */
};

/* ---------------------------------------------------------------- bf16 */

/* The loops are static: the ifunc resolvers of their vector clones stay
 * out of libtfenc's exports. */
TFENC_VECTOR_CLONES
static void round_to_bf16(const float *in, uint16_t *out, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        out[i] = tfenc_round_to_bf16(in[i]);
}

TFENC_VECTOR_CLONES
static void widen_from_bf16(const uint16_t *in, float *out, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        uint32_t bits = (uint32_t)in[i] << 16;
        memcpy(&out[i], &bits, sizeof bits);
    }
}

void tfenc_matrix_to_bf16(const float *in, uint16_t *out, size_t n)
{
    round_to_bf16(in, out, n);
}

void tfenc_matrix_from_bf16(const uint16_t *in, float *out, size_t n)
{
    widen_from_bf16(in, out, n);
}

/* -------------------------------------------------------------- threads */

static int configured_threads;

void tfenc_matrix_set_threads(int threads)
{
    if (threads <= 0) {
        const char *names[] = {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"};
        for (int i = 0; threads <= 0 && i < 2; i++) {
            const char *value = getenv(names[i]);
            if (value != NULL)
                threads = atoi(value);
        }
    }
    if (threads <= 0) {
        cpu_set_t cores;
        threads = sched_getaffinity(0, sizeof cores, &cores) == 0 ? CPU_COUNT(&cores) : 1;
    }
    configured_threads = threads;
    omp_set_num_threads(threads);
}

int tfenc_matrix_threads(void)
{
    return configured_threads > 0 ? configured_threads : omp_get_max_threads();
}

/* ----------------------------------------------------------- precisions */

int tfenc_matrix_check_precision(tfenc_context *ctx, tfenc_precision precision)
{
    if (precision == TFENC_PRECISION_FP32)
        return TFENC_OK;
    const char *name = tfenc_precision_names[precision];
#ifndef HAVE_ONEDNN
    return tfenc_error(ctx, TFENC_ERR_CONFIG,
                       "precision = %s: tfenc was built without oneDNN (install libdnnl-dev and "
                       "run configure again, or use precision = fp32)",
                       name);
#else
    if (!onednn_precision_runs(precision))
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "precision = %s: oneDNN has no %s matmul for this CPU (instruction set "
                           "%s; bf16 needs AVX-512); use precision = fp32",
                           name, name, onednn_isa_name());
    return TFENC_OK;
#endif
}

tfenc_precision tfenc_matrix_int8_fallback(void)
{
    return tfenc_matrix_check_precision(NULL, TFENC_PRECISION_BF16) == TFENC_OK
               ? TFENC_PRECISION_BF16
               : TFENC_PRECISION_FP32;
}

int tfenc_matrix_describe(tfenc_precision requested, tfenc_precision *runs, char *line,
                          size_t size)
{
    tfenc_precision chosen = requested;
    while (chosen != TFENC_PRECISION_FP32 && tfenc_matrix_check_precision(NULL, chosen) != TFENC_OK)
        chosen = (tfenc_precision)(chosen - 1);
    *runs = chosen;
    line[0] = '\0';
    if (requested == TFENC_PRECISION_FP32)
        return 0;
#ifdef HAVE_ONEDNN
    int bf16 = onednn_isa_has_bf16(), vnni = onednn_isa_has_vnni(), amx = onednn_isa_has_amx();
    const char *isa = onednn_isa_name();
#else
    int bf16 = 0, vnni = 0, amx = 0;
    const char *isa = "none: tfenc was built without oneDNN";
#endif
    char lacks[96] = "";
    if (requested == TFENC_PRECISION_BF16 && !bf16)
        strcat(lacks, "AVX512_BF16");
    if (requested == TFENC_PRECISION_INT8 && !vnni)
        strcat(lacks, "AVX512_VNNI");
    if (!amx)
        strcat(strcat(lacks, lacks[0] != '\0' ? " and " : ""), "AMX");
    if (lacks[0] == '\0' && chosen == requested)
        return 0;
    snprintf(line, size, "precision = %s: this CPU lacks %s (oneDNN runs %s); %s runs%s",
             tfenc_precision_names[requested], lacks[0] != '\0' ? lacks : "nothing", isa,
             tfenc_precision_names[chosen],
             chosen != requested                                         ? " instead"
             : requested == TFENC_PRECISION_BF16 && !bf16                 ? " (emulated, slower)"
             : requested == TFENC_PRECISION_INT8 && !vnni                 ? " (without VNNI, slower)"
                                                                          : "");
    return 1;
}

int tfenc_matrix_load(tfenc_context *ctx)
{
    return tfenc_openblas_load(ctx);
}

void tfenc_matrix_describe_kernels(tfenc_fp32_products fp32_products, char *line, size_t size)
{
#ifdef HAVE_ONEDNN
    char onednn[96];
    onednn_describe(onednn, sizeof onednn);
#else
    const char *onednn = "none (built without oneDNN)";
#endif
    /* The file records what ran its fp32 linear maps: the bits follow it. */
    if (fp32_products == TFENC_FP32_PRODUCTS_ONEDNN)
        snprintf(line, size, "fp32: linear maps on %s, other products on %s; bf16 and int8: %s",
                 onednn, tfenc_openblas_config(), onednn);
    else
        snprintf(line, size, "fp32: %s; bf16 and int8: %s", tfenc_openblas_config(), onednn);
}

int tfenc_matrix_describe_fallback(char *line, size_t size)
{
    return tfenc_openblas_fallback(line, size);
}

/* -------------------------------------------------------------- scratch */

int tfenc_matrix_scratch_create(tfenc_context *ctx, tfenc_matrix_scratch **scratch)
{
    *scratch = calloc(1, sizeof **scratch);
    if (*scratch == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "matrix backend: out of memory");
    return TFENC_OK;
}

void tfenc_matrix_scratch_destroy(tfenc_matrix_scratch *scratch)
{
    if (scratch == NULL)
        return;
#ifdef HAVE_ONEDNN
    for (int t = 0; scratch->streams != NULL && t < scratch->threads; t++)
        if (scratch->streams[t] != NULL)
            onednn_stream_destroy(scratch->streams[t]);
#endif
    free(scratch->streams);
    tfenc_aligned_free(scratch->data);
    free(scratch);
}

size_t tfenc_matrix_scratch_bytes(const tfenc_matrix_scratch *scratch)
{
    return scratch->bytes;
}

/* Grows the scratch to `bytes` at creation time. Pages a product never
 * touches (the conversion paths of an fp32 map) are never made resident. */
static int scratch_reserve(tfenc_context *ctx, tfenc_matrix_scratch *scratch, size_t bytes)
{
    if (bytes <= scratch->bytes)
        return TFENC_OK;
    void *grown = tfenc_aligned_alloc(bytes);
    if (grown == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY,
                           "matrix backend: out of memory for %zu bytes of scratch", bytes);
    tfenc_aligned_free(scratch->data);
    scratch->data = grown;
    scratch->bytes = bytes;
    return TFENC_OK;
}

#ifdef HAVE_ONEDNN
static int scratch_stream(tfenc_context *ctx, tfenc_matrix_scratch *scratch)
{
    if (scratch->streams != NULL)
        return TFENC_OK;
    scratch->threads = omp_get_max_threads();
    scratch->streams = calloc((size_t)scratch->threads, sizeof *scratch->streams);
    if (scratch->streams == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "matrix backend: out of memory");
    for (int t = 0; t < scratch->threads; t++)
        if (onednn_stream_create(&scratch->streams[t]) != TFENC_OK)
            return tfenc_error(ctx, TFENC_ERR_INTERNAL, "matrix backend: no oneDNN stream");
    return TFENC_OK;
}
#endif

static size_t round_up_64(size_t bytes)
{
    return (bytes + 63) / 64 * 64;
}

/* The threads whose blocks may run at once: the pool's size when the
 * scratch first served a map. */
static int scratch_threads(tfenc_context *ctx, tfenc_matrix_scratch *scratch)
{
#ifdef HAVE_ONEDNN
    return scratch_stream(ctx, scratch);
#else
    if (scratch->threads == 0)
        scratch->threads = omp_get_max_threads();
    return TFENC_OK;
#endif
}

/* One thread's part of the scratch for a map's blocks: the input in the
 * product's type (float32 at most), the product in float32, the int8
 * tokens' scales and offsets, and one float row for quantizing. */
int tfenc_matrix_block_rows(tfenc_precision precision)
{
    return precision == TFENC_PRECISION_FP32 ? TFENC_MATRIX_FP32_BLOCK_ROWS
                                             : TFENC_MATRIX_BLOCK_ROWS;
}

static size_t block_bytes(tfenc_precision precision, int in, int out)
{
    size_t rows = (size_t)tfenc_matrix_block_rows(precision);
    return round_up_64(rows * (size_t)in * sizeof(float)) +
           round_up_64(rows * (size_t)out * sizeof(float)) +
           round_up_64(2 * rows * sizeof(float)) + round_up_64((size_t)in * sizeof(float));
}

/* ------------------------------------------------------------ epilogues */

static int is_gated(tfenc_activation activation)
{
    return activation == TFENC_ACTIVATION_SWIGLU || activation == TFENC_ACTIVATION_GEGLU ||
           activation == TFENC_ACTIVATION_GEGLU_TANH;
}

/* One row of the epilogue: z = scale * (product - offset * correction) +
 * bias (int8 tokens' scale and zero point; 1 and 0 otherwise), then the
 * activation (gated ones read z[j] and z[f + j]), stored as float32 or
 * bfloat16, or (float32) added to the row's residual when there is one.
 * `z` is the row's float32 product, `width` its length (2f when gated); y
 * may be z itself without a residual. */
TFENC_VECTOR_CLONES
static void epilogue_row(float *z, int width, float scale, float offset,
                         const float *restrict correction, const float *restrict bias,
                         tfenc_activation activation, const float *residual, void *y,
                         tfenc_element_type y_dtype)
{
    /* An int8 row with a zero point and a bias in one pass instead of two
     * (and without activation straight into float32 y): the operations
     * of the passes below, in their order, so the same bits. */
    if (correction != NULL && offset != 0.0f && bias != NULL) {
        if (activation == TFENC_ACTIVATION_NONE && y_dtype == TFENC_FLOAT32) {
            float *out = y;
            if (residual != NULL) {
#pragma omp simd
                for (int j = 0; j < width; j++)
                    out[j] = residual[j] + ((z[j] - offset * correction[j]) * scale + bias[j]);
            } else {
#pragma omp simd
                for (int j = 0; j < width; j++)
                    out[j] = (z[j] - offset * correction[j]) * scale + bias[j];
            }
            return;
        }
#pragma omp simd
        for (int j = 0; j < width; j++)
            z[j] = (z[j] - offset * correction[j]) * scale + bias[j];
        scale = 1.0f;
        bias = NULL;
    } else if (correction != NULL && offset != 0.0f) {
#pragma omp simd
        for (int j = 0; j < width; j++)
            z[j] -= offset * correction[j];
    }
    if (scale != 1.0f || bias != NULL) {
        if (bias != NULL) {
#pragma omp simd
            for (int j = 0; j < width; j++)
                z[j] = z[j] * scale + bias[j];
        } else {
#pragma omp simd
            for (int j = 0; j < width; j++)
                z[j] *= scale;
        }
    }
    int n = is_gated(activation) ? width / 2 : width;
    switch (activation) {
    case TFENC_ACTIVATION_RELU:
#pragma omp simd
        for (int j = 0; j < n; j++)
            z[j] = tfenc_relu(z[j]);
        break;
    case TFENC_ACTIVATION_GELU:
#pragma omp simd
        for (int j = 0; j < n; j++)
            z[j] = tfenc_gelu(z[j]);
        break;
    case TFENC_ACTIVATION_GELU_TANH:
#pragma omp simd
        for (int j = 0; j < n; j++)
            z[j] = tfenc_gelu_tanh(z[j]);
        break;
    case TFENC_ACTIVATION_SILU:
#pragma omp simd
        for (int j = 0; j < n; j++)
            z[j] = tfenc_silu(z[j]);
        break;
    case TFENC_ACTIVATION_SWIGLU:
#pragma omp simd
        for (int j = 0; j < n; j++)
            z[j] = tfenc_silu(z[j]) * z[n + j];
        break;
    case TFENC_ACTIVATION_GEGLU:
#pragma omp simd
        for (int j = 0; j < n; j++)
            z[j] = tfenc_gelu(z[j]) * z[n + j];
        break;
    case TFENC_ACTIVATION_GEGLU_TANH:
#pragma omp simd
        for (int j = 0; j < n; j++)
            z[j] = tfenc_gelu_tanh(z[j]) * z[n + j];
        break;
    default:
        break;
    }
    if (residual != NULL) {
        /* the residual's add as the host made it in a pass of its own
         * (residual may be y) */
        float *sum = y;
#pragma omp simd
        for (int j = 0; j < n; j++)
            sum[j] = residual[j] + z[j];
    } else if (y_dtype == TFENC_BFLOAT16)
        tfenc_matrix_to_bf16(z, y, (size_t)n);
    else if ((float *)y != z)
        memcpy(y, z, (size_t)n * sizeof(float));
}

/* The epilogue over rows of a product: row r of z (stride z_stride) goes to
 * row r of y (n output columns of y_dtype). row_scales NULL means 1 (and
 * no zero points). */
static void epilogue(float *z, int rows, int width, size_t z_stride, const float *row_scales,
                     const float *row_offsets, const float *correction, const float *bias,
                     tfenc_activation activation, const float *residual, void *y,
                     tfenc_element_type y_dtype)
{
    const int n = is_gated(activation) ? width / 2 : width;
    const size_t y_row_bytes = (size_t)n * (y_dtype == TFENC_BFLOAT16 ? 2 : 4);
    TFENC_PARALLEL_FOR(r, rows, (double)rows * width,
                       epilogue_row(z + (size_t)r * z_stride, width,
                                    row_scales != NULL ? row_scales[r] : 1.0f,
                                    row_offsets != NULL ? row_offsets[r] : 0.0f, correction, bias,
                                    activation,
                                    residual != NULL ? residual + (size_t)r * n : NULL,
                                    (char *)y + (size_t)r * y_row_bytes, y_dtype));
}

/* Rows of x (x_dtype, row length n) as float32 into `out`. */
static void rows_to_float(const void *x, tfenc_element_type x_dtype, int rows, int n, float *out)
{
    if (x_dtype == TFENC_FLOAT32) {
        memcpy(out, x, (size_t)rows * (size_t)n * sizeof(float));
        return;
    }
    TFENC_PARALLEL_FOR(r, rows, (double)rows * n,
                       tfenc_matrix_from_bf16((const uint16_t *)x + (size_t)r * n,
                                              out + (size_t)r * n, (size_t)n));
}

/* Rows of x (x_dtype) as bfloat16 into `out`. */
static void rows_to_bf16(const void *x, tfenc_element_type x_dtype, int rows, int n, uint16_t *out)
{
    if (x_dtype == TFENC_BFLOAT16) {
        memcpy(out, x, (size_t)rows * (size_t)n * sizeof(uint16_t));
        return;
    }
    TFENC_PARALLEL_FOR(r, rows, (double)rows * n,
                       tfenc_matrix_to_bf16((const float *)x + (size_t)r * n, out + (size_t)r * n,
                                            (size_t)n));
}

/* int8 inputs, per token and asymmetric: row r becomes round(x / s_r) +
 * z_r in 0..255, with s_r = (max - min) / 255 and z_r placing min at 0, so
 * that each token uses all 256 levels between its own extremes whatever
 * the other tokens hold (one bit more than +-max for one-sided rows such
 * as GELU's). oneDNN subtracts 128 from every input; the epilogue takes
 * the rest, (z_r - 128) times the weights' column sums, back. */
TFENC_VECTOR_CLONES
static void quantize_row(const float *restrict x, int n, uint8_t *restrict q, float *scale,
                         float *offset)
{
    float lowest = x[0], highest = x[0];
#pragma omp simd reduction(min : lowest) reduction(max : highest)
    for (int j = 0; j < n; j++) {
        lowest = x[j] < lowest ? x[j] : lowest;
        highest = x[j] > highest ? x[j] : highest;
    }
    /* The range includes 0, so that zero stays exact (padding, ReLU). */
    lowest = lowest < 0.0f ? lowest : 0.0f;
    highest = highest > 0.0f ? highest : 0.0f;
    float s = highest > lowest ? (highest - lowest) / 255.0f : 1.0f;
    float zero = nearbyintf(-lowest / s);
    float inverse = 1.0f / s;
#pragma omp simd
    for (int j = 0; j < n; j++) {
        float level = nearbyintf(x[j] * inverse) + zero;
        level = level < 0.0f ? 0.0f : level;
        q[j] = (uint8_t)(level > 255.0f ? 255.0f : level);
    }
    *scale = s;
    *offset = zero - 128.0f;
}

/* own[j] = row[j] * smoothing[j]: a token's channels divided by their
 * SmoothQuant factors before it is quantized (own may be row). */
TFENC_VECTOR_CLONES
static void smooth_row(const float *row, const float *restrict smoothing, int n, float *own)
{
#pragma omp simd
    for (int j = 0; j < n; j++)
        own[j] = row[j] * smoothing[j];
}

/* Row `row` of x quantized into q (n values), its scale and offset;
 * `own` is a float row of the caller's for conversion and smoothing. */
static void quantize_one(const void *x, tfenc_element_type x_dtype, const float *smoothing,
                         int row, int n, uint8_t *q, float *scale, float *offset, float *own)
{
    const float *values = (const float *)x + (size_t)row * n;
    if (x_dtype == TFENC_BFLOAT16) {
        tfenc_matrix_from_bf16((const uint16_t *)x + (size_t)row * n, own, (size_t)n);
        values = own;
    }
    if (smoothing != NULL) {
        smooth_row(values, smoothing, n, own);
        values = own;
    }
    quantize_row(values, n, q, scale, offset);
}

/* Rows [first, first + rows) of x quantized into q [rows, n]. */
static void quantize_rows(const void *x, tfenc_element_type x_dtype, const float *smoothing,
                          int first, int rows, int n, uint8_t *q, float *scales, float *offsets,
                          float *own)
{
    for (int r = 0; r < rows; r++)
        quantize_one(x, x_dtype, smoothing, first + r, n, q + (size_t)r * n, &scales[r],
                     &offsets[r], own);
}

/* Calibration: range[j] = max(range[j], |x[r][j]|) over the rows. */
TFENC_VECTOR_CLONES
static void record_range(const float *x, int rows, int n, float *range)
{
    for (int r = 0; r < rows; r++) {
        const float *row = x + (size_t)r * n;
#pragma omp simd
        for (int j = 0; j < n; j++)
            range[j] = fabsf(row[j]) > range[j] ? fabsf(row[j]) : range[j];
    }
}

/* SmoothQuant's factors (alpha 1/2), applied to the weight's columns now
 * and kept inverted for the inputs. A channel never seen (range 0) or a
 * zero column keeps factor 1. */
static void smooth_weights(float *weight, int out, int in, const float *input_range,
                           float *inverse)
{
    for (int j = 0; j < in; j++) {
        float column = 0.0f;
        for (int n = 0; n < out; n++)
            column = fmaxf(column, fabsf(weight[(size_t)n * in + j]));
        float factor = input_range[j] > 0.0f && column > 0.0f ? sqrtf(input_range[j] / column)
                                                              : 1.0f;
        inverse[j] = 1.0f / factor;
        for (int n = 0; n < out; n++)
            weight[(size_t)n * in + j] *= factor;
    }
}

/* --------------------------------------------------------- linear maps */

/* Where each part of a map lives in a block (see tfenc_matrix_block): the
 * weights (float32 [out, in], or oneDNN's packed bf16/s8), then the bias,
 * then int8's scales, zero corrections and input smoothing, each 64-byte
 * aligned. */
typedef struct block_layout {
    size_t weights, bias, scales, zero_correction, smoothing, total;
} block_layout;


static block_layout layout_block(tfenc_precision precision, size_t packed_bytes, int out, int in,
                                 int has_bias, int smoothing)
{
    block_layout b = {0};
    /* fp32 maps on oneDNN have packed weights too (packed_bytes > 0). */
    size_t at = round_up_64(precision == TFENC_PRECISION_FP32 && packed_bytes == 0
                                ? (size_t)out * (size_t)in * sizeof(float)
                                : packed_bytes);
    b.bias = at;
    at += has_bias ? round_up_64((size_t)out * sizeof(float)) : 0;
    if (precision == TFENC_PRECISION_INT8) {
        b.scales = at;
        at += round_up_64((size_t)out * sizeof(float));
        b.zero_correction = at;
        at += round_up_64((size_t)out * sizeof(float));
        b.smoothing = at;
        at += smoothing ? round_up_64((size_t)in * sizeof(float)) : 0;
    }
    b.total = at;
    return b;
}

/* fp32_products = onednn needs oneDNN in the build. */
static int check_fp32_products(tfenc_context *ctx)
{
#ifdef HAVE_ONEDNN
    (void)ctx;
    return TFENC_OK;
#else
    return tfenc_error(ctx, TFENC_ERR_CONFIG,
                       "fp32_products = onednn: tfenc was built without oneDNN (install "
                       "libdnnl-dev and run configure again, or use fp32_products = openblas)");
#endif
}

int tfenc_matrix_linear_block_bytes(tfenc_context *ctx, const tfenc_matrix_linear_options *options,
                                    int out, int in, int has_bias, size_t *bytes)
{
    *bytes = 0;
    size_t packed = 0;
    if (options->precision != TFENC_PRECISION_FP32) {
        int status = tfenc_matrix_check_precision(ctx, options->precision);
        if (status != TFENC_OK)
            return status;
#ifdef HAVE_ONEDNN
        onednn_linear *probe = NULL;
        status = onednn_linear_prepare(ctx, options->precision, out, in, &probe);
        if (status != TFENC_OK)
            return status;
        packed = onednn_linear_packed_bytes(probe);
        onednn_linear_destroy(probe);
#endif
    } else if (options->fp32_products == TFENC_FP32_PRODUCTS_ONEDNN) {
        int status = check_fp32_products(ctx);
#ifdef HAVE_ONEDNN
        onednn_f32_linear *probe = NULL;
        if (status == TFENC_OK)
            status = onednn_f32_prepare(ctx, TFENC_MATRIX_FP32_BLOCK_ROWS, out, in, has_bias,
                                        &probe);
        if (status == TFENC_OK)
            packed = onednn_f32_packed_bytes(probe);
        onednn_f32_destroy(probe);
#endif
        if (status != TFENC_OK)
            return status;
    }
    *bytes = layout_block(options->precision, packed, out, in, has_bias,
                          options->input_range != NULL)
                 .total;
    return TFENC_OK;
}

int tfenc_matrix_linear_create(tfenc_context *ctx, const tfenc_matrix_linear_options *options,
                               float *weight, const float *bias, int out, int in,
                               tfenc_matrix_scratch *scratch, tfenc_linear **linear_out)
{
    *linear_out = NULL;
    const tfenc_precision precision = options->precision;
    const tfenc_matrix_block *block = options->block;
    const int fill = block == NULL || block->fill;
    const int has_bias = bias != NULL || (block != NULL && block->has_bias);
    if (tfenc_openblas_load(ctx) != TFENC_OK)
        return TFENC_ERR_CONFIG;
    tfenc_linear *linear = calloc(1, sizeof *linear);
    int status = linear == NULL ? tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "matrix backend: out of memory")
                                : TFENC_OK;
    if (status == TFENC_OK && fill && weight == NULL)
        status = tfenc_error(ctx, TFENC_ERR_INTERNAL, "matrix backend: no weight to fill a map with");
    char *memory = block != NULL ? block->memory : NULL;
#ifdef HAVE_ONEDNN
    if (status == TFENC_OK && precision != TFENC_PRECISION_FP32) {
        status = tfenc_matrix_check_precision(ctx, precision);
        if (status == TFENC_OK)
            status = onednn_linear_prepare(ctx, precision, out, in, &linear->onednn);
    }
    if (status == TFENC_OK && precision == TFENC_PRECISION_FP32 &&
        options->fp32_products == TFENC_FP32_PRODUCTS_ONEDNN)
        status = onednn_f32_prepare(ctx, TFENC_MATRIX_FP32_BLOCK_ROWS, out, in, has_bias,
                                    &linear->onednn_f32);
#else
    if (status == TFENC_OK && precision == TFENC_PRECISION_FP32 &&
        options->fp32_products == TFENC_FP32_PRODUCTS_ONEDNN)
        status = check_fp32_products(ctx);
#endif
    block_layout layout = {0};
    if (status == TFENC_OK) {
        linear->precision = precision;
        linear->in = in;
        linear->out = out;
        linear->scratch = scratch;
        linear->borrowed = block != NULL;
        if (precision == TFENC_PRECISION_FP32)
            linear->record_input_range = options->record_input_range;
        size_t packed = 0;
#ifdef HAVE_ONEDNN
        if (linear->onednn != NULL)
            packed = onednn_linear_packed_bytes(linear->onednn);
        if (linear->onednn_f32 != NULL)
            packed = onednn_f32_packed_bytes(linear->onednn_f32);
#endif
        layout = layout_block(precision, packed, out, in, has_bias, options->input_range != NULL);
        if (block != NULL && block->bytes < layout.total)
            status = tfenc_error(ctx, TFENC_ERR_INTERNAL,
                                 "matrix backend: a %zu-byte block for a map that needs %zu",
                                 block->bytes, layout.total);
    }
    if (status == TFENC_OK && has_bias) {
        linear->bias = block != NULL ? (float *)(memory + layout.bias)
                                     : tfenc_aligned_alloc((size_t)out * sizeof(float));
        if (linear->bias == NULL)
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "matrix backend: out of memory");
        else if (fill)
            memcpy(linear->bias, bias, (size_t)out * sizeof(float));
    }
    if (status == TFENC_OK)
        status = scratch_threads(ctx, scratch);
    if (status == TFENC_OK)
        status = scratch_reserve(ctx, scratch,
                                 block_bytes(precision, in, out) * (size_t)scratch->threads);
    if (status == TFENC_OK && precision == TFENC_PRECISION_INT8 && options->input_range != NULL) {
        float *smoothing = block != NULL ? (float *)(memory + layout.smoothing)
                                         : tfenc_aligned_alloc((size_t)in * sizeof(float));
        if (smoothing == NULL)
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "matrix backend: out of memory");
        else if (fill)
            smooth_weights(weight, out, in, options->input_range, smoothing);
        linear->input_smoothing = smoothing;
    }
    if (status == TFENC_OK && precision != TFENC_PRECISION_FP32) {
#ifdef HAVE_ONEDNN
        status = onednn_linear_place(
                ctx, linear->onednn, scratch->threads, fill ? weight : NULL, linear->bias,
                block != NULL ? memory : NULL,
                block != NULL && precision == TFENC_PRECISION_INT8 ? (float *)(memory + layout.scales) : NULL,
                block != NULL && precision == TFENC_PRECISION_INT8 ? (float *)(memory + layout.zero_correction)
                                                                 : NULL);
#endif
        tfenc_aligned_free(weight); /* converted: the float32 copy is not kept */
        weight = NULL;
        /* glibc keeps freed blocks of this size in its heap (its mmap
         * threshold grows with the first one freed): give them back, or
         * the float32 copies of every map stay resident. */
        malloc_trim(0);
#ifdef HAVE_ONEDNN
    } else if (status == TFENC_OK && linear->onednn_f32 != NULL) {
        /* Packed once into oneDNN's layout: the float32 copy is not kept. */
        status = onednn_f32_place(ctx, linear->onednn_f32, scratch->threads,
                                  fill ? weight : NULL, linear->bias, memory);
        tfenc_aligned_free(weight);
        weight = NULL;
        malloc_trim(0);
#endif
    } else if (status == TFENC_OK && block != NULL) {
        linear->weight = (float *)memory;
        if (fill)
            memcpy(linear->weight, weight, (size_t)out * (size_t)in * sizeof(float));
        tfenc_aligned_free(weight);
        weight = NULL;
        malloc_trim(0); /* as above: the copy now lives in the block */
    } else if (status == TFENC_OK) {
        linear->weight = weight;
        weight = NULL;
    }
    tfenc_aligned_free(weight);
    if (status != TFENC_OK) {
        tfenc_matrix_linear_destroy(linear);
        return status;
    }
    *linear_out = linear;
    return TFENC_OK;
}

void tfenc_matrix_linear_destroy(tfenc_linear *linear)
{
    if (linear == NULL)
        return;
#ifdef HAVE_ONEDNN
    onednn_linear_destroy(linear->onednn);
    onednn_f32_destroy(linear->onednn_f32);
#endif
    if (!linear->borrowed) {
        tfenc_aligned_free(linear->weight);
        tfenc_aligned_free(linear->bias);
        tfenc_aligned_free(linear->input_smoothing);
    }
    free(linear);
}

size_t tfenc_matrix_linear_bytes(const tfenc_linear *linear)
{
    size_t bytes = (linear->bias != NULL ? (size_t)linear->out * sizeof(float) : 0);
    if (linear->weight != NULL)
        bytes += (size_t)linear->out * (size_t)linear->in * sizeof(float);
#ifdef HAVE_ONEDNN
    if (linear->onednn != NULL)
        bytes += onednn_linear_bytes(linear->onednn);
    if (linear->onednn_f32 != NULL)
        bytes += onednn_f32_bytes(linear->onednn_f32);
#endif
    return bytes;
}

tfenc_element_type tfenc_linear_dtype(const tfenc_linear *linear)
{
    return linear->precision == TFENC_PRECISION_FP32 ? TFENC_FLOAT32 : TFENC_BFLOAT16;
}

static size_t dtype_size(tfenc_element_type dtype)
{
    return dtype == TFENC_BFLOAT16 ? 2 : 4;
}

/* ------------------------------------------------ rows in fixed blocks
 *
 * Every product of a linear map runs over exactly the rows of its
 * precision's block (tfenc_matrix_block_rows: 64, 256 for fp32 on
 * OpenBLAS), the last block of a batch padded. The libraries choose kernels,
 * blockings and so the order of a row's sums by a product's shape (oneDNN
 * AMX or AVX-512 kernels by row count; OpenBLAS's kernels for the edges),
 * so a product of the batch's own size made a row's bits depend on the
 * other rows of its batch. A block belongs to one thread from its input's
 * conversion to its epilogue, and the primitives are made for one thread
 * (matrix_onednn.c), so the thread count cannot change a row either. */

typedef struct block_scratch {
    void *input;        /* [BLOCK_ROWS, in]: float32, bf16 or u8 */
    float *product;     /* [BLOCK_ROWS, out] */
    float *row_scales;  /* [BLOCK_ROWS] */
    float *row_offsets; /* [BLOCK_ROWS] */
    float *row_buffer;  /* [in] */
} block_scratch;

static block_scratch thread_block_scratch(const tfenc_linear *linear, int thread)
{
    const size_t rows = (size_t)tfenc_matrix_block_rows(linear->precision);
    char *at = (char *)linear->scratch->data +
               (size_t)thread * block_bytes(linear->precision, linear->in, linear->out);
    block_scratch b;
    b.input = at;
    at += round_up_64(rows * (size_t)linear->in * sizeof(float));
    b.product = (float *)at;
    at += round_up_64(rows * (size_t)linear->out * sizeof(float));
    b.row_scales = (float *)at;
    b.row_offsets = b.row_scales + rows;
    at += round_up_64(2 * rows * sizeof(float));
    b.row_buffer = (float *)at;
    return b;
}

/* Rows [first, first + count) of x (x_dtype, row length n) into a block
 * of `element`-byte values (float32 or bf16), the rows after `count` zero
 * (padding: their products are never read, but are computed). */
static void block_input(const void *x, tfenc_element_type x_dtype, int first, int count,
                        int block_rows, int n, tfenc_element_type element, void *out)
{
    const char *rows = (const char *)x + (size_t)first * n * dtype_size(x_dtype);
    if (element == TFENC_FLOAT32)
        rows_to_float(rows, x_dtype, count, n, out);
    else
        rows_to_bf16(rows, x_dtype, count, n, out);
    memset((char *)out + (size_t)count * n * dtype_size(element), 0,
           (size_t)(block_rows - count) * n * dtype_size(element));
}

/* One block's product on OpenBLAS, the bias loaded into z first. */
static void fp32_openblas(const tfenc_linear *linear, const float *source, float *z)
{
    const int in = linear->in, out = linear->out;
    float beta = 0.0f;
    if (linear->bias != NULL) {
        for (int r = 0; r < TFENC_MATRIX_FP32_BLOCK_ROWS; r++)
            memcpy(z + (size_t)r * out, linear->bias, (size_t)out * sizeof(float));
        beta = 1.0f;
    }
    tfenc_openblas_sgemm(1, TFENC_MATRIX_FP32_BLOCK_ROWS, out, in, 1.0f, source, in,
                         linear->weight, in, beta, z, out);
}

/* One fp32 block: z = x W^T + b, on OpenBLAS (the bias loaded first and
 * accumulated onto) or on oneDNN's packed weights (the bias added inside
 * the product), then the epilogue into y, the same for both. A full block
 * of float32 rows is read in place, and written in place when nothing
 * follows the product but an element-wise activation; the tail goes
 * through scratch with the same product, so its rows get the same bits. */
static int fp32_block(tfenc_context *ctx, const tfenc_linear *linear,
                      const tfenc_linear_args *args, int first, int count, int thread,
                      const block_scratch *b)
{
    const int in = linear->in, out = linear->out;
    const int full = count == TFENC_MATRIX_FP32_BLOCK_ROWS;
    const float *source = (const float *)args->x + (size_t)first * in;
    if (!full || args->x_dtype != TFENC_FLOAT32) {
        block_input(args->x, args->x_dtype, first, count, TFENC_MATRIX_FP32_BLOCK_ROWS, in,
                    TFENC_FLOAT32, b->input);
        source = b->input;
    }
    const int in_place = full && args->y_dtype == TFENC_FLOAT32 && !is_gated(args->activation) &&
                         args->residual == NULL;
    float *z = in_place ? (float *)args->y + (size_t)first * out : b->product;
#ifdef HAVE_ONEDNN
    if (linear->onednn_f32 != NULL) {
        int status = onednn_f32_execute(ctx, linear->onednn_f32, thread,
                                        linear->scratch->streams[thread], source, z);
        if (status != TFENC_OK)
            return status;
    } else
        fp32_openblas(linear, source, z);
#else
    (void)ctx;
    (void)thread;
    fp32_openblas(linear, source, z);
#endif
    const size_t y_width = (size_t)(is_gated(args->activation) ? out / 2 : out);
    epilogue(z, count, out, (size_t)out, NULL, NULL, NULL, NULL, args->activation,
             args->residual != NULL ? args->residual + (size_t)first * y_width : NULL,
             (char *)args->y + (size_t)first * y_width * dtype_size(args->y_dtype),
             args->y_dtype);
    return TFENC_OK;
}


#ifdef HAVE_ONEDNN
/* Activations oneDNN applies inside the product (post-ops); gated ones need
 * two columns of the product and are left to the epilogue. */
static int onednn_fuses(tfenc_activation activation)
{
    return activation == TFENC_ACTIVATION_NONE || activation == TFENC_ACTIVATION_RELU ||
           activation == TFENC_ACTIVATION_GELU || activation == TFENC_ACTIVATION_GELU_TANH ||
           activation == TFENC_ACTIVATION_SILU;
}

/* bf16 maps finish inside oneDNN (bias and element-wise activation fused,
 * y's element type written, a residual added by oneDNN's sum post-op
 * where no activation comes before it) unless a gated activation follows;
 * int8 maps always end in the epilogue (per-token scales, zero points,
 * bias). */
static int onednn_direct(const tfenc_linear *linear, tfenc_activation activation)
{
    return linear->precision != TFENC_PRECISION_INT8 && onednn_fuses(activation);
}

/* One bf16 or int8 block on oneDNN, on the thread's stream: the input
 * converted to bf16 or quantized per token (int8), then the product. A
 * direct product of a full block writes y in place; a tail's goes through
 * scratch and its rows are copied. */
static int onednn_block(tfenc_context *ctx, const tfenc_linear *linear,
                        const tfenc_linear_args *args, int first, int count, int thread,
                        const block_scratch *b)
{
    const int in = linear->in, out = linear->out;
    const int int8 = linear->precision == TFENC_PRECISION_INT8;
    const int direct = onednn_direct(linear, args->activation);
    const int full = count == TFENC_MATRIX_BLOCK_ROWS;
    const size_t y_width = (size_t)(is_gated(args->activation) ? out / 2 : out);
    char *y = (char *)args->y + (size_t)first * y_width * dtype_size(args->y_dtype);
    const void *source = (const char *)args->x + (size_t)first * in * dtype_size(args->x_dtype);
    if (int8) {
        quantize_rows(args->x, args->x_dtype, linear->input_smoothing, first, count, in,
                      b->input, b->row_scales, b->row_offsets, b->row_buffer);
        /* Padding rows: the zero point, i.e. zero. */
        memset((uint8_t *)b->input + (size_t)count * in, 128,
               (size_t)(TFENC_MATRIX_BLOCK_ROWS - count) * in);
        source = b->input;
    } else if (!full || args->x_dtype != TFENC_BFLOAT16) {
        block_input(args->x, args->x_dtype, first, count, TFENC_MATRIX_BLOCK_ROWS, in,
                    TFENC_BFLOAT16, b->input);
        source = b->input;
    }
    void *stream = linear->scratch->streams[thread];
    const size_t y_bytes = (size_t)count * y_width * dtype_size(args->y_dtype);
    const float *residual =
        args->residual != NULL ? args->residual + (size_t)first * y_width : NULL;
    /* oneDNN's sum post-op adds the residual where the product writes: y
     * for a full block, scratch for a tail (by the same product, so that
     * its rows get the same bits; the padding rows' sums are not read).
     * Not after an activation: the kernels disagree on its place in the
     * chain (capped at AVX512_CORE, oneDNN's is not the activation's result
     * plus the residual), so the epilogue adds it to the activated rows. */
    const int sum = direct && residual != NULL && args->activation == TFENC_ACTIVATION_NONE;
    const int add_after = direct && residual != NULL && !sum;
    if (sum && full && residual != (const float *)y)
        memcpy(y, residual, y_bytes);
    if (direct && full && !add_after)
        return onednn_linear_execute(ctx, linear->onednn, thread, stream, source, y,
                                     args->y_dtype, args->activation, sum);
    if (sum) {
        memcpy(b->product, residual, y_bytes);
        memset((char *)b->product + y_bytes, 0,
               (size_t)(TFENC_MATRIX_BLOCK_ROWS - count) * y_width * sizeof(float));
    }
    tfenc_element_type product_dtype = direct ? args->y_dtype : TFENC_FLOAT32;
    int status = onednn_linear_execute(ctx, linear->onednn, thread, stream, source, b->product,
                                       product_dtype,
                                       direct ? args->activation : TFENC_ACTIVATION_NONE, sum);
    if (status != TFENC_OK)
        return status;
    if (add_after)
        epilogue(b->product, count, out, (size_t)out, NULL, NULL, NULL, NULL,
                 TFENC_ACTIVATION_NONE, residual, y, TFENC_FLOAT32);
    else if (direct)
        memcpy(y, b->product, y_bytes);
    else
        /* bf16 products got their bias inside oneDNN; int8 ones get it
         * here, after the per-token scale. */
        epilogue(b->product, count, out, (size_t)out, int8 ? b->row_scales : NULL,
                 int8 ? b->row_offsets : NULL,
                 int8 ? onednn_linear_zero_correction(linear->onednn) : NULL,
                 int8 ? linear->bias : NULL, args->activation, residual, y, args->y_dtype);
    return TFENC_OK;
}
#endif

/* Block `block` of a run, by the thread that runs it. */
static int run_block(tfenc_context *ctx, const tfenc_linear *linear, const tfenc_linear_args *args,
                     int block)
{
    const int rows = tfenc_matrix_block_rows(linear->precision);
    const int first = block * rows;
    const int count = args->rows - first < rows ? args->rows - first : rows;
    const int thread = omp_in_parallel() ? omp_get_thread_num() : 0;
    if (thread >= linear->scratch->threads)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL,
                           "matrix backend: thread %d of a pool planned for %d", thread,
                           linear->scratch->threads);
    const block_scratch b = thread_block_scratch(linear, thread);
    if (linear->precision == TFENC_PRECISION_FP32)
        return fp32_block(ctx, linear, args, first, count, thread, &b);
#ifdef HAVE_ONEDNN
    return onednn_block(ctx, linear, args, first, count, thread, &b);
#else
    return tfenc_error(ctx, TFENC_ERR_INTERNAL, "matrix backend: built without oneDNN");
#endif
}

/* fp32 calibration: every input row's channel ranges, before the blocks
 * run (on several threads they would race on the one range array). */
static void record_input_range(const tfenc_linear *linear, const tfenc_linear_args *args)
{
    const int in = linear->in;
    if (args->x_dtype == TFENC_FLOAT32) {
        record_range(args->x, args->rows, in, linear->record_input_range);
        return;
    }
    float *row = thread_block_scratch(linear, 0).input;
    for (int r = 0; r < args->rows; r++) {
        tfenc_matrix_from_bf16((const uint16_t *)args->x + (size_t)r * in, row, (size_t)in);
        record_range(row, 1, in, linear->record_input_range);
    }
}

/* The first failure of a run's blocks: the lowest block's (each block's
 * thread records its own). */
typedef struct block_failure {
    int block; /* the failed block, or the run's block count: none */
    tfenc_context ctx;
} block_failure;

static void run_block_keeping_failure(const tfenc_linear *linear, const tfenc_linear_args *args,
                                      int block, block_failure *failure)
{
    tfenc_context own;
    tfenc_context_init(&own);
    if (run_block(&own, linear, args, block) == TFENC_OK)
        return;
#pragma omp critical(tfenc_matrix_block_failure)
    if (block < failure->block) {
        failure->block = block;
        failure->ctx = own;
    }
}

/* The blocks of a run over the pool's threads (or, called from a parallel
 * region, on the calling thread). Errors are rare (oneDNN failing to
 * run): the first block's that failed is the run's. */
static int run_blocks(tfenc_context *ctx, const tfenc_linear *linear, const tfenc_linear_args *args)
{
    if (linear->record_input_range != NULL)
        record_input_range(linear, args);
    const int rows = tfenc_matrix_block_rows(linear->precision);
    const int blocks = (args->rows + rows - 1) / rows;
    block_failure failure = {.block = blocks};
    tfenc_context_init(&failure.ctx);
    TFENC_PARALLEL_FOR(block, blocks, (double)args->rows * linear->in * linear->out,
                       run_block_keeping_failure(linear, args, block, &failure));
    if (failure.block == blocks)
        return TFENC_OK;
    return tfenc_error(ctx, failure.ctx.status, "%s", tfenc_context_message(&failure.ctx));
}

int tfenc_linear_run(tfenc_context *ctx, const tfenc_linear *linear,
                     const tfenc_linear_args *given)
{
    /* A plugin built before ABI 1.5 passes the struct without residual. */
    tfenc_linear_args full = {0};
    if (given != NULL && given->struct_size >= offsetof(tfenc_linear_args, residual))
        memcpy(&full, given,
               given->struct_size < sizeof full ? given->struct_size : sizeof full);
    const tfenc_linear_args *args = given != NULL ? &full : NULL;
    if (args == NULL || args->struct_size < offsetof(tfenc_linear_args, residual) ||
        args->rows < 0 ||
        (unsigned)args->activation > TFENC_ACTIVATION_GEGLU_TANH ||
        (unsigned)args->x_dtype > TFENC_BFLOAT16 ||
        (unsigned)args->y_dtype > TFENC_BFLOAT16 ||
        (args->residual != NULL && args->y_dtype != TFENC_FLOAT32))
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "tfenc_linear_run: bad arguments");
    if (is_gated(args->activation) && linear->out % 2 != 0)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL,
                           "tfenc_linear_run: a gated activation needs an even width, not %d",
                           linear->out);
#ifdef HAVE_ONEDNN
    /* The primitives of this (destination, activation) pair, made now if
     * new, never from the blocks' parallel region; a run of 0 rows is how
     * a plugin prepares them before its forward passes. */
    if (linear->precision != TFENC_PRECISION_FP32) {
        const int direct = onednn_direct(linear, args->activation);
        const int sum = direct && args->residual != NULL &&
                        args->activation == TFENC_ACTIVATION_NONE; /* as onednn_block */
        int status = onednn_linear_prepare_variant(
            ctx, linear->onednn, linear->scratch->threads, direct ? args->y_dtype : TFENC_FLOAT32,
            direct ? args->activation : TFENC_ACTIVATION_NONE, sum);
        if (status != TFENC_OK)
            return status;
    }
#endif
    if (args->rows == 0)
        return TFENC_OK;
    return run_blocks(ctx, linear, args);
}

int tfenc_linear_forward(tfenc_context *ctx, const tfenc_linear *linear, const float *x, int rows,
                         float *y)
{
    tfenc_linear_args args = {.struct_size = sizeof args, .x = x, .x_dtype = TFENC_FLOAT32,
                              .y = y, .y_dtype = TFENC_FLOAT32, .rows = rows,
                              .activation = TFENC_ACTIVATION_NONE};
    return tfenc_linear_run(ctx, linear, &args);
}

/* ------------------------------------------------- activation products */

int tfenc_matrix_matmul_create(tfenc_context *ctx, tfenc_precision precision,
                               const tfenc_matmul_shape *largest, tfenc_matrix_scratch *scratch,
                               tfenc_matmul_plan **plan_out)
{
    *plan_out = NULL;
    if (tfenc_openblas_load(ctx) != TFENC_OK)
        return TFENC_ERR_CONFIG;
    if (largest == NULL || largest->struct_size < sizeof(tfenc_matmul_shape) ||
        largest->batch < 1 || largest->m < 1 || largest->n < 1 || largest->k < 1)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "tfenc_matmul_plan_create: bad shape");
    tfenc_matmul_plan *plan = calloc(1, sizeof *plan);
    if (plan == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "matrix backend: out of memory");
    /* Attention stays out of int8: its products run in bf16 in int8 jobs
     * (fp32 where bf16 does not run). */
    plan->precision = precision == TFENC_PRECISION_INT8 ? tfenc_matrix_int8_fallback() : precision;
    plan->largest = *largest;
    plan->largest.struct_size = sizeof plan->largest;
    plan->scratch = scratch;
    int status = TFENC_OK;
    if (plan->precision != TFENC_PRECISION_FP32) {
        status = tfenc_matrix_check_precision(ctx, plan->precision);
#ifdef HAVE_ONEDNN
        size_t bytes = 0;
        if (status == TFENC_OK)
            status = scratch_stream(ctx, scratch);
        /* Each thread of the pool may run one product at a time. */
        plan->threads = scratch->threads;
        if (status == TFENC_OK)
            status = onednn_matmul_create(ctx, &plan->largest, plan->threads, &plan->onednn, &bytes);
        bytes = (bytes + 63) / 64 * 64;
        if (bytes > scratch->thread_stride)
            scratch->thread_stride = bytes;
        if (status == TFENC_OK)
            status = scratch_reserve(ctx, scratch, scratch->thread_stride * (size_t)plan->threads);
#endif
    }
    if (status != TFENC_OK) {
        tfenc_matrix_matmul_destroy(plan);
        return status;
    }
    *plan_out = plan;
    return TFENC_OK;
}

void tfenc_matrix_matmul_destroy(tfenc_matmul_plan *plan)
{
    if (plan == NULL)
        return;
#ifdef HAVE_ONEDNN
    onednn_matmul_destroy(plan->onednn);
#endif
    free(plan);
}

int tfenc_matmul_padded_layout(const tfenc_matmul_plan *plan, int m, int n, int k,
                               tfenc_matmul_layout *layout)
{
    const tfenc_matmul_shape *largest = &plan->largest;
    if (layout == NULL || layout->struct_size < sizeof(tfenc_matmul_layout) ||
        plan->precision == TFENC_PRECISION_FP32 || m < 1 || n < 1 || k < 1 || m > largest->m ||
        n > largest->n || k > largest->k)
        return TFENC_ERR_NOT_FOUND;
#ifdef HAVE_ONEDNN
    onednn_matmul_padded(m, n, k, &layout->m_padded, &layout->n_padded, &layout->k_padded);
    return TFENC_OK;
#else
    return TFENC_ERR_NOT_FOUND;
#endif
}

static void fp32_product(const tfenc_matmul_args *args, int b_transposed, int b)
{
    const int shared = args->b_shared_by > 1 ? args->b_shared_by : 1;
    tfenc_openblas_sgemm(b_transposed, args->m, args->n, args->k, args->alpha,
                         args->a + b * args->a_batch_stride, (int)args->a_row_stride,
                         args->b + (b / shared) * args->b_batch_stride, (int)args->b_row_stride,
                         0.0f, args->c + b * args->c_batch_stride, (int)args->c_row_stride);
}

/* The fields of ABI 1.2's tfenc_matmul_args, which end before a_bf16. */
#define MATMUL_ARGS_1_2 offsetof(tfenc_matmul_args, a_bf16)

int tfenc_matmul(tfenc_context *ctx, const tfenc_matmul_plan *plan, const tfenc_matmul_args *given)
{
    const tfenc_matmul_shape *largest = &plan->largest;
    /* A plugin of ABI 1.2 passes the fields before a_bf16: the others are NULL. */
    tfenc_matmul_args full = {0};
    const tfenc_matmul_args *args = NULL;
    if (given != NULL && given->struct_size >= MATMUL_ARGS_1_2) {
        memcpy(&full, given, given->struct_size < sizeof full ? given->struct_size : sizeof full);
        args = &full;
    }
    if (args == NULL || args->m < 0 ||
        args->n < 0 || args->k < 0 || args->m > largest->m || args->n > largest->n ||
        args->k > largest->k || args->b_shared_by < 0 ||
        (args->b_shared_by > 1 && largest->batch % args->b_shared_by != 0))
        return tfenc_error(ctx, TFENC_ERR_INTERNAL,
                           "tfenc_matmul: a [%d, %d] x [%d, %d] product outside its plan "
                           "[%d, %d] x [%d, %d]",
                           args ? args->m : 0, args ? args->k : 0, args ? args->k : 0,
                           args ? args->n : 0, largest->m, largest->k, largest->k, largest->n);
    /* Operands in the padded layout: only bf16 plans have one, and C left
     * there gets no alpha. */
    const int scaled_in_place = args->c_padded != NULL && args->alpha != 1.0f;
    if ((args->a_bf16 != NULL || args->b_bf16 != NULL || args->c_padded != NULL) &&
        (plan->precision == TFENC_PRECISION_FP32 || scaled_in_place))
        return tfenc_error(ctx, TFENC_ERR_INTERNAL,
                           "tfenc_matmul: a_bf16, b_bf16 or c_padded given to a %s plan%s",
                           plan->precision == TFENC_PRECISION_FP32 ? "float32" : "bf16",
                           scaled_in_place ? " with alpha != 1" : "");
    if (args->m == 0 || args->n == 0)
        return TFENC_OK;
    if (plan->precision == TFENC_PRECISION_FP32) {
        /* One single-threaded sgemm per batch entry, the entries spread over
         * the pool's threads. */
        TFENC_PARALLEL_FOR(b, largest->batch, (double)largest->batch * args->m * args->n * args->k,
                           fp32_product(args, largest->b_transposed, b));
        return TFENC_OK;
    }
#ifdef HAVE_ONEDNN
    /* From a parallel region each thread uses its own stream, memory
     * objects and part of the scratch, and oneDNN runs on it alone. */
    const int thread = omp_in_parallel() ? omp_get_thread_num() : 0;
    if (thread >= plan->threads)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL,
                           "tfenc_matmul: thread %d of a pool planned for %d", thread, plan->threads);
    return onednn_matmul_execute(ctx, plan->onednn, thread, plan->scratch->streams[thread], args,
                                 (char *)plan->scratch->data +
                                     (size_t)thread * plan->scratch->thread_stride);
#else
    return tfenc_error(ctx, TFENC_ERR_INTERNAL, "matrix backend: built without oneDNN");
#endif
}
