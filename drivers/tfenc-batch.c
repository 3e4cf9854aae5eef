/* tfenc-batch: encodes a corpus with the encoder a job file composes and
 * writes the encodings to HDF5. Under MPI the ranks form data-parallel
 * replicas of pipeline_stages ranks each (core/layout.h): a replica's first
 * stage reads and tokenizes its share of the corpus (drivers/batch/feeder),
 * every stage runs its range of the model's steps, microbatches move between
 * stages through core/pipeline, and the last stages write into one output
 * file (drivers/batch/writer). This file and tfenc-import are the only
 * places that print or exit. */
#include "config.h"

#include "batch/feeder.h"
#include "batch/report.h"
#include "batch/settings.h"
#include "batch/writer.h"
#include "context.h"
#include "corpus.h"
#include "gemm.h"
#include "jobfile.h"
#include "layout.h"
#include "model.h"
#include "output.h"
#include "pipeline.h"
#include "plugin_loader.h"
#include "sha256.h"
#include "tokenizer.h"
#include "weights.h"

#include <cblas.h>
#include <hdf5.h>
#include <mpi.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Microbatches a pipeline stage can hold at once (one being computed, the
 * others in flight to or from its neighbours). */
#define PIPELINE_SLOTS 3

/* Exit status of a job stopped by SIGTERM/SIGINT: finished work is kept
 * and running the same command again resumes (EX_TEMPFAIL: "try again"). */
#define EXIT_INTERRUPTED 75

typedef struct options {
    const char *job_path;
    const char **overrides;
    int n_overrides;
    int dry_run;
    int quiet;
    int list_plugins;
} options;

/* Everything a run holds, released in one place. */
typedef struct run {
    tfenc_context ctx;
    int rank;
    int n_ranks;
    tfenc_jobfile *job;
    job_settings settings;
    tfenc_model_config config;
    tfenc_model_plan plan;
    tfenc_plugin_registry *registry;
    tfenc_weight_store *weights;
    int n_stages, stage, replica, data_parallel;
    int first_stage, last_stage; /* this rank's role */
    MPI_Comm replica_comm;       /* the replica's stages; MPI_COMM_NULL with one stage */
    MPI_Comm writers_comm;       /* every last stage; MPI_COMM_NULL on the others */
    double *step_flops;          /* [n_steps] FLOPs per token at the corpus's mean length */
    tfenc_layout layout;
    tfenc_model *model;
    int pooled;
    tfenc_tokenizer *tokenizer;
    tfenc_corpus *corpus;
    feeder_options feeding;
    /* The replica's share of the corpus, known on all its stages. */
    int64_t share_documents, first_index, first_token;
    /* The whole corpus. */
    int64_t n_documents, n_tokens;
    long long max_id_length;
    tfenc_output *output;
    uint8_t *done; /* resumed: the share's documents a previous run finished */
    int64_t already_done;
    tfenc_pipeline *pipeline;
    feeder *feeder;
    writer *writer;
    int skip_finalize; /* leave without MPI_Finalize (which shuts HDF5 down) */
} run;

static const char *program = "tfenc-batch";

/* Set by SIGTERM/SIGINT (what Slurm sends before it kills a job); the first
 * stage stops feeding at the next microbatch and the pipeline drains. */
static volatile sig_atomic_t stop_signal = 0;

static void request_stop(int signal_number)
{
    stop_signal = signal_number;
}

static void usage(FILE *stream)
{
    fprintf(stream,
            "usage: %s [options] JOB.ini\n"
            "Encodes the job's corpus with its encoder and writes HDF5 (see docs/job-file.md).\n"
            "  --set SECTION.KEY=VALUE  override a job key (repeatable)\n"
            "  --dry-run                validate the job, count the corpus, print the layout,\n"
            "                           the layers of each stage, the cost and an estimated\n"
            "                           wall time; encode nothing\n"
            "  --list-plugins           list the layer types found and the plugins refused\n"
            "  --quiet                  no progress and no summary\n"
            "  --version, --help\n"
            "Run under MPI (mpirun -n N %s JOB.ini) to split the work: N = data-parallel\n"
            "replicas x [job] pipeline_stages. A job stopped by SIGTERM or SIGINT exits with\n"
            "status %d and resumes when run again.\n",
            program, program, EXIT_INTERRUPTED);
}

/* Under a launcher (mpirun, srun) every rank parses the same arguments;
 * only the first prints help, the version and argument errors. MPI is not
 * initialised yet, so the rank comes from the launcher's environment. */
