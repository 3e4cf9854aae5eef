/* Reading the [job] section and the tokenizer of a job file. */
#include "run/job_settings.h"
#include "input/formats.h"

#include "base/context.h"
#include "job/params.h"
#include "output/kinds.h"
#include "output/output_checks.h"
#include "output/quantize.h"

#include <ctype.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the readers below consult and fill. */
typedef struct reader {
    tfenc_context *ctx;
    const tfenc_jobfile *job;
    const tfenc_model_config *config;
    tfenc_job_settings *settings;
    tfenc_tokenizer **tokenizer;
} reader;

int tfenc_job_settings_key_error(tfenc_context *ctx, const tfenc_jobfile *job, const char *key,
                                 const char *message)
{
    tfenc_job_section *section = tfenc_jobfile_find(job, "job");
    tfenc_job_entry *entry = tfenc_job_section_get(section, key);
    if (entry != NULL && entry->line > 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s:%d: [job] %s: %s", job->path, entry->line,
                           key, message);
    return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: [job] %s: %s", job->path, key, message);
}

static int job_origin_error(reader *r, const char *key, const char *message)
{
    return tfenc_job_settings_key_error(r->ctx, r->job, key, message);
}

/* A prompt written as a JSON string ("query: "): INI strips the spaces
 * at a value's ends, and prompts often end in one. */
static int decode_prompt(reader *r, const char *value, char **text)
{
    json_error_t error;
    json_t *decoded = json_loads(value, JSON_DECODE_ANY, &error);
    int status = TFENC_OK;
    if (decoded == NULL || !json_is_string(decoded))
        status = job_origin_error(r, "prompt", "a prompt in quotes must be a JSON string, such "
                                               "as \"query: \"");
    else if ((*text = strdup(json_string_value(decoded))) == NULL)
        status = tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    json_decref(decoded);
    return status;
}

/* Every value of [prompts] is a JSON string in quotes (docs/job-file.md):
 * the parser strips the spaces at a value's ends, and prompts often end in
 * one, so an unquoted value would lose it. Each is refused naming its line
 * (or --set), used or not: a job file is checked whole. */
static int check_prompts(reader *r, tfenc_job_section *prompts)
{
    for (int i = 0; prompts != NULL && i < prompts->n_entries; i++) {
        const tfenc_job_entry *entry = &prompts->entries[i];
        json_t *decoded = json_loads(entry->value, JSON_DECODE_ANY, NULL);
        int quoted = entry->value[0] == '"' && json_is_string(decoded);
        json_decref(decoded);
        if (quoted)
            continue;
        return tfenc_params_value_error(r->ctx, r->job, prompts, entry,
                                        "a prompt is a JSON string in quotes, such as "
                                        "\"query: \" (unquoted, the spaces at its ends would be "
                                        "lost)");
    }
    return TFENC_OK;
}

/* [job] prompt: the name of an entry of [prompts] (what tfenc-import writes
 * from sentence-transformers' config), or the text itself as a JSON
 * string. A bare word that names no prompt is refused rather than taken as
 * text: a misspelt name would otherwise change every vector silently. */
static int read_prompt(reader *r, const char *value)
{
    tfenc_job_settings *s = r->settings;
    tfenc_job_section *prompts = tfenc_jobfile_find(r->job, "prompts");
    int status = check_prompts(r, prompts);
    if (status != TFENC_OK || value == NULL || value[0] == '\0')
        return status;
    if (value[0] == '"')
        return decode_prompt(r, value, &s->prompt);
    tfenc_job_entry *entry = tfenc_job_section_get(prompts, value);
    if (entry == NULL) {
        char names[256] = "";
        for (int i = 0; prompts != NULL && i < prompts->n_entries; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "",
                     prompts->entries[i].key);
        char message[512];
        snprintf(message, sizeof message,
                 "'%s' is not a prompt of [prompts] (%s); write a prompt's text as a JSON "
                 "string in quotes", value, names[0] != '\0' ? names : "there is none");
        return job_origin_error(r, "prompt", message);
    }
    entry->used = 1;
    return decode_prompt(r, entry->value, &s->prompt);
}

/* Compact dtypes: binary packs whole bytes; given ranges are for the
 * dtypes that use them. */
static int check_compact_dtype(reader *r, const char *output_ranges)
{
    tfenc_job_settings *s = r->settings;
    const int d = s->output_dim > 0 ? (int)s->output_dim : r->config->d_model;
    char message[256];
    if (tfenc_dtype_is_compact(s->dtype) && !tfenc_dtype_needs_ranges(s->dtype) && d % 8 != 0) {
        snprintf(message, sizeof message, "%s packs 8 dimensions per byte but the vectors have "
                 "%d (set output_dim to a multiple of 8, or another output_dtype)",
                 tfenc_output_dtype_name(s->dtype), d);
        return job_origin_error(r, "output_dtype", message);
    }
    if (output_ranges == NULL)
        return TFENC_OK;
    if (!tfenc_dtype_needs_ranges(s->dtype)) {
        snprintf(message, sizeof message, "applies to output_dtype = int8 or uint8, not %s",
                 tfenc_output_dtype_name(s->dtype));
        return job_origin_error(r, "output_ranges", message);
    }
    /* Two lists, [[min, ...], [max, ...]]: JSON, read when d is known. */
    s->output_ranges_inline = output_ranges[0] == '[';
    if (s->output_ranges_inline)
        return (s->output_ranges = strdup(output_ranges)) != NULL
                   ? TFENC_OK
                   : tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    /* A file is an input like the corpus: read through the input getter, so
     * that the output may not be it (an earlier int8 output is the usual
     * source of ranges) and a resume finds it unchanged. */
    tfenc_params p;
    tfenc_params_bind(&p, r->ctx, r->job, tfenc_jobfile_find(r->job, "job"));
    return tfenc_param_input_path(&p, "output_ranges", "the quantization ranges",
                                  &s->output_ranges);
}

