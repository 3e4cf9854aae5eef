/* The output opened (run/output_opening.h): claimed, its identity made
 * (the job, the weights, the corpus, the plugins, the calibration), then
 * created or reopened by the last stages with the writer and, for a sparse
 * head, its rows and logs. */
#include "config.h"

#include "run/output_opening.h"

#include "base/sha256.h"
#include "matrix/matrix.h"
#include "output/fingerprint.h"
#include "run/heads.h"
#include "run/job_reading.h"
#include "run/kind_survey.h"
#include "run/work_left.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
static int list_inputs(tfenc_run *r, input_list *list)
{
    int status = add_input(list, "the job file", "", r->settings.job_file->path);
    if (status == TFENC_OK)
        status = tfenc_jobfile_each_input(r->settings.job_file, add_input, list);
    /* The corpus's files ([job] input: a file, a directory, a glob, or a
     * list file, which is an input too). */
    const tfenc_sources *sources = &r->settings.job.sources;
    const int one_file = sources->n == 1 && strcmp(sources->paths[0], r->settings.job.input) == 0;
    for (int i = 0; status == TFENC_OK && i < sources->n; i++)
        status = add_input(list, one_file ? "the corpus" : "a corpus shard", "[job] input",
                           sources->paths[i]);
    struct stat input;
    if (status == TFENC_OK && stat(r->settings.job.input, &input) == 0 && S_ISREG(input.st_mode) &&
        (sources->n != 1 || strcmp(sources->paths[0], r->settings.job.input) != 0))
        status = add_input(list, "the list of the corpus's files", "[job] input",
                           r->settings.job.input);
    for (int i = 0; status == TFENC_OK && i < tfenc_plugin_registry_n_layers(r->settings.registry);
         i++)
        status = add_input(list, "the plugin",
                           tfenc_plugin_registry_layer(r->settings.registry, i)->descriptor->type,
                           tfenc_plugin_registry_layer(r->settings.registry, i)->file);
    return status == TFENC_ERR_NO_MEMORY
               ? tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory")
               : status;
}

/* Whether the output traces each row to its file and line (output.h:
 * document_source): when a row's index alone does not tell, with several
 * files, or with records left out. A token-id corpus is one file. */
static int needs_document_source(const tfenc_run *r)
{
    return !tfenc_corpus_format_token_ids(r->settings.job.corpus.format) &&
           (r->settings.job.sources.n > 1 ||
            r->settings.job.corpus.null_text == TFENC_NULL_TEXT_SKIP);
}

/* The corpus's fingerprint over all its files, and the table of them the
 * output keeps (output/corpus_shards.h) with their located paths, from the
 * counting pass's documents per file. Collective; free the table with
 * tfenc_corpus_shards_free. */
