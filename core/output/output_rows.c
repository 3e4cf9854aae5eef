/* The rows and per-document metadata: each writer writes its documents at
 * their global indices with independent I/O, sorted and coalesced into
 * runs, the metadata last so that a length >= 0 marks a finished document
 * in a killed job's file. */
#include "output/output.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <hdf5.h>
#include <jansson.h>

#include "config.h"
#include "base/context.h"
#include "base/float16.h"
#include "base/hdf5_attributes.h"
#include "base/hdf5_error.h"
#include "base/names.h"
#include "output/calibration.h"
#include "output/corpus_shards.h"
#include "output/output_internal.h"
#include "output/quantize.h"

int tfenc_output_written(tfenc_context *ctx, tfenc_output *out, int64_t first, int64_t count,
                         uint8_t *written)
{
    if (first < 0 || count < 0 || first + count > out->n_documents)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: documents %lld..%lld are outside [0, "
                           "%lld)", out->path, (long long)first, (long long)(first + count),
                           (long long)out->n_documents);
    if (count == 0)
        return TFENC_OK;
    int32_t *lengths = malloc((size_t)count * sizeof *lengths);
    if (lengths == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", out->path);
    hsize_t start = (hsize_t)first, size = (hsize_t)count;
    hid_t file_space = H5Dget_space(out->lengths);
    hid_t memory_space = H5Screate_simple(1, &size, NULL);
    int ok = file_space >= 0 && memory_space >= 0
             && H5Sselect_hyperslab(file_space, H5S_SELECT_SET, &start, NULL, &size, NULL) >= 0
             && H5Dread(out->lengths, H5T_NATIVE_INT32, memory_space, file_space, out->transfer,
                        lengths) >= 0;
    int status = ok ? TFENC_OK
                    : tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, out->path, "cannot read 'lengths'");
    if (memory_space >= 0)
        H5Sclose(memory_space);
    if (file_space >= 0)
        H5Sclose(file_space);
    for (int64_t i = 0; ok && i < count; i++)
        written[i] = lengths[i] >= 0;
    free(lengths);
    return status;
}

/* ------------------------------------------------------------------ writes */

/* Writes runs of consecutive rows (each `width` elements wide, or single
 * elements for width 0) from `data`, which holds the runs' rows in order.
 * The runs MUST be sorted and disjoint: HDF5 visits a union of hyperslabs in
 * file order, whatever the order they were added in. */
int tfenc_output_write_elements(tfenc_context *ctx, tfenc_output *out, hid_t dataset,
                                const char *name, int64_t n_runs, const int64_t *run_start,
                                const int64_t *run_length, int64_t width, hid_t memory_type,
                                const void *data) {
    if (n_runs == 0)
        return TFENC_OK;
    hsize_t columns = (hsize_t)(width > 0 ? width : 1);
    hid_t file_space = H5Dget_space(dataset);
    int ok = file_space >= 0 && H5Sselect_none(file_space) >= 0;
    hsize_t total = 0;
    for (int64_t r = 0; ok && r < n_runs; r++) {
        hsize_t start[2] = {(hsize_t)run_start[r], 0};
        hsize_t count[2] = {1, 1};
        hsize_t block[2] = {(hsize_t)run_length[r], columns};
        ok = H5Sselect_hyperslab(file_space, H5S_SELECT_OR, start, NULL, count, block) >= 0;
        total += block[0] * columns;
    }
    /* One run in a memory space of its own shape: HDF5 then copies whole
     * blocks, where a flat memory space against a 2-D selection makes it
     * walk the selection element by element (a static model's rows in
     * document order are one run a microbatch; width 0 is a 1-D dataset). */
    hsize_t shape[2] = {total / columns, columns};
    hid_t memory_space = !ok               ? -1
                         : n_runs == 1 && width > 0 ? H5Screate_simple(2, shape, NULL)
                                                    : H5Screate_simple(1, &total, NULL);
    if (memory_space >= 0)
        ok = H5Dwrite(dataset, memory_type, memory_space, file_space, out->transfer, data) >= 0;
    else
        ok = 0;
    int status = ok ? TFENC_OK
                    : tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, out->path,
                                             "cannot write %lld rows of '%s'",
                                             (long long)total / (long long)columns, name);
    if (memory_space >= 0)
        H5Sclose(memory_space);
    if (file_space >= 0)
        H5Sclose(file_space);
    return status;
}

