/* The datasets of the file a job writes, described once (output_layout.h):
 * tfenc_output_create makes them from this table and tfenc_output_reopen
 * holds an existing file to the same table before it appends to it. */
#include "output/output_layout.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#include "config.h"
#include "base/context.h"
#include "output/output_internal.h"

/* When a dataset is part of a job's file. */
typedef enum presence {
    WHEN_ROWS,        /* the kind writes rows as it goes (all but sparse, sparse.h) */
    WHEN_ROW_RUNS,    /* documents own runs of rows: per-token kinds, chunks = each */
    WHEN_CHUNK_EACH,  /* a row per chunk */
    WHEN_TOKEN_IDS,   /* a per-token kind with [job] output_ids */
    WHEN_CHUNKS,      /* chunks = mean or each */
    WHEN_ALWAYS,
    WHEN_IDS,         /* the corpus has ids */
    WHEN_SOURCE       /* has_document_source */
} presence;

/* A dataset's element type in the file. */
typedef enum element {
    ELEMENT_ROW,     /* the dtype's: out->float_type */
    ELEMENT_INT32,
    ELEMENT_INT64,
    ELEMENT_ID,      /* a fixed-length string as long as the longest id */
    ELEMENT_SOURCE,  /* document_source's compound */
    ELEMENT_KEPT,    /* a kept field's values: out->kept[].file_type */
    ELEMENT_MASK     /* a kept field's NAME_valid: uint8 */
} element;

/* Its first dimension. */
typedef enum extent {
    LENGTH_DOCUMENTS,  /* N */
    LENGTH_BOUNDARIES, /* N + 1 */
    LENGTH_ROWS,       /* T: the rows of the row runs (tokens, or chunks) */
    LENGTH_KIND_ROWS   /* T with row runs, else N */
} extent;

typedef struct layout_entry {
    const char *name;    /* NULL: the kind's rows dataset, or its offsets (`offsets`) */
    int offsets;         /* the offsets dataset of the row runs */
    presence presence;
    element element;
    extent length;
    int row_wide;        /* rank 2: [length, the stored row's width] */
    int fill_unwritten;  /* filled with -1, "not written yet" (lengths) */
    size_t handle;       /* offsetof the struct tfenc_output member that keeps it open */
    int kept;            /* ELEMENT_KEPT, ELEMENT_MASK: the field's index in out->kept */
} layout_entry;

/* Every dataset a job writes as it goes, in the order they are created
 * (output/output.h's layout). The small whole datasets (ranges, sample,
 * calibration, corpus_shards) are written once at creation by
 * output_attributes.c and the CSR at the end by sparse.c; output_checks.c
 * holds every one of them, these included, to their rules. */
static const layout_entry layout[] = {
    {.presence = WHEN_ROWS, .element = ELEMENT_ROW, .length = LENGTH_KIND_ROWS, .row_wide = 1,
     .handle = offsetof(tfenc_output, rows)},
    {.offsets = 1, .presence = WHEN_ROW_RUNS, .element = ELEMENT_INT64,
     .length = LENGTH_BOUNDARIES, .handle = offsetof(tfenc_output, offsets)},
    {.name = "chunk_starts", .presence = WHEN_CHUNK_EACH, .element = ELEMENT_INT32,
     .length = LENGTH_ROWS, .handle = offsetof(tfenc_output, chunk_starts)},
    {.name = "token_ids", .presence = WHEN_TOKEN_IDS, .element = ELEMENT_INT32,
     .length = LENGTH_ROWS, .handle = offsetof(tfenc_output, token_ids)},
    {.name = "chunks", .presence = WHEN_CHUNKS, .element = ELEMENT_INT32,
     .length = LENGTH_DOCUMENTS, .handle = offsetof(tfenc_output, chunk_counts)},
    {.name = "lengths", .presence = WHEN_ALWAYS, .element = ELEMENT_INT32,
     .length = LENGTH_DOCUMENTS, .fill_unwritten = 1, .handle = offsetof(tfenc_output, lengths)},
    {.name = "truncated", .presence = WHEN_ALWAYS, .element = ELEMENT_INT32,
     .length = LENGTH_DOCUMENTS, .handle = offsetof(tfenc_output, truncated)},
    {.name = "ids", .presence = WHEN_IDS, .element = ELEMENT_ID, .length = LENGTH_DOCUMENTS,
     .handle = offsetof(tfenc_output, ids)},
    {.name = "document_source", .presence = WHEN_SOURCE, .element = ELEMENT_SOURCE,
     .length = LENGTH_DOCUMENTS, .handle = offsetof(tfenc_output, document_source)},
};

