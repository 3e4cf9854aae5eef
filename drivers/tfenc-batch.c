/* tfenc-batch: encodes a corpus with the encoder a job file composes and
 * writes the encodings to HDF5. Every MPI rank is a data-parallel replica
 * that owns one share of the corpus; all ranks write into one output file.
 * This is the only place (with tfenc-import) that prints or exits. */
#include "config.h"

#include "context.h"
#include "corpus.h"
#include "jobfile.h"
#include "model.h"
#include "output.h"
#include "params.h"
#include "plugin_loader.h"
#include "sha256.h"
#include "tokenizer.h"
#include "weights.h"
#include "aligned.h"

#include <cblas.h>
#include <hdf5.h>
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* Documents read ahead and sorted by length before batching: enough to make
 * microbatches of similar lengths, small enough that memory stays flat. */
#define WINDOW_DOCUMENTS 2048

typedef struct options {
    const char *job_path;
    const char **overrides;
    int n_overrides;
    int dry_run;
    int quiet;
    int list_plugins;
} options;

/* The [job] section. */
typedef struct job_settings {
    char *input;
    char *output;
    tfenc_corpus_options corpus;
    const char *output_kind_name;
    tfenc_output_dtype dtype;
    tfenc_output_compression compression;
    long batch_tokens;
    long max_seq_len;
    int truncation;
    int invalid_utf8_error;
    long pipeline_stages;
    long threads;
    double progress_interval;
} job_settings;

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
    tfenc_model *model;
    tfenc_tokenizer *tokenizer;
    tfenc_corpus *corpus;
    tfenc_output *output;
    int pooled;
} run;

static const char *program = "tfenc-batch";

static void usage(FILE *stream)
{
    fprintf(stream,
            "usage: %s [options] JOB.ini\n"
            "Encodes the job's corpus with its encoder and writes HDF5 (see docs/job-file.md).\n"
            "  --set SECTION.KEY=VALUE  override a job key (repeatable)\n"
            "  --dry-run                validate the job, load the model, count the corpus,\n"
            "                           print the plan and its cost; encode nothing\n"
            "  --list-plugins           list the layer types found and the plugins refused\n"
            "  --quiet                  no progress and no summary\n"
            "  --version, --help\n"
            "Run under MPI (mpirun -n N %s JOB.ini) to split the corpus across ranks.\n",
            program, program);
}

static int parse_arguments(int argc, char **argv, options *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->overrides = calloc((size_t)argc, sizeof *opts->overrides);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            usage(stdout);
            return 1;
        } else if (strcmp(arg, "--version") == 0) {
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
            fprintf(stderr, "%s: unknown option '%s' (try --help)\n", program, arg);
            return 2;
        } else if (opts->job_path == NULL) {
            opts->job_path = arg;
        } else {
            fprintf(stderr, "%s: more than one job file ('%s' and '%s')\n", program,
                    opts->job_path, arg);
            return 2;
        }
    }
    if (opts->job_path == NULL && !opts->list_plugins) {
        fprintf(stderr, "%s: no job file given (try --help)\n", program);
        return 2;
    }
    return 0;
}

/* ------------------------------------------------------------ job keys */

static int job_origin_error(run *r, const char *key, const char *message)
{
    tfenc_job_section *section = tfenc_jobfile_find(r->job, "job");
    tfenc_job_entry *entry = tfenc_job_section_get(section, key);
    if (entry != NULL && entry->line > 0)
        return tfenc_error(&r->ctx, TFENC_ERR_CONFIG, "%s:%d: [job] %s: %s", r->job->path,
                           entry->line, key, message);
    return tfenc_error(&r->ctx, TFENC_ERR_CONFIG, "%s: [job] %s: %s", r->job->path, key, message);
}

