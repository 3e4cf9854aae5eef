/* The report of tfenc-batch --status: one "name: value" line per fact, the
 * job settings indented below, and what the file cannot tell. */
#include "status.h"

#include <stdio.h>
#include <string.h>

#include "base/context.h"
#include "base/files.h"
#include "base/kept_values.h"
#include "output/inspect.h"
#include "output/kinds.h"
#include "run/job_settings.h"

#include <hdf5.h>
#include <jansson.h>
#include <stdlib.h>

static const char *or_unknown(const char *value)
{
    return value != NULL ? value : "(not recorded)";
}

/* Newline-separated text, one line at a time: *line and *length get the
 * next line (without its newline) and *cursor moves past it; 0 at the end. */
static int next_line(const char **cursor, const char **line, size_t *length)
{
    if (**cursor == '\0')
        return 0;
    *line = *cursor;
    *length = strcspn(*line, "\n");
    *cursor += *length + ((*line)[*length] == '\n');
    return 1;
}

/* Each line of `text` indented by two spaces. */
static void print_indented(const char *text)
{
    const char *line;
    size_t length;
    while (next_line(&text, &line, &length))
        printf("  %.*s\n", (int)length, line);
}

/* int8: the accuracy gate's measurement and the steps it kept out of int8. */
/* The file's path choices (one "section.key=value" a line) on one line. */
static void print_path_choices(const char *choices)
{
    printf("paths:");
    const char *separator = " ";
    for (const char *line = choices; *line != '\0';) {
        const char *end = strchr(line, '\n');
        const int length = end != NULL ? (int)(end - line) : (int)strlen(line);
        printf("%s%.*s", separator, length, line);
        separator = "; ";
        line = end != NULL ? end + 1 : line + length;
    }
    printf("%s\n", choices[0] == '\0' ? " one way to compute each step"
                                        : " (a file's bits follow them; a resume keeps them)");
}

static void print_gate(const tfenc_inspection *i)
{
    if (i->precision_steps == NULL || i->precision_steps[0] == '\0')
        return;
    printf("accuracy gate: min cosine %.6f to fp32 on its sample",
           i->precision_sample_min_cosine);
    int kept = 0;
    const char *cursor = i->precision_steps, *line;
    size_t length;
    while (next_line(&cursor, &line, &length)) {
        const char *space = memchr(line, ' ', length);
        if (space != NULL && i->precision != NULL) {
            /* "step precision": the step's precision, whole, against the job's */
            const char *step_precision = space + 1;
            const size_t precision_length = length - (size_t)(step_precision - line);
            if (precision_length != strlen(i->precision) ||
                strncmp(step_precision, i->precision, precision_length) != 0)
                printf("%s %.*s (%.*s)", kept++ == 0 ? "; kept out of it:" : ",",
                       (int)(space - line), line, (int)precision_length, step_precision);
        }
    }
    printf("%s\n", kept == 0 ? "; every step runs in it" : "");
}

/* Compact vectors: how to read them back (docs/output.md). */
static void print_compact(const tfenc_inspection *i)
{
    const char *dtype = i->dtype != NULL ? i->dtype : "";
    if (strcmp(dtype, "int8") == 0 || strcmp(dtype, "uint8") == 0)
        printf("compact: embeddings are %s buckets, as sentence-transformers' "
               "quantize_embeddings(x, \"%s\", ranges=quantization_ranges) makes them; ranges "
               "%s\n", dtype, dtype, or_unknown(i->quantization_source));
    else if (strcmp(dtype, "binary") == 0 || strcmp(dtype, "ubinary") == 0)
        printf("compact: embeddings hold the signs (x > 0) of %lld dimensions packed 8 per "
               "byte, first dimension in the top bit (numpy.packbits%s); compare by Hamming "
               "distance\n", (long long)i->d_model,
               strcmp(dtype, "binary") == 0 ? ", minus 128 as int8" : "");
}

/* A file name on one line of the report: a tab, a newline or another
 * control byte (which a name may hold) as a C escape, and a backslash
 * doubled, so that each file keeps its line. */
static void print_name(const char *name)
{
    for (const unsigned char *p = (const unsigned char *)name; *p != '\0'; p++) {
        if (*p == '\t')
            fputs("\\t", stdout);
        else if (*p == '\n')
            fputs("\\n", stdout);
        else if (*p == '\\')
            fputs("\\\\", stdout);
        else if (*p < 0x20 || *p == 0x7f)
            printf("\\x%02x", *p);
        else
            putchar(*p);
    }
}

