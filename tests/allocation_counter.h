/* Counts the heap allocations of the whole process (tfenc, its plugins and
 * the libraries they call: OpenBLAS, oneDNN, libgomp) between two calls, so
 * that a test can check promises such as "forward never allocates" and "a
 * destroyed model leaves no weights behind". Linked into a test program, it
 * replaces glibc's malloc family (glibc supports that) and forwards to
 * glibc's own; under AddressSanitizer it uses the sanitizer's hooks. */
#ifndef TFENC_TESTS_ALLOCATION_COUNTER_H
#define TFENC_TESTS_ALLOCATION_COUNTER_H

#include <stddef.h>

typedef struct allocation_counts {
    long calls;           /* malloc, calloc, realloc, memalign... since the start */
    long long live_bytes; /* allocated minus freed since the start (may be negative) */
    size_t largest;       /* the largest single request since the start */
} allocation_counts;

/* 1 when the counter sees allocations in this build (always, unless the
 * program runs under a tool such as valgrind that replaces malloc itself). */
int allocation_counter_works(void);
void allocation_counter_start(void);
allocation_counts allocation_counter_stop(void);

#endif
