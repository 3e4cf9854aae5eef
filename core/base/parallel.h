/* Loops over rows on the rank's one OpenMP thread pool (the pool OpenBLAS,
 * oneDNN and the matrix backend share), header-only for core and plugins.
 * A parallel region is started only when it pays and more than one thread
 * is configured: libgomp allocates and frees a team for every region it
 * runs with a single thread, and a forward pass must not allocate. */
#ifndef TFENC_PARALLEL_H
#define TFENC_PARALLEL_H

#include <omp.h>

/* Elements a loop needs before it is worth waking the other threads (a
 * parallel region costs a few microseconds). */
#define TFENC_PARALLEL_MIN_ELEMENTS 16384

/* for (int VAR = 0; VAR < COUNT; VAR++) BODY, split statically over the
 * pool's threads when WORK (elements touched) reaches the threshold. BODY
 * runs once per index in any order, so iterations MUST be independent. */
#define TFENC_PARALLEL_FOR(VAR, COUNT, WORK, BODY)                                          \
    do {                                                                                    \
        const int tfenc_count_ = (COUNT);                                                   \
        if ((double)(WORK) >= TFENC_PARALLEL_MIN_ELEMENTS && omp_get_max_threads() > 1 &&   \
            !omp_in_parallel()) {                                                           \
            _Pragma("omp parallel for schedule(static)")                                    \
            for (int VAR = 0; VAR < tfenc_count_; VAR++) { BODY; }                          \
        } else {                                                                            \
            for (int VAR = 0; VAR < tfenc_count_; VAR++) { BODY; }                          \
        }                                                                                   \
    } while (0)

#endif
