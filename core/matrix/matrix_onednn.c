/* bf16 and int8 products on oneDNN (see core/matrix/matrix_onednn.h). oneDNN's
 * fast kernels (brgemm) are made for fixed sizes, and making one allocates
 * and takes a fraction of a millisecond, so a linear map owns primitives
 * for one block of TFENC_MATRIX_BLOCK_ROWS rows (every batch runs as such
 * blocks, the last padded: matrix.c says why), and an activation product
 * owns primitives for a grid of padded sizes, its operands gathered into
 * scratch in bf16. Memory objects are made with the primitives and pointed
 * at each call's data, so a product allocates nothing of its own (oneDNN's
 * execute keeps a few bytes of bookkeeping per call).
 *
 * Every primitive is made for one thread. oneDNN splits a product's work
 * (and for some kernels its sums over K) by the threads it may use when the
 * primitive is made, so primitives made for the pool would give other bits
 * at another thread count; the pool's threads run separate blocks instead. */
#include "config.h"

#include "matrix/matrix_onednn.h"
#include "base/aligned.h"
#include "tfenc/plugin_math.h"
#include "tfenc/plugin_parallel.h"

#include <dnnl.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* (destination type, activation) pairs a linear map serves, each with its
 * own primitives; a layer uses one or two. */
#define MAX_VARIANTS 6

static pthread_once_t engine_once = PTHREAD_ONCE_INIT;
static dnnl_engine_t engine;
static dnnl_status_t engine_status = dnnl_runtime_error;

static void engine_create(void)
{
    engine_status = dnnl_engine_create(&engine, dnnl_cpu, 0);
}

static int engine_ready(void)
{
    pthread_once(&engine_once, engine_create);
    return engine_status == dnnl_success;
}

/* ------------------------------------------------------ what runs here */

const char *onednn_isa_name(void)
{
    switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "unknown";
    }
}

void onednn_describe(char *line, size_t size)
{
    const dnnl_version_t *version = dnnl_version();
    snprintf(line, size, "oneDNN %d.%d.%d, %s", version->major, version->minor, version->patch,
             onednn_isa_name());
}

/* The ISA values are bit sets: each level adds its bits to the one below. */
int onednn_isa_has_bf16(void)
{
    return (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core_bf16 & ~dnnl_cpu_isa_avx512_core_vnni) != 0;
}

int onednn_isa_has_vnni(void)
{
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return (isa & dnnl_cpu_isa_avx512_core_vnni & ~dnnl_cpu_isa_avx512_core) != 0 ||
           isa == dnnl_cpu_isa_avx2_vnni;
}

int onednn_isa_has_amx(void)
{
    return (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core_amx &
            ~dnnl_cpu_isa_avx512_core_bf16) != 0;
}

void *onednn_engine(void)
{
    return engine_ready() ? engine : NULL;
}

int onednn_stream_create(void **stream)
{
    if (!engine_ready())
        return TFENC_ERR_INTERNAL;
    dnnl_stream_t made;
    if (dnnl_stream_create(&made, engine, dnnl_stream_default_flags) != dnnl_success)
        return TFENC_ERR_INTERNAL;
    *stream = made;
    return TFENC_OK;
}

void onednn_stream_destroy(void *stream)
{
    dnnl_stream_destroy(stream);
}

/* ----------------------------------------------------------- primitives */

/* A primitive with the memory objects of its arguments, made once. */
typedef struct product {
    dnnl_primitive_t primitive;
    dnnl_memory_t source, destination;
    dnnl_memory_t scratchpad; /* products run from parallel regions: their own; else NULL */
    size_t scratchpad_bytes;
    void *own_scratchpad;     /* a linear map's product: its scratchpad's memory, or NULL */
} product;

void onednn_product_release(void *primitive, void *source, void *destination, void *scratchpad)
{
    if (primitive != NULL)
        dnnl_primitive_destroy(primitive);
    if (source != NULL)
        dnnl_memory_destroy(source);
    if (destination != NULL)
        dnnl_memory_destroy(destination);
    if (scratchpad != NULL)
        dnnl_memory_destroy(scratchpad);
}

static void product_destroy(product *p)
{
    onednn_product_release(p->primitive, p->source, p->destination, p->scratchpad);
    tfenc_aligned_free(p->own_scratchpad);
    memset(p, 0, sizeof *p);
}

static dnnl_data_type_t data_type(tfenc_element_type dtype)
{
    return dtype == TFENC_BFLOAT16 ? dnnl_bf16 : dnnl_f32;
}

/* Primitives are made with the pool's size set to one thread (the file's
 * head says why); one_thread_end puts the pool's size back. Not from a
 * parallel region. */
static int one_thread_begin(void)
{
    const int pool = omp_get_max_threads();
    omp_set_num_threads(1);
    return pool;
}

static void one_thread_end(int pool)
{
    omp_set_num_threads(pool);
}

/* Makes the primitive for descriptor `desc` under `attr` and the memory
 * objects (without data) of its source and destination. */
