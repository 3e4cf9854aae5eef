/* A job run: setup agreed by every rank, the model and the corpus, the
 * output (created or resumed), the encoding loop of each stage, and the
 * end (complete, or stopped and resumable). */
#include "config.h"

#include "run/run.h"

#include "base/clock.h"
#include "base/aligned.h"
#include "base/context.h"
#include "base/files.h"
#include "input/corpus.h"
#include "run/feeder.h"
#include "run/multivector_tokens.h"
#include "output/fingerprint.h"
#include "ranks/agreement.h"
#include "run/job_settings.h"
#include "job/jobfile.h"
#include "matrix/matrix.h"
#include "ranks/node_arena.h"
#include "ranks/patient_wait.h"
#include "output/kinds.h"
#include "output/output.h"
#include "output/quantize.h"
#include "output/ownership.h"
#include "output/sparse.h"
#include "ranks/pipeline.h"
#include "run/accuracy_gate.h"
#include "run/calibration.h"
#include "run/step_timing.h"
#include "run/path_choice.h"
#include "plugin/plugin_loader.h"
#include "base/sha256.h"
#include "tokenizer/tokenizer.h"
#include "model/weights.h"
#include "input/windows.h"
#include "ranks/tally.h"
#include "ranks/work_queue.h"
#include "output/writer.h"

#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Microbatches a pipeline stage can hold at once (one being computed, the
 * others in flight to or from its neighbours). */
#define PIPELINE_SLOTS 3

/* Everything a run holds, released in one place. */
typedef struct run {
    tfenc_context *ctx;
    const tfenc_run_request *request;
    int rank;
    int n_ranks;
    tfenc_jobfile *job;
    tfenc_job_settings settings;
    tfenc_model_config config;
    tfenc_model_plan plan;
    tfenc_plugin_registry *registry;
    tfenc_weight_store *weights;
    tfenc_node_arena *arena; /* the node's one copy of the weights; NULL: not shared */
    tfenc_layout layout;     /* this rank's place, and the steps of each stage */
    MPI_Comm replica_comm;   /* the replica's stages; MPI_COMM_NULL with one stage */
    MPI_Comm writers_comm;   /* every last stage; MPI_COMM_NULL on the others */
    double *step_flops;      /* [n_steps] FLOPs per token at the corpus's mean length */
    double *step_seconds;    /* --dry-run, rank 0: [n_steps] measured seconds per token */
    char *step_notes;        /* --dry-run, rank 0: [n_steps] notes (run/step_timing.h) */
    int64_t timed_tokens;    /* the sample they were measured on */
    int busiest_node[3];     /* --dry-run: ranks, threads, cores of the most oversubscribed node */
    tfenc_model *model;
    const tfenc_output_kind_entry *kind; /* what the job writes (output/kinds.h), once known */
    int kind_width;          /* a head's width (scores, sparse columns, vectors), else 0 */
    int model_unit_rows;     /* the model's last rows have unit length (its probe) */
    tfenc_multivector_tokens multivector; /* marker, mask and skiplist ids */
    char *labels;            /* scores: the head's id2label (JSON), or NULL */
    tfenc_sparse_rows *sparse_rows; /* sparse, last stage: the microbatch's rows */
    tfenc_sparse_log *sparse_log;   /* sparse, last stage: this writer's log */
    uint8_t *sparse_logged;  /* sparse, resumed: the documents with a sound logged row */
    int sparse_csr_whole;    /* sparse, resumed: the file holds its whole CSR already */
    tfenc_tokenizer *tokenizer;
    tfenc_corpus *corpus;
    tfenc_feeder_options feeding;
    tfenc_windows windows;   /* the corpus cut into windows, and what is finished */
    tfenc_kept_field kept_fields[TFENC_MAX_KEEP_FIELDS]; /* [job] keep_fields as stored */
    int64_t n_documents, n_tokens; /* the whole corpus (n_tokens once counted: what the
                                    * job encodes, every chunk of a long document included) */
    int64_t n_sequences;     /* once counted: the sequences encoded (documents, or chunks) */
    int64_t n_rows;          /* output rows of a per-token or every-chunk output */
    tfenc_output *output;
    tfenc_output_lock *lock; /* rank 0: this job owns the output */
    int64_t already_done;    /* documents an earlier run finished */
    int64_t *todo;           /* the windows this run encodes, in order */
    int64_t n_todo, todo_documents;
    tfenc_work_queue *queue; /* hands out runs */
    tfenc_tally *tally;      /* the writers' finished documents and tokens, for rank 0 */
    int64_t *runs;           /* [n_runs + 1] first todo index of each run, then n_todo */
    int64_t n_runs;
    int64_t run_next, run_end; /* the todo indices left of the run in hand */
    tfenc_pipeline *pipeline;
    tfenc_feeder *feeder;
    tfenc_writer *writer;
    tfenc_run_result *result;
    tfenc_precision *step_precision; /* int8: the calibration's precision per step */
    double sample_cosine;            /* int8: the gate's min cosine to fp32 on its sample */
    tfenc_int8_calibration calibration; /* int8: what the int8 model is made with, for the file */
    tfenc_path_choices paths;        /* the ways of computing auto chose, for the file */
    float *ranges;                   /* output_dtype int8 / uint8: [2, d] min, max */
    char ranges_source[512];         /* where the ranges came from, for the file */
    int64_t *sample_indices;         /* calibrated ranges: the sample's documents */
    int n_sample;
    char weights_sha256[65];         /* rank 0: of the weights file as the job opened it */
    /* Every rank once open_output() has broadcast them: [n_steps] the
     * SHA-256 of each step's weights_file, "" for a step without one. */
    char (*weights_file_sha256)[65];
    struct watched_file *watched;    /* rank 0: every file a path key names, as it was */
    int n_watched;
} run;

/* A file the job reads, and its state when the job began reading it. */
typedef struct watched_file {
    char *what; /* "the corpus ([job] input)" */
    char *path;
    struct stat state;
} watched_file;

static void notice(run *r, const char *format, ...) TFENC_PRINTF(2, 3);
static void notice(run *r, const char *format, ...)
{
    const tfenc_run_observer *o = &r->request->observer;
    if (r->rank != 0 || o->notice == NULL)
        return;
    char line[TFENC_MESSAGE_MAX];
    va_list args;
    va_start(args, format);
    vsnprintf(line, sizeof line, format, args);
    va_end(args);
    o->notice(o->user, line);
}

/* ------------------------------------------------------------ agreement */

/* The lowest rank that failed reports; every rank learns whether any did.
 * Used where every rank takes part, so that a setup error is one line. A
 * rank's message is prefixed with its number when other ranks exist and
 * the error is not in the job itself (which every rank reads alike). */
static int agree_on_failure(run *r, int status)
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
static int broken(run *r)
{
    r->result->outcome = TFENC_RUN_BROKEN;
    r->result->report = 1;
    if (r->n_ranks > 1)
        tfenc_error_prefix(r->ctx, r->ctx->status, "rank %d", r->rank);
    return 1;
}

/* ------------------------------------------------------ the job, in order */

/* The steps of a job, each below in the order run_steps takes them. A step
 * that returns 1 has failed on some rank, and every rank knows it
 * (agree_on_failure). */
static int read_job(run *r);
static int same_sources(run *r);
static int check_keys_against_head(run *r);
static void join_communicators(run *r);
static int open_tokenizer(run *r);
static int find_multivector_tokens(run *r);
static int open_input(run *r);
static int cut_windows(run *r);
static int choose_paths(run *r);
static int gate_precision(run *r);
static int quantization_ranges(run *r);
static void share_weights(run *r);
static int whole_model(run *r);
static int count_rows(run *r);
static int cost_steps(run *r);
static int time_steps(run *r);
static void find_busiest_node(run *r);
static void describe_plan(run *r);
static int stage_model(run *r);
static int open_output(run *r);
static int encode_and_finish(run *r, double start);
static void release_run(run *r);

static int run_steps(run *r)
{
    double start = tfenc_clock_seconds();
    if (agree_on_failure(r, read_job(r)) || same_sources(r))
        return 1;
    join_communicators(r);
    /* The windows come first: the int8 gate samples them. */
    if (check_keys_against_head(r) ||
        agree_on_failure(r, open_tokenizer(r)) || find_multivector_tokens(r) ||
        agree_on_failure(r, open_input(r)) || cut_windows(r) || choose_paths(r) ||
        gate_precision(r) ||
        quantization_ranges(r))
        return 1;
    share_weights(r);
    const int n_stages = r->layout.pipeline_stages;
    /* One stage: the whole model, probed now, tells whether it pools before
     * pass 1 (which then tokenizes only when token offsets are needed). */
    if (n_stages == 1 && agree_on_failure(r, whole_model(r)))
        return 1;
    if ((n_stages > 1 || r->kind->rows == TFENC_ROWS_PER_TOKEN ||
         r->settings.chunks == TFENC_CHUNKS_EACH || r->request->dry_run) &&
        count_rows(r))
        return 1;
    if (cost_steps(r))
        return 1;
    if (agree_on_failure(r, tfenc_layout_split(r->ctx, &r->layout, r->step_flops)))
        return 1;
    if (r->request->dry_run) {
        if (agree_on_failure(r, time_steps(r)))
            return 1;
        find_busiest_node(r);
        describe_plan(r);
        r->result->outcome = TFENC_RUN_PLANNED;
        return 0;
    }
    /* Every rank knows it, as it knows the job: reported once, by rank 0. */
    if (r->n_documents == 0)
        return agree_on_failure(r, tfenc_error(r->ctx, TFENC_ERR_CONFIG,
                                               "%s: the corpus holds no documents",
                                               r->settings.input));
    if (n_stages > 1 && agree_on_failure(r, stage_model(r)))
        return 1;
    if (open_output(r))
        return 1;
    return encode_and_finish(r, start);
}

int tfenc_run_job(tfenc_context *ctx, const tfenc_run_request *request, tfenc_run_result *result)
{
    memset(result, 0, sizeof *result);
    run r;
    memset(&r, 0, sizeof r);
    r.ctx = ctx;
    r.request = request;
    r.result = result;
    r.replica_comm = r.writers_comm = MPI_COMM_NULL;
    r.kind = tfenc_output_kind_entry_of(TFENC_OUTPUT_POOLED);
    r.multivector.marker_id = r.multivector.pad_id = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &r.n_ranks);
    run_steps(&r);
    if (r.settings.output != NULL)
        snprintf(result->output_path, sizeof result->output_path, "%s", r.settings.output);
    /* A broken run is ended by the driver; releasing could block on a rank
     * that waits for this one (collective closes). */
    if (result->outcome != TFENC_RUN_BROKEN && !result->skip_finalize)
        release_run(&r);
    if (result->outcome == TFENC_RUN_REFUSED || result->outcome == TFENC_RUN_BROKEN)
        return ctx->status != TFENC_OK ? ctx->status : TFENC_ERR_INTERNAL;
    return TFENC_OK;
}

/* ---------------------------------------------------------------- setup */

/* Open MPI binds each rank to one core by default, also a rank started
 * without mpiexec: the rank's threads would then share that core and run
 * slower than one thread. Or the job asks for more threads than the
 * machine has cores. Said once, by rank 0, as advice. */
static void warn_about_binding(run *r)
{
    cpu_set_t cores;
    int threads = tfenc_matrix_threads();
    if (r->rank != 0 || threads < 2 || sched_getaffinity(0, sizeof cores, &cores) != 0)
        return;
    int usable = CPU_COUNT(&cores);
    if (usable < threads && usable < sysconf(_SC_NPROCESSORS_ONLN))
        notice(r,
               "warning: %d threads per rank but this rank may run on %d core%s "
               "(MPI binds ranks to cores): start with mpiexec --bind-to none (or set "
               "OMPI_MCA_hwloc_base_binding_policy=none), or use 1 thread and more ranks",
               threads, usable, usable == 1 ? "" : "s");
    else if (usable < threads)
        notice(r, "warning: %d threads per rank but this machine has %d core%s: threads wait "
               "for a core; set [job] threads = %d", threads, usable, usable == 1 ? "" : "s",
               usable);
}

/* The file as it was, for telling whether anything changed it since: a
 * write or a truncation moves its size or modification time. */