typedef struct sort_entry {
    int64_t key;      /* where the item goes in the file */
    int64_t position; /* where it is in the caller's arrays */
} sort_entry;

static int compare_entries(const void *a, const void *b)
{
    int64_t x = ((const sort_entry *)a)->key, y = ((const sort_entry *)b)->key;
    return (x > y) - (x < y);
}

/* Sorts the items by key, refusing keys outside [0, limit) and repeats. */
static int sort_items(tfenc_context *ctx, tfenc_output *out, int64_t n, const int64_t *keys,
                      int64_t limit, const char *what, sort_entry **sorted)
{
    *sorted = malloc((size_t)(n > 0 ? n : 1) * sizeof **sorted);
    if (*sorted == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", out->path);
    for (int64_t i = 0; i < n; i++) {
        if (keys[i] < 0 || keys[i] >= limit) {
            free(*sorted);
            *sorted = NULL;
            return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: %s %lld is outside [0, %lld)",
                               out->path, what, (long long)keys[i], (long long)limit);
        }
        (*sorted)[i].key = keys[i];
        (*sorted)[i].position = i;
    }
    qsort(*sorted, (size_t)n, sizeof **sorted, compare_entries);
    for (int64_t i = 1; i < n; i++)
        if ((*sorted)[i].key == (*sorted)[i - 1].key) {
            long long repeated = (long long)(*sorted)[i].key;
            free(*sorted);
            *sorted = NULL;
            return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: %s %lld is written twice in one "
                               "call", out->path, what, repeated);
        }
    return TFENC_OK;
}

static int reserve_staging(tfenc_context *ctx, tfenc_output *out, size_t bytes)
{
    if (bytes <= out->staging_bytes)
        return TFENC_OK;
    void *grown = realloc(out->staging, bytes);
    if (grown == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory for %zu bytes of rows",
                           out->path, bytes);
    out->staging = grown;
    out->staging_bytes = bytes;
    return TFENC_OK;
}

/* Compact dtypes: whole rows of d_model floats from element `at` (of the
 * float rows) on, quantized into their stored rows. */
static void stage_compact(tfenc_output *out, size_t at, const float *values, size_t count)
{
    size_t d = (size_t)out->d_model;
    tfenc_quantize_rows(out->dtype, out->quantize_starts, out->quantize_steps, out->d_model,
                        values, (int64_t)(count / d),
                        (uint8_t *)out->staging + at / d * (size_t)out->row_width);
}

/* Copies `count` floats into the staging area at element `at`, converted to
 * the file's dtype (conversion here rather than by HDF5, so that the
 * rounding is our tested round-to-nearest-even). */
static void stage_floats(tfenc_output *out, size_t at, const float *values, size_t count)
{
    if (tfenc_dtype_is_compact(out->dtype))
        stage_compact(out, at, values, count);
    else if (out->dtype == TFENC_DTYPE_FLOAT32)
        memcpy((float *)out->staging + at, values, count * sizeof *values);
    else if (out->dtype == TFENC_DTYPE_FLOAT16)
        tfenc_float32_to_float16_array((uint16_t *)out->staging + at, values, count);
    else
        tfenc_float32_to_bfloat16_array((uint16_t *)out->staging + at, values, count);
}

static size_t staged_row_bytes(const tfenc_output *out)
{
    return (size_t)out->row_width * out->float_size;
}

/* Merges sorted (start, length) items that touch into runs, in place;
 * returns the number of runs. */
static int64_t coalesce(int64_t n, int64_t *start, int64_t *length)
{
    int64_t runs = 0;
    for (int64_t i = 0; i < n; i++) {
        if (length[i] == 0)
            continue;
        if (runs > 0 && start[runs - 1] + length[runs - 1] == start[i]) {
            length[runs - 1] += length[i];
        } else {
            start[runs] = start[i];
            length[runs] = length[i];
            runs++;
        }
    }
    return runs;
}

