/* tfenc-batch: encodes a corpus with the encoder a job file composes and
 * writes the encodings to HDF5. The work is the library's (core/run/run.h);
 * this program parses the arguments, starts MPI, turns SIGTERM/SIGINT into
 * a stop request, names the plugin a crash happened in, prints what the run
 * reports, and chooses the exit status. With tfenc-import it is the only
 * code that prints or exits. */
#include "config.h"

#include "base/context.h"
#include "base/plugin_guard.h"
#include "input/formats.h"
#include "job/params.h"
#include "plugin/plugin_loader.h"
#include "model/model.h"
#include "output/kinds.h"
#include "output/quantize.h"
#include "run/run.h"
#include "run/step_timing.h"
#include "launcher.h"
#include "singleton.h"
#include "status.h"

#include <hdf5.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Exit status of a job stopped by SIGTERM/SIGINT: finished work is kept
 * and running the same command again resumes (EX_TEMPFAIL: "try again"). */
#define EXIT_INTERRUPTED 75

static const char *program = "tfenc-batch";

typedef struct options {
    const char *job_path;
    const char **overrides;
    int n_overrides;
    int dry_run;
    int quiet;
    int list_plugins;
    const char *status_path; /* --status FILE */
    int status_json;         /* --json: the status as one JSON object */
} options;

/* Set by SIGTERM/SIGINT (what Slurm sends before it kills a job); the run
 * stops feeding at the next microbatch and the pipelines drain. */
static volatile sig_atomic_t stop_signal = 0;