/* [job] input as its files, and the format they are read in: the one
 * input_format names, or the one every file's name implies alike. */
static int read_sources(reader *r, int list_file, int format)
{
    tfenc_job_settings *s = r->settings;
    int status = tfenc_sources_expand(r->ctx, s->input, list_file, &s->sources);
    if (status != TFENC_OK)
        return status;
    s->corpus.path = s->input;
    s->corpus.sources = (const char *const *)s->sources.paths;
    s->corpus.n_sources = s->sources.n;
    if (format != TFENC_CORPUS_AUTO) {
        s->corpus.format = (tfenc_corpus_format)format;
        return TFENC_OK;
    }
    s->corpus.format = tfenc_corpus_format_from_path(s->sources.paths[0]);
    for (int i = 1; i < s->sources.n; i++)
        if (tfenc_corpus_format_from_path(s->sources.paths[i]) != s->corpus.format)
            return tfenc_error(r->ctx, TFENC_ERR_CONFIG, "[job] input %s: %s reads as %s but %s "
                               "as %s: set [job] input_format, or keep one format per corpus",
                               s->input, s->sources.paths[0],
                               tfenc_corpus_format_name(s->corpus.format), s->sources.paths[i],
                               tfenc_corpus_format_name(
                                   tfenc_corpus_format_from_path(s->sources.paths[i])));
    return TFENC_OK;
}

const char *const tfenc_multivector_mode_names[] = {"document", "query", NULL};

/* The [job] values that need more than a typed read before they are
 * settings: paths to resolve against the job file, choice indexes, and the
 * keys whose meaning depends on others. */
typedef struct job_keys {
    const char *input, *output, *prompt, *output_ranges, *query_marker, *document_marker;
    int kind, dtype, compression, format, invalid_utf8;
    int long_documents, chunk_pooling, chunk_scores, chunk_spans;
    long max_id_bytes, max_field_bytes;
    const char *keep_fields;
} job_keys;

/* Reads every [job] key with its type, default and range; an unknown key
 * is an error. Fills what needs no other key into the settings. */
