/* The encoding (run/encode_loop.h): every stage's loop over microbatches,
 * the progress lines, and the end of the run. */
#include "config.h"

#include "run/encode_loop.h"
#include "run/heads.h"

#include "base/clock.h"
#include "ranks/patient_wait.h"
#include "run/job_reading.h"
#include "run/late_chunks.h"
#include "run/output_opening.h"
#include "run/run_report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Microbatches a pipeline stage can hold at once (one being computed, the
 * others in flight to or from its neighbours). */
#define PIPELINE_SLOTS 3

static int stop_requested(const tfenc_run *r)
{
    return r->settings.request->stop != NULL && *r->settings.request->stop != 0;
}

/* What finished work to count: the tally (core/ranks/tally.h) of every
 * last stage's writer, and on a resume, which documents the file held
 * already (the writers re-encode those that share a microbatch with
 * unfinished ones). */
static int finished_before(void *user, int64_t document)
{
    const tfenc_run *r = user;
    const tfenc_windows *w = &r->plan.windows;
    int64_t low = 0, high = w->n_windows; /* the window whose range holds it */
    while (high - low > 1) {
        int64_t middle = low + (high - low) / 2;
        if (w->first_document[middle] <= document)
            low = middle;
        else
            high = middle;
    }
    const uint8_t *finished = tfenc_windows_finished_documents(w, low);
    return finished != NULL && finished[document - w->first_document[low]] != 0;
}

static int start_tally(tfenc_run *r)
{
    const tfenc_layout *l = &r->plan.layout;
    if (r->state.writer != NULL && r->plan.windows.n_partial > 0)
        tfenc_writer_set_finished_before(r->state.writer, finished_before, r);
    return tfenc_tally_create(r->ctx, MPI_COMM_WORLD, tfenc_layout_is_last_stage(l),
                              l->data_parallel, &r->state.tally);
}

/* A last stage tells rank 0 what its flushes have finished: whenever it
 * changed (never waiting), and once at the end. */
static int report_finished(tfenc_run *r, int last)
{
    int64_t finished[TFENC_TALLY_VALUES] = {0, 0};
    if (r->state.writer != NULL)
        tfenc_writer_finished(r->state.writer, &finished[0], &finished[1]);
    return last ? tfenc_tally_report_last(r->ctx, r->state.tally, finished)
                : tfenc_tally_report(r->ctx, r->state.tally, finished);
}

static void report_progress(tfenc_run *r, double start, double *last, int final)
{
    const tfenc_run_observer *o = &r->settings.request->observer;
    if (r->rank != 0 || o->progress == NULL || r->state.tally == NULL)
        return;
    double now = tfenc_clock_seconds();
    if (!final && now - *last < r->settings.job.progress_interval)
        return;
    *last = now;
    /* Finished: in the file, as --status counts them, summed over every
     * replica's writer. */
    int64_t finished[TFENC_TALLY_VALUES];
    tfenc_tally_collect(r->state.tally, finished);
    tfenc_run_progress p = {.documents_done = r->plan.already_done + finished[0],
                            .documents_total = r->plan.n_documents,
                            .documents_before = r->plan.already_done,
                            .tokens_done = finished[1],
                            .elapsed_seconds = now - start,
                            .final = final};
    /* Files read: those that end before the first document not yet
     * handed out (the windows to do are taken in corpus order). */
    if (r->plan.windows.n_sources > 1 && r->plan.windows.source_documents != NULL) {
        int64_t taken = tfenc_work_queue_taken(r->state.queue);
        taken = taken < r->plan.n_runs ? r->plan.runs[taken] : r->plan.n_todo; /* runs -> windows */
        int64_t next = final || taken >= r->plan.n_todo
                           ? r->plan.windows.n_documents
                           : r->plan.windows.first_document[r->plan.todo[taken]];
        int64_t end = 0;
        p.files_total = r->plan.windows.n_sources;
        for (int i = 0; i < r->plan.windows.n_sources; i++) {
            end += r->plan.windows.source_documents[i];
            p.files_read += end <= next;
        }
    }
    o->progress(o->user, &p);
}

/* Rank 0, its own encoding done: every writer's last count must be in
 * before the communicator goes (and the last line counts them all); the
 * others may still be encoding, so it keeps the progress lines coming. */
static void await_finished(tfenc_run *r, double start, double *last, int interrupted)
{
    if (r->rank != 0)
        return;
    const double interval = r->settings.job.progress_interval;
    int64_t finished[TFENC_TALLY_VALUES];
    for (;;) {
        report_progress(r, start, last, 0);
        /* Until the next line is due (a driver without progress lines:
         * a whole interval at a time). */
        double wait = interval - (tfenc_clock_seconds() - *last);
        if (tfenc_tally_wait(r->state.tally, wait > 0 && wait <= interval ? wait : interval,
                             finished) == r->plan.layout.data_parallel)
            break;
    }
    if (!interrupted)
        report_progress(r, start, last, 1);
}

