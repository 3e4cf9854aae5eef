/* Aligned buffers: activations and weights start on 64-byte boundaries so
 * that vector loads and the GEMM backend never straddle cache lines. */
#ifndef TFENC_ALIGNED_H
#define TFENC_ALIGNED_H

#include <stddef.h>

#define TFENC_ALIGNMENT 64

/* Returns zeroed memory of at least `bytes` (a zero size gives a valid,
 * freeable pointer), or NULL. Free with tfenc_aligned_free(). */
void *tfenc_aligned_alloc(size_t bytes);
void tfenc_aligned_free(void *pointer);

#endif
