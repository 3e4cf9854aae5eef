/* The clocks tfenc measures with: monotonic seconds, and CPU seconds. */
#ifndef TFENC_CLOCK_H
#define TFENC_CLOCK_H

#include <time.h>

static inline double tfenc_clock_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* CPU seconds this process has used, all its threads together. */
static inline double tfenc_clock_cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#endif