static void request_stop(int signal_number)
{
    stop_signal = signal_number;
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

static void usage(FILE *stream)
{
    fprintf(stream,
            "usage: %s [options] JOB.ini\n"
            "Encodes the job's corpus with its encoder and writes HDF5 (see docs/job-file.md).\n"
            "  --set SECTION.KEY=VALUE  override a job key (repeatable)\n"
            "  --dry-run                validate the job, count the corpus, print the layout,\n"
            "                           the layers of each stage, the cost and an estimated\n"
            "                           wall time (each layer timed on a sample of the\n"
            "                           corpus); write nothing\n"
            "  --list-plugins           list the layer types found and the plugins refused\n"
            "  --list-formats           list the corpus formats, the file names that choose\n"
            "                           each, and whether this build reads it\n"
            "  --status OUT.h5|JOB.ini  say what an output file (or a job's) is: complete or not,\n"
            "                           documents finished, model, settings, layout, and the\n"
            "                           command that resumes it (read-only; exit status 0\n"
            "                           complete, 3 unfinished, 1 not a readable output or\n"
            "                           damaged)\n"
            "  --json                   with --status: the report as one JSON object\n"
            "  --quiet                  no progress and no summary\n"
            "  --version, --help\n"
            "Run under MPI (mpirun -n N %s JOB.ini) to split the work: N = data-parallel\n"
            "replicas x [job] pipeline_stages. A job stopped by SIGTERM or SIGINT exits with\n"
            "status %d and resumes when run again.\n",
            program, program, EXIT_INTERRUPTED);
}

/* --list-formats: the formats' table as this build has it, one line a
 * format ("NAME TITLE: a document is ...; FILE NAMES[; not in this build:
 * WHY]"); docs/job-file.md's table of formats is checked against it
 * (tests/formats_doc.py). */
static void list_formats(void)
{
    char compressions[64] = "";
    for (int i = 0; tfenc_corpus_compression_extensions[i] != NULL; i++)
        snprintf(compressions + strlen(compressions), sizeof compressions - strlen(compressions),
                 "%s%s", i > 0 ? " " : "", tfenc_corpus_compression_extensions[i]);
    printf("corpus formats ([job] input_format; when it is not set, the file names choose):\n");
    for (int format = 0; format < TFENC_CORPUS_AUTO; format++) {
        const tfenc_corpus_format_info *info = tfenc_corpus_format_info_of(format);
        printf("  %-8s %s: a document is %s; ", tfenc_corpus_format_name(format), info->title,
               info->document);
        for (int i = 0; info->extensions != NULL && info->extensions[i] != NULL; i++)
            printf("%s%s", i > 0 ? " " : "", info->extensions[i]);
        if (info->extensions == NULL)
            printf("any file name the others do not claim");
        for (int i = 0; info->inner_extensions != NULL && info->inner_extensions[i] != NULL; i++)
            printf(", and %s before %s", info->inner_extensions[i], compressions);
        if (info->reader == NULL)
            printf("; not in this build: %s", info->missing);
        printf("\n");
    }
    printf("a compressed file's name (%s) chooses by the extension before\n", compressions);
}

static int parse_arguments(int argc, char **argv, options *opts)
{
    /* Under a launcher every rank parses the same arguments; only the
     * first prints help, the version and argument errors. */
    const int speak = launcher_first_rank();
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
        } else if (strcmp(arg, "--list-formats") == 0) {
            if (speak)
                list_formats();
            return 1;
        } else if (strcmp(arg, "--dry-run") == 0) {
            opts->dry_run = 1;
        } else if (strcmp(arg, "--quiet") == 0 || strcmp(arg, "-q") == 0) {
            opts->quiet = 1;
        } else if (strcmp(arg, "--list-plugins") == 0) {
            opts->list_plugins = 1;
        } else if (strcmp(arg, "--status") == 0 && i + 1 < argc) {
            /* --status --json FILE as well as --status FILE --json */
            if (strcmp(argv[i + 1], "--json") == 0 && i + 2 < argc) {
                opts->status_json = 1;
                i++;
            }
            opts->status_path = argv[++i];
        } else if (strcmp(arg, "--json") == 0) {
            opts->status_json = 1;
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
    if (opts->status_json && opts->status_path == NULL) {
        if (speak)
            fprintf(stderr, "%s: --json goes with --status FILE (try --help)\n", program);
        return 2;
    }
    if (opts->job_path == NULL && !opts->list_plugins && opts->status_path == NULL) {
        if (speak)
            fprintf(stderr, "%s: no job file given (try --help)\n", program);
        return 2;
    }
    return 0;
}

/* ----------------------------------------------------- what a run says */

typedef struct printer {
    int quiet;
    int terminal; /* progress redraws one line */
} printer;

static void print_notice(void *user, const char *line)
{
    (void)user;
    fprintf(stderr, "%s: %s\n", program, line);
}

static void print_progress(void *user, const tfenc_run_progress *p)
{
    const printer *out = user;
    if (out->quiet)
        return;
    /* Rounded down: 100% only when every document is finished. */
    double percent = p->documents_total > 0
                         ? (double)(1000 * p->documents_done / p->documents_total) / 10.0
                         : 100.0;
    double rate = p->elapsed_seconds > 0 ? (double)p->tokens_done / p->elapsed_seconds : 0.0;
    /* From the documents this run finished: none yet, no estimate. */
    const int64_t finished_now = p->documents_done - p->documents_before;
    char eta[64] = "ETA unknown until the first documents are finished";
    if (p->final)
        snprintf(eta, sizeof eta, "done in %.1f s", p->elapsed_seconds);
    else if (finished_now > 0)
        snprintf(eta, sizeof eta, "ETA %.0f s",
                 p->elapsed_seconds * (double)(p->documents_total - p->documents_done) /
                     (double)finished_now);
    char files[64] = "";
    if (p->files_total > 1)
        snprintf(files, sizeof files, ", files read %d/%d", p->files_read, p->files_total);
    char line[320];
    snprintf(line, sizeof line,
             "%lld/%lld documents finished (%.1f%%), %lld tokens, %.0f tokens/s, %s%s",
             (long long)p->documents_done, (long long)p->documents_total, percent,
             (long long)p->tokens_done, rate, eta, files);
    if (out->terminal)
        fprintf(stderr, "\r%s\033[K%s", line, p->final ? "\n" : "");
    else
        fprintf(stderr, "%s: %s\n", program, line);
}

static double fraction(double part, double whole)
{
    return whole > 0 ? part / whole : 0.0;
}

/* " of 12 windows" for a rank that took windows (a first stage). */
static const char *windows_text(const tfenc_rank_work *w, char *text, size_t size)
{
    if (w->stage != 0)
        text[0] = '\0';
    else
        snprintf(text, size, " of %lld window%s", (long long)w->windows,
                 w->windows == 1 ? "" : "s");
    return text;
}

static void print_summary(void *user, const tfenc_run_summary *s)
{
    const printer *out = user;
    if (out->quiet)
        return;
    fprintf(stderr,
            "%s: wrote %s: %lld documents (%lld truncated), %lld tokens; %.2f s in all, "
            "%.3f s encoding (%.3f CPU-seconds), %.0f tokens/s, %.2f GFLOP/s per rank; peak RSS "
            "%.1f MiB per rank\n",
            program, s->output_path, (long long)s->documents, (long long)s->truncated_documents,
            (long long)s->tokens, s->wall_seconds, s->encode_seconds, s->encode_cpu_seconds,
            fraction((double)s->tokens, s->encode_seconds), s->flops_per_rank / 1e9,
            s->peak_rss_mib);
    if (s->node_ranks > 1)
        fprintf(stderr,
                "%s: node memory %.1f MiB on the fullest node (%d ranks, proportional set sizes "
                "at the end of encoding), of which weights kept once for the node %.1f MiB\n",
                program, s->node_memory_mib, s->node_ranks, s->node_shared_mib);
    if (s->n_ranks < 2)
        return;
    char windows[64];
    for (int i = 0; i < s->n_ranks; i++) {
        const tfenc_rank_work *w = &s->ranks[i];
        double idle = w->encode_seconds - w->busy_seconds - w->writing_seconds;
        if (idle < 0)
            idle = 0;
        fprintf(stderr,
                "%s:   rank %d (replica %d, stage %d): %lld tokens in %lld microbatches%s, "
                "%.0f tokens/s, busy %.0f%%, writing %.0f%%, idle %.0f%% (waiting for the "
                "previous stage %.0f%%)\n",
                program, i, w->replica, w->stage, (long long)w->tokens,
                (long long)w->microbatches, windows_text(w, windows, sizeof windows),
                fraction((double)w->tokens, w->encode_seconds),
                100 * fraction(w->busy_seconds, w->encode_seconds),
                100 * fraction(w->writing_seconds, w->encode_seconds),
                100 * fraction(idle, w->encode_seconds),
                100 * fraction(w->waiting_seconds, w->encode_seconds));
    }
    fprintf(stderr, "%s: load imbalance (busiest rank / mean) %.2f; mean idle fraction %.1f%%\n",
            program, s->load_imbalance, 100 * s->mean_idle_fraction);
}

/* One step of the model in the order its parts run: a block's norm gets a
 * line of its own, before its sublayer (pre-norm) or after the residual
 * (post-norm), so that the plan shows where a norm plugin runs. The cost
 * is the whole step's, norm included. */
static void print_step(const tfenc_run_plan *p, int i, const char *indent)
{
    const tfenc_step_plan *step = &p->model->steps[i];
    char norm_name[300] = "";
    if (step->norm_section != NULL)
        snprintf(norm_name, sizeof norm_name, "%s.norm", step->name);
    if (step->norm_section != NULL && step->norm_first)
        printf("  %s step %3d  %-28s %-12s pre-norm: its output feeds %s\n", indent, i, norm_name,
               step->norm_type, step->name);
    char timed[64] = "";
    if (p->step_seconds != NULL)
        snprintf(timed, sizeof timed, " %9.3f us/token", p->step_seconds[i] * 1e6);
    printf("  %s step %3d  %-28s %-12s %10.3f MFLOP/token%s%s\n", indent, i, step->name,
           step->type, p->step_flops[i] / 1e6, timed,
           step->residual ? (step->norm_section != NULL && step->norm_first
                                 ? ", plus the step's input (before its norm)"
                                 : ", plus the step's input")
                          : "");
    /* What the step's layer counted over the timed sample (a mixture of
     * experts' tokens per expert). */
    if (p->step_notes != NULL && p->step_notes[(size_t)i * TFENC_STEP_NOTE_BYTES] != '\0')
        printf("  %s            %s\n", indent, p->step_notes + (size_t)i * TFENC_STEP_NOTE_BYTES);
    if (step->output_norm_section != NULL) {
        char output_norm_name[300];
        snprintf(output_norm_name, sizeof output_norm_name, "%s.output_norm", step->name);
        printf("  %s step %3d  %-28s %-12s output norm: of %s, before the residual\n", indent, i,
               output_norm_name, step->output_norm_type, step->name);
    }
    if (step->norm_section != NULL && !step->norm_first)
        printf("  %s step %3d  %-28s %-12s post-norm: after %s%s\n", indent, i, norm_name,
               step->norm_type, step->name, step->residual ? " and the residual" : "");
}

/* A corpus of several files, or a compressed one: its files, their
 * compressions and documents (the first and last few of a long list). */
static void print_sources(const tfenc_run_plan *p)
{
    int compressed = 0;
    for (int i = 0; p->source_compressions != NULL && i < p->n_sources; i++)
        compressed += strcmp(p->source_compressions[i], "none") != 0;
    if (p->n_sources <= 1 && compressed == 0)
        return;
    printf("  %d file%s of %s, %d compressed\n", p->n_sources, p->n_sources == 1 ? "" : "s",
           p->input_format, compressed);
    const int shown = 10;
    for (int i = 0; i < p->n_sources; i++) {
        if (p->n_sources > 2 * shown && i == shown) {
            printf("    ... %d more\n", p->n_sources - 2 * shown);
            i = p->n_sources - shown - 1;
            continue;
        }
        long long skipped = p->source_skipped != NULL ? (long long)p->source_skipped[i] : 0;
        printf("    %s: %lld documents, compression %s", p->source_paths[i],
               p->source_documents != NULL ? (long long)p->source_documents[i] : -1LL,
               p->source_compressions != NULL ? p->source_compressions[i] : "unknown");
        if (skipped > 0)
            printf(", %lld null texts left out", skipped);
        printf("\n");
    }
}

/* Seconds per token of steps [first, end), each timed alone by the dry run;
 * 0 when nothing was timed. */
static double timed_seconds(const tfenc_run_plan *p, int first, int end)
{
    double seconds = 0;
    for (int i = first; p->step_seconds != NULL && i < end; i++)
        seconds += p->step_seconds[i];
    return seconds;
}

static void print_plan(void *user, const tfenc_run_plan *p)
{
    (void)user;
    const tfenc_layout *l = p->layout;
    /* Per sequence: with chunks, what the steps' costs depend on. */
    double mean_length = p->n_sequences > 0 ? (double)p->n_tokens / (double)p->n_sequences : 0.0;
    printf("job %s\n", p->job_path);
    printf("layout: %d rank%s = %d data-parallel replica%s x %d pipeline stage%s\n", l->n_ranks,
           l->n_ranks > 1 ? "s" : "", l->data_parallel, l->data_parallel > 1 ? "s" : "",
           l->pipeline_stages, l->pipeline_stages > 1 ? "s" : "");
    for (int replica = 0; replica < l->data_parallel; replica++) {
        printf("  replica %d: ranks", replica);
        for (int s = 0; s < l->pipeline_stages; s++)
            printf(" %d", tfenc_layout_rank(l, replica, s));
        printf(" (rank %d reads the windows it takes, rank %d writes)\n",
               tfenc_layout_rank(l, replica, 0),
               tfenc_layout_rank(l, replica, l->pipeline_stages - 1));
    }
    printf("model: d_model = %d, %d steps, weights %s\n", p->d_model, p->model->n_steps,
           p->weights_path);
    /* A head beside its encoder: which file the layer reads, said beside the encoder's. */
    for (int i = 0; i < tfenc_model_plan_count_every_step(p->model); i++) {
        const tfenc_step_plan *step = tfenc_model_plan_every_step(p->model, i);
        if (step->weights_file != NULL)
            printf("  layer %s: weights %s (its weights_file)\n", step->name,
                   step->weights_file);
    }
    printf("kernels: %s\n", p->kernels);
    if (p->paths != NULL)
        printf("%s\n", p->paths);
    printf("memory: weights %.1f MiB as float32, %s", p->weights_float32_mib,
           p->weights_per_rank ? "a copy per rank" : "one copy per node");
    if (p->shared_weights_mib > 0)
        printf(" (%.1f MiB as they run, shared by rank 0's node's %d ranks)",
               p->shared_weights_mib, p->node_ranks);
    if (p->rank_memory_mib > 0)
        printf("; rank 0 holds %.1f MiB with its model built (proportional set size)",
               p->rank_memory_mib);
    printf("\n");
    const double measured = timed_seconds(p, 0, p->model->n_steps);
    /* A replica runs at its slowest stage's pace; replicas run side by side. */
    double slowest = 0;
    for (int s = 0; s < l->pipeline_stages; s++) {
        const double stage_seconds =
            timed_seconds(p, tfenc_layout_first_step(l, s), tfenc_layout_end_step(l, s));
        slowest = stage_seconds > slowest ? stage_seconds : slowest;
        char timed[64] = "";
        if (measured > 0)
            snprintf(timed, sizeof timed, ", %.1f%% of the measured time",
                     100 * stage_seconds / measured);
        if (l->pipeline_stages > 1)
            printf("  stage %d: steps %d..%d, %.1f%% of the cost%s\n", s,
                   tfenc_layout_first_step(l, s), tfenc_layout_end_step(l, s) - 1,
                   l->total_cost > 0 ? 100 * l->stage_cost[s] / l->total_cost : 0.0, timed);
        for (int i = tfenc_layout_first_step(l, s); i < tfenc_layout_end_step(l, s); i++)
            print_step(p, i, l->pipeline_stages > 1 ? "  " : "");
    }
    const tfenc_output_summary summary = {
        .path = p->output_path, .dtype = tfenc_output_dtype_name(p->dtype),
        .n_documents = p->n_documents, .n_rows = p->n_rows, .width = p->width,
        .compact = tfenc_dtype_is_compact(p->dtype), .unit_norm = p->unit_norm,
        .labels = p->labels, .sparse_top_k = p->sparse_top_k,
        .sparse_threshold = p->sparse_threshold, .sparse_values = -1};
    char *described = p->kind->describe_plan(&summary);
    printf("output: %s\n", described != NULL ? described : p->output_path);
    free(described);
    if (p->first_head != NULL) {
        printf("heads: %s (the output above, the root's datasets)", p->first_head);
        for (int i = 0; i < p->n_extra_heads; i++)
            printf(", %s (group /outputs/%s)", p->extra_heads[i], p->extra_heads[i]);
        printf("; one pass over the trunk writes them all\n");
    }
    if (p->kind->projects_vocabulary) {
        /* The head's map onto the vocabulary, the cost a SPLADE job adds:
         * the last step, whose measured share says what it costs here. */
        printf("vocabulary projection: %.3f TFLOP (2 x %d x d_model %d per token)",
               2.0 * p->width * p->d_model * (double)p->n_tokens / 1e12, p->width, p->d_model);
        const int last = p->model->n_steps - 1;
        if (measured > 0)
            printf(", measured %.1f%% of the encoding (its head step %s)",
                   100.0 * p->step_seconds[last] / measured, p->model->steps[last].name);
        printf("\n");
    }
    if (p->chunked)
        printf("corpus: %s, %lld documents, %lld tokens to encode in %lld sequences (%s; "
               "mean %.1f a sequence)\n", p->input_path, (long long)p->n_documents,
               (long long)p->n_tokens, (long long)p->n_sequences,
               p->late_chunked ? "each document whole, or in windows of whole spans when "
                                 "longer than max_seq_len, its spans pooled from it"
                               : "every chunk of a long document with its special tokens and "
                                 "overlap",
               mean_length);
    else
        printf("corpus: %s, %lld documents, %lld tokens to encode after truncation (mean "
               "%.1f)\n", p->input_path, (long long)p->n_documents, (long long)p->n_tokens,
               mean_length);
    printf("  read as %s (%s)\n", p->input_format, p->input_description);
    if (p->text_pair_field != NULL)
        printf("pairs: each document is the texts of '%s' and '%s', tokenized as the "
               "tokenizer encodes a pair\n", p->text_field, p->text_pair_field);
    print_sources(p);
    double max_stage = 0;
    for (int s = 0; s < l->pipeline_stages; s++)
        if (l->stage_cost[s] > max_stage)
            max_stage = l->stage_cost[s];
    printf("estimated cost: %.3f TFLOP\n", l->total_cost * (double)p->n_tokens / 1e12);
    const double estimate = (double)p->n_tokens / l->data_parallel * slowest;
    /* Three significant digits or more: a small job's estimate is not 0.0 s. */
    const int decimals = estimate >= 100   ? 0
                         : estimate >= 10  ? 1
                         : estimate >= 1   ? 2
                         : estimate >= 0.1 ? 3
                                           : 4;
    /* Stages pass activations and wait for one another, which the steps
     * timed alone do not: with several, the estimate is a lower bound. */
    if (slowest > 0)
        printf("estimated wall time: %.*f s for the encoding (each step timed on %lld tokens "
               "sampled from the corpus, at the job's precision and threads; %d replica%s at "
               "the pace of %s slowest stage%s)\n",
               decimals, estimate, (long long)p->timed_tokens, l->data_parallel,
               l->data_parallel == 1 ? "" : "s", l->data_parallel == 1 ? "its" : "their",
               l->pipeline_stages > 1
                   ? ", the stages taken to overlap perfectly: a lower bound, transfers "
                     "and waits between stages come on top"
                   : "");
    else if (p->last_flop_rate > 0)
        printf("estimated wall time: %.1f s for the encoding (at %.2f GFLOP/s per rank, the rate "
               "the last job measured on this machine)\n",
               (double)p->n_tokens / l->data_parallel * max_stage / p->last_flop_rate,
               p->last_flop_rate / 1e9);
    else
        printf("estimated wall time: unknown (no job has run on this machine yet: run a small "
               "one first and its measured rate is used)\n");
    /* The estimate times the steps on rank 0 alone: it cannot see threads
     * that wait for a core. */
    const int ranks = p->busiest_node_ranks, threads = p->busiest_node_threads,
              cores = p->busiest_node_cores;
    if (threads > cores) {
        printf("warning: %d rank%s of one node run %d threads on the %d core%s %s may use: "
               "threads wait for a core, and the job runs slower than estimated; ",
               ranks, ranks == 1 ? "" : "s", threads, cores, cores == 1 ? "" : "s",
               ranks == 1 ? "it" : "they");
        if (ranks > cores)
            printf("start at most %d rank%s on that node\n", cores, cores == 1 ? "" : "s");
        else
            printf("give each rank at most %d thread%s ([job] threads)\n", cores / ranks,
                   cores / ranks == 1 ? "" : "s");
    }
}

/* ------------------------------------------------------- --list-plugins */

static int list_plugins(tfenc_context *ctx, const options *opts, int rank)
{
    tfenc_jobfile *job = NULL;
    tfenc_model_config config = {0};
    tfenc_plugin_registry *registry = NULL;
    int status = TFENC_OK;
    if (opts->job_path != NULL) {
        status = tfenc_jobfile_load(ctx, opts->job_path, &job);
        if (status == TFENC_OK)
            status = tfenc_model_config_read(ctx, job, &config);
    }
    if (status == TFENC_OK)
        status = tfenc_plugin_registry_create(ctx, config.plugin_path,
                                              job != NULL ? job->directory : NULL, &registry);
    if (status == TFENC_OK)
        status = tfenc_plugin_registry_scan(ctx, registry);
    for (int i = 0; status == TFENC_OK && rank == 0 && i < tfenc_plugin_registry_n_warnings(registry);
         i++)
        fprintf(stderr, "%s: warning: %s\n", program, tfenc_plugin_registry_warning(registry, i));
    if (status == TFENC_OK && rank == 0) {
        printf("search path:\n");
        for (int i = 0; i < tfenc_plugin_registry_n_directories(registry); i++)
            printf("  %s\n", tfenc_plugin_registry_directory(registry, i));
        printf("layer types:\n");
        for (int i = 0; i < tfenc_plugin_registry_n_layers(registry); i++) {
            const tfenc_plugin_layer *layer = tfenc_plugin_registry_layer(registry, i);
            printf("  %-14s %s  [%s]\n", layer->descriptor->type,
                   layer->descriptor->description != NULL ? layer->descriptor->description : "",
                   layer->file);
            /* Its keys, as ompi_info lists MCA parameters: name, type, default,
             * range, help (docs/layers.md is checked against these lines). */
            tfenc_param_table keys = tfenc_params_declared(layer->descriptor);
            tfenc_param_info key;
            for (int k = 0; tfenc_param_table_entry(keys, k, &key); k++) {
                char range[96];
                tfenc_param_range_text(&key, range, sizeof range);
                printf("      %-18s %-7s %-9s %-13s %s\n", key.name, tfenc_param_type_name(key.type),
                       key.default_value != NULL ? key.default_value : "-",
                       range[0] != '\0' ? range : "-", key.help != NULL ? key.help : "");
            }
            if (keys.entries == NULL)
                printf("      (its keys are not declared: see the plugin's documentation)\n");
        }
        if (tfenc_plugin_registry_n_failures(registry) > 0)
            printf("refused:\n");
        for (int i = 0; i < tfenc_plugin_registry_n_failures(registry); i++) {
            const tfenc_plugin_failure *failure = tfenc_plugin_registry_failure(registry, i);
            printf("  %s: %s\n", failure->file, failure->reason);
        }
    }
    tfenc_plugin_registry_destroy(registry);
    tfenc_model_config_free(&config);
    tfenc_jobfile_destroy(job);
    return status;
}

/* ------------------------------------------- a crash inside a plugin */

/* A plugin's forward() (or another callback) that writes through a wild
 * pointer, past a guard page (TFENC_CHECK_PLUGINS), or runs an instruction
 * the CPU lacks kills the process; this handler first says which layer and
 * plugin file it was in, in one line, as core marks them around each
 * callback (base/plugin_guard.h). It is the driver's, not the library's:
 * library code never prints, and how the program's lines look and how it
 * dies are this program's choice. Only async-signal-safe calls: write(2)
 * of prepared text, sigaction, raise. A crash outside any plugin goes to
 * the handler installed before (Open MPI's, a sanitizer's, or the
 * default), as if this one were not there. */
static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};
static const char *const crash_names[] = {"Segmentation fault", "Bus error",
                                          "Illegal instruction", "Floating point exception"};