int tfenc_output_write_pooled(tfenc_context *ctx, tfenc_output *out, int64_t n_rows,
                              const int64_t *global_indices, const float *rows)
{
    if (tfenc_output_per_token(out->kind) || out->chunks == TFENC_CHUNKS_EACH)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: one row per document written to an "
                           "output of %s", out->path,
                           tfenc_output_per_token(out->kind) ? "tokens" : "chunks");
    if (n_rows <= 0)
        return TFENC_OK;
    sort_entry *sorted = NULL;
    int status = sort_items(ctx, out, n_rows, global_indices, out->n_documents, "document index",
                            &sorted);
    size_t d = (size_t)out->d_model;
    int64_t *start = NULL, *length = NULL;
    if (status == TFENC_OK)
        status = reserve_staging(ctx, out, (size_t)n_rows * staged_row_bytes(out));
    if (status == TFENC_OK) {
        start = malloc((size_t)n_rows * sizeof *start);
        length = malloc((size_t)n_rows * sizeof *length);
        if (start == NULL || length == NULL)
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", out->path);
    }
    if (status == TFENC_OK) {
        for (int64_t i = 0; i < n_rows; i++) {
            stage_floats(out, (size_t)i * d, rows + (size_t)sorted[i].position * d, d);
            start[i] = sorted[i].key;
            length[i] = 1;
        }
        int64_t runs = coalesce(n_rows, start, length);
        status = tfenc_output_write_elements(ctx, out, out->rows, tfenc_output_rows_name(out), runs,
                                             start, length, out->row_width, out->float_type,
                                             out->staging);
    }
    free(start);
    free(length);
    free(sorted);
    return status;
}

/* Documents' runs of rows (tokens, or chunks), with an int32 per row
 * (`per_row`: chunk_starts for chunks, token ids for tokens, or NULL):
 * `token_offsets` are the runs' first rows, n_tokens their lengths. */
static int write_row_runs(tfenc_context *ctx, tfenc_output *out, int64_t n_documents,
                          const int64_t *global_indices, const int64_t *token_offsets,
                          const int32_t *n_tokens, const int32_t *per_row, const float *rows)
{
    /* One int32 per row beside the rows: chunk_starts of chunks, or
     * token_ids of tokens. */
    const int32_t *row_ints = per_row;
    hid_t row_ints_dataset = out->chunk_starts;
    const char *row_ints_name = "chunk_starts";
    if (tfenc_output_per_token(out->kind)) {
        row_ints = out->token_ids >= 0 ? per_row : NULL;
        row_ints_dataset = out->token_ids;
        row_ints_name = "token_ids";
    }
    if (n_documents <= 0)
        return TFENC_OK;
    size_t d = (size_t)out->d_model;
    /* Where each document's rows start in the caller's packed `rows`. */
    int64_t *source = malloc((size_t)n_documents * sizeof *source);
    if (source == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", out->path);
    int64_t total = 0;
    int status = TFENC_OK;
    for (int64_t j = 0; j < n_documents && status == TFENC_OK; j++) {
        source[j] = total;
        if (n_tokens[j] < 0 || token_offsets[j] < 0
            || token_offsets[j] + n_tokens[j] > out->n_tokens)
            status
                = tfenc_error(ctx, TFENC_ERR_INTERNAL,
                              "%s: document %lld: rows %lld..%lld "
                              "do not fit in '%s' of %lld rows",
                              out->path, (long long)global_indices[j], (long long)token_offsets[j],
                              (long long)token_offsets[j] + n_tokens[j],
                              tfenc_output_rows_name(out), (long long)out->n_tokens);
        total += n_tokens[j];
    }
    sort_entry *sorted = NULL;
    if (status == TFENC_OK)
        status = sort_items(ctx, out, n_documents, global_indices, out->n_documents,
                            "document index", &sorted);
    int64_t *start = NULL, *length = NULL, *offset_value = NULL;
    if (status == TFENC_OK)
        status = reserve_staging(ctx, out, (size_t)total * staged_row_bytes(out));
    if (status == TFENC_OK) {
        start = malloc((size_t)n_documents * sizeof *start);
        length = malloc((size_t)n_documents * sizeof *length);
        offset_value = malloc((size_t)n_documents * sizeof *offset_value);
        if (start == NULL || length == NULL || offset_value == NULL)
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", out->path);
    }
    if (status == TFENC_OK) {
        /* Token offsets grow with the global index, so sorting by index also
         * sorts the hidden rows; a caller that broke that rule would make
         * the runs overlap, which is checked. */
        size_t staged = 0;
        for (int64_t i = 0; i < n_documents && status == TFENC_OK; i++) {
            int64_t j = sorted[i].position;
            if (i > 0 && token_offsets[j] < start[i - 1] + length[i - 1])
                status = tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: document %lld's hidden rows "
                                     "start at %lld, inside the previous document's: token "
                                     "offsets must grow with the document index", out->path,
                                     (long long)sorted[i].key, (long long)token_offsets[j]);
            stage_floats(out, staged, rows + (size_t)source[j] * d, (size_t)n_tokens[j] * d);
            staged += (size_t)n_tokens[j] * d;
            start[i] = token_offsets[j];
            length[i] = n_tokens[j];
            offset_value[i] = token_offsets[j];
        }
    }
    int32_t *starts_sorted = NULL;
    if (status == TFENC_OK && row_ints != NULL) {
        starts_sorted = malloc((size_t)total * sizeof *starts_sorted + 1);
        if (starts_sorted == NULL)
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", out->path);
        for (int64_t i = 0, at = 0; status == TFENC_OK && i < n_documents; i++) {
            int64_t j = sorted[i].position;
            memcpy(starts_sorted + at, row_ints + source[j],
                   (size_t)n_tokens[j] * sizeof *starts_sorted);
            at += n_tokens[j];
        }
    }
    if (status == TFENC_OK) {
        int64_t runs = coalesce(n_documents, start, length);
        status = tfenc_output_write_elements(ctx, out, out->rows, tfenc_output_rows_name(out), runs,
                                             start, length, out->row_width, out->float_type,
                                             out->staging);
        if (status == TFENC_OK && starts_sorted != NULL)
            status = tfenc_output_write_elements(ctx, out, row_ints_dataset, row_ints_name, runs,
                                                 start, length, 0, H5T_NATIVE_INT32, starts_sorted);
    }
    free(starts_sorted);
    if (status == TFENC_OK) {
        for (int64_t i = 0; i < n_documents; i++) {
            start[i] = sorted[i].key;
            length[i] = 1;
        }
        int64_t runs = coalesce(n_documents, start, length);
        status
            = tfenc_output_write_elements(ctx, out, out->offsets, tfenc_output_offsets_name(out),
                                          runs, start, length, 0, H5T_NATIVE_INT64, offset_value);
    }
    free(offset_value);
    free(start);
    free(length);
    free(sorted);
    free(source);
    return status;
}

