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
/* Gives the whole pages inside [pointer, pointer + bytes) back to the
 * system while keeping the allocation: they read as zeros afterwards and
 * count in the resident set again only when written. For buffers that
 * stay allocated but idle (the accuracy gate's cached steps). */
void tfenc_aligned_release_pages(void *pointer, size_t bytes);

#endif