#define N_LAYOUT (sizeof layout / sizeof layout[0])

/* The two datasets of kept field k ([job] keep_fields), which follow the
 * table's in the file: its values, and (mask) NAME_valid, whose 0 fill
 * says null until the document is written. */
static layout_entry kept_entry(int k, int mask)
{
    return (layout_entry){.presence = WHEN_ALWAYS, .element = mask ? ELEMENT_MASK : ELEMENT_KEPT,
                          .length = LENGTH_DOCUMENTS, .kept = k};
}

static const char *entry_name(const tfenc_output *out, const layout_entry *entry)
{
    if (entry->element == ELEMENT_KEPT || entry->element == ELEMENT_MASK)
        return entry->element == ELEMENT_KEPT ? out->kept[entry->kept].name
                                              : out->kept[entry->kept].mask;
    return entry->name != NULL ? entry->name
           : entry->offsets    ? tfenc_output_offsets_name(out)
                               : tfenc_output_rows_name(out);
}

static int present(const tfenc_output *out, const tfenc_output_options *options,
                   const layout_entry *entry)
{
    switch (entry->presence) {
    case WHEN_ROWS:
        return out->kind->rows_dataset != NULL;
    case WHEN_ROW_RUNS:
        return tfenc_output_has_row_runs(out);
    case WHEN_CHUNK_EACH:
        return out->chunks == TFENC_CHUNKS_EACH;
    case WHEN_TOKEN_IDS:
        return tfenc_output_per_token(out->kind) && options->has_token_ids;
    case WHEN_CHUNKS:
        return out->chunks != TFENC_CHUNKS_OFF;
    case WHEN_IDS:
        return options->has_ids;
    case WHEN_SOURCE:
        return options->has_document_source;
    case WHEN_ALWAYS:
        break;
    }
    return 1;
}

static int64_t entry_length(const tfenc_output *out, const layout_entry *entry)
{
    switch (entry->length) {
    case LENGTH_BOUNDARIES:
        return out->n_documents + 1;
    case LENGTH_ROWS:
        return out->n_tokens;
    case LENGTH_KIND_ROWS:
        return tfenc_output_has_row_runs(out) ? out->n_tokens : out->n_documents;
    case LENGTH_DOCUMENTS:
        break;
    }
    return out->n_documents;
}

static hid_t *entry_handle(tfenc_output *out, const layout_entry *entry)
{
    if (entry->element == ELEMENT_KEPT || entry->element == ELEMENT_MASK)
        return entry->element == ELEMENT_KEPT ? &out->kept[entry->kept].values
                                              : &out->kept[entry->kept].valid;
    return (hid_t *)((char *)out + entry->handle);
}

/* The entry's file type, a new handle to close (the rows' and the ids'
 * are copies of the handle's). */
static hid_t entry_type(const tfenc_output *out, const layout_entry *entry)
{
    switch (entry->element) {
    case ELEMENT_ROW:
        return H5Tcopy(out->float_type);
    case ELEMENT_INT64:
        return H5Tcopy(H5T_STD_I64LE);
    case ELEMENT_ID:
        return out->id_type >= 0 ? H5Tcopy(out->id_type)
                                 : tfenc_output_string_type(out->id_length);
    case ELEMENT_KEPT:
        return H5Tcopy(out->kept[entry->kept].file_type);
    case ELEMENT_MASK:
        return H5Tcopy(H5T_STD_U8LE);
    case ELEMENT_SOURCE:
        return tfenc_output_source_type(0);
    case ELEMENT_INT32:
        break;
    }
    return H5Tcopy(H5T_STD_I32LE);
}

