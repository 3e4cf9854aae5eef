/* The one clock tfenc measures durations with: monotonic seconds. */
#ifndef TFENC_CLOCK_H
#define TFENC_CLOCK_H

#include <time.h>

static inline double tfenc_clock_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#endif
