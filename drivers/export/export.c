/* A tfenc output as Parquet files: the columns the file's layout calls for,
 * the file's provenance as key-value metadata, blocks of finished documents
 * as row groups, and the directory made, filled and named all or nothing. */
#include "export/export.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "export/output_reader.h"
#include "export/parquet.h"

/* A row group holds at most this many documents and about this many bytes
 * of rows (one document at least). The program holds one block at a time,
 * and Arrow about four times as much while it encodes it (a nested column's
 * repetition and definition levels, pages, compression): some 200 MB in
 * all, whatever the file's size (tests/export/export.sh measures it). */
#define BLOCK_DOCUMENTS ((int64_t)65536)
#define BLOCK_BYTES ((size_t)32 << 20)

#define MAX_COLUMNS (12 + TFENC_MAX_KEEP_FIELDS)
#define MAX_METADATA 24

/* ---------------------------------------------------------------- columns */

/* The columns of a file of this layout, in order; data[c] fills column c
 * from a block. */
typedef struct export_table {
    export_column columns[MAX_COLUMNS];
    int n_columns;
} export_table;

static void add_column(export_table *table, const char *name, export_shape shape,
                       export_element element, int64_t width)
{
    table->columns[table->n_columns++] = (export_column){.name = name, .shape = shape,
                                                         .element = element, .width = width};
}

static void describe_columns(const export_layout *layout, export_table *table)
{
    table->n_columns = 0;
    add_column(table, "document", EXPORT_SCALAR, EXPORT_INT64, 0);
    if (layout->has_ids)
        add_column(table, "ids", EXPORT_SCALAR, EXPORT_STRING, 0);
    /* Kept fields beside the ids, nullable: their nulls are Arrow's. */
    for (int k = 0; k < layout->n_kept; k++) {
        add_column(table, layout->kept[k].name, EXPORT_SCALAR, layout->kept[k].element, 0);
        table->columns[table->n_columns - 1].nullable = 1;
    }
    if (layout->has_source) {
        add_column(table, "source_file", EXPORT_SCALAR, EXPORT_STRING, 0);
        add_column(table, "source_line", EXPORT_SCALAR, EXPORT_INT64, 0);
    }
    add_column(table, "lengths", EXPORT_SCALAR, EXPORT_INT32, 0);
    add_column(table, "truncated", EXPORT_SCALAR, EXPORT_INT32, 0);
    if (layout->has_chunks)
        add_column(table, "chunks", EXPORT_SCALAR, EXPORT_INT32, 0);
    switch (layout->rows) {
    case EXPORT_ROWS_ONE:
        add_column(table, layout->rows_name, EXPORT_VECTOR, layout->element, layout->width);
        break;
    case EXPORT_ROWS_RUNS:
        add_column(table, layout->rows_name, EXPORT_VECTOR_LIST, layout->element,
                   layout->width);
        break;
    case EXPORT_ROWS_SPARSE:
        add_column(table, "sparse", EXPORT_SPARSE, EXPORT_FLOAT32, 0);
        break;
    }
    if (layout->has_token_ids)
        add_column(table, "token_ids", EXPORT_LIST, EXPORT_INT32, 0);
    if (layout->has_chunk_starts)
        add_column(table, "chunk_starts", EXPORT_LIST, EXPORT_INT32, 0);
}

/* Column by column, where a block's values are (the order of
 * describe_columns). */
static void block_columns(const export_layout *layout, const export_block *block,
                          export_column_data *data)
{
    int c = 0;
    data[c++] = (export_column_data){.values = block->documents};
    if (layout->has_ids)
        data[c++] = (export_column_data){.values = block->ids, .offsets = block->id_offsets};
    for (int k = 0; k < layout->n_kept; k++)
        data[c++] = (export_column_data){.values = block->kept_values[k],
                                         .offsets = block->kept_offsets[k],
                                         .valid = block->kept_valid[k]};
    if (layout->has_source) {
        data[c++] = (export_column_data){.values = block->sources,
                                         .offsets = block->source_offsets};
        data[c++] = (export_column_data){.values = block->source_lines};
    }
    data[c++] = (export_column_data){.values = block->lengths};
    data[c++] = (export_column_data){.values = block->truncated};
    if (layout->has_chunks)
        data[c++] = (export_column_data){.values = block->chunks};
    data[c++] = (export_column_data){.values = block->values, .offsets = block->row_offsets,
                                     .indices = block->indices};
    if (layout->has_token_ids)
        data[c++] = (export_column_data){.values = block->token_ids,
                                         .offsets = block->row_offsets};
    if (layout->has_chunk_starts)
        data[c++] = (export_column_data){.values = block->chunk_starts,
                                         .offsets = block->row_offsets};
}

/* --------------------------------------------------------------- metadata */

