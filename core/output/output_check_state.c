/* What a check of one file knows as it goes (output_check_state.h): the
 * first failure, the message helpers, the file's facts and its table of
 * files. */
#include "output/output_check_state.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hdf5_attributes.h"
#include "output/corpus_shards.h"
#include "output/kinds.h"
#include "output/output.h"

int tfenc_check_fail(tfenc_check *c, int status, const char *format, ...)
{
    if (c->status != TFENC_OK)
        return c->status;
    char text[TFENC_MESSAGE_MAX];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof text, format, args);
    va_end(args);
    c->status = tfenc_error(c->ctx, status, "%s: %s%s", c->path,
                            status == TFENC_ERR_CONFIG ? "inconsistent: " : "", text);
    return c->status;
}

const char *tfenc_check_quoted(const char *value, char *text, size_t size)
{
    size_t n = 0;
    for (; value[n] != '\0' && n < 60 && n + 4 < size; n++)
        text[n] = iscntrl((unsigned char)value[n]) ? '?' : value[n];
    snprintf(text + n, size - n, "%s", value[n] != '\0' ? "..." : "");
    return text;
}

int64_t tfenc_check_integer_attribute(hid_t location, const char *name, int64_t absent)
{
    int64_t value = absent;
    return tfenc_hdf5_attribute_number(location, name, H5T_INTEGER, H5T_NATIVE_INT64, &value)
               ? value
               : absent;
}

void tfenc_check_describe_type(hid_t type, char *text, size_t size)
{
    H5T_class_t kind = H5Tget_class(type);
    size_t bytes = H5Tget_size(type);
    if (kind == H5T_INTEGER)
        snprintf(text, size, "%sint%zu", H5Tget_sign(type) == H5T_SGN_NONE ? "u" : "",
                 8 * bytes);
    else if (kind == H5T_FLOAT)
        snprintf(text, size, "float%zu", 8 * bytes);
    else if (kind == H5T_STRING)
        snprintf(text, size, "string");
    else if (kind == H5T_COMPOUND)
        snprintf(text, size, "compound");
    else
        snprintf(text, size, "class-%d", (int)kind);
}

void tfenc_check_describe_space(hid_t space, char *text, size_t size)
{
    hsize_t dims[H5S_MAX_RANK];
    int rank = H5Sget_simple_extent_ndims(space);
    if (rank <= 0) {
        snprintf(text, size, "a scalar");
        return;
    }
    H5Sget_simple_extent_dims(space, dims, NULL);
    size_t used = (size_t)snprintf(text, size, "[");
    for (int i = 0; i < rank && used < size; i++)
        used += (size_t)snprintf(text + used, size - used, "%s%llu", i > 0 ? ", " : "",
                                 (unsigned long long)dims[i]);
    if (used < size)
        snprintf(text + used, size - used, "]");
}

/* The corpus_shards reader checks each row (fingerprints, counts, each
 * file's rows following the last's). */
int tfenc_check_read_shards(tfenc_check *c, tfenc_check_shards *table)
{
    memset(table, 0, sizeof *table);
    tfenc_corpus_shards shards = {0};
    int status = tfenc_corpus_shards_read(c->ctx, c->path, c->file, &shards);
    if (status == TFENC_ERR_NOT_FOUND) {
        char *text = tfenc_hdf5_attribute_string(c->file, "corpus_shards");
        status = text != NULL ? tfenc_corpus_shards_parse(c->ctx, c->path, text, &shards)
                              : TFENC_ERR_NOT_FOUND;
        free(text);
    }
    if (status == TFENC_ERR_NOT_FOUND)
        return TFENC_OK; /* a file from before either */
    if (status != TFENC_OK) {
        c->status = status;
        return status;
    }
    table->present = 1;
    table->n = shards.n;
    table->rows = calloc((size_t)shards.n + 1, sizeof *table->rows);
    if (table->rows == NULL) {
        tfenc_corpus_shards_free(&shards);
        return tfenc_check_fail(c, TFENC_ERR_NO_MEMORY, "out of memory for %d files of "
                                "corpus_shards", shards.n);
    }
    int64_t total = 0;
    int all_known = 1;
    for (int k = 0; k < shards.n; k++) {
        table->rows[k] = (tfenc_check_shard_rows){shards.shards[k].first_document,
                                                  shards.shards[k].documents};
        all_known &= shards.shards[k].documents >= 0;
        total += shards.shards[k].documents;
    }
    tfenc_corpus_shards_free(&shards);
    if (all_known && table->n > 0 && c->n_documents >= 0 && total != c->n_documents)
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "corpus_shards lists %lld documents, but n_documents "
                         "is %lld", (long long)total, (long long)c->n_documents);
    return c->status;
}

