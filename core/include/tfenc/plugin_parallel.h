/* tfenc/plugin_parallel.h: loops over rows on the rank's one OpenMP thread
 * pool (the pool OpenBLAS, oneDNN and the host's matrix backend share),
 * part of the plugin SDK beside tfenc/plugin.h.
 *
 * A plugin that starts threads of its own oversubscribes the cores the
 * ranks were given; TFENC_PARALLEL_FOR uses the host's pool instead, and
 * starts a parallel region only when it pays and more than one thread is
 * configured: libgomp allocates and frees a team for every region it runs
 * with a single thread, and a forward pass must not allocate. Compile the
 * plugin with -fopenmp (and link with it) to get the threads; without
 * OpenMP the loop runs serially, with the same results.
 *
 * Header-only (a macro), so it adds no symbol to the ABI; new macros raise
 * TFENC_PLUGIN_PARALLEL_VERSION.
 */
#ifndef TFENC_PLUGIN_PARALLEL_H
#define TFENC_PLUGIN_PARALLEL_H

#define TFENC_PLUGIN_PARALLEL_VERSION 1

#ifdef _OPENMP
#include <omp.h>
#endif

/* Elements a loop needs before it is worth waking the other threads (a
 * parallel region costs a few microseconds). */
#define TFENC_PARALLEL_MIN_ELEMENTS 16384

/* for (int VAR = 0; VAR < COUNT; VAR++) BODY, split statically over the
 * pool's threads when WORK (elements touched) reaches the threshold. BODY
 * runs once per index in any order, so iterations MUST be independent. */
#ifdef _OPENMP
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
#else
#define TFENC_PARALLEL_FOR(VAR, COUNT, WORK, BODY)                                          \
    do {                                                                                    \
        const int tfenc_count_ = (COUNT);                                                   \
        (void)(WORK);                                                                       \
        for (int VAR = 0; VAR < tfenc_count_; VAR++) { BODY; }                              \
    } while (0)
#endif

#endif
