/* A job run: setup agreed by every rank, the model and the corpus, the
 * output (created or resumed), the encoding loop of each stage, and the
 * end (complete, or stopped and resumable). */
#include "config.h"

#include "run/run.h"
#include "run/run_parts.h"
#include "run/job_reading.h"
#include "run/kind_survey.h"
#include "run/precision_choice.h"
#include "run/quantization_ranges.h"
#include "run/output_opening.h"
#include "run/encode_loop.h"
#include "run/heads.h"

#include "base/clock.h"
#include "base/files.h"
#include "matrix/matrix.h"
#include "run/run_report.h"
#include "run/step_timing.h"

#include <mpi.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------ the job, in order */

/* The steps of a job, each below (or in the file its header names) in the
 * order run_job_steps takes them. A step that returns 1 has failed on some
 * rank, and every rank knows it (tfenc_run_agree_on_failure). */
static void join_communicators(tfenc_run *r);
static int open_tokenizer(tfenc_run *r);
static int find_multivector_tokens(tfenc_run *r);
static int open_input(tfenc_run *r);
static int cut_windows(tfenc_run *r);
static int choose_paths(tfenc_run *r);
static void share_weights(tfenc_run *r);
static int whole_model(tfenc_run *r);
static int count_rows(tfenc_run *r);
static int cost_steps(tfenc_run *r);
static int time_steps(tfenc_run *r);
static void find_busiest_node(tfenc_run *r);
static void describe_plan(tfenc_run *r);
static int stage_model(tfenc_run *r);
static void release_run(tfenc_run *r);

static int run_job_steps(tfenc_run *r)
{
    double start = tfenc_clock_seconds();
    if (tfenc_run_agree_on_failure(r, tfenc_run_read_job(r)) || tfenc_run_same_sources(r))
        return 1;
    join_communicators(r);
    /* The windows come first: the int8 gate samples them. */
    if (tfenc_run_check_keys_against_head(r) ||
        tfenc_run_agree_on_failure(r, open_tokenizer(r)) || find_multivector_tokens(r) ||
        tfenc_run_agree_on_failure(r, open_input(r)) || cut_windows(r) || choose_paths(r) ||
        tfenc_run_gate_precision(r) ||
        tfenc_run_quantization_ranges(r))
        return 1;
    share_weights(r);
    const int n_stages = r->plan.layout.pipeline_stages;
    /* One stage: the whole model, probed now, tells whether it pools before
     * pass 1 (which then tokenizes only when token offsets are needed). */
    if (n_stages == 1 && tfenc_run_agree_on_failure(r, whole_model(r)))
        return 1;
    if ((n_stages > 1 || r->plan.kind->rows == TFENC_ROWS_PER_TOKEN ||
         r->settings.job.chunks == TFENC_CHUNKS_EACH || r->settings.request->dry_run) &&
        count_rows(r))
        return 1;
    if (cost_steps(r))
        return 1;
    if (tfenc_run_agree_on_failure(r,
                                   tfenc_layout_split(r->ctx, &r->plan.layout, r->plan.step_flops)))
        return 1;
    if (r->settings.request->dry_run) {
        if (tfenc_run_agree_on_failure(r, time_steps(r)))
            return 1;
        find_busiest_node(r);
        describe_plan(r);
        r->result->outcome = TFENC_RUN_PLANNED;
        return 0;
    }
    /* Every rank knows it, as it knows the job: reported once, by rank 0. */
    if (r->plan.n_documents == 0)
        return tfenc_run_agree_on_failure(r, tfenc_error(r->ctx, TFENC_ERR_CONFIG,
                                                         "%s: the corpus holds no documents",
                                                         r->settings.job.input));
    if (n_stages > 1 && tfenc_run_agree_on_failure(r, stage_model(r)))
        return 1;
    if (tfenc_run_open_output(r))
        return 1;
    return tfenc_run_encode_and_finish(r, start);
}

