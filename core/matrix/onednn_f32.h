/* fp32 linear maps on oneDNN (private to core/matrix/matrix.c): the weights
 * packed once, when the map is made, in the layout oneDNN's f32 matmul
 * reads, instead of OpenBLAS packing them again in every product; each
 * product one block of TFENC_MATRIX_FP32_BLOCK_ROWS rows on a primitive made
 * for one thread, so that a row's bits depend on neither the batch nor the
 * thread count (matrix_onednn.c's head says why one thread). A file of its
 * own beside matrix_onednn.c, whose bf16 and int8 maps it does not touch.
 * Built only with oneDNN. */
#ifndef TFENC_MATRIX_ONEDNN_F32_H
#define TFENC_MATRIX_ONEDNN_F32_H

#include <stddef.h>

#include "base/context.h"

typedef struct onednn_f32_linear onednn_f32_linear;

/* A map of `out` x `in` weights whose products have `rows` rows: oneDNN
 * chooses the packed layout (onednn_f32_packed_bytes()); nothing is placed. */
int onednn_f32_prepare(tfenc_context *ctx, int rows, int out, int in, int has_bias,
                       onednn_f32_linear **linear);
size_t onednn_f32_packed_bytes(const onednn_f32_linear *linear);
/* Places the packed weights in `packed` [packed_bytes] (the caller's memory,
 * outliving the map: a node's shared copy) or, when NULL, in memory of its
 * own; with `weight` [out, in] it packs them there (weight NULL: `packed`
 * already holds an identical map's). bias [out] (the caller's, outliving the
 * map) or NULL is added inside the product. Makes one product per thread of
 * a pool of `threads`. On failure the map is left for onednn_f32_destroy(). */
int onednn_f32_place(tfenc_context *ctx, onednn_f32_linear *linear, int threads,
                     const float *weight, const float *bias, void *packed);
/* dst [rows, out] = src [rows, in] W^T + b, on thread `thread`'s product and
 * `stream` (a oneDNN stream of that thread). */
int onednn_f32_execute(tfenc_context *ctx, const onednn_f32_linear *linear, int thread,
                       void *stream, const float *src, float *dst);
void onednn_f32_destroy(onednn_f32_linear *linear);
/* Bytes of the packed weights. */
size_t onednn_f32_bytes(const onednn_f32_linear *linear);

#endif
