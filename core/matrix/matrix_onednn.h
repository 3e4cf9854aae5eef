/* The oneDNN half of the matrix backend (private to core/matrix*.c): bf16
 * and int8 linear maps with weights pre-packed in oneDNN's preferred layout,
 * run in blocks of TFENC_MATRIX_BLOCK_ROWS rows, and bf16 activation
 * products, each on primitives made in advance so that no product creates
 * one. Built only with oneDNN. */
#ifndef TFENC_MATRIX_ONEDNN_H
#define TFENC_MATRIX_ONEDNN_H

#include <stddef.h>
#include <stdint.h>

#include "base/precision.h"
#include "matrix/block_rows.h"
#include "tfenc/plugin.h"

/* 1 when oneDNN makes a primitive for `precision` on this CPU (bf16: AVX-512
 * at least; int8: any x86-64, fastest with VNNI or AMX). */
int onednn_precision_runs(tfenc_precision precision);
/* oneDNN's name for the instruction set it runs on ("avx512_core_bf16"...),
 * honouring ONEDNN_MAX_CPU_ISA. */
const char *onednn_isa_name(void);
/* 1 when oneDNN's effective ISA has the named extension (AVX512_BF16,
 * AVX512_VNNI, AMX), so the line the job prints says what really runs. */
int onednn_isa_has_bf16(void);
/* "oneDNN 2.7.3, avx512_core_bf16": the library's version and the
 * instruction set its kernels use here. */
void onednn_describe(char *line, size_t size);
int onednn_isa_has_vnni(void);
int onednn_isa_has_amx(void);

/* The CPU engine (a dnnl_engine_t) of every product and stream, which
 * onednn_f32.c's products share (a primitive runs only on streams of its
 * engine); NULL when oneDNN has none. */
void *onednn_engine(void);

/* weight [out, in] (float32, or s8 when `s8`) reordered into `packed` (a
 * dnnl_memory_t of the layout `packed_desc`, a dnnl_memory_desc_t), the
 * weights' one conversion into a layout oneDNN chose; a dnnl_status_t. */
int onednn_reorder_weights(const void *plain, int s8, int in, int out, const void *packed_desc,
                           void *packed);

/* Destroys a product's primitive (a dnnl_primitive_t) and its source,
 * destination and scratchpad memories (dnnl_memory_t), any of them NULL:
 * the products of both oneDNN files hold these four. */
void onednn_product_release(void *primitive, void *source, void *destination, void *scratchpad);

/* A oneDNN stream, one per scratch (products sharing one run in turn). */
int onednn_stream_create(void **stream);
void onednn_stream_destroy(void *stream);

typedef struct onednn_linear onednn_linear;

/* A map of `out` x `in` weights: oneDNN chooses the packed layout (its
 * size is onednn_linear_packed_bytes()); nothing is placed yet. */
int onednn_linear_prepare(tfenc_context *ctx, tfenc_precision precision, int out, int in,
                          onednn_linear **linear);
size_t onednn_linear_packed_bytes(const onednn_linear *linear);
/* Places the map's packed weights and (int8) its scales and zero
 * corrections: in `packed` [packed_bytes], scales [out], zero_correction
 * [out] when packed is not NULL (the caller's memory, which outlives the
 * map: a node's shared copy), else in memory of its own. With `weight`
 * [out, in] float32 it converts the weights into place: bf16 in oneDNN's
 * layout; for int8, s8 per output channel with scale max|w| / 127, or
 * / 63 on a CPU without VNNI, whose u8 x s8 kernels saturate 16-bit sums
 * (the scales are applied inside the product). With weight NULL the caller's
 * memory already holds what an identical map placed there. bias [out] (the
 * caller's, outliving the map) is fused into bf16 products; int8 products
 * leave it to the caller's epilogue (it comes after the per-token scale).
 * `threads`: the pool whose threads run the map's blocks, each with products
 * of its own. On failure the map is left for onednn_linear_destroy(). */
int onednn_linear_place(tfenc_context *ctx, onednn_linear *linear, int threads,
                        const float *weight, const float *bias, void *packed, float *scales,
                        float *zero_correction);
void onednn_linear_destroy(onednn_linear *linear);
size_t onednn_linear_bytes(const onednn_linear *linear);
/* int8: [out] weight scale times the sum of the quantized weights of each
 * output channel: a token quantized with zero point z (not 128) has its
 * product off by (z - 128) times this, which the epilogue takes back. */
const float *onednn_linear_zero_correction(const onednn_linear *linear);

/* Makes (once) the products of a (dst type, activation, sum) kind for a
 * pool of `threads`; not from a parallel region. The model's build runs a
 * probe batch through every layer, so a forward pass finds them made.
 * sum (bf16, float32 dst, activation NONE): dst += the product. */
int onednn_linear_prepare_variant(tfenc_context *ctx, onednn_linear *linear, int threads,
                                  tfenc_element_type dst_dtype, tfenc_activation activation,
                                  int sum);
/* One block of TFENC_MATRIX_BLOCK_ROWS rows of src (bf16 [rows, in] for
 * bf16 maps; u8 [rows, in], zero point 128, for int8) times W^T into dst
 * [rows, out], on thread `thread`'s product of a prepared kind:
 * bf16: dst (float32 or bfloat16) = act(src W^T + b), `activation` one of
 * NONE, RELU, GELU, GELU_TANH, SILU, or with sum dst (float32) += src W^T
 * + b; int8: dst (float32) = (src - 128) W^T times each output channel's
 * weight scale, activation NONE. */
int onednn_linear_execute(tfenc_context *ctx, const onednn_linear *linear, int thread,
                          void *stream, const void *src, void *dst, tfenc_element_type dst_dtype,
                          tfenc_activation activation, int sum);

typedef struct onednn_matmul onednn_matmul;

/* bf16 products of `largest` (see tfenc_matmul_shape), which `threads`
 * threads may run at once (each with its own memory objects).
 * *scratch_bytes is what one execute needs from the scratch. */
int onednn_matmul_create(tfenc_context *ctx, const tfenc_matmul_shape *largest, int threads,
                         onednn_matmul **matmul, size_t *scratch_bytes);
void onednn_matmul_destroy(onednn_matmul *matmul);
/* The padded sizes the products of a call of sizes m, n, k read and write. */
void onednn_matmul_padded(int m, int n, int k, int *m_padded, int *n_padded, int *k_padded);
int onednn_matmul_execute(tfenc_context *ctx, onednn_matmul *matmul, int thread, void *stream,
                          const tfenc_matmul_args *args, void *scratch);

#endif