/* Whether a dot product of two rows is their cosine (the README's
 * nearest-neighbour recipe): said for vectors, not for scores, sparse rows
 * or compact codes (print_compact says what those are). */
static void print_unit_norm(const tfenc_inspection *i)
{
    const tfenc_output_kind_entry *kind = tfenc_output_kind_named(i->output_kind);
    const char *dtype = i->dtype != NULL ? i->dtype : "";
    if ((kind != NULL && !kind->unit_rows) || strcmp(dtype, "int8") == 0 || strcmp(dtype, "uint8") == 0 ||
        strcmp(dtype, "binary") == 0 || strcmp(dtype, "ubinary") == 0)
        return;
    if (i->unit_norm == 1)
        printf("rows: unit length (L2 norm 1, attribute unit_norm = 1): a dot product of two "
               "rows is their cosine similarity\n");
    else if (i->unit_norm == 0)
        printf("rows: not of unit length (attribute unit_norm = 0: the model does not "
               "normalise them): divide each row by its norm before ranking by dot product\n");
    else
        printf("rows: unit length not recorded (an older tfenc; its chunk means, with "
               "long_documents = chunk, are shorter than unit): normalise the rows before "
               "ranking by dot product\n");
}

/* The corpus's files, when it has several: how many, and the first and
 * last few with their documents. */
static void print_shards(const tfenc_inspection *i)
{
    const tfenc_corpus_shards *table = &i->corpus_shards;
    const int n = table->n;
    if (n <= 1)
        return;
    printf("corpus: %d files%s\n", n,
           i->has_document_source ? " (document_source gives each row's file and line)" : "");
    const int shown = 10;
    for (int k = 0; k < n; k++) {
        if (n > 2 * shown && k >= shown && k < n - shown) {
            if (k == shown)
                printf("  ... %d more\n", n - 2 * shown);
            continue;
        }
        const tfenc_corpus_shard *shard = &table->shards[k];
        printf("  ");
        print_name(shard->path);
        printf(": %lld documents from row %lld", (long long)shard->documents,
               (long long)shard->first_document);
        if (shard->skipped > 0)
            printf(", %lld null texts left out", (long long)shard->skipped);
        printf("\n");
    }
}

/* The kept fields ([job] keep_fields), one line: each dataset and what it
 * holds, and where its nulls are. */
static void print_kept(const tfenc_inspection *i)
{
    if (i->n_kept == 0)
        return;
    printf("kept fields:");
    for (int k = 0; k < i->n_kept; k++) {
        printf("%s ", k == 0 ? "" : ",");
        print_name(i->kept[k].name);
        if (i->kept[k].bytes > 0)
            printf(" (%s, up to %lld bytes)", i->kept[k].type, (long long)i->kept[k].bytes);
        else
            printf(" (%s)", i->kept[k].type);
    }
    printf("; null where NAME_valid is 0\n");
}

/* The rows: what the file's kind says of them (output/kinds.h), or its
 * attributes as they are for a kind this tfenc does not know. */
static void print_output(const tfenc_inspection *i)
{
    const tfenc_output_kind_entry *kind = tfenc_output_kind_named(i->output_kind);
    const tfenc_output_summary summary = {
        .path = i->path, .dtype = i->dtype, .n_documents = i->n_documents,
        .n_rows = i->n_tokens, .width = i->d_model, .labels = i->id2label,
        .sparse_top_k = (long)i->sparse_top_k, .sparse_threshold = i->sparse_threshold,
        .sparse_values = i->sparse_values, .has_vocabulary = i->has_vocabulary,
        .multivector_mode = i->multivector_mode, .multivector_marker = i->multivector_marker,
        .multivector_skiplist = i->multivector_skiplist,
        .multivector_query_padding = i->multivector_query_padding,
        .multivector_first_token = i->multivector_first_token};
    char *described = kind != NULL ? kind->describe_status(&summary) : NULL;
    if (described != NULL)
        printf("output: %s", described);
    else {
        printf("output: %s, %s, d_model %lld", or_unknown(i->output_kind), or_unknown(i->dtype),
               (long long)i->d_model);
        if (i->n_tokens >= 0)
            printf(", %lld token rows", (long long)i->n_tokens);
    }
    free(described);
}