static int fingerprint_corpus(tfenc_run *r, char hex[65], tfenc_corpus_shards *table)
{
    memset(table, 0, sizeof *table);
    const tfenc_sources *sources = &r->settings.job.sources;
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
        shard->documents = r->plan.windows.source_documents != NULL && i < r->plan.windows.n_sources
                               ? r->plan.windows.source_documents[i] : -1;
        shard->skipped = r->plan.windows.source_skipped != NULL && i < r->plan.windows.n_sources
                             ? r->plan.windows.source_skipped[i] : 0;
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
static int claim_output(tfenc_run *r)
{
    int status = TFENC_OK;
    if (r->rank == 0) {
        input_list inputs = {0};
        status = list_inputs(r, &inputs);
        if (status == TFENC_OK)
            status = tfenc_output_check_not_input(r->ctx, r->settings.job.output, inputs.files,
                                                  inputs.n);
        free_inputs(&inputs);
        if (status == TFENC_OK)
            status = tfenc_output_lock_take(r->ctx, r->settings.job.output, &r->state.lock);
    }
    return tfenc_run_agree_on_failure(r, status);
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

static int list_plugin_files(tfenc_run *r, plugin_files *files)
{
    const int n_layers = tfenc_plugin_registry_n_layers(r->settings.registry);
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
        const tfenc_plugin_layer *layer = tfenc_plugin_registry_layer(r->settings.registry, i);
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
    return tfenc_run_agree_on_failure(r, status);
}

/* The job's identity (tfenc_job_settings_identity), then the content of
 * each layer's weights_file: "head.weights_file sha256 = ..." lines, so that
 * a resumed run with another head in the same file name is refused. NULL
 * when out of memory. */
static char *weights_files_identity(tfenc_run *r)
{
    char *identity = tfenc_job_settings_identity(r->settings.job_file, &r->settings.job);
    const int n_steps = tfenc_model_plan_count_every_step(&r->settings.steps);
    for (int i = 0; identity != NULL && i < n_steps; i++) {
        const tfenc_step_plan *step = tfenc_model_plan_every_step(&r->settings.steps, i);
        if (step->weights_file == NULL)
            continue;
        const char *name = step->name;
        size_t length = strlen(identity), size = length + strlen(name) + 100;
        char *grown = realloc(identity, size);
        if (grown == NULL) {
            free(identity);
            return NULL;
        }
        identity = grown;
        snprintf(identity + length, size - length, "%s.weights_file sha256 = %s\n", name,
                 r->settings.weights_file_sha256[i]);
    }
    return identity;
}

static tfenc_sparse_settings sparse_settings(const tfenc_run *r)
{
    return (tfenc_sparse_settings){.path = r->settings.job.output,
                                   .n_documents = r->plan.n_documents,
                                   .width = r->plan.kind_width,
                                   .top_k = r->settings.job.sparse_top_k,
                                   .threshold = r->settings.job.sparse_threshold};
}

/* The last stage's side of a sparse head: the microbatch's rows, which the
 * head fills through the context's sink, and this writer's log. Resumed,
 * first the rows the earlier runs' logs hold soundly (before this run's
 * log joins them). */
static int open_sparse_rows(tfenc_run *r, MPI_Comm writers, int resumed, int was_complete)
{
    const tfenc_sparse_settings settings = sparse_settings(r);
    char damage[TFENC_MESSAGE_MAX / 2] = "";
    int status = TFENC_OK;
    if (resumed) {
        status = tfenc_sparse_logged(r->ctx, r->state.output, &settings, was_complete,
                                     &r->state.sparse_logged, damage, sizeof damage);
        r->state.sparse_csr_whole = status == TFENC_OK && r->state.sparse_logged == NULL;
    }
    /* Said by the writer that read the logs, which is rank 0 only with one
     * pipeline stage. */
    const tfenc_run_observer *o = &r->settings.request->observer;
    if (status == TFENC_OK && damage[0] != '\0' && o->notice != NULL) {
        char line[TFENC_MESSAGE_MAX];
        snprintf(line, sizeof line, "%s: its rows are dropped, and the documents they held "
                 "are encoded again", damage);
        o->notice(o->user, line);
    }
    if (status == TFENC_OK)
        status = tfenc_sparse_rows_create(r->ctx, r->plan.kind_width, r->settings.job.sparse_top_k,
                                          r->settings.job.sparse_threshold, &r->state.sparse_rows);
    if (status == TFENC_OK)
        status = tfenc_sparse_log_open(r->ctx, &settings, writers, resumed, &r->state.sparse_log);
    if (status != TFENC_OK)
        return status;
    tfenc_writer_set_sparse(r->state.writer, r->state.sparse_log);
    return TFENC_OK;
}

/* The last stages open the file: reopened to resume when a previous run of
 * the same job left it, else created. */
int tfenc_run_open_output(tfenc_run *r)
{
    char weights_sha256[65] = "", corpus_fingerprint[65] = "", vocabulary_fingerprint[65] = "";
    char kernels[256];
    tfenc_matrix_describe_kernels(r->settings.model.fp32_products, kernels, sizeof kernels);
    if (claim_output(r))
        return 1;
    plugin_files plugins = {0};
    if (list_plugin_files(r, &plugins)) {
        free(plugins.paths);
        free(plugins.sha256);
        return 1;
    }
    /* Every layer has read its weights, the tokenizer its file, by now. */
    int status = r->rank == 0 ? tfenc_run_check_watched(r, NULL) : TFENC_OK;
    if (r->rank == 0)
        memcpy(weights_sha256, r->settings.weights_sha256, sizeof weights_sha256);
    if (tfenc_run_agree_on_failure(r, status))
        return 1;
    MPI_Bcast(weights_sha256, sizeof weights_sha256, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Bcast(r->settings.weights_file_sha256,
              tfenc_model_plan_count_every_step(&r->settings.steps) *
                  (int)sizeof *r->settings.weights_file_sha256,
              MPI_CHAR, 0, MPI_COMM_WORLD);
    tfenc_corpus_shards corpus_shards;
    if (tfenc_run_agree_on_failure(r, fingerprint_corpus(r, corpus_fingerprint, &corpus_shards)))
        return 1;
    if (r->settings.job.vocabulary != NULL &&
        tfenc_run_agree_on_failure(r, tfenc_fingerprint_file(r->ctx, MPI_COMM_WORLD,
                                                             r->settings.job.vocabulary,
                                                             vocabulary_fingerprint))) {
        tfenc_corpus_shards_free(&corpus_shards);
        return 1;
    }
    const tfenc_layout *l = &r->plan.layout;
    char layout[128];
    snprintf(layout, sizeof layout, "ranks=%d data_parallel=%d pipeline_stages=%d", r->n_ranks,
             l->data_parallel, l->pipeline_stages);
    int was_complete = 0, resumed = 0;
    char *identity = weights_files_identity(r);
    char *provenance = tfenc_job_settings_provenance(
        r->settings.job_file, r->settings.request->overrides, r->settings.request->n_overrides);
    if (identity == NULL || provenance == NULL)
        status = tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    if (status == TFENC_OK && tfenc_layout_is_last_stage(l)) {
        tfenc_output_options o = {
            .path = r->settings.job.output,
            .kind = r->plan.kind,
            .dtype = r->settings.job.dtype,
            .compression = r->settings.job.compression,
            .unit_norm = tfenc_run_rows_unit_length(r),
            .unit_chunk_means = tfenc_run_unit_chunk_means(r),
            .width = tfenc_run_row_width(r),
            .n_documents = r->plan.n_documents,
            .n_rows = r->plan.n_rows,
            .chunks = r->settings.job.chunks,
            .has_ids = r->settings.job.corpus.id_field != NULL,
            .has_token_ids = r->settings.job.output_ids,
            .has_document_source = needs_document_source(r),
            .max_id_length = r->plan.windows.max_id_length,
            .kept_fields = r->plan.kept_fields,
            .n_kept_fields = r->settings.job.corpus.n_keep_fields,
            .job_text = provenance,
            .job_settings = identity,
            .weights_sha256 = weights_sha256,
            .corpus_path = r->settings.job.input,
            .corpus_fingerprint = corpus_fingerprint,
            .corpus_shards = &corpus_shards,
            .vocabulary_path = r->settings.job.vocabulary,
            .vocabulary_fingerprint =
                r->settings.job.vocabulary != NULL ? vocabulary_fingerprint : NULL,
            .plugin_paths = plugins.paths,
            .plugin_sha256 = plugins.sha256,
            .n_plugins = plugins.n,
            .layout = layout,
            .job_path = r->settings.request->job_path,
            .overrides = r->settings.request->overrides,
            .n_overrides = r->settings.request->n_overrides,
            .precision = tfenc_precision_names[r->settings.model.precision],
            .kernels = kernels,
            .path_choices = r->plan.paths.assignments,
            .sample_min_cosine = r->plan.sample_cosine,
            .precision_steps =
                r->plan.step_precision != NULL ? r->plan.calibration.precision_steps : NULL,
            .calibration = r->plan.step_precision != NULL ? &r->plan.calibration : NULL,
            .ranges = r->plan.ranges,
            .ranges_source = r->plan.ranges_source,
            .sample_indices = r->plan.sample_indices,
            .n_sample = r->plan.n_sample,
            .labels = r->plan.labels,
            .multivector_mode = tfenc_multivector_mode_names[r->settings.job.multivector_query],
            .multivector_marker = r->settings.job.multivector_query
                                      ? r->settings.job.query_marker
                                      : r->settings.job.document_marker,
            .multivector_skiplist = r->plan.multivector.skiplist_text,
            .multivector_first_token = r->settings.job.skip_first_token ? "skipped" : "kept",
            .multivector_query_padding = !r->settings.job.multivector_query      ? ""
                                         : r->settings.job.attend_to_mask_tokens ? "attended"
                                                                                 : "masked"};
        MPI_Comm writers = l->data_parallel > 1 ? r->plan.writers_comm : MPI_COMM_NULL;
        status = TFENC_ERR_NOT_FOUND;
        if (r->settings.job.resume)
            status = tfenc_output_reopen(r->ctx, writers, &o, &r->state.output, &was_complete);
        resumed = status == TFENC_OK;
        if (status == TFENC_ERR_NOT_FOUND)
            status = tfenc_output_create(r->ctx, writers, &o, &r->state.output);
        if (status == TFENC_OK)
            status = tfenc_writer_create(
                r->ctx, r->state.output, r->plan.kind, tfenc_run_row_width(r),
                r->settings.job.chunks, (int)r->settings.job.output_dim, r->settings.model.d_model,
                l->data_parallel, r->settings.job.output, &r->state.writer);
        if (status == TFENC_OK && tfenc_run_unit_chunk_means(r))
            tfenc_writer_set_unit_means(r->state.writer);
        if (status == TFENC_OK && r->settings.job.late_chunk)
            tfenc_writer_set_late_chunks(r->state.writer);
        if (status == TFENC_OK && r->plan.kind->rows == TFENC_ROWS_SPARSE)
            status = open_sparse_rows(r, writers, resumed, was_complete);
        if (status == TFENC_OK)
            status =
                tfenc_writer_set_skiplist(r->ctx, r->state.writer, &r->plan.multivector.skiplist);
        if (status == TFENC_OK && r->settings.steps.first_head != NULL) {
            tfenc_model_options heads = tfenc_run_model_options(r, 0, r->settings.steps.n_steps);
            status = tfenc_heads_create(r->ctx, &heads, r->plan.model, &r->state.heads);
        }
        if (status == TFENC_OK && r->state.heads != NULL)
            status = tfenc_heads_open_outputs(r->ctx, r->state.heads, r->state.output,
                                              r->settings.steps.first_head, resumed,
                                              was_complete);
        if (status == TFENC_OK && r->state.heads != NULL)
            tfenc_writer_set_before_metadata(r->state.writer, tfenc_heads_sync, r->state.heads);
    }
    free(identity);
    free(provenance);
    free(plugins.paths);
    free(plugins.sha256);
    tfenc_corpus_shards_free(&corpus_shards);
    /* HDF5 cannot always shut down after a failed write to a new file. */
    if (status == TFENC_ERR_IO)
        r->result->skip_finalize = 1;
    if (tfenc_run_agree_on_failure(r, status))
        return 1;
    return tfenc_run_learn_progress(r, resumed, was_complete);
}

/* Every writer, the job complete: the CSR from every log, with the
 * vocabulary that names its columns. */
int tfenc_run_finish_sparse_rows(tfenc_run *r)
{
    const char **tokens = NULL, **vocabulary = NULL;
    /* Only the first stage has the tokenizer; every writer needs the
     * vocabulary (the dataset is created collectively). */
    tfenc_tokenizer *own = NULL, *tokenizer = r->plan.tokenizer;
    int status = tokenizer != NULL
                     ? TFENC_OK
                     : tfenc_job_settings_tokenizer(r->ctx, r->settings.job_file,
                                                    &r->settings.model, &r->settings.job, &own);
    if (own != NULL)
        tokenizer = own;
    if (status == TFENC_OK && tokenizer != NULL) {
        status = tfenc_tokenizer_tokens(r->ctx, tokenizer, &tokens);
        vocabulary = status == TFENC_OK ? calloc((size_t)r->plan.kind_width, sizeof *vocabulary)
                                        : NULL;
        if (status == TFENC_OK && vocabulary == NULL)
            status = tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        /* A model's vocabulary may be padded past the tokenizer's ids. */
        const int known = tfenc_tokenizer_vocab_size(tokenizer);
        for (int i = 0; vocabulary != NULL && i < r->plan.kind_width; i++)
            vocabulary[i] = i < known ? tokens[i] : "";
    }
    const tfenc_sparse_settings settings = sparse_settings(r);
    if (status == TFENC_OK)
        status = tfenc_sparse_finish(r->ctx, r->state.output, &settings, vocabulary,
                                     r->state.sparse_csr_whole);
    free(tokens);
    tfenc_tokenizer_destroy(own);
    free(vocabulary);
    return status;
}