static int first_rank(void)
{
    static const char *const variables[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                            "SLURM_PROCID", NULL};
    for (int i = 0; variables[i] != NULL; i++) {
        const char *value = getenv(variables[i]);
        if (value != NULL && value[0] != '\0')
            return atoi(value) == 0;
    }
    return 1;
}

static int parse_arguments(int argc, char **argv, options *opts)
{
    const int speak = first_rank();
    memset(opts, 0, sizeof *opts);
    opts->overrides = calloc((size_t)argc, sizeof *opts->overrides);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            if (speak)
                usage(stdout);
            return 1;
        } else if (strcmp(arg, "--version") == 0) {
            if (speak)
                printf("tfenc-batch %s (plugin ABI %d.%d)\n", PACKAGE_VERSION, TFENC_ABI_MAJOR,
                       TFENC_ABI_MINOR);
            return 1;
        } else if (strcmp(arg, "--dry-run") == 0) {
            opts->dry_run = 1;
        } else if (strcmp(arg, "--quiet") == 0 || strcmp(arg, "-q") == 0) {
            opts->quiet = 1;
        } else if (strcmp(arg, "--list-plugins") == 0) {
            opts->list_plugins = 1;
        } else if (strcmp(arg, "--set") == 0 && i + 1 < argc) {
            opts->overrides[opts->n_overrides++] = argv[++i];
        } else if (strncmp(arg, "--set=", 6) == 0) {
            opts->overrides[opts->n_overrides++] = arg + 6;
        } else if (arg[0] == '-') {
            if (speak)
                fprintf(stderr, "%s: unknown option '%s' (try --help)\n", program, arg);
            return 2;
        } else if (opts->job_path == NULL) {
            opts->job_path = arg;
        } else {
            if (speak)
                fprintf(stderr, "%s: more than one job file ('%s' and '%s')\n", program,
                        opts->job_path, arg);
            return 2;
        }
    }
    if (opts->job_path == NULL && !opts->list_plugins) {
        if (speak)
            fprintf(stderr, "%s: no job file given (try --help)\n", program);
        return 2;
    }
    return 0;
}

/* ------------------------------------------------------------ agreement */

/* The lowest rank that failed reports; every rank learns whether any did.
 * Used where every rank takes part, so that a setup error is one line. */
static int agree_on_failure(run *r, int status)
{
    int failed_rank = status != TFENC_OK ? r->rank : r->n_ranks;
    int first_failed = r->n_ranks;
    MPI_Allreduce(&failed_rank, &first_failed, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first_failed < r->n_ranks && r->rank == first_failed) {
        if (r->n_ranks > 1 && status != TFENC_ERR_CONFIG)
            fprintf(stderr, "%s: rank %d: %s\n", program, r->rank, tfenc_context_message(&r->ctx));
        else
            fprintf(stderr, "%s: %s\n", program, tfenc_context_message(&r->ctx));
    }
    return first_failed < r->n_ranks;
}

/* A failure in the middle of encoding: other ranks may be anywhere (inside
 * a receive from this rank, say), so the job ends through MPI_Abort, which
 * Open MPI turns into every rank's exit. Rows already written stay in the
 * file, which is not marked complete. */
static void abort_job(run *r)
{
    if (r->n_ranks > 1)
        fprintf(stderr, "%s: rank %d: %s\n", program, r->rank, tfenc_context_message(&r->ctx));
    else
        fprintf(stderr, "%s: %s\n", program, tfenc_context_message(&r->ctx));
    fflush(NULL);
    if (r->n_ranks > 1)
        MPI_Abort(MPI_COMM_WORLD, 1);
    /* Alone: leave at once, as MPI_Abort would. Closing the file could
     * fail again (a full disk) and leave HDF5 unable to shut down; the
     * rows and metadata written so far are in the file already. */
    _exit(1);
}

/* ---------------------------------------------------------------- setup */

/* Open MPI binds each rank to one core by default, also a rank started
 * without mpiexec: OpenBLAS's threads would then share that core and run
 * slower than one thread. Said once, by rank 0, as advice. */
static void warn_about_binding(const run *r)
{
    cpu_set_t cores;
    int threads = openblas_get_num_threads();
    if (r->rank != 0 || threads < 2 || sched_getaffinity(0, sizeof cores, &cores) != 0)
        return;
    int usable = CPU_COUNT(&cores);
    if (usable < threads)
        fprintf(stderr,
                "%s: warning: %d OpenBLAS threads per rank but this rank may run on %d core%s "
                "(MPI binds ranks to cores): start with mpiexec --bind-to none (or set "
                "OMPI_MCA_hwloc_base_binding_policy=none), or use 1 thread and more ranks\n",
                program, threads, usable, usable == 1 ? "" : "s");
}