static int read_job_settings(run *r)
{
    static const char *const kinds[] = {"auto", "pooled", "tokens", NULL};
    static const char *const dtypes[] = {"float32", "float16", "bfloat16", NULL};
    static const char *const compressions[] = {"none", "gzip", NULL};
    static const char *const formats[] = {"auto", "text", "jsonl", "hdf5", NULL};
    static const char *const policies[] = {"replace", "error", NULL};
    job_settings *s = &r->settings;
    tfenc_job_section *section = tfenc_jobfile_find(r->job, "job");
    if (section == NULL)
        return tfenc_error(&r->ctx, TFENC_ERR_CONFIG, "%s: missing section [job]", r->job->path);
    tfenc_params p;
    tfenc_params_bind(&p, &r->ctx, r->job, section);
    const char *input = NULL, *output = NULL;
    int kind = 0, dtype = 0, compression = 0, format = 0, policy = 0;
    int status = TFENC_OK;
#define READ(call) if (status == TFENC_OK) status = (call)
    READ(tfenc_param_string(&p, "input", NULL, &input));
    READ(tfenc_param_choice(&p, "input_format", formats, 0, &format));
    READ(tfenc_param_string(&p, "text_field", "text", &s->corpus.text_field));
    READ(tfenc_param_string(&p, "id_field", NULL, &s->corpus.id_field));
    READ(tfenc_param_string(&p, "tokens_dataset", "tokens", &s->corpus.tokens_dataset));
    READ(tfenc_param_string(&p, "offsets_dataset", "offsets", &s->corpus.offsets_dataset));
    READ(tfenc_param_string(&p, "ids_dataset", NULL, &s->corpus.ids_dataset));
    READ(tfenc_param_string(&p, "lengths_dataset", NULL, &s->corpus.lengths_dataset));
    READ(tfenc_param_string(&p, "output", NULL, &output));
    READ(tfenc_param_choice(&p, "output_kind", kinds, 0, &kind));
    READ(tfenc_param_choice(&p, "output_dtype", dtypes, 0, &dtype));
    READ(tfenc_param_choice(&p, "compression", compressions, 0, &compression));
    READ(tfenc_param_int(&p, "batch_tokens", 8192, &s->batch_tokens));
    /* Without a limit the model's own is the natural one (512 at most, as BERT's). */
    READ(tfenc_param_int(&p, "max_seq_len",
                         r->config.max_positions < 512 ? r->config.max_positions : 512,
                         &s->max_seq_len));
    READ(tfenc_param_bool(&p, "truncation", 1, &s->truncation));
    READ(tfenc_param_choice(&p, "invalid_utf8", policies, 0, &policy));
    READ(tfenc_param_int(&p, "pipeline_stages", 1, &s->pipeline_stages));
    READ(tfenc_param_int(&p, "threads", 0, &s->threads));
    READ(tfenc_param_float(&p, "progress_interval", 10.0, &s->progress_interval));
    READ(tfenc_params_check_all_used(&p, "not a [job] key; see docs/job-file.md"));
#undef READ
    if (status != TFENC_OK)
        return status;
    if (input == NULL)
        return tfenc_error(&r->ctx, TFENC_ERR_CONFIG, "%s: [job] requires key 'input'",
                           r->job->path);
    if (output == NULL)
        return tfenc_error(&r->ctx, TFENC_ERR_CONFIG, "%s: [job] requires key 'output'",
                           r->job->path);
    s->input = tfenc_jobfile_resolve_path(r->job, input);
    s->output = tfenc_jobfile_resolve_path(r->job, output);
    if (s->input == NULL || s->output == NULL)
        return tfenc_error(&r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    s->corpus.path = s->input;
    s->corpus.format = format == 0 ? tfenc_corpus_format_from_path(s->input)
                                   : (tfenc_corpus_format)(format - 1);
    s->output_kind_name = kinds[kind];
    s->dtype = (tfenc_output_dtype)dtype;
    s->compression = (tfenc_output_compression)compression;
    s->invalid_utf8_error = policy == 1;
    if (s->max_seq_len < 2 || s->max_seq_len > r->config.max_positions)
        return job_origin_error(r, "max_seq_len", "must be in 2..[model] max_positions");
    if (s->batch_tokens < s->max_seq_len || s->batch_tokens > (1L << 24))
        return job_origin_error(r, "batch_tokens",
                                "must be at least max_seq_len (a document must fit a batch) "
                                "and at most 16777216");
    if (s->pipeline_stages < 1)
        return job_origin_error(r, "pipeline_stages", "must be >= 1");
    if (s->pipeline_stages > 1)
        return job_origin_error(r, "pipeline_stages",
                                "pipeline parallelism is not available yet in this version; "
                                "use pipeline_stages = 1 (every rank is a data-parallel replica)");
    if (s->threads < 0 || s->progress_interval <= 0)
        return job_origin_error(r, s->threads < 0 ? "threads" : "progress_interval",
                                "must be positive");
    if (strcmp(s->input, s->output) == 0)
        return job_origin_error(r, "output", "is the same file as the input");
    return TFENC_OK;
}

/* ------------------------------------------------------------ tokenizer */

/* The vocabulary and settings tfenc-import stores under /tokenizer. */
static int tokenizer_from_weights(run *r, const tfenc_tokenizer_options *base,
                                  tfenc_job_section *section)
{
    const char *path = r->config.weights_path;
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0)
        return tfenc_error(&r->ctx, TFENC_ERR_WEIGHTS, "weights %s: cannot open", path);
    int status = TFENC_OK;
    hid_t dataset = H5Lexists(file, "/tokenizer", H5P_DEFAULT) > 0 &&
                            H5Lexists(file, "/tokenizer/vocab", H5P_DEFAULT) > 0
                        ? H5Dopen2(file, "/tokenizer/vocab", H5P_DEFAULT)
                        : H5I_INVALID_HID;
    if (dataset < 0) {
        H5Fclose(file);
        return tfenc_error(&r->ctx, TFENC_ERR_CONFIG,
                           "%s: text input needs a vocabulary: set [tokenizer] vocab = vocab.txt, "
                           "or use weights made by tfenc-import (%s has no /tokenizer/vocab)",
                           r->job->path, path);
    }
    tfenc_tokenizer_options opts = *base;
    /* Settings stored by the importer apply unless the job sets them. */
    hid_t group = H5Gopen2(file, "/tokenizer", H5P_DEFAULT);
    struct {
        const char *attribute, *key;
        int *target;
    } settings[] = {{"do_lower_case", "lowercase", &opts.lowercase},
                    {"strip_accents", "strip_accents", &opts.strip_accents},
                    {"tokenize_chinese_chars", "chinese_chars", &opts.chinese_chars}};
    for (size_t i = 0; i < sizeof settings / sizeof *settings; i++) {
        if (tfenc_job_section_get(section, settings[i].key) != NULL ||
            H5Aexists(group, settings[i].attribute) <= 0)
            continue;
        hid_t attribute = H5Aopen(group, settings[i].attribute, H5P_DEFAULT);
        int value = 0;
        if (attribute >= 0 && H5Aread(attribute, H5T_NATIVE_INT, &value) >= 0)
            *settings[i].target = value;
        if (attribute >= 0)
            H5Aclose(attribute);
    }
    H5Gclose(group);
    hid_t space = H5Dget_space(dataset);
    hssize_t count = H5Sget_simple_extent_npoints(space);
    hid_t string_type = H5Tcopy(H5T_C_S1);
    H5Tset_size(string_type, H5T_VARIABLE);
    H5Tset_cset(string_type, H5T_CSET_UTF8);
    char **tokens = count > 0 ? calloc((size_t)count, sizeof *tokens) : NULL;
    if (tokens == NULL || H5Dread(dataset, string_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, tokens) < 0)
        status = tfenc_error(&r->ctx, TFENC_ERR_WEIGHTS,
                             "weights %s: /tokenizer/vocab is not a list of strings", path);
    if (status == TFENC_OK)
        status = tfenc_tokenizer_create_from_tokens(&r->ctx, (const char *const *)tokens,
                                                    (int)count, &opts, &r->tokenizer);
    if (tokens != NULL) {
        H5Dvlen_reclaim(string_type, space, H5P_DEFAULT, tokens);
        free(tokens);
    }
    H5Tclose(string_type);
    H5Sclose(space);
    H5Dclose(dataset);
    H5Fclose(file);
    return status;
}

