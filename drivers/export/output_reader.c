/* Reads a tfenc output back in blocks of finished documents: the file's
 * layout from its kind and datasets, a window of per-document bookkeeping
 * (lengths, offsets, chunk counts) at a time, and each block's metadata and
 * rows, run of consecutive rows by run. */
#include "export/output_reader.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hdf5.h>

#include "base/context.h"
#include "output/kinds.h"
#include "base/files.h"
#include "base/float16.h"
#include "base/hdf5_error.h"
#include "base/hdf5_intact.h"

/* Per-document bookkeeping read at a time: 1 Mi documents hold 16 MiB of
 * lengths, offsets and chunk counts, whatever the corpus's size. */
#define WINDOW_DOCUMENTS ((int64_t)1 << 20)

/* One finished document of the block being planned. */
typedef struct planned {
    int64_t document;
    int64_t first_row; /* its rows (or CSR entries) */
    int64_t rows;
    int32_t length;
    int32_t chunks;
} planned;

struct export_reader {
    char *path;
    hid_t file;
    tfenc_inspection inspection;
    export_layout layout;
    /* datasets, -1 when the file has none */
    hid_t rows, offsets, lengths, truncated, ids, source, token_ids, chunks, chunk_starts, indices;
    hid_t row_memory_type;   /* what H5Dread gives the rows as */
    tfenc_h5_float_kind widen; /* FLOAT16 or BFLOAT16: read as bits, then widened */
    size_t value_size;       /* bytes of one value in the block */
    int64_t n_documents;
    int64_t n_rows;          /* length of the rows dataset: N, T, C or entries */
    hid_t id_type;           /* the ids' fixed-length string type */
    size_t id_size;
    hid_t kept[TFENC_MAX_KEEP_FIELDS];       /* the kept fields' datasets */
    hid_t kept_valid[TFENC_MAX_KEEP_FIELDS]; /* and their masks */
    hid_t kept_type[TFENC_MAX_KEEP_FIELDS];  /* strings' fixed-length type, else -1 */
    size_t kept_size[TFENC_MAX_KEEP_FIELDS]; /* bytes of one value as read */
    hid_t source_type;       /* document_source in memory: {shard int32, line int64} */
    float *ranges;
    char **vocabulary;
    /* documents [window_first, window_first + window_count) */
    int64_t window_first, window_count;
    int32_t *window_lengths;  /* [window_count + 1]: the next one's says if it is finished */
    int64_t *window_offsets;  /* [window_count + 1]: runs and CSR */
    int32_t *window_chunks;   /* [window_count] */
    int64_t next;             /* the first document not planned yet */
    int64_t left_out;
    planned *plan;
    int64_t plan_capacity;
    char head_group[96];      /* a further head's group: "outputs/NAME/"; "" for the first */
    char located[256];        /* a dataset's path in the file (in_head) */
    uint16_t *bits;           /* 16-bit floats before widening */
    size_t bits_capacity;
};

/* The in-memory record of document_source. */
typedef struct source_record {
    int32_t shard;
    int64_t line;
} source_record;

static int h5_fail(tfenc_context *ctx, const char *path, const char *what, const char *name)
{
    char detail[256] = "";
    return tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot %s '%s': %s", path, what, name,
                       tfenc_hdf5_error_detail(detail, sizeof detail));
}

/* ------------------------------------------------------------- the layout */

static hid_t open_optional(hid_t file, const char *name)
{
    hid_t dataset = H5Lexists(file, name, H5P_DEFAULT) > 0 ? H5Dopen2(file, name, H5P_DEFAULT)
                                                           : -1;
    H5Eclear2(H5E_DEFAULT);
    return dataset;
}

/* The path of the output's dataset `name`: in its head's group when the
 * reader reads a further head. Valid until the next call. */
static const char *in_head(export_reader *reader, const char *name)
{
    snprintf(reader->located, sizeof reader->located, "%s%s", reader->head_group, name);
    return reader->located;
}

static int open_required(tfenc_context *ctx, export_reader *reader, const char *name,
                         hid_t *dataset)
{
    *dataset = open_optional(reader->file, in_head(reader, name));
    if (*dataset < 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: an output of kind %s has no dataset "
                           "'%s'", reader->path, reader->layout.kind->name,
                           name);
    return TFENC_OK;
}

/* The dimensions of a dataset of rank 1 or 2 (dims[1] = 0 for rank 1);
 * the rank, or -1. */
static int dataset_dims(hid_t dataset, int64_t dims[2])
{
    hsize_t found[2] = {0, 0};
    hid_t space = H5Dget_space(dataset);
    int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    if (rank < 1 || rank > 2 || H5Sget_simple_extent_dims(space, found, NULL) != rank)
        rank = -1;
    if (space >= 0)
        H5Sclose(space);
    dims[0] = (int64_t)found[0];
    dims[1] = rank == 2 ? (int64_t)found[1] : 0;
    return rank;
}

/* A dataset of `rank` whose first dimension is `length` (< 0: any). */
static int check_shape(tfenc_context *ctx, const export_reader *reader, hid_t dataset,
                       const char *name, int rank, int64_t length, int64_t dims[2])
{
    if (dataset_dims(dataset, dims) == rank && (length < 0 || dims[0] == length))
        return TFENC_OK;
    char rows[64] = "";
    if (length >= 0)
        snprintf(rows, sizeof rows, " of %lld rows", (long long)length);
    return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: dataset '%s' is not %s%s, as tfenc writes it",
                       reader->path, name, rank == 1 ? "a list" : "a table", rows);
}

static int has_dataset(void *file, const char *name)
{
    int found = H5Lexists(*(hid_t *)file, name, H5P_DEFAULT) > 0;
    H5Eclear2(H5E_DEFAULT);
    return found;
}