/* A layer made a non-finite value: the message names the layer and the
 * sequence of the microbatch; the user needs the document. */
static int name_document(tfenc_run *r, const tfenc_microbatch *m, int status)
{
    int sequence = tfenc_model_nonfinite_sequence(r->plan.model);
    if (sequence < 0 && r->state.sparse_rows != NULL)
        sequence = tfenc_sparse_rows_nonfinite_sequence(r->state.sparse_rows);
    if (sequence < 0 || sequence >= m->batch.n_seq)
        return status;
    char message[TFENC_MESSAGE_MAX];
    snprintf(message, sizeof message, "%s", tfenc_context_message(r->ctx));
    tfenc_context_clear(r->ctx);
    return tfenc_error(r->ctx, status,
                       "%s: document %lld (0-based): %s; stopped before "
                       "writing it",
                       r->settings.job.input, (long long)m->indices[sequence], message);
}

/* The first stage's next microbatch: from the window in hand, or from the
 * next window the queue hands this replica. TFENC_ERR_NOT_FOUND when the
 * queue is empty. */
static int next_microbatch(tfenc_run *r, tfenc_rank_work *work, tfenc_microbatch **m)
{
    for (;;) {
        int status = tfenc_feeder_next(r->ctx, r->state.feeder, r->state.pipeline, m);
        if (status != TFENC_ERR_NOT_FOUND)
            return status;
        if (r->state.run_next == r->state.run_end) {
            int64_t item = -1;
            status = tfenc_work_queue_take(r->ctx, r->state.queue, &item);
            if (status != TFENC_OK)
                return status;
            if (item < 0)
                return TFENC_ERR_NOT_FOUND;
            r->state.run_next = r->plan.runs[item];
            r->state.run_end = r->plan.runs[item + 1];
        }
        const int64_t k = r->plan.todo[r->state.run_next++];
        tfenc_corpus_range range;
        tfenc_windows_range(&r->plan.windows, k, &range);
        status = tfenc_feeder_load_window(
            r->ctx, r->state.feeder, &range,
            r->plan.windows.first_row != NULL ? r->plan.windows.first_row[k] : 0,
            tfenc_windows_finished_documents(&r->plan.windows, k));
        if (status != TFENC_OK)
            return status;
        work->windows++;
    }
}

/* Every stage's loop: take a microbatch (from the corpus on the first
 * stage, else from the previous stage), run this stage's steps, pass it on
 * or write it. Returns TFENC_ERR_INTERRUPTED when a stop request ended the
 * first stage early. */
