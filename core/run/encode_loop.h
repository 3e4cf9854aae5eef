/* The encoding, once the output is open: each stage's loop (take a
 * microbatch from the corpus on the first stage, else from the previous
 * stage; run this stage's steps; pass it on or write it), the progress
 * lines rank 0 says from the writers' tally, a stop request honoured, and
 * the end: the run's summary in the file, then the file marked complete
 * (the corpus unchanged, a sparse head's CSR made) or left resumable. */
#ifndef TFENC_ENCODE_LOOP_H
#define TFENC_ENCODE_LOOP_H

#include "run/run_parts.h"

/* Every rank; `start` is when the run began (tfenc_clock_seconds), for the
 * summary. Sets r->result's outcome; 1 when the run failed (refused, or
 * broken while encoding), else 0. */
int tfenc_run_encode_and_finish(tfenc_run *r, double start);

#endif