static dnnl_status_t product_create(product *p, const dnnl_matmul_desc_t *desc,
                                    const_dnnl_primitive_attr_t attr,
                                    const dnnl_memory_desc_t *source,
                                    const dnnl_memory_desc_t *destination,
                                    const dnnl_memory_desc_t **weights_chosen,
                                    dnnl_primitive_desc_t *kept)
{
    dnnl_primitive_desc_t primitive_desc;
    const int pool = one_thread_begin();
    dnnl_status_t status = dnnl_primitive_desc_create(&primitive_desc, desc, attr, engine, NULL);
    if (status == dnnl_success)
        status = dnnl_primitive_create(&p->primitive, primitive_desc);
    one_thread_end(pool);
    if (status != dnnl_success) {
        if (p->primitive == NULL)
            dnnl_primitive_desc_destroy(primitive_desc);
        return status;
    }
    if (status == dnnl_success)
        status = dnnl_memory_create(&p->source, source, engine, DNNL_MEMORY_NONE);
    if (status == dnnl_success)
        status = dnnl_memory_create(&p->destination, destination, engine, DNNL_MEMORY_NONE);
    dnnl_scratchpad_mode_t mode = dnnl_scratchpad_mode_library;
    if (status == dnnl_success && attr != NULL)
        status = dnnl_primitive_attr_get_scratchpad_mode(attr, &mode);
    if (status == dnnl_success && mode == dnnl_scratchpad_mode_user) {
        const dnnl_memory_desc_t *pad =
            dnnl_primitive_desc_query_md(primitive_desc, dnnl_query_scratchpad_md, 0);
        p->scratchpad_bytes = pad != NULL ? dnnl_memory_desc_get_size(pad) : 0;
        if (p->scratchpad_bytes > 0)
            status = dnnl_memory_create(&p->scratchpad, pad, engine, DNNL_MEMORY_NONE);
    }
    if (status == dnnl_success && weights_chosen != NULL) {
        /* The caller reads the layout oneDNN picked, then destroys it. */
        *weights_chosen = dnnl_primitive_desc_query_md(primitive_desc, dnnl_query_weights_md, 0);
        *kept = primitive_desc;
        return status;
    }
    dnnl_primitive_desc_destroy(primitive_desc);
    return status;
}

/* Runs p; `scratchpad` is its own scratchpad memory when it has one. */
static dnnl_status_t execute(dnnl_stream_t stream, product *p, const void *source,
                             void *destination, dnnl_memory_t weights, dnnl_memory_t bias,
                             void *scratchpad)
{
    dnnl_status_t status = dnnl_memory_set_data_handle(p->source, (void *)source);
    if (status == dnnl_success)
        status = dnnl_memory_set_data_handle(p->destination, destination);
    if (status == dnnl_success && p->scratchpad != NULL)
        status = dnnl_memory_set_data_handle(p->scratchpad, scratchpad);
    if (status != dnnl_success)
        return status;
    dnnl_exec_arg_t args[5] = {{DNNL_ARG_SRC, p->source}, {DNNL_ARG_WEIGHTS, weights},
                               {DNNL_ARG_DST, p->destination}};
    int n_args = 3;
    if (bias != NULL)
        args[n_args++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, bias};
    if (p->scratchpad != NULL)
        args[n_args++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, p->scratchpad};
    status = dnnl_primitive_execute(p->primitive, stream, n_args, args);
    return status == dnnl_success ? dnnl_stream_wait(stream) : status;
}

/* --------------------------------------------------------- linear maps */

typedef struct variant {
    int made;
    tfenc_element_type destination;
    tfenc_activation activation;
    int sum; /* adds the product to what the destination holds */
    /* [threads]: [TFENC_MATRIX_BLOCK_ROWS, in] x [in, out], one per thread
     * of the pool (memory objects and scratchpad of its own; the kernel is
     * the same, from oneDNN's primitive cache) */
    product *blocks;
    int threads;
} variant;

struct onednn_linear {
    tfenc_precision precision;
    int in, out;
    dnnl_memory_desc_t weights_desc; /* the packed layout, chosen by oneDNN */
    void *weights;                   /* packed bf16 or s8 weights (with int8 compensation) */
    size_t weights_bytes;
    dnnl_memory_t weights_memory;
    dnnl_memory_t bias_memory;       /* bf16 maps with a bias; NULL otherwise */
    const float *bias;               /* the front's copy, which outlives this */
    float *scales;                   /* int8: [out] max|w_n| / 127 (63 without VNNI) */
    float *zero_correction;          /* int8: [out] scales[n] * sum_k wq[n][k] */
    int borrowed;                    /* weights, scales, zero_correction live in the
                                      * caller's block (shared by a node's ranks) */
    variant variants[MAX_VARIANTS];
};