/* The job, the model's plan and the layout check: identical on every rank,
 * so errors here are reported once. */
static int read_job(run *r, const options *opts)
{
    int status = tfenc_jobfile_load(&r->ctx, opts->job_path, &r->job);
    for (int i = 0; status == TFENC_OK && i < opts->n_overrides; i++)
        status = tfenc_jobfile_override(&r->ctx, r->job, opts->overrides[i]);
    if (status == TFENC_OK)
        status = tfenc_model_config_read(&r->ctx, r->job, &r->config);
    /* Before any weight is loaded: linear maps take their precision at load. */
    if (status == TFENC_OK &&
        (status = tfenc_gemm_set_precision(&r->ctx, r->config.precision_bf16 ? "bf16" : "fp32")) !=
            TFENC_OK) {
        char reason[TFENC_MESSAGE_MAX];
        snprintf(reason, sizeof reason, "%s", tfenc_context_message(&r->ctx));
        tfenc_context_clear(&r->ctx);
        status = tfenc_error(&r->ctx, status, "%s: [model] %s", r->job->path, reason);
    }
    if (status == TFENC_OK)
        status = settings_read(&r->ctx, r->job, &r->config, &r->settings);
    if (status == TFENC_OK)
        status = tfenc_model_plan_read(&r->ctx, r->job, &r->plan);
    if (status == TFENC_OK) {
        char where[512];
        snprintf(where, sizeof where, "%s: [job]", r->job->path);
        status = tfenc_layout_check(&r->ctx, where, r->n_ranks, (int)r->settings.pipeline_stages,
                                    r->plan.n_steps);
    }
    if (status == TFENC_OK && r->settings.threads > 0)
        openblas_set_num_threads((int)r->settings.threads);
    if (status == TFENC_OK)
        warn_about_binding(r);
    if (status == TFENC_OK)
        status = tfenc_plugin_registry_create(&r->ctx, r->config.plugin_path, &r->registry);
    if (status == TFENC_OK)
        status = tfenc_plugin_registry_scan(&r->ctx, r->registry);
    if (status == TFENC_OK)
        status = tfenc_weight_store_open(&r->ctx, r->config.weights_path, &r->weights);
    return status;
}

static void assign_roles(run *r)
{
    r->n_stages = (int)r->settings.pipeline_stages;
    r->data_parallel = r->n_ranks / r->n_stages;
    tfenc_layout_place(r->rank, r->n_stages, &r->replica, &r->stage);
    r->first_stage = r->stage == 0;
    r->last_stage = r->stage == r->n_stages - 1;
    r->replica_comm = MPI_COMM_NULL;
    r->writers_comm = MPI_COMM_NULL;
    if (r->n_stages > 1)
        MPI_Comm_split(MPI_COMM_WORLD, r->replica, r->stage, &r->replica_comm);
    MPI_Comm_split(MPI_COMM_WORLD, r->last_stage ? 0 : MPI_UNDEFINED, r->rank, &r->writers_comm);
}

static tfenc_model_options model_options(run *r, int first_step, int end_step)
{
    tfenc_model_options o = {
        .job = r->job, .config = &r->config, .plan = &r->plan, .registry = r->registry,
        .weights = r->weights,
        .limits = {.max_tokens = (int)r->settings.batch_tokens,
                   .max_seq_len = (int)r->settings.max_seq_len,
                   .max_seqs = (int)r->settings.batch_tokens},
        .first_step = first_step, .end_step = end_step};
    return o;
}

/* The first stage reads the corpus: the tokenizer and this replica's share. */
static int open_input(run *r)
{
    r->feeding = (feeder_options){.input = r->settings.input,
                                  .max_seq_len = (int)r->settings.max_seq_len,
                                  .batch_tokens = (int)r->settings.batch_tokens,
                                  .truncation = r->settings.truncation,
                                  .vocab_size = r->config.vocab_size,
                                  .has_ids = r->settings.corpus.id_field != NULL};
    if (!r->first_stage)
        return TFENC_OK;
    int status = settings_tokenizer(&r->ctx, r->job, &r->config, &r->settings, &r->tokenizer);
    if (status == TFENC_OK)
        status = tfenc_corpus_open(&r->ctx, &r->settings.corpus, r->replica, r->data_parallel,
                                   &r->corpus);
    return status;
}