static int setup_tokenizer(run *r)
{
    static const char *const accents[] = {"auto", "true", "false", NULL};
    tfenc_job_section *section = tfenc_jobfile_find(r->job, "tokenizer");
    if (r->settings.corpus.format == TFENC_CORPUS_HDF5) {
        if (section != NULL && section->n_entries > 0)
            return tfenc_error(&r->ctx, TFENC_ERR_CONFIG,
                               "%s:%d: [tokenizer] is not used: the input holds token ids",
                               r->job->path, section->line);
        return TFENC_OK;
    }
    tfenc_params p;
    tfenc_params_bind(&p, &r->ctx, r->job, section);
    tfenc_tokenizer_options opts;
    tfenc_tokenizer_options_default(&opts);
    const char *vocab = NULL;
    int accent = 0;
    int status = tfenc_param_string(&p, "vocab", NULL, &vocab);
    if (status == TFENC_OK)
        status = tfenc_param_bool(&p, "lowercase", 1, &opts.lowercase);
    if (status == TFENC_OK)
        status = tfenc_param_choice(&p, "strip_accents", accents, 0, &accent);
    if (status == TFENC_OK)
        status = tfenc_param_bool(&p, "chinese_chars", 1, &opts.chinese_chars);
    if (status == TFENC_OK)
        status = tfenc_params_check_all_used(&p, "not a [tokenizer] key");
    if (status != TFENC_OK)
        return status;
    opts.strip_accents = accent == 0 ? -1 : accent == 1;
    opts.invalid_utf8 = r->settings.invalid_utf8_error ? TFENC_INVALID_UTF8_ERROR
                                                       : TFENC_INVALID_UTF8_REPLACE;
    if (vocab == NULL)
        return tokenizer_from_weights(r, &opts, section);
    char *path = tfenc_jobfile_resolve_path(r->job, vocab);
    if (path == NULL)
        return tfenc_error(&r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    status = tfenc_tokenizer_create_from_file(&r->ctx, path, &opts, &r->tokenizer);
    free(path);
    if (status == TFENC_OK && r->config.vocab_size > 0 &&
        tfenc_tokenizer_vocab_size(r->tokenizer) > r->config.vocab_size)
        status = tfenc_error(&r->ctx, TFENC_ERR_CONFIG,
                             "%s: the vocabulary has %d tokens but [model] vocab_size is %d",
                             r->job->path, tfenc_tokenizer_vocab_size(r->tokenizer),
                             r->config.vocab_size);
    return status;
}

/* ------------------------------------------------------------- encoding */

/* A document of the current window, tokenized. */
typedef struct pending {
    int64_t global_index;
    int64_t token_offset; /* first row in `hidden` (tokens kind) */
    int32_t *ids;         /* into the window's id pool */
    int32_t length;
    int32_t truncated;
    char *id;             /* document id, or NULL */
} pending;

typedef struct window {
    pending *documents;
    int n_documents;
    int32_t *id_pool; /* WINDOW_DOCUMENTS * max_seq_len ids */
    size_t pool_used;
    int *order;       /* documents sorted by length, longest first */
    /* microbatch staging */
    int32_t *seq_start, *token_ids, *token_types, *positions;
    int64_t *indices, *offsets;
    int32_t *lengths, *truncated;
    const char **ids;
    float *x;
} window;

typedef struct totals {
    int64_t documents;
    int64_t tokens;
    int64_t truncated_documents;
    double busy_seconds;
} totals;

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Turns a document into ids: the tokenizer for text, the ids as given for
 * HDF5 inputs (checked against the length limit either way). */
static int tokenize(run *r, const tfenc_document *document, int64_t global_index, int32_t *ids,
                    int32_t *length, int32_t *truncated)
{
    const int max_length = (int)r->settings.max_seq_len;
    int n_ids = 0, cut = 0;
    if (document->token_ids != NULL || r->tokenizer == NULL) {
        n_ids = document->n_tokens < max_length ? document->n_tokens : max_length;
        cut = document->n_tokens - n_ids;
        memcpy(ids, document->token_ids, (size_t)n_ids * sizeof *ids);
        if (n_ids == 0)
            return tfenc_error(&r->ctx, TFENC_ERR_INPUT,
                               "%s: document %lld has no tokens (an encoder needs at least one)",
                               r->settings.input, (long long)global_index);
        if (r->config.vocab_size > 0)
            for (int i = 0; i < n_ids; i++)
                if (ids[i] >= r->config.vocab_size)
                    return tfenc_error(&r->ctx, TFENC_ERR_INPUT,
                                       "%s: document %lld: token id %d is outside the "
                                       "vocabulary (vocab_size %d)",
                                       r->settings.input, (long long)global_index, ids[i],
                                       r->config.vocab_size);
    } else {
        int status = tfenc_tokenizer_encode(&r->ctx, r->tokenizer, document->text,
                                            document->text_length, ids, max_length, &n_ids, &cut);
        if (status != TFENC_OK) {
            /* The tokenizer knows the text, not where it came from. */
            char message[TFENC_MESSAGE_MAX];
            snprintf(message, sizeof message, "%s", tfenc_context_message(&r->ctx));
            tfenc_context_clear(&r->ctx);
            return tfenc_error(&r->ctx, status, "%s: document %lld (0-based): %s",
                               r->settings.input, (long long)global_index, message);
        }
    }
    if (cut > 0 && !r->settings.truncation)
        return tfenc_error(&r->ctx, TFENC_ERR_INPUT,
                           "%s: document %lld has %d tokens, more than max_seq_len %ld "
                           "(set [job] truncation = true to cut it)",
                           r->settings.input, (long long)global_index, n_ids + cut,
                           r->settings.max_seq_len);
    *length = n_ids;
    *truncated = cut;
    return TFENC_OK;
}

static int window_allocate(run *r, window *w)
{
    size_t batch = (size_t)r->settings.batch_tokens, d = (size_t)r->config.d_model;
    memset(w, 0, sizeof *w);
    w->documents = calloc(WINDOW_DOCUMENTS, sizeof *w->documents);
    w->id_pool = malloc((size_t)WINDOW_DOCUMENTS * (size_t)r->settings.max_seq_len * sizeof(int32_t));
    w->order = malloc(WINDOW_DOCUMENTS * sizeof *w->order);
    w->seq_start = malloc((batch + 1) * sizeof *w->seq_start);
    w->token_ids = malloc(batch * sizeof *w->token_ids);
    w->token_types = calloc(batch, sizeof *w->token_types);
    w->positions = malloc(batch * sizeof *w->positions);
    /* Per-document arrays: a microbatch's sequences are window documents too. */
    w->indices = malloc(WINDOW_DOCUMENTS * sizeof *w->indices);
    w->offsets = malloc(WINDOW_DOCUMENTS * sizeof *w->offsets);
    w->lengths = malloc(WINDOW_DOCUMENTS * sizeof *w->lengths);
    w->truncated = malloc(WINDOW_DOCUMENTS * sizeof *w->truncated);
    w->ids = calloc(WINDOW_DOCUMENTS, sizeof *w->ids);
    w->x = tfenc_aligned_alloc(batch * d * sizeof(float));
    if (!w->documents || !w->id_pool || !w->order || !w->seq_start || !w->token_ids ||
        !w->token_types || !w->positions || !w->indices || !w->offsets || !w->lengths ||
        !w->truncated || !w->ids || !w->x)
        return tfenc_error(&r->ctx, TFENC_ERR_NO_MEMORY,
                           "out of memory for batch buffers (batch_tokens %ld x d_model %d)",
                           r->settings.batch_tokens, r->config.d_model);
    return TFENC_OK;
}

static void window_free(window *w)
{
    for (int i = 0; i < w->n_documents; i++)
        free(w->documents[i].id);
    free(w->documents);
    free(w->id_pool);
    free(w->order);
    free(w->seq_start);
    free(w->token_ids);
    free(w->token_types);
    free(w->positions);
    free(w->indices);
    free(w->offsets);
    free(w->lengths);
    free(w->truncated);
    free(w->ids);
    tfenc_aligned_free(w->x);
}

static const pending *sort_documents;

/* Longest first; ties by index so that the order is reproducible. */
static int by_length(const void *a, const void *b)
{
    const pending *x = &sort_documents[*(const int *)a], *y = &sort_documents[*(const int *)b];
    if (x->length != y->length)
        return x->length > y->length ? -1 : 1;
    return x->global_index < y->global_index ? -1 : x->global_index > y->global_index;
}

/* Encodes the window's documents in length-sorted microbatches of at most
 * batch_tokens real tokens, writing each microbatch's rows as it finishes. */
static int encode_window(run *r, window *w, totals *sums)
{
    const int d = r->config.d_model;
    for (int i = 0; i < w->n_documents; i++)
        w->order[i] = i;
    sort_documents = w->documents;
    qsort(w->order, (size_t)w->n_documents, sizeof *w->order, by_length);
    int next = 0;
    while (next < w->n_documents) {
        int n_seq = 0, n_tokens = 0;
        w->seq_start[0] = 0;
        while (next < w->n_documents &&
               n_tokens + w->documents[w->order[next]].length <= r->settings.batch_tokens) {
            const pending *doc = &w->documents[w->order[next]];
            memcpy(w->token_ids + n_tokens, doc->ids, (size_t)doc->length * sizeof(int32_t));
            for (int t = 0; t < doc->length; t++)
                w->positions[n_tokens + t] = t;
            w->indices[n_seq] = doc->global_index;
            w->offsets[n_seq] = doc->token_offset;
            w->lengths[n_seq] = doc->length;
            n_tokens += doc->length;
            w->seq_start[++n_seq] = n_tokens;
            next++;
        }
        tfenc_batch batch = {.n_seq = n_seq, .n_tokens = n_tokens, .seq_start = w->seq_start,
                             .token_ids = w->token_ids, .token_types = w->token_types,
                             .positions = w->positions, .x = w->x, .rows = n_tokens,
                             .d_model = d};
        double start = now_seconds();
        int status = tfenc_model_forward(&r->ctx, r->model, &batch);
        sums->busy_seconds += now_seconds() - start;
        if (status != TFENC_OK)
            return status;
        if (r->pooled && batch.rows != n_seq)
            return tfenc_error(&r->ctx, TFENC_ERR_PLUGIN,
                               "the model's output has %d rows for %d documents; with "
                               "output_kind = pooled the model must end in pooling",
                               batch.rows, n_seq);
        if (!r->pooled && batch.rows != n_tokens)
            return tfenc_error(&r->ctx, TFENC_ERR_CONFIG,
                               "the model pools its output (%d rows for %d tokens): set [job] "
                               "output_kind = pooled or auto",
                               batch.rows, n_tokens);
        status = r->pooled
                     ? tfenc_output_write_pooled(&r->ctx, r->output, n_seq, w->indices, w->x)
                     : tfenc_output_write_tokens(&r->ctx, r->output, n_seq, w->indices,
                                                 w->offsets, w->lengths, w->x);
        if (status != TFENC_OK)
            return status;
        sums->tokens += n_tokens;
    }
    /* Metadata after the rows: a length of -1 marks a row not yet written. */
    for (int i = 0; i < w->n_documents; i++) {
        const pending *doc = &w->documents[i];
        w->indices[i] = doc->global_index;
        w->lengths[i] = doc->length;
        w->truncated[i] = doc->truncated;
        w->ids[i] = doc->id != NULL ? doc->id : "";
        sums->truncated_documents += doc->truncated > 0;
    }
    int status = tfenc_output_write_metadata(&r->ctx, r->output, w->n_documents, w->indices,
                                             w->lengths, w->truncated, w->ids);
    sums->documents += w->n_documents;
    for (int i = 0; i < w->n_documents; i++) {
        free(w->documents[i].id);
        w->documents[i].id = NULL;
    }
    w->n_documents = 0;
    w->pool_used = 0;
    return status;
}

typedef struct progress {
    int enabled;
    int terminal;
    double start;
    double last;
    double interval;
    int64_t share_documents;
    int n_ranks;
} progress;

static void report_progress(progress *p, const totals *sums, int final)
{
    if (!p->enabled)
        return;
    double now = now_seconds();
    if (!final && now - p->last < (p->terminal ? 0.5 : p->interval))
        return;
    p->last = now;
    double elapsed = now - p->start;
    double rate = elapsed > 0 ? (double)sums->tokens / elapsed : 0.0;
    double fraction = p->share_documents > 0 ? (double)sums->documents / (double)p->share_documents : 1.0;
    double eta = fraction > 0 ? elapsed / fraction - elapsed : 0.0;
    char line[256];
    snprintf(line, sizeof line, "%s%lld/%lld documents, %.0f tokens/s, ETA %.0f s",
             p->n_ranks > 1 ? "rank 0: " : "", (long long)sums->documents,
             (long long)p->share_documents, rate, eta);
    if (p->terminal)
        fprintf(stderr, "\r%s\033[K%s", line, final ? "\n" : "");
    else
        fprintf(stderr, "%s: %s\n", program, line);
}

/* Runs one microbatch of one 2-token sequence through the model to learn
 * whether it pools (rows drop to one per sequence): this also works for
 * custom pooling plugins, and checks the model runs before any I/O. */
static int probe_pooling(run *r, int *pools)
{
    int32_t starts[2] = {0, 2}, ids[2] = {0, 0}, positions[2] = {0, 1}, types[2] = {0, 0};
    float *x = tfenc_aligned_alloc(2 * (size_t)r->config.d_model * sizeof(float));
    if (x == NULL)
        return tfenc_error(&r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    tfenc_batch batch = {.n_seq = 1, .n_tokens = 2, .seq_start = starts, .token_ids = ids,
                         .token_types = types, .positions = positions, .x = x, .rows = 2,
                         .d_model = r->config.d_model};
    int status = tfenc_model_forward(&r->ctx, r->model, &batch);
    *pools = batch.rows == 1;
    tfenc_aligned_free(x);
    return status;
}

/* Everything before the first document is encoded; errors here are the
 * same on every rank, so only one rank reports them. */
static int setup(run *r, const options *opts)
{
    int status = tfenc_jobfile_load(&r->ctx, opts->job_path, &r->job);
    for (int i = 0; status == TFENC_OK && i < opts->n_overrides; i++)
        status = tfenc_jobfile_override(&r->ctx, r->job, opts->overrides[i]);
    if (status == TFENC_OK)
        status = tfenc_model_config_read(&r->ctx, r->job, &r->config);
    if (status == TFENC_OK)
        status = read_job_settings(r);
    if (status == TFENC_OK)
        status = tfenc_model_plan_read(&r->ctx, r->job, &r->plan);
    if (status == TFENC_OK)
        status = setup_tokenizer(r);
    if (status == TFENC_OK && r->settings.threads > 0)
        openblas_set_num_threads((int)r->settings.threads);
    if (status == TFENC_OK)
        status = tfenc_plugin_registry_create(&r->ctx, r->config.plugin_path, &r->registry);
    if (status == TFENC_OK)
        status = tfenc_plugin_registry_scan(&r->ctx, r->registry);
    if (status == TFENC_OK)
        status = tfenc_weight_store_open(&r->ctx, r->config.weights_path, &r->weights);
    if (status == TFENC_OK) {
        tfenc_model_options model_options = {
            .job = r->job, .config = &r->config, .plan = &r->plan, .registry = r->registry,
            .weights = r->weights,
            .limits = {.max_tokens = (int)r->settings.batch_tokens,
                       .max_seq_len = (int)r->settings.max_seq_len,
                       .max_seqs = (int)r->settings.batch_tokens},
            .first_step = 0, .end_step = r->plan.n_steps};
        status = tfenc_model_create(&r->ctx, &model_options, &r->model);
    }
    int pools = 0;
    if (status == TFENC_OK)
        status = probe_pooling(r, &pools);
    if (status == TFENC_OK) {
        const char *kind = r->settings.output_kind_name;
        if (strcmp(kind, "auto") == 0)
            r->pooled = pools;
        else
            r->pooled = strcmp(kind, "pooled") == 0;
        if (r->pooled != pools)
            status = tfenc_error(&r->ctx, TFENC_ERR_CONFIG,
                                 "%s: output_kind = %s but the model %s its output", r->job->path,
                                 kind, pools ? "pools" : "does not pool");
    }
    if (status == TFENC_OK)
        status = tfenc_corpus_open(&r->ctx, &r->settings.corpus, r->rank, r->n_ranks, &r->corpus);
    return status;
}

/* The lowest rank that failed reports; every rank learns whether any did. */
static int agree_on_failure(run *r, int status)
{
    int failed_rank = status != TFENC_OK ? r->rank : r->n_ranks;
    int first_failed = r->n_ranks;
    MPI_Allreduce(&failed_rank, &first_failed, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first_failed < r->n_ranks && r->rank == first_failed)
        fprintf(stderr, "%s: %s\n", program, tfenc_context_message(&r->ctx));
    return first_failed < r->n_ranks;
}

/* A failure in the middle of encoding: other ranks may be anywhere, so the
 * job ends through MPI_Abort, which Open MPI turns into every rank's exit. */
static void abort_job(run *r)
{
    if (r->n_ranks > 1)
        fprintf(stderr, "%s: rank %d: %s\n", program, r->rank, tfenc_context_message(&r->ctx));
    else
        fprintf(stderr, "%s: %s\n", program, tfenc_context_message(&r->ctx));
    fflush(stderr);
    if (r->n_ranks > 1)
        MPI_Abort(MPI_COMM_WORLD, 1);
    tfenc_output_close(r->output);
    r->output = NULL;
    MPI_Finalize();
    exit(1);
}

static void print_plan(run *r, int64_t n_documents, int64_t n_tokens)
{
    printf("job %s\n", r->job->path);
    printf("layout: %d rank%s, data_parallel = %d, pipeline_stages = 1\n", r->n_ranks,
           r->n_ranks > 1 ? "s" : "", r->n_ranks);
    printf("model: d_model = %d, %d steps, weights %s\n", r->config.d_model, r->plan.n_steps,
           r->config.weights_path);
    double mean_length = n_documents > 0 ? (double)n_tokens / (double)n_documents : 0.0;
    double total_flops = 0;
    for (int i = 0; i < r->plan.n_steps; i++) {
        double flops = tfenc_model_step_flops(r->model, i, mean_length);
        total_flops += flops;
        printf("  step %3d  %-28s %-12s %10.3f MFLOP/token\n", i, r->plan.steps[i].name,
               tfenc_model_step_type(r->model, i), flops / 1e6);
    }
    printf("output: %s (%s, %s)\n", r->settings.output, r->pooled ? "pooled" : "tokens",
           tfenc_output_dtype_name(r->settings.dtype));
    printf("corpus: %s, %lld documents, %lld tokens after truncation (mean %.1f)\n",
           r->settings.input, (long long)n_documents, (long long)n_tokens, mean_length);
    printf("estimated cost: %.3f TFLOP\n", total_flops * (double)n_tokens / 1e12);
}

/* First pass over the share: counts documents and, for per-token output and
 * the plan, tokens after truncation. Nothing is kept but the sums. */
static int count_share(run *r, int need_tokens, tfenc_corpus_counts *counts, int64_t *tokens)
{
    int status = tfenc_corpus_count(&r->ctx, r->corpus, counts);
    *tokens = 0;
    if (status != TFENC_OK || !need_tokens)
        return status;
    int32_t *ids = malloc((size_t)r->settings.max_seq_len * sizeof *ids);
    if (ids == NULL)
        return tfenc_error(&r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    tfenc_document document;
    int64_t first = tfenc_corpus_first_index(r->corpus);
    while ((status = tfenc_corpus_next(&r->ctx, r->corpus, &document)) == TFENC_OK) {
        int32_t length, truncated;
        status = tokenize(r, &document, first + document.local_index, ids, &length, &truncated);
        if (status != TFENC_OK)
            break;
        *tokens += length;
    }
    free(ids);
    if (status == TFENC_ERR_NOT_FOUND)
        status = tfenc_corpus_rewind(&r->ctx, r->corpus);
    return status;
}

static long peak_rss_kib(void)
{
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_maxrss;
}

static void release_run(run *r)
{
    tfenc_output_close(r->output);
    tfenc_corpus_close(r->corpus);
    tfenc_tokenizer_destroy(r->tokenizer);
    tfenc_model_destroy(r->model);
    tfenc_weight_store_close(r->weights);
    tfenc_plugin_registry_destroy(r->registry);
    tfenc_model_plan_free(&r->plan);
    tfenc_model_config_free(&r->config);
    free(r->settings.input);
    free(r->settings.output);
    tfenc_jobfile_destroy(r->job);
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

int main(int argc, char **argv)
{
    options opts;
    int parsed = parse_arguments(argc, argv, &opts);
    if (parsed != 0) {
        free(opts.overrides);
        return parsed == 1 ? 0 : 2;
    }
    MPI_Init(&argc, &argv);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    run r;
    memset(&r, 0, sizeof r);
    tfenc_context_init(&r.ctx);
    MPI_Comm_rank(MPI_COMM_WORLD, &r.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &r.n_ranks);
    int exit_code = 0;

    if (opts.list_plugins) {
        if (agree_on_failure(&r, list_plugins(&r, &opts)))
            exit_code = 1;
        goto finish;
    }
    double start = now_seconds();
    if (agree_on_failure(&r, setup(&r, &opts))) {
        exit_code = 1;
        goto finish;
    }

    /* Pass 1: count the share; global indices and token offsets follow by scans. */
    tfenc_corpus_counts counts = {0};
    int64_t share_tokens = 0;
    int status = count_share(&r, !r.pooled || opts.dry_run, &counts, &share_tokens);
    if (agree_on_failure(&r, status)) {
        exit_code = 1;
        goto finish;
    }
    int64_t first_index = 0, first_token = 0, n_documents = 0, n_tokens = 0;
    long long max_id = (long long)counts.max_id_length, file_max_id = 0;
    MPI_Exscan(&counts.n_documents, &first_index, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Exscan(&share_tokens, &first_token, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    if (r.rank == 0)
        first_index = first_token = 0; /* MPI_Exscan leaves rank 0's result undefined */
    MPI_Allreduce(&counts.n_documents, &n_documents, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&share_tokens, &n_tokens, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&max_id, &file_max_id, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    if (tfenc_corpus_first_index(r.corpus) < 0)
        tfenc_corpus_set_first_index(r.corpus, first_index);
    first_index = tfenc_corpus_first_index(r.corpus);

    if (opts.dry_run) {
        if (r.rank == 0)
            print_plan(&r, n_documents, n_tokens);
        goto finish;
    }
    if (n_documents == 0) {
        if (r.rank == 0)
            fprintf(stderr, "%s: %s: the corpus holds no documents\n", program, r.settings.input);
        exit_code = 1;
        goto finish;
    }

    char weights_sha256[65] = "";
    char layout[128];
    snprintf(layout, sizeof layout, "ranks=%d data_parallel=%d pipeline_stages=1", r.n_ranks,
             r.n_ranks);
    status = TFENC_OK;
    if (r.rank == 0)
        status = tfenc_sha256_file(&r.ctx, r.config.weights_path, weights_sha256);
    MPI_Bcast(weights_sha256, sizeof weights_sha256, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (status == TFENC_OK) {
        tfenc_output_options output_options = {
            .path = r.settings.output, .kind = r.pooled ? TFENC_OUTPUT_POOLED : TFENC_OUTPUT_TOKENS,
            .dtype = r.settings.dtype, .compression = r.settings.compression,
            .d_model = r.config.d_model, .n_documents = n_documents, .n_tokens = n_tokens,
            .has_ids = r.settings.corpus.id_field != NULL,
            .max_id_length = (size_t)file_max_id, .job_text = r.job->text,
            .weights_sha256 = weights_sha256, .layout = layout};
        status = tfenc_output_create(&r.ctx, r.n_ranks > 1 ? MPI_COMM_WORLD : MPI_COMM_NULL,
                                     &output_options, &r.output);
    }
    if (agree_on_failure(&r, status)) {
        exit_code = 1;
        goto finish;
    }

    /* Pass 2: read a window, tokenize, sort by length, encode, write. */
    window w;
    totals sums = {0};
    progress bar = {.enabled = !opts.quiet && r.rank == 0, .terminal = isatty(2),
                    .start = now_seconds(), .interval = r.settings.progress_interval,
                    .share_documents = counts.n_documents, .n_ranks = r.n_ranks};
    bar.last = bar.start;
    status = window_allocate(&r, &w);
    int64_t token_cursor = first_token;
    tfenc_document document;
    while (status == TFENC_OK &&
           (status = tfenc_corpus_next(&r.ctx, r.corpus, &document)) == TFENC_OK) {
        pending *doc = &w.documents[w.n_documents];
        doc->global_index = first_index + document.local_index;
        doc->ids = w.id_pool + w.pool_used;
        status = tokenize(&r, &document, doc->global_index, doc->ids, &doc->length,
                          &doc->truncated);
        if (status != TFENC_OK)
            break;
        doc->id = document.id != NULL ? strdup(document.id) : NULL;
        doc->token_offset = token_cursor;
        token_cursor += doc->length;
        w.pool_used += (size_t)doc->length;
        if (++w.n_documents == WINDOW_DOCUMENTS) {
            status = encode_window(&r, &w, &sums);
            report_progress(&bar, &sums, 0);
        }
    }
    if (status == TFENC_ERR_NOT_FOUND) {
        tfenc_context_clear(&r.ctx);
        status = w.n_documents > 0 ? encode_window(&r, &w, &sums) : TFENC_OK;
    }
    window_free(&w);
    if (status != TFENC_OK)
        abort_job(&r);
    report_progress(&bar, &sums, 1);

    status = tfenc_output_finish(&r.ctx, r.output);
    r.output = NULL;
    if (agree_on_failure(&r, status)) {
        exit_code = 1;
        goto finish;
    }

    /* Summary: totals over ranks, and how evenly the work was spread. */
    double wall = now_seconds() - start;
    int64_t all_truncated = 0, all_tokens = 0;
    double busy_max = 0, busy_sum = 0;
    long rss = peak_rss_kib(), rss_max = 0;
    MPI_Reduce(&sums.truncated_documents, &all_truncated, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&sums.tokens, &all_tokens, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&sums.busy_seconds, &busy_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&sums.busy_seconds, &busy_sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&rss, &rss_max, 1, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
    if (r.rank == 0 && !opts.quiet) {
        double imbalance = busy_sum > 0 ? busy_max / (busy_sum / r.n_ranks) : 1.0;
        fprintf(stderr,
                "%s: wrote %s: %lld documents (%lld truncated), %lld tokens in %.2f s, "
                "%.0f tokens/s, %d rank%s (compute imbalance max/mean %.2f), peak RSS %.1f MiB per rank\n",
                program, r.settings.output, (long long)n_documents, (long long)all_truncated,
                (long long)all_tokens, wall, wall > 0 ? (double)all_tokens / wall : 0.0,
                r.n_ranks, r.n_ranks > 1 ? "s" : "", imbalance, (double)rss_max / 1024.0);
    }

finish:
    release_run(&r);
    free(opts.overrides);
    MPI_Finalize();
    return exit_code;
}
