/* An int8 job's precision per step: rank 0 takes the calibration of a file
 * ([model] calibration, or the file the job resumes) or runs the accuracy
 * gate (run/accuracy_gate.h) on a sample of the corpus; every rank takes
 * the choice and the int8 maps' input ranges, and the calibration the
 * output records (r->plan: step_precision, sample_cosine, calibration). */
#ifndef TFENC_PRECISION_CHOICE_H
#define TFENC_PRECISION_CHOICE_H

#include "run/run_parts.h"

/* After the windows are cut (the gate samples them), before the weights
 * are shared. A job that is not int8 on this CPU: nothing (a [model]
 * calibration it names is said to be unused). Collective; 1 when the job
 * is refused (min_cosine cannot be met, a calibration that does not fit). */
int tfenc_run_gate_precision(tfenc_run *r);

#endif