int tfenc_run_job(tfenc_context *ctx, const tfenc_run_request *request, tfenc_run_result *result)
{
    memset(result, 0, sizeof *result);
    tfenc_run r;
    memset(&r, 0, sizeof r);
    r.ctx = ctx;
    r.settings.request = request;
    r.result = result;
    r.plan.replica_comm = r.plan.writers_comm = MPI_COMM_NULL;
    r.plan.kind = tfenc_output_kind_entry_of(TFENC_OUTPUT_POOLED);
    r.plan.multivector.marker_id = r.plan.multivector.pad_id = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &r.n_ranks);
    run_job_steps(&r);
    if (r.settings.job.output != NULL)
        snprintf(result->output_path, sizeof result->output_path, "%s", r.settings.job.output);
    /* A broken run is ended by the driver; releasing could block on a rank
     * that waits for this one (collective closes). */
    if (result->outcome != TFENC_RUN_BROKEN && !result->skip_finalize)
        release_run(&r);
    if (result->outcome == TFENC_RUN_REFUSED || result->outcome == TFENC_RUN_BROKEN)
        return ctx->status != TFENC_OK ? ctx->status : TFENC_ERR_INTERNAL;
    return TFENC_OK;
}

/* ---------------------------------------------------------------- setup */

/* The communicators of the rank's role: its replica's chain of stages, and
 * the writers (every last stage). */
static void join_communicators(tfenc_run *r)
{
    const tfenc_layout *l = &r->plan.layout;
    if (l->pipeline_stages > 1)
        MPI_Comm_split(MPI_COMM_WORLD, l->replica, l->stage, &r->plan.replica_comm);
    MPI_Comm_split(MPI_COMM_WORLD, tfenc_layout_is_last_stage(l) ? 0 : MPI_UNDEFINED, r->rank,
                   &r->plan.writers_comm);
}

/* Where the job leaves a way of computing to auto, rank 0 takes the
 * choices an earlier file records ([model] paths, or the file this run
 * resumes) or times the candidates on a sample of the corpus, and every
 * rank builds its model with them (run/path_choice.h). Before the gate,
 * whose models then run the job's paths. */
