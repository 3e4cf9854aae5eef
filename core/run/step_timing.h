/* Each step of the model timed on a sample of the corpus, one step at a
 * time, so that --dry-run estimates a job's time from this machine's own
 * speed at the job's precisions, threads and document lengths, for any
 * split into pipeline stages, rather than from FLOPs at one rate: a
 * 30,522-wide vocabulary projection, attention over long documents and a
 * norm each run at their own rate per FLOP. */
#ifndef TFENC_STEP_TIMING_H
#define TFENC_STEP_TIMING_H

#include "model/model.h"
#include "run/accuracy_gate.h"

#include <stdint.h>

/* How many sample tokens to time a model that costs flops_per_token:
 * about 5e10 FLOPs (a second or two), between one document of
 * max_seq_len and 2,048 tokens. */
long tfenc_step_timing_tokens(double flops_per_token, long max_seq_len);

/* Runs `sample` through the model of `options` (steps first_step ..
 * end_step), each step built alone as the accuracy gate builds it (one
 * step's weights at a time beside whatever the caller holds), warmed up
 * on the first batch, then timed twice on every batch: seconds_per_token[i
 * - options->first_step] is step i's faster wall time over the sample's
 * tokens. */
int tfenc_step_timing_measure(tfenc_context *ctx, const tfenc_model_options *options,
                              const tfenc_gate_sample *sample, double *seconds_per_token);
/* The same, with each step's CPU-seconds per sample token (the process's,
 * the pass that took the least) in cpu_seconds_per_token, or NULL: a
 * shared machine's other work inflates wall time far more than CPU time. */
int tfenc_step_timing_measure_cpu(tfenc_context *ctx, const tfenc_model_options *options,
                                  const tfenc_gate_sample *sample, double *seconds_per_token,
                                  double *cpu_seconds_per_token);

/* Bytes of one step's note (tfenc_step_timing_measure_noting). */
#define TFENC_STEP_NOTE_BYTES 512

/* The same, and each step's note into notes + (i - options->first_step) *
 * TFENC_STEP_NOTE_BYTES: what its layer counted over one pass of the
 * sample (tfenc/plugin.h's counters, "tokens per expert: 812 790 ..."),
 * or "" when it counts nothing; a note too long for its bytes ends in
 * "...". */
int tfenc_step_timing_measure_noting(tfenc_context *ctx, const tfenc_model_options *options,
                                     const tfenc_gate_sample *sample, double *seconds_per_token,
                                     char *notes);

#endif