/* The output kind: the attribute, or for files older than it the rows'
 * dataset. */
static int find_kind(tfenc_context *ctx, export_reader *reader)
{
    const char *name = reader->inspection.output_kind;
    if (name == NULL) {
        const tfenc_output_kind_entry *kind =
            tfenc_output_kind_from_datasets(has_dataset, &reader->file);
        /* The kind a file without telling datasets defaults to must have its own. */
        const int found = has_dataset(&reader->file, kind->telling_dataset);
        if (!found)
            return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: no attribute 'output_kind' and no "
                               "rows dataset tfenc-export knows", reader->path);
        reader->layout.kind = kind;
        return TFENC_OK;
    }
    if ((reader->layout.kind = tfenc_output_kind_named(name)) == NULL)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: output_kind '%s' is not one tfenc-export "
                           "knows (pooled, tokens, scores, sparse, vectors)", reader->path, name);
    return TFENC_OK;
}

/* The rows' values as the block holds them: float32 (16-bit floats
 * widened, exactly), int8 or uint8, from the dataset's own type. */
static int find_element(tfenc_context *ctx, export_reader *reader)
{
    hid_t type = H5Dget_type(reader->rows);
    int status = TFENC_OK;
    if (type >= 0 && H5Tget_class(type) == H5T_INTEGER && H5Tget_size(type) == 1) {
        int is_signed = H5Tget_sign(type) != H5T_SGN_NONE;
        reader->layout.element = is_signed ? EXPORT_INT8 : EXPORT_UINT8;
        reader->row_memory_type = H5Tcopy(is_signed ? H5T_NATIVE_INT8 : H5T_NATIVE_UINT8);
        reader->value_size = 1;
    } else {
        tfenc_h5_float_kind kind = type >= 0 ? tfenc_h5_float_classify(type)
                                             : TFENC_H5_FLOAT_OTHER;
        reader->layout.element = EXPORT_FLOAT32;
        reader->value_size = sizeof(float);
        if (kind == TFENC_H5_FLOAT32) {
            reader->row_memory_type = H5Tcopy(H5T_NATIVE_FLOAT);
        } else if (kind == TFENC_H5_FLOAT16 || kind == TFENC_H5_BFLOAT16) {
            reader->widen = kind;
            reader->row_memory_type = kind == TFENC_H5_FLOAT16 ? tfenc_h5_float16_type()
                                                               : tfenc_h5_bfloat16_type();
        } else {
            status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: dataset '%s' holds values of no "
                                 "output_dtype tfenc writes (float32, float16, bfloat16, int8, "
                                 "uint8)", reader->path, reader->layout.rows_name);
        }
    }
    if (status == TFENC_OK && reader->row_memory_type < 0)
        status = h5_fail(ctx, reader->path, "make the memory type of", reader->layout.rows_name);
    if (type >= 0)
        H5Tclose(type);
    return status;
}

/* The memory type that reads a dataset of tfenc's fixed-length, NUL-padded
 * UTF-8 strings (ids, vocabulary) as they are stored, in *memory; a
 * dataset of other strings is refused. */
static int fixed_string_type(tfenc_context *ctx, const export_reader *reader, hid_t dataset,
                             const char *name, hid_t *memory)
{
    hid_t stored = H5Dget_type(dataset);
    int status = TFENC_OK;
    *memory = -1;
    if (stored < 0 || H5Tget_class(stored) != H5T_STRING || H5Tis_variable_str(stored) != 0)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: dataset '%s' does not hold the "
                             "fixed-length strings tfenc writes", reader->path, name);
    if (status == TFENC_OK) {
        *memory = H5Tcopy(H5T_C_S1);
        if (*memory < 0 || H5Tset_size(*memory, H5Tget_size(stored)) < 0
            || H5Tset_strpad(*memory, H5T_STR_NULLPAD) < 0
            || H5Tset_cset(*memory, H5Tget_cset(stored)) < 0)
            status = h5_fail(ctx, reader->path, "make the string type of", name);
    }
    if (stored >= 0)
        H5Tclose(stored);
    return status;
}

/* A whole small dataset of fixed-length strings as NUL-terminated strings
 * (NUL padding removed), for the vocabulary. */
static int read_strings(tfenc_context *ctx, export_reader *reader, const char *name,
                        char ***strings, int64_t *count)
{
    hid_t dataset = open_optional(reader->file, name);
    if (dataset < 0)
        return TFENC_OK;
    int64_t dims[2];
    hid_t memory = -1;
    int status = check_shape(ctx, reader, dataset, name, 1, -1, dims);
    if (status == TFENC_OK)
        status = fixed_string_type(ctx, reader, dataset, name, &memory);
    size_t size = memory >= 0 ? H5Tget_size(memory) : 0;
    char *bytes = NULL;
    if (status == TFENC_OK) {
        bytes = malloc((size_t)dims[0] * size + 1);
        *strings = calloc((size_t)dims[0] + 1, sizeof **strings);
        if (bytes == NULL || *strings == NULL)
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory for '%s'",
                                 reader->path, name);
        else if (dims[0] > 0 && H5Dread(dataset, memory, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes) < 0)
            status = h5_fail(ctx, reader->path, "read dataset", name);
    }
    for (int64_t i = 0; status == TFENC_OK && i < dims[0]; i++) {
        (*strings)[i] = strndup(bytes + (size_t)i * size, size);
        if ((*strings)[i] == NULL)
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory for '%s'",
                                 reader->path, name);
    }
    if (status == TFENC_OK)
        *count = dims[0];
    free(bytes);
    if (memory >= 0)
        H5Tclose(memory);
    H5Dclose(dataset);
    return status;
}