static int read_job_keys(reader *r, tfenc_job_section *section, job_keys *k)
{
    static const char *const policies[] = {"replace", "error", NULL};
    static const char *const long_document_policies[] = {"truncate", "chunk", "late_chunk",
                                                         NULL};
    static const char *const empty_document_policies[] = {"error", "zeros", NULL};
    static const char *const batch_orders[] = {"length", "document", NULL};
    static const char *const chunk_poolings[] = {"mean", "none", NULL};
    static const char *const chunk_scores[] = {"mean", "max", "first", "all", NULL};
    static const char *const chunk_spans[] = {"tokens", "sentences", NULL};
    tfenc_job_settings *s = r->settings;
    tfenc_params p;
    tfenc_params_bind(&p, r->ctx, r->job, section);
    int status = TFENC_OK;
#define READ(call) if (status == TFENC_OK) status = (call)
    /* The corpus is one file, a directory, a glob or @list: its files are
     * the inputs (run.c lists them for the aliasing check and watches them). */
    READ(tfenc_param_string(&p, "input", NULL, &k->input));
    READ(tfenc_param_choice(&p, "input_format", tfenc_corpus_format_names, TFENC_CORPUS_AUTO,
                            &k->format));
    READ(tfenc_param_string(&p, "text_field", "text", &s->corpus.text_field));
    /* Cross-encoders read a pair of texts a line (query, passage). */
    READ(tfenc_param_string(&p, "text_pair_field", NULL, &s->corpus.text_pair_field));
    READ(tfenc_param_string(&p, "id_field", NULL, &s->corpus.id_field));
    /* A null text is an error unless asked to be an empty document or left out. */
    int null_text = TFENC_NULL_TEXT_ERROR;
    READ(tfenc_param_choice(&p, "null_text", tfenc_null_text_names, TFENC_NULL_TEXT_ERROR,
                            &null_text));
    s->corpus.null_text = (tfenc_null_text)null_text;
    /* An id is a name (a URL, a key), not a document. */
    READ(tfenc_param_int_range(&p, "max_id_bytes", 1024, 1, 1L << 20, &k->max_id_bytes));
    /* Metadata carried into the output beside the ids, bounded as they are. */
    READ(tfenc_param_string(&p, "keep_fields", NULL, &k->keep_fields));
    READ(tfenc_param_int_range(&p, "max_field_bytes", 1024, 1, 1L << 20, &k->max_field_bytes));
    READ(tfenc_param_string(&p, "tokens_dataset", "tokens", &s->corpus.tokens_dataset));
    READ(tfenc_param_string(&p, "offsets_dataset", "offsets", &s->corpus.offsets_dataset));
    READ(tfenc_param_string(&p, "ids_dataset", NULL, &s->corpus.ids_dataset));
    READ(tfenc_param_string(&p, "lengths_dataset", NULL, &s->corpus.lengths_dataset));
    READ(tfenc_param_string(&p, "output", NULL, &k->output));
    READ(tfenc_param_choice(&p, "output_kind", tfenc_output_kind_names, TFENC_OUTPUT_AUTO,
                            &k->kind));
    READ(tfenc_param_choice(&p, "output_dtype", tfenc_output_dtype_names, TFENC_DTYPE_FLOAT32,
                            &k->dtype));
    READ(tfenc_param_string(&p, "output_ranges", NULL, &k->output_ranges));
    READ(tfenc_param_choice(&p, "compression", tfenc_output_compression_names,
                            TFENC_COMPRESSION_NONE, &k->compression));

    /* Without a limit the model's own is the natural one (512 at most, as BERT's). */
    READ(tfenc_param_int_range(&p, "max_seq_len",
                               r->config->max_positions < 512 ? r->config->max_positions : 512,
                               2, 1L << 24, &s->max_seq_len));
    /* 2048 tokens make GEMMs of 2048 rows, which run at full rate; more only
     * costs memory (docs/performance.md). A document must fit a batch. */
    READ(tfenc_param_int_range(&p, "batch_tokens", s->max_seq_len > 2048 ? s->max_seq_len : 2048,
                               1, 1L << 24, &s->batch_tokens));
    READ(tfenc_param_bool(&p, "truncation", 1, &s->truncation));
    READ(tfenc_param_choice(&p, "empty_documents", empty_document_policies, 0, &s->empty_zeros));
    READ(tfenc_param_choice(&p, "batch_order", batch_orders, 0, &s->document_order));
    READ(tfenc_param_choice(&p, "long_documents", long_document_policies, 0, &k->long_documents));
    READ(tfenc_param_int_range(&p, "chunk_overlap", 0, 0, 1L << 24, &s->chunk_overlap));
    /* Late chunking's spans: 256 pieces, the paper's fixed-size chunks,
     * unless max_seq_len leaves fewer (checked against the tokenizer's
     * special tokens by the feeder). */
    READ(tfenc_param_int_range(&p, "chunk_tokens", 0, 1, 1L << 24, &s->chunk_tokens));
    /* Spans of chunk_tokens pieces, or a sentence each (run/late_chunks.h). */
    READ(tfenc_param_choice(&p, "chunk_spans", chunk_spans, 0, &k->chunk_spans));
    READ(tfenc_param_choice(&p, "chunk_pooling", chunk_poolings, 0, &k->chunk_pooling));
    READ(tfenc_param_choice(&p, "chunk_scores", chunk_scores, 0, &k->chunk_scores));
    READ(tfenc_param_choice(&p, "invalid_utf8", policies, 0, &k->invalid_utf8));
    /* A window is the unit of work and of reproducibility (windows.h): 2048
     * short documents make about 20 full microbatches to sort by length,
     * and at 10^8 documents the ~50000 windows keep every rank busy to the
     * end. */
    READ(tfenc_param_int_range(&p, "window_documents", 2048, 1, 1L << 20, &s->window_documents));
    READ(tfenc_param_string(&p, "prompt", NULL, &k->prompt));
    /* Ranges on the whole value: these end up in ints (a stage count of
     * 4294967297 must not wrap to 1); 4096 threads is beyond any machine;
     * d_model is at most 65536. */
    READ(tfenc_param_int_range(&p, "output_dim", 0, 0, 65536, &s->output_dim));
    READ(tfenc_param_int_range(&p, "pipeline_stages", 1, 1, INT_MAX, &s->pipeline_stages));
    READ(tfenc_param_int_range(&p, "threads", 0, 0, 4096, &s->threads));
    READ(tfenc_param_float(&p, "progress_interval", 10.0, &s->progress_interval));
    READ(tfenc_param_bool(&p, "resume", 1, &s->resume));
    READ(tfenc_param_bool(&p, "share_weights", 1, &s->share_weights));
    READ(tfenc_param_bool(&p, "output_ids", 0, &s->output_ids));
    /* Checked against the vocabulary once the model says its width. */
    READ(tfenc_param_int_range(&p, "sparse_top_k", 0, 0, INT_MAX, &s->sparse_top_k));
    READ(tfenc_param_float(&p, "sparse_threshold", 0.0, &s->sparse_threshold));
    READ(tfenc_param_choice(&p, "multivector_mode", tfenc_multivector_mode_names, 0,
                            &s->multivector_query));
    READ(tfenc_param_string(&p, "query_marker", NULL, &k->query_marker));
    READ(tfenc_param_string(&p, "document_marker", NULL, &k->document_marker));
    /* ColBERT's query_maxlen default */
    READ(tfenc_param_int_range(&p, "query_length", 32, 2, 1L << 24, &s->query_length));
    READ(tfenc_param_bool(&p, "skip_punctuation", 0, &s->skip_punctuation));
    READ(tfenc_param_bool(&p, "skip_first_token", 0, &s->skip_first_token));
    READ(tfenc_param_bool(&p, "attend_to_mask_tokens", 1, &s->attend_to_mask_tokens));
    READ(tfenc_params_check_all_used(&p, "not a [job] key; see docs/job-file.md"));
#undef READ
    return status;
}

/* [job] keep_fields: a comma-separated list of field names, each kept in a
 * dataset of its name at the output's root (and a mask, NAME_valid), so
 * each must be a name no other dataset of the file has. */