int tfenc_output_write_tokens(tfenc_context *ctx, tfenc_output *out, int64_t n_documents,
                              const int64_t *global_indices, const int64_t *token_offsets,
                              const int32_t *n_tokens, const float *rows)
{
    if (!tfenc_output_per_token(out->kind))
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: per-token rows written to a pooled "
                           "output", out->path);
    return tfenc_output_write_tokens_with_ids(ctx, out, n_documents, global_indices,
                                              token_offsets, n_tokens, NULL, rows);
}

int tfenc_output_write_tokens_with_ids(tfenc_context *ctx, tfenc_output *out,
                                       int64_t n_documents, const int64_t *global_indices,
                                       const int64_t *token_offsets, const int32_t *n_tokens,
                                       const int32_t *token_ids, const float *rows)
{
    if (!tfenc_output_per_token(out->kind))
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: per-token rows written to a pooled "
                           "output", out->path);
    if (out->token_ids >= 0 && token_ids == NULL)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: token_ids expected with the rows",
                           out->path);
    return write_row_runs(ctx, out, n_documents, global_indices, token_offsets, n_tokens,
                          token_ids, rows);
}

int tfenc_output_write_chunks(tfenc_context *ctx, tfenc_output *out, int64_t n_documents,
                              const int64_t *global_indices, const int64_t *chunk_offsets,
                              const int32_t *n_chunks, const int32_t *chunk_starts,
                              const float *rows)
{
    if (out->chunks != TFENC_CHUNKS_EACH)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: chunk rows written to an output "
                           "without them", out->path);
    return write_row_runs(ctx, out, n_documents, global_indices, chunk_offsets, n_chunks,
                          chunk_starts, rows);
}