/* int8 / uint8: quantization_ranges [2, width]. */
static int read_ranges(tfenc_context *ctx, export_reader *reader)
{
    hid_t dataset = open_optional(reader->file, "quantization_ranges");
    if (dataset < 0)
        return TFENC_OK;
    int64_t dims[2];
    int status = check_shape(ctx, reader, dataset, "quantization_ranges", 2, 2, dims);
    if (status == TFENC_OK && dims[1] != reader->layout.width)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: dataset 'quantization_ranges' has %lld "
                             "columns, the rows %lld", reader->path, (long long)dims[1],
                             (long long)reader->layout.width);
    if (status == TFENC_OK) {
        reader->ranges = malloc(2 * (size_t)dims[1] * sizeof *reader->ranges + 1);
        if (reader->ranges == NULL)
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", reader->path);
        else if (H5Dread(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                         reader->ranges) < 0)
            status = h5_fail(ctx, reader->path, "read dataset", "quantization_ranges");
    }
    H5Dclose(dataset);
    reader->layout.ranges = reader->ranges;
    return status;
}

/* Kept field k: its values and its mask, [N] each; strings as ids are. */
static int open_kept(tfenc_context *ctx, export_reader *reader, int k)
{
    const tfenc_inspected_kept *field = &reader->inspection.kept[k];
    export_kept *column = &reader->layout.kept[k];
    int64_t dims[2];
    char mask[512];
    snprintf(mask, sizeof mask, "%s" TFENC_KEPT_MASK_SUFFIX, field->name);
    column->name = field->name;
    int status = open_required(ctx, reader, field->name, &reader->kept[k]);
    if (status == TFENC_OK)
        status = check_shape(ctx, reader, reader->kept[k], field->name, 1, reader->n_documents,
                             dims);
    if (status == TFENC_OK)
        status = open_required(ctx, reader, mask, &reader->kept_valid[k]);
    if (status == TFENC_OK)
        status = check_shape(ctx, reader, reader->kept_valid[k], mask, 1, reader->n_documents,
                             dims);
    if (status != TFENC_OK)
        return status;
    reader->layout.n_kept = k + 1;
    if (strcmp(field->type, "string") == 0) {
        column->element = EXPORT_STRING;
        status = fixed_string_type(ctx, reader, reader->kept[k], field->name,
                                   &reader->kept_type[k]);
        if (status == TFENC_OK)
            reader->kept_size[k] = H5Tget_size(reader->kept_type[k]);
    } else {
        column->element = strcmp(field->type, "integer") == 0 ? EXPORT_INT64 : EXPORT_FLOAT64;
        reader->kept_size[k] = 8;
    }
    return status;
}

/* The ids' string type, and document_source's in memory. */
static int open_metadata(tfenc_context *ctx, export_reader *reader)
{
    int64_t dims[2];
    const int64_t n = reader->n_documents;
    int status = open_required(ctx, reader, "lengths", &reader->lengths);
    if (status == TFENC_OK)
        status = open_required(ctx, reader, "truncated", &reader->truncated);
    if (status == TFENC_OK)
        status = check_shape(ctx, reader, reader->truncated, "truncated", 1, n, dims);
    reader->ids = open_optional(reader->file, "ids");
    if (status == TFENC_OK && reader->ids >= 0) {
        status = check_shape(ctx, reader, reader->ids, "ids", 1, n, dims);
        if (status == TFENC_OK)
            status = fixed_string_type(ctx, reader, reader->ids, "ids", &reader->id_type);
        if (status == TFENC_OK)
            reader->id_size = H5Tget_size(reader->id_type);
        reader->layout.has_ids = 1;
    }
    for (int k = 0; status == TFENC_OK && k < reader->inspection.n_kept; k++)
        status = open_kept(ctx, reader, k);
    reader->source = open_optional(reader->file, "document_source");
    if (status == TFENC_OK && reader->source >= 0) {
        reader->source_type = H5Tcreate(H5T_COMPOUND, sizeof(source_record));
        if (reader->source_type < 0
            || H5Tinsert(reader->source_type, "shard", HOFFSET(source_record, shard),
                         H5T_NATIVE_INT32) < 0
            || H5Tinsert(reader->source_type, "line", HOFFSET(source_record, line),
                         H5T_NATIVE_INT64) < 0)
            status = h5_fail(ctx, reader->path, "make the memory type of", "document_source");
        /* Each row names its file by its row in corpus_shards. */
        if (status == TFENC_OK && reader->inspection.corpus_shards.n == 0)
            status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: dataset 'document_source' without "
                                 "the table 'corpus_shards' it refers to", reader->path);
        reader->layout.has_source = 1;
    }
    return status;
}

/* The dataset that says where each document's rows begin. */
static const char *offsets_name(const export_layout *layout)
{
    return layout->rows == EXPORT_ROWS_SPARSE ? "sparse_indptr"
           : layout->kind->offsets_dataset != NULL ? layout->kind->offsets_dataset
                                                   : "chunk_offsets";
}