static int read_keep_fields(reader *r, const char *list)
{
    tfenc_job_settings *s = r->settings;
    if (list == NULL)
        return TFENC_OK;
    s->keep_fields = calloc(TFENC_MAX_KEEP_FIELDS, sizeof *s->keep_fields);
    if (s->keep_fields == NULL)
        return tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    char message[256];
    int n = 0;
    for (const char *at = list;;) {
        const char *comma = strchr(at, ',');
        size_t length = comma != NULL ? (size_t)(comma - at) : strlen(at);
        while (length > 0 && isspace((unsigned char)*at)) {
            at++;
            length--;
        }
        while (length > 0 && isspace((unsigned char)at[length - 1]))
            length--;
        if (length == 0)
            return job_origin_error(r, "keep_fields", "names an empty field (a comma-separated "
                                                      "list of field names, e.g. url, lang)");
        if (n == TFENC_MAX_KEEP_FIELDS) {
            snprintf(message, sizeof message, "names more than the %d fields a job keeps",
                     TFENC_MAX_KEEP_FIELDS);
            return job_origin_error(r, "keep_fields", message);
        }
        if ((s->keep_fields[n] = strndup(at, length)) == NULL)
            return tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        s->corpus.n_keep_fields = ++n;
        if (comma == NULL)
            break;
        at = comma + 1;
    }
    s->corpus.keep_fields = (const char *const *)s->keep_fields;
    for (int i = 0; i < n; i++) {
        const char *name = s->keep_fields[i];
        const char *twice = NULL, *masked = NULL;
        for (int j = 0; j < n; j++) {
            size_t other = strlen(s->keep_fields[j]);
            if (j < i && strcmp(name, s->keep_fields[j]) == 0)
                twice = name;
            if (j != i && strncmp(name, s->keep_fields[j], other) == 0
                && strcmp(name + other, TFENC_KEPT_MASK_SUFFIX) == 0)
                masked = s->keep_fields[j];
        }
        if (strchr(name, '/') != NULL || strcmp(name, ".") == 0)
            snprintf(message, sizeof message, "'%s' cannot name a dataset of the output file "
                     "(no '/', not '.')", name);
        else if (tfenc_output_names_dataset(name))
            snprintf(message, sizeof message, "'%s' is the name of a dataset or group tfenc "
                     "writes; a kept field is stored under its own name", name);
        else if (twice != NULL)
            snprintf(message, sizeof message, "names '%s' twice", name);
        else if (masked != NULL)
            snprintf(message, sizeof message, "'%s' is the name of the null mask of '%s' "
                     "(stored as %s" TFENC_KEPT_MASK_SUFFIX ")", name, masked, masked);
        else
            continue;
        return job_origin_error(r, "keep_fields", message);
    }
    return TFENC_OK;
}

/* Turns the keys into settings: the required paths resolved against the
 * job file, the choices into their enums. */
static int apply_job_keys(reader *r, const job_keys *k)
{
    tfenc_job_settings *s = r->settings;
    if (k->input == NULL)
        return tfenc_error(r->ctx, TFENC_ERR_CONFIG, "%s: [job] requires key 'input'",
                           r->job->path);
    if (k->output == NULL)
        return tfenc_error(r->ctx, TFENC_ERR_CONFIG, "%s: [job] requires key 'output'",
                           r->job->path);
    int list_file = k->input[0] == '@';
    s->input = tfenc_jobfile_resolve_path(r->job, k->input + list_file);
    s->output = tfenc_jobfile_resolve_path(r->job, k->output);
    if (s->input == NULL || s->output == NULL)
        return tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    int status = read_sources(r, list_file, k->format);
    if (status == TFENC_OK)
        status = read_keep_fields(r, k->keep_fields);
    if (status != TFENC_OK)
        return status;
    s->corpus.max_id_bytes = (size_t)k->max_id_bytes;
    s->corpus.max_field_bytes = (size_t)k->max_field_bytes;
    s->output_kind = (tfenc_output_kind)k->kind;
    s->dtype = (tfenc_output_dtype)k->dtype;
    s->compression = (tfenc_output_compression)k->compression;
    s->invalid_utf8_error = k->invalid_utf8 == 1;
    /* A scores head's chunks are aggregated by chunk_scores, pooled
     * vectors' by chunk_pooling: the kind refuses the other one's key
     * (output/kinds.c), once the model says what it ends in. */
    static const tfenc_output_chunks by_chunk_pooling[] = {TFENC_CHUNKS_MEAN, TFENC_CHUNKS_EACH};
    static const tfenc_output_chunks by_chunk_scores[] = {TFENC_CHUNKS_MEAN, TFENC_CHUNKS_MAX,
                                                          TFENC_CHUNKS_FIRST, TFENC_CHUNKS_EACH};
    tfenc_job_section *section = tfenc_jobfile_find(r->job, "job");
    const int by_scores = tfenc_job_section_get(section, "chunk_scores") != NULL;
    s->chunk_key = by_scores                                                 ? "chunk_scores"
                   : tfenc_job_section_get(section, "chunk_pooling") != NULL ? "chunk_pooling"
                                                                             : NULL;
    s->late_chunk = k->long_documents == 2;
    s->chunk_sentences = s->late_chunk && k->chunk_spans == 1;
    s->chunks = k->long_documents == 0 ? TFENC_CHUNKS_OFF
                : by_scores            ? by_chunk_scores[k->chunk_scores]
                                       : by_chunk_pooling[k->chunk_pooling];
    return TFENC_OK;
}

/* Keys that only some corpora read: set for another format they would do
 * nothing, or worse (id_field on plain text wrote an `ids` dataset of empty
 * strings), so they are refused naming the format. */