int tfenc_output_write_chunk_counts(tfenc_context *ctx, tfenc_output *out, int64_t n_documents,
                                    const int64_t *global_indices, const int32_t *n_chunks)
{
    if (out->chunk_counts < 0 || n_documents <= 0)
        return TFENC_OK;
    sort_entry *sorted = NULL;
    int status = sort_items(ctx, out, n_documents, global_indices, out->n_documents,
                            "document index", &sorted);
    int64_t *start = NULL, *length = NULL;
    int32_t *values = NULL;
    if (status == TFENC_OK) {
        start = malloc((size_t)n_documents * sizeof *start);
        length = malloc((size_t)n_documents * sizeof *length);
        values = malloc((size_t)n_documents * sizeof *values);
        if (start == NULL || length == NULL || values == NULL)
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", out->path);
    }
    for (int64_t i = 0; status == TFENC_OK && i < n_documents; i++) {
        start[i] = sorted[i].key;
        length[i] = 1;
        values[i] = n_chunks[sorted[i].position];
    }
    if (status == TFENC_OK) {
        int64_t runs = coalesce(n_documents, start, length);
        status = tfenc_output_write_elements(ctx, out, out->chunk_counts, "chunks", runs, start,
                                             length, 0, H5T_NATIVE_INT32, values);
    }
    free(values);
    free(start);
    free(length);
    free(sorted);
    return status;
}

/* Element sizes of a kept field's values in memory. */
static size_t kept_size(const tfenc_output_kept *kept)
{
    return kept->type == TFENC_KEPT_STRING ? kept->width : 8;
}

/* Document `key`'s carried text (base/kept_values.h: its id, then each kept
 * field's value) into element i of the fields' values and masks (n
 * elements each); *id and *id_length get its id ("" without one). */
static int unpack_kept(tfenc_context *ctx, tfenc_output *out, const char *carried, int64_t key,
                       size_t i, char **values, uint8_t **valid, const char **id,
                       size_t *id_length)
{
    const char *cursor = carried != NULL ? carried : "";
    tfenc_kept_value value;
    if (tfenc_kept_next(&cursor, &value) != 0)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: document %lld carries no id or kept "
                           "values", out->path, (long long)key);
    *id = value.type == TFENC_KEPT_STRING ? value.string : "";
    *id_length = value.type == TFENC_KEPT_STRING ? value.length : 0;
    for (int k = 0; k < out->n_kept; k++) {
        const tfenc_output_kept *kept = &out->kept[k];
        char *element = values[k] + i * kept_size(kept);
        if (tfenc_kept_next(&cursor, &value) != 0)
            return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: document %lld carries no value of "
                               "'%s'", out->path, (long long)key, kept->name);
        const int has = value.type != TFENC_KEPT_NULL && value.type != TFENC_KEPT_ABSENT;
        /* The counting pass typed the field from every value: a value of
         * another type (but an integer of a float field) is a bug. */
        const int fits = !has || value.type == kept->type
                         || (value.type == TFENC_KEPT_INTEGER && kept->type == TFENC_KEPT_FLOAT);
        if (!fits || (value.type == TFENC_KEPT_STRING && value.length > kept->width))
            return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: document %lld's '%s' is %s, not "
                               "the %s of at most %zu bytes counted", out->path, (long long)key,
                               kept->name, tfenc_kept_type_names[value.type],
                               tfenc_kept_type_names[kept->type], kept->width);
        valid[k][i] = (uint8_t)has;
        if (kept->type == TFENC_KEPT_STRING) {
            memset(element, 0, kept->width);
            if (has)
                memcpy(element, value.string, value.length);
        } else if (kept->type == TFENC_KEPT_INTEGER) {
            int64_t integer = has ? value.integer : 0;
            memcpy(element, &integer, sizeof integer);
        } else {
            /* Integers of a field that holds floats too are floats. */
            double real = !has ? NAN
                          : value.type == TFENC_KEPT_INTEGER ? (double)value.integer : value.real;
            memcpy(element, &real, sizeof real);
        }
    }
    return TFENC_OK;
}

