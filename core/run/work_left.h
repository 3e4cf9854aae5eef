/* The work left to do: what an earlier run finished, window by window
 * (the writers read it from the file, every rank learns it), the windows
 * this run encodes (r->plan.todo), cut into runs of windows that start in
 * one compressed source (r->plan.runs), and the queue that hands them out
 * (r->state.queue). */
#ifndef TFENC_WORK_LEFT_H
#define TFENC_WORK_LEFT_H

#include "run/run_parts.h"

/* Once the output is open; `resumed` and `was_complete` as this rank's
 * reopen said. Collective; 1 when the job is refused. */
int tfenc_run_learn_progress(tfenc_run *r, int resumed, int was_complete);

#endif
