/* The bf16 matrix backend (oneDNN matmul) and the process-wide choice of
 * precision; the fp32 path is OpenBLAS, called by tfenc_linear_forward. */
#include "config.h"

#include "gemm.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_ONEDNN
#include <dnnl.h>
#endif

static int chosen_precision = TFENC_GEMM_FP32;

void tfenc_gemm_round_bf16(const float *in, uint16_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &in[i], sizeof bits);
        /* Adding 0x7fff plus the lowest kept bit rounds to nearest, ties to
         * even; a NaN could round into infinity, so it keeps a quiet NaN. */
        uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
        int is_nan = (bits & 0x7fffffffu) > 0x7f800000u;
        out[i] = (uint16_t)(is_nan ? ((bits >> 16) | 0x40u) : rounded);
    }
}

#ifdef HAVE_ONEDNN

struct tfenc_gemm_weights {
    int out, in;
    uint16_t *weight; /* [out, in] bf16, which oneDNN reads as W^T [in, out] in tag ba */
    const float *bias; /* [out] or NULL, owned by the linear map */
};

static pthread_once_t engine_once = PTHREAD_ONCE_INIT;
static dnnl_engine_t engine;
static dnnl_status_t engine_status = dnnl_runtime_error;

static void engine_create(void)
{
    engine_status = dnnl_engine_create(&engine, dnnl_cpu, 0);
}

/* Each thread gets its own stream and scratch: oneDNN streams are not for
 * concurrent use, and pipeline stages may run in different threads. */
static _Thread_local dnnl_stream_t thread_stream;
static _Thread_local uint16_t *thread_scratch;
static _Thread_local size_t thread_scratch_count;

/* Builds the matmul for x [rows, in] bf16 times W^T [in, out] bf16 (+ bias
 * f32) into y f32. oneDNN keeps created primitives in its cache, so the
 * second batch of the same row count gets it back without recompiling. */
static dnnl_status_t matmul_create(int rows, int in, int out, int bias, dnnl_primitive_t *matmul,
                                   dnnl_memory_desc_t descs[4])
{
    dnnl_dims_t src_dims = {rows, in}, weight_dims = {in, out}, bias_dims = {1, out},
                dst_dims = {rows, out};
    dnnl_status_t status;
    if ((status = dnnl_memory_desc_init_by_tag(&descs[0], 2, src_dims, dnnl_bf16, dnnl_ab)) ||
        (status = dnnl_memory_desc_init_by_tag(&descs[1], 2, weight_dims, dnnl_bf16, dnnl_ba)) ||
        (status = dnnl_memory_desc_init_by_tag(&descs[2], 2, bias_dims, dnnl_f32, dnnl_ab)) ||
        (status = dnnl_memory_desc_init_by_tag(&descs[3], 2, dst_dims, dnnl_f32, dnnl_ab)))
        return status;
    dnnl_matmul_desc_t desc;
    if ((status = dnnl_matmul_desc_init(&desc, &descs[0], &descs[1], bias ? &descs[2] : NULL,
                                        &descs[3])))
        return status;
    dnnl_primitive_desc_t primitive_desc;
    if ((status = dnnl_primitive_desc_create(&primitive_desc, &desc, NULL, engine, NULL)))
        return status;
    status = dnnl_primitive_create(matmul, primitive_desc);
    dnnl_primitive_desc_destroy(primitive_desc);
    return status;
}

int tfenc_gemm_bf16_available(void)
{
    pthread_once(&engine_once, engine_create);
    if (engine_status != dnnl_success)
        return 0;
    /* oneDNN 2.6 implements bf16 matmul only from AVX-512 (avx512_core) on:
     * ask it for one rather than guess from CPU flags. */
    dnnl_primitive_t probe;
    dnnl_memory_desc_t descs[4];
    if (matmul_create(16, 16, 16, 1, &probe, descs) != dnnl_success)
        return 0;
    dnnl_primitive_destroy(probe);
    return 1;
}

int tfenc_gemm_weights_create(tfenc_context *ctx, const float *weight, const float *bias, int out,
                              int in, tfenc_gemm_weights **weights)
{
    *weights = NULL;
    tfenc_gemm_weights *w = calloc(1, sizeof *w);
    if (w == NULL || (w->weight = malloc((size_t)out * (size_t)in * sizeof *w->weight)) == NULL) {
        free(w);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY,
                           "precision = bf16: out of memory for a [%d, %d] weight copy", out, in);
    }
    w->out = out;
    w->in = in;
    w->bias = bias;
    tfenc_gemm_round_bf16(weight, w->weight, (size_t)out * (size_t)in);
    *weights = w;
    return TFENC_OK;
}

void tfenc_gemm_weights_destroy(tfenc_gemm_weights *weights)
{
    if (weights == NULL)
        return;
    free(weights->weight);
    free(weights);
}