#define N_CRASH_SIGNALS (sizeof crash_signals / sizeof crash_signals[0])
static struct sigaction crash_before[N_CRASH_SIGNALS];
static char crash_prefix[64]; /* "tfenc-batch: " or "tfenc-batch: rank 3: " */

/* Writes the pieces as one line with one write(2): several ranks' lines
 * reach the launcher's pipe whole (up to PIPE_BUF bytes). */
static void write_line(const char *const *pieces, size_t n_pieces)
{
    static char line[4096];
    size_t used = 0;
    for (size_t i = 0; i < n_pieces; i++)
        for (const char *p = pieces[i]; *p != '\0' && used < sizeof line - 1; p++)
            line[used++] = *p;
    line[used++] = '\n';
    for (size_t done = 0; done < used;) {
        ssize_t written = write(STDERR_FILENO, line + done, used - done);
        if (written <= 0)
            return;
        done += (size_t)written;
    }
}

static void report_plugin_crash(int signal_number, siginfo_t *info, void *context)
{
    (void)context;
    size_t which = 0;
    while (which + 1 < N_CRASH_SIGNALS && crash_signals[which] != signal_number)
        which++;
    const tfenc_plugin_call *call = tfenc_plugin_call_current();
    if (call == NULL) {
        /* Returning re-runs the faulting instruction under the old handler. */
        sigaction(signal_number, &crash_before[which], NULL);
        return;
    }
    const char *where = (signal_number == SIGSEGV || signal_number == SIGBUS) && info != NULL
                            ? tfenc_guard_describe(info->si_addr)
                            : NULL;
    const char *pieces[] = {crash_prefix, call->layer, ", plugin ", call->file,
                            ": crashed in ", call->callback, "(): ", crash_names[which],
                            where != NULL ? ", " : "", where != NULL ? where : ""};
    write_line(pieces, sizeof pieces / sizeof pieces[0]);
    /* Die of the signal, as without this handler (a core dump, the
     * launcher's report of the signal). */
    struct sigaction default_action;
    memset(&default_action, 0, sizeof default_action);
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    sigaction(signal_number, &default_action, NULL);
    raise(signal_number);
}

