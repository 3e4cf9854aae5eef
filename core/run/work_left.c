/* The work left (run/work_left.h): what the file holds already, window by
 * window, and the runs of windows the queue hands out. */
#include "config.h"

#include "run/work_left.h"
#include "run/heads.h"

#include <stdlib.h>

static int read_window_progress(tfenc_context *ctx, void *user, int64_t first_document,
                                int64_t n_documents, uint8_t *done)
{
    tfenc_run *r = user;
    int status = tfenc_output_written(ctx, r->state.output, first_document, n_documents, done);
    /* A sparse document counts as finished only with its row in a log
     * (a damaged or removed log's documents are encoded again). */
    for (int64_t j = 0; status == TFENC_OK && r->state.sparse_logged != NULL && j < n_documents;
         j++)
        if (done[j] && !tfenc_sparse_has_row(r->state.sparse_logged, first_document + j))
            done[j] = 0;
    /* So with each further head's (run/heads.h). */
    for (int64_t j = 0; status == TFENC_OK && r->state.heads != NULL && j < n_documents; j++)
        if (done[j] && !tfenc_heads_rows_logged(r->state.heads, first_document + j))
            done[j] = 0;
    return status;
}

/* The queue hands out runs of windows: a window alone, or the consecutive
 * windows to do that start in one compressed (or Parquet) source, which a
 * replica then reads in order, decoding the source once. Handed out one
 * window at a time, R replicas would each decode the whole source to skip
 * the others' windows (R + 1 times the corpus in all, counting the
 * scan); in runs each source is decoded by the scan, by its run's replica,
 * and in part by the window before the run that runs into it: under 3
 * times. The cost: a run is a coarser unit of work at the corpus's end. */
static int cut_runs(tfenc_run *r)
{
    r->plan.runs = malloc(((size_t)r->plan.n_todo + 1) * sizeof *r->plan.runs);
    if (r->plan.runs == NULL)
        return tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    r->plan.n_runs = 0;
    for (int64_t i = 0; i < r->plan.n_todo; i++) {
        int source = tfenc_windows_whole_source(&r->plan.windows, r->plan.todo[i]);
        int joins = i > 0 && source >= 0 && r->plan.todo[i - 1] == r->plan.todo[i] - 1
                    && tfenc_windows_whole_source(&r->plan.windows, r->plan.todo[i - 1]) == source;
        if (!joins)
            r->plan.runs[r->plan.n_runs++] = i;
    }
    r->plan.runs[r->plan.n_runs] = r->plan.n_todo;
    return TFENC_OK;
}

/* What an earlier run finished, window by window, known to every rank
 * (the writers read it from the file), and the windows left to do. */
int tfenc_run_learn_progress(tfenc_run *r, int resumed, int was_complete)
{
    MPI_Allreduce(MPI_IN_PLACE, &resumed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (resumed) {
        const tfenc_layout *l = &r->plan.layout;
        int reader = tfenc_layout_is_last_stage(l) ? l->replica : -1;
        int status = tfenc_windows_progress_local(r->ctx, &r->plan.windows, reader,
                                                  l->data_parallel, read_window_progress, r);
        if (tfenc_run_agree_on_failure(r, status) ||
            tfenc_run_agree_on_failure(
                r, tfenc_windows_combine_progress(r->ctx, MPI_COMM_WORLD, &r->plan.windows)))
            return 1;
    }
    r->plan.todo = malloc(((size_t)r->plan.windows.n_windows + 1) * sizeof *r->plan.todo);
    if (tfenc_run_agree_on_failure(
            r, r->plan.todo == NULL ? tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory")
                                    : TFENC_OK))
        return 1;
    for (int64_t k = 0; k < r->plan.windows.n_windows; k++) {
        if (r->plan.windows.state[k] == TFENC_WINDOW_DONE)
            continue;
        tfenc_corpus_range range;
        tfenc_windows_range(&r->plan.windows, k, &range);
        r->plan.todo[r->plan.n_todo++] = k;
        r->plan.todo_documents += range.n_documents;
    }
    r->plan.already_done = tfenc_windows_documents_finished(&r->plan.windows);
    if (resumed)
        tfenc_run_notice(r, "resuming %s: %lld of %lld documents were finished by an earlier run%s",
                         r->settings.job.output, (long long)r->plan.already_done,
                         (long long)r->plan.n_documents, was_complete ? " (it had completed)" : "");
    if (tfenc_run_agree_on_failure(r, cut_runs(r)))
        return 1;
    int status = tfenc_run_agree_on_failure(
        r, tfenc_work_queue_create(r->ctx, MPI_COMM_WORLD, r->plan.n_runs, r->plan.layout.replica,
                                   r->plan.layout.data_parallel, &r->state.queue));
    const char *reason = NULL;
    if (status == TFENC_OK && tfenc_work_queue_dealt_out(r->state.queue, &reason))
        tfenc_run_notice(
            r,
            "the MPI library cannot make a one-sided window across these ranks (%s): "
            "windows are dealt out to the %d replicas in turn instead of to whichever is "
            "free; the output is the same (with Open MPI over TCP, OMPI_MCA_osc=sm,pt2pt "
            "restores the balancing)",
            reason, r->plan.layout.data_parallel);
    return status;
}
