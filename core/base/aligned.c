/* Aligned, zeroed allocations for activations, workspaces and weights. */
#include "base/aligned.h"

#include <stdlib.h>
#include <string.h>

void *tfenc_aligned_alloc(size_t bytes)
{
    size_t rounded = (bytes + TFENC_ALIGNMENT - 1) / TFENC_ALIGNMENT * TFENC_ALIGNMENT;
    if (rounded == 0)
        rounded = TFENC_ALIGNMENT;
    if (rounded < bytes)
        return NULL; /* overflow */
    void *pointer = aligned_alloc(TFENC_ALIGNMENT, rounded);
    if (pointer != NULL)
        memset(pointer, 0, rounded);
    return pointer;
}

void tfenc_aligned_free(void *pointer)
{
    free(pointer);
}