/* The datasets of the file's kind, checked against each other. */
static int open_rows(tfenc_context *ctx, export_reader *reader)
{
    export_layout *layout = &reader->layout;
    const int64_t n = reader->n_documents;
    int64_t dims[2] = {0, 0};
    int status = TFENC_OK;
    layout->rows_name = layout->kind->rows_dataset;
    switch (layout->kind->rows) {
    case TFENC_ROWS_PER_DOCUMENT:
        /* Every chunk's vector, with long_documents = chunk, each. */
        reader->offsets = layout->kind->chunks && layout->head == NULL
                              ? open_optional(reader->file, "chunk_offsets")
                              : -1;
        layout->rows = reader->offsets >= 0 ? EXPORT_ROWS_RUNS : EXPORT_ROWS_ONE;
        break;
    case TFENC_ROWS_PER_TOKEN:
        layout->rows = EXPORT_ROWS_RUNS;
        status = open_required(ctx, reader, layout->kind->offsets_dataset, &reader->offsets);
        break;
    case TFENC_ROWS_SPARSE:
        layout->rows_name = "sparse_values";
        layout->rows = EXPORT_ROWS_SPARSE;
        /* Its rows are written when the job completes (core/output/sparse.h). */
        if (!reader->inspection.complete)
            return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: a sparse output's rows reach the "
                               "file when its job completes, and this one has not (complete = "
                               "0): complete it first (tfenc-batch --status %s prints the "
                               "command)", reader->path, reader->path);
        status = open_required(ctx, reader, "sparse_indptr", &reader->offsets);
        if (status == TFENC_OK)
            status = open_required(ctx, reader, "sparse_indices", &reader->indices);
        break;
    }
    if (status == TFENC_OK)
        status = open_required(ctx, reader, layout->rows_name, &reader->rows);
    if (status == TFENC_OK)
        status = check_shape(ctx, reader, reader->rows, layout->rows_name,
                             layout->rows == EXPORT_ROWS_SPARSE ? 1 : 2,
                             layout->rows == EXPORT_ROWS_ONE ? n : -1, dims);
    reader->n_rows = dims[0];
    layout->width = dims[1];
    if (status == TFENC_OK && reader->offsets >= 0)
        status = check_shape(ctx, reader, reader->offsets,
                             offsets_name(layout), 1, n + 1, dims);
    if (status == TFENC_OK && reader->indices >= 0)
        status = check_shape(ctx, reader, reader->indices, "sparse_indices", 1, reader->n_rows,
                             dims);
    if (status == TFENC_OK)
        status = find_element(ctx, reader);
    /* What goes with the rows: a token's id, a chunk's count and start. */
    reader->token_ids = layout->rows == EXPORT_ROWS_RUNS && layout->kind->token_ids
                            ? open_optional(reader->file, "token_ids")
                            : -1;
    reader->chunks = layout->head == NULL ? open_optional(reader->file, "chunks") : -1;
    reader->chunk_starts = layout->rows == EXPORT_ROWS_RUNS && layout->kind->chunks
                               ? open_optional(reader->file, "chunk_starts")
                               : -1;
    if (status == TFENC_OK && reader->token_ids >= 0)
        status = check_shape(ctx, reader, reader->token_ids, "token_ids", 1, reader->n_rows, dims);
    if (status == TFENC_OK && reader->chunks >= 0)
        status = check_shape(ctx, reader, reader->chunks, "chunks", 1, n, dims);
    if (status == TFENC_OK && reader->chunk_starts >= 0)
        status = check_shape(ctx, reader, reader->chunk_starts, "chunk_starts", 1,
                             reader->n_rows, dims);
    layout->has_token_ids = reader->token_ids >= 0;
    layout->has_chunks = reader->chunks >= 0;
    layout->has_chunk_starts = reader->chunk_starts >= 0;
    if (status == TFENC_OK && layout->element != EXPORT_FLOAT32)
        status = read_ranges(ctx, reader);
    if (status == TFENC_OK && layout->rows == EXPORT_ROWS_SPARSE)
        status = read_strings(ctx, reader, in_head(reader, "vocabulary"), &reader->vocabulary,
                              &layout->vocabulary_size);
    layout->vocabulary = reader->vocabulary;
    return status;
}

/* A further head's rows (group /outputs/NAME), when the caller names one
 * other than the first: its kind and attributes are the group's. */
static int find_head(tfenc_context *ctx, export_reader *reader, const char *name)
{
    const tfenc_inspection *i = &reader->inspection;
    export_layout *layout = &reader->layout;
    layout->dtype = i->dtype;
    layout->labels = i->id2label;
    if (name == NULL || (i->head != NULL && strcmp(name, i->head) == 0))
        return TFENC_OK;
    for (int k = 0; k < i->n_heads; k++) {
        if (strcmp(i->heads[k].name, name) != 0)
            continue;
        layout->head = i->heads[k].name;
        layout->kind = tfenc_output_kind_named(i->heads[k].output_kind);
        layout->dtype = i->heads[k].dtype;
        layout->labels = i->heads[k].id2label;
        snprintf(reader->head_group, sizeof reader->head_group, "outputs/%s/", name);
        return TFENC_OK;
    }
    char names[512] = "";
    size_t used = (size_t)snprintf(names, sizeof names, "%s", i->head != NULL ? i->head : "");
    for (int k = 0; k < i->n_heads && used < sizeof names; k++)
        used += (size_t)snprintf(names + used, sizeof names - used, ", %s", i->heads[k].name);
    return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: --output %s: the file has no output of that "
                       "name (%s%s)", reader->path, name, i->head != NULL ? "its outputs: " : "",
                       i->head != NULL ? names : "it has one output, of no name");
}