static int choose_paths(tfenc_run *r)
{
    char *recorded = NULL, origin[600] = "";
    tfenc_gate_sample sample = {0};
    const char *from = r->settings.model.paths_path;
    int status = TFENC_OK;
    if (r->rank == 0 && from != NULL) {
        status = tfenc_path_choices_read(r->ctx, "[model] paths", from, &recorded);
        snprintf(origin, sizeof origin, "[model] paths %s", from);
        if (status == TFENC_OK && recorded == NULL)
            status = tfenc_error(r->ctx, TFENC_ERR_CONFIG,
                                 "[model] paths %s: the file records no path choices (written "
                                 "by an older tfenc?)", from);
    } else if (r->rank == 0 && r->settings.job.resume &&
               tfenc_file_present(r->settings.job.output)) {
        /* A file that cannot be read is the resume's to refuse, later. */
        if (tfenc_path_choices_read(r->ctx, "[job] output", r->settings.job.output, &recorded) ==
            TFENC_OK)
            snprintf(origin, sizeof origin, "the file this run resumes (%s)",
                     r->settings.job.output);
        else
            tfenc_context_clear(r->ctx);
    }
    if (r->rank == 0 && status == TFENC_OK && origin[0] == '\0' && tfenc_path_measuring()) {
        const tfenc_gate_corpus source = {
            .corpus = r->state.corpus, .windows = &r->plan.windows, .tokenizer = r->plan.tokenizer,
            .feeding = &r->plan.feeding, .max_seq_len = r->settings.job.max_seq_len,
            .batch_tokens = r->settings.job.batch_tokens, .d_model = r->settings.model.d_model};
        status = tfenc_gate_sample_read_limited(
            r->ctx, &source, (size_t)tfenc_step_timing_tokens(0, r->settings.job.max_seq_len), 0,
            &sample);
    }
    tfenc_model_options o = tfenc_run_model_options(r, 0, r->settings.steps.n_steps);
    o.limits.max_tokens = o.limits.max_seqs = sample.batch_tokens > 0 ? sample.batch_tokens : 1;
    const tfenc_path_record record = {.assignments = recorded,
                                      .origin = origin[0] != '\0' ? origin : NULL};
    if (r->rank == 0 && status == TFENC_OK)
        status = tfenc_path_choices_decide(r->ctx, r->settings.job_file, &r->settings.steps, &o,
                                           &sample, &record, &r->plan.paths);
    free(recorded);
    tfenc_gate_sample_free(&sample);
    if (tfenc_run_agree_on_failure(r, status))
        return 1;
    int length = r->rank == 0 ? (int)strlen(r->plan.paths.assignments) + 1 : 0;
    MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (r->rank != 0 && (r->plan.paths.assignments = malloc((size_t)length)) == NULL)
        status = tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    if (tfenc_run_agree_on_failure(r, status))
        return 1;
    MPI_Bcast(r->plan.paths.assignments, length, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (r->rank != 0)
        status = tfenc_path_choices_apply(r->ctx, r->settings.job_file, r->plan.paths.assignments);
    if (tfenc_run_agree_on_failure(r, status))
        return 1;
    /* The layers read their keys when built; the model's fp32 maps read
     * the config. */
    r->settings.model.fp32_products = tfenc_model_fp32_products(r->settings.job_file);
    /* Said when there was something to choose and measuring is on: with
     * TFENC_PATHS=default nothing was measured (--dry-run and --status
     * still show the choices). */
    if (r->plan.paths.assignments[0] != '\0' && tfenc_path_measuring())
        tfenc_run_notice(r, "%s", r->plan.paths.line);
    return 0;
}

/* The first stages tokenize: the job's tokenizer. */
static int open_tokenizer(tfenc_run *r)
{
    if (!tfenc_layout_is_first_stage(&r->plan.layout))
        return TFENC_OK;
    return tfenc_job_settings_tokenizer(r->ctx, r->settings.job_file, &r->settings.model,
                                        &r->settings.job, &r->plan.tokenizer);
}

/* A multi-vector job's marker, [MASK] and skiplist, found by rank 0 (a
 * first stage) in its tokenizer: the first stages count and feed with
 * them, the last ones write by the skiplist. */
static int find_multivector_tokens(tfenc_run *r)
{
    int status = TFENC_OK;
    if (r->rank == 0)
        status = tfenc_multivector_tokens_find(r->ctx, &r->settings.job, r->plan.tokenizer,
                                               &r->plan.multivector);
    if (tfenc_run_agree_on_failure(r, status))
        return 1;
    return tfenc_run_agree_on_failure(
        r, tfenc_multivector_tokens_share(r->ctx, MPI_COMM_WORLD, &r->plan.multivector));
}

/* The first stage reads the corpus (opened on a small share; each window
 * selects its own documents). */
static int open_input(tfenc_run *r)
{
    r->plan.feeding = (tfenc_feeder_options){.input = r->settings.job.input,
                                        .max_seq_len = (int)r->settings.job.max_seq_len,
                                        .batch_tokens = (int)r->settings.job.batch_tokens,
                                        /* A chunked document is cut into chunks,
                                         * never refused for its length. */
                                        .truncation = r->settings.job.truncation ||
                                                      r->settings.job.chunks != TFENC_CHUNKS_OFF,
                                        .empty_documents = r->settings.job.empty_zeros,
                                        .document_order = r->settings.job.document_order,
                                        .vocab_size = r->settings.model.vocab_size,
                                        .has_ids = r->settings.job.corpus.id_field != NULL ||
                                                   r->settings.job.corpus.n_keep_fields > 0,
                                        .carries_kept = r->settings.job.corpus.n_keep_fields > 0,
                                        .prompt = r->settings.job.prompt,
                                        .chunks = r->settings.job.chunks,
                                        .chunk_overlap = (int)r->settings.job.chunk_overlap,
                                        .late_chunk_tokens =
                                            r->settings.job.late_chunk
                                                ? (int)r->settings.job.chunk_tokens
                                                : 0,
                                        .late_chunk_sentences = r->settings.job.chunk_sentences,
                                        .marker_id = r->plan.multivector.marker_id,
                                        .pad_id = r->plan.multivector.pad_id,
                                        .pad_attended = r->settings.job.attend_to_mask_tokens,
                                        .skiplist = r->plan.multivector.skip_flags != NULL ||
                                                            r->plan.multivector.skiplist.skip_first
                                                        ? &r->plan.multivector.skiplist
                                                        : NULL};
    if (!tfenc_layout_is_first_stage(&r->plan.layout))
        return TFENC_OK;
    int status = tfenc_corpus_open(r->ctx, &r->settings.job.corpus, r->plan.layout.replica,
                                   r->plan.layout.data_parallel, &r->state.corpus);
    if (status == TFENC_OK)
        status = tfenc_feeder_create(r->ctx, &r->plan.feeding, r->plan.tokenizer, r->state.corpus,
                                     &r->state.feeder);
    return status;
}

/* Pass 0: every rank reads and checks one share of the corpus, and the
 * shares together cut it into windows (windows.h). */
static int cut_windows(tfenc_run *r)
{
    tfenc_windows_share share;
    int status = tfenc_windows_scan(r->ctx, MPI_COMM_WORLD, &r->settings.job.corpus,
                                    r->settings.job.window_documents, &share);
    if (tfenc_run_agree_on_failure(r, status)) {
        tfenc_windows_share_free(&share);
        return 1;
    }
    if (tfenc_run_agree_on_failure(r, tfenc_windows_build(r->ctx, MPI_COMM_WORLD, &share,
                                                          r->settings.job.window_documents,
                                                          &r->plan.windows)))
        return 1;
    tfenc_kept_type types[TFENC_MAX_KEEP_FIELDS];
    size_t longest[TFENC_MAX_KEEP_FIELDS];
    if (tfenc_run_agree_on_failure(r, tfenc_windows_kept_types(r->ctx, &r->plan.windows,
                                                               &r->settings.job.corpus, types,
                                                               longest)))
        return 1;
    for (int k = 0; k < r->settings.job.corpus.n_keep_fields; k++)
        r->plan.kept_fields[k] = (tfenc_kept_field){.name = r->settings.job.corpus.keep_fields[k],
                                                    .type = types[k], .longest = longest[k]};
    r->plan.n_documents = r->plan.windows.n_documents;
    return 0;
}

/* A window's output rows: its chunks for an output of every chunk, else
 * its tokens; the tokens and sequences it encodes are summed either way
 * (for the plan and the steps' costs). */
static int count_one_window(tfenc_context *ctx, void *user, int64_t window, int64_t *rows)
{
    tfenc_run *r = user;
    tfenc_corpus_range range;
    tfenc_windows_range(&r->plan.windows, window, &range);
    int64_t tokens = 0, sequences = 0, chunk_rows = 0, kept = 0;
    int status = tfenc_feeder_count_window(ctx, r->state.feeder, &range, &tokens, &sequences,
                                           &chunk_rows, &kept);
    *rows = r->settings.job.chunks == TFENC_CHUNKS_EACH ? chunk_rows : kept;
    r->plan.n_tokens += tokens;
    r->plan.n_sequences += sequences;
    return status;
}

/* Pass 1, where the output places rows by token or by chunk (or a plan
 * needs the corpus's size in tokens): the first stages tokenize the
 * windows, one replica each in turn, and every rank learns each window's
 * first row. */
static int count_rows(tfenc_run *r)
{
    const tfenc_layout *l = &r->plan.layout;
    int counter = tfenc_layout_is_first_stage(l) ? l->replica : -1;
    r->plan.n_tokens = r->plan.n_sequences = 0;
    int status = tfenc_windows_count_local(r->ctx, &r->plan.windows, counter, l->data_parallel,
                                           count_one_window, r);
    if (tfenc_run_agree_on_failure(r, status) ||
        tfenc_run_agree_on_failure(
            r, tfenc_windows_sum_rows(r->ctx, MPI_COMM_WORLD, &r->plan.windows)))
        return 1;
    int64_t sums[2] = {r->plan.n_tokens, r->plan.n_sequences};
    MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    r->plan.n_tokens = sums[0];
    r->plan.n_sequences = sums[1];
    r->plan.n_rows = r->plan.windows.first_row[r->plan.windows.n_windows];
    return 0;
}

/* Step costs for the split into stages, and whether the model pools: from
 * the whole model with one stage, else from rank 0's step-by-step survey
 * (no rank ever loads more than its stage's weights for good). */
static int cost_steps(tfenc_run *r)
{
    r->plan.step_flops = calloc((size_t)r->settings.steps.n_steps, sizeof *r->plan.step_flops);
    if (r->plan.step_flops == NULL)
        return tfenc_run_agree_on_failure(
            r, tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory"));
    /* A step's cost per token grows with the length of the sequences it
     * sees: chunks of long documents, not whole documents, once counted. */
    const int64_t sequences = r->plan.n_sequences > 0 ? r->plan.n_sequences : r->plan.n_documents;
    double mean_length = sequences > 0 ? (double)r->plan.n_tokens / (double)sequences : 1.0;
    if (r->plan.layout.pipeline_stages == 1) {
        int status = TFENC_OK;
        for (int i = 0; status == TFENC_OK && i < r->settings.steps.n_steps; i++)
            status = tfenc_model_step_flops(r->ctx, r->plan.model, i, mean_length,
                                            &r->plan.step_flops[i]);
        return tfenc_run_agree_on_failure(r, status);
    }
    int probed[2] = {0, 0}, status = TFENC_OK; /* pools, unit rows */
    if (r->rank == 0) {
        tfenc_model_options o = tfenc_run_model_options(r, 0, r->settings.steps.n_steps);
        status = tfenc_model_survey(r->ctx, &o, mean_length, r->plan.step_flops, &probed[0],
                                    &probed[1]);
    }
    if (tfenc_run_agree_on_failure(r, status))
        return 1;
    MPI_Bcast(r->plan.step_flops, r->settings.steps.n_steps, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Bcast(probed, 2, MPI_INT, 0, MPI_COMM_WORLD);
    const int pools = probed[0];
    r->plan.model_unit_rows = probed[1];
    tfenc_layer_output declared;
    char *labels = NULL;
    if (tfenc_run_survey_output(r, &declared, &labels))
        return 1;
    status = tfenc_run_decide_output_kind(r, pools, &declared);
    free(labels);
    return tfenc_run_agree_on_failure(r, status);
}

/* The ranks of a node keep one copy of the weights (core/ranks/node_arena.h),
 * made after the int8 gate, whose trial models would otherwise leave
 * their conversions in it. The arena is sized for the whole model as
 * float32, the largest form a map takes; its pages are backed only where
 * written. A node that cannot make it keeps a copy per rank, as before. */
static void share_weights(tfenc_run *r)
{
    /* Every rank reads the same job: all skip the collective below. */
    if (!r->settings.job.share_weights)
        return;
    size_t capacity = tfenc_weight_store_float32_bytes(r->plan.weights);
    capacity += capacity / 4 + ((size_t)16 << 20);
    int status = tfenc_node_arena_create(r->ctx, MPI_COMM_WORLD, capacity, &r->plan.arena);
    if (status != TFENC_OK) {
        tfenc_run_notice(
            r,
            "weights %s are not shared by the ranks of a node (%s): each rank keeps its "
            "own copy",
            r->settings.model.weights_path, tfenc_context_message(r->ctx));
        tfenc_context_clear(r->ctx);
        r->plan.arena = NULL;
        return;
    }
    if (tfenc_node_arena_ranks(r->plan.arena) > 1)
        tfenc_weight_store_share(r->plan.weights, r->plan.arena);
}

/* The corpus for the plan: its format as the formats' table describes it,
 * and its files' paths, documents and compressions (the returned array,
 * which the caller frees). */
static const char **describe_sources(const tfenc_run *r, tfenc_run_plan *plan)
{
    plan->input_format = tfenc_corpus_format_name(r->settings.job.corpus.format);
    tfenc_corpus_format_describe(&r->settings.job.corpus, plan->input_description,
                                 sizeof plan->input_description);
    plan->n_sources = r->settings.job.sources.n;
    plan->source_paths = (const char *const *)r->settings.job.sources.paths;
    plan->source_documents = r->plan.windows.source_documents;
    plan->source_skipped = r->plan.windows.source_skipped;
    if (r->state.corpus == NULL || tfenc_corpus_n_sources(r->state.corpus) != plan->n_sources)
        return NULL;
    const char **compressions = calloc((size_t)plan->n_sources, sizeof *compressions);
    for (int i = 0; compressions != NULL && i < plan->n_sources; i++)
        compressions[i] = tfenc_stream_compression_name(
            tfenc_corpus_source_compression(r->state.corpus, i));
    plan->source_compressions = compressions;
    return compressions;
}

/* --dry-run: rank 0 times each step on a sample of the corpus, spread
 * over it by the accuracy gate's rule (run/step_timing.h), at the job's
 * precisions (int8: the gate's choice) and threads. A corpus without a
 * document to time leaves the plan without the measurement. */
static int time_steps(tfenc_run *r)
{
    if (r->rank != 0)
        return TFENC_OK;
    const int n_steps = r->settings.steps.n_steps;
    double flops = 0;
    for (int i = 0; i < n_steps; i++)
        flops += r->plan.step_flops[i];
    const long tokens = tfenc_step_timing_tokens(flops, r->settings.job.max_seq_len);
    /* A long document's first max_seq_len tokens stand for its chunks,
     * which are as long: whole documents of chunks would not fit the
     * timing's few thousand tokens. */
    const tfenc_gate_corpus source = {
        .corpus = r->state.corpus, .windows = &r->plan.windows, .tokenizer = r->plan.tokenizer,
        .feeding = &r->plan.feeding, .max_seq_len = r->settings.job.max_seq_len,
        .batch_tokens = r->settings.job.batch_tokens, .d_model = r->settings.model.d_model};
    tfenc_gate_sample sample = {0};
    int status = tfenc_gate_sample_read_limited(r->ctx, &source, (size_t)tokens, 0, &sample);
    if (status == TFENC_OK && sample.n_batches > 0) {
        r->plan.step_seconds = calloc((size_t)n_steps, sizeof *r->plan.step_seconds);
        r->plan.step_notes = calloc((size_t)n_steps, TFENC_STEP_NOTE_BYTES);
        if (r->plan.step_seconds == NULL || r->plan.step_notes == NULL)
            status = tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        tfenc_model_options o = tfenc_run_model_options(r, 0, n_steps);
        o.limits.max_tokens = o.limits.max_seqs = sample.batch_tokens;
        if (status == TFENC_OK)
            status = tfenc_step_timing_measure_noting(r->ctx, &o, &sample, r->plan.step_seconds,
                                                      r->plan.step_notes);
        r->plan.timed_tokens = sample.n_tokens;
        if (status != TFENC_OK) {
            free(r->plan.step_seconds);
            r->plan.step_seconds = NULL;
            free(r->plan.step_notes);
            r->plan.step_notes = NULL;
        }
    }
    tfenc_gate_sample_free(&sample);
    return status;
}

/* The node whose ranks run the most threads beyond the cores they may run
 * on (the union of their affinity masks): the dry run's estimate times the
 * steps on rank 0 alone, and threads that wait for a core make the job
 * slower than that (mpiexec --bind-to none with each rank's default
 * threads; docs/performance.md has the figures). Every rank takes part. */
static void find_busiest_node(tfenc_run *r)
{
    cpu_set_t cores;
    CPU_ZERO(&cores);
    if (sched_getaffinity(0, sizeof cores, &cores) != 0) {
        /* Unknown: every online CPU, which can only hide a warning. */
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        for (long i = 0; i < online && i < CPU_SETSIZE; i++)
            CPU_SET((int)i, &cores);
    }
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, r->rank, MPI_INFO_NULL, &node);
    unsigned char mask[sizeof cores];
    memcpy(mask, &cores, sizeof mask);
    MPI_Allreduce(MPI_IN_PLACE, mask, (int)sizeof mask, MPI_UNSIGNED_CHAR, MPI_BOR, node);
    memcpy(&cores, mask, sizeof cores);
    int threads = tfenc_matrix_threads(), node_threads = 0, node_ranks = 1;
    MPI_Allreduce(&threads, &node_threads, 1, MPI_INT, MPI_SUM, node);
    MPI_Comm_size(node, &node_ranks);
    MPI_Comm_free(&node);
    int figures[3] = {node_ranks, node_threads, CPU_COUNT(&cores)};
    int excess[2] = {figures[1] - figures[2], r->rank};
    MPI_Allreduce(MPI_IN_PLACE, excess, 1, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD);
    MPI_Bcast(figures, 3, MPI_INT, excess[1], MPI_COMM_WORLD);
    memcpy(r->plan.busiest_node, figures, sizeof figures);
}

static void describe_plan(tfenc_run *r)
{
    const tfenc_run_observer *o = &r->settings.request->observer;
    if (r->rank != 0 || o->plan == NULL)
        return;
    char kernels[256];
    tfenc_matrix_describe_kernels(r->settings.model.fp32_products, kernels, sizeof kernels);
    tfenc_run_plan plan = {
        .job_path = r->settings.job_file->path,
        .layout = &r->plan.layout,
        .model = &r->settings.steps,
        .kernels = kernels,
        .paths = r->plan.paths.line,
        .step_flops = r->plan.step_flops,
        .step_seconds = r->plan.step_seconds,
        .step_notes = r->plan.step_notes,
        .timed_tokens = r->plan.timed_tokens,
        .d_model = r->settings.model.d_model,
        .weights_path = r->settings.model.weights_path,
        .input_path = r->settings.job.input,
        .output_path = r->settings.job.output,
        .first_head = r->settings.steps.first_head,
        .extra_heads = (const char *const *)r->settings.steps.extra_head_names,
        .n_extra_heads = r->settings.steps.n_extra_heads,
        .text_pair_field = r->settings.job.corpus.text_pair_field,
        .text_field = r->settings.job.corpus.text_pair_field != NULL
                          ? r->settings.job.corpus.text_field
                          : NULL,
        .kind = r->plan.kind,
        .width = tfenc_run_row_width(r),
        .unit_norm = tfenc_run_rows_unit_length(r),
        .labels = r->plan.labels,
        .dtype = r->settings.job.dtype,
        .sparse_top_k = r->settings.job.sparse_top_k,
        .sparse_threshold = r->settings.job.sparse_threshold,
        .n_rows = r->plan.n_rows,
        .n_documents = r->plan.n_documents,
        .n_tokens = r->plan.n_tokens,
        .n_sequences = r->plan.n_sequences,
        .chunked = r->settings.job.chunks != TFENC_CHUNKS_OFF,
        .late_chunked = r->settings.job.late_chunk,
        .last_flop_rate = tfenc_run_last_flop_rate(),
        .weights_float32_mib =
            (double)tfenc_weight_store_float32_bytes(r->plan.weights) / (1024.0 * 1024.0),
        .node_ranks = r->plan.arena != NULL ? tfenc_node_arena_ranks(r->plan.arena) : 1,
        .shared_weights_mib = r->plan.model != NULL ? tfenc_run_shared_mib(r) : 0.0,
        .rank_memory_mib = r->plan.model != NULL ? tfenc_proportional_mib() : 0.0,
        .weights_per_rank = r->plan.arena == NULL,
        .busiest_node_ranks = r->plan.busiest_node[0],
        .busiest_node_threads = r->plan.busiest_node[1],
        .busiest_node_cores = r->plan.busiest_node[2]};
    const char **compressions = describe_sources(r, &plan);
    o->plan(o->user, &plan);
    free(compressions);
}


/* ---------------------------------------------------- the models, the end */

/* The state first (what the encoding left open: the file, the feeder, the
 * queue), then the plan (the model before its weights), then the settings
 * (the plugins' code last, once no layer of theirs is left). Every rank
 * takes the collective closes in the same order: the output, the queue,
 * the tally, the node's arena, the communicators. */
static void release_state(tfenc_run *r)
{
    tfenc_feeder_destroy(r->state.feeder);
    tfenc_writer_destroy(r->state.writer);
    tfenc_heads_destroy(r->state.heads);
    tfenc_sparse_rows_destroy(r->state.sparse_rows);
    tfenc_sparse_log_close(r->state.sparse_log);
    free(r->state.sparse_logged);
    tfenc_pipeline_destroy(r->state.pipeline);
    if (!r->result->skip_finalize)
        tfenc_output_close(r->state.output);
    tfenc_output_lock_release(r->state.lock);
    tfenc_corpus_close(r->state.corpus);
    tfenc_work_queue_destroy(r->state.queue);
    tfenc_tally_destroy(r->state.tally);
    tfenc_run_free_watched(r);
}

static void release_plan(tfenc_run_computed_plan *plan)
{
    tfenc_tokenizer_destroy(plan->tokenizer);
    tfenc_multivector_tokens_free(&plan->multivector);
    tfenc_model_destroy(plan->model);
    free(plan->step_precision);
    tfenc_int8_calibration_free(&plan->calibration);
    tfenc_path_choices_free(&plan->paths);
    free(plan->ranges);
    free(plan->sample_indices);
    tfenc_layout_free(&plan->layout);
    tfenc_windows_free(&plan->windows);
    free(plan->todo);
    free(plan->runs);
    free(plan->step_flops);
    free(plan->step_seconds);
    free(plan->step_notes);
    free(plan->labels);
    tfenc_weight_store_close(plan->weights);
    tfenc_node_arena_destroy(plan->arena);
    if (plan->replica_comm != MPI_COMM_NULL)
        MPI_Comm_free(&plan->replica_comm);
    if (plan->writers_comm != MPI_COMM_NULL)
        MPI_Comm_free(&plan->writers_comm);
}

static void release_settings(tfenc_run_settings *settings)
{
    tfenc_plugin_registry_destroy(settings->registry);
    tfenc_model_plan_free(&settings->steps);
    tfenc_model_config_free(&settings->model);
    tfenc_job_settings_free(&settings->job);
    tfenc_jobfile_destroy(settings->job_file);
    free(settings->weights_file_sha256);
}

static void release_run(tfenc_run *r)
{
    release_state(r);
    release_plan(&r->plan);
    release_settings(&r->settings);
}

static int stage_model(tfenc_run *r)
{
    const tfenc_layout *l = &r->plan.layout;
    tfenc_model_options o = tfenc_run_model_options(r, tfenc_layout_first_step(l, l->stage),
                                                    tfenc_layout_end_step(l, l->stage));
    return tfenc_model_create(r->ctx, &o, &r->plan.model);
}

static int whole_model(tfenc_run *r)
{
    tfenc_model_options o = tfenc_run_model_options(r, 0, r->settings.steps.n_steps);
    int pools = 0;
    tfenc_layer_output declared;
    int status = tfenc_model_create(r->ctx, &o, &r->plan.model);
    if (status == TFENC_OK)
        status = tfenc_model_probe_pools(r->ctx, r->plan.model, &pools, &r->plan.model_unit_rows);
    if (status == TFENC_OK)
        status = tfenc_model_output(r->ctx, r->plan.model, &declared);
    if (status == TFENC_OK)
        status = tfenc_run_decide_output_kind(r, pools, &declared);
    if (status == TFENC_OK && r->settings.job.late_chunk)
        status = tfenc_model_prepare_spans(r->ctx, r->plan.model);
    return status;
}