static int check_format_keys(reader *r, tfenc_job_section *section)
{
    static const char *const record_keys[] = {"text_field", "id_field", "keep_fields", NULL};
    static const char *const dataset_keys[] = {"tokens_dataset", "offsets_dataset", "ids_dataset",
                                               "lengths_dataset", NULL};
    const tfenc_job_settings *s = r->settings;
    const tfenc_corpus_format format = s->corpus.format;
    /* Formats of records with fields (the table's pairs: two fields of a
     * record), and of token ids. */
    const int records = tfenc_corpus_format_pairs(format);
    const int token_ids = tfenc_corpus_format_token_ids(format);
    const char *format_name = tfenc_corpus_format_name(format);
    char message[256];
    for (int i = 0; !records && record_keys[i] != NULL; i++)
        if (tfenc_job_section_get(section, record_keys[i]) != NULL) {
            snprintf(message, sizeof message, "names a field of JSON Lines records or a Parquet "
                     "column, but the corpus is %s", format_name);
            return job_origin_error(r, record_keys[i], message);
        }
    if (!records && tfenc_job_section_get(section, "null_text") != NULL) {
        snprintf(message, sizeof message, "applies to the null texts of JSON Lines records or "
                 "Parquet columns, but the corpus is %s", format_name);
        return job_origin_error(r, "null_text", message);
    }
    for (int i = 0; !token_ids && dataset_keys[i] != NULL; i++)
        if (tfenc_job_section_get(section, dataset_keys[i]) != NULL) {
            snprintf(message, sizeof message, "names a dataset of an HDF5 token-id corpus, but "
                     "the corpus is %s", format_name);
            return job_origin_error(r, dataset_keys[i], message);
        }
    if (token_ids && tfenc_job_section_get(section, "invalid_utf8") != NULL)
        return job_origin_error(r, "invalid_utf8", "applies to text, but the corpus is hdf5 "
                                                   "(token ids)");
    if (s->corpus.id_field == NULL && tfenc_job_section_get(section, "max_id_bytes") != NULL)
        return job_origin_error(r, "max_id_bytes", "applies to the ids of id_field, which is "
                                                   "not set");
    if (s->corpus.n_keep_fields == 0 && tfenc_job_section_get(section, "max_field_bytes") != NULL)
        return job_origin_error(r, "max_field_bytes", "applies to the strings of keep_fields, "
                                                      "which is not set");
    if (s->chunks != TFENC_CHUNKS_OFF && !s->truncation)
        return job_origin_error(r, "truncation", "long_documents = chunk cuts every long "
                                                 "document into chunks, so none is refused for "
                                                 "its length (leave truncation out)");
    return TFENC_OK;
}

/* The keys of multi-vector jobs, which only a model ending in a multivector
 * head reads (run.c refuses them for any other, once it knows the head). */
static const char *const multivector_keys[] = {"multivector_mode", "query_marker",
                                               "document_marker", "query_length",
                                               "skip_punctuation", "skip_first_token",
                                               "attend_to_mask_tokens", NULL};

/* The keys that only chunked documents read. */
static const char *const chunk_keys[] = {"chunk_overlap", "chunk_pooling", "chunk_scores",
                                         "chunk_tokens", "chunk_spans", NULL};

/* The rules between keys and against the model, each refused with the key
 * it names; the prompt is read here because it needs the corpus format. */
