/* The matrix backend: every matrix product of tfenc, at the precision of
 * the layer it serves. fp32 runs on OpenBLAS (the reference) or, with
 * fp32_products = onednn, on oneDNN's f32 matmul on weights packed once
 * (matrix/onednn_f32.h); bf16 and int8 run on oneDNN (bf16 inputs and weights with fp32 sums; u8 x s8 VNNI with
 * per-channel weight scales and per-token input scales). OpenBLAS, oneDNN
 * and the plugins' element-wise loops share the rank's one OpenMP thread
 * pool. Linear maps (activations x weights, tfenc_linear in plugin.h) and
 * activation products (tfenc_matmul) are created once, when their layer is
 * built, with their oneDNN primitives, pre-packed weights and scratch, so
 * that a forward pass does not allocate. */
#ifndef TFENC_MATRIX_H
#define TFENC_MATRIX_H

#include <stddef.h>
#include <stdint.h>

#include "base/precision.h"
#include "matrix/block_rows.h"
#include "tfenc/plugin.h"

/* The same for fp32 maps on OpenBLAS, which packs the weights again in
 * every product: 256 rows make that ~4% of a product (at 64, ~15% more
 * CPU time on MiniLM). */
#define TFENC_MATRIX_FP32_BLOCK_ROWS 256

/* The rows of every product of a linear map at `precision`. */
int tfenc_matrix_block_rows(tfenc_precision precision);

/* Scratch memory shared by the maps and products of one weight store: the
 * layers of a model run one after another, so one region serves them all.
 * It grows when a map or product is created (to the largest need), never
 * during a product. Products sharing a scratch MUST NOT run concurrently. */
typedef struct tfenc_matrix_scratch tfenc_matrix_scratch;

int tfenc_matrix_scratch_create(tfenc_context *ctx, tfenc_matrix_scratch **scratch);
void tfenc_matrix_scratch_destroy(tfenc_matrix_scratch *scratch);
/* Bytes the scratch holds now. */
size_t tfenc_matrix_scratch_bytes(const tfenc_matrix_scratch *scratch);

/* TFENC_OK when this build and CPU run `precision`; otherwise
 * TFENC_ERR_CONFIG with one line that names what is missing (oneDNN in the
 * build, or the instructions oneDNN needs) and the precision to use. */
int tfenc_matrix_check_precision(tfenc_context *ctx, tfenc_precision precision);

/* The precision kept where int8 is not wanted (attention's products, the
 * layers the accuracy gate sets aside): bf16 where it runs, else fp32. */
tfenc_precision tfenc_matrix_int8_fallback(void);

/* The precision that runs when `requested` is asked for: the requested one
 * where oneDNN runs it here, else the best below it that does (int8 ->
 * bf16 -> fp32). Returns 1, with one line in `line`, when the CPU lacks an
 * instruction set the requested precision uses (AVX512_BF16 for bf16,
 * AVX512_VNNI for int8, AMX for both, as oneDNN sees the CPU: the
 * environment variable ONEDNN_MAX_CPU_ISA can hide them) or when a lower
 * precision runs; 0 when it runs at full speed (and always for fp32). */
int tfenc_matrix_describe(tfenc_precision requested, tfenc_precision *runs, char *line,
                          size_t size);

/* Loads the fp32 library (OpenBLAS) now, so that a run can say which
 * kernels run before its first map is made (which loads it otherwise).
 * Not from a parallel region. */
int tfenc_matrix_load(tfenc_context *ctx);
/* What runs the products here, one line: the fp32 linear maps' library
 * (`fp32_products`, as the job chose it) with its version and kernel
 * family, oneDNN's version and instruction set ("not loaded" for OpenBLAS
 * before the first map is made). A file's bits follow these
 * (docs/performance.md), so a run records them in its output. */
void tfenc_matrix_describe_kernels(tfenc_fp32_products fp32_products, char *line, size_t size);
/* 1, with one line, when the fp32 library runs kernels below the CPU's
 * (an OpenBLAS older than the CPU); 0 otherwise. */
int tfenc_matrix_describe_fallback(char *line, size_t size);