int onednn_precision_runs(tfenc_precision precision)
{
    if (!engine_ready())
        return 0;
    /* Ask oneDNN for a small product rather than guess from CPU flags:
     * oneDNN 2.6 runs bf16 from AVX-512 on, int8 everywhere. */
    dnnl_dims_t source_dims = {16, 16}, weights_dims = {16, 16};
    dnnl_data_type_t source_type = precision == TFENC_PRECISION_INT8 ? dnnl_u8 : dnnl_bf16;
    dnnl_data_type_t weights_type = precision == TFENC_PRECISION_INT8 ? dnnl_s8 : dnnl_bf16;
    dnnl_memory_desc_t source, weights, destination;
    dnnl_matmul_desc_t desc;
    dnnl_primitive_desc_t primitive_desc;
    if (dnnl_memory_desc_init_by_tag(&source, 2, source_dims, source_type, dnnl_ab) ||
        dnnl_memory_desc_init_by_tag(&weights, 2, weights_dims, weights_type, dnnl_ba) ||
        dnnl_memory_desc_init_by_tag(&destination, 2, source_dims, dnnl_f32, dnnl_ab) ||
        dnnl_matmul_desc_init(&desc, &source, &weights, NULL, &destination) ||
        dnnl_primitive_desc_create(&primitive_desc, &desc, NULL, engine, NULL))
        return 0;
    dnnl_primitive_desc_destroy(primitive_desc);
    return 1;
}

/* The attributes of a linear map's primitives: int8 scales each output
 * channel by its weight scale and takes u8 inputs with zero point 128 (the
 * quantized token plus 128, so that oneDNN's u8 x s8 kernels apply); bf16
 * fuses the element-wise activation, or (`sum`, without one) the add of
 * what the float32 destination holds: a residual connection, one add of
 * two floats per value after the bias, as a pass of its own makes. */
static dnnl_status_t linear_attributes(const onednn_linear *linear, tfenc_activation activation,
                                       int sum, dnnl_primitive_attr_t *attr)
{
    dnnl_status_t status = dnnl_primitive_attr_create(attr);
    if (status != dnnl_success)
        return status;
    if (linear->precision == TFENC_PRECISION_INT8) {
        static const int32_t zero_point = 128;
        status = dnnl_primitive_attr_set_output_scales(*attr, linear->out, 1 << 1, linear->scales);
        if (status == dnnl_success)
            status = dnnl_primitive_attr_set_zero_points(*attr, DNNL_ARG_SRC, 1, 0, &zero_point);
        return status;
    }
    if (activation == TFENC_ACTIVATION_NONE && !sum)
        return dnnl_success;
    dnnl_alg_kind_t kind = activation == TFENC_ACTIVATION_RELU        ? dnnl_eltwise_relu
                           : activation == TFENC_ACTIVATION_GELU      ? dnnl_eltwise_gelu_erf
                           : activation == TFENC_ACTIVATION_GELU_TANH ? dnnl_eltwise_gelu_tanh
                                                                      : dnnl_eltwise_swish;
    float alpha = kind == dnnl_eltwise_swish ? 1.0f : 0.0f; /* swish(x, 1) = x sigmoid(x) */
    dnnl_post_ops_t post_ops;
    status = dnnl_post_ops_create(&post_ops);
    if (status != dnnl_success)
        return status;
    if (activation != TFENC_ACTIVATION_NONE)
        status = dnnl_post_ops_append_eltwise(post_ops, 1.0f, kind, alpha, 0.0f);
    else
        status = dnnl_post_ops_append_sum(post_ops, 1.0f);
    if (status == dnnl_success)
        status = dnnl_primitive_attr_set_post_ops(*attr, post_ops);
    dnnl_post_ops_destroy(post_ops);
    return status;
}

/* Descriptors of one row count: source [rows, in], weights [in, out] in
 * the layout `weights` (format any to let oneDNN choose), bias [1, out]. */
static dnnl_status_t linear_desc(const onednn_linear *linear, int rows, tfenc_element_type destination,
                                 const dnnl_memory_desc_t *weights, dnnl_matmul_desc_t *desc,
                                 dnnl_memory_desc_t *source_desc,
                                 dnnl_memory_desc_t *destination_desc)
{
    int int8 = linear->precision == TFENC_PRECISION_INT8;
    dnnl_dims_t source_dims = {rows, linear->in}, destination_dims = {rows, linear->out},
                bias_dims = {1, linear->out};
    dnnl_memory_desc_t bias_desc;
    dnnl_status_t status;
    if ((status = dnnl_memory_desc_init_by_tag(source_desc, 2, source_dims,
                                               int8 ? dnnl_u8 : dnnl_bf16, dnnl_ab)) ||
        (status = dnnl_memory_desc_init_by_tag(destination_desc, 2, destination_dims,
                                               data_type(destination), dnnl_ab)) ||
        (status = dnnl_memory_desc_init_by_tag(&bias_desc, 2, bias_dims, dnnl_f32, dnnl_ab)))
        return status;
    return dnnl_matmul_desc_init(desc, source_desc, weights,
                                 linear->bias_memory != NULL ? &bias_desc : NULL,
                                 destination_desc);
}

static void variant_destroy(variant *v)
{
    for (int t = 0; v->blocks != NULL && t < v->threads; t++)
        product_destroy(&v->blocks[t]);
    free(v->blocks);
    memset(v, 0, sizeof *v);
}

/* Makes the products of one (destination, activation, sum) kind in the
 * packed weight layout, one per thread of a pool of `threads`. */