int tfenc_output_write_metadata(tfenc_context *ctx, tfenc_output *out, int64_t n_documents,
                                const int64_t *global_indices, const int32_t *lengths,
                                const int32_t *truncated, const char *const *ids,
                                const int32_t *sources, const int64_t *source_lines)
{
    if (n_documents <= 0)
        return TFENC_OK;
    if ((out->ids >= 0 || out->n_kept > 0) && ids == NULL)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: the file has ids but none were given",
                           out->path);
    if (out->document_source >= 0 && (sources == NULL || source_lines == NULL))
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: the file has document_source but "
                           "no sources were given", out->path);
    sort_entry *sorted = NULL;
    int status = sort_items(ctx, out, n_documents, global_indices, out->n_documents,
                            "document index", &sorted);
    size_t n = (size_t)n_documents;
    int64_t *start = NULL, *length = NULL;
    int32_t *values = NULL;
    char *id_text = NULL;
    tfenc_output_source *where = NULL;
    char *kept_values[TFENC_MAX_KEEP_FIELDS] = {NULL};
    uint8_t *kept_valid[TFENC_MAX_KEEP_FIELDS] = {NULL};
    for (int k = 0; status == TFENC_OK && k < out->n_kept; k++) {
        kept_values[k] = malloc(n * kept_size(&out->kept[k]));
        kept_valid[k] = malloc(n);
        if (kept_values[k] == NULL || kept_valid[k] == NULL)
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", out->path);
    }
    if (status == TFENC_OK) {
        start = malloc(n * sizeof *start);
        length = malloc(n * sizeof *length);
        values = malloc(2 * n * sizeof *values);
        if (out->ids >= 0)
            id_text = calloc(n, out->id_length);
        if (out->document_source >= 0)
            where = malloc(n * sizeof *where);
        if (start == NULL || length == NULL || values == NULL || (out->ids >= 0 && id_text == NULL)
            || (out->document_source >= 0 && where == NULL))
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", out->path);
    }
    for (size_t i = 0; status == TFENC_OK && i < n; i++) {
        int64_t j = sorted[i].position;
        start[i] = sorted[i].key;
        length[i] = 1;
        values[i] = lengths[j];
        values[n + i] = truncated[j];
        if (where != NULL)
            where[i] = (tfenc_output_source){.shard = sources[j], .line = source_lines[j]};
        const char *id = ids != NULL && ids[j] != NULL ? ids[j] : "";
        size_t id_length = strlen(id);
        /* With kept fields each document carries its id and their values. */
        if (out->n_kept > 0)
            status = unpack_kept(ctx, out, ids[j], sorted[i].key, i, kept_values, kept_valid, &id,
                                 &id_length);
        if (status == TFENC_OK && id_text != NULL) {
            if (id_length > out->id_length)
                status = tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: id of document %lld is %zu "
                                     "bytes, longer than the %zu announced at creation",
                                     out->path, (long long)sorted[i].key, id_length,
                                     out->id_length);
            else
                memcpy(id_text + i * out->id_length, id, id_length);
        }
    }
    int64_t runs = 0;
    if (status == TFENC_OK)
        runs = coalesce(n_documents, start, length);
    /* The lengths go last: a length >= 0 marks a document fully written. */
    if (status == TFENC_OK)
        status = tfenc_output_write_elements(ctx, out, out->truncated, "truncated", runs, start,
                                             length, 0, H5T_NATIVE_INT32, values + n);
    if (status == TFENC_OK && id_text != NULL)
        status = tfenc_output_write_elements(ctx, out, out->ids, "ids", runs, start, length, 0,
                                             out->id_type, id_text);
    for (int k = 0; status == TFENC_OK && k < out->n_kept; k++) {
        const tfenc_output_kept *kept = &out->kept[k];
        hid_t memory_type = kept->type == TFENC_KEPT_STRING    ? kept->file_type
                            : kept->type == TFENC_KEPT_INTEGER ? H5T_NATIVE_INT64
                                                               : H5T_NATIVE_DOUBLE;
        status = tfenc_output_write_elements(ctx, out, kept->values, kept->name, runs, start,
                                             length, 0, memory_type, kept_values[k]);
        if (status == TFENC_OK)
            status = tfenc_output_write_elements(ctx, out, kept->valid, kept->mask, runs, start,
                                                 length, 0, H5T_NATIVE_UINT8, kept_valid[k]);
    }
    if (status == TFENC_OK && where != NULL) {
        hid_t type = tfenc_output_source_type(1);
        status = type < 0 ? tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, out->path,
                                                   "cannot make the type of "
                                                   "'document_source'")
                          : tfenc_output_write_elements(ctx, out, out->document_source,
                                                        "document_source", runs, start, length, 0,
                                                        type, where);
        if (type >= 0)
            H5Tclose(type);
    }
    if (status == TFENC_OK)
        status = tfenc_output_write_elements(ctx, out, out->lengths, "lengths", runs, start, length,
                                             0, H5T_NATIVE_INT32, values);
    free(id_text);
    for (int k = 0; k < out->n_kept; k++) {
        free(kept_values[k]);
        free(kept_valid[k]);
    }
    free(where);
    free(values);
    free(start);
    free(length);
    free(sorted);
    return status;
}