static int decide_output_kind(run *r, int pools)
{
    const char *kind = r->settings.output_kind_name;
    r->pooled = strcmp(kind, "auto") == 0 ? pools : strcmp(kind, "pooled") == 0;
    if (r->pooled != pools)
        return tfenc_error(&r->ctx, TFENC_ERR_CONFIG, "%s: output_kind = %s but the model %s its output",
                           r->job->path, kind, pools ? "pools" : "does not pool");
    return TFENC_OK;
}

/* Pass 1: the first stages count their shares' documents, and then, once
 * every share knows its first global index (so that a tokenizer error
 * names the right document), their tokens. Global indices and token
 * offsets follow by scans over the ranks in order (other stages add 0). */
static int count_corpus(run *r, int need_tokens)
{
    tfenc_corpus_counts counts = {0};
    int64_t share_tokens = 0;
    int status = TFENC_OK;
    if (r->first_stage)
        status = tfenc_corpus_count(&r->ctx, r->corpus, &counts);
    if (agree_on_failure(r, status))
        return 1;
    int64_t first_index = 0, first_token = 0;
    long long max_id = (long long)counts.max_id_length;
    MPI_Exscan(&counts.n_documents, &first_index, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (r->rank == 0)
        first_index = 0; /* MPI_Exscan leaves rank 0's result undefined */
    MPI_Allreduce(&counts.n_documents, &r->n_documents, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&max_id, &r->max_id_length, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    if (r->first_stage) {
        /* HDF5 shares know where they start; text shares learn it here. */
        if (tfenc_corpus_first_index(r->corpus) < 0)
            tfenc_corpus_set_first_index(r->corpus, first_index);
        r->first_index = tfenc_corpus_first_index(r->corpus);
        r->share_documents = counts.n_documents;
        if (need_tokens)
            status = feeder_count_tokens(&r->ctx, &r->feeding, r->tokenizer, r->corpus,
                                         &share_tokens);
    }
    if (agree_on_failure(r, status))
        return 1;
    MPI_Exscan(&share_tokens, &first_token, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (r->rank == 0)
        first_token = 0;
    MPI_Allreduce(&share_tokens, &r->n_tokens, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (r->first_stage)
        r->first_token = first_token;
    if (r->replica_comm != MPI_COMM_NULL) {
        int64_t share[3] = {r->share_documents, r->first_index, r->first_token};
        MPI_Bcast(share, 3, MPI_INT64_T, 0, r->replica_comm);
        r->share_documents = share[0];
        r->first_index = share[1];
        r->first_token = share[2];
    }
    return 0;
}

/* Step costs for the split into stages, and whether the model pools: from
 * the whole model with one stage, else from rank 0's step-by-step survey
 * (no rank ever loads more than its stage's weights for good). */
static int cost_steps(run *r)
{
    r->step_flops = calloc((size_t)r->plan.n_steps, sizeof *r->step_flops);
    if (r->step_flops == NULL)
        return agree_on_failure(r, tfenc_error(&r->ctx, TFENC_ERR_NO_MEMORY, "out of memory"));
    double mean_length = r->n_documents > 0 ? (double)r->n_tokens / (double)r->n_documents : 1.0;
    if (r->n_stages == 1) {
        for (int i = 0; i < r->plan.n_steps; i++)
            r->step_flops[i] = tfenc_model_step_flops(r->model, i, mean_length);
        return 0;
    }
    int pools = 0, status = TFENC_OK;
    if (r->rank == 0) {
        tfenc_model_options o = model_options(r, 0, r->plan.n_steps);
        status = tfenc_model_survey(&r->ctx, &o, mean_length, r->step_flops, &pools);
    }
    if (agree_on_failure(r, status))
        return 1;
    MPI_Bcast(r->step_flops, r->plan.n_steps, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Bcast(&pools, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return agree_on_failure(r, decide_output_kind(r, pools));
}

static const char *step_type(const run *r, int step)
{
    tfenc_job_entry *type = tfenc_job_section_get(r->plan.steps[step].section, "type");
    return type != NULL ? type->value : "?";
}

static void print_plan(run *r)
{
    const tfenc_layout *l = &r->layout;
    double mean_length = r->n_documents > 0 ? (double)r->n_tokens / (double)r->n_documents : 0.0;
    printf("job %s\n", r->job->path);
    printf("layout: %d rank%s = %d data-parallel replica%s x %d pipeline stage%s\n", l->n_ranks,
           l->n_ranks > 1 ? "s" : "", l->data_parallel, l->data_parallel > 1 ? "s" : "",
           l->pipeline_stages, l->pipeline_stages > 1 ? "s" : "");
    for (int replica = 0; replica < l->data_parallel; replica++) {
        printf("  replica %d: ranks", replica);
        for (int s = 0; s < l->pipeline_stages; s++)
            printf(" %d", replica * l->pipeline_stages + s);
        printf(" (reads share %d of %d; rank %d writes)\n", replica + 1, l->data_parallel,
               replica * l->pipeline_stages + l->pipeline_stages - 1);
    }
    printf("model: d_model = %d, %d steps, weights %s\n", r->config.d_model, r->plan.n_steps,
           r->config.weights_path);
    for (int s = 0; s < l->pipeline_stages; s++) {
        if (l->pipeline_stages > 1)
            printf("  stage %d: steps %d..%d, %.1f%% of the cost\n", s,
                   tfenc_layout_first_step(l, s), tfenc_layout_end_step(l, s) - 1,
                   l->total_cost > 0 ? 100 * l->stage_cost[s] / l->total_cost : 0.0);
        for (int i = tfenc_layout_first_step(l, s); i < tfenc_layout_end_step(l, s); i++)
            printf("  %s step %3d  %-28s %-12s %10.3f MFLOP/token\n",
                   l->pipeline_stages > 1 ? "  " : "", i, r->plan.steps[i].name, step_type(r, i),
                   r->step_flops[i] / 1e6);
    }
    printf("output: %s (%s, %s)\n", r->settings.output, r->pooled ? "pooled" : "tokens",
           tfenc_output_dtype_name(r->settings.dtype));
    printf("corpus: %s, %lld documents, %lld tokens after truncation (mean %.1f)\n",
           r->settings.input, (long long)r->n_documents, (long long)r->n_tokens, mean_length);
    double max_stage = 0;
    for (int s = 0; s < l->pipeline_stages; s++)
        if (l->stage_cost[s] > max_stage)
            max_stage = l->stage_cost[s];
    printf("estimated cost: %.3f TFLOP\n", l->total_cost * (double)r->n_tokens / 1e12);
    /* A replica runs at its slowest stage's pace; replicas run side by side. */
    double rate = report_last_flop_rate();
    if (rate > 0)
        printf("estimated wall time: %.1f s for the encoding (at %.2f GFLOP/s per rank, the rate "
               "the last job measured on this machine)\n",
               (double)r->n_tokens / l->data_parallel * max_stage / rate, rate / 1e9);
    else
        printf("estimated wall time: unknown (no job has run on this machine yet: run a small "
               "one first and its measured rate is used)\n");
}

/* --------------------------------------------------------------- output */

/* The last stages open the file: reopened to resume when a previous run of
 * the same job left it, else created. */
static int open_output(run *r, const options *opts)
{
    char weights_sha256[65] = "";
    int status = TFENC_OK;
    if (r->rank == 0)
        status = tfenc_sha256_file(&r->ctx, r->config.weights_path, weights_sha256);
    if (agree_on_failure(r, status))
        return 1;
    MPI_Bcast(weights_sha256, sizeof weights_sha256, MPI_CHAR, 0, MPI_COMM_WORLD);
    char layout[128];
    snprintf(layout, sizeof layout, "ranks=%d data_parallel=%d pipeline_stages=%d", r->n_ranks,
             r->data_parallel, r->n_stages);
    int was_complete = 0, resumed = 0;
    char *identity = settings_identity(r->job);
    char *provenance = settings_provenance(r->job, opts->overrides, opts->n_overrides);
    if (identity == NULL || provenance == NULL)
        status = tfenc_error(&r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    if (status == TFENC_OK && r->last_stage) {
        tfenc_output_options o = {
            .path = r->settings.output, .kind = r->pooled ? TFENC_OUTPUT_POOLED : TFENC_OUTPUT_TOKENS,
            .dtype = r->settings.dtype, .compression = r->settings.compression,
            .d_model = r->config.d_model, .n_documents = r->n_documents, .n_tokens = r->n_tokens,
            .has_ids = r->settings.corpus.id_field != NULL,
            .max_id_length = (size_t)r->max_id_length, .job_text = provenance,
            .job_settings = identity, .weights_sha256 = weights_sha256, .layout = layout};
        MPI_Comm writers = r->data_parallel > 1 ? r->writers_comm : MPI_COMM_NULL;
        status = TFENC_ERR_NOT_FOUND;
        if (r->settings.resume)
            status = tfenc_output_reopen(&r->ctx, writers, &o, &r->output, &was_complete);
        resumed = status == TFENC_OK;
        if (status == TFENC_ERR_NOT_FOUND)
            status = tfenc_output_create(&r->ctx, writers, &o, &r->output);
        if (status == TFENC_OK && resumed && r->share_documents > 0) {
            r->done = malloc((size_t)r->share_documents);
            status = r->done == NULL
                         ? tfenc_error(&r->ctx, TFENC_ERR_NO_MEMORY, "out of memory")
                         : tfenc_output_written(&r->ctx, r->output, r->first_index,
                                                r->share_documents, r->done);
        }
        if (status == TFENC_OK)
            status = writer_create(&r->ctx, r->output, r->pooled, r->settings.output, &r->writer);
    }
    free(identity);
    free(provenance);
    /* HDF5 cannot always shut down after a failed write to a new file. */
    r->skip_finalize = status == TFENC_ERR_IO;
    if (agree_on_failure(r, status))
        return 1;
    /* The first stage skips what the last stage found done. */
    if (r->replica_comm != MPI_COMM_NULL) {
        MPI_Bcast(&resumed, 1, MPI_INT, r->n_stages - 1, r->replica_comm);
        if (resumed && r->share_documents > 0) {
            if (r->done == NULL)
                r->done = malloc((size_t)r->share_documents);
            if (r->done == NULL)
                return agree_on_failure(r, tfenc_error(&r->ctx, TFENC_ERR_NO_MEMORY, "out of memory"));
            MPI_Bcast(r->done, (int)r->share_documents, MPI_UINT8_T, r->n_stages - 1,
                      r->replica_comm);
        }
    }
    int64_t done = 0, all_done = 0;
    if (r->last_stage && r->done != NULL)
        for (int64_t k = 0; k < r->share_documents; k++)
            done += r->done[k] != 0;
    MPI_Allreduce(&done, &all_done, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &resumed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    r->already_done = all_done;
    if (resumed && r->rank == 0)
        fprintf(stderr, "%s: resuming %s: %lld of %lld documents were finished by an earlier run%s\n",
                program, r->settings.output, (long long)all_done, (long long)r->n_documents,
                was_complete ? " (it had completed)" : "");
    return 0;
}

/* ------------------------------------------------------------- encoding */

/* Every stage's loop: take a microbatch (from the corpus on the first
 * stage, else from the previous stage), run this stage's steps, pass it on
 * or write it. Returns TFENC_ERR_INTERRUPTED when a signal stopped the
 * first stage early. */
static int encode(run *r, const options *opts, rank_work *work)
{
    double stage_flops = 0;
    for (int i = tfenc_layout_first_step(&r->layout, r->stage);
         i < tfenc_layout_end_step(&r->layout, r->stage); i++)
        stage_flops += r->step_flops[i];
    tfenc_microbatch_limits limits = {
        .max_tokens = (int)r->settings.batch_tokens, .max_sequences = (int)r->settings.batch_tokens,
        .max_ids_bytes = r->feeding.has_ids
                             ? (size_t)r->settings.batch_tokens * ((size_t)r->max_id_length + 1)
                             : 0,
        .d_model = r->config.d_model};
    int status = tfenc_pipeline_create(&r->ctx, r->replica_comm, &limits, PIPELINE_SLOTS,
                                       &r->pipeline);
    if (status == TFENC_OK && r->first_stage)
        status = feeder_create(&r->ctx, &r->feeding, r->tokenizer, r->corpus, r->first_token,
                               r->done, &r->feeder);
    if (status != TFENC_OK)
        return status;
    progress bar = {.enabled = !opts->quiet && r->rank == 0, .terminal = isatty(2),
                    .start = report_now(), .interval = r->settings.progress_interval,
                    .share_documents = r->share_documents, .n_ranks = r->n_ranks};
    bar.last = bar.start;
    int interrupted = 0;
    for (;;) {
        tfenc_microbatch *m = NULL;
        if (r->first_stage) {
            if (stop_signal) {
                interrupted = 1;
                break;
            }
            status = feeder_next(&r->ctx, r->feeder, r->pipeline, &m);
            if (status == TFENC_ERR_NOT_FOUND) {
                status = TFENC_OK;
                break;
            }
        } else {
            double waited = 0;
            status = tfenc_pipeline_receive(&r->ctx, r->pipeline, &m, &waited);
            work->waiting_seconds += waited;
            if (status == TFENC_OK && m->end_of_stream) {
                tfenc_pipeline_release(r->pipeline, m);
                break;
            }
        }
        if (status != TFENC_OK)
            return status;
        double start = report_now();
        status = tfenc_model_forward(&r->ctx, r->model, &m->batch);
        work->busy_seconds += report_now() - start;
        if (status != TFENC_OK)
            return status;
        work->tokens += m->batch.n_tokens;
        work->microbatches++;
        work->flops += stage_flops * m->batch.n_tokens;
        if (r->last_stage) {
            start = report_now();
            status = writer_write(&r->ctx, r->writer, m);
            work->writing_seconds += report_now() - start;
            tfenc_pipeline_release(r->pipeline, m);
        } else {
            status = tfenc_pipeline_pass_on(&r->ctx, r->pipeline, m);
        }
        if (status != TFENC_OK)
            return status;
        if (r->feeder != NULL)
            report_progress(&bar, feeder_documents_read(r->feeder), work->tokens, 0);
    }
    status = tfenc_pipeline_finish(&r->ctx, r->pipeline);
    if (status == TFENC_OK && r->last_stage) {
        double start = report_now();
        status = writer_flush(&r->ctx, r->writer);
        work->writing_seconds += report_now() - start;
    }
    if (r->feeder != NULL)
        report_progress(&bar, feeder_documents_read(r->feeder), work->tokens, 1);
    if (status == TFENC_OK && interrupted)
        status = TFENC_ERR_INTERRUPTED;
    return status;
}

/* --------------------------------------------------------------- the rest */

static void release_run(run *r)
{
    feeder_destroy(r->feeder);
    writer_destroy(r->writer);
    tfenc_pipeline_destroy(r->pipeline);
    tfenc_output_close(r->output);
    tfenc_corpus_close(r->corpus);
    tfenc_tokenizer_destroy(r->tokenizer);
    tfenc_model_destroy(r->model);
    tfenc_layout_free(&r->layout);
    free(r->step_flops);
    free(r->done);
    tfenc_weight_store_close(r->weights);
    tfenc_plugin_registry_destroy(r->registry);
    tfenc_model_plan_free(&r->plan);
    tfenc_model_config_free(&r->config);
    settings_free(&r->settings);
    tfenc_jobfile_destroy(r->job);
    if (r->replica_comm != MPI_COMM_NULL)
        MPI_Comm_free(&r->replica_comm);
    if (r->writers_comm != MPI_COMM_NULL)
        MPI_Comm_free(&r->writers_comm);
}

static int list_plugins(run *r, const options *opts)
{
    const char *job_path = NULL;
    tfenc_model_config config = {0};
    if (opts->job_path != NULL) {
        int status = tfenc_jobfile_load(&r->ctx, opts->job_path, &r->job);
        if (status == TFENC_OK)
            status = tfenc_model_config_read(&r->ctx, r->job, &config);
        if (status != TFENC_OK)
            return status;
        job_path = config.plugin_path;
    }
    int status = tfenc_plugin_registry_create(&r->ctx, job_path, &r->registry);
    if (status == TFENC_OK)
        status = tfenc_plugin_registry_scan(&r->ctx, r->registry);
    if (status != TFENC_OK || r->rank != 0) {
        tfenc_model_config_free(&config);
        return status;
    }
    printf("search path:\n");
    for (int i = 0; i < tfenc_plugin_registry_n_directories(r->registry); i++)
        printf("  %s\n", tfenc_plugin_registry_directory(r->registry, i));
    printf("layer types:\n");
    for (int i = 0; i < tfenc_plugin_registry_n_layers(r->registry); i++) {
        const tfenc_plugin_layer *layer = tfenc_plugin_registry_layer(r->registry, i);
        printf("  %-14s %s  [%s]\n", layer->descriptor->type,
               layer->descriptor->description != NULL ? layer->descriptor->description : "",
               layer->file);
    }
    if (tfenc_plugin_registry_n_failures(r->registry) > 0)
        printf("refused:\n");
    for (int i = 0; i < tfenc_plugin_registry_n_failures(r->registry); i++) {
        const tfenc_plugin_failure *failure = tfenc_plugin_registry_failure(r->registry, i);
        printf("  %s: %s\n", failure->file, failure->reason);
    }
    tfenc_model_config_free(&config);
    return TFENC_OK;
}

static int stage_model(run *r)
{
    tfenc_model_options o = model_options(r, tfenc_layout_first_step(&r->layout, r->stage),
                                          tfenc_layout_end_step(&r->layout, r->stage));
    return tfenc_model_create(&r->ctx, &o, &r->model);
}

static int whole_model(run *r)
{
    tfenc_model_options o = model_options(r, 0, r->plan.n_steps);
    int pools = 0;
    int status = tfenc_model_create(&r->ctx, &o, &r->model);
    if (status == TFENC_OK)
        status = tfenc_model_probe_pools(&r->ctx, r->model, &pools);
    if (status == TFENC_OK)
        status = decide_output_kind(r, pools);
    return status;
}

static void catch_stop_signals(void)
{
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = request_stop;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGINT, &action, NULL);
}

/* Encodes, then marks the file complete, or (stopped by a signal) leaves
 * it resumable. Returns the exit status. */
static int encode_and_finish(run *r, const options *opts, double start)
{
    rank_work work = {.replica = r->replica, .stage = r->stage};
    catch_stop_signals();
    double encode_start = report_now();
    int status = encode(r, opts, &work);
    work.encode_seconds = report_now() - encode_start;
    if (status != TFENC_OK && status != TFENC_ERR_INTERRUPTED)
        abort_job(r);
    int interrupted = status == TFENC_ERR_INTERRUPTED, any_interrupted = 0;
    MPI_Allreduce(&interrupted, &any_interrupted, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    int64_t mine[3] = {0, 0, 0}, totals[3] = {0, 0, 0};
    if (r->writer != NULL) {
        mine[0] = writer_documents(r->writer);
        mine[1] = writer_truncated_documents(r->writer);
        mine[2] = writer_tokens(r->writer);
    }
    MPI_Allreduce(mine, totals, 3, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (any_interrupted) {
        tfenc_output_close(r->output);
        r->output = NULL;
        if (r->rank == 0)
            fprintf(stderr,
                    "%s: stopped by a signal: %lld of %lld documents are finished in %s (not "
                    "marked complete); run the same command again to resume\n",
                    program, (long long)(r->already_done + totals[0]), (long long)r->n_documents,
                    r->settings.output);
        return EXIT_INTERRUPTED;
    }
    status = TFENC_OK;
    if (r->output != NULL) {
        status = tfenc_output_finish(&r->ctx, r->output);
        r->output = NULL;
    }
    if (agree_on_failure(r, status))
        return 1;
    report_summary(stderr, MPI_COMM_WORLD, &work, r->settings.output, totals[0], totals[1],
                   totals[2], report_now() - start, opts->quiet);
    return 0;
}

/* Returns the exit status. */
static int run_job(run *r, const options *opts)
{
    double start = report_now();
    if (agree_on_failure(r, read_job(r, opts)))
        return 1;
    assign_roles(r);
    if (agree_on_failure(r, open_input(r)))
        return 1;
    /* One stage: the whole model, probed now, tells whether it pools before
     * pass 1 (which then tokenizes only when token offsets are needed). */
    if (r->n_stages == 1 && agree_on_failure(r, whole_model(r)))
        return 1;
    if (count_corpus(r, r->n_stages > 1 || !r->pooled || opts->dry_run) || cost_steps(r))
        return 1;
    char where[512];
    snprintf(where, sizeof where, "%s: [job]", r->job->path);
    if (agree_on_failure(r, tfenc_layout_create(&r->ctx, where, r->rank, r->n_ranks, r->n_stages,
                                                r->plan.n_steps, r->step_flops, &r->layout)))
        return 1;
    if (opts->dry_run) {
        if (r->rank == 0)
            print_plan(r);
        return 0;
    }
    if (r->n_documents == 0) {
        if (r->rank == 0)
            fprintf(stderr, "%s: %s: the corpus holds no documents\n", program, r->settings.input);
        return 1;
    }
    if (r->n_stages > 1 && agree_on_failure(r, stage_model(r)))
        return 1;
    if (open_output(r, opts))
        return 1;
    return encode_and_finish(r, opts, start);
}

int main(int argc, char **argv)
{
    options opts;
    int parsed = parse_arguments(argc, argv, &opts);
    if (parsed != 0) {
        free(opts.overrides);
        return parsed == 1 ? 0 : 2;
    }
    /* Past a file-size limit, writes should fail with EFBIG (reported with
     * the path) rather than kill the process. */
    signal(SIGXFSZ, SIG_IGN);
    MPI_Init(&argc, &argv);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    run r;
    memset(&r, 0, sizeof r);
    r.replica_comm = r.writers_comm = MPI_COMM_NULL;
    tfenc_context_init(&r.ctx);
    MPI_Comm_rank(MPI_COMM_WORLD, &r.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &r.n_ranks);
    int exit_code;
    if (opts.list_plugins)
        exit_code = agree_on_failure(&r, list_plugins(&r, &opts)) ? 1 : 0;
    else
        exit_code = run_job(&r, &opts);
    free(opts.overrides);
    if (r.skip_finalize) {
        fflush(NULL);
        _exit(exit_code);
    }
    release_run(&r);
    MPI_Finalize();
    return exit_code;
}