static int variant_make(tfenc_context *ctx, onednn_linear *linear, variant *v, int threads,
                        tfenc_element_type destination, tfenc_activation activation, int sum)
{
    dnnl_primitive_attr_t attr;
    dnnl_status_t status = linear_attributes(linear, activation, sum, &attr);
    if (status == dnnl_success)
        status = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    v->blocks = status == dnnl_success ? calloc((size_t)threads, sizeof *v->blocks) : NULL;
    if (status == dnnl_success && v->blocks == NULL)
        status = dnnl_out_of_memory;
    v->threads = v->blocks != NULL ? threads : 0;
    for (int t = 0; status == dnnl_success && t < threads; t++) {
        dnnl_matmul_desc_t desc;
        dnnl_memory_desc_t source, destination_desc;
        product *p = &v->blocks[t];
        status = linear_desc(linear, TFENC_MATRIX_BLOCK_ROWS, destination, &linear->weights_desc,
                             &desc, &source, &destination_desc);
        if (status == dnnl_success)
            status = product_create(p, &desc, attr, &source, &destination_desc, NULL, NULL);
        if (status == dnnl_success && p->scratchpad_bytes > 0) {
            p->own_scratchpad = tfenc_aligned_alloc(p->scratchpad_bytes);
            if (p->own_scratchpad == NULL)
                status = dnnl_out_of_memory;
        }
    }
    if (attr != NULL)
        dnnl_primitive_attr_destroy(attr);
    if (status != dnnl_success) {
        variant_destroy(v);
        return tfenc_error(ctx, status == dnnl_out_of_memory ? TFENC_ERR_NO_MEMORY : TFENC_ERR_INTERNAL,
                           "precision = %s: oneDNN cannot make a [%d, %d] product (status %d)",
                           tfenc_precision_names[linear->precision], linear->out, linear->in,
                           (int)status);
    }
    v->destination = destination;
    v->activation = activation;
    v->sum = sum;
    v->made = 1;
    return TFENC_OK;
}

/* int8 weights: each output channel n scaled by s_n = max|w_n| / limit and
 * rounded to the nearest of -limit..limit; oneDNN multiplies s_n back in.
 * The limit is 127 where the CPU has VNNI (or AMX). Without it oneDNN's
 * u8 x s8 kernels add two products into 16 bits with saturation
 * (vpmaddubsw): 255 x 127 x 2 overflows, and FFN layers came out at
 * cosine 0.65-0.95 to fp32. 63 keeps every pair within 16 bits (255 x 63
 * x 2 = 32130), as oneDNN's int8 guide and ONNX Runtime's reduce_range
 * do, for one bit of resolution. */
static void quantize_weights(const float *weight, int out, int in, int8_t *quantized,
                             float *scales, float *zero_correction)
{
    const float limit = onednn_isa_has_vnni() ? 127.0f : 63.0f;
    for (int n = 0; n < out; n++) {
        const float *row = weight + (size_t)n * in;
        float largest = 0.0f;
        for (int k = 0; k < in; k++)
            largest = fmaxf(largest, fabsf(row[k]));
        float scale = largest > 0.0f ? largest / limit : 1.0f;
        scales[n] = scale;
        long sum = 0;
        for (int k = 0; k < in; k++) {
            quantized[(size_t)n * in + k] = (int8_t)nearbyintf(row[k] / scale);
            sum += quantized[(size_t)n * in + k];
        }
        zero_correction[n] = scale * (float)sum;
    }
}

int onednn_reorder_weights(const void *plain, int s8, int in, int out, const void *packed_desc,
                           void *packed)
{
    /* W [out, in] row-major is W^T [in, out] in tag ba. */
    dnnl_dims_t dims = {in, out};
    dnnl_memory_desc_t plain_desc;
    dnnl_memory_t plain_memory = NULL;
    dnnl_primitive_desc_t reorder_desc = NULL;
    dnnl_primitive_t reorder = NULL;
    dnnl_stream_t stream = NULL;
    dnnl_status_t status =
        dnnl_memory_desc_init_by_tag(&plain_desc, 2, dims, s8 ? dnnl_s8 : dnnl_f32, dnnl_ba);
    if (status == dnnl_success)
        status = dnnl_memory_create(&plain_memory, &plain_desc, engine, (void *)plain);
    if (status == dnnl_success)
        status = dnnl_reorder_primitive_desc_create(&reorder_desc, &plain_desc, engine,
                                                    packed_desc, engine, NULL);
    if (status == dnnl_success)
        status = dnnl_primitive_create(&reorder, reorder_desc);
    if (status == dnnl_success)
        status = dnnl_stream_create(&stream, engine, dnnl_stream_default_flags);
    if (status == dnnl_success) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, plain_memory}, {DNNL_ARG_TO, packed}};
        status = dnnl_primitive_execute(reorder, stream, 2, args);
        if (status == dnnl_success)
            status = dnnl_stream_wait(stream);
    }
    if (stream != NULL)
        dnnl_stream_destroy(stream);
    if (reorder != NULL)
        dnnl_primitive_destroy(reorder);
    if (reorder_desc != NULL)
        dnnl_primitive_desc_destroy(reorder_desc);
    if (plain_memory != NULL)
        dnnl_memory_destroy(plain_memory);
    return status;
}

/* Converts weight [out, in] into the layout oneDNN chose (a reorder, which
 * also rounds to bf16, or for int8 adds the zero-point compensation). */