/* The schema's key-value metadata: what the file says about itself, so
 * that the Parquet files say what made them and how to read their values
 * (labels, quantization ranges, the vocabulary). Keys start with "tfenc.". */
typedef struct metadata {
    const char *keys[MAX_METADATA];
    char *values[MAX_METADATA];
    int n;
    int failed;
} metadata;

static void add_text(metadata *m, const char *key, const char *value)
{
    if (m->failed || value == NULL)
        return;
    if (m->n == MAX_METADATA || (m->values[m->n] = strdup(value)) == NULL) {
        m->failed = 1;
        return;
    }
    m->keys[m->n++] = key;
}

static void add_integer(metadata *m, const char *key, long long value)
{
    char text[32];
    snprintf(text, sizeof text, "%lld", value);
    add_text(m, key, text);
}

/* Takes `value` (a JSON value; NULL: out of memory) as its compact text. */
static void add_json(metadata *m, const char *key, json_t *value)
{
    char *text = value != NULL ? json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_decref(value);
    if (text == NULL) {
        m->failed = 1;
        return;
    }
    add_text(m, key, text);
    free(text);
}

/* The corpus's files as a JSON list; a path that is not UTF-8 (a file
 * name may hold any bytes) is refused: Parquet's strings are UTF-8, and so
 * is the source_file column that repeats the paths. */
static int shards_json(tfenc_context *ctx, const char *path, const tfenc_corpus_shards *table,
                       json_t **out)
{
    json_t *list = json_array();
    *out = NULL;
    for (int i = 0; list != NULL && i < table->n; i++) {
        const tfenc_corpus_shard *shard = &table->shards[i];
        json_t *name = json_string(shard->path);
        if (name == NULL) {
            json_decref(list);
            return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: file %d of corpus_shards has a path "
                               "that is not UTF-8 text, which Parquet strings must be", path, i);
        }
        json_t *row = json_pack("{s:o, s:I, s:s, s:I, s:I, s:I}", "path", name,
                                "bytes", (json_int_t)shard->bytes, "fingerprint",
                                shard->fingerprint, "first_document",
                                (json_int_t)shard->first_document, "documents",
                                (json_int_t)shard->documents, "skipped",
                                (json_int_t)shard->skipped);
        if (row == NULL || json_array_append_new(list, row) != 0) {
            json_decref(list);
            list = NULL;
        }
    }
    if (list == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", path);
    *out = list;
    return TFENC_OK;
}

/* [[minimum, ...], [maximum, ...]]: float32 values as doubles, exactly. */
static json_t *ranges_json(const float *ranges, int64_t width)
{
    json_t *both = json_array();
    for (int row = 0; both != NULL && row < 2; row++) {
        json_t *values = json_array();
        for (int64_t j = 0; values != NULL && j < width; j++)
            if (json_array_append_new(values, json_real(ranges[row * width + j])) != 0) {
                json_decref(values);
                values = NULL;
            }
        if (values == NULL || json_array_append_new(both, values) != 0) {
            json_decref(both);
            return NULL;
        }
    }
    return both;
}

static int vocabulary_json(tfenc_context *ctx, const char *path, const export_layout *layout,
                           json_t **out)
{
    json_t *list = json_array();
    *out = NULL;
    for (int64_t i = 0; list != NULL && i < layout->vocabulary_size; i++) {
        json_t *token = json_string(layout->vocabulary[i]);
        if (token == NULL) {
            json_decref(list);
            return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: token %lld of dataset 'vocabulary' "
                               "is not UTF-8 text", path, (long long)i);
        }
        if (json_array_append_new(list, token) != 0) {
            json_decref(list);
            list = NULL;
        }
    }
    if (list == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", path);
    *out = list;
    return TFENC_OK;
}