/* After MPI_Init, whose library installs handlers of its own: this one
 * runs first and hands every crash outside a plugin on to them. On an
 * alternate stack, so that a plugin that overflows the stack is named too. */
static void report_plugin_crashes(int rank, int n_ranks)
{
    static char alternate_stack[64 * 1024];
    stack_t stack = {.ss_sp = alternate_stack, .ss_size = sizeof alternate_stack};
    sigaltstack(&stack, NULL);
    if (n_ranks > 1)
        snprintf(crash_prefix, sizeof crash_prefix, "%s: rank %d: ", program, rank);
    else
        snprintf(crash_prefix, sizeof crash_prefix, "%s: ", program);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = report_plugin_crash;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    for (size_t i = 0; i < N_CRASH_SIGNALS; i++)
        sigaction(crash_signals[i], &action, &crash_before[i]);
}

/* ----------------------------------------------------------------- main */

/* The exit guard: main() sets this on its way out. tfenc-batch itself
 * never calls exit(), so an exit() before that came from a plugin (or a
 * library) in the middle of the job: without the guard the job would end
 * with status 0 and an unfinished output. (_exit() runs no handler: the
 * plugin loader's probe catches it in constructors, mpirun at 2+ ranks.) */
static int main_returned;
static int guarded_rank = -1; /* named in the message when the job has several */

