/* The matrix backend behind tfenc_linear_forward: OpenBLAS sgemm in float32
 * (the default and the reference), or oneDNN's bfloat16 matmul with float32
 * accumulation when tfenc was configured with oneDNN and the job says
 * `precision = bf16`. The choice is per process (one job per rank). */
#ifndef TFENC_GEMM_H
#define TFENC_GEMM_H

#include "tfenc/plugin.h"

typedef enum tfenc_gemm_precision {
    TFENC_GEMM_FP32 = 0, /* OpenBLAS sgemm */
    TFENC_GEMM_BF16 = 1  /* oneDNN matmul: bf16 inputs and weights, fp32 sums and output */
} tfenc_gemm_precision;

/* Chooses the precision of the linear maps loaded from now on: "fp32" or
 * "bf16". Fails with TFENC_ERR_CONFIG and a one-line reason when bf16 cannot
 * run here (tfenc built without oneDNN, or a CPU for which oneDNN has no
 * bf16 matmul, such as one without AVX-512). Call it before the model is
 * created: maps already loaded keep their precision. */
int tfenc_gemm_set_precision(tfenc_context *ctx, const char *name);

/* The precision set by tfenc_gemm_set_precision(); fp32 until a call
 * (tfenc-batch sets the job's [model] precision). */
int tfenc_gemm_get_precision(tfenc_context *ctx, tfenc_gemm_precision *precision);

/* 1 when this build and CPU can run precision = bf16, else 0. */
int tfenc_gemm_bf16_available(void);

/* A linear map's weights in the bf16 backend's own copy. */
typedef struct tfenc_gemm_weights tfenc_gemm_weights;

/* Converts weight [out, in] (row-major, nn.Linear's layout) to bf16 once.
 * bias [out] or NULL is kept by reference and must outlive the copy. */
int tfenc_gemm_weights_create(tfenc_context *ctx, const float *weight, const float *bias, int out,
                              int in, tfenc_gemm_weights **weights);
void tfenc_gemm_weights_destroy(tfenc_gemm_weights *weights);

/* y[rows, out] = bf16(x)[rows, in] bf16(W)^T + bias, summed in fp32. Needs
 * rows * in * 2 bytes of scratch for the rounded x, kept per thread and grown
 * only when a batch is larger than every earlier one. */
int tfenc_gemm_forward(tfenc_context *ctx, const tfenc_gemm_weights *weights, const float *x,
                       int rows, float *y);

/* Rounds float32 to bfloat16, to nearest with ties to even (NaN stays NaN),
 * as torch's .to(torch.bfloat16) does. */
void tfenc_gemm_round_bf16(const float *in, uint16_t *out, size_t n);

#endif