static dnnl_status_t pack_weights(onednn_linear *linear, const float *weight)
{
    int int8 = linear->precision == TFENC_PRECISION_INT8;
    int8_t *quantized = NULL;
    const void *plain = weight;
    if (int8) {
        quantized = malloc((size_t)linear->out * (size_t)linear->in);
        if (quantized == NULL)
            return dnnl_out_of_memory;
        quantize_weights(weight, linear->out, linear->in, quantized, linear->scales,
                         linear->zero_correction);
        plain = quantized;
    }
    dnnl_status_t status = onednn_reorder_weights(plain, int8, linear->in, linear->out,
                                                  &linear->weights_desc,
                                                  linear->weights_memory);
    free(quantized);
    return status;
}

int onednn_linear_prepare(tfenc_context *ctx, tfenc_precision precision, int out, int in,
                          onednn_linear **linear_out)
{
    *linear_out = NULL;
    const char *name = tfenc_precision_names[precision];
    if (!engine_ready())
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "precision = %s: no oneDNN CPU engine", name);
    onednn_linear *linear = calloc(1, sizeof *linear);
    if (linear == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "precision = %s: out of memory", name);
    linear->precision = precision;
    linear->in = in;
    linear->out = out;
    int int8 = precision == TFENC_PRECISION_INT8;
    /* Scales are read when a primitive is made; the layout chooser's are
     * placeholders (the real ones come with the weights). */
    float *placeholder_scales = int8 ? malloc((size_t)out * sizeof(float)) : NULL;
    dnnl_status_t status = int8 && placeholder_scales == NULL ? dnnl_out_of_memory : dnnl_success;
    for (int n = 0; int8 && status == dnnl_success && n < out; n++)
        placeholder_scales[n] = 1.0f;
    linear->scales = placeholder_scales;
    /* A block's primitive, made for one thread, chooses the weight layout
     * every primitive of the map then reads. */
    dnnl_primitive_attr_t attr = NULL;
    if (status == dnnl_success)
        status = linear_attributes(linear, TFENC_ACTIVATION_NONE, 0, &attr);
    dnnl_dims_t weights_dims = {in, out};
    dnnl_memory_desc_t any_weights, source, destination;
    dnnl_matmul_desc_t desc;
    dnnl_primitive_desc_t chooser = NULL;
    if (status == dnnl_success)
        status = dnnl_memory_desc_init_by_tag(&any_weights, 2, weights_dims,
                                              int8 ? dnnl_s8 : dnnl_bf16, dnnl_format_tag_any);
    if (status == dnnl_success)
        status = linear_desc(linear, TFENC_MATRIX_BLOCK_ROWS, TFENC_FLOAT32, &any_weights,
                             &desc, &source, &destination);
    if (status == dnnl_success) {
        const int pool = one_thread_begin();
        status = dnnl_primitive_desc_create(&chooser, &desc, attr, engine, NULL);
        one_thread_end(pool);
    }
    if (attr != NULL)
        dnnl_primitive_attr_destroy(attr);
    linear->scales = NULL;
    free(placeholder_scales);
    if (status == dnnl_success) {
        linear->weights_desc = *dnnl_primitive_desc_query_md(chooser, dnnl_query_weights_md, 0);
        dnnl_primitive_desc_destroy(chooser);
        linear->weights_bytes = dnnl_memory_desc_get_size(&linear->weights_desc);
    }
    if (status != dnnl_success) {
        free(linear);
        return tfenc_error(ctx, status == dnnl_out_of_memory ? TFENC_ERR_NO_MEMORY : TFENC_ERR_INTERNAL,
                           "precision = %s: oneDNN has no layout for a [%d, %d] weight (status %d)",
                           name, out, in, (int)status);
    }
    *linear_out = linear;
    return TFENC_OK;
}

size_t onednn_linear_packed_bytes(const onednn_linear *linear)
{
    return linear->weights_bytes;
}

int onednn_linear_place(tfenc_context *ctx, onednn_linear *linear, int threads,
                        const float *weight, const float *bias, void *packed, float *scales,
                        float *zero_correction)
{
    const char *name = tfenc_precision_names[linear->precision];
    int int8 = linear->precision == TFENC_PRECISION_INT8;
    dnnl_status_t status = dnnl_success;
    linear->borrowed = packed != NULL;
    if (packed != NULL) {
        linear->weights = packed;
        linear->scales = scales;
        linear->zero_correction = zero_correction;
    } else {
        linear->weights = tfenc_aligned_alloc(linear->weights_bytes);
        if (int8) {
            linear->scales = malloc((size_t)linear->out * sizeof(float));
            linear->zero_correction = malloc((size_t)linear->out * sizeof(float));
        }
        if (linear->weights == NULL ||
            (int8 && (linear->scales == NULL || linear->zero_correction == NULL)))
            status = dnnl_out_of_memory;
    }
    /* bf16 adds the bias inside the product; int8 after the token scale. */
    if (status == dnnl_success && bias != NULL && !int8) {
        dnnl_dims_t bias_dims = {1, linear->out};
        dnnl_memory_desc_t bias_desc;
        status = dnnl_memory_desc_init_by_tag(&bias_desc, 2, bias_dims, dnnl_f32, dnnl_ab);
        if (status == dnnl_success)
            status = dnnl_memory_create(&linear->bias_memory, &bias_desc, engine, (void *)bias);
    }
    linear->bias = bias;
    if (status == dnnl_success)
        status = dnnl_memory_create(&linear->weights_memory, &linear->weights_desc, engine,
                                    linear->weights);
    if (status == dnnl_success && weight != NULL)
        status = pack_weights(linear, weight);
    if (status != dnnl_success)
        return tfenc_error(ctx, status == dnnl_out_of_memory ? TFENC_ERR_NO_MEMORY : TFENC_ERR_INTERNAL,
                           "precision = %s: oneDNN cannot prepare a [%d, %d] weight (status %d)",
                           name, linear->out, linear->in, (int)status);
    /* tfenc_linear_forward's products (float32 out, no activation) are made
     * now; other pairs when a plugin prepares them (a run of 0 rows). */
    return variant_make(ctx, linear, &linear->variants[0], threads, TFENC_FLOAT32,
                        TFENC_ACTIVATION_NONE, 0);
}