int export_reader_open(tfenc_context *ctx, const char *path, const char *head,
                       export_reader **out)
{
    *out = NULL;
    export_reader *reader = calloc(1, sizeof *reader);
    if (reader == NULL || (reader->path = strdup(path)) == NULL) {
        free(reader);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    }
    reader->file = reader->rows = reader->offsets = reader->lengths = reader->truncated = -1;
    reader->ids = reader->source = reader->token_ids = reader->chunks = -1;
    reader->chunk_starts = reader->indices = reader->row_memory_type = -1;
    reader->id_type = reader->source_type = -1;
    for (int k = 0; k < TFENC_MAX_KEEP_FIELDS; k++)
        reader->kept[k] = reader->kept_valid[k] = reader->kept_type[k] = -1;
    reader->layout.inspection = &reader->inspection;
    /* A directory or a FIFO is refused for what it is (HDF5 would block on
     * a FIFO); the rest (missing, unreadable, not HDF5, not a tfenc output,
     * shapes, finished documents) is --status's check. */
    int status = TFENC_OK;
    if (access(path, F_OK) == 0)
        status = tfenc_file_check_regular(ctx, "input", path);
    if (status == TFENC_OK)
        status = tfenc_inspect_output(ctx, path, &reader->inspection);
    reader->n_documents = reader->inspection.n_documents;
    if (status == TFENC_OK && reader->inspection.n_finished < 0 && !reader->inspection.complete)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: unfinished, and written by a tfenc that "
                             "did not mark unwritten lengths: which documents are finished "
                             "cannot be told; complete the job first", path);
    if (status == TFENC_OK) {
        hid_t access_properties = H5Pcreate(H5P_FILE_ACCESS);
        if (access_properties >= 0 && H5Pset_file_locking(access_properties, 0, 1) >= 0)
            reader->file = H5Fopen(path, H5F_ACC_RDONLY, access_properties);
        if (access_properties >= 0)
            H5Pclose(access_properties);
        char detail[256] = "";
        if (reader->file < 0)
            status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot open it read-only: %s", path,
                                 tfenc_hdf5_error_detail(detail, sizeof detail));
    }
    if (status == TFENC_OK)
        status = find_kind(ctx, reader);
    if (status == TFENC_OK)
        status = open_metadata(ctx, reader);
    /* After the documents' metadata, which is the root's for every head. */
    if (status == TFENC_OK)
        status = find_head(ctx, reader, head);
    if (status == TFENC_OK)
        status = open_rows(ctx, reader);
    if (status == TFENC_OK) {
        size_t window = (size_t)WINDOW_DOCUMENTS + 1;
        reader->window_lengths = malloc(window * sizeof *reader->window_lengths);
        reader->window_offsets = malloc(window * sizeof *reader->window_offsets);
        reader->window_chunks = malloc(window * sizeof *reader->window_chunks);
        if (reader->window_lengths == NULL || reader->window_offsets == NULL
            || reader->window_chunks == NULL)
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", path);
    }
    if (status != TFENC_OK) {
        export_reader_close(reader);
        return status;
    }
    *out = reader;
    return TFENC_OK;
}

const export_layout *export_reader_layout(const export_reader *reader)
{
    return &reader->layout;
}

int64_t export_reader_left_out(const export_reader *reader)
{
    return reader->left_out;
}

/* ------------------------------------------------------------------ reads */

/* Reads rows first .. first+count-1 of a dataset (rank 1, or rank 2 with
 * `width` columns) as `memory_type` into `into`, and checks the file was
 * not cut short under the read (core/base/hdf5_intact.h). */
static int read_rows(tfenc_context *ctx, const export_reader *reader, hid_t dataset,
                     const char *name, int64_t first, int64_t count, int64_t width,
                     hid_t memory_type, void *into)
{
    if (count == 0)
        return TFENC_OK;
    const int rank = width > 0 ? 2 : 1;
    hsize_t start[2] = {(hsize_t)first, 0}, size[2] = {(hsize_t)count, (hsize_t)width};
    hid_t file_space = H5Dget_space(dataset);
    hid_t memory_space = H5Screate_simple(rank, size, NULL);
    int ok = file_space >= 0 && memory_space >= 0
             && H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, NULL, size, NULL) >= 0
             && H5Dread(dataset, memory_type, memory_space, file_space, H5P_DEFAULT, into) >= 0;
    int status = ok ? TFENC_OK
                    : h5_fail(ctx, reader->path, "read dataset", name);
    if (memory_space >= 0)
        H5Sclose(memory_space);
    if (file_space >= 0)
        H5Sclose(file_space);
    if (status == TFENC_OK)
        status = tfenc_hdf5_check_intact(ctx, reader->file, reader->path, name);
    return status;
}

/* The bookkeeping of the documents from `first` on. */
static int load_window(tfenc_context *ctx, export_reader *reader, int64_t first)
{
    const int64_t n = reader->n_documents;
    const int64_t count = n - first < WINDOW_DOCUMENTS ? n - first : WINDOW_DOCUMENTS;
    /* One more length, when there is one: whether the next document is finished. */
    const int64_t lengths = first + count < n ? count + 1 : count;
    int status = read_rows(ctx, reader, reader->lengths, "lengths", first, lengths, 0,
                           H5T_NATIVE_INT32, reader->window_lengths);
    if (status == TFENC_OK && reader->offsets >= 0)
        status = read_rows(ctx, reader, reader->offsets, offsets_name(&reader->layout), first, count + 1, 0, H5T_NATIVE_INT64, reader->window_offsets);
    if (status == TFENC_OK && reader->chunks >= 0)
        status = read_rows(ctx, reader, reader->chunks, "chunks", first, count, 0,
                           H5T_NATIVE_INT32, reader->window_chunks);
    reader->window_first = first;
    reader->window_count = status == TFENC_OK ? count : 0;
    return status;
}

/* Document `document`'s (in the window) rows: *rows = -1 when the file
 * does not record where they end (see output_reader.h). */
