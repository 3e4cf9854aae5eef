/* What every step of a run uses: notices, agreement on a failure, the
 * model's options (run/run_parts.h). */
#include "config.h"

#include "run/run_parts.h"

#include "ranks/patient_wait.h"

#include <stdarg.h>
#include <stdio.h>

void tfenc_run_notice(tfenc_run *r, const char *format, ...)
{
    const tfenc_run_observer *o = &r->settings.request->observer;
    if (r->rank != 0 || o->notice == NULL)
        return;
    char line[TFENC_MESSAGE_MAX];
    va_list args;
    va_start(args, format);
    vsnprintf(line, sizeof line, format, args);
    va_end(args);
    o->notice(o->user, line);
}

/* The lowest rank that failed reports; every rank learns whether any did.
 * Used where every rank takes part, so that a setup error is one line. A
 * rank's message is prefixed with its number when other ranks exist and
 * the error is not in the job itself (which every rank reads alike). */
int tfenc_run_agree_on_failure(tfenc_run *r, int status)
{
    /* A rank that failed only because another did (TFENC_ERR_MPI: a block
     * of the node's weights another rank could not load) reports only if
     * no rank has a reason of its own. */
    const int everyone = 2 * r->n_ranks;
    int failed_rank = status == TFENC_OK       ? everyone
                      : status == TFENC_ERR_MPI ? r->n_ranks + r->rank
                                                : r->rank;
    int first_failed = everyone;
    /* Patient: other ranks wait here while rank 0 alone works (the
     * precision gate's trial models, creating the output file). */
    tfenc_patient_allreduce(&failed_rank, &first_failed, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first_failed == everyone)
        return 0;
    first_failed %= r->n_ranks;
    r->result->outcome = TFENC_RUN_REFUSED;
    r->result->report = r->rank == first_failed;
    if (r->result->report && r->n_ranks > 1 && status != TFENC_ERR_CONFIG) {
        tfenc_error_prefix(r->ctx, status, "rank %d", r->rank);
    }
    if (r->ctx->status == TFENC_OK)
        r->ctx->status = TFENC_ERR_MPI; /* another rank failed: not ours to print */
    return 1;
}

/* A failure in the middle of encoding: other ranks may be anywhere (inside
 * a receive from this rank, say), so only the driver can end the job. */
int tfenc_run_broken(tfenc_run *r)
{
    r->result->outcome = TFENC_RUN_BROKEN;
    r->result->report = 1;
    if (r->n_ranks > 1)
        tfenc_error_prefix(r->ctx, r->ctx->status, "rank %d", r->rank);
    return 1;
}

tfenc_model_options tfenc_run_model_options(tfenc_run *r, int first_step, int end_step)
{
    tfenc_model_options o = {.job = r->settings.job_file,
                             .config = &r->settings.model,
                             .plan = &r->settings.steps,
                             .registry = r->settings.registry,
                             .weights = r->plan.weights,
                             .limits = {.max_tokens = (int)r->settings.job.batch_tokens,
                                        .max_seq_len = (int)r->settings.job.max_seq_len,
                                        .max_seqs = (int)r->settings.job.batch_tokens},
                             .first_step = first_step,
                             .end_step = end_step,
                             .step_precision = r->plan.step_precision,
                             .masked_keys = r->settings.job.multivector_query &&
                                            !r->settings.job.attend_to_mask_tokens,
                             /* the first stage's microbatches carry ids, not rows */
                             .input_unset = first_step == 0};
    return o;
}

/* MiB of weights this rank's node holds once for its ranks. */
double tfenc_run_shared_mib(const tfenc_run *r)
{
    return r->plan.arena != NULL && tfenc_node_arena_ranks(r->plan.arena) > 1
               ? (double)tfenc_node_arena_used(r->plan.arena) / (1024.0 * 1024.0)
               : 0.0;
}