void onednn_linear_destroy(onednn_linear *linear)
{
    if (linear == NULL)
        return;
    for (int v = 0; v < MAX_VARIANTS; v++)
        variant_destroy(&linear->variants[v]);
    if (linear->weights_memory != NULL)
        dnnl_memory_destroy(linear->weights_memory);
    if (linear->bias_memory != NULL)
        dnnl_memory_destroy(linear->bias_memory);
    if (!linear->borrowed) {
        tfenc_aligned_free(linear->weights);
        free(linear->scales);
        free(linear->zero_correction);
    }
    free(linear);
}

const float *onednn_linear_zero_correction(const onednn_linear *linear)
{
    return linear->zero_correction;
}

size_t onednn_linear_bytes(const onednn_linear *linear)
{
    return linear->weights_bytes + (linear->scales != NULL ? (size_t)linear->out * sizeof(float) : 0);
}

int onednn_linear_prepare_variant(tfenc_context *ctx, onednn_linear *linear, int threads,
                                  tfenc_element_type dst_dtype, tfenc_activation activation,
                                  int sum)
{
    for (int i = 0; i < MAX_VARIANTS; i++) {
        variant *candidate = &linear->variants[i];
        if (!candidate->made)
            return variant_make(ctx, linear, candidate, threads, dst_dtype, activation, sum);
        if (candidate->destination == dst_dtype && candidate->activation == activation &&
            candidate->sum == sum)
            return TFENC_OK;
    }
    return tfenc_error(ctx, TFENC_ERR_INTERNAL,
                       "matrix backend: more than %d kinds of product on one linear map",
                       MAX_VARIANTS);
}

int onednn_linear_execute(tfenc_context *ctx, const onednn_linear *linear, int thread,
                          void *stream, const void *src, void *dst, tfenc_element_type dst_dtype,
                          tfenc_activation activation, int sum)
{
    const variant *v = NULL;
    for (int i = 0; v == NULL && i < MAX_VARIANTS && linear->variants[i].made; i++)
        if (linear->variants[i].destination == dst_dtype &&
            linear->variants[i].activation == activation && linear->variants[i].sum == sum)
            v = &linear->variants[i];
    if (v == NULL || thread >= v->threads)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL,
                           "matrix backend: a product of a kind not prepared on this map "
                           "(or thread %d)", thread);
    product *p = &v->blocks[thread];
    dnnl_status_t status = execute(stream, p, src, dst, linear->weights_memory,
                                   linear->bias_memory, p->own_scratchpad);
    if (status != dnnl_success)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL,
                           "precision = %s: oneDNN [%d, %d] x [%d, %d]^T product failed "
                           "(status %d)",
                           tfenc_precision_names[linear->precision], TFENC_MATRIX_BLOCK_ROWS,
                           linear->in, linear->out, linear->in, (int)status);
    return TFENC_OK;
}

/* ------------------------------------------------- activation products */

/* Padded sizes of activation products: multiples of 32 to 128, then of 64
 * to 512, then of 128. Padding costs at most a third of a small product and
 * an eighth of a long one; the grid keeps the primitives to a few dozen. */
static int grid_next(int size)
{
    if (size < 128)
        return size + 32;
    if (size < 512)
        return size + 64;
    return size + 128;
}

static int grid_round(int value)
{
    int size = 32;
    while (size < value)
        size = grid_next(size);
    return size;
}

static int grid_count(int largest)
{
    int count = 1;
    for (int size = 32; size < largest; size = grid_next(size))
        count++;
    return count;
}

static int grid_index(int value)
{
    int index = 0;
    for (int size = 32; size < value; size = grid_next(size))
        index++;
    return index;
}

struct onednn_matmul {
    tfenc_matmul_shape largest;
    int m_sizes, n_sizes, k_sizes; /* grid points up to the largest sizes */
    int count;                     /* m_sizes * n_sizes * k_sizes */
    int threads;
    product *products;             /* [thread][m][n][k] */
    dnnl_memory_t *weights;        /* [thread][m][n][k]: B, pointed at the gathered copy */
    size_t a_bytes, b_bytes;       /* the gathered A and B in scratch, then C */
    size_t c_bytes;                /* then oneDNN's scratchpad */
};