static int find_rows(tfenc_context *ctx, export_reader *reader, int64_t document,
                     int64_t *first_row, int64_t *rows)
{
    const int64_t i = document - reader->window_first;
    const export_layout *layout = &reader->layout;
    if (layout->rows == EXPORT_ROWS_ONE) {
        *first_row = document;
        *rows = 1;
        return TFENC_OK;
    }
    const int64_t start = reader->window_offsets[i];
    int64_t end = -1;
    if (document + 1 == reader->n_documents || reader->window_lengths[i + 1] >= 0
        || layout->rows == EXPORT_ROWS_SPARSE)
        end = reader->window_offsets[i + 1];
    else if (layout->kind->token_rows)
        end = start + reader->window_lengths[i];
    else if (layout->kind->chunks && reader->chunks >= 0)
        end = start + reader->window_chunks[i];
    if (end < 0) {
        *rows = -1;
        return TFENC_OK;
    }
    if (start < 0 || end < start || end > reader->n_rows)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: inconsistent: document %lld's rows "
                           "%lld .. %lld lie outside '%s' [%lld]", reader->path,
                           (long long)document, (long long)start, (long long)end - 1,
                           layout->rows_name, (long long)reader->n_rows);
    *first_row = start;
    *rows = end - start;
    return TFENC_OK;
}

/* Bytes of one row of the block (values, and what goes with each row). */
static size_t row_bytes(const export_reader *reader)
{
    const export_layout *layout = &reader->layout;
    if (layout->rows == EXPORT_ROWS_SPARSE)
        return sizeof(float) + sizeof(int32_t);
    return (size_t)layout->width * reader->value_size
           + (layout->has_token_ids ? sizeof(int32_t) : 0)
           + (layout->has_chunk_starts ? sizeof(int32_t) : 0);
}