/* A job of several heads: each further head's rows (group /outputs/NAME),
 * as its kind says them. */
static void print_heads(const tfenc_inspection *i)
{
    if (i->head != NULL)
        printf("heads: %d; the output above is head %s (the root's datasets)\n",
               i->n_heads + 1, i->head);
    for (int k = 0; k < i->n_heads; k++) {
        const tfenc_inspected_head *h = &i->heads[k];
        const tfenc_output_kind_entry *kind = tfenc_output_kind_named(h->output_kind);
        /* A sparse head's rows wait in logs named after PATH.head-NAME. */
        char logs[4096];
        snprintf(logs, sizeof logs, "%s.head-%s", i->path, h->name);
        const tfenc_output_summary summary = {
            .path = logs, .dtype = h->dtype, .n_documents = i->n_documents, .n_rows = -1,
            .width = h->d_model, .labels = h->id2label, .sparse_values = h->sparse_values};
        char *described = kind != NULL ? kind->describe_status(&summary) : NULL;
        printf("output %s (group /outputs/%s): %s%s\n", h->name, h->name,
               described != NULL ? described : or_unknown(h->output_kind),
               h->unit_norm == 1 ? ", rows of unit length" : "");
        free(described);
    }
}

/* Each run's figures (attribute run_summaries), one line a run. */
static void print_runs(const tfenc_inspection *i)
{
    json_t *runs = i->run_summaries != NULL ? json_loads(i->run_summaries, 0, NULL) : NULL;
    if (!json_is_array(runs)) {
        printf("runs: %s\n", i->run_summaries != NULL ? "(attribute run_summaries is not a JSON array)"
                                                      : "(not recorded)");
        json_decref(runs);
        return;
    }
    printf("runs: %zu (attribute run_summaries)\n", json_array_size(runs));
    size_t index;
    json_t *run;
    json_array_foreach(runs, index, run) {
        printf("  %zu: %s, %lld documents, %lld tokens in %.1f s;", index + 1,
               json_is_true(json_object_get(run, "finished")) ? "finished" : "stopped",
               (long long)json_integer_value(json_object_get(run, "documents")),
               (long long)json_integer_value(json_object_get(run, "tokens")),
               json_number_value(json_object_get(run, "elapsed_seconds")));
        size_t k;
        json_t *rank;
        json_array_foreach(json_object_get(run, "ranks"), k, rank)
            printf("%s rank %zu %.0f tokens/s", k == 0 ? "" : ",", k,
                   json_number_value(json_object_get(rank, "tokens_per_second")));
        printf("\n");
    }
    json_decref(runs);
}

static void print_report(const tfenc_inspection *i)
{
    printf("file: %s\n", i->path);
    printf("state: %s\n", i->complete ? "complete (every row written; complete = 1)"
                          : i->in_use ? "unfinished, and a process is writing it now"
                                      : "unfinished (complete = 0)");
    if (i->n_finished >= 0)
        printf("documents: %lld of %lld finished (%.1f%%), %lld of them truncated\n",
               (long long)i->n_finished, (long long)i->n_documents,
               i->n_documents > 0 ? 100.0 * (double)i->n_finished / (double)i->n_documents
                                  : 100.0,
               (long long)i->n_truncated);
    else
        printf("documents: %lld; how many are finished cannot be told (an older tfenc wrote "
               "lengths without the 'not written' mark)\n", (long long)i->n_documents);
    print_output(i);
    printf(", compression %s\n", or_unknown(i->compression));
    print_heads(i);
    print_compact(i);
    print_unit_norm(i);
    print_shards(i);
    print_kept(i);
    printf("model: weights sha256 %s\n", or_unknown(i->weights_sha256));
    if (i->precision == NULL)
        printf("precision: (not recorded)\n");
    else
        printf("precision: %s%s\n", i->precision,
               i->precision_recorded ? "" : " (not recorded; from the job settings or the "
                                            "default)");
    print_gate(i);
    if (i->kernels != NULL)
        printf("kernels: %s (of the last run; a file's bits follow them)\n", i->kernels);
    if (i->path_choices != NULL)
        print_path_choices(i->path_choices);
    print_runs(i);
    printf("layout: %s%s\n", or_unknown(i->layout),
           i->layout != NULL ? " (of the last run)" : "");
    printf("written by: tfenc %s, created %s\n", or_unknown(i->tfenc_version),
           or_unknown(i->created));
    if (i->job_path != NULL)
        printf("job file: %s (run in %s)\n", i->job_path, or_unknown(i->working_directory));
    else
        printf("job file: (not recorded; the job text is in the file's 'job' attribute)\n");
    if (i->job_overrides != NULL && i->job_overrides[0] != '\0') {
        printf("overrides:");
        for (const char *line = i->job_overrides; *line != '\0';) {
            size_t length = strcspn(line, "\n");
            printf(" --set %.*s", (int)length, line);
            line += length + (line[length] == '\n');
        }
        printf("\n");
    }
    if (i->job_settings != NULL) {
        printf("job settings:\n");
        print_indented(i->job_settings);
    } else {
        printf("job settings: (not recorded; the job text is in the 'job' attribute)\n");
    }
    if (!i->complete) {
        if (i->resume_command != NULL) {
            printf("resume with%s:\n  %s\n",
                   i->in_use ? " (once the job writing it has stopped)" : "",
                   i->resume_command);
        } else {
            printf("resume with: (cannot be told: the file does not record its job file and "
                   "options; run the job that wrote it again)\n");
        }
    }
    if (i->unknown[0] != '\0')
        printf("not recorded (written by an older tfenc): %s\n", i->unknown);
}