static int check_job_settings(reader *r, tfenc_job_section *section, const job_keys *k)
{
    tfenc_job_settings *s = r->settings;
    /* A query is always query_length tokens long ([MASK]-padded). */
    if (s->multivector_query)
        s->max_seq_len = s->query_length;
    if (s->multivector_query && s->max_seq_len > r->config->max_positions)
        return job_origin_error(r, "query_length", "must be in 2..[model] max_positions");
    if (s->max_seq_len < 2 || s->max_seq_len > r->config->max_positions)
        return job_origin_error(r, "max_seq_len", "must be in 2..[model] max_positions");
    if (s->batch_tokens < s->max_seq_len || s->batch_tokens > (1L << 24))
        return job_origin_error(r, "batch_tokens",
                                "must be at least max_seq_len (a document must fit a batch) "
                                "and at most 16777216");
    for (int i = 0; s->chunks == TFENC_CHUNKS_OFF && chunk_keys[i] != NULL; i++)
        if (tfenc_job_section_get(section, chunk_keys[i]) != NULL)
            return job_origin_error(r, chunk_keys[i], "applies to chunked documents: set "
                                                      "long_documents = chunk too");
    if (!s->late_chunk && tfenc_job_section_get(section, "chunk_tokens") != NULL)
        return job_origin_error(r, "chunk_tokens", "gives late chunking's spans: set "
                                                   "long_documents = late_chunk too");
    if (!s->late_chunk && tfenc_job_section_get(section, "chunk_spans") != NULL)
        return job_origin_error(r, "chunk_spans", "gives late chunking's spans: set "
                                                  "long_documents = late_chunk too");
    if (s->chunk_sentences && tfenc_job_section_get(section, "chunk_overlap") != NULL)
        return job_origin_error(r, "chunk_overlap", "overlaps late chunking's spans of tokens; "
                                "chunk_spans = sentences cuts each sentence once");
    if (s->late_chunk && tfenc_job_section_get(section, "chunk_scores") != NULL)
        return job_origin_error(r, "chunk_scores", "aggregates the scores of long_documents = "
                                "chunk's chunks; late_chunk pools token vectors (chunk_pooling)");
    if (s->late_chunk && s->pipeline_stages > 1)
        return job_origin_error(r, "pipeline_stages", "long_documents = late_chunk pools spans "
                                "in the stage that runs the whole model: set pipeline_stages = 1");
    if (s->late_chunk && tfenc_dtype_is_compact(s->dtype))
        return job_origin_error(r, "output_dtype", "long_documents = late_chunk writes float "
                                "vectors (compact codes are calibrated on whole sequences)");
    if (s->late_chunk && s->chunk_tokens == 0)
        s->chunk_tokens = s->max_seq_len - 2 < 256 ? (s->max_seq_len > 2 ? s->max_seq_len - 2 : 1)
                                                   : 256;
    if (s->late_chunk && s->chunk_overlap >= s->chunk_tokens)
        return job_origin_error(r, "chunk_overlap", "must be in 0..chunk_tokens - 1");
    if (tfenc_job_section_get(section, "chunk_scores") != NULL &&
        tfenc_job_section_get(section, "chunk_pooling") != NULL)
        return job_origin_error(r, "chunk_scores", "aggregates a scores head's chunks and "
                                "chunk_pooling a pooled model's: set the one for the model");
    if (s->chunks != TFENC_CHUNKS_OFF && tfenc_corpus_format_token_ids(s->corpus.format))
        return job_origin_error(r, "long_documents", "chunk cuts text documents; a token-id "
                                                     "corpus is used as given");
    if (s->chunk_overlap < 0 || s->chunk_overlap >= s->max_seq_len)
        return job_origin_error(r, "chunk_overlap", "must be in 0..max_seq_len - 1 (less the "
                                                    "tokenizer's special tokens)");
    if (s->output_dim < 0 || s->output_dim > r->config->d_model)
        return job_origin_error(r, "output_dim", "must be in 1..[model] d_model (0: d_model)");
    if (s->output_dim == r->config->d_model)
        s->output_dim = 0;
    for (int i = 0; multivector_keys[i] != NULL && s->multivector_key == NULL; i++)
        if (tfenc_job_section_get(section, multivector_keys[i]) != NULL)
            s->multivector_key = multivector_keys[i];
    int status = check_compact_dtype(r, k->output_ranges);
    if (status != TFENC_OK)
        return status;
    status = read_prompt(r, k->prompt);
    if (status != TFENC_OK)
        return status;
    if ((k->query_marker != NULL && (s->query_marker = strdup(k->query_marker)) == NULL) ||
        (k->document_marker != NULL &&
         (s->document_marker = strdup(k->document_marker)) == NULL))
        return tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    if (s->prompt != NULL && tfenc_corpus_format_token_ids(s->corpus.format))
        return job_origin_error(r, "prompt", "a prompt is text: it needs a text or JSON Lines "
                                             "corpus, not token ids");
    if (s->corpus.text_pair_field != NULL) {
        if (!tfenc_corpus_format_pairs(s->corpus.format))
            return job_origin_error(r, "text_pair_field", "pairs of texts are two fields of a "
                                                          "JSON Lines or Parquet corpus");
        if (s->chunks != TFENC_CHUNKS_OFF)
            return job_origin_error(r, "text_pair_field", "a pair is truncated as its tokenizer "
                                                          "does (longest_first), never chunked: "
                                                          "leave long_documents = truncate");
        if (s->prompt != NULL)
            return job_origin_error(r, "text_pair_field", "a prompt goes before single texts; "
                                                          "a pair has none");
    }
    /* After the pairs' rules: a pair asked of plain text is said as such. */
    status = check_format_keys(r, section);
    if (status != TFENC_OK)
        return status;
    if (k->max_id_bytes < 1 || k->max_id_bytes > (1L << 20))
        return job_origin_error(r, "max_id_bytes", "must be in 1..1048576");
    if (s->window_documents < 1 || s->window_documents > (1L << 20))
        return job_origin_error(r, "window_documents", "must be in 1..1048576");
    if (s->pipeline_stages < 1)
        return job_origin_error(r, "pipeline_stages", "must be >= 1");
    if (s->threads < 0 || s->progress_interval <= 0)
        return job_origin_error(r, s->threads < 0 ? "threads" : "progress_interval",
                                "must be positive");
    if (!isfinite(s->sparse_threshold) || s->sparse_threshold < 0)
        return job_origin_error(r, "sparse_threshold", "must be a finite number >= 0");
    return TFENC_OK;
}

/* The tokenizer's file (vocab.txt or tokenizer.json) is an input too: the
 * output must not be it, and a resume must find it unchanged; the settings
 * keep its resolved path. */
static int resolve_vocabulary(reader *r)
{
    tfenc_params tokenizer;
    tfenc_params_bind(&tokenizer, r->ctx, r->job, tfenc_jobfile_find(r->job, "tokenizer"));
    int status = tfenc_param_input_path(&tokenizer, "vocab", "the vocabulary",
                                        &r->settings->vocabulary);
    if (status == TFENC_OK && r->settings->vocabulary == NULL)
        status = tfenc_param_input_path(&tokenizer, "json", "the tokenizer",
                                        &r->settings->vocabulary);
    return status;
}

static int read_job_settings(reader *r)
{
    tfenc_job_section *section = tfenc_jobfile_find(r->job, "job");
    if (section == NULL)
        return tfenc_error(r->ctx, TFENC_ERR_CONFIG, "%s: missing section [job]", r->job->path);
    job_keys keys = {0};
    int status = read_job_keys(r, section, &keys);
    if (status == TFENC_OK)
        status = apply_job_keys(r, &keys);
    if (status == TFENC_OK)
        status = check_job_settings(r, section, &keys);
    if (status == TFENC_OK)
        status = resolve_vocabulary(r);
    return status;
}

/* ------------------------------------------------------------ tokenizer */