static void report_exit_from_plugin(void)
{
    if (main_returned)
        return;
    char rank[32] = "";
    if (guarded_rank >= 0)
        snprintf(rank, sizeof rank, "rank %d: ", guarded_rank);
    fprintf(stderr, "%s: %sthe process was ended by exit() from inside a plugin or library "
            "before the job finished, without an error: the run failed\n", program, rank);
    fflush(stderr);
    singleton_remove_directory();
    _exit(1);
}

int main(int argc, char **argv)
{
    options opts;
    int parsed = parse_arguments(argc, argv, &opts);
    if (parsed != 0) {
        free(opts.overrides);
        /* Only the first rank fails on a bad argument: had every rank
         * failed, the launcher could end the first before it said why. */
        return parsed == 2 && launcher_first_rank() ? 2 : 0;
    }
    /* Reading an output needs no MPI. Under a launcher only the first rank
     * reads it and answers: had the others left with its status too,
     * mpiexec, which ends a job once a rank leaves non-zero, could kill the
     * first before its report was out. */
    if (opts.status_path != NULL) {
        int code = launcher_first_rank()
                       ? status_print(opts.status_path, opts.overrides, opts.n_overrides,
                                      opts.status_json)
                       : 0;
        free(opts.overrides);
        return code;
    }
    /* Past a file-size limit, writes should fail with EFBIG (reported with
     * the path) rather than kill the process. */
    signal(SIGXFSZ, SIG_IGN);
    /* Before MPI_Init, which takes a while: a SIGTERM during it (Slurm's
     * scancel of a job that has just started) ended the process silently
     * with 143; now the run stops at its first microbatch and says so.
     * Listing plugins stops nothing and keeps the default action. */
    if (!opts.list_plugins)
        catch_stop_signals();
    singleton_prepare();
    atexit(singleton_remove_directory); /* after MPI_Finalize */
    MPI_Init(&argc, &argv);
    atexit(report_exit_from_plugin);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    int rank = 0, n_ranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n_ranks);
    guarded_rank = n_ranks > 1 ? rank : -1;
    report_plugin_crashes(rank, n_ranks);
    tfenc_context ctx;
    tfenc_context_init(&ctx);

    if (opts.list_plugins) {
        int status = list_plugins(&ctx, &opts, rank);
        /* Every rank reads the same job: the lowest that failed says why. */
        int failed = status != TFENC_OK ? rank : n_ranks, first_failed = n_ranks;
        MPI_Allreduce(&failed, &first_failed, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (rank == first_failed)
            fprintf(stderr, "%s: %s\n", program, tfenc_context_message(&ctx));
        status = first_failed < n_ranks ? TFENC_ERR_CONFIG : TFENC_OK;
        free(opts.overrides);
        MPI_Finalize();
        main_returned = 1;
        return status == TFENC_OK ? 0 : 1;
    }

    printer out = {.quiet = opts.quiet, .terminal = isatty(2)};
    tfenc_run_request request = {
        .job_path = opts.job_path, .overrides = opts.overrides,
        .n_overrides = opts.n_overrides, .dry_run = opts.dry_run, .stop = &stop_signal,
        .observer = {.user = &out, .notice = print_notice, .progress = print_progress,
                     .plan = print_plan, .summary = print_summary}};
    tfenc_run_result result;
    tfenc_run_job(&ctx, &request, &result);
    free(opts.overrides);

    int exit_code = 0;
    switch (result.outcome) {
    case TFENC_RUN_FINISHED:
    case TFENC_RUN_PLANNED:
        break;
    case TFENC_RUN_STOPPED:
        if (rank == 0)
            fprintf(stderr,
                    "%s: stopped by a signal: %lld of %lld documents are finished in %s (not "
                    "marked complete); run the same command again to resume\n",
                    program, (long long)result.documents_finished,
                    (long long)result.n_documents, result.output_path);
        exit_code = EXIT_INTERRUPTED;
        break;
    case TFENC_RUN_REFUSED:
        if (result.report)
            fprintf(stderr, "%s: %s\n", program, tfenc_context_message(&ctx));
        exit_code = 1;
        break;
    case TFENC_RUN_BROKEN:
        /* Other ranks may be waiting on this one: end them all. Rows
         * already written stay in the file, which is not marked complete. */
        fprintf(stderr, "%s: %s\n", program, tfenc_context_message(&ctx));
        fflush(NULL);
        main_returned = 1; /* Open MPI's abort ends the process with exit() */
        if (n_ranks > 1)
            MPI_Abort(MPI_COMM_WORLD, 1);
        singleton_remove_directory();
        /* Alone: leave at once, as MPI_Abort would. Closing the file could
         * fail again (a full disk) and leave HDF5 unable to shut down; the
         * rows and metadata written so far are in the file already. */
        _exit(1);
    }
    if (result.skip_finalize) {
        fflush(NULL);
        /* MPI still works (only HDF5 cannot shut down): no rank leaves
         * before the one that reports has said why, since the launcher
         * ends the job's other processes once one leaves non-zero. */
        if (n_ranks > 1)
            MPI_Barrier(MPI_COMM_WORLD);
        singleton_remove_directory();
        _exit(exit_code);
    }
    MPI_Finalize();
    main_returned = 1;
    return exit_code;
}