/* ---------------------------------------------------------------- JSON */

static json_t *string_or_null(const char *value)
{
    return value != NULL ? json_string(value) : json_null();
}

static json_t *integer_or_null(int64_t value)
{
    return value >= 0 ? json_integer((json_int_t)value) : json_null();
}

/* Text of one item a line as an array of its lines; null for NULL. */
static json_t *lines_array(const char *text)
{
    if (text == NULL)
        return json_null();
    json_t *array = json_array();
    const char *line;
    size_t length;
    while (array != NULL && next_line(&text, &line, &length))
        if (length > 0)
            json_array_append_new(array, json_stringn(line, length));
    return array;
}

/* The same facts as print_report, as one JSON object (docs/output.md). */
static json_t *report_json(const tfenc_inspection *i)
{
    json_t *datasets = json_object();
    for (int k = 0; datasets != NULL && k < i->n_datasets; k++) {
        json_t *shape = json_array();
        for (int d = 0; shape != NULL && d < i->datasets[k].rank; d++)
            json_array_append_new(shape, json_integer((json_int_t)i->datasets[k].shape[d]));
        json_object_set_new(datasets, i->datasets[k].name, shape);
    }
    json_t *corpus = json_array();
    for (int k = 0; corpus != NULL && k < i->corpus_shards.n; k++) {
        const tfenc_corpus_shard *shard = &i->corpus_shards.shards[k];
        json_array_append_new(corpus, json_pack("{s:s, s:I, s:I, s:I}", "path", shard->path,
                                                "documents", (json_int_t)shard->documents,
                                                "first_document",
                                                (json_int_t)shard->first_document, "skipped",
                                                (json_int_t)shard->skipped));
    }
    json_t *kept = json_array();
    for (int k = 0; kept != NULL && k < i->n_kept; k++) {
        char mask[512];
        snprintf(mask, sizeof mask, "%s" TFENC_KEPT_MASK_SUFFIX, i->kept[k].name);
        json_array_append_new(kept, json_pack("{s:s, s:s, s:s, s:o}", "name", i->kept[k].name,
                                              "type", i->kept[k].type, "valid", mask, "bytes",
                                              integer_or_null(i->kept[k].bytes > 0
                                                                  ? i->kept[k].bytes : -1)));
    }
    json_t *heads = json_array();
    for (int k = 0; heads != NULL && k < i->n_heads; k++) {
        const tfenc_inspected_head *h = &i->heads[k];
        char group[300];
        snprintf(group, sizeof group, "/outputs/%s", h->name);
        json_array_append_new(
            heads, json_pack("{s:s, s:s, s:o, s:o, s:o, s:o, s:o}", "name", h->name, "group",
                             group, "kind", string_or_null(h->output_kind), "dtype",
                             string_or_null(h->dtype), "d_model", integer_or_null(h->d_model),
                             "unit_norm", h->unit_norm >= 0 ? json_boolean(h->unit_norm)
                                                            : json_null(),
                             "id2label", string_or_null(h->id2label)));
    }
    json_t *runs = i->run_summaries != NULL ? json_loads(i->run_summaries, 0, NULL) : NULL;
    json_t *not_recorded = json_array();
    for (const char *name = i->unknown; not_recorded != NULL && *name != '\0';) {
        size_t length = strcspn(name, ",");
        json_array_append_new(not_recorded, json_stringn(name, length));
        name += length;
        name += strspn(name, ", ");
    }
    /* "o" takes each value, also when packing fails. */
    return json_pack(
        "{s:s, s:b, s:b, s:{s:o, s:o, s:o},"
        " s:{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o},"
        " s:o, s:o, s:b, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
        "file", i->path, "complete", i->complete, "in_use", i->in_use,
        "documents", "finished", integer_or_null(i->n_finished),
        "total", integer_or_null(i->n_documents), "truncated", integer_or_null(i->n_truncated),
        "output", "kind", string_or_null(i->output_kind), "dtype", string_or_null(i->dtype),
        "d_model", integer_or_null(i->d_model), "compression", string_or_null(i->compression),
        "unit_norm", i->unit_norm >= 0 ? json_boolean(i->unit_norm) : json_null(),
        "datasets", datasets, "head", string_or_null(i->head), "heads", heads,
        "kept_fields", kept,
        "precision", string_or_null(i->precision), "precision_recorded", i->precision_recorded,
        "kernels", string_or_null(i->kernels), "path_choices", lines_array(i->path_choices),
        "weights_sha256", string_or_null(i->weights_sha256),
        "corpus_files", corpus, "runs", runs != NULL ? runs : json_null(),
        "layout", string_or_null(i->layout), "tfenc_version", string_or_null(i->tfenc_version),
        "created", string_or_null(i->created), "job_file", string_or_null(i->job_path),
        "working_directory", string_or_null(i->working_directory),
        "overrides", lines_array(i->job_overrides),
        "resume_command", string_or_null(i->complete ? NULL : i->resume_command),
        "not_recorded", not_recorded);
}