/* Chooses the block's documents: reader->plan[0 .. *n-1]. */
static int plan_block(tfenc_context *ctx, export_reader *reader, int64_t max_documents,
                      size_t max_bytes, int64_t *n)
{
    *n = 0;
    if (reader->plan_capacity < max_documents) {
        planned *grown = realloc(reader->plan, (size_t)max_documents * sizeof *grown);
        if (grown == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", reader->path);
        reader->plan = grown;
        reader->plan_capacity = max_documents;
    }
    const size_t one_row = row_bytes(reader);
    size_t bytes = 0;
    int status = TFENC_OK;
    while (status == TFENC_OK && *n < max_documents && reader->next < reader->n_documents) {
        const int64_t document = reader->next;
        if (document >= reader->window_first + reader->window_count) {
            status = load_window(ctx, reader, document);
            continue;
        }
        const int64_t i = document - reader->window_first;
        int64_t first_row = 0, rows = 0;
        if (reader->window_lengths[i] < 0) {
            reader->next++;
            continue;
        }
        status = find_rows(ctx, reader, document, &first_row, &rows);
        if (status != TFENC_OK)
            break;
        if (rows < 0) {
            reader->left_out++;
            reader->next++;
            continue;
        }
        const size_t document_bytes = (size_t)rows * one_row;
        if (*n > 0 && bytes + document_bytes > max_bytes)
            break;
        reader->plan[(*n)++] = (planned){
            .document = document, .first_row = first_row, .rows = rows,
            .length = reader->window_lengths[i],
            .chunks = reader->chunks >= 0 ? reader->window_chunks[i] : 0};
        bytes += document_bytes;
        reader->next++;
    }
    return status;
}

/* Room for the block's arrays, carved from one allocation that grows. */
typedef struct arena {
    char *base;
    size_t used;
} arena;

static void *carve(arena *a, size_t bytes, int wanted)
{
    if (!wanted)
        return NULL;
    void *at = a->base != NULL ? a->base + a->used : NULL;
    a->used += (bytes + 15) & ~(size_t)15;
    return at;
}

/* Lays the block's arrays out for n documents and `rows` rows; with a
 * NULL base only counts the bytes. */
static void lay_out(const export_reader *reader, export_block *block, arena *a, int64_t n,
                    int64_t rows, source_record **records)
{
    const export_layout *layout = &reader->layout;
    const size_t documents = (size_t)n, values = (size_t)rows * (size_t)(layout->width > 0
                                                                            ? layout->width : 1);
    block->documents = carve(a, documents * sizeof(int64_t), 1);
    block->lengths = carve(a, documents * sizeof(int32_t), 1);
    block->truncated = carve(a, documents * sizeof(int32_t), 1);
    block->chunks = carve(a, documents * sizeof(int32_t), layout->has_chunks);
    block->ids = carve(a, documents * reader->id_size + 1, layout->has_ids);
    block->id_offsets = carve(a, (documents + 1) * sizeof(int64_t), layout->has_ids);
    for (int k = 0; k < layout->n_kept; k++) {
        const int strings = layout->kept[k].element == EXPORT_STRING;
        block->kept_values[k] = carve(a, documents * reader->kept_size[k] + 1, 1);
        block->kept_offsets[k] = carve(a, (documents + 1) * sizeof(int64_t), strings);
        block->kept_valid[k] = carve(a, documents, 1);
    }
    *records = carve(a, documents * sizeof(source_record), layout->has_source);
    block->source_lines = carve(a, documents * sizeof(int64_t), layout->has_source);
    block->source_offsets = carve(a, (documents + 1) * sizeof(int64_t), layout->has_source);
    block->values = carve(a, values * (layout->rows == EXPORT_ROWS_SPARSE ? sizeof(float)
                                                                         : reader->value_size),
                          1);
    block->row_offsets = carve(a, (documents + 1) * sizeof(int64_t), 1);
    block->indices = carve(a, (size_t)rows * sizeof(int32_t),
                           layout->rows == EXPORT_ROWS_SPARSE);
    block->token_ids = carve(a, (size_t)rows * sizeof(int32_t), layout->has_token_ids);
    block->chunk_starts = carve(a, (size_t)rows * sizeof(int32_t), layout->has_chunk_starts);
}

/* Reads `dataset` for the block's documents (runs of consecutive ones),
 * `size` bytes each, into `into`. */
static int read_per_document(tfenc_context *ctx, export_reader *reader, int64_t n,
                             hid_t dataset, const char *name, hid_t memory_type, size_t size,
                             void *into)
{
    int status = TFENC_OK;
    for (int64_t j = 0; status == TFENC_OK && j < n;) {
        int64_t run = 1;
        while (j + run < n && reader->plan[j + run].document == reader->plan[j].document + run)
            run++;
        status = read_rows(ctx, reader, dataset, name, reader->plan[j].document, run, 0,
                           memory_type, (char *)into + (size_t)j * size);
        j += run;
    }
    return status;
}

/* Reads `dataset` (rows of `width` values, 0: one value) for the block's
 * rows, runs of contiguous rows at a time, `size` bytes a value. */
static int read_per_row(tfenc_context *ctx, export_reader *reader, int64_t n, hid_t dataset,
                        const char *name, int64_t width, hid_t memory_type, size_t size,
                        void *into)
{
    const size_t row = size * (size_t)(width > 0 ? width : 1);
    int64_t at = 0;
    int status = TFENC_OK;
    for (int64_t j = 0; status == TFENC_OK && j < n;) {
        int64_t first = reader->plan[j].first_row, rows = reader->plan[j].rows, k = j + 1;
        while (k < n && reader->plan[k].first_row == first + rows)
            rows += reader->plan[k++].rows;
        status = read_rows(ctx, reader, dataset, name, first, rows, width, memory_type,
                           (char *)into + (size_t)at * row);
        at += rows;
        j = k;
    }
    return status;
}

/* The rows' values, 16-bit floats read as their bits and widened. */
static int read_values(tfenc_context *ctx, export_reader *reader, int64_t n, int64_t rows,
                       export_block *block)
{
    const export_layout *layout = &reader->layout;
    if (layout->rows == EXPORT_ROWS_SPARSE)
        return read_per_row(ctx, reader, n, reader->rows, layout->rows_name, 0,
                            H5T_NATIVE_FLOAT, sizeof(float), block->values);
    if (!reader->widen)
        return read_per_row(ctx, reader, n, reader->rows, layout->rows_name, layout->width,
                            reader->row_memory_type, reader->value_size, block->values);
    const size_t count = (size_t)rows * (size_t)layout->width;
    if (reader->bits_capacity < count) {
        uint16_t *grown = realloc(reader->bits, count * sizeof *grown);
        if (grown == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", reader->path);
        reader->bits = grown;
        reader->bits_capacity = count;
    }
    int status = read_per_row(ctx, reader, n, reader->rows, layout->rows_name, layout->width,
                              reader->row_memory_type, sizeof(uint16_t), reader->bits);
    if (status == TFENC_OK && reader->widen == TFENC_H5_FLOAT16)
        tfenc_float16_to_float32_array(block->values, reader->bits, count);
    else if (status == TFENC_OK)
        tfenc_bfloat16_to_float32_array(block->values, reader->bits, count);
    return status;
}

/* ids, kept strings: the n fixed-length strings of `size` bytes packed
 * into bytes and offsets, in place. */
static void pack_strings(int64_t n, size_t size, char *strings, int64_t *offsets)
{
    int64_t at = 0;
    for (int64_t j = 0; j < n; j++) {
        const char *string = strings + (size_t)j * size;
        size_t length = strnlen(string, size);
        offsets[j] = at;
        memmove(strings + at, string, length); /* never ahead of what is still unread */
        at += (int64_t)length;
    }
    offsets[n] = at;
}

/* document_source: each record's file (its corpus_shards path) and line. */
static int unpack_sources(tfenc_context *ctx, export_reader *reader, export_block *block,
                          const source_record *records, char **sources,
                          size_t *sources_capacity)
{
    const tfenc_corpus_shards *shards = &reader->inspection.corpus_shards;
    size_t bytes = 0;
    for (int64_t j = 0; j < block->n; j++) {
        if (records[j].shard < 0 || records[j].shard >= shards->n)
            return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: inconsistent: document %lld's "
                               "document_source names file %d, and corpus_shards has %d",
                               reader->path, (long long)block->documents[j],
                               (int)records[j].shard, shards->n);
        bytes += strlen(shards->shards[records[j].shard].path);
    }
    if (*sources_capacity < bytes + 1) {
        char *grown = realloc(*sources, bytes + 1);
        if (grown == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", reader->path);
        *sources = grown;
        *sources_capacity = bytes + 1;
    }
    size_t at = 0;
    for (int64_t j = 0; j < block->n; j++) {
        const char *path = shards->shards[records[j].shard].path;
        size_t length = strlen(path);
        memcpy(*sources + at, path, length);
        block->source_offsets[j] = (int64_t)at;
        at += length;
        block->source_lines[j] = records[j].line;
    }
    block->source_offsets[block->n] = (int64_t)at;
    return TFENC_OK;
}

/* What export_block keeps beside the arrays: its arena and the sources'
 * bytes. */
typedef struct block_storage {
    char *arena;
    size_t arena_capacity;
    char *sources;
    size_t sources_capacity;
} block_storage;

int export_reader_next(tfenc_context *ctx, export_reader *reader, int64_t max_documents,
                       size_t max_bytes, export_block *block)
{
    block_storage *storage = block->storage;
    if (storage == NULL && (storage = block->storage = calloc(1, sizeof *storage)) == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", reader->path);
    int64_t n = 0;
    block->n = 0;
    int status = plan_block(ctx, reader, max_documents > 0 ? max_documents : 1, max_bytes, &n);
    if (status != TFENC_OK || n == 0)
        return status;
    int64_t rows = 0;
    for (int64_t j = 0; j < n; j++)
        rows += reader->plan[j].rows;
    source_record *records = NULL;
    arena sizing = {NULL, 0};
    lay_out(reader, block, &sizing, n, rows, &records);
    if (storage->arena_capacity < sizing.used) {
        char *grown = realloc(storage->arena, sizing.used);
        if (grown == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory for %lld documents "
                               "(%zu bytes)", reader->path, (long long)n, sizing.used);
        storage->arena = grown;
        storage->arena_capacity = sizing.used;
    }
    arena room = {storage->arena, 0};
    lay_out(reader, block, &room, n, rows, &records);
    block->n = n;
    block->row_offsets[0] = 0;
    for (int64_t j = 0; j < n; j++) {
        block->documents[j] = reader->plan[j].document;
        block->lengths[j] = reader->plan[j].length;
        if (block->chunks != NULL)
            block->chunks[j] = reader->plan[j].chunks;
        block->row_offsets[j + 1] = block->row_offsets[j] + reader->plan[j].rows;
    }
    status = read_per_document(ctx, reader, n, reader->truncated, "truncated", H5T_NATIVE_INT32,
                               sizeof(int32_t), block->truncated);
    if (status == TFENC_OK && block->ids != NULL) {
        status = read_per_document(ctx, reader, n, reader->ids, "ids", reader->id_type,
                                   reader->id_size, block->ids);
        if (status == TFENC_OK)
            pack_strings(n, reader->id_size, block->ids, block->id_offsets);
    }
    for (int k = 0; status == TFENC_OK && k < reader->layout.n_kept; k++) {
        const export_kept *field = &reader->layout.kept[k];
        hid_t memory_type = field->element == EXPORT_STRING  ? reader->kept_type[k]
                            : field->element == EXPORT_INT64 ? H5T_NATIVE_INT64
                                                             : H5T_NATIVE_DOUBLE;
        status = read_per_document(ctx, reader, n, reader->kept[k], field->name, memory_type,
                                   reader->kept_size[k], block->kept_values[k]);
        if (status == TFENC_OK)
            status = read_per_document(ctx, reader, n, reader->kept_valid[k], field->name,
                                       H5T_NATIVE_UINT8, 1, block->kept_valid[k]);
        if (status == TFENC_OK && field->element == EXPORT_STRING)
            pack_strings(n, reader->kept_size[k], block->kept_values[k], block->kept_offsets[k]);
    }
    if (status == TFENC_OK && records != NULL) {
        status = read_per_document(ctx, reader, n, reader->source, "document_source",
                                   reader->source_type, sizeof(source_record), records);
        if (status == TFENC_OK)
            status = unpack_sources(ctx, reader, block, records, &storage->sources,
                                    &storage->sources_capacity);
        block->sources = storage->sources;
    }
    if (status == TFENC_OK)
        status = read_values(ctx, reader, n, rows, block);
    if (status == TFENC_OK && block->indices != NULL)
        status = read_per_row(ctx, reader, n, reader->indices, "sparse_indices", 0,
                              H5T_NATIVE_INT32, sizeof(int32_t), block->indices);
    if (status == TFENC_OK && block->token_ids != NULL)
        status = read_per_row(ctx, reader, n, reader->token_ids, "token_ids", 0,
                              H5T_NATIVE_INT32, sizeof(int32_t), block->token_ids);
    if (status == TFENC_OK && block->chunk_starts != NULL)
        status = read_per_row(ctx, reader, n, reader->chunk_starts, "chunk_starts", 0,
                              H5T_NATIVE_INT32, sizeof(int32_t), block->chunk_starts);
    if (status != TFENC_OK)
        block->n = 0;
    return status;
}

void export_block_free(export_block *block)
{
    block_storage *storage = block->storage;
    if (storage != NULL) {
        free(storage->arena);
        free(storage->sources);
        free(storage);
    }
    memset(block, 0, sizeof *block);
}

void export_reader_close(export_reader *reader)
{
    if (reader == NULL)
        return;
    hid_t datasets[] = {reader->rows, reader->offsets, reader->lengths, reader->truncated,
                        reader->ids, reader->source, reader->token_ids, reader->chunks,
                        reader->chunk_starts, reader->indices};
    for (size_t i = 0; i < sizeof datasets / sizeof *datasets; i++)
        if (datasets[i] >= 0)
            H5Dclose(datasets[i]);
    hid_t types[] = {reader->row_memory_type, reader->id_type, reader->source_type};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (types[i] >= 0)
            H5Tclose(types[i]);
    for (int k = 0; k < TFENC_MAX_KEEP_FIELDS; k++) {
        if (reader->kept[k] >= 0)
            H5Dclose(reader->kept[k]);
        if (reader->kept_valid[k] >= 0)
            H5Dclose(reader->kept_valid[k]);
        if (reader->kept_type[k] >= 0)
            H5Tclose(reader->kept_type[k]);
    }
    if (reader->file >= 0)
        H5Fclose(reader->file);
    H5Eclear2(H5E_DEFAULT);
    tfenc_inspection_free(&reader->inspection);
    for (int64_t i = 0; reader->vocabulary != NULL && reader->vocabulary[i] != NULL; i++)
        free(reader->vocabulary[i]);
    free(reader->vocabulary);
    free(reader->ranges);
    free(reader->window_lengths);
    free(reader->window_offsets);
    free(reader->window_chunks);
    free(reader->plan);
    free(reader->bits);
    free(reader->path);
    free(reader);
}