/* Each thread's products have their own scratchpad (in the thread's part
 * of the scratch): oneDNN's shared one is not for concurrent products. */
static dnnl_status_t matmul_product_create(const tfenc_matmul_shape *shape, int m, int n, int k,
                                           product *p, dnnl_memory_t *weights)
{
    dnnl_dims_t a_dims = {shape->batch, m, k}, b_dims = {shape->batch, k, n},
                c_dims = {shape->batch, m, n};
    dnnl_memory_desc_t a, b, c;
    dnnl_matmul_desc_t desc;
    dnnl_status_t status;
    /* B gathered as stored: [n][k] when transposed (tag acb views it as [k][n]). */
    if ((status = dnnl_memory_desc_init_by_tag(&a, 3, a_dims, dnnl_bf16, dnnl_abc)) ||
        (status = dnnl_memory_desc_init_by_tag(&b, 3, b_dims, dnnl_bf16,
                                               shape->b_transposed ? dnnl_acb : dnnl_abc)) ||
        (status = dnnl_memory_desc_init_by_tag(&c, 3, c_dims, dnnl_f32, dnnl_abc)) ||
        (status = dnnl_matmul_desc_init(&desc, &a, &b, NULL, &c)))
        return status;
    dnnl_primitive_attr_t attr;
    if ((status = dnnl_primitive_attr_create(&attr)) != dnnl_success)
        return status;
    status = dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);
    if (status == dnnl_success)
        status = product_create(p, &desc, attr, &a, &c, NULL, NULL);
    dnnl_primitive_attr_destroy(attr);
    if (status == dnnl_success)
        status = dnnl_memory_create(weights, &b, engine, DNNL_MEMORY_NONE);
    return status;
}

void onednn_matmul_destroy(onednn_matmul *matmul)
{
    if (matmul == NULL)
        return;
    int count = matmul->count * matmul->threads;
    for (int i = 0; matmul->products != NULL && i < count; i++) {
        product_destroy(&matmul->products[i]);
        if (matmul->weights[i] != NULL)
            dnnl_memory_destroy(matmul->weights[i]);
    }
    free(matmul->products);
    free(matmul->weights);
    free(matmul);
}

int onednn_matmul_create(tfenc_context *ctx, const tfenc_matmul_shape *largest, int threads,
                         onednn_matmul **matmul_out, size_t *scratch_bytes)
{
    *matmul_out = NULL;
    if (!engine_ready())
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "bf16 products: no oneDNN CPU engine");
    onednn_matmul *matmul = calloc(1, sizeof *matmul);
    if (matmul == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "bf16 products: out of memory");
    matmul->largest = *largest;
    matmul->m_sizes = grid_count(largest->m);
    matmul->n_sizes = grid_count(largest->n);
    matmul->k_sizes = grid_count(largest->k);
    matmul->count = matmul->m_sizes * matmul->n_sizes * matmul->k_sizes;
    matmul->threads = threads > 0 ? threads : 1;
    size_t total = (size_t)matmul->count * (size_t)matmul->threads;
    matmul->products = calloc(total, sizeof *matmul->products);
    matmul->weights = calloc(total, sizeof *matmul->weights);
    dnnl_status_t status =
        matmul->products == NULL || matmul->weights == NULL ? dnnl_out_of_memory : dnnl_success;
    /* Every thread's copies come from oneDNN's primitive cache after the
     * first: they share one implementation. That implementation is made for
     * one thread: oneDNN splits a product's work by the thread count it was
     * made for, and from inside a parallel region it runs only the first
     * thread's share. So products run one thread each, the pool's threads
     * running different sequences' products at once. */
    const int pool = omp_get_max_threads();
    omp_set_num_threads(1);
    int index = 0;
    for (int t = 0; t < matmul->threads; t++)
        for (int m = 32, i = 0; status == dnnl_success && i < matmul->m_sizes; i++, m = grid_next(m))
            for (int n = 32, j = 0; status == dnnl_success && j < matmul->n_sizes;
                 j++, n = grid_next(n))
                for (int k = 32, l = 0; status == dnnl_success && l < matmul->k_sizes;
                     l++, k = grid_next(k), index++)
                    status = matmul_product_create(largest, m, n, k, &matmul->products[index],
                                                   &matmul->weights[index]);
    omp_set_num_threads(pool);
    if (status != dnnl_success) {
        onednn_matmul_destroy(matmul);
        return tfenc_error(ctx, status == dnnl_out_of_memory ? TFENC_ERR_NO_MEMORY : TFENC_ERR_INTERNAL,
                           "bf16 products: oneDNN cannot make a [%d, %d] x [%d, %d] product "
                           "(status %d)",
                           largest->m, largest->k, largest->k, largest->n, (int)status);
    }
    size_t batch = (size_t)largest->batch;
    size_t m = (size_t)grid_round(largest->m), n = (size_t)grid_round(largest->n),
           k = (size_t)grid_round(largest->k);
    matmul->a_bytes = (batch * m * k * 2 + 63) / 64 * 64;
    matmul->b_bytes = (batch * k * n * 2 + 63) / 64 * 64;
    matmul->c_bytes = (batch * m * n * sizeof(float) + 63) / 64 * 64;
    size_t scratchpad = 0;
    for (int i = 0; i < matmul->count; i++)
        if (matmul->products[i].scratchpad_bytes > scratchpad)
            scratchpad = matmul->products[i].scratchpad_bytes;
    *scratch_bytes = matmul->a_bytes + matmul->b_bytes + matmul->c_bytes + scratchpad;
    *matmul_out = matmul;
    return TFENC_OK;
}

