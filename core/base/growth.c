/* Doubling capacities and overflow-checked array reallocation. */
#include "base/growth.h"

#include <stdlib.h>

int64_t tfenc_grown_capacity(int64_t capacity, int64_t needed, int64_t first, int64_t limit)
{
    int64_t grown = capacity > 0 ? capacity : first;
    if (grown <= 0)
        grown = 1;
    while (grown < needed) {
        if (grown > limit / 2)
            return needed <= limit ? limit : -1;
        grown *= 2;
    }
    return grown <= limit ? grown : -1;
}

void *tfenc_realloc_array(void *pointer, int64_t count, size_t size)
{
    if (count < 0 || (size != 0 && (uint64_t)count > SIZE_MAX / size))
        return NULL;
    const size_t bytes = (size_t)count * size;
    return realloc(pointer, bytes > 0 ? bytes : 1);
}