/* ------------------------------------------------------------------ create */

/* Creates a dataset [dims[0], width] (rank 2 when width > 0, else rank 1),
 * chunked about CHUNK_BYTES per chunk. */
int tfenc_output_create_dataset(tfenc_context *ctx, tfenc_output *out, const char *name,
                                hid_t type, int64_t length, int64_t width, int compress,
                                const void *fill, hid_t *dataset)
{
    int rank = width > 0 ? 2 : 1;
    hsize_t dims[2] = {(hsize_t)length, (hsize_t)(width > 0 ? width : 1)};
    size_t row_bytes = H5Tget_size(type) * (size_t)dims[1];
    hid_t space = H5Screate_simple(rank, dims, NULL);
    hid_t create = H5Pcreate(H5P_DATASET_CREATE);
    hid_t access = H5Pcreate(H5P_DATASET_ACCESS);
    int ok = space >= 0 && create >= 0 && access >= 0;
    /* An empty dataset cannot be chunked (chunks must not exceed fixed
     * dimensions), and has nothing to compress. */
    if (ok && length > 0) {
        hsize_t chunk[2] = {CHUNK_BYTES / row_bytes, dims[1]};
        if (chunk[0] < 1)
            chunk[0] = 1;
        if (chunk[0] > dims[0])
            chunk[0] = dims[0];
        ok = H5Pset_chunk(create, rank, chunk) >= 0;
        if (ok && compress)
            ok = H5Pset_shuffle(create) >= 0 && H5Pset_deflate(create, 4) >= 0;
        /* Uncompressed chunks are allocated at creation and, with no chunk
         * cache, written in place: scattered rows cost no read-modify-write,
         * and each write is on disk in call order, so a length >= 0 (written
         * last) reliably marks a finished document in a killed job's file.
         * (MPI-IO writes bypass the cache anyway.) */
        if (ok && !compress)
            ok = H5Pset_alloc_time(create, H5D_ALLOC_TIME_EARLY) >= 0;
        if (ok)
            ok = tfenc_output_set_chunk_cache(access, compress);
    }
    if (ok && fill != NULL)
        ok = H5Pset_fill_value(create, type, fill) >= 0
             && H5Pset_fill_time(create, H5D_FILL_TIME_ALLOC) >= 0;
    else if (ok)
        /* The rows are all written by the job: filling them first would
         * write the whole dataset twice. */
        ok = H5Pset_fill_time(create, H5D_FILL_TIME_NEVER) >= 0;
    if (ok)
        *dataset = H5Dcreate2(out->file, name, type, space, H5P_DEFAULT, create, access);
    int status = !ok || *dataset < 0
        ? tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, out->path, "cannot create dataset '%s'", name)
        : TFENC_OK;
    if (space >= 0)
        H5Sclose(space);
    if (create >= 0)
        H5Pclose(create);
    if (access >= 0)
        H5Pclose(access);
    return status;
}


/* Creates one entry's dataset, filled with what an unwritten element
 * means: -1 for lengths, 0 (null) for a kept field's mask, "", 0 or NaN
 * for its values; the rest are left unfilled (the job writes them all). */