static int describe_file(tfenc_context *ctx, const char *path, const export_layout *layout,
                         metadata *m)
{
    const tfenc_inspection *i = layout->inspection;
    char absolute[PATH_MAX];
    add_text(m, "tfenc.source", realpath(path, absolute) != NULL ? absolute : path);
    add_text(m, "tfenc.output_kind", layout->kind->name);
    add_text(m, "tfenc.dtype", layout->dtype);
    if (layout->head != NULL)
        add_text(m, "tfenc.output", layout->head);
    add_integer(m, "tfenc.complete", i->complete);
    add_integer(m, "tfenc.n_documents", i->n_documents);
    add_text(m, "tfenc.tfenc_version", i->tfenc_version);
    add_text(m, "tfenc.created", i->created);
    add_text(m, "tfenc.weights_sha256", i->weights_sha256);
    add_text(m, "tfenc.job_settings", i->job_settings);
    json_t *shards = NULL;
    int status = shards_json(ctx, path, &i->corpus_shards, &shards);
    if (status != TFENC_OK)
        return status;
    add_json(m, "tfenc.corpus_shards", shards);
    /* The kind's own attributes (output/kinds.h), as the inspection read them. */
    const struct { const char *attribute, *key, *value; } own[] = {
        {"id2label", "tfenc.id2label", layout->labels != NULL ? layout->labels : ""},
        {"multivector_mode", "tfenc.multivector_mode", i->multivector_mode},
        {"multivector_marker", "tfenc.multivector_marker", i->multivector_marker},
        {"multivector_skiplist", "tfenc.multivector_skiplist", i->multivector_skiplist},
        {"multivector_query_padding", "tfenc.multivector_query_padding",
         i->multivector_query_padding},
        {"multivector_first_token", "tfenc.multivector_first_token",
         i->multivector_first_token}};
    for (const tfenc_output_kind_attribute *a = layout->kind->attributes; a->name != NULL; a++)
        for (size_t k = 0; k < sizeof own / sizeof own[0]; k++)
            if (strcmp(a->name, own[k].attribute) == 0)
                add_text(m, own[k].key, own[k].value);
    if (layout->ranges != NULL) {
        add_json(m, "tfenc.quantization_ranges", ranges_json(layout->ranges, layout->width));
        add_text(m, "tfenc.quantization_ranges_source", i->quantization_source);
    }
    if (layout->rows == EXPORT_ROWS_SPARSE) {
        /* A further head keeps every value above 0 (docs/job-file.md). */
        add_integer(m, "tfenc.sparse_top_k", layout->head != NULL ? 0 : i->sparse_top_k);
        char threshold[32];
        snprintf(threshold, sizeof threshold, "%.17g",
                 layout->head != NULL ? 0.0 : i->sparse_threshold);
        add_text(m, "tfenc.sparse_threshold", threshold);
        if (layout->vocabulary != NULL) {
            json_t *vocabulary = NULL;
            status = vocabulary_json(ctx, path, layout, &vocabulary);
            if (status != TFENC_OK)
                return status;
            add_json(m, "tfenc.vocabulary", vocabulary);
        }
    }
    return m->failed ? tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", path)
                     : TFENC_OK;
}

static void metadata_free(metadata *m)
{
    for (int i = 0; i < m->n; i++)
        free(m->values[i]);
}

/* -------------------------------------------------------------- the files */

/* The directory and the files written into it so far. */
typedef struct output_directory {
    const char *path;
    int made;        /* this run made it: removed on failure */
    int n_files;
    char **hidden;   /* [n_files] the files' names while they are written */
    char **visible;  /* [n_files] their names once every one is whole */
} output_directory;

/* Makes `path` and its missing parents, as mkdir -p. */
static int make_directories(const char *path)
{
    char *copy = strdup(path);
    if (copy == NULL) {
        errno = ENOMEM;
        return -1;
    }
    for (char *slash = copy + 1; *slash != '\0'; slash++) {
        if (*slash != '/')
            continue;
        *slash = '\0';
        if (mkdir(copy, 0777) != 0 && errno != EEXIST) {
            free(copy);
            return -1;
        }
        *slash = '/';
    }
    int result = mkdir(copy, 0777);
    free(copy);
    return result;
}

/* A new directory, or an empty one: never a place where files would be
 * overwritten or mixed with others. */
static int open_directory(tfenc_context *ctx, output_directory *out)
{
    struct stat info;
    if (stat(out->path, &info) != 0) {
        if (errno != ENOENT)
            return tfenc_error(ctx, TFENC_ERR_IO, "%s: %s", out->path, strerror(errno));
        if (make_directories(out->path) != 0)
            return tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot make the directory: %s", out->path,
                               strerror(errno));
        out->made = 1;
        return TFENC_OK;
    }
    if (!S_ISDIR(info.st_mode))
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: exists and is not a directory; "
                           "tfenc-export writes into a new or empty directory", out->path);
    DIR *directory = opendir(out->path);
    if (directory == NULL)
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: %s", out->path, strerror(errno));
    const struct dirent *entry;
    const char *found = NULL;
    while (found == NULL && (entry = readdir(directory)) != NULL)
        if (strcmp(entry->d_name, ".") != 0 && strcmp(entry->d_name, "..") != 0)
            found = entry->d_name;
    int status = found == NULL ? TFENC_OK
                               : tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: exists and is not "
                                             "empty (it holds %s); tfenc-export writes into a "
                                             "new or empty directory, and never overwrites",
                                             out->path, found);
    closedir(directory);
    return status;
}

static char *file_name(const char *directory, const char *format, int number)
{
    int length = snprintf(NULL, 0, format, directory, number);
    char *name = length >= 0 ? malloc((size_t)length + 1) : NULL;
    if (name != NULL)
        snprintf(name, (size_t)length + 1, format, directory, number);
    return name;
}

/* The next file's names: part-00000.parquet, ..., written as
 * .part-00000.parquet.partial, which Arrow's, DuckDB's and Polars'
 * directory readers pass over. */