static int encode(tfenc_run *r, tfenc_rank_work *work)
{
    const tfenc_layout *l = &r->plan.layout;
    const int first_stage = tfenc_layout_is_first_stage(l);
    const int last_stage = tfenc_layout_is_last_stage(l);
    double stage_flops = 0;
    for (int i = tfenc_layout_first_step(l, l->stage); i < tfenc_layout_end_step(l, l->stage); i++)
        stage_flops += r->plan.step_flops[i];
    /* The longest string a document carries to the writer: its id, and
     * with keep_fields their values. */
    const size_t carried = tfenc_kept_carried_bound(r->plan.windows.max_id_length,
                                                    r->plan.windows.max_kept_length,
                                                    r->plan.feeding.carries_kept);
    tfenc_microbatch_limits limits = {.max_tokens = (int)r->settings.job.batch_tokens,
                                      .max_seqs = (int)r->settings.job.batch_tokens,
                                      .max_ids_bytes = r->plan.feeding.has_ids
                                                           ? (size_t)r->settings.job.batch_tokens *
                                                                 carried
                                                           : 0,
                                      .d_model = r->settings.model.d_model};
    int status = start_tally(r);
    if (status == TFENC_OK)
        status = tfenc_pipeline_create(r->ctx, r->plan.replica_comm, &limits, PIPELINE_SLOTS,
                                       &r->state.pipeline);
    if (status != TFENC_OK)
        return status;
    const double start = tfenc_clock_seconds();
    double last_report = start;
    int interrupted = 0;
    for (;;) {
        tfenc_microbatch *m = NULL;
        if (first_stage) {
            if (stop_requested(r)) {
                interrupted = 1;
                break;
            }
            status = next_microbatch(r, work, &m);
            if (status == TFENC_ERR_NOT_FOUND) {
                status = TFENC_OK;
                break;
            }
        } else {
            double waited = 0;
            status = tfenc_pipeline_receive(r->ctx, r->state.pipeline, &m, &waited);
            work->waiting_seconds += waited;
            if (status == TFENC_OK && m->end_of_stream) {
                tfenc_pipeline_release(r->state.pipeline, m);
                break;
            }
        }
        if (status != TFENC_OK)
            return status;
        /* The rows of a sparse head travel with its microbatch. */
        m->sparse_rows = last_stage ? r->state.sparse_rows : NULL;
        m->batch.sparse_rows = m->sparse_rows != NULL ? &m->sparse_rows->destination : NULL;
        if (m->sparse_rows != NULL)
            status = tfenc_sparse_rows_begin(r->ctx, m->sparse_rows, m->batch.n_seq);
        if (status != TFENC_OK)
            return status;
        double step_start = tfenc_clock_seconds();
        if (r->settings.job.late_chunk) {
            const tfenc_late_chunks spans =
                tfenc_feeder_late_chunks(&r->plan.feeding, r->plan.tokenizer);
            status = tfenc_late_chunks_forward(r->ctx, r->plan.model, &spans, m);
        } else
            status = tfenc_model_forward(r->ctx, r->plan.model, &m->batch);
        work->busy_seconds += tfenc_clock_seconds() - step_start;
        if (status != TFENC_OK)
            return name_document(r, m, status);
        work->tokens += m->batch.n_tokens;
        work->microbatches++;
        work->flops += stage_flops * m->batch.n_tokens;
        if (last_stage) {
            step_start = tfenc_clock_seconds();
            /* Every head's rows before the first head's writer queues the
             * documents' lengths, which mark them finished. */
            if (r->settings.steps.n_extra_heads > 0)
                status = tfenc_heads_write(r->ctx, r->state.heads, m);
            if (status == TFENC_OK)
                status = tfenc_writer_write(r->ctx, r->state.writer, m);
            work->writing_seconds += tfenc_clock_seconds() - step_start;
            tfenc_pipeline_release(r->state.pipeline, m);
            if (status == TFENC_OK)
                status = report_finished(r, 0);
        } else {
            status = tfenc_pipeline_pass_on(r->ctx, r->state.pipeline, m);
        }
        if (status != TFENC_OK)
            return status;
        report_progress(r, start, &last_report, 0);
    }
    status = tfenc_pipeline_finish(r->ctx, r->state.pipeline);
    if (status == TFENC_OK && last_stage) {
        double flush_start = tfenc_clock_seconds();
        status = tfenc_writer_flush(r->ctx, r->state.writer);
        work->writing_seconds += tfenc_clock_seconds() - flush_start;
    }
    if (status == TFENC_OK)
        status = report_finished(r, 1);
    if (status == TFENC_OK)
        await_finished(r, start, &last_report, interrupted);
    if (status == TFENC_OK && interrupted)
        status = TFENC_ERR_INTERRUPTED;
    return status;
}

/* Every rank: whether any must leave without MPI_Finalize (HDF5 failed
 * to close a file), so that they all leave the same way. */
static void agree_to_skip_finalize(tfenc_run *r, int skip)
{
    int any = 0;
    MPI_Allreduce(&skip, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any)
        r->result->skip_finalize = 1;
}

/* Stopped, or after a failed finish step, on every rank: the file closed
 * without the complete mark (a run that resumes completes it). */
static void close_unfinished(tfenc_run *r)
{
    int failed = r->state.output != NULL && tfenc_output_close(r->state.output) != 0;
    r->state.output = NULL;
    agree_to_skip_finalize(r, failed);
}

/* Every rank: this run's summary appended to the file's run_summaries
 * (output/output.h) by its writers, as rank 0 made it (attribute values
 * must be the same on every writer). */