static int create_entry(tfenc_context *ctx, tfenc_output *out, const layout_entry *entry)
{
    const char *name = entry_name(out, entry);
    const int32_t not_written = -1;
    const uint8_t null = 0;
    const int64_t zero = 0;
    const double not_a_number = NAN;
    char *empty = entry->element == ELEMENT_KEPT ? calloc(1, out->kept[entry->kept].width) : NULL;
    const void *fill = entry->fill_unwritten            ? (const void *)&not_written
                       : entry->element == ELEMENT_MASK ? (const void *)&null
                       : entry->element != ELEMENT_KEPT ? NULL
                       : out->kept[entry->kept].type == TFENC_KEPT_STRING  ? (const void *)empty
                       : out->kept[entry->kept].type == TFENC_KEPT_INTEGER ? (const void *)&zero
                                                                            : &not_a_number;
    hid_t type = entry_type(out, entry);
    int status = type < 0 || (entry->element == ELEMENT_KEPT && empty == NULL)
                     ? tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, out->path,
                                              "cannot make the type of '%s'", name)
                     : tfenc_output_create_dataset(ctx, out, name, type,
                                                   entry_length(out, entry),
                                      entry->row_wide ? out->row_width : 0, out->compress, fill,
                                      entry_handle(out, entry));
    if (type >= 0)
        H5Tclose(type);
    free(empty);
    return status;
}

int tfenc_output_layout_create(tfenc_context *ctx, tfenc_output *out,
                               const tfenc_output_options *options)
{
    int status = TFENC_OK;
    if (options->has_ids && (out->id_type = tfenc_output_string_type(out->id_length)) < 0)
        return tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, out->path,
                                      "cannot make a %zu-byte string type", out->id_length);
    for (size_t i = 0; status == TFENC_OK && i < N_LAYOUT; i++)
        if (present(out, options, &layout[i]))
            status = create_entry(ctx, out, &layout[i]);
    for (int k = 0; status == TFENC_OK && k < 2 * out->n_kept; k++) {
        const layout_entry entry = kept_entry(k / 2, k % 2);
        status = create_entry(ctx, out, &entry);
    }
    return status;
}

/* ------------------------------------------------------------------ reopen */

/* "int32", "float16", "a 12-byte compound", ...: a type as a refusal
 * names it. */
static void describe_type(hid_t type, char *text, size_t size)
{
    size_t bytes = H5Tget_size(type);
    switch (H5Tget_class(type)) {
    case H5T_INTEGER:
        snprintf(text, size, "%s%zu", H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int",
                 8 * bytes);
        break;
    case H5T_FLOAT:
        snprintf(text, size, "float%zu", 8 * bytes);
        break;
    case H5T_STRING:
        snprintf(text, size, "%s string", H5Tis_variable_str(type) > 0 ? "variable-length"
                                                                        : "fixed-length");
        break;
    case H5T_COMPOUND:
        snprintf(text, size, "a %zu-byte compound", bytes);
        break;
    default:
        snprintf(text, size, "a %zu-byte value of another class", bytes);
        break;
    }
}

/* The stored type against the description: the same class and size (a
 * stored id type at least as wide as the longest id, whose width the
 * file then keeps); signs of integers and float formats too. */
static int same_type(const layout_entry *entry, hid_t stored, hid_t wanted)
{
    H5T_class_t class = H5Tget_class(stored);
    if (class != H5Tget_class(wanted))
        return 0;
    if (class == H5T_STRING)
        return H5Tis_variable_str(stored) <= 0;
    if (H5Tget_size(stored) != H5Tget_size(wanted))
        return 0;
    if (class == H5T_INTEGER)
        return H5Tget_sign(stored) == H5Tget_sign(wanted);
    return class != H5T_FLOAT || H5Tequal(stored, wanted) > 0;
}

/* Opens the entry's dataset and holds it to the description: its rank,
 * its dimensions and its element type. */