/* The output a job file names, or NULL (with the reason in ctx) when
 * `path` is not a job file either. */
static char *output_of_job(tfenc_context *ctx, const char *path, const char *const *overrides,
                           int n_overrides)
{
    tfenc_jobfile *job = NULL;
    char *output = NULL;
    int status = tfenc_jobfile_load(ctx, path, &job);
    for (int i = 0; status == TFENC_OK && i < n_overrides; i++)
        status = tfenc_jobfile_override(ctx, job, overrides[i]);
    if (status == TFENC_OK)
        tfenc_job_settings_output_path(ctx, job, &output);
    tfenc_jobfile_destroy(job);
    return output;
}

int status_print(const char *path, const char *const *overrides, int n_overrides, int as_json)
{
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_inspection inspection;
    char *output = NULL;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    /* Before HDF5 looks at it: H5Fis_hdf5 of a FIFO waits for a writer
     * forever (core/base/files.h). A missing file is reported below. */
    if (tfenc_file_present(path) && tfenc_file_check_regular(&ctx, "--status", path) != TFENC_OK) {
        fprintf(stderr, "tfenc-batch: %s\n", tfenc_context_message(&ctx));
        return 1;
    }
    if (H5Fis_hdf5(path) <= 0 && (output = output_of_job(&ctx, path, overrides, n_overrides)) == NULL) {
        /* Neither: say so as an output file would. */
        tfenc_context_clear(&ctx);
        output = NULL;
    }
    int status = tfenc_inspect_output(&ctx, output != NULL ? output : path, &inspection);
    free(output);
    int exit_code = status != TFENC_OK       ? 1
                    : inspection.complete ? 0
                                          : STATUS_UNFINISHED;
    json_t *report = status == TFENC_OK && as_json ? report_json(&inspection) : NULL;
    if (status == TFENC_OK && as_json && report == NULL) {
        status = TFENC_ERR_NO_MEMORY;
        tfenc_error(&ctx, status, "%s: cannot make the JSON report (out of memory)", path);
        exit_code = 1;
    }
    if (status != TFENC_OK)
        fprintf(stderr, "tfenc-batch: %s\n", tfenc_context_message(&ctx));
    else if (report != NULL) {
        json_dumpf(report, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
        putchar('\n');
    } else
        print_report(&inspection);
    json_decref(report);
    tfenc_inspection_free(&inspection);
    return exit_code;
}