static int record_summary(tfenc_run *r, const tfenc_run_summary *summary, int finished)
{
    char *text = r->rank == 0 ? tfenc_run_summary_json(summary, finished) : NULL;
    int length = text != NULL ? (int)strlen(text) + 1 : 0;
    MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
    int status = TFENC_OK;
    if (length == 0) {
        status =
            tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "rank 0: out of memory for the run summary");
        goto done;
    }
    if (text == NULL)
        text = malloc((size_t)length);
    int have = text != NULL, everyone = 0;
    MPI_Allreduce(&have, &everyone, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!everyone) {
        status = have ? TFENC_ERR_MPI : tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    MPI_Bcast(text, length, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (r->state.output != NULL)
        status = tfenc_output_add_run_summary(r->ctx, r->state.output, text);
done:
    free(text);
    return status;
}

/* Encodes, then marks the file complete, or (stopped on request) leaves it
 * resumable. */
int tfenc_run_encode_and_finish(tfenc_run *r, double start)
{
    tfenc_rank_work work = {.replica = r->plan.layout.replica, .stage = r->plan.layout.stage,
                            .shared_mib = tfenc_run_shared_mib(r)};
    double encode_start = tfenc_clock_seconds(), cpu_start = tfenc_clock_cpu_seconds();
    int status = encode(r, &work);
    work.encode_seconds = tfenc_clock_seconds() - encode_start;
    work.encode_cpu_seconds = tfenc_clock_cpu_seconds() - cpu_start;
    if (status != TFENC_OK && status != TFENC_ERR_INTERRUPTED)
        return tfenc_run_broken(r);
    int interrupted = status == TFENC_ERR_INTERRUPTED, any_interrupted = 0;
    /* Replicas finish their last windows at different times: the first to
     * finish must not spin a core the others are still encoding on. */
    tfenc_patient_allreduce(&interrupted, &any_interrupted, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    int64_t documents = 0, truncated = 0, tokens = 0;
    if (r->state.writer != NULL) {
        documents = tfenc_writer_documents(r->state.writer);
        truncated = tfenc_writer_truncated_documents(r->state.writer);
        tokens = tfenc_writer_tokens(r->state.writer);
    }
    /* The figures now, before the end changes the file: each run that
     * reaches its end, stopped or finished, leaves them in it. */
    tfenc_run_summary summary;
    tfenc_run_summary_gather(MPI_COMM_WORLD, &work, documents, truncated, tokens,
                             tfenc_clock_seconds() - start, &summary);
    summary.output_path = r->settings.job.output;
    if (tfenc_run_agree_on_failure(r, record_summary(r, &summary, !any_interrupted))) {
        tfenc_run_summary_free(&summary);
        close_unfinished(r);
        return 1;
    }
    if (any_interrupted) {
        tfenc_run_summary_free(&summary);
        int64_t written = 0;
        MPI_Allreduce(&documents, &written, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
        close_unfinished(r);
        r->result->outcome = TFENC_RUN_STOPPED;
        r->result->documents_finished = r->plan.already_done + written;
        r->result->n_documents = r->plan.n_documents;
        return 0;
    }
    /* Complete only if every window was read from the corpus the job
     * began with (a file cut short fails its read; one edited or replaced
     * is found here). */
    if (tfenc_run_agree_on_failure(r, r->rank == 0 ? tfenc_run_check_watched(r, "the corpus")
                                                   : TFENC_OK)) {
        tfenc_run_summary_free(&summary);
        return 1;
    }
    /* The steps before the mark (the sparse CSR): one that failed on any
     * rank leaves the file as it was, incomplete, for a run that resumes. */
    status = TFENC_OK;
    if (r->state.output != NULL && r->plan.kind->rows == TFENC_ROWS_SPARSE)
        status = tfenc_run_finish_sparse_rows(r);
    if (status == TFENC_OK && r->state.output != NULL)
        status = tfenc_heads_finish(r->ctx, r->state.heads, r->state.output);
    if (tfenc_run_agree_on_failure(r, status)) {
        close_unfinished(r);
        if (r->state.sparse_log != NULL && r->plan.layout.replica == 0)
            tfenc_sparse_release_space(r->settings.job.output);
        tfenc_run_summary_free(&summary);
        return 1;
    }
    if (r->state.output != NULL) {
        status = tfenc_output_finish(r->ctx, r->state.output);
        r->state.output = NULL;
    }
    /* A close that failed (a full disk) can leave HDF5 unable to shut down. */
    agree_to_skip_finalize(r, status == TFENC_ERR_IO);
    if (tfenc_run_agree_on_failure(r, status)) {
        tfenc_run_summary_free(&summary);
        return 1;
    }
    /* The rows are in the file, which says complete: the logs can go. */
    if (r->plan.layout.replica == 0)
        tfenc_heads_remove_logs(r->state.heads, r->settings.job.output);
    if (r->state.sparse_log != NULL && r->plan.layout.replica == 0) {
        tfenc_sparse_remove_logs(r->settings.job.output);
        tfenc_sparse_release_space(r->settings.job.output);
    }
    const tfenc_run_observer *o = &r->settings.request->observer;
    if (r->rank == 0 && o->summary != NULL && summary.ranks != NULL)
        o->summary(o->user, &summary);
    tfenc_run_summary_free(&summary);
    r->result->outcome = TFENC_RUN_FINISHED;
    return 0;
}