static int same_state(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Rank 0: the state of every file a path key of the job names (the list
 * of core/job/params.h), taken before the job reads their data, so that a
 * file changed while the job read it is found: the weights and the
 * tokenizer's file before their checksums are recorded, the corpus also
 * before the output is marked complete. */
static int watch_input(void *user, const char *what, const char *setting, const char *path)
{
    run *r = user;
    watched_file *grown = realloc(r->watched, ((size_t)r->n_watched + 1) * sizeof *grown);
    if (grown == NULL)
        return tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    r->watched = grown;
    watched_file *file = &r->watched[r->n_watched];
    size_t size = strlen(what) + strlen(setting) + 4;
    file->what = malloc(size);
    file->path = strdup(path);
    if (file->what == NULL || file->path == NULL) {
        free(file->what);
        free(file->path);
        return tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    }
    snprintf(file->what, size, "%s (%s)", what, setting);
    r->n_watched++;
    /* A file that is not there yet is the reader's to report, in its own
     * words; one that appears later counts as changed. */
    if (stat(path, &file->state) != 0)
        memset(&file->state, 0, sizeof file->state);
    return TFENC_OK;
}

/* TFENC_ERR_IO naming the first watched file (or, with `only` not NULL,
 * the first of those that are `only` to the job, e.g. "the corpus") that
 * is no longer as it was. */
static int check_watched(run *r, const char *only)
{
    for (int i = 0; i < r->n_watched; i++) {
        const watched_file *file = &r->watched[i];
        struct stat now;
        if (only != NULL && strncmp(file->what, only, strlen(only)) != 0)
            continue;
        if (stat(file->path, &now) != 0 || !same_state(&now, &file->state))
            return tfenc_error(r->ctx, TFENC_ERR_IO,
                               "%s: %s changed while this job read it (its size or "
                               "modification time is not what it was when the job began): the "
                               "output would hold rows of two versions of it, or record the "
                               "checksum of bytes the job did not use; run the job again once "
                               "the file is whole",
                               file->path, file->what);
    }
    return TFENC_OK;
}

static void free_watched(run *r)
{
    for (int i = 0; i < r->n_watched; i++) {
        free(r->watched[i].what);
        free(r->watched[i].path);
    }
    free(r->watched);
}

/* Rank 0: a weights file's SHA-256, taken as the job opens it and before
 * any layer reads it; open_output() records it only if the file is still
 * the same then (check_watched), so that the checksum is of the bytes the
 * layers used. */
static int hash_weights_file(run *r, const char *path, char sha256[65])
{
    struct stat before, after;
    if (stat(path, &before) != 0)
        return tfenc_error(r->ctx, TFENC_ERR_IO, "weights %s: cannot examine it", path);
    int status = tfenc_sha256_file(r->ctx, path, sha256);
    if (status == TFENC_OK && (stat(path, &after) != 0 || !same_state(&after, &before)))
        status = tfenc_error(r->ctx, TFENC_ERR_IO, "weights %s: the file changed while this "
                             "job computed its SHA-256; run the job again once it is whole",
                             path);
    return status;
}

/* Rank 0: [model] weights', then each layer's weights_file's: a head
 * swapped for another in the same file name changes the rows as much as
 * other encoder weights do. */
static int hash_weights(run *r)
{
    int status = hash_weights_file(r, r->config.weights_path, r->weights_sha256);
    for (int i = 0; status == TFENC_OK && i < r->plan.n_steps; i++)
        if (r->plan.steps[i].weights_file != NULL)
            status = hash_weights_file(r, r->plan.steps[i].weights_file,
                                       r->weights_file_sha256[i]);
    return status;
}

/* Rank 0, once hash_weights() has run: the digest an int8 calibration
 * records as the weights it is of, [model] weights' SHA-256; with layers'
 * weights_files, the SHA-256 of that and of each file's "NAME SHA256" line,
 * so that a calibration made with one head is not taken for another (its
 * maps' input ranges follow the head's own earlier maps). */
static void calibration_weights_digest(const run *r, char digest[65])
{
    char lines[4096];
    size_t used = (size_t)snprintf(lines, sizeof lines, "%s\n", r->weights_sha256);
    int heads = 0;
    for (int i = 0; i < r->plan.n_steps && used < sizeof lines; i++)
        if (r->plan.steps[i].weights_file != NULL) {
            used += (size_t)snprintf(lines + used, sizeof lines - used, "%.256s %s\n",
                                     r->plan.steps[i].name, r->weights_file_sha256[i]);
            heads++;
        }
    if (heads == 0)
        memcpy(digest, r->weights_sha256, 65);
    else
        tfenc_sha256_hex(lines, used < sizeof lines ? used : sizeof lines - 1, digest);
}

/* The job, the model's plan and the layout check: identical on every rank,
 * so errors here are reported once. */
static int read_job(run *r)
{
    const tfenc_run_request *q = r->request;
    int status = tfenc_jobfile_load(r->ctx, q->job_path, &r->job);
    for (int i = 0; status == TFENC_OK && i < q->n_overrides; i++)
        status = tfenc_jobfile_override(r->ctx, r->job, q->overrides[i]);
    if (status == TFENC_OK)
        status = tfenc_model_config_read(r->ctx, r->job, &r->config);
    /* Before any weight is loaded: what this CPU runs of the precision
     * asked for, said in one line where it lacks an instruction set. */
    if (status == TFENC_OK) {
        char line[512];
        tfenc_precision runs;
        if (tfenc_matrix_describe(r->config.precision, &runs, line, sizeof line))
            notice(r, "%s", line);
        r->config.precision = runs;
    }
    if (status == TFENC_OK)
        status = tfenc_job_settings_read(r->ctx, r->job, &r->config, &r->settings);
    if (status == TFENC_OK)
        status = tfenc_model_plan_read(r->ctx, r->job, &r->plan);
    if (status == TFENC_OK) {
        char where[512];
        snprintf(where, sizeof where, "%s: [job]", r->job->path);
        status = tfenc_layout_place(r->ctx, where, r->rank, r->n_ranks,
                                    (int)r->settings.pipeline_stages, r->plan.n_steps,
                                    &r->layout);
    }
    if (status == TFENC_OK)
        tfenc_matrix_set_threads((int)r->settings.threads);
    /* Which kernels run, known before any map is made: an fp32 library
     * older than the CPU is said in one line (a job's fp32 bits and speed
     * follow it; the output records the line of describe_kernels). */
    if (status == TFENC_OK)
        status = tfenc_matrix_load(r->ctx);
    if (status == TFENC_OK) {
        char line[512];
        if (tfenc_matrix_describe_fallback(line, sizeof line))
            notice(r, "%s", line);
    }
    if (status == TFENC_OK)
        warn_about_binding(r);
    if (status == TFENC_OK)
        status = tfenc_plugin_registry_create(r->ctx, r->config.plugin_path, r->job->directory,
                                              &r->registry);
    for (int i = 0; status == TFENC_OK && i < tfenc_plugin_registry_n_warnings(r->registry); i++)
        notice(r, "warning: %s", tfenc_plugin_registry_warning(r->registry, i));
    /* Only the plugin files of the types this job names (core/plugin/plugin_loader.h). */
    if (status == TFENC_OK)
        status = tfenc_plugin_registry_load_job(r->ctx, r->registry, r->job);
    if (status == TFENC_OK)
        status = tfenc_weight_store_open(r->ctx, r->config.weights_path, &r->weights);
    if (status == TFENC_OK)
        status = tfenc_model_attach_weights_files(r->ctx, r->job, &r->plan, r->weights);
    if (status == TFENC_OK &&
        (r->weights_file_sha256 = calloc((size_t)r->plan.n_steps,
                                         sizeof *r->weights_file_sha256)) == NULL)
        status = tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    if (status == TFENC_OK && r->rank == 0 && !r->request->dry_run)
        status = tfenc_jobfile_each_input(r->job, watch_input, r);
    /* The corpus's files ([job] input: a file, a directory, a glob, @list). */
    for (int i = 0; status == TFENC_OK && r->rank == 0 && !r->request->dry_run &&
                    i < r->settings.sources.n; i++)
        status = watch_input(r, "the corpus", "[job] input", r->settings.sources.paths[i]);
    if (status == TFENC_OK && r->rank == 0 && !r->request->dry_run)
        status = hash_weights(r);
    return status;
}

/* Every rank expands [job] input (a glob, a directory, a list file) on its
 * own node; the windows are numbered over rank 0's list, so a node that
 * sees other files (a file system not yet in sync, shards still being
 * written) would encode another corpus under the same numbers. */
static int same_sources(run *r)
{
    const tfenc_sources *sources = &r->settings.sources;
    size_t length = 0;
    for (int i = 0; i < sources->n; i++)
        length += strlen(sources->paths[i]) + 1;
    char *joined = malloc(length + 1);
    if (joined == NULL)
        return agree_on_failure(r, tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory"));
    size_t used = 0;
    for (int i = 0; i < sources->n; i++) {
        size_t n = strlen(sources->paths[i]);
        memcpy(joined + used, sources->paths[i], n);
        joined[used + n] = '\n';
        used += n + 1;
    }
    int other = -1;
    long fewest = 0, most = 0;
    tfenc_ranks_compare(MPI_COMM_WORLD, joined, used, (long)sources->n, &other, &fewest, &most);
    free(joined);
    if (other < 0)
        return 0;
    int status = tfenc_error(r->ctx, TFENC_ERR_CONFIG, "%s: [job] input = %s: rank %d sees "
                             "other files than rank 0 (%ld to %ld files over the ranks): every "
                             "node must see the same corpus", r->job->path, r->settings.input,
                             other, fewest, most);
    return agree_on_failure(r, r->rank == 0 ? status : TFENC_ERR_MPI);
}

/* The communicators of the rank's role: its replica's chain of stages, and
 * the writers (every last stage). */
static void join_communicators(run *r)
{
    const tfenc_layout *l = &r->layout;
    if (l->pipeline_stages > 1)
        MPI_Comm_split(MPI_COMM_WORLD, l->replica, l->stage, &r->replica_comm);
    MPI_Comm_split(MPI_COMM_WORLD, tfenc_layout_is_last_stage(l) ? 0 : MPI_UNDEFINED, r->rank,
                   &r->writers_comm);
}

static tfenc_model_options model_options(run *r, int first_step, int end_step)
{
    tfenc_model_options o = {
        .job = r->job, .config = &r->config, .plan = &r->plan, .registry = r->registry,
        .weights = r->weights,
        .limits = {.max_tokens = (int)r->settings.batch_tokens,
                   .max_seq_len = (int)r->settings.max_seq_len,
                   .max_seqs = (int)r->settings.batch_tokens},
        .first_step = first_step, .end_step = end_step, .step_precision = r->step_precision,
        .masked_keys = r->settings.multivector_query && !r->settings.attend_to_mask_tokens,
        /* the first stage's microbatches carry ids, not rows */
        .input_unset = first_step == 0};
    return o;
}

_Static_assert(sizeof(tfenc_precision) == sizeof(int), "step precisions travel as MPI_INT");

/* What the model's last layer declares it writes (its kind, and the width
 * of scores and vectors), from that step built alone (rank 0, before the
 * output kind is agreed on). */
static int declared_output(run *r, tfenc_layer_output_kind *kind, int *width)
{
    *kind = TFENC_LAYER_OUTPUT_HIDDEN;
    *width = 0;
    tfenc_model_options o = model_options(r, r->plan.n_steps - 1, r->plan.n_steps);
    tfenc_model *last = NULL;
    tfenc_layer_output declared = {.struct_size = sizeof declared};
    int status = tfenc_model_create(r->ctx, &o, &last);
    if (status == TFENC_OK)
        status = tfenc_model_output(r->ctx, last, &declared);
    if (status == TFENC_OK) {
        *kind = declared.kind;
        *width = declared.width;
    }
    tfenc_model_destroy(last);
    return status;
}

/* The number of scores a document gets when the model ends in a head that
 * declares them, else 0: what the accuracy gate measures. */
static int declared_scores_width(run *r, int *width)
{
    tfenc_layer_output_kind kind;
    int status = declared_output(r, &kind, width);
    const tfenc_output_kind_entry *entry = tfenc_output_kind_of_layer(kind, 1);
    if (entry == NULL || !entry->gated_by_scores)
        *width = 0;
    return status;
}

/* What the kinds' table decides from: the model's declared output and
 * whether it pools, and the [job] keys. */
static tfenc_output_kind_request kind_request(const run *r, const tfenc_layer_output *declared,
                                              int pools)
{
    const tfenc_job_settings *s = &r->settings;
    return (tfenc_output_kind_request){
        .wanted = s->output_kind, .declared = declared->kind, .width = declared->width,
        .pools = pools, .dtype = s->dtype, .chunks = s->chunks, .output_dim = s->output_dim,
        .output_ids = s->output_ids, .multivector_key = s->multivector_key,
        .sparse_top_k = s->sparse_top_k, .sparse_threshold = s->sparse_threshold};
}

/* A refusal of the kinds' table, at its [job] key's line or after the
 * job file's path. */
static int raise_refusal(run *r, const tfenc_output_kind_refusal *refusal)
{
    if (refusal->key != NULL)
        return tfenc_job_settings_key_error(r->ctx, r->job, refusal->key, refusal->message);
    return tfenc_error(r->ctx, refusal->status, "%s: %s", r->job->path, refusal->message);
}

/* Before the corpus is read and before ranges are asked for or
 * calibrated: the keys that cannot apply to the model's head are refused
 * with the real reason (rank 0 builds the last step alone). */
static int check_keys_against_head(run *r)
{
    const tfenc_job_settings *s = &r->settings;
    if (s->dtype == TFENC_DTYPE_FLOAT32 && s->multivector_key == NULL)
        return 0;
    int status = TFENC_OK;
    if (r->rank == 0) {
        tfenc_layer_output declared = {.struct_size = sizeof declared};
        status = declared_output(r, &declared.kind, &declared.width);
        tfenc_output_kind_request request = kind_request(r, &declared, 1);
        tfenc_output_kind_refusal refusal;
        if (status == TFENC_OK && tfenc_output_kind_refuse_for_head(&request, &refusal) != TFENC_OK)
            status = raise_refusal(r, &refusal);
    }
    return agree_on_failure(r, status);
}

/* Where an int8 job's calibration came from, told by rank 0 to every rank. */
typedef struct calibration_origin {
    double min_cosine, sample_cosine;
    int64_t sample_documents;
    int from_file;       /* 0: the gate calibrated; 1: [model] calibration; 2: the file resumed */
    int changed;         /* steps it keeps in bf16 that run fp32 on this CPU */
    char weights_sha256[65];
    char path[PATH_MAX]; /* the file it came from */
    char source[PATH_MAX + 64];
} calibration_origin;

/* Rank 0: the calibration of a file, when the job names one ([model]
 * calibration) or resumes a file that records one, put into the model
 * (run/calibration.h); origin->from_file stays 0 when neither: the gate
 * calibrates. A file the job resumes that records no calibration of this
 * model is let be here: the reopen says what it is (another job's, an
 * older tfenc's), and its check of the calibration's digest refuses a
 * file begun with another. */
static int take_calibration(run *r, calibration_origin *origin)
{
    const char *path = r->config.calibration_path;
    tfenc_int8_calibration given = {0};
    int status = TFENC_OK;
    if (path != NULL) {
        origin->from_file = 1;
        status = tfenc_int8_calibration_read(r->ctx, "[model] calibration", path, &given);
    } else if (r->settings.resume && !r->request->dry_run &&
               tfenc_file_present(r->settings.output)) {
        path = r->settings.output;
        if (tfenc_int8_calibration_read(r->ctx, "[job] output", path, &given) != TFENC_OK) {
            tfenc_context_clear(r->ctx);
            return TFENC_OK;
        }
        origin->from_file = 2;
    } else {
        return TFENC_OK;
    }
    /* A dry run does not hash the weights otherwise. */
    if (status == TFENC_OK && r->weights_sha256[0] == '\0')
        status = hash_weights(r);
    char weights_digest[65];
    if (status == TFENC_OK)
        calibration_weights_digest(r, weights_digest);
    if (status == TFENC_OK)
        status = tfenc_calibration_to_model(r->ctx, &given, path, weights_digest, &r->plan,
                                            r->weights, r->step_precision, &origin->changed);
    if (status != TFENC_OK && origin->from_file == 2) {
        tfenc_context_clear(r->ctx);
        origin->from_file = 0;
        status = TFENC_OK;
    } else if (status == TFENC_OK) {
        origin->min_cosine = given.min_cosine;
        origin->sample_cosine = given.sample_min_cosine;
        origin->sample_documents = given.sample_documents;
        char *located = tfenc_file_located_path(path);
        snprintf(origin->path, sizeof origin->path, "%s", located != NULL ? located : path);
        free(located);
        if (origin->from_file == 1)
            snprintf(origin->source, sizeof origin->source, "given: %s ([model] calibration)",
                     origin->path);
        else
            snprintf(origin->source, sizeof origin->source, "%s", given.source);
    }
    tfenc_int8_calibration_free(&given);
    return status;
}

/* Where the job leaves a way of computing to auto, rank 0 takes the
 * choices an earlier file records ([model] paths, or the file this run
 * resumes) or times the candidates on a sample of the corpus, and every
 * rank builds its model with them (run/path_choice.h). Before the gate,
 * whose models then run the job's paths. */
static int choose_paths(run *r)
{
    char *recorded = NULL, origin[600] = "";
    tfenc_gate_sample sample = {0};
    const char *from = r->config.paths_path;
    int status = TFENC_OK;
    if (r->rank == 0 && from != NULL) {
        status = tfenc_path_choices_read(r->ctx, "[model] paths", from, &recorded);
        snprintf(origin, sizeof origin, "[model] paths %s", from);
        if (status == TFENC_OK && recorded == NULL)
            status = tfenc_error(r->ctx, TFENC_ERR_CONFIG,
                                 "[model] paths %s: the file records no path choices (written "
                                 "by an older tfenc?)", from);
    } else if (r->rank == 0 && r->settings.resume && tfenc_file_present(r->settings.output)) {
        /* A file that cannot be read is the resume's to refuse, later. */
        if (tfenc_path_choices_read(r->ctx, "[job] output", r->settings.output, &recorded) ==
            TFENC_OK)
            snprintf(origin, sizeof origin, "the file this run resumes (%s)", r->settings.output);
        else
            tfenc_context_clear(r->ctx);
    }
    if (r->rank == 0 && status == TFENC_OK && origin[0] == '\0' && tfenc_path_measuring()) {
        const tfenc_gate_corpus source = {
            .corpus = r->corpus, .windows = &r->windows, .tokenizer = r->tokenizer,
            .feeding = &r->feeding, .max_seq_len = r->settings.max_seq_len,
            .batch_tokens = r->settings.batch_tokens, .d_model = r->config.d_model};
        status = tfenc_gate_sample_read_limited(
            r->ctx, &source, (size_t)tfenc_step_timing_tokens(0, r->settings.max_seq_len), 0,
            &sample);
    }
    tfenc_model_options o = model_options(r, 0, r->plan.n_steps);
    o.limits.max_tokens = o.limits.max_seqs = sample.batch_tokens > 0 ? sample.batch_tokens : 1;
    const tfenc_path_record record = {.assignments = recorded,
                                      .origin = origin[0] != '\0' ? origin : NULL};
    if (r->rank == 0 && status == TFENC_OK)
        status = tfenc_path_choices_decide(r->ctx, r->job, &r->plan, &o, &sample, &record,
                                           &r->paths);
    free(recorded);
    tfenc_gate_sample_free(&sample);
    if (agree_on_failure(r, status))
        return 1;
    int length = r->rank == 0 ? (int)strlen(r->paths.assignments) + 1 : 0;
    MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (r->rank != 0 && (r->paths.assignments = malloc((size_t)length)) == NULL)
        status = tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    if (agree_on_failure(r, status))
        return 1;
    MPI_Bcast(r->paths.assignments, length, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (r->rank != 0)
        status = tfenc_path_choices_apply(r->ctx, r->job, r->paths.assignments);
    if (agree_on_failure(r, status))
        return 1;
    /* The layers read their keys when built; the model's fp32 maps read
     * the config. */
    r->config.fp32_products = tfenc_model_fp32_products(r->job);
    /* Said when there was something to choose and measuring is on: with
     * TFENC_PATHS=default nothing was measured (--dry-run and --status
     * still show the choices). */
    if (r->paths.assignments[0] != '\0' && tfenc_path_measuring())
        notice(r, "%s", r->paths.line);
    return 0;
}

/* Rank 0: the accuracy gate (run/accuracy_gate.h) on a sample of the
 * corpus chooses each step's precision and calibrates the int8 maps. */
static int run_gate(run *r, tfenc_precision_report *report, calibration_origin *origin,
                    int *scores_width)
{
    const int n_steps = r->plan.n_steps;
    tfenc_gate_sample sample = {0};
    const tfenc_gate_corpus source = {
        .corpus = r->corpus, .windows = &r->windows, .tokenizer = r->tokenizer,
        .feeding = &r->feeding, .max_seq_len = r->settings.max_seq_len,
        .batch_tokens = r->settings.batch_tokens, .d_model = r->config.d_model};
    int status = tfenc_gate_sample_read(r->ctx, &source, &sample);
    if (status == TFENC_OK && sample.n_batches == 0)
        status = tfenc_error(r->ctx, TFENC_ERR_INPUT,
                             "%s: no document to check precision = %s on", r->settings.input,
                             tfenc_precision_names[r->config.precision]);
    tfenc_model_options o = model_options(r, 0, n_steps);
    o.limits.max_tokens = o.limits.max_seqs = sample.batch_tokens;
    if (status == TFENC_OK)
        status = declared_scores_width(r, scores_width);
    if (status == TFENC_OK)
        status = tfenc_precision_gate(r->ctx, &o, sample.batches, sample.n_batches,
                                      r->config.min_cosine, *scores_width, report);
    if (status != TFENC_OK && status != TFENC_ERR_CONFIG)
        status = tfenc_error_prefix(r->ctx, status, "precision = %s: the accuracy gate failed",
                                    tfenc_precision_names[r->config.precision]);
    origin->min_cosine = r->config.min_cosine;
    origin->sample_cosine = report->sample_cosine;
    origin->sample_documents = sample.n_documents;
    snprintf(origin->source, sizeof origin->source,
             "calibrated: the accuracy gate on a sample of %d documents of the job's corpus",
             sample.n_documents);
    tfenc_gate_sample_free(&sample);
    return status;
}

/* Every rank: rank 0's calibration table, then the job's calibration as
 * the output records it (r->calibration), from the table the maps are
 * made with. */
static int share_calibration(run *r, const calibration_origin *origin)
{
    void *table = NULL;
    size_t table_size = 0;
    int status = TFENC_OK;
    if (r->rank == 0)
        status = tfenc_weight_store_calibration_export(r->ctx, r->weights, &table, &table_size);
    unsigned long long table_bytes = table_size;
    MPI_Bcast(&table_bytes, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    if (r->rank != 0)
        table = malloc(table_bytes > 0 ? table_bytes : 1);
    if (table == NULL && status == TFENC_OK)
        status = tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    if (agree_on_failure(r, status)) {
        free(table);
        return 1;
    }
    MPI_Bcast(table, (int)table_bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (r->rank != 0)
        status = tfenc_weight_store_calibration_import(r->ctx, r->weights, table, table_bytes);
    free(table);
    /* From here on an int8 map without ranges is an error, not a map
     * without smoothing. */
    char fixed[PATH_MAX + 64];
    snprintf(fixed, sizeof fixed, "%s%s", origin->from_file ? "[model] calibration " : "",
             origin->from_file ? origin->path : "the accuracy gate's calibration");
    if (status == TFENC_OK)
        status = tfenc_weight_store_calibration_fix(r->ctx, r->weights, fixed);
    tfenc_int8_calibration *c = &r->calibration;
    if (status == TFENC_OK)
        status = tfenc_calibration_from_model(r->ctx, r->weights, &r->plan, r->step_precision, c);
    c->min_cosine = origin->min_cosine;
    c->sample_min_cosine = origin->sample_cosine;
    c->sample_documents = origin->sample_documents;
    memcpy(c->weights_sha256, origin->weights_sha256, sizeof c->weights_sha256);
    if (status == TFENC_OK && (c->source = strdup(origin->source)) == NULL)
        status = tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    if (status == TFENC_OK)
        status = tfenc_int8_calibration_digest(r->ctx, c);
    return agree_on_failure(r, status);
}

/* Rank 0: the line that says which model the job runs. */
static void tell_calibration(run *r, const calibration_origin *origin, int scores_width)
{
    const int n_steps = r->plan.n_steps;
    const char *precision = tfenc_precision_names[r->config.precision];
    char line[TFENC_MESSAGE_MAX];
    /* Scores are measured by their error to fp32's relative to their
     * spread (run/accuracy_gate.h), the angle whose cosine the gate
     * compares with min_cosine. */
    int used = origin->from_file
        ? snprintf(line, sizeof line, "precision = %s: the calibration of %s%s (min cosine %.6f "
                   "to fp32 on its sample of %lld documents), no accuracy gate run", precision,
                   origin->path, origin->from_file == 2 ? ", the file this run resumes" : "",
                   origin->sample_cosine, (long long)origin->sample_documents)
        : scores_width > 0
        ? snprintf(line, sizeof line, "precision = %s: scores off fp32's by at most %.3g%% "
                   "of their spread on a sample of %lld documents (min_cosine %.6f allows "
                   "%.3g%%)", precision,
                   100.0 * acos(fmax(fmin(origin->sample_cosine, 1.0), -1.0)),
                   (long long)origin->sample_documents, r->config.min_cosine,
                   100.0 * acos(1.0 - (1.0 - r->config.min_cosine) / 2.0))
        : snprintf(line, sizeof line,
                   "precision = %s: min cosine %.6f to fp32 on a sample of %lld documents "
                   "(min_cosine %.6f)", precision, origin->sample_cosine,
                   (long long)origin->sample_documents, r->config.min_cosine);
    int kept = 0;
    for (int i = 0; i < n_steps; i++)
        kept += r->step_precision[i] != r->config.precision;
    if (kept > 0 && used > 0 && (size_t)used < sizeof line)
        used += snprintf(line + used, sizeof line - used, "; kept in %s:",
                         tfenc_precision_names[tfenc_matrix_int8_fallback()]);
    for (int i = 0; i < n_steps && used > 0 && (size_t)used < sizeof line; i++)
        if (r->step_precision[i] != r->config.precision)
            used += snprintf(line + used, sizeof line - used, " %s", r->plan.steps[i].name);
    if (origin->changed > 0 && used > 0 && (size_t)used < sizeof line)
        snprintf(line + used, sizeof line - used, " (%d of them bf16 there: this CPU runs no "
                 "bf16, so the rows are not that file's bits)", origin->changed);
    notice(r, "%s", line);
}

/* int8 jobs: rank 0 takes the calibration of a file or runs the accuracy
 * gate on a sample of the corpus, every rank takes its choice of
 * precision per step and its input ranges, and a job whose min_cosine
 * cannot be met stops here. (bf16's accuracy is the tests' business:
 * 0.9999 on the test models and all-MiniLM-L6-v2.) */
static int gate_precision(run *r)
{
    if (r->config.precision != TFENC_PRECISION_INT8) {
        if (r->config.calibration_path != NULL)
            notice(r, "[model] calibration %s: not used: this CPU runs precision = %s, not int8",
                   r->config.calibration_path, tfenc_precision_names[r->config.precision]);
        return 0;
    }
    const int n_steps = r->plan.n_steps;
    r->step_precision = calloc((size_t)n_steps, sizeof *r->step_precision);
    if (r->step_precision == NULL)
        return agree_on_failure(r, tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory"));
    tfenc_precision_report report = {.step_precision = r->step_precision};
    calibration_origin origin = {0};
    int status = TFENC_OK, scores_width = 0;
    if (r->rank == 0)
        status = take_calibration(r, &origin);
    if (status == TFENC_OK && r->rank == 0 && !origin.from_file)
        status = run_gate(r, &report, &origin, &scores_width);
    if (r->rank == 0)
        calibration_weights_digest(r, origin.weights_sha256);
    if (agree_on_failure(r, status))
        return 1;
    MPI_Bcast(r->step_precision, n_steps, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Bcast(&origin, sizeof origin, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (share_calibration(r, &origin))
        return 1;
    r->sample_cosine = origin.sample_cosine;
    if (r->rank == 0)
        tell_calibration(r, &origin, scores_width);
    return 0;
}

/* ----------------------------------------------------- compact vectors */

/* int8 / uint8 output: ranges from up to CALIBRATION_DOCUMENTS documents
 * and CALIBRATION_TOKENS tokens (room for CALIBRATION_MIN_DOCUMENTS of
 * max_seq_len if more), the first of the middle window of each of 8 equal
 * parts of the corpus (the gate's rule: it depends on the job and the
 * corpus alone, never on the layout), encoded by rank 0 before the job as
 * the file will get them: the token bound keeps that to seconds (65,536
 * tokens of BERT-base are about 10^13 FLOP). Fewer than
 * CALIBRATION_MIN_DOCUMENTS make no ranges: sentence-transformers warns
 * below 100 too, and a handful of vectors leaves most values outside.
 * With long_documents = chunk a document is encoded whole, every chunk,
 * and its rows made as the writer makes them (each chunk, or their mean):
 * ranges from first chunks alone let a mean's values fall outside and wrap
 * around. The token bound then grows CALIBRATION_CHUNKS times. */
#define CALIBRATION_DOCUMENTS 512
#define CALIBRATION_TOKENS 65536
#define CALIBRATION_MIN_DOCUMENTS 100
#define CALIBRATION_CHUNKS 4

static int output_width(const run *r)
{
    return r->settings.output_dim > 0 ? (int)r->settings.output_dim : r->config.d_model;
}

/* The values of each row the file holds (its d_model): a head's width, or
 * the model's rows at output_dim. */
static int row_width(const run *r)
{
    return r->kind_width > 0 ? r->kind_width : output_width(r);
}

/* The rows the file holds have unit length: the model's rows have, and
 * the writer keeps them so (chunk means scaled back), or output_dim scales
 * each pooled row back after cutting it. Compact codes, scores and sparse
 * rows are not vectors of unit length. */
static int rows_unit_length(const run *r)
{
    if (!r->kind->unit_rows || tfenc_dtype_is_compact(r->settings.dtype))
        return 0;
    return r->model_unit_rows || (r->kind->output_dim && r->settings.output_dim > 0);
}

/* Chunk means the writer scales back to unit length (output_dim does it
 * for every row anyway). */
static int unit_chunk_means(const run *r)
{
    return r->settings.chunks == TFENC_CHUNKS_MEAN && r->model_unit_rows &&
           r->settings.output_dim == 0 && r->kind->chunks;
}

/* Rank 0: the sample through the whole model, its rows folded into r->ranges
 * as the job writes them. */
static int calibrate_ranges(run *r)
{
    const char *dtype = tfenc_output_dtype_name(r->settings.dtype);
    const int chunked = r->settings.chunks != TFENC_CHUNKS_OFF;
    const int means = r->settings.chunks == TFENC_CHUNKS_MEAN;
    tfenc_gate_sample sample = {0};
    const size_t least = (size_t)CALIBRATION_MIN_DOCUMENTS * (size_t)r->settings.max_seq_len;
    const size_t capacity = (least > CALIBRATION_TOKENS ? least : CALIBRATION_TOKENS) *
                            (chunked ? CALIBRATION_CHUNKS : 1);
    sample.indices = malloc(CALIBRATION_DOCUMENTS * sizeof *sample.indices);
    if (sample.indices == NULL)
        return tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    const tfenc_gate_corpus source = {
        .corpus = r->corpus, .windows = &r->windows, .tokenizer = r->tokenizer,
        .feeding = &r->feeding, .max_seq_len = r->settings.max_seq_len,
        .batch_tokens = r->settings.batch_tokens, .d_model = r->config.d_model,
        .chunked = chunked};
    int status = tfenc_gate_sample_read_limited(r->ctx, &source, capacity, CALIBRATION_DOCUMENTS,
                                                &sample);
    tfenc_model *model = NULL;
    tfenc_model_options o = model_options(r, 0, r->plan.n_steps);
    o.limits.max_tokens = o.limits.max_seqs = sample.batch_tokens;
    if (status == TFENC_OK)
        status = tfenc_model_create(r->ctx, &o, &model);
    /* Chunk means are scaled back to unit length when the model's rows
     * have it (the writer's rule): the probe says. */
    int pools = 0, unit_rows = 0;
    if (status == TFENC_OK && means)
        status = tfenc_model_probe_pools(r->ctx, model, &pools, &unit_rows);
    const int d = r->config.d_model, width = output_width(r);
    float *x = NULL, *sums = NULL;
    int *chunks = NULL;
    if (status == TFENC_OK &&
        (x = tfenc_aligned_alloc((size_t)sample.batch_tokens * (size_t)d * sizeof *x)) == NULL)
        status = tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    if (status == TFENC_OK && means &&
        ((sums = calloc((size_t)sample.n_documents * (size_t)d, sizeof *sums)) == NULL ||
         (chunks = calloc((size_t)sample.n_documents, sizeof *chunks)) == NULL))
        status = tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    for (int b = 0, sequence = 0; status == TFENC_OK && b < sample.n_batches; b++) {
        tfenc_batch batch = sample.batches[b];
        batch.x = x;
        status = tfenc_model_forward(r->ctx, model, &batch);
        if (status == TFENC_OK && batch.rows != batch.n_seq)
            status = tfenc_error(r->ctx, TFENC_ERR_CONFIG,
                                 "%s: [job] output_dtype = %s applies to pooled vectors, but "
                                 "the model does not pool its output", r->job->path, dtype);
        /* Chunk means: each document's chunks summed, its row made below. */
        for (int j = 0; status == TFENC_OK && means && j < batch.rows; j++, sequence++) {
            const int document = sample.sequence_documents[sequence];
            float *sum = sums + (size_t)document * (size_t)d;
            for (int c = 0; c < d; c++)
                sum[c] += x[(size_t)j * (size_t)d + (size_t)c];
            chunks[document]++;
        }
        if (status == TFENC_OK && !means && width != d)
            tfenc_writer_truncate_rows(x, batch.rows, d, width);
        if (status == TFENC_OK && !means)
            tfenc_quantize_ranges_update(r->ranges, width, x, batch.rows, b == 0);
    }
    for (int i = 0; status == TFENC_OK && means && i < sample.n_documents; i++) {
        float *row = sums + (size_t)i * (size_t)d;
        tfenc_writer_chunk_mean(row, chunks[i], d, (int)r->settings.output_dim, unit_rows);
        tfenc_quantize_ranges_update(r->ranges, width, row, 1, i == 0);
    }
    /* After the model: a model that does not pool is the first thing to say. */
    if (status == TFENC_OK && sample.n_documents < CALIBRATION_MIN_DOCUMENTS)
        status = tfenc_error(r->ctx, TFENC_ERR_CONFIG,
                             "%s: [job] output_dtype = %s needs ranges: the corpus gives a "
                             "calibration sample of %d documents (at least %d%s); give them in "
                             "[job] output_ranges (.npy or .h5, [2, %d])",
                             r->job->path, dtype, sample.n_documents, CALIBRATION_MIN_DOCUMENTS,
                             chunked ? ", each encoded whole, every chunk, within "
                                       "the sample's tokens"
                                     : "",
                             output_width(r));
    if (status == TFENC_OK) {
        snprintf(r->ranges_source, sizeof r->ranges_source,
                 "calibrated: the minimum and maximum of each dimension over %d documents of "
                 "the corpus (dataset quantization_sample)", sample.n_documents);
        r->sample_indices = sample.indices;
        r->n_sample = sample.n_documents;
        sample.indices = NULL;
    }
    tfenc_aligned_free(x);
    free(sums);
    free(chunks);
    tfenc_model_destroy(model);
    free(sample.indices);
    tfenc_gate_sample_free(&sample);
    return status;
}

/* int8 / uint8 output: rank 0 reads the job's ranges or calibrates them,
 * every rank gets them. Before the weights are shared: the calibration's
 * model would otherwise leave its conversions in the node's arena. */
static int quantization_ranges(run *r)
{
    if (!tfenc_dtype_needs_ranges(r->settings.dtype) || r->request->dry_run)
        return 0;
    const int width = output_width(r);
    r->ranges = calloc(2 * (size_t)width, sizeof *r->ranges);
    if (r->ranges == NULL)
        return agree_on_failure(r, tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory"));
    int status = TFENC_OK;
    if (r->rank == 0 && r->settings.output_ranges != NULL) {
        char where[512];
        snprintf(where, sizeof where, "%s: [job] output_ranges", r->job->path);
        status = r->settings.output_ranges_inline
                     ? tfenc_quantize_ranges_parse(r->ctx, where, r->settings.output_ranges,
                                                   width, r->ranges)
                     : tfenc_quantize_ranges_read(r->ctx, where, r->settings.output_ranges,
                                                  width, r->ranges);
        snprintf(r->ranges_source, sizeof r->ranges_source, "given: %s",
                 r->settings.output_ranges_inline ? "[job] output_ranges"
                                                  : r->settings.output_ranges);
    } else if (r->rank == 0) {
        status = calibrate_ranges(r);
    }
    if (agree_on_failure(r, status))
        return 1;
    MPI_Bcast(r->ranges, 2 * width, MPI_FLOAT, 0, MPI_COMM_WORLD);
    MPI_Bcast(r->ranges_source, sizeof r->ranges_source, MPI_CHAR, 0, MPI_COMM_WORLD);
    /* Every writer announces the same datasets: the sample's indices too. */
    MPI_Bcast(&r->n_sample, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (r->rank != 0 && r->n_sample > 0 &&
        (r->sample_indices = malloc((size_t)r->n_sample * sizeof *r->sample_indices)) == NULL)
        status = tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    if (agree_on_failure(r, status))
        return 1;
    if (r->n_sample > 0)
        MPI_Bcast(r->sample_indices, r->n_sample, MPI_INT64_T, 0, MPI_COMM_WORLD);
    return 0;
}

/* The first stages tokenize: the job's tokenizer. */
static int open_tokenizer(run *r)
{
    if (!tfenc_layout_is_first_stage(&r->layout))
        return TFENC_OK;
    return tfenc_job_settings_tokenizer(r->ctx, r->job, &r->config, &r->settings,
                                        &r->tokenizer);
}

/* A multi-vector job's marker, [MASK] and skiplist, found by rank 0 (a
 * first stage) in its tokenizer: the first stages count and feed with
 * them, the last ones write by the skiplist. */
static int find_multivector_tokens(run *r)
{
    int status = TFENC_OK;
    if (r->rank == 0)
        status = tfenc_multivector_tokens_find(r->ctx, &r->settings, r->tokenizer,
                                               &r->multivector);
    if (agree_on_failure(r, status))
        return 1;
    return agree_on_failure(r, tfenc_multivector_tokens_share(r->ctx, MPI_COMM_WORLD,
                                                              &r->multivector));
}

/* The first stage reads the corpus (opened on a small share; each window
 * selects its own documents). */
static int open_input(run *r)
{
    r->feeding = (tfenc_feeder_options){.input = r->settings.input,
                                        .max_seq_len = (int)r->settings.max_seq_len,
                                        .batch_tokens = (int)r->settings.batch_tokens,
                                        /* A chunked document is cut into chunks,
                                         * never refused for its length. */
                                        .truncation = r->settings.truncation ||
                                                      r->settings.chunks != TFENC_CHUNKS_OFF,
                                        .empty_documents = r->settings.empty_zeros,
                                        .document_order = r->settings.document_order,
                                        .vocab_size = r->config.vocab_size,
                                        .has_ids = r->settings.corpus.id_field != NULL ||
                                                   r->settings.corpus.n_keep_fields > 0,
                                        .carries_kept = r->settings.corpus.n_keep_fields > 0,
                                        .prompt = r->settings.prompt,
                                        .chunks = r->settings.chunks,
                                        .chunk_overlap = (int)r->settings.chunk_overlap,
                                        .marker_id = r->multivector.marker_id,
                                        .pad_id = r->multivector.pad_id,
                                        .pad_attended = r->settings.attend_to_mask_tokens,
                                        .skiplist = r->multivector.skip_flags != NULL
                                                        ? &r->multivector.skiplist
                                                        : NULL};
    if (!tfenc_layout_is_first_stage(&r->layout))
        return TFENC_OK;
    int status = tfenc_corpus_open(r->ctx, &r->settings.corpus, r->layout.replica,
                                   r->layout.data_parallel, &r->corpus);
    if (status == TFENC_OK)
        status = tfenc_feeder_create(r->ctx, &r->feeding, r->tokenizer, r->corpus, &r->feeder);
    return status;
}

/* The kind the job writes, asked of the kinds' table, and what it keeps of
 * the model's declared output (a head's width, its labels). */
static int decide_output_kind(run *r, int pools, const tfenc_layer_output *declared)
{
    const tfenc_output_kind_request request = kind_request(r, declared, pools);
    const tfenc_output_kind_entry *kind = NULL;
    tfenc_output_kind_refusal refusal;
    if (tfenc_output_kind_decide(&request, &kind, &refusal) != TFENC_OK)
        return raise_refusal(r, &refusal);
    r->kind = kind;
    r->kind_width = kind->head_width ? declared->width : 0;
    free(r->labels);
    r->labels = NULL;
    if (kind->has_labels && declared->labels != NULL &&
        (r->labels = strdup(declared->labels)) == NULL)
        return tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    return TFENC_OK;
}

/* Pipelines: what the model writes, from the plan's last step built alone
 * on rank 0 (a head or a pooling layer: small) and sent to every rank. */
static int survey_output(run *r, tfenc_layer_output *declared, char **labels_out)
{
    *labels_out = NULL;
    *declared = (tfenc_layer_output){.struct_size = sizeof *declared};
    int status = TFENC_OK;
    long sizes[3] = {0, 0, 0}; /* kind, width, labels bytes (with NUL) */
    tfenc_model *last = NULL;
    if (r->rank == 0) {
        tfenc_model_options o = model_options(r, r->plan.n_steps - 1, r->plan.n_steps);
        status = tfenc_model_create(r->ctx, &o, &last);
        if (status == TFENC_OK)
            status = tfenc_model_output(r->ctx, last, declared);
        if (status == TFENC_OK) {
            sizes[0] = declared->kind;
            sizes[1] = declared->width;
            sizes[2] = declared->labels != NULL ? (long)strlen(declared->labels) + 1 : 0;
        }
    }
    if (agree_on_failure(r, status)) {
        tfenc_model_destroy(last);
        return 1;
    }
    MPI_Bcast(sizes, 3, MPI_LONG, 0, MPI_COMM_WORLD);
    char *labels = sizes[2] > 0 ? malloc((size_t)sizes[2]) : NULL;
    if (r->rank == 0 && labels != NULL)
        memcpy(labels, declared->labels, (size_t)sizes[2]);
    tfenc_model_destroy(last);
    int have = sizes[2] == 0 || labels != NULL;
    MPI_Allreduce(MPI_IN_PLACE, &have, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!have) {
        free(labels);
        return agree_on_failure(r, tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory"));
    }
    if (labels != NULL)
        MPI_Bcast(labels, (int)sizes[2], MPI_CHAR, 0, MPI_COMM_WORLD);
    declared->kind = (tfenc_layer_output_kind)sizes[0];
    declared->width = (int)sizes[1];
    declared->labels = labels; /* the model's own copy went with it */
    *labels_out = labels;
    return 0;
}

/* Pass 0: every rank reads and checks one share of the corpus, and the
 * shares together cut it into windows (windows.h). */
static int cut_windows(run *r)
{
    tfenc_windows_share share;
    int status = tfenc_windows_scan(r->ctx, MPI_COMM_WORLD, &r->settings.corpus,
                                    r->settings.window_documents, &share);
    if (agree_on_failure(r, status)) {
        tfenc_windows_share_free(&share);
        return 1;
    }
    if (agree_on_failure(r, tfenc_windows_build(r->ctx, MPI_COMM_WORLD, &share,
                                                r->settings.window_documents, &r->windows)))
        return 1;
    tfenc_kept_type types[TFENC_MAX_KEEP_FIELDS];
    size_t longest[TFENC_MAX_KEEP_FIELDS];
    if (agree_on_failure(r, tfenc_windows_kept_types(r->ctx, &r->windows, &r->settings.corpus,
                                                     types, longest)))
        return 1;
    for (int k = 0; k < r->settings.corpus.n_keep_fields; k++)
        r->kept_fields[k] = (tfenc_kept_field){.name = r->settings.corpus.keep_fields[k],
                                               .type = types[k], .longest = longest[k]};
    r->n_documents = r->windows.n_documents;
    return 0;
}

/* A window's output rows: its chunks for an output of every chunk, else
 * its tokens; the tokens and sequences it encodes are summed either way
 * (for the plan and the steps' costs). */
static int count_one_window(tfenc_context *ctx, void *user, int64_t window, int64_t *rows)
{
    run *r = user;
    tfenc_corpus_range range;
    tfenc_windows_range(&r->windows, window, &range);
    int64_t tokens = 0, sequences = 0, kept = 0;
    int status = tfenc_feeder_count_window(ctx, r->feeder, &range, &tokens, &sequences, &kept);
    *rows = r->settings.chunks == TFENC_CHUNKS_EACH ? sequences : kept;
    r->n_tokens += tokens;
    r->n_sequences += sequences;
    return status;
}

/* Pass 1, where the output places rows by token or by chunk (or a plan
 * needs the corpus's size in tokens): the first stages tokenize the
 * windows, one replica each in turn, and every rank learns each window's
 * first row. */
static int count_rows(run *r)
{
    const tfenc_layout *l = &r->layout;
    int counter = tfenc_layout_is_first_stage(l) ? l->replica : -1;
    r->n_tokens = r->n_sequences = 0;
    int status = tfenc_windows_count_local(r->ctx, &r->windows, counter, l->data_parallel,
                                           count_one_window, r);
    if (agree_on_failure(r, status) ||
        agree_on_failure(r, tfenc_windows_sum_rows(r->ctx, MPI_COMM_WORLD, &r->windows)))
        return 1;
    int64_t sums[2] = {r->n_tokens, r->n_sequences};
    MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    r->n_tokens = sums[0];
    r->n_sequences = sums[1];
    r->n_rows = r->windows.first_row[r->windows.n_windows];
    return 0;
}

/* Step costs for the split into stages, and whether the model pools: from
 * the whole model with one stage, else from rank 0's step-by-step survey
 * (no rank ever loads more than its stage's weights for good). */
static int cost_steps(run *r)
{
    r->step_flops = calloc((size_t)r->plan.n_steps, sizeof *r->step_flops);
    if (r->step_flops == NULL)
        return agree_on_failure(r, tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory"));
    /* A step's cost per token grows with the length of the sequences it
     * sees: chunks of long documents, not whole documents, once counted. */
    const int64_t sequences = r->n_sequences > 0 ? r->n_sequences : r->n_documents;
    double mean_length = sequences > 0 ? (double)r->n_tokens / (double)sequences : 1.0;
    if (r->layout.pipeline_stages == 1) {
        int status = TFENC_OK;
        for (int i = 0; status == TFENC_OK && i < r->plan.n_steps; i++)
            status = tfenc_model_step_flops(r->ctx, r->model, i, mean_length,
                                            &r->step_flops[i]);
        return agree_on_failure(r, status);
    }
    int probed[2] = {0, 0}, status = TFENC_OK; /* pools, unit rows */
    if (r->rank == 0) {
        tfenc_model_options o = model_options(r, 0, r->plan.n_steps);
        status = tfenc_model_survey(r->ctx, &o, mean_length, r->step_flops, &probed[0],
                                    &probed[1]);
    }
    if (agree_on_failure(r, status))
        return 1;
    MPI_Bcast(r->step_flops, r->plan.n_steps, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Bcast(probed, 2, MPI_INT, 0, MPI_COMM_WORLD);
    const int pools = probed[0];
    r->model_unit_rows = probed[1];
    tfenc_layer_output declared;
    char *labels = NULL;
    if (survey_output(r, &declared, &labels))
        return 1;
    status = decide_output_kind(r, pools, &declared);
    free(labels);
    return agree_on_failure(r, status);
}

/* The ranks of a node keep one copy of the weights (core/ranks/node_arena.h),
 * made after the int8 gate, whose trial models would otherwise leave
 * their conversions in it. The arena is sized for the whole model as
 * float32, the largest form a map takes; its pages are backed only where
 * written. A node that cannot make it keeps a copy per rank, as before. */
static void share_weights(run *r)
{
    /* Every rank reads the same job: all skip the collective below. */
    if (!r->settings.share_weights)
        return;
    size_t capacity = tfenc_weight_store_float32_bytes(r->weights);
    capacity += capacity / 4 + ((size_t)16 << 20);
    int status = tfenc_node_arena_create(r->ctx, MPI_COMM_WORLD, capacity, &r->arena);
    if (status != TFENC_OK) {
        notice(r, "weights %s are not shared by the ranks of a node (%s): each rank keeps its "
                  "own copy", r->config.weights_path, tfenc_context_message(r->ctx));
        tfenc_context_clear(r->ctx);
        r->arena = NULL;
        return;
    }
    if (tfenc_node_arena_ranks(r->arena) > 1)
        tfenc_weight_store_share(r->weights, r->arena);
}

/* MiB of weights this rank's node holds once for its ranks. */
static double shared_mib(const run *r)
{
    return r->arena != NULL && tfenc_node_arena_ranks(r->arena) > 1
               ? (double)tfenc_node_arena_used(r->arena) / (1024.0 * 1024.0)
               : 0.0;
}

/* The corpus for the plan: its format as the formats' table describes it,
 * and its files' paths, documents and compressions (the returned array,
 * which the caller frees). */
static const char **describe_sources(const run *r, tfenc_run_plan *plan)
{
    plan->input_format = tfenc_corpus_format_name(r->settings.corpus.format);
    tfenc_corpus_format_describe(&r->settings.corpus, plan->input_description,
                                 sizeof plan->input_description);
    plan->n_sources = r->settings.sources.n;
    plan->source_paths = (const char *const *)r->settings.sources.paths;
    plan->source_documents = r->windows.source_documents;
    plan->source_skipped = r->windows.source_skipped;
    if (r->corpus == NULL || tfenc_corpus_n_sources(r->corpus) != plan->n_sources)
        return NULL;
    const char **compressions = calloc((size_t)plan->n_sources, sizeof *compressions);
    for (int i = 0; compressions != NULL && i < plan->n_sources; i++)
        compressions[i] = tfenc_stream_compression_name(
            tfenc_corpus_source_compression(r->corpus, i));
    plan->source_compressions = compressions;
    return compressions;
}

/* --dry-run: rank 0 times each step on a sample of the corpus, spread
 * over it by the accuracy gate's rule (run/step_timing.h), at the job's
 * precisions (int8: the gate's choice) and threads. A corpus without a
 * document to time leaves the plan without the measurement. */
static int time_steps(run *r)
{
    if (r->rank != 0)
        return TFENC_OK;
    const int n_steps = r->plan.n_steps;
    double flops = 0;
    for (int i = 0; i < n_steps; i++)
        flops += r->step_flops[i];
    const long tokens = tfenc_step_timing_tokens(flops, r->settings.max_seq_len);
    /* A long document's first max_seq_len tokens stand for its chunks,
     * which are as long: whole documents of chunks would not fit the
     * timing's few thousand tokens. */
    const tfenc_gate_corpus source = {
        .corpus = r->corpus, .windows = &r->windows, .tokenizer = r->tokenizer,
        .feeding = &r->feeding, .max_seq_len = r->settings.max_seq_len,
        .batch_tokens = r->settings.batch_tokens, .d_model = r->config.d_model};
    tfenc_gate_sample sample = {0};
    int status = tfenc_gate_sample_read_limited(r->ctx, &source, (size_t)tokens, 0, &sample);
    if (status == TFENC_OK && sample.n_batches > 0) {
        r->step_seconds = calloc((size_t)n_steps, sizeof *r->step_seconds);
        r->step_notes = calloc((size_t)n_steps, TFENC_STEP_NOTE_BYTES);
        if (r->step_seconds == NULL || r->step_notes == NULL)
            status = tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        tfenc_model_options o = model_options(r, 0, n_steps);
        o.limits.max_tokens = o.limits.max_seqs = sample.batch_tokens;
        if (status == TFENC_OK)
            status = tfenc_step_timing_measure_noting(r->ctx, &o, &sample, r->step_seconds,
                                                      r->step_notes);
        r->timed_tokens = sample.n_tokens;
        if (status != TFENC_OK) {
            free(r->step_seconds);
            r->step_seconds = NULL;
            free(r->step_notes);
            r->step_notes = NULL;
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
static void find_busiest_node(run *r)
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
    memcpy(r->busiest_node, figures, sizeof figures);
}

static void describe_plan(run *r)
{
    const tfenc_run_observer *o = &r->request->observer;
    if (r->rank != 0 || o->plan == NULL)
        return;
    char kernels[256];
    tfenc_matrix_describe_kernels(r->config.fp32_products, kernels, sizeof kernels);
    tfenc_run_plan plan = {.job_path = r->job->path, .layout = &r->layout, .model = &r->plan,
                           .kernels = kernels, .paths = r->paths.line,
                           .step_flops = r->step_flops, .step_seconds = r->step_seconds,
                           .step_notes = r->step_notes,
                           .timed_tokens = r->timed_tokens, .d_model = r->config.d_model,
                           .weights_path = r->config.weights_path,
                           .input_path = r->settings.input, .output_path = r->settings.output,
                           .text_pair_field = r->settings.corpus.text_pair_field,
                           .text_field = r->settings.corpus.text_pair_field != NULL
                                             ? r->settings.corpus.text_field
                                             : NULL,
                           .kind = r->kind, .width = row_width(r),
                           .unit_norm = rows_unit_length(r),
                           .labels = r->labels, .dtype = r->settings.dtype,
                           .sparse_top_k = r->settings.sparse_top_k,
                           .sparse_threshold = r->settings.sparse_threshold,
                           .n_rows = r->n_rows,
                           .n_documents = r->n_documents, .n_tokens = r->n_tokens,
                           .n_sequences = r->n_sequences,
                           .chunked = r->settings.chunks != TFENC_CHUNKS_OFF,
                           .last_flop_rate = tfenc_run_last_flop_rate(),
                           .weights_float32_mib =
                               (double)tfenc_weight_store_float32_bytes(r->weights) / (1024.0 * 1024.0),
                           .node_ranks = r->arena != NULL ? tfenc_node_arena_ranks(r->arena) : 1,
                           .shared_weights_mib = r->model != NULL ? shared_mib(r) : 0.0,
                           .rank_memory_mib = r->model != NULL ? tfenc_proportional_mib() : 0.0,
                           .weights_per_rank = r->arena == NULL,
                           .busiest_node_ranks = r->busiest_node[0],
                           .busiest_node_threads = r->busiest_node[1],
                           .busiest_node_cores = r->busiest_node[2]};
    const char **compressions = describe_sources(r, &plan);
    o->plan(o->user, &plan);
    free(compressions);
}

/* --------------------------------------------------------------- output */

static int read_window_progress(tfenc_context *ctx, void *user, int64_t first_document,
                                int64_t n_documents, uint8_t *done)
{
    run *r = user;
    int status = tfenc_output_written(ctx, r->output, first_document, n_documents, done);
    /* A sparse document counts as finished only with its row in a log
     * (a damaged or removed log's documents are encoded again). */
    for (int64_t j = 0; status == TFENC_OK && r->sparse_logged != NULL && j < n_documents; j++)
        if (done[j] && !tfenc_sparse_has_row(r->sparse_logged, first_document + j))
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
static int cut_runs(run *r)
{
    r->runs = malloc(((size_t)r->n_todo + 1) * sizeof *r->runs);
    if (r->runs == NULL)
        return tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    r->n_runs = 0;
    for (int64_t i = 0; i < r->n_todo; i++) {
        int source = tfenc_windows_whole_source(&r->windows, r->todo[i]);
        int joins = i > 0 && source >= 0 && r->todo[i - 1] == r->todo[i] - 1
                    && tfenc_windows_whole_source(&r->windows, r->todo[i - 1]) == source;
        if (!joins)
            r->runs[r->n_runs++] = i;
    }
    r->runs[r->n_runs] = r->n_todo;
    return TFENC_OK;
}

/* What an earlier run finished, window by window, known to every rank
 * (the writers read it from the file), and the windows left to do. */
static int learn_progress(run *r, int resumed, int was_complete)
{
    MPI_Allreduce(MPI_IN_PLACE, &resumed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (resumed) {
        const tfenc_layout *l = &r->layout;
        int reader = tfenc_layout_is_last_stage(l) ? l->replica : -1;
        int status = tfenc_windows_progress_local(r->ctx, &r->windows, reader, l->data_parallel,
                                                  read_window_progress, r);
        if (agree_on_failure(r, status) ||
            agree_on_failure(r, tfenc_windows_combine_progress(r->ctx, MPI_COMM_WORLD,
                                                                &r->windows)))
            return 1;
    }
    r->todo = malloc(((size_t)r->windows.n_windows + 1) * sizeof *r->todo);
    if (agree_on_failure(r, r->todo == NULL ? tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY,
                                                          "out of memory")
                                            : TFENC_OK))
        return 1;
    for (int64_t k = 0; k < r->windows.n_windows; k++) {
        if (r->windows.state[k] == TFENC_WINDOW_DONE)
            continue;
        tfenc_corpus_range range;
        tfenc_windows_range(&r->windows, k, &range);
        r->todo[r->n_todo++] = k;
        r->todo_documents += range.n_documents;
    }
    r->already_done = tfenc_windows_documents_finished(&r->windows);
    if (resumed)
        notice(r, "resuming %s: %lld of %lld documents were finished by an earlier run%s",
               r->settings.output, (long long)r->already_done, (long long)r->n_documents,
               was_complete ? " (it had completed)" : "");
    if (agree_on_failure(r, cut_runs(r)))
        return 1;
    int status = agree_on_failure(
        r, tfenc_work_queue_create(r->ctx, MPI_COMM_WORLD, r->n_runs, r->layout.replica,
                                   r->layout.data_parallel, &r->queue));
    const char *reason = NULL;
    if (status == TFENC_OK && tfenc_work_queue_dealt_out(r->queue, &reason))
        notice(r, "the MPI library cannot make a one-sided window across these ranks (%s): "
               "windows are dealt out to the %d replicas in turn instead of to whichever is "
               "free; the output is the same (with Open MPI over TCP, OMPI_MCA_osc=sm,pt2pt "
               "restores the balancing)",
               reason, r->layout.data_parallel);
    return status;
}

/* The inputs a job names, for the aliasing check: a growing list. */
typedef struct input_list {
    tfenc_input_file *files;
    char **owned; /* the strings the list holds */
    int n, capacity;
} input_list;

static int add_input(void *user, const char *what, const char *setting, const char *path)
{
    input_list *list = user;
    if (list->n == list->capacity) {
        int capacity = list->capacity > 0 ? 2 * list->capacity : 16;
        tfenc_input_file *files = realloc(list->files, (size_t)capacity * sizeof *files);
        if (files != NULL)
            list->files = files;
        char **owned = realloc(list->owned, 2 * (size_t)capacity * sizeof *owned);
        if (owned != NULL)
            list->owned = owned;
        if (files == NULL || owned == NULL)
            return TFENC_ERR_NO_MEMORY;
        list->capacity = capacity;
    }
    size_t size = strlen(what) + strlen(setting) + 4;
    char *description = malloc(size), *copy = strdup(path);
    if (description == NULL || copy == NULL) {
        free(description);
        free(copy);
        return TFENC_ERR_NO_MEMORY;
    }
    snprintf(description, size, setting[0] != '\0' ? "%s (%s)" : "%s", what, setting);
    list->owned[2 * list->n] = description;
    list->owned[2 * list->n + 1] = copy;
    list->files[list->n++] = (tfenc_input_file){description, copy};
    return TFENC_OK;
}

static void free_inputs(input_list *list)
{
    for (int i = 0; i < 2 * list->n; i++)
        free(list->owned[i]);
    free(list->owned);
    free(list->files);
}

/* Every file the job reads: the job file, every path key read as an input
 * (core/job/params.h: whatever key a new reader adds is in it) and the
 * plugin files loaded. */
static int list_inputs(run *r, input_list *list)
{
    int status = add_input(list, "the job file", "", r->job->path);
    if (status == TFENC_OK)
        status = tfenc_jobfile_each_input(r->job, add_input, list);
    /* The corpus's files ([job] input: a file, a directory, a glob, or a
     * list file, which is an input too). */
    const tfenc_sources *sources = &r->settings.sources;
    const int one_file = sources->n == 1 && strcmp(sources->paths[0], r->settings.input) == 0;
    for (int i = 0; status == TFENC_OK && i < sources->n; i++)
        status = add_input(list, one_file ? "the corpus" : "a corpus shard", "[job] input",
                           sources->paths[i]);
    struct stat input;
    if (status == TFENC_OK && stat(r->settings.input, &input) == 0 && S_ISREG(input.st_mode) &&
        (sources->n != 1 || strcmp(sources->paths[0], r->settings.input) != 0))
        status = add_input(list, "the list of the corpus's files", "[job] input",
                           r->settings.input);
    for (int i = 0; status == TFENC_OK && i < tfenc_plugin_registry_n_layers(r->registry); i++)
        status = add_input(list, "the plugin",
                           tfenc_plugin_registry_layer(r->registry, i)->descriptor->type,
                           tfenc_plugin_registry_layer(r->registry, i)->file);
    return status == TFENC_ERR_NO_MEMORY
               ? tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory")
               : status;
}

/* Whether the output traces each row to its file and line (output.h:
 * document_source): when a row's index alone does not tell, with several
 * files, or with records left out. A token-id corpus is one file. */
static int needs_document_source(const run *r)
{
    return !tfenc_corpus_format_token_ids(r->settings.corpus.format)
           && (r->settings.sources.n > 1 || r->settings.corpus.null_text == TFENC_NULL_TEXT_SKIP);
}

/* The corpus's fingerprint over all its files, and the table of them the
 * output keeps (output/corpus_shards.h) with their located paths, from the
 * counting pass's documents per file. Collective; free the table with
 * tfenc_corpus_shards_free. */
static int fingerprint_corpus(run *r, char hex[65], tfenc_corpus_shards *table)
{
    memset(table, 0, sizeof *table);
    const tfenc_sources *sources = &r->settings.sources;
    char (*each)[65] = calloc((size_t)sources->n, sizeof *each);
    if (each == NULL)
        return tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory for %d fingerprints",
                           sources->n);
    int status = tfenc_fingerprint_sources(r->ctx, MPI_COMM_WORLD,
                                           (const char *const *)sources->paths, sources->n, hex,
                                           each);
    table->shards = status == TFENC_OK ? calloc((size_t)sources->n, sizeof *table->shards) : NULL;
    if (status == TFENC_OK && table->shards == NULL)
        status = tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory for the shard list");
    int64_t first = 0;
    for (int i = 0; status == TFENC_OK && i < sources->n; i++) {
        tfenc_corpus_shard *shard = &table->shards[i];
        if ((shard->path = strdup(sources->located[i])) == NULL) {
            status = tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory for the shard list");
            break;
        }
        table->n++;
        struct stat info;
        shard->bytes = stat(sources->paths[i], &info) == 0 ? (int64_t)info.st_size : -1;
        memcpy(shard->fingerprint, each[i], sizeof shard->fingerprint);
        shard->first_document = first;
        shard->documents = r->windows.source_documents != NULL && i < r->windows.n_sources
                               ? r->windows.source_documents[i] : -1;
        shard->skipped = r->windows.source_skipped != NULL && i < r->windows.n_sources
                             ? r->windows.source_skipped[i] : 0;
        first += shard->documents > 0 ? shard->documents : 0;
    }
    free(each);
    if (status != TFENC_OK)
        tfenc_corpus_shards_free(table);
    return status;
}

/* Before the output is touched: it must not be one of the job's inputs
 * under another name, and this job must own it (rank 0 takes the lock and
 * holds it to the end). */
static int claim_output(run *r)
{
    int status = TFENC_OK;
    if (r->rank == 0) {
        input_list inputs = {0};
        status = list_inputs(r, &inputs);
        if (status == TFENC_OK)
            status = tfenc_output_check_not_input(r->ctx, r->settings.output, inputs.files,
                                                  inputs.n);
        free_inputs(&inputs);
        if (status == TFENC_OK)
            status = tfenc_output_lock_take(r->ctx, r->settings.output, &r->lock);
    }
    return agree_on_failure(r, status);
}

/* The plugin files the job loaded, each once, with the SHA-256 of the
 * bytes loaded: part of the job's identity (output.h). Every rank must
 * have loaded the same code (one node with another build would make other
 * vectors, and the writers must store one value): refused otherwise,
 * naming a file of the rank that differs. */
typedef struct plugin_files {
    const char **paths, **sha256;
    int n;
} plugin_files;

static int list_plugin_files(run *r, plugin_files *files)
{
    const int n_layers = tfenc_plugin_registry_n_layers(r->registry);
    files->paths = calloc((size_t)n_layers + 1, sizeof *files->paths);
    files->sha256 = calloc((size_t)n_layers + 1, sizeof *files->sha256);
    int status = files->paths == NULL || files->sha256 == NULL
                     ? tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory")
                     : TFENC_OK;
    /* Names and digests of every file, in load order, for the comparison. */
    tfenc_sha256 all = {NULL};
    if (status == TFENC_OK && tfenc_sha256_init(&all) != TFENC_OK)
        status = tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    for (int i = 0; status == TFENC_OK && i < n_layers; i++) {
        const tfenc_plugin_layer *layer = tfenc_plugin_registry_layer(r->registry, i);
        int seen = layer->file == NULL;
        for (int j = 0; !seen && j < files->n; j++)
            seen = strcmp(files->paths[j], layer->file) == 0;
        if (seen)
            continue;
        files->paths[files->n] = layer->file;
        files->sha256[files->n++] = layer->sha256;
        const char *name = strrchr(layer->file, '/');
        name = name != NULL ? name + 1 : layer->file;
        tfenc_sha256_update(&all, name, strlen(name) + 1);
        if (layer->sha256 != NULL)
            tfenc_sha256_update(&all, layer->sha256, strlen(layer->sha256));
    }
    unsigned char mine[32] = {0}, first[32];
    if (all.state != NULL)
        tfenc_sha256_final(&all, mine);
    memcpy(first, mine, sizeof first);
    MPI_Bcast(first, sizeof first, MPI_UNSIGNED_CHAR, 0, MPI_COMM_WORLD);
    if (status == TFENC_OK && memcmp(first, mine, sizeof mine) != 0)
        status = tfenc_error(r->ctx, TFENC_ERR_PLUGIN,
                             "the plugin files here (%s, ...) are not those rank 0 loaded "
                             "(another build or another set): every rank must run the same "
                             "plugin code", files->n > 0 ? files->paths[0] : "none");
    return agree_on_failure(r, status);
}

/* The last stages open the file: reopened to resume when a previous run of
 * the same job left it, else created. */
static int open_sparse_rows(run *r, MPI_Comm writers, int resumed, int was_complete);

/* The job's identity (tfenc_job_settings_identity), then the content of
 * each layer's weights_file: "head.weights_file sha256 = ..." lines, so that
 * a resumed run with another head in the same file name is refused. NULL
 * when out of memory. */
static char *weights_files_identity(run *r)
{
    char *identity = tfenc_job_settings_identity(r->job, &r->settings);
    for (int i = 0; identity != NULL && i < r->plan.n_steps; i++) {
        if (r->plan.steps[i].weights_file == NULL)
            continue;
        const char *name = r->plan.steps[i].name;
        size_t length = strlen(identity), size = length + strlen(name) + 100;
        char *grown = realloc(identity, size);
        if (grown == NULL) {
            free(identity);
            return NULL;
        }
        identity = grown;
        snprintf(identity + length, size - length, "%s.weights_file sha256 = %s\n", name,
                 r->weights_file_sha256[i]);
    }
    return identity;
}

static int open_output(run *r)
{
    char weights_sha256[65] = "", corpus_fingerprint[65] = "", vocabulary_fingerprint[65] = "";
    char kernels[256];
    tfenc_matrix_describe_kernels(r->config.fp32_products, kernels, sizeof kernels);
    if (claim_output(r))
        return 1;
    plugin_files plugins = {0};
    if (list_plugin_files(r, &plugins)) {
        free(plugins.paths);
        free(plugins.sha256);
        return 1;
    }
    /* Every layer has read its weights, the tokenizer its file, by now. */
    int status = r->rank == 0 ? check_watched(r, NULL) : TFENC_OK;
    if (r->rank == 0)
        memcpy(weights_sha256, r->weights_sha256, sizeof weights_sha256);
    if (agree_on_failure(r, status))
        return 1;
    MPI_Bcast(weights_sha256, sizeof weights_sha256, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Bcast(r->weights_file_sha256, r->plan.n_steps * (int)sizeof *r->weights_file_sha256,
              MPI_CHAR, 0, MPI_COMM_WORLD);
    tfenc_corpus_shards corpus_shards;
    if (agree_on_failure(r, fingerprint_corpus(r, corpus_fingerprint, &corpus_shards)))
        return 1;
    if (r->settings.vocabulary != NULL &&
        agree_on_failure(r, tfenc_fingerprint_file(r->ctx, MPI_COMM_WORLD, r->settings.vocabulary,
                                                   vocabulary_fingerprint))) {
        tfenc_corpus_shards_free(&corpus_shards);
        return 1;
    }
    const tfenc_layout *l = &r->layout;
    char layout[128];
    snprintf(layout, sizeof layout, "ranks=%d data_parallel=%d pipeline_stages=%d", r->n_ranks,
             l->data_parallel, l->pipeline_stages);
    int was_complete = 0, resumed = 0;
    char *identity = weights_files_identity(r);
    char *provenance = tfenc_job_settings_provenance(r->job, r->request->overrides,
                                                     r->request->n_overrides);
    if (identity == NULL || provenance == NULL)
        status = tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    if (status == TFENC_OK && tfenc_layout_is_last_stage(l)) {
        tfenc_output_options o = {
            .path = r->settings.output, .kind = r->kind, .dtype = r->settings.dtype,
            .compression = r->settings.compression, .unit_norm = rows_unit_length(r),
            .unit_chunk_means = unit_chunk_means(r),
            .width = row_width(r),
            .n_documents = r->n_documents, .n_rows = r->n_rows, .chunks = r->settings.chunks,
            .has_ids = r->settings.corpus.id_field != NULL,
            .has_token_ids = r->settings.output_ids,
            .has_document_source = needs_document_source(r),
            .max_id_length = r->windows.max_id_length, .job_text = provenance,
            .kept_fields = r->kept_fields, .n_kept_fields = r->settings.corpus.n_keep_fields,
            .job_settings = identity, .weights_sha256 = weights_sha256,
            .corpus_path = r->settings.input, .corpus_fingerprint = corpus_fingerprint,
            .corpus_shards = &corpus_shards,
            .vocabulary_path = r->settings.vocabulary,
            .vocabulary_fingerprint = r->settings.vocabulary != NULL ? vocabulary_fingerprint
                                                                     : NULL,
            .plugin_paths = plugins.paths, .plugin_sha256 = plugins.sha256,
            .n_plugins = plugins.n,
            .layout = layout, .job_path = r->request->job_path,
            .overrides = r->request->overrides, .n_overrides = r->request->n_overrides,
            .precision = tfenc_precision_names[r->config.precision],
            .kernels = kernels, .path_choices = r->paths.assignments,
            .sample_min_cosine = r->sample_cosine,
            .precision_steps = r->step_precision != NULL ? r->calibration.precision_steps : NULL,
            .calibration = r->step_precision != NULL ? &r->calibration : NULL,
            .ranges = r->ranges, .ranges_source = r->ranges_source,
            .sample_indices = r->sample_indices, .n_sample = r->n_sample,
            .labels = r->labels,
            .multivector_mode = tfenc_multivector_mode_names[r->settings.multivector_query],
            .multivector_marker = r->settings.multivector_query ? r->settings.query_marker
                                                                : r->settings.document_marker,
            .multivector_skiplist = r->multivector.skiplist_text,
            .multivector_query_padding = !r->settings.multivector_query ? ""
                                         : r->settings.attend_to_mask_tokens ? "attended"
                                                                             : "masked"};
        MPI_Comm writers = l->data_parallel > 1 ? r->writers_comm : MPI_COMM_NULL;
        status = TFENC_ERR_NOT_FOUND;
        if (r->settings.resume)
            status = tfenc_output_reopen(r->ctx, writers, &o, &r->output, &was_complete);
        resumed = status == TFENC_OK;
        if (status == TFENC_ERR_NOT_FOUND)
            status = tfenc_output_create(r->ctx, writers, &o, &r->output);
        if (status == TFENC_OK)
            status = tfenc_writer_create(r->ctx, r->output,
                                         r->kind, row_width(r),
                                         r->settings.chunks, (int)r->settings.output_dim,
                                         r->config.d_model, l->data_parallel, r->settings.output,
                                         &r->writer);
        if (status == TFENC_OK && unit_chunk_means(r))
            tfenc_writer_set_unit_means(r->writer);
        if (status == TFENC_OK && r->kind->rows == TFENC_ROWS_SPARSE)
            status = open_sparse_rows(r, writers, resumed, was_complete);
        if (status == TFENC_OK)
            status = tfenc_writer_set_skiplist(r->ctx, r->writer, r->multivector.skip_flags,
                                               r->multivector.skiplist.n_ids);
    }
    free(identity);
    free(provenance);
    free(plugins.paths);
    free(plugins.sha256);
    tfenc_corpus_shards_free(&corpus_shards);
    /* HDF5 cannot always shut down after a failed write to a new file. */
    if (status == TFENC_ERR_IO)
        r->result->skip_finalize = 1;
    if (agree_on_failure(r, status))
        return 1;
    return learn_progress(r, resumed, was_complete);
}

static tfenc_sparse_settings sparse_settings(const run *r)
{
    return (tfenc_sparse_settings){.path = r->settings.output, .n_documents = r->n_documents,
                                   .width = r->kind_width, .top_k = r->settings.sparse_top_k,
                                   .threshold = r->settings.sparse_threshold};
}

/* The last stage's side of a sparse head: the microbatch's rows, which the
 * head fills through the context's sink, and this writer's log. Resumed,
 * first the rows the earlier runs' logs hold soundly (before this run's
 * log joins them). */
static int open_sparse_rows(run *r, MPI_Comm writers, int resumed, int was_complete)
{
    const tfenc_sparse_settings settings = sparse_settings(r);
    char damage[TFENC_MESSAGE_MAX / 2] = "";
    int status = TFENC_OK;
    if (resumed) {
        status = tfenc_sparse_logged(r->ctx, r->output, &settings, was_complete,
                                     &r->sparse_logged, damage, sizeof damage);
        r->sparse_csr_whole = status == TFENC_OK && r->sparse_logged == NULL;
    }
    /* Said by the writer that read the logs, which is rank 0 only with one
     * pipeline stage. */
    const tfenc_run_observer *o = &r->request->observer;
    if (status == TFENC_OK && damage[0] != '\0' && o->notice != NULL) {
        char line[TFENC_MESSAGE_MAX];
        snprintf(line, sizeof line, "%s: its rows are dropped, and the documents they held "
                 "are encoded again", damage);
        o->notice(o->user, line);
    }
    if (status == TFENC_OK)
        status = tfenc_sparse_rows_create(r->ctx, r->kind_width, r->settings.sparse_top_k,
                                          r->settings.sparse_threshold, &r->sparse_rows);
    if (status == TFENC_OK)
        status = tfenc_sparse_log_open(r->ctx, &settings, writers, resumed, &r->sparse_log);
    if (status != TFENC_OK)
        return status;
    tfenc_context_set_sparse_sink(r->ctx, tfenc_sparse_rows_sink, r->sparse_rows);
    tfenc_writer_set_sparse(r->writer, r->sparse_rows, r->sparse_log);
    return TFENC_OK;
}

/* Every writer, the job complete: the CSR from every log, with the
 * vocabulary that names its columns. */
static int finish_sparse_rows(run *r)
{
    const char **tokens = NULL, **vocabulary = NULL;
    /* Only the first stage has the tokenizer; every writer needs the
     * vocabulary (the dataset is created collectively). */
    tfenc_tokenizer *own = NULL, *tokenizer = r->tokenizer;
    int status = tokenizer != NULL ? TFENC_OK
                                   : tfenc_job_settings_tokenizer(r->ctx, r->job, &r->config,
                                                                  &r->settings, &own);
    if (own != NULL)
        tokenizer = own;
    if (status == TFENC_OK && tokenizer != NULL) {
        status = tfenc_tokenizer_tokens(r->ctx, tokenizer, &tokens);
        vocabulary = status == TFENC_OK ? calloc((size_t)r->kind_width, sizeof *vocabulary)
                                        : NULL;
        if (status == TFENC_OK && vocabulary == NULL)
            status = tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        /* A model's vocabulary may be padded past the tokenizer's ids. */
        const int known = tfenc_tokenizer_vocab_size(tokenizer);
        for (int i = 0; vocabulary != NULL && i < r->kind_width; i++)
            vocabulary[i] = i < known ? tokens[i] : "";
    }
    const tfenc_sparse_settings settings = sparse_settings(r);
    if (status == TFENC_OK)
        status = tfenc_sparse_finish(r->ctx, r->output, &settings, vocabulary,
                                     r->sparse_csr_whole);
    free(tokens);
    tfenc_tokenizer_destroy(own);
    free(vocabulary);
    return status;
}

/* ------------------------------------------------------------- encoding */

static int stop_requested(const run *r)
{
    return r->request->stop != NULL && *r->request->stop != 0;
}

/* What finished work to count: the tally (core/ranks/tally.h) of every
 * last stage's writer, and on a resume, which documents the file held
 * already (the writers re-encode those that share a microbatch with
 * unfinished ones). */
static int finished_before(void *user, int64_t document)
{
    const run *r = user;
    const tfenc_windows *w = &r->windows;
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

static int start_tally(run *r)
{
    const tfenc_layout *l = &r->layout;
    if (r->writer != NULL && r->windows.n_partial > 0)
        tfenc_writer_set_finished_before(r->writer, finished_before, r);
    return tfenc_tally_create(r->ctx, MPI_COMM_WORLD, tfenc_layout_is_last_stage(l),
                              l->data_parallel, &r->tally);
}

/* A last stage tells rank 0 what its flushes have finished: whenever it
 * changed (never waiting), and once at the end. */
static int report_finished(run *r, int last)
{
    int64_t finished[TFENC_TALLY_VALUES] = {0, 0};
    if (r->writer != NULL)
        tfenc_writer_finished(r->writer, &finished[0], &finished[1]);
    return last ? tfenc_tally_report_last(r->ctx, r->tally, finished)
                : tfenc_tally_report(r->ctx, r->tally, finished);
}

static void report_progress(run *r, double start, double *last, int final)
{
    const tfenc_run_observer *o = &r->request->observer;
    if (r->rank != 0 || o->progress == NULL || r->tally == NULL)
        return;
    double now = tfenc_clock_seconds();
    if (!final && now - *last < r->settings.progress_interval)
        return;
    *last = now;
    /* Finished: in the file, as --status counts them, summed over every
     * replica's writer. */
    int64_t finished[TFENC_TALLY_VALUES];
    tfenc_tally_collect(r->tally, finished);
    tfenc_run_progress p = {.documents_done = r->already_done + finished[0],
                            .documents_total = r->n_documents,
                            .documents_before = r->already_done,
                            .tokens_done = finished[1],
                            .elapsed_seconds = now - start,
                            .final = final};
    /* Files read: those that end before the first document not yet
     * handed out (the windows to do are taken in corpus order). */
    if (r->windows.n_sources > 1 && r->windows.source_documents != NULL) {
        int64_t taken = tfenc_work_queue_taken(r->queue);
        taken = taken < r->n_runs ? r->runs[taken] : r->n_todo; /* runs -> windows */
        int64_t next = final || taken >= r->n_todo ? r->windows.n_documents
                                                   : r->windows.first_document[r->todo[taken]];
        int64_t end = 0;
        p.files_total = r->windows.n_sources;
        for (int i = 0; i < r->windows.n_sources; i++) {
            end += r->windows.source_documents[i];
            p.files_read += end <= next;
        }
    }
    o->progress(o->user, &p);
}

/* Rank 0, its own encoding done: every writer's last count must be in
 * before the communicator goes (and the last line counts them all); the
 * others may still be encoding, so it keeps the progress lines coming. */
static void await_finished(run *r, double start, double *last, int interrupted)
{
    if (r->rank != 0)
        return;
    const double interval = r->settings.progress_interval;
    int64_t finished[TFENC_TALLY_VALUES];
    for (;;) {
        report_progress(r, start, last, 0);
        /* Until the next line is due (a driver without progress lines:
         * a whole interval at a time). */
        double wait = interval - (tfenc_clock_seconds() - *last);
        if (tfenc_tally_wait(r->tally, wait > 0 && wait <= interval ? wait : interval,
                             finished) == r->layout.data_parallel)
            break;
    }
    if (!interrupted)
        report_progress(r, start, last, 1);
}

/* A layer made a non-finite value: the message names the layer and the
 * sequence of the microbatch; the user needs the document. */
static int name_document(run *r, const tfenc_microbatch *m, int status)
{
    int sequence = tfenc_model_nonfinite_sequence(r->model);
    if (sequence < 0 && r->sparse_rows != NULL)
        sequence = tfenc_sparse_rows_nonfinite_sequence(r->sparse_rows);
    if (sequence < 0 || sequence >= m->batch.n_seq)
        return status;
    char message[TFENC_MESSAGE_MAX];
    snprintf(message, sizeof message, "%s", tfenc_context_message(r->ctx));
    tfenc_context_clear(r->ctx);
    return tfenc_error(r->ctx, status, "%s: document %lld (0-based): %s; stopped before "
                       "writing it", r->settings.input, (long long)m->indices[sequence], message);
}

/* The first stage's next microbatch: from the window in hand, or from the
 * next window the queue hands this replica. TFENC_ERR_NOT_FOUND when the
 * queue is empty. */
static int next_microbatch(run *r, tfenc_rank_work *work, tfenc_microbatch **m)
{
    for (;;) {
        int status = tfenc_feeder_next(r->ctx, r->feeder, r->pipeline, m);
        if (status != TFENC_ERR_NOT_FOUND)
            return status;
        if (r->run_next == r->run_end) {
            int64_t item = -1;
            status = tfenc_work_queue_take(r->ctx, r->queue, &item);
            if (status != TFENC_OK)
                return status;
            if (item < 0)
                return TFENC_ERR_NOT_FOUND;
            r->run_next = r->runs[item];
            r->run_end = r->runs[item + 1];
        }
        const int64_t k = r->todo[r->run_next++];
        tfenc_corpus_range range;
        tfenc_windows_range(&r->windows, k, &range);
        status = tfenc_feeder_load_window(
            r->ctx, r->feeder, &range,
            r->windows.first_row != NULL ? r->windows.first_row[k] : 0,
            tfenc_windows_finished_documents(&r->windows, k));
        if (status != TFENC_OK)
            return status;
        work->windows++;
    }
}

/* Every stage's loop: take a microbatch (from the corpus on the first
 * stage, else from the previous stage), run this stage's steps, pass it on
 * or write it. Returns TFENC_ERR_INTERRUPTED when a stop request ended the
 * first stage early. */
static int encode(run *r, tfenc_rank_work *work)
{
    const tfenc_layout *l = &r->layout;
    const int first_stage = tfenc_layout_is_first_stage(l);
    const int last_stage = tfenc_layout_is_last_stage(l);
    double stage_flops = 0;
    for (int i = tfenc_layout_first_step(l, l->stage); i < tfenc_layout_end_step(l, l->stage); i++)
        stage_flops += r->step_flops[i];
    tfenc_microbatch_limits limits = {
        .max_tokens = (int)r->settings.batch_tokens, .max_seqs = (int)r->settings.batch_tokens,
        .max_ids_bytes = r->feeding.has_ids ? (size_t)r->settings.batch_tokens *
                                                  tfenc_kept_carried_bound(
                                                      r->windows.max_id_length,
                                                      r->windows.max_kept_length,
                                                      r->feeding.carries_kept)
                                            : 0,
        .d_model = r->config.d_model};
    int status = start_tally(r);
    if (status == TFENC_OK)
        status = tfenc_pipeline_create(r->ctx, r->replica_comm, &limits, PIPELINE_SLOTS,
                                       &r->pipeline);
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
            status = tfenc_pipeline_receive(r->ctx, r->pipeline, &m, &waited);
            work->waiting_seconds += waited;
            if (status == TFENC_OK && m->end_of_stream) {
                tfenc_pipeline_release(r->pipeline, m);
                break;
            }
        }
        if (status != TFENC_OK)
            return status;
        if (r->sparse_rows != NULL)
            status = tfenc_sparse_rows_begin(r->ctx, r->sparse_rows, m->batch.n_seq);
        if (status != TFENC_OK)
            return status;
        double step_start = tfenc_clock_seconds();
        status = tfenc_model_forward(r->ctx, r->model, &m->batch);
        work->busy_seconds += tfenc_clock_seconds() - step_start;
        if (status != TFENC_OK)
            return name_document(r, m, status);
        work->tokens += m->batch.n_tokens;
        work->microbatches++;
        work->flops += stage_flops * m->batch.n_tokens;
        if (last_stage) {
            step_start = tfenc_clock_seconds();
            status = tfenc_writer_write(r->ctx, r->writer, m);
            work->writing_seconds += tfenc_clock_seconds() - step_start;
            tfenc_pipeline_release(r->pipeline, m);
            if (status == TFENC_OK)
                status = report_finished(r, 0);
        } else {
            status = tfenc_pipeline_pass_on(r->ctx, r->pipeline, m);
        }
        if (status != TFENC_OK)
            return status;
        report_progress(r, start, &last_report, 0);
    }
    status = tfenc_pipeline_finish(r->ctx, r->pipeline);
    if (status == TFENC_OK && last_stage) {
        double flush_start = tfenc_clock_seconds();
        status = tfenc_writer_flush(r->ctx, r->writer);
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
static void agree_to_skip_finalize(run *r, int skip)
{
    int any = 0;
    MPI_Allreduce(&skip, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any)
        r->result->skip_finalize = 1;
}

/* Stopped, or after a failed finish step, on every rank: the file closed
 * without the complete mark (a run that resumes completes it). */
static void close_unfinished(run *r)
{
    int failed = r->output != NULL && tfenc_output_close(r->output) != 0;
    r->output = NULL;
    agree_to_skip_finalize(r, failed);
}

/* Every rank: this run's summary appended to the file's run_summaries
 * (output/output.h) by its writers, as rank 0 made it (attribute values
 * must be the same on every writer). */
static int record_summary(run *r, const tfenc_run_summary *summary, int finished)
{
    char *text = r->rank == 0 ? tfenc_run_summary_json(summary, finished) : NULL;
    int length = text != NULL ? (int)strlen(text) + 1 : 0;
    MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
    int status = TFENC_OK;
    if (length == 0) {
        status = tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "rank 0: out of memory for the run summary");
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
    if (r->output != NULL)
        status = tfenc_output_add_run_summary(r->ctx, r->output, text);
done:
    free(text);
    return status;
}

/* Encodes, then marks the file complete, or (stopped on request) leaves it
 * resumable. */
static int encode_and_finish(run *r, double start)
{
    tfenc_rank_work work = {.replica = r->layout.replica, .stage = r->layout.stage,
                            .shared_mib = shared_mib(r)};
    double encode_start = tfenc_clock_seconds(), cpu_start = tfenc_clock_cpu_seconds();
    int status = encode(r, &work);
    work.encode_seconds = tfenc_clock_seconds() - encode_start;
    work.encode_cpu_seconds = tfenc_clock_cpu_seconds() - cpu_start;
    if (status != TFENC_OK && status != TFENC_ERR_INTERRUPTED)
        return broken(r);
    int interrupted = status == TFENC_ERR_INTERRUPTED, any_interrupted = 0;
    /* Replicas finish their last windows at different times: the first to
     * finish must not spin a core the others are still encoding on. */
    tfenc_patient_allreduce(&interrupted, &any_interrupted, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    int64_t documents = 0, truncated = 0, tokens = 0;
    if (r->writer != NULL) {
        documents = tfenc_writer_documents(r->writer);
        truncated = tfenc_writer_truncated_documents(r->writer);
        tokens = tfenc_writer_tokens(r->writer);
    }
    /* The figures now, before the end changes the file: each run that
     * reaches its end, stopped or finished, leaves them in it. */
    tfenc_run_summary summary;
    tfenc_run_summary_gather(MPI_COMM_WORLD, &work, documents, truncated, tokens,
                             tfenc_clock_seconds() - start, &summary);
    summary.output_path = r->settings.output;
    if (agree_on_failure(r, record_summary(r, &summary, !any_interrupted))) {
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
        r->result->documents_finished = r->already_done + written;
        r->result->n_documents = r->n_documents;
        return 0;
    }
    /* Complete only if every window was read from the corpus the job
     * began with (a file cut short fails its read; one edited or replaced
     * is found here). */
    if (agree_on_failure(r, r->rank == 0 ? check_watched(r, "the corpus") : TFENC_OK)) {
        tfenc_run_summary_free(&summary);
        return 1;
    }
    /* The steps before the mark (the sparse CSR): one that failed on any
     * rank leaves the file as it was, incomplete, for a run that resumes. */
    status = TFENC_OK;
    if (r->output != NULL && r->kind->rows == TFENC_ROWS_SPARSE)
        status = finish_sparse_rows(r);
    if (agree_on_failure(r, status)) {
        close_unfinished(r);
        if (r->sparse_log != NULL && r->layout.replica == 0)
            tfenc_sparse_release_space(r->settings.output);
        tfenc_run_summary_free(&summary);
        return 1;
    }
    if (r->output != NULL) {
        status = tfenc_output_finish(r->ctx, r->output);
        r->output = NULL;
    }
    /* A close that failed (a full disk) can leave HDF5 unable to shut down. */
    agree_to_skip_finalize(r, status == TFENC_ERR_IO);
    if (agree_on_failure(r, status)) {
        tfenc_run_summary_free(&summary);
        return 1;
    }
    /* The rows are in the file, which says complete: the logs can go. */
    if (r->sparse_log != NULL && r->layout.replica == 0) {
        tfenc_sparse_remove_logs(r->settings.output);
        tfenc_sparse_release_space(r->settings.output);
    }
    const tfenc_run_observer *o = &r->request->observer;
    if (r->rank == 0 && o->summary != NULL && summary.ranks != NULL)
        o->summary(o->user, &summary);
    tfenc_run_summary_free(&summary);
    r->result->outcome = TFENC_RUN_FINISHED;
    return 0;
}

/* ---------------------------------------------------- the models, the end */

static void release_run(run *r)
{
    tfenc_feeder_destroy(r->feeder);
    tfenc_writer_destroy(r->writer);
    tfenc_context_set_sparse_sink(r->ctx, NULL, NULL);
    tfenc_sparse_rows_destroy(r->sparse_rows);
    tfenc_sparse_log_close(r->sparse_log);
    free(r->sparse_logged);
    tfenc_pipeline_destroy(r->pipeline);
    if (!r->result->skip_finalize)
        tfenc_output_close(r->output);
    tfenc_output_lock_release(r->lock);
    tfenc_corpus_close(r->corpus);
    tfenc_tokenizer_destroy(r->tokenizer);
    tfenc_multivector_tokens_free(&r->multivector);
    tfenc_model_destroy(r->model);
    free(r->step_precision);
    tfenc_int8_calibration_free(&r->calibration);
    tfenc_path_choices_free(&r->paths);
    free(r->ranges);
    free(r->sample_indices);
    tfenc_layout_free(&r->layout);
    tfenc_work_queue_destroy(r->queue);
    tfenc_tally_destroy(r->tally);
    tfenc_windows_free(&r->windows);
    free(r->todo);
    free(r->runs);
    free(r->step_flops);
    free(r->step_seconds);
    free(r->step_notes);
    free(r->labels);
    tfenc_weight_store_close(r->weights);
    tfenc_node_arena_destroy(r->arena);
    tfenc_plugin_registry_destroy(r->registry);
    tfenc_model_plan_free(&r->plan);
    tfenc_model_config_free(&r->config);
    tfenc_job_settings_free(&r->settings);
    tfenc_jobfile_destroy(r->job);
    free_watched(r);
    free(r->weights_file_sha256);
    if (r->replica_comm != MPI_COMM_NULL)
        MPI_Comm_free(&r->replica_comm);
    if (r->writers_comm != MPI_COMM_NULL)
        MPI_Comm_free(&r->writers_comm);
}

static int stage_model(run *r)
{
    const tfenc_layout *l = &r->layout;
    tfenc_model_options o = model_options(r, tfenc_layout_first_step(l, l->stage),
                                          tfenc_layout_end_step(l, l->stage));
    return tfenc_model_create(r->ctx, &o, &r->model);
}

static int whole_model(run *r)
{
    tfenc_model_options o = model_options(r, 0, r->plan.n_steps);
    int pools = 0;
    tfenc_layer_output declared;
    int status = tfenc_model_create(r->ctx, &o, &r->model);
    if (status == TFENC_OK)
        status = tfenc_model_probe_pools(r->ctx, r->model, &pools, &r->model_unit_rows);
    if (status == TFENC_OK)
        status = tfenc_model_output(r->ctx, r->model, &declared);
    if (status == TFENC_OK)
        status = decide_output_kind(r, pools, &declared);
    return status;
}