static int open_described(tfenc_context *ctx, tfenc_output *out, const layout_entry *entry)
{
    const char *name = entry_name(out, entry);
    hid_t *dataset = entry_handle(out, entry);
    hid_t access = H5Pcreate(H5P_DATASET_ACCESS);
    if (access >= 0 && tfenc_output_set_chunk_cache(access, out->compress)
        && H5Lexists(out->file, name, H5P_DEFAULT) > 0)
        *dataset = H5Dopen2(out->file, name, access);
    if (access >= 0)
        H5Pclose(access);
    H5Eclear2(H5E_DEFAULT);
    if (*dataset < 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: has no dataset '%s': not a tfenc output of "
                           "this job; refusing to append to it", out->path, name);
    const int64_t length = entry_length(out, entry);
    const int wanted_rank = entry->row_wide ? 2 : 1;
    hid_t space = H5Dget_space(*dataset);
    hsize_t dims[2] = {0, 0};
    int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    if (rank >= 1 && rank <= 2)
        H5Sget_simple_extent_dims(space, dims, NULL);
    if (space >= 0)
        H5Sclose(space);
    int status = TFENC_OK;
    if (rank < 1 || rank > 2 || dims[0] != (hsize_t)length)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: dataset '%s' has %llu rows, this job "
                             "needs %lld; refusing to append to it", out->path, name,
                             (unsigned long long)dims[0], (long long)length);
    else if (rank != wanted_rank)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: dataset '%s' has %d dimensions, this "
                             "job writes %d; refusing to append to it", out->path, name, rank,
                             wanted_rank);
    else if (entry->row_wide && dims[1] != (hsize_t)out->row_width)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: dataset '%s' has rows of %llu values, "
                             "this job writes %lld; refusing to append to it", out->path, name,
                             (unsigned long long)dims[1], (long long)out->row_width);
    hid_t stored = H5Dget_type(*dataset), wanted = stored >= 0 ? entry_type(out, entry) : -1;
    if (status == TFENC_OK && (stored < 0 || wanted < 0))
        status = tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, out->path,
                                        "cannot read the type of dataset '%s'", name);
    if (status == TFENC_OK && !same_type(entry, stored, wanted)) {
        char found[64], expected[64];
        describe_type(stored, found, sizeof found);
        describe_type(wanted, expected, sizeof expected);
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: dataset '%s' holds %s, this job writes "
                             "%s; refusing to append to it", out->path, name, found, expected);
    }
    if (wanted >= 0)
        H5Tclose(wanted);
    if (status == TFENC_OK && entry->element == ELEMENT_KEPT
        && out->kept[entry->kept].type == TFENC_KEPT_STRING) {
        /* A stored width at least the longest value's is kept, as the ids'. */
        tfenc_output_kept *kept = &out->kept[entry->kept];
        size_t size = H5Tget_size(stored);
        if (size < kept->width)
            status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: stores '%s' strings of up to %zu "
                                 "bytes, this corpus has one of %zu (has it changed?); refusing "
                                 "to append to it", out->path, name, size, kept->width);
        kept->width = size;
        H5Tclose(kept->file_type);
        kept->file_type = stored;
        stored = -1;
    }
    if (status == TFENC_OK && entry->element == ELEMENT_ID) {
        size_t size = H5Tget_size(stored);
        if (size < out->id_length)
            status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: stores ids of up to %zu bytes, "
                                 "this corpus has one of %zu (has it changed?); refusing to "
                                 "append to it", out->path, size, out->id_length);
        out->id_length = size;
        out->id_type = stored;
        stored = -1;
    }
    if (stored >= 0)
        H5Tclose(stored);
    H5Eclear2(H5E_DEFAULT);
    return status;
}

int tfenc_output_layout_reopen(tfenc_context *ctx, tfenc_output *out,
                               const tfenc_output_options *options)
{
    int status = TFENC_OK;
    for (size_t i = 0; status == TFENC_OK && i < N_LAYOUT; i++) {
        const layout_entry *entry = &layout[i];
        const char *name = entry_name(out, entry);
        if (present(out, options, entry))
            status = open_described(ctx, out, entry);
        else if (name != NULL && H5Lexists(out->file, name, H5P_DEFAULT) > 0)
            status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: has a dataset '%s' but this job "
                                 "writes none; refusing to append to it", out->path, name);
        H5Eclear2(H5E_DEFAULT);
    }
    for (int k = 0; status == TFENC_OK && k < 2 * out->n_kept; k++) {
        const layout_entry entry = kept_entry(k / 2, k % 2);
        status = open_described(ctx, out, &entry);
    }
    return status;
}
