/* A tfenc-batch job from its job file to a finished output file, run by
 * every rank of MPI_COMM_WORLD together: the ranks form data-parallel
 * replicas of pipeline_stages ranks each (layout.h); a replica's first
 * stage reads and tokenizes its part of the corpus (feeder.h), every stage
 * runs its range of the model's steps, microbatches move between stages
 * (pipeline.h), and the last stages write into one output file (writer.h,
 * output.h).
 *
 * This is tfenc-batch's engine; the program itself only parses arguments,
 * initialises MPI, catches signals and prints what the observer is told
 * and the error a failed run leaves in the context. */
#ifndef TFENC_RUN_H
#define TFENC_RUN_H

#include "run/run_request.h"

/* Runs the job. Collective over MPI_COMM_WORLD; MPI must be initialised.
 * Returns the outcome in *result and TFENC_OK, or, for REFUSED and BROKEN,
 * the error's status with the message in ctx on the reporting rank. */
int tfenc_run_job(tfenc_context *ctx, const tfenc_run_request *request, tfenc_run_result *result);

#endif
