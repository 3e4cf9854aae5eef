/* OpenBLAS, the fp32 products' library, loaded when the first product is
 * made instead of when the program starts, so that tfenc settles its
 * start-up before it runs (openblas.c says why). */
#ifndef TFENC_MATRIX_OPENBLAS_H
#define TFENC_MATRIX_OPENBLAS_H

#include <stddef.h>

#include "base/context.h"

/* Loads OpenBLAS once per process, with its own thread pool off (tfenc's
 * OpenMP pool splits the products; matrix.c says why). Every later call
 * returns at once, with the first call's result. Call it before the first
 * tfenc_openblas_sgemm: the matrix backend does, when a map, a product or
 * a scratch is made. Not for a parallel region.
 * @retval TFENC_OK loaded
 * @retval TFENC_ERR_CONFIG the library or one of its functions is missing
 *         (the message names the library and dlerror()'s reason) */
int tfenc_openblas_load(tfenc_context *ctx);

/* cblas_sgemm, row-major: C = alpha A op(B) + beta C, with A [m, k] and
 * op(B) [k, n] (B stored [n, k] when b_transposed). Only after a
 * successful tfenc_openblas_load. */
void tfenc_openblas_sgemm(int b_transposed, int m, int n, int k, float alpha, const float *a,
                          int a_row_stride, const float *b, int b_row_stride, float beta, float *c,
                          int c_row_stride);

/* The kernel family OpenBLAS chose for this CPU ("Haswell", "SkylakeX",
 * "Prescott"...), as openblas_get_corename() names it; "not loaded" before
 * a successful load. */
const char *tfenc_openblas_core_name(void);

/* openblas_get_config(): version, build and kernel family, one line;
 * "not loaded" before a successful load. */
const char *tfenc_openblas_config(void);

/* The vector width of the fp32 kernels (sgemm) of an OpenBLAS kernel
 * family, as openblas_get_corename() names it (any case): 3 AVX-512
 * (SkylakeX, and Cooperlake and SapphireRapids, whose sgemm is SkylakeX's:
 * what they add is bf16), 2 AVX2 with FMA (Haswell, Zen, Excavator), 1 AVX
 * (Sandybridge, Bulldozer...), 0 older or unknown (Prescott, Core2,
 * Nehalem, generic). */
int tfenc_openblas_family_width(const char *family);

/* 1 when the family running has narrower fp32 kernels than the family
 * wanted: fp32 then runs slower than the CPU allows. */
int tfenc_openblas_runs_narrower(const char *running, const char *wanted);

/* 1, with one line in `line`, when OpenBLAS took narrower fp32 kernels
 * than the family tfenc asked for from the CPU's instruction sets
 * (openblas.c says why it asks); 0 when it took them or others as wide,
 * or the user chose (OPENBLAS_CORETYPE), or the CPU is below AVX2. */
int tfenc_openblas_fallback(char *line, size_t size);

#endif