static int setup_tokenizer(reader *r)
{
    static const char *const accents[] = {"auto", "true", "false", NULL};
    tfenc_job_section *section = tfenc_jobfile_find(r->job, "tokenizer");
    if (tfenc_corpus_format_token_ids(r->settings->corpus.format)) {
        if (section != NULL && section->n_entries > 0 && section->line > 0)
            return tfenc_error(r->ctx, TFENC_ERR_CONFIG,
                               "%s:%d: [tokenizer] is not used: the input holds token ids",
                               r->job->path, section->line);
        if (section != NULL && section->n_entries > 0)
            return tfenc_error(r->ctx, TFENC_ERR_CONFIG,
                               "%s: --set tokenizer.%s: [tokenizer] is not used: the input holds "
                               "token ids",
                               r->job->path, section->entries[0].key);
        return TFENC_OK;
    }
    tfenc_params p;
    tfenc_params_bind(&p, r->ctx, r->job, section);
    tfenc_tokenizer_options opts;
    tfenc_tokenizer_options_default(&opts);
    char *vocab = NULL, *json = NULL;
    int accent = 0;
    tfenc_tokenizer_text_rules rules;
    int status = tfenc_param_input_path(&p, "vocab", "the vocabulary", &vocab);
    if (status == TFENC_OK)
        status = tfenc_param_bool(&p, "special_tokens", 1, &rules.special_tokens);
    if (status == TFENC_OK)
        status = tfenc_param_bool(&p, "drop_unknown", 0, &rules.drop_unknown);
    if (status == TFENC_OK)
        status = tfenc_param_int_range(&p, "max_chars", 0, 0, INT_MAX, &rules.max_chars);
    if (status == TFENC_OK)
        status = tfenc_param_input_path(&p, "json", "the tokenizer", &json);
    if (status == TFENC_OK)
        status = tfenc_param_bool(&p, "lowercase", 1, &opts.lowercase);
    if (status == TFENC_OK)
        status = tfenc_param_choice(&p, "strip_accents", accents, 0, &accent);
    if (status == TFENC_OK)
        status = tfenc_param_bool(&p, "chinese_chars", 1, &opts.chinese_chars);
    if (status == TFENC_OK)
        status = tfenc_params_check_all_used(&p, "not a [tokenizer] key");
    if (status == TFENC_OK && vocab != NULL && json != NULL)
        status = tfenc_error(r->ctx, TFENC_ERR_CONFIG, "%s: [tokenizer] sets both vocab and "
                             "json; name one tokenizer", r->job->path);
    if (status != TFENC_OK) {
        free(vocab);
        free(json);
        return status;
    }
    opts.strip_accents = accent == 0 ? -1 : accent == 1;
    opts.invalid_utf8 = r->settings->invalid_utf8_error ? TFENC_INVALID_UTF8_ERROR
                                                       : TFENC_INVALID_UTF8_REPLACE;
    /* The job's own BERT options win over those stored with the weights. */
    static const struct {
        const char *key;
        unsigned bit;
    } set_keys[] = {{"lowercase", TFENC_TOKENIZER_SET_LOWERCASE},
                    {"strip_accents", TFENC_TOKENIZER_SET_STRIP_ACCENTS},
                    {"chinese_chars", TFENC_TOKENIZER_SET_CHINESE_CHARS}};
    for (size_t i = 0; i < sizeof set_keys / sizeof *set_keys; i++)
        if (tfenc_job_section_get(section, set_keys[i].key) != NULL)
            opts.job_set |= set_keys[i].bit;
    if (vocab == NULL && json == NULL) {
        status = tfenc_tokenizer_load(r->ctx, r->config->weights_path, &opts, r->tokenizer);
        if (status == TFENC_OK)
            tfenc_tokenizer_set_text_rules(*r->tokenizer, &rules);
        if (status == TFENC_ERR_NOT_FOUND) {
            tfenc_context_clear(r->ctx);
            return tfenc_error(r->ctx, TFENC_ERR_CONFIG,
                               "%s: text input needs a vocabulary: set [tokenizer] vocab = "
                               "vocab.txt or json = tokenizer.json, or use weights made by "
                               "tfenc-import (%s has no /tokenizer)",
                               r->job->path, r->config->weights_path);
        }
        return status;
    }
    if (json != NULL)
        status = tfenc_tokenizer_create_from_json_file(r->ctx, json, &opts, r->tokenizer);
    else
        status = tfenc_tokenizer_create_from_file(r->ctx, vocab, &opts, r->tokenizer);
    free(json);
    free(vocab);
    if (status == TFENC_OK)
        tfenc_tokenizer_set_text_rules(*r->tokenizer, &rules);
    if (status == TFENC_OK && r->config->vocab_size > 0 &&
        tfenc_tokenizer_vocab_size(*r->tokenizer) > r->config->vocab_size)
        status = tfenc_error(r->ctx, TFENC_ERR_CONFIG,
                             "%s: the vocabulary has %d tokens but [model] vocab_size is %d",
                             r->job->path, tfenc_tokenizer_vocab_size(*r->tokenizer),
                             r->config->vocab_size);
    return status;
}

int tfenc_job_settings_read(tfenc_context *ctx, const tfenc_jobfile *job,
                            const tfenc_model_config *config, tfenc_job_settings *settings)
{
    memset(settings, 0, sizeof *settings);
    reader r = {.ctx = ctx, .job = job, .config = config, .settings = settings};
    return read_job_settings(&r);
}