int tfenc_gemm_forward(tfenc_context *ctx, const tfenc_gemm_weights *weights, const float *x,
                       int rows, float *y)
{
    if (rows <= 0)
        return TFENC_OK;
    pthread_once(&engine_once, engine_create);
    if (engine_status != dnnl_success)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "precision = bf16: no oneDNN CPU engine");
    if (thread_stream == NULL && dnnl_stream_create(&thread_stream, engine,
                                                    dnnl_stream_default_flags) != dnnl_success)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "precision = bf16: no oneDNN stream");
    size_t count = (size_t)rows * (size_t)weights->in;
    if (count > thread_scratch_count) {
        uint16_t *grown = realloc(thread_scratch, count * sizeof *grown);
        if (grown == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY,
                               "precision = bf16: out of memory for %d rows of %d inputs", rows,
                               weights->in);
        thread_scratch = grown;
        thread_scratch_count = count;
    }
    tfenc_gemm_round_bf16(x, thread_scratch, count);

    dnnl_primitive_t matmul = NULL;
    dnnl_memory_desc_t descs[4];
    dnnl_memory_t memory[4] = {NULL, NULL, NULL, NULL};
    void *handles[4] = {thread_scratch, weights->weight, (void *)weights->bias, y};
    dnnl_status_t status = matmul_create(rows, weights->in, weights->out, weights->bias != NULL,
                                         &matmul, descs);
    for (int i = 0; status == dnnl_success && i < 4; i++)
        if (i != 2 || weights->bias != NULL)
            status = dnnl_memory_create(&memory[i], &descs[i], engine, handles[i]);
    if (status == dnnl_success) {
        dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, memory[0]},
                                   {DNNL_ARG_WEIGHTS, memory[1]},
                                   {DNNL_ARG_DST, memory[3]},
                                   {DNNL_ARG_BIAS, memory[2]}};
        status = dnnl_primitive_execute(matmul, thread_stream, weights->bias != NULL ? 4 : 3, args);
        if (status == dnnl_success)
            status = dnnl_stream_wait(thread_stream);
    }
    for (int i = 0; i < 4; i++)
        if (memory[i] != NULL)
            dnnl_memory_destroy(memory[i]);
    if (matmul != NULL)
        dnnl_primitive_destroy(matmul);
    if (status != dnnl_success)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL,
                           "precision = bf16: oneDNN matmul [%d, %d] x [%d, %d]^T failed (status %d)",
                           rows, weights->in, weights->out, weights->in, (int)status);
    return TFENC_OK;
}

#else /* without oneDNN: bf16 is refused when chosen, so these never run */

struct tfenc_gemm_weights {
    int unused;
};

int tfenc_gemm_bf16_available(void)
{
    return 0;
}

int tfenc_gemm_weights_create(tfenc_context *ctx, const float *weight, const float *bias, int out,
                              int in, tfenc_gemm_weights **weights)
{
    (void)weight, (void)bias, (void)out, (void)in;
    *weights = NULL;
    return tfenc_error(ctx, TFENC_ERR_CONFIG,
                       "precision = bf16: tfenc was built without oneDNN (install libdnnl-dev "
                       "and run configure again)");
}

void tfenc_gemm_weights_destroy(tfenc_gemm_weights *weights)
{
    free(weights);
}

int tfenc_gemm_forward(tfenc_context *ctx, const tfenc_gemm_weights *weights, const float *x,
                       int rows, float *y)
{
    (void)weights, (void)x, (void)rows, (void)y;
    return tfenc_error(ctx, TFENC_ERR_INTERNAL, "precision = bf16: tfenc was built without oneDNN");
}

#endif

int tfenc_gemm_set_precision(tfenc_context *ctx, const char *name)
{
    if (name != NULL && strcmp(name, "fp32") == 0) {
        chosen_precision = TFENC_GEMM_FP32;
        return TFENC_OK;
    }
    if (name == NULL || strcmp(name, "bf16") != 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "precision '%s' is not fp32 or bf16",
                           name != NULL ? name : "(null)");
#ifndef HAVE_ONEDNN
    return tfenc_error(ctx, TFENC_ERR_CONFIG,
                       "precision = bf16: tfenc was built without oneDNN (install libdnnl-dev and "
                       "run configure again)");
#else
    if (!tfenc_gemm_bf16_available())
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "precision = bf16: oneDNN %d.%d has no bf16 matmul for this CPU (it "
                           "needs AVX-512; use precision = fp32)",
                           DNNL_VERSION_MAJOR, DNNL_VERSION_MINOR);
    chosen_precision = TFENC_GEMM_BF16;
    return TFENC_OK;
#endif
}

int tfenc_gemm_get_precision(tfenc_context *ctx, tfenc_gemm_precision *precision)
{
    (void)ctx;
    *precision = (tfenc_gemm_precision)chosen_precision;
    return TFENC_OK;
}