/* The rank's thread count for every product and the plugins' parallel
 * loops: one OpenMP pool, in which OpenBLAS runs single-threaded.
 * threads <= 0 takes OMP_NUM_THREADS, else OPENBLAS_NUM_THREADS, else the
 * cores this process may run on. Call it before the model is built. */
void tfenc_matrix_set_threads(int threads);
int tfenc_matrix_threads(void);

/* How a linear map is made, besides its weights. */
typedef struct tfenc_matrix_linear_options {
    tfenc_precision precision;
    /* fp32: the library of the products (base/precision.h); OpenBLAS when
     * zero. oneDNN packs the weights once, into its own layout. */
    tfenc_fp32_products fp32_products;
    /* fp32: when set, every product raises input_range[j] to the largest
     * |x[., j]| it sees (calibration on a corpus sample for int8). */
    float *record_input_range;
    /* int8: the inputs' range per channel, as recorded, or NULL. With it
     * the map smooths its inputs (SmoothQuant, alpha 1/2): channel j of x
     * is divided by s_j = sqrt(range_j / max|W[., j]|) and column j of W
     * multiplied by it, which leaves x W^T unchanged and moves the outlier
     * channels of activations (LayerNorm's, GELU's) into the weights, where
     * per-channel scales absorb them; per-token int8 inputs then keep their
     * resolution for every channel. */
    const float *input_range;
    /* Where the map keeps what it holds, or NULL for memory of its own. */
    const struct tfenc_matrix_block *block;
} tfenc_matrix_linear_options;

/* Memory that holds everything a map keeps (its weights in the form it
 * multiplies them, bias, int8 scales and smoothing), owned by the caller
 * and outliving the map: the ranks of a node map one copy
 * (core/ranks/node_arena.h). One rank fills it (fill = 1, passing the weight);
 * the others, making an identical map (same options, shape and
 * calibration), pass weight = NULL and bias = NULL and read it. */
typedef struct tfenc_matrix_block {
    void *memory; /* 64-byte aligned */
    size_t bytes; /* at least tfenc_matrix_linear_block_bytes() */
    int fill;
    int has_bias; /* the map has a bias (in the block when fill = 0) */
} tfenc_matrix_block;

/* The bytes of a block for a map made with `options` (block ignored). */
int tfenc_matrix_linear_block_bytes(tfenc_context *ctx, const tfenc_matrix_linear_options *options,
                                    int out, int in, int has_bias, size_t *bytes);

/* A linear map y = x W^T + b. Takes over `weight` [out, in] (64-byte
 * aligned, from tfenc_aligned_alloc): fp32 on OpenBLAS keeps it; bf16,
 * int8 and fp32 on oneDNN convert it once into oneDNN's preferred layout
 * and free it, also on failure.
 * bias [out] or NULL is copied. With options->block, the map lives in
 * that block (see tfenc_matrix_block). Any number of rows runs, in blocks of
 * TFENC_MATRIX_BLOCK_ROWS. */
int tfenc_matrix_linear_create(tfenc_context *ctx, const tfenc_matrix_linear_options *options,
                               float *weight, const float *bias, int out, int in,
                               tfenc_matrix_scratch *scratch, tfenc_linear **linear);
void tfenc_matrix_linear_destroy(tfenc_linear *linear);
/* Bytes the map keeps resident (weights in every form, bias, primitives'
 * own buffers not included). */
size_t tfenc_matrix_linear_bytes(const tfenc_linear *linear);

/* A family of activation products at `precision` (bf16 for bf16 and int8
 * jobs: attention is kept out of int8), up to the sizes of `largest`. */
int tfenc_matrix_matmul_create(tfenc_context *ctx, tfenc_precision precision,
                               const tfenc_matmul_shape *largest, tfenc_matrix_scratch *scratch,
                               tfenc_matmul_plan **plan);
void tfenc_matrix_matmul_destroy(tfenc_matmul_plan *plan);

/* Rounds float32 to bfloat16 as tfenc_round_to_bf16() (tfenc/plugin_math.h)
 * does; written so that the loop vectorises. */
void tfenc_matrix_to_bf16(const float *in, uint16_t *out, size_t n);
void tfenc_matrix_from_bf16(const uint16_t *in, float *out, size_t n);

#endif
