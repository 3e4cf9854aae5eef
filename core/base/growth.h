/* Arrays that grow by doubling, alone or several side by side (a queue's
 * indices, lengths and ids grow together): one rule for the new capacity
 * and one for growing each array, so that every such reserve reads the
 * same and checks overflow and failure the same way. */
#ifndef TFENC_GROWTH_H
#define TFENC_GROWTH_H

#include <stddef.h>
#include <stdint.h>

/* The capacity that holds `needed` elements: `capacity` (or `first` when
 * it is 0) doubled until it does; -1 when doubling would pass `limit`
 * before holding them (the caller's index type, INT32_MAX or INT64_MAX). */
int64_t tfenc_grown_capacity(int64_t capacity, int64_t needed, int64_t first, int64_t limit);

/* realloc for `count` elements of `size` bytes; NULL when `count` is
 * negative (tfenc_grown_capacity's -1), the product overflows size_t or
 * memory runs out (the old block is then kept). */
void *tfenc_realloc_array(void *pointer, int64_t count, size_t size);

/* Grows `pointer` to `count` of its elements. On failure the pointer keeps
 * its old, still valid block and `ok` becomes 0: grow every array of a
 * group, then check `ok` once, and set the capacity only when all grew. */
#define TFENC_GROW_ARRAY(pointer, count, ok)                                        \
    do {                                                                            \
        void *grown_block_ = tfenc_realloc_array((pointer), (count), sizeof *(pointer)); \
        if (grown_block_ != NULL)                                                   \
            (pointer) = grown_block_;                                               \
        else                                                                        \
            (ok) = 0;                                                               \
    } while (0)

#endif