void tfenc_job_settings_free(tfenc_job_settings *settings)
{
    free(settings->input);
    tfenc_sources_free(&settings->sources);
    settings->corpus.sources = NULL;
    settings->corpus.n_sources = 0;
    free(settings->output);
    free(settings->vocabulary);
    free(settings->prompt);
    free(settings->output_ranges);
    settings->output_ranges = NULL;
    free(settings->query_marker);
    free(settings->document_marker);
    settings->query_marker = settings->document_marker = NULL;
    for (int k = 0; settings->keep_fields != NULL && k < TFENC_MAX_KEEP_FIELDS; k++)
        free(settings->keep_fields[k]);
    free(settings->keep_fields);
    settings->keep_fields = NULL;
    settings->corpus.keep_fields = NULL;
    settings->corpus.n_keep_fields = 0;
    settings->input = settings->output = settings->vocabulary = settings->prompt = NULL;
}

int tfenc_job_settings_output_path(tfenc_context *ctx, const tfenc_jobfile *job, char **path)
{
    *path = NULL;
    tfenc_params p;
    tfenc_params_bind(&p, ctx, job, tfenc_jobfile_find(job, "job"));
    const char *output = NULL;
    int status = tfenc_param_string(&p, "output", NULL, &output);
    if (status == TFENC_OK && output == NULL)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: [job] requires key 'output'", job->path);
    if (status == TFENC_OK && (*path = tfenc_jobfile_resolve_path(job, output)) == NULL)
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    return status;
}

int tfenc_job_settings_tokenizer(tfenc_context *ctx, const tfenc_jobfile *job,
                                 const tfenc_model_config *config,
                                 const tfenc_job_settings *settings, tfenc_tokenizer **tokenizer)
{
    *tokenizer = NULL;
    reader r = {.ctx = ctx, .job = job, .config = config, .settings = (tfenc_job_settings *)settings,
                .tokenizer = tokenizer};
    int status = setup_tokenizer(&r);
    /* A job of pairs needs the tokenizer's pair rule: refused before any
     * output exists, not at the first pair. */
    if (status == TFENC_OK && *tokenizer != NULL && settings->corpus.text_pair_field != NULL)
        status = tfenc_tokenizer_check_pairs(ctx, *tokenizer);
    if (status != TFENC_OK) {
        tfenc_tokenizer_destroy(*tokenizer);
        *tokenizer = NULL;
    }
    return status;
}

/* A growing string; on allocation failure it stays NULL. */
typedef struct text_buffer {
    char *data;
    size_t length, capacity;
    int failed;
} text_buffer;

static void append(text_buffer *t, const char *piece)
{
    size_t n = strlen(piece);
    if (t->failed)
        return;
    if (t->length + n + 1 > t->capacity) {
        size_t capacity = t->capacity > 0 ? t->capacity : 256;
        while (capacity < t->length + n + 1)
            capacity *= 2;
        char *grown = realloc(t->data, capacity);
        if (grown == NULL) {
            t->failed = 1;
            free(t->data);
            t->data = NULL;
            return;
        }
        t->data = grown;
        t->capacity = capacity;
    }
    memcpy(t->data + t->length, piece, n + 1);
    t->length += n;
}

char *tfenc_job_settings_identity(const tfenc_jobfile *job, const tfenc_job_settings *settings)
{
    static const char *const run_only[] = {"pipeline_stages", "threads", "progress_interval",
                                           "resume", "output", "share_weights", NULL};
    text_buffer t = {0};
    append(&t, "");
    for (int i = 0; i < job->n_sections; i++) {
        const tfenc_job_section *section = &job->sections[i];
        for (int j = 0; j < section->n_entries; j++) {
            const tfenc_job_entry *entry = &section->entries[j];
            int skip = 0;
            for (int k = 0; strcmp(section->name, "job") == 0 && run_only[k] != NULL; k++)
                skip |= strcmp(entry->key, run_only[k]) == 0;
            if (skip || entry->chosen == TFENC_JOB_ENTRY_CHOSEN_ADDED)
                continue;
            append(&t, section->name);
            append(&t, ".");
            append(&t, entry->key);
            append(&t, " = ");
            append(&t, entry->chosen == TFENC_JOB_ENTRY_CHOSEN_FOR_AUTO ? "auto" : entry->value);
            append(&t, "\n");
        }
    }
    /* Defaults shape the result too, and may differ between versions of
     * tfenc: the values in effect are part of the identity (max_seq_len is
     * query_length's in a multi-vector query job; multivector_mode = query
     * is a key line of the job, so files written before the key existed
     * still resume). */
    char effective[256];
    snprintf(effective, sizeof effective,
             "(in effect) max_seq_len = %ld, batch_tokens = %ld, window_documents = %ld, "
             "chunks = %s, chunk_overlap = %ld\n",
             settings->max_seq_len, settings->batch_tokens, settings->window_documents,
             tfenc_output_chunks_names[settings->chunks], settings->chunk_overlap);
    append(&t, effective);
    /* Only late chunking's jobs have this line: other files keep their
     * identity (and resume). */
    if (settings->late_chunk) {
        /* Spans by sentence only: files by tokens keep their identity. */
        snprintf(effective, sizeof effective, "(in effect) late_chunk chunk_tokens = %ld%s\n",
                 settings->chunk_tokens,
                 settings->chunk_sentences ? ", chunk_spans = sentences" : "");
        append(&t, effective);
    }
    return t.data;
}

char *tfenc_job_settings_provenance(const tfenc_jobfile *job, const char *const *overrides,
                                    int n_overrides)
{
    text_buffer t = {0};
    append(&t, job->text);
    if (n_overrides > 0)
        append(&t, "\n; overridden on the command line:\n");
    for (int i = 0; i < n_overrides; i++) {
        append(&t, "; --set ");
        append(&t, overrides[i]);
        append(&t, "\n");
    }
    return t.data;
}