/* An enum attribute's value through its names, or `absent` (older files). */
static int named_attribute(hid_t file, const char *name, int (*from_name)(const char *, int *),
                           int absent)
{
    char *text = tfenc_hdf5_attribute_string(file, name);
    int value = absent;
    if (text != NULL && from_name(text, &value) != TFENC_OK)
        value = absent;
    free(text);
    return value;
}

static int kind_from_name(const char *name, int *value)
{
    tfenc_output_kind kind;
    int status = tfenc_output_kind_from_name(name, &kind);
    *value = (int)kind;
    return status;
}

static int dtype_from_name(const char *name, int *value)
{
    tfenc_output_dtype dtype;
    int status = tfenc_output_dtype_from_name(name, &dtype);
    *value = (int)dtype;
    return status;
}

static int chunks_from_name(const char *name, int *value)
{
    for (int i = 0; tfenc_output_chunks_names[i] != NULL; i++)
        if (strcmp(name, tfenc_output_chunks_names[i]) == 0) {
            *value = i;
            return TFENC_OK;
        }
    return TFENC_ERR_NOT_FOUND;
}

int tfenc_check_compact(tfenc_output_dtype dtype)
{
    return dtype == TFENC_DTYPE_INT8 || dtype == TFENC_DTYPE_UINT8 ||
           dtype == TFENC_DTYPE_BINARY || dtype == TFENC_DTYPE_UBINARY;
}

static int has_dataset(void *file, const char *name)
{
    return H5Lexists(*(hid_t *)file, name, H5P_DEFAULT) > 0;
}

/* Whether the job_settings attribute (one "section.key = value" line per
 * setting) has `job.empty_documents = zeros`. */
static int settings_say_empty_zeros(hid_t file)
{
    char *settings = tfenc_hdf5_attribute_string(file, "job_settings");
    int found = 0;
    for (const char *line = settings; line != NULL && *line != '\0' && !found;) {
        const char *end = strchr(line, '\n');
        const size_t length = end != NULL ? (size_t)(end - line) : strlen(line);
        static const char wanted[] = "job.empty_documents = zeros";
        found = length == sizeof wanted - 1 && memcmp(line, wanted, length) == 0;
        line = end != NULL ? end + 1 : line + length;
    }
    free(settings);
    return found;
}

/* The kind's rows: per token n_tokens, per chunk n_chunks, else a row a
 * document. */
static int64_t kind_rows(const tfenc_check *c)
{
    if (c->facts.kind->rows == TFENC_ROWS_PER_TOKEN)
        return c->n_tokens;
    return c->facts.chunks == TFENC_CHUNKS_EACH ? c->n_chunks : c->n_documents;
}

void tfenc_check_read_facts(tfenc_check *c)
{
    hid_t f = c->file, g = c->group;
    c->complete = tfenc_check_integer_attribute(f, "complete", 0) == 1;
    c->n_documents = tfenc_check_integer_attribute(f, "n_documents", -1);
    c->d_model = tfenc_check_integer_attribute(g, "d_model", -1);
    c->n_tokens = tfenc_check_integer_attribute(f, "n_tokens", -1);
    c->n_chunks = tfenc_check_integer_attribute(f, "n_chunks", -1);
    c->top_k = tfenc_check_integer_attribute(g, "sparse_top_k", 0);
    c->threshold = 0.0;
    tfenc_hdf5_attribute_number(g, "sparse_threshold", H5T_FLOAT, H5T_NATIVE_DOUBLE,
                                &c->threshold);
    int kind = named_attribute(g, "output_kind", kind_from_name, -1);
    tfenc_output_facts *facts = &c->facts;
    /* A head's group names its kind; only a root may be of an older tfenc. */
    facts->kind = kind >= 0       ? tfenc_output_kind_entry_of((tfenc_output_kind)kind)
                  : g != f        ? NULL
                                  : tfenc_output_kind_from_datasets(has_dataset, &f);
    c->kind = facts->kind != NULL ? facts->kind->id : TFENC_OUTPUT_AUTO;
    c->empty_zeros = settings_say_empty_zeros(f);
    facts->dtype = (tfenc_output_dtype)named_attribute(g, "dtype", dtype_from_name,
                                                       TFENC_DTYPE_FLOAT32);
    facts->chunks = g != f ? TFENC_CHUNKS_OFF
                           : (tfenc_output_chunks)named_attribute(f, "chunks", chunks_from_name,
                                                                  TFENC_CHUNKS_OFF);
    facts->further_head = g != f;
    facts->n_documents = c->n_documents;
    facts->d_model = c->d_model;
    const int packed = facts->dtype == TFENC_DTYPE_BINARY || facts->dtype == TFENC_DTYPE_UBINARY;
    facts->width = packed && c->d_model >= 0 ? c->d_model / 8 : c->d_model;
    facts->rows = facts->kind != NULL ? kind_rows(c) : -1;
    facts->entries = c->entries;
    H5Eclear2(H5E_DEFAULT);
}