static int add_file(tfenc_context *ctx, output_directory *out)
{
    char **hidden = realloc(out->hidden, (size_t)(out->n_files + 1) * sizeof *hidden);
    if (hidden != NULL)
        out->hidden = hidden;
    char **visible = realloc(out->visible, (size_t)(out->n_files + 1) * sizeof *visible);
    if (visible != NULL)
        out->visible = visible;
    if (hidden == NULL || visible == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    out->hidden[out->n_files] = file_name(out->path, "%s/.part-%05d.parquet.partial",
                                          out->n_files);
    out->visible[out->n_files] = file_name(out->path, "%s/part-%05d.parquet", out->n_files);
    if (out->hidden[out->n_files] == NULL || out->visible[out->n_files] == NULL) {
        free(out->hidden[out->n_files]);
        free(out->visible[out->n_files]);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    }
    out->n_files++;
    return TFENC_OK;
}

/* Every file whole: each takes its name. */
static int publish(tfenc_context *ctx, output_directory *out)
{
    for (int i = 0; i < out->n_files; i++)
        if (rename(out->hidden[i], out->visible[i]) != 0)
            return tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot rename to %s: %s", out->hidden[i],
                               out->visible[i], strerror(errno));
    return TFENC_OK;
}

/* After an error: nothing of this run is left. */
static void discard(output_directory *out)
{
    for (int i = 0; i < out->n_files; i++) {
        unlink(out->hidden[i]);
        unlink(out->visible[i]);
    }
    if (out->made)
        rmdir(out->path);
}

static void directory_free(output_directory *out)
{
    for (int i = 0; i < out->n_files; i++) {
        free(out->hidden[i]);
        free(out->visible[i]);
    }
    free(out->hidden);
    free(out->visible);
}

/* ---------------------------------------------------------------- export */

int export_to_parquet(tfenc_context *ctx, const export_options *options,
                      export_summary *summary)
{
    memset(summary, 0, sizeof *summary);
    export_reader *reader = NULL;
    export_parquet_file *file = NULL;
    export_block block = {0};
    metadata m = {0};
    output_directory out = {.path = options->directory};
    export_table table;
    export_column_data data[MAX_COLUMNS];
    int64_t rows_in_file = 0;
    /* The input is checked before the directory is touched: a bad file
     * leaves nothing behind. */
    int status = export_reader_open(ctx, options->input, options->output, &reader);
    if (status != TFENC_OK)
        goto done;
    const export_layout *layout = export_reader_layout(reader);
    summary->n_documents = layout->inspection->n_documents;
    summary->complete = layout->inspection->complete;
    snprintf(summary->kind, sizeof summary->kind, "%s", layout->kind->name);
    describe_columns(layout, &table);
    if ((status = describe_file(ctx, options->input, layout, &m)) != TFENC_OK)
        goto done;
    if ((status = open_directory(ctx, &out)) != TFENC_OK)
        goto done;
    for (;;) {
        /* A block never crosses from one file into the next. */
        int64_t room = file == NULL ? options->rows_per_file
                                    : options->rows_per_file - rows_in_file;
        status = export_reader_next(ctx, reader, room < BLOCK_DOCUMENTS ? room : BLOCK_DOCUMENTS,
                                    BLOCK_BYTES, &block);
        if (status != TFENC_OK)
            break;
        /* A file for the block; and one, empty, when there is no row at all,
         * so that the schema and the metadata are there. */
        if (file == NULL && (block.n > 0 || out.n_files == 0)) {
            status = add_file(ctx, &out);
            if (status == TFENC_OK)
                status = export_parquet_create(ctx, out.hidden[out.n_files - 1], table.columns,
                                               table.n_columns, m.keys,
                                               (const char *const *)m.values, m.n, &file);
            if (status != TFENC_OK)
                break;
            rows_in_file = 0;
        }
        if (block.n == 0)
            break;
        block_columns(layout, &block, data);
        if ((status = export_parquet_write(ctx, file, block.n, data)) != TFENC_OK)
            break;
        rows_in_file += block.n;
        summary->rows += block.n;
        if (rows_in_file == options->rows_per_file) {
            status = export_parquet_close(ctx, file);
            file = NULL;
            if (status != TFENC_OK)
                break;
        }
    }
    if (status == TFENC_OK && file != NULL) {
        status = export_parquet_close(ctx, file);
        file = NULL;
    }
    if (status == TFENC_OK)
        status = publish(ctx, &out);
    summary->files = out.n_files;
    summary->left_out = export_reader_left_out(reader);
done:
    export_parquet_abandon(file);
    if (status != TFENC_OK)
        discard(&out);
    directory_free(&out);
    metadata_free(&m);
    export_block_free(&block);
    export_reader_close(reader);
    return status;
}
