/* Aligned, zeroed allocations for activations, workspaces and weights. */
#include "aligned.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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

void tfenc_aligned_release_pages(void *pointer, size_t bytes)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t first = ((uintptr_t)pointer + page - 1) / page * page;
    uintptr_t end = ((uintptr_t)pointer + bytes) / page * page;
    /* Anonymous private memory reads as zeros after MADV_DONTNEED, which is
     * what tfenc_aligned_alloc() promised; the partial pages at the ends
     * keep their contents. A failure only leaves the pages resident. */
    if (pointer != NULL && end > first)
        (void)madvise((void *)first, end - first, MADV_DONTNEED);
}