/* Copies rows x columns floats (row stride `stride`) into a zero-padded
 * bf16 [padded_rows][padded_columns] block. The rows are short (a head's
 * 32 to 128 values): the rounding is inlined into the loop, not called
 * per row. */
TFENC_VECTOR_CLONES
static void gather_bf16(const float *from, long stride, int rows, int columns, uint16_t *to,
                        int padded_rows, int padded_columns)
{
    for (int r = 0; r < rows; r++) {
        uint16_t *restrict row = to + (size_t)r * padded_columns;
        const float *restrict source = from + (size_t)r * stride;
#pragma omp simd
        for (int j = 0; j < columns; j++)
            row[j] = tfenc_round_to_bf16(source[j]);
        for (int j = columns; j < padded_columns; j++)
            row[j] = 0;
    }
    memset(to + (size_t)rows * padded_columns, 0,
           (size_t)(padded_rows - rows) * padded_columns * sizeof *to);
}

static void gather_operands(const tfenc_matmul_args *args, int b_transposed, int shared, int e,
                            int m, int n, int k, uint16_t *a, uint16_t *b)
{
    if (a != NULL)
        gather_bf16(args->a + e * args->a_batch_stride, args->a_row_stride, args->m, args->k,
                    a + (size_t)e * m * k, m, k);
    if (b == NULL)
        return;
    const float *stored = args->b + (e / shared) * args->b_batch_stride;
    if (b_transposed)
        gather_bf16(stored, args->b_row_stride, args->n, args->k, b + (size_t)e * n * k, n, k);
    else
        gather_bf16(stored, args->b_row_stride, args->k, args->n, b + (size_t)e * k * n, k, n);
}

TFENC_VECTOR_CLONES
static void scatter_result(const tfenc_matmul_args *args, int e, int m, int n, const float *c)
{
    const float alpha = args->alpha;
    for (int i = 0; i < args->m; i++) {
        const float *from = c + ((size_t)e * m + i) * n;
        float *to = args->c + e * args->c_batch_stride + i * args->c_row_stride;
#pragma omp simd
        for (int j = 0; j < args->n; j++)
            to[j] = alpha * from[j];
    }
}

void onednn_matmul_padded(int m, int n, int k, int *m_padded, int *n_padded, int *k_padded)
{
    *m_padded = grid_round(m);
    *n_padded = grid_round(n);
    *k_padded = grid_round(k);
}

int onednn_matmul_execute(tfenc_context *ctx, onednn_matmul *matmul, int thread, void *stream,
                          const tfenc_matmul_args *args, void *scratch)
{
    const tfenc_matmul_shape *shape = &matmul->largest;
    const int batch = shape->batch;
    const int m = grid_round(args->m), n = grid_round(args->n), k = grid_round(args->k);
    const int index = thread * matmul->count +
                      (grid_index(args->m) * matmul->n_sizes + grid_index(args->n)) *
                          matmul->k_sizes + grid_index(args->k);
    const int shared = args->b_shared_by > 1 ? args->b_shared_by : 1;
    uint16_t *a = scratch;
    uint16_t *b = (uint16_t *)((char *)scratch + matmul->a_bytes);
    float *c = (float *)((char *)scratch + matmul->a_bytes + matmul->b_bytes);
    /* Gather A [m][k] and B ([n][k] when transposed, else [k][n]) per
     * batch entry, bf16, zero-padded: padded rows and columns add nothing;
     * not those the caller keeps in this layout (a_bf16, b_bf16). */
    TFENC_PARALLEL_FOR(e, batch, (double)batch * (m * k + n * k),
                       gather_operands(args, shape->b_transposed, shared, e, m, n, k,
                                       args->a_bf16 != NULL ? NULL : a,
                                       args->b_bf16 != NULL ? NULL : b));
    product *p = &matmul->products[index];
    dnnl_status_t status = dnnl_memory_set_data_handle(
        matmul->weights[index], args->b_bf16 != NULL ? (void *)args->b_bf16 : (void *)b);
    if (status == dnnl_success)
        status = execute(stream, p, args->a_bf16 != NULL ? args->a_bf16 : a,
                         args->c_padded != NULL ? args->c_padded : c, matmul->weights[index],
                         NULL,
                         (char *)scratch + matmul->a_bytes + matmul->b_bytes + matmul->c_bytes);
    if (status != dnnl_success)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL,
                           "bf16 products: oneDNN %d x [%d, %d] x [%d, %d] failed (status %d)",
                           batch, m, k, k, n, (int)status);
    /* C and alpha into the caller's layout, unless it is there already. */
    if (args->c_padded == NULL)
        TFENC_PARALLEL_FOR(e, batch, (double)batch * m * n, scatter_result(args, e, m, n, c));
    return TFENC_OK;
}
