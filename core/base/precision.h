/* Precision tiers of the matrix products (fp32, bf16, int8): the names the
 * matrix backend, the weights and the model share. A job's precision is a
 * parameter that travels with the model options to the weight handles of
 * each layer, never a process-wide setting. The int8 accuracy gate that
 * chooses per-step precisions lives above the model, in run/accuracy_gate.h. */
#ifndef TFENC_PRECISION_H
#define TFENC_PRECISION_H

#include "tfenc/plugin.h"

typedef enum tfenc_precision {
    TFENC_PRECISION_FP32 = 0, /* OpenBLAS sgemm: the reference */
    TFENC_PRECISION_BF16 = 1, /* oneDNN: bf16 inputs and weights, fp32 sums */
    TFENC_PRECISION_INT8 = 2  /* oneDNN u8 x s8 (VNNI): per-channel weights, per-token inputs */
} tfenc_precision;

#define TFENC_PRECISION_COUNT 3

/* "fp32", "bf16", "int8", NULL: the values of [model] precision, in enum order. */
extern const char *const tfenc_precision_names[TFENC_PRECISION_COUNT + 1];

/* The library of fp32 linear maps: OpenBLAS's sgemm (which packs the
 * weights again in every product), or oneDNN's f32 matmul on weights packed
 * once, when the map is made, in the layout its kernels read. Both run in
 * fixed row blocks; their bits differ (another order of sums), so a job's
 * choice ([model] fp32_products) is recorded with its rows. */
typedef enum tfenc_fp32_products {
    TFENC_FP32_PRODUCTS_OPENBLAS = 0, /* the default */
    TFENC_FP32_PRODUCTS_ONEDNN = 1
} tfenc_fp32_products;

#define TFENC_FP32_PRODUCTS_COUNT 2

/* "openblas", "onednn", NULL: in enum order. */
extern const char *const tfenc_fp32_products_names[TFENC_FP32_PRODUCTS_COUNT + 1];

#endif
