/* The checks that hold a file's datasets, and each further head's group,
 * to the description (output_description.h): presence, type class and
 * shape against the attributes, then each dataset's content rule,
 * document by document (output_checks.h). */
#include "output/output_checks.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hdf5_attributes.h"
#include "base/hdf5_error.h"
#include "output/calibration.h"
#include "output/head_groups.h"
#include "output/kinds.h"
#include "output/output.h"
#include "output/output_check_state.h"
#include "output/output_description.h"
#include "output/output_internal.h"

/* Index datasets are read this many elements at a time: bounded memory
 * for any corpus. */
#define ELEMENTS_PER_READ ((hsize_t)1 << 16)

#define N_DATASETS TFENC_DATASET_COUNT

static const tfenc_output_dataset *described(size_t k)
{
    return &tfenc_output_datasets[k];
}

/* ------------------------------------------------------------ dataset shapes */

/* "n_documents 50", "d_model / 8 = 2", ...: a dimension and its value. */
static const char *dimension_text(const tfenc_check *c, tfenc_output_dimension d, char *text,
                                  size_t size)
{
    const long long value = (long long)tfenc_output_dimension_value(&c->facts, d);
    const tfenc_output_dtype dtype = c->facts.dtype;
    const int packed = dtype == TFENC_DTYPE_BINARY || dtype == TFENC_DTYPE_UBINARY;
    switch (d) {
    case TFENC_DIM_DOCUMENTS:
        snprintf(text, size, "n_documents %lld", value);
        break;
    case TFENC_DIM_BOUNDARIES:
        snprintf(text, size, "n_documents + 1 = %lld", value);
        break;
    case TFENC_DIM_ROWS:
        snprintf(text, size, "%s %lld",
                 c->facts.kind->rows == TFENC_ROWS_PER_TOKEN ? "n_tokens"
                 : c->facts.chunks == TFENC_CHUNKS_EACH      ? "n_chunks"
                                                             : "n_documents",
                 value);
        break;
    case TFENC_DIM_WIDTH:
        snprintf(text, size, packed ? "d_model / 8 = %lld" : "d_model %lld", value);
        break;
    case TFENC_DIM_D_MODEL:
        snprintf(text, size, "d_model %lld", value);
        break;
    case TFENC_DIM_ENTRIES:
        snprintf(text, size, "%lld, as sparse_values", value);
        break;
    case TFENC_DIM_TWO:
        snprintf(text, size, "2");
        break;
    case TFENC_DIM_NONE:
    case TFENC_DIM_ANY:
        snprintf(text, size, "any");
        break;
    }
    return text;
}

/* Why a dataset that is missing should be there. */
static void fail_missing(tfenc_check *c, size_t k)
{
    const char *name = c->shown[k];
    const tfenc_output_presence_rule presence = described(k)->presence;
    const int chunk_rows = presence == TFENC_WHEN_ROW_RUNS &&
                           c->facts.kind->rows != TFENC_ROWS_PER_TOKEN;
    if (presence == TFENC_WHEN_COMPLETE_CSR && c->complete)
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "complete = 1 but no dataset '%s'", name);
    else if (presence == TFENC_WHEN_COMPLETE_CSR)
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "no dataset '%s', which is written with the "
                         "others of the sparse rows", name);
    else if (presence == TFENC_WHEN_RANGES)
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "no dataset '%s', which every output of dtype "
                         "'%s' has", name, tfenc_output_dtype_name(c->facts.dtype));
    else if (presence == TFENC_WHEN_CHUNKS || presence == TFENC_WHEN_CHUNK_EACH || chunk_rows)
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "no dataset '%s', which every output of chunks "
                         "= %s has", name, tfenc_output_chunks_names[c->facts.chunks]);
    else
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "no dataset '%s', which every %s output has",
                         name, tfenc_output_kind_name(c->kind));
}

/* The HDF5 class an element is stored as, and its name in messages. */
static H5T_class_t element_class(const tfenc_check *c, tfenc_output_element element,
                                 const char **expected)
{
    /* The compact dtypes store a row's values as integers. */
    if (element == TFENC_ELEMENT_ROW && tfenc_check_compact(c->facts.dtype))
        element = TFENC_ELEMENT_INT32;
    switch (element) {
    case TFENC_ELEMENT_INT32:
    case TFENC_ELEMENT_INT64:
        *expected = "integer";
        return H5T_INTEGER;
    case TFENC_ELEMENT_STRING:
        *expected = "string";
        return H5T_STRING;
    case TFENC_ELEMENT_SOURCE:
        *expected = "compound {shard, line}";
        return H5T_COMPOUND;
    case TFENC_ELEMENT_ROW:
    case TFENC_ELEMENT_FLOAT32:
        break;
    }
    *expected = "floating-point";
    return H5T_FLOAT;
}

/* The dataset's type class, rank and dimensions against the attributes
 * (an unknown dimension, of an older file without the attribute, is any). */
static void check_shape(tfenc_check *c, size_t k)
{
    const tfenc_output_dataset *d = described(k);
    const int wanted_rank = tfenc_output_dataset_rank((tfenc_output_dataset_id)k);
    hid_t dataset = H5Dopen2(c->group, c->names[k], H5P_DEFAULT);
    hid_t type = dataset >= 0 ? H5Dget_type(dataset) : -1;
    hid_t space = dataset >= 0 ? H5Dget_space(dataset) : -1;
    if (dataset < 0 || type < 0 || space < 0) {
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "'%s' is not a readable dataset", c->shown[k]);
    } else {
        hsize_t dims[H5S_MAX_RANK];
        const char *class_text;
        int agrees = element_class(c, d->element, &class_text) == H5Tget_class(type) &&
                     H5Sget_simple_extent_ndims(space) == wanted_rank &&
                     H5Sget_simple_extent_dims(space, dims, NULL) == wanted_rank;
        for (int i = 0; agrees && i < wanted_rank; i++) {
            int64_t expected = tfenc_output_dimension_value(&c->facts, d->dims[i]);
            agrees = expected < 0 || dims[i] == (hsize_t)expected;
        }
        if (!agrees) {
            char type_text[32], shape[96], expected[200] = "[", dim[80];
            tfenc_check_describe_type(type, type_text, sizeof type_text);
            tfenc_check_describe_space(space, shape, sizeof shape);
            for (int i = 0; i < wanted_rank; i++)
                snprintf(expected + strlen(expected), sizeof expected - strlen(expected), "%s%s",
                         i > 0 ? ", " : "", dimension_text(c, d->dims[i], dim, sizeof dim));
            snprintf(expected + strlen(expected), sizeof expected - strlen(expected), "]");
            tfenc_check_fail(c, TFENC_ERR_CONFIG, "dataset '%s' holds %s %s values, expected "
                             "%s %s", c->shown[k], shape, type_text, expected, class_text);
        }
    }
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    if (dataset >= 0)
        H5Dclose(dataset);
    H5Eclear2(H5E_DEFAULT);
}

/* The rows of a rank-1 dataset, or -1. */
static int64_t dataset_length(hid_t location, const char *name)
{
    hid_t dataset = H5Lexists(location, name, H5P_DEFAULT) > 0
                        ? H5Dopen2(location, name, H5P_DEFAULT)
                        : -1;
    hid_t space = dataset >= 0 ? H5Dget_space(dataset) : -1;
    hsize_t length = 0;
    int64_t found = space >= 0 && H5Sget_simple_extent_ndims(space) == 1 &&
                            H5Sget_simple_extent_dims(space, &length, NULL) == 1
                        ? (int64_t)length
                        : -1;
    if (space >= 0)
        H5Sclose(space);
    if (dataset >= 0)
        H5Dclose(dataset);
    H5Eclear2(H5E_DEFAULT);
    return found;
}

/* Each dataset's name here, and which of them the file holds, each
 * checked for shape; a missing one that the description requires fails. */
static void check_shapes(tfenc_check *c)
{
    /* Older files lack n_documents: their lengths say it. */
    if (c->n_documents < 0)
        c->n_documents = c->facts.n_documents = dataset_length(c->file, "lengths");
    c->entries = c->facts.entries = dataset_length(c->group, "sparse_values");
    for (size_t k = 0; k < N_DATASETS; k++) {
        c->names[k] = tfenc_output_dataset_name((tfenc_output_dataset_id)k, &c->facts);
        snprintf(c->shown[k], sizeof c->shown[k], "%s%s", c->prefix,
                 c->names[k] != NULL ? c->names[k] : "");
    }
    /* The sparse rows are due once the job completes or any of them is
     * written. */
    c->facts.csr_due = c->complete;
    for (size_t k = 0; k < N_DATASETS; k++)
        c->facts.csr_due |= described(k)->presence == TFENC_WHEN_COMPLETE_CSR &&
                            c->facts.kind->rows == TFENC_ROWS_SPARSE &&
                            H5Lexists(c->group, c->names[k], H5P_DEFAULT) > 0;
    H5Eclear2(H5E_DEFAULT);
    for (size_t k = 0; c->status == TFENC_OK && k < N_DATASETS; k++) {
        const tfenc_output_presence presence
            = tfenc_output_dataset_presence((tfenc_output_dataset_id)k, &c->facts);
        if (presence == TFENC_ABSENT || c->names[k] == NULL)
            continue;
        c->present[k] = H5Lexists(c->group, c->names[k], H5P_DEFAULT) > 0;
        H5Eclear2(H5E_DEFAULT);
        if (c->present[k])
            check_shape(c, k);
        else if (presence == TFENC_REQUIRED)
            fail_missing(c, k);
    }
}

/* ---------------------------------------------------------- block reading */

static void reader_open(tfenc_check *c, tfenc_check_reader *r, hid_t location, size_t k)
{
    memset(r, 0, sizeof *r);
    r->open = 1;
    r->dataset = r->space = r->memory_type = -1;
    const tfenc_output_element element = described(k)->element;
    if (element == TFENC_ELEMENT_SOURCE) {
        r->memory_type = tfenc_output_source_type(1);
        r->element_size = sizeof(tfenc_output_source);
    } else if (element == TFENC_ELEMENT_FLOAT32) {
        r->memory_type = H5Tcopy(H5T_NATIVE_DOUBLE);
        r->element_size = sizeof(double);
    } else {
        r->memory_type = H5Tcopy(H5T_NATIVE_INT64);
        r->element_size = sizeof(int64_t);
    }
    r->dataset = H5Dopen2(location, c->names[k], H5P_DEFAULT);
    r->space = r->dataset >= 0 ? H5Dget_space(r->dataset) : -1;
    r->block = malloc(ELEMENTS_PER_READ * r->element_size);
    int ok = r->memory_type >= 0 && r->space >= 0 && r->block != NULL;
    if (ok)
        r->length = (hsize_t)H5Sget_simple_extent_npoints(r->space);
    if (!ok) {
        char detail[256];
        tfenc_check_fail(c, r->block == NULL ? TFENC_ERR_NO_MEMORY : TFENC_ERR_IO,
                         "cannot read dataset '%s': %s", c->shown[k],
                         tfenc_hdf5_error_detail(detail, sizeof detail));
    }
}

static void reader_close(tfenc_check_reader *r)
{
    if (r->space >= 0)
        H5Sclose(r->space);
    if (r->dataset >= 0)
        H5Dclose(r->dataset);
    if (r->memory_type >= 0)
        H5Tclose(r->memory_type);
    free(r->block);
    memset(r, 0, sizeof *r);
}

/* Element `index` (< the dataset's length) of rank-1 dataset k, or NULL
 * after a read failure (recorded). */
static const void *element_at(tfenc_check *c, size_t k, int64_t index)
{
    tfenc_check_reader *r = &c->readers[k];
    const hsize_t at = (hsize_t)index;
    if (c->status != TFENC_OK || index < 0 || at >= r->length) {
        if (c->status == TFENC_OK)
            tfenc_check_fail(c, TFENC_ERR_INTERNAL, "dataset '%s': element %lld asked of %llu",
                             c->shown[k], (long long)index, (unsigned long long)r->length);
        return NULL;
    }
    if (at < r->first || at >= r->first + r->held) {
        hsize_t count = r->length - at < ELEMENTS_PER_READ ? r->length - at : ELEMENTS_PER_READ;
        hid_t memory = H5Screate_simple(1, &count, NULL);
        int ok = memory >= 0 &&
                 H5Sselect_hyperslab(r->space, H5S_SELECT_SET, &at, NULL, &count, NULL) >= 0 &&
                 H5Dread(r->dataset, r->memory_type, memory, r->space, H5P_DEFAULT, r->block) >= 0;
        if (memory >= 0)
            H5Sclose(memory);
        if (!ok) {
            char detail[256];
            tfenc_check_fail(c, TFENC_ERR_IO, "cannot read dataset '%s' at index %lld: %s",
                             c->shown[k], (long long)index,
                             tfenc_hdf5_error_detail(detail, sizeof detail));
            r->held = 0;
            return NULL;
        }
        r->first = at;
        r->held = count;
    }
    return r->block + (size_t)(at - r->first) * r->element_size;
}

static int64_t integer_at(tfenc_check *c, size_t k, int64_t index)
{
    const int64_t *value = element_at(c, k, index);
    return value != NULL ? *value : 0;
}

/* --------------------------------------------------------------- contents */

static void check_source(tfenc_check *c, size_t k, int64_t document)
{
    const tfenc_output_source *entry = element_at(c, k, document);
    if (entry == NULL)
        return;
    const tfenc_check_shards *shards = &c->shards;
    if (entry->shard < 0 || (shards->present && entry->shard >= shards->n))
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "dataset 'document_source' names file %d at "
                         "index %lld, but corpus_shards lists %lld files", entry->shard,
                         (long long)document, (long long)shards->n);
    else if (entry->line < 0)
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "dataset 'document_source' holds line %lld at "
                         "index %lld, expected >= 0", (long long)entry->line,
                         (long long)document);
    else if (shards->present && shards->rows[entry->shard].documents >= 0) {
        const tfenc_check_shard_rows rows = shards->rows[entry->shard];
        if (document < rows.first || document >= rows.first + rows.documents)
            tfenc_check_fail(c, TFENC_ERR_CONFIG, "dataset 'document_source' names file %d at "
                             "index %lld, but corpus_shards gives that file rows %lld to %lld",
                             entry->shard, (long long)document, (long long)rows.first,
                             (long long)(rows.first + rows.documents - 1));
    }
}

/* TFENC_RULE_NOT_NEGATIVE, TFENC_RULE_POSITIVE: one integer element, the
 * document's own or (in_run) one of its run. */
static void check_count(tfenc_check *c, size_t k, int64_t index, int64_t document, int in_run)
{
    const int64_t least = described(k)->rule == TFENC_RULE_POSITIVE ? 1 : 0;
    int64_t value = integer_at(c, k, index);
    char where[64] = "";
    if (in_run)
        snprintf(where, sizeof where, " (document %lld)", (long long)document);
    if (c->status == TFENC_OK && value < least)
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "dataset '%s' holds %lld at index %lld%s, "
                         "expected >= %lld", c->shown[k], (long long)value, (long long)index,
                         where, (long long)least);
}

/* A document's run agrees with what its kind says of it. */
static void check_run_agrees(tfenc_check *c, size_t k, int64_t document, int64_t run,
                             int64_t length)
{
    const char *name = c->shown[k];
    const long long i = (long long)document;
    switch (tfenc_output_run_agreement_of((tfenc_output_dataset_id)k, &c->facts)) {
    case TFENC_RUN_IS_LENGTH:
        if (run != length)
            tfenc_check_fail(c, TFENC_ERR_CONFIG, "dataset '%s' gives document %lld %lld rows "
                             "(index %lld to %lld), but 'lengths' gives it %lld tokens", name,
                             i, (long long)run, i, i + 1, (long long)length);
        break;
    case TFENC_RUN_AT_MOST_LENGTH:
        if (run > length)
            tfenc_check_fail(c, TFENC_ERR_CONFIG, "dataset '%s' gives document %lld %lld rows "
                             "(index %lld to %lld), more than its %lld tokens in 'lengths'",
                             name, i, (long long)run, i, i + 1, (long long)length);
        break;
    case TFENC_RUN_IS_CHUNKS: {
        if (!c->present[TFENC_DATASET_CHUNKS])
            break;
        const int64_t chunks = integer_at(c, TFENC_DATASET_CHUNKS, document);
        if (c->status == TFENC_OK && run != chunks)
            tfenc_check_fail(c, TFENC_ERR_CONFIG, "dataset '%s' gives document %lld %lld rows "
                             "(index %lld to %lld), but 'chunks' gives it %lld", name, i,
                             (long long)run, i, i + 1, (long long)chunks);
        break;
    }
    case TFENC_RUN_AT_MOST_TOP_K: {
        const int past_top_k = c->top_k > 0 && run > c->top_k;
        if (past_top_k || run > c->d_model)
            tfenc_check_fail(c, TFENC_ERR_CONFIG, "dataset '%s' gives document %lld %lld "
                             "entries (index %lld to %lld), more than %s %lld", name, i,
                             (long long)run, i, i + 1,
                             past_top_k ? "sparse_top_k" : "the columns, d_model",
                             (long long)(past_top_k ? c->top_k : c->d_model));
        break;
    }
    case TFENC_RUN_ANY:
    case TFENC_RUN_OF_THE_ROWS:
        break;
    }
}

/* A document's run: elements i and i + 1 of a BY_BOUNDARY dataset. The
 * second is known when the next document is finished, or is the last
 * entry (written when the file was created). */
static void check_boundaries(tfenc_check *c, size_t k, int64_t document, int64_t length,
                             int next_known)
{
    const tfenc_output_dataset *d = described(k);
    const char *name = c->shown[k];
    const int64_t end = tfenc_output_dimension_value(&c->facts, d->ends_at);
    char end_text[80];
    int64_t first = integer_at(c, k, document);
    int64_t next = next_known ? integer_at(c, k, document + 1) : 0;
    c->bounds[k] = (tfenc_check_bounds){0};
    if (c->status != TFENC_OK)
        return;
    if (document == 0 && first != 0) {
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "dataset '%s' starts at %lld, expected 0", name,
                         (long long)first);
        return;
    }
    if (first < 0 || (end >= 0 && first > end)) {
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "dataset '%s' holds %lld at index %lld, outside "
                         "0 to %s", name, (long long)first, (long long)document,
                         dimension_text(c, d->ends_at, end_text, sizeof end_text));
        return;
    }
    if (!next_known)
        return;
    if (next < first) {
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "dataset '%s' decreases at index %lld (%lld, "
                         "then %lld)", name, (long long)document, (long long)first,
                         (long long)next);
        return;
    }
    if (end >= 0 && next > end) {
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "dataset '%s' holds %lld at index %lld, outside "
                         "0 to %s", name, (long long)next, (long long)document + 1,
                         dimension_text(c, d->ends_at, end_text, sizeof end_text));
        return;
    }
    check_run_agrees(c, k, document, next - first, length);
    c->bounds[k] = (tfenc_check_bounds){c->status == TFENC_OK, first, next};
}

/* The elements of a document's run (its rows or CSR entries). */
static void check_run(tfenc_check *c, size_t k, int64_t document)
{
    const tfenc_output_dataset *d = described(k);
    const char *name = c->shown[k];
    if (!c->present[d->bounds] || !c->bounds[d->bounds].known)
        return;
    const tfenc_check_bounds run = c->bounds[d->bounds];
    int64_t previous = -1;
    for (int64_t e = run.first; c->status == TFENC_OK && e < run.end; e++) {
        if (d->rule == TFENC_RULE_NOT_NEGATIVE) {
            check_count(c, k, e, document, 1);
        } else if (d->rule == TFENC_RULE_COLUMN) {
            int64_t column = integer_at(c, k, e);
            if (c->status == TFENC_OK && (column < 0 || column >= c->d_model))
                tfenc_check_fail(c, TFENC_ERR_CONFIG, "dataset '%s' holds %lld at index %lld "
                                 "(document %lld), outside the columns 0 to d_model - 1 = %lld",
                                 name, (long long)column, (long long)e, (long long)document,
                                 (long long)c->d_model - 1);
            else if (c->status == TFENC_OK && column <= previous)
                tfenc_check_fail(c, TFENC_ERR_CONFIG, "dataset '%s' is not ascending within "
                                 "document %lld: %lld at index %lld follows %lld", name,
                                 (long long)document, (long long)column, (long long)e,
                                 (long long)previous);
            previous = column;
        } else if (d->rule == TFENC_RULE_ABOVE_THRESHOLD) {
            const double *value = element_at(c, k, e);
            if (value != NULL && !(isfinite(*value) && *value > c->threshold))
                tfenc_check_fail(c, TFENC_ERR_CONFIG, "dataset '%s' holds %g at index %lld "
                                 "(document %lld), expected a finite value above "
                                 "sparse_threshold %g", name, *value, (long long)e,
                                 (long long)document, c->threshold);
        }
    }
}

/* quantization_ranges [2, d]: finite, each minimum <= its maximum, and the
 * same as the attributes quantization_min and quantization_max. d is at
 * most WIDEST_DENSE_ROW (its shape against d_model, checked before). */
static void check_ranges(tfenc_check *c, size_t k)
{
    const char *name = c->shown[k];
    hid_t dataset = H5Dopen2(c->group, c->names[k], H5P_DEFAULT);
    hid_t space = dataset >= 0 ? H5Dget_space(dataset) : -1;
    hsize_t dims[2] = {0, 0};
    int ok = space >= 0 && H5Sget_simple_extent_dims(space, dims, NULL) == 2 && dims[0] == 2 &&
             dims[1] <= WIDEST_DENSE_ROW;
    const size_t d = (size_t)dims[1];
    double *ranges = ok ? malloc((2 * d + 1) * sizeof *ranges) : NULL;
    double *attribute = ok ? malloc((d + 1) * sizeof *attribute) : NULL;
    if (ok && (ranges == NULL || attribute == NULL))
        tfenc_check_fail(c, TFENC_ERR_NO_MEMORY, "out of memory for dataset '%s'", name);
    else if (!ok ||
             H5Dread(dataset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, ranges) < 0) {
        char detail[256];
        tfenc_check_fail(c, TFENC_ERR_IO, "cannot read dataset '%s': %s", name,
                         tfenc_hdf5_error_detail(detail, sizeof detail));
    }
    for (size_t j = 0; c->status == TFENC_OK && j < 2 * d; j++)
        if (!isfinite(ranges[j]))
            tfenc_check_fail(c, TFENC_ERR_CONFIG, "dataset '%s' holds %g at [%zu, %zu], "
                             "expected finite values", name, ranges[j], j / d, j % d);
    for (size_t j = 0; c->status == TFENC_OK && j < d; j++)
        if (ranges[j] > ranges[d + j])
            tfenc_check_fail(c, TFENC_ERR_CONFIG, "dataset '%s': dimension %zu has minimum %g "
                             "above its maximum %g", name, j, ranges[j], ranges[d + j]);
    static const char *const names[] = {"quantization_min", "quantization_max"};
    for (int row = 0; c->status == TFENC_OK && row < 2; row++) {
        hid_t stored = H5Aexists(c->group, names[row]) > 0
                           ? H5Aopen(c->group, names[row], H5P_DEFAULT)
                           : -1;
        hid_t values = stored >= 0 ? H5Aget_space(stored) : -1;
        const hssize_t count = values >= 0 ? H5Sget_simple_extent_npoints(values) : -1;
        /* (Its count against d_model was checked with the attributes; a
         * file without d_model is held to the dataset's here.) */
        if (values >= 0 && count != (hssize_t)d) {
            tfenc_check_fail(c, TFENC_ERR_CONFIG, "attribute '%s' holds %lld values, but "
                             "dataset '%s' has %zu dimensions", names[row], (long long)count,
                             name, d);
        } else if (values >= 0 && H5Aread(stored, H5T_NATIVE_DOUBLE, attribute) >= 0) {
            for (size_t j = 0; c->status == TFENC_OK && j < d; j++)
                if ((float)attribute[j] != (float)ranges[(size_t)row * d + j])
                    tfenc_check_fail(c, TFENC_ERR_CONFIG, "attribute '%s' holds %g at index "
                                     "%zu, but dataset '%s' [%d, %zu] holds %g", names[row],
                                     attribute[j], j, name, row, j,
                                     ranges[(size_t)row * d + j]);
        }
        if (values >= 0)
            H5Sclose(values);
        if (stored >= 0)
            H5Aclose(stored);
    }
    free(attribute);
    free(ranges);
    if (space >= 0)
        H5Sclose(space);
    if (dataset >= 0)
        H5Dclose(dataset);
    H5Eclear2(H5E_DEFAULT);
}

static void check_document_indices(tfenc_check *c, size_t k)
{
    for (int64_t i = 0; c->status == TFENC_OK && (hsize_t)i < c->readers[k].length; i++) {
        int64_t document = integer_at(c, k, i);
        if (c->status == TFENC_OK && (document < 0 || document >= c->n_documents))
            tfenc_check_fail(c, TFENC_ERR_CONFIG, "dataset '%s' holds %lld at index %lld, "
                             "outside the documents 0 to %lld", c->shown[k],
                             (long long)document, (long long)i, (long long)c->n_documents - 1);
    }
}

/* The per-document rules of every present dataset, document by document. */
static void check_documents(tfenc_check *c, int marked, tfenc_output_census *census)
{
    const size_t lengths = TFENC_DATASET_LENGTHS, truncated = TFENC_DATASET_TRUNCATED;
    const int has_truncated = c->present[truncated];
    const int64_t n = c->n_documents;
    census->truncated = has_truncated ? 0 : -1;
    int64_t next_length = n > 0 ? integer_at(c, lengths, 0) : 0;
    for (int64_t i = 0; c->status == TFENC_OK && i < n; i++) {
        const int64_t length = next_length;
        next_length = i + 1 < n ? integer_at(c, lengths, i + 1) : 0;
        if (length == 0 && !c->empty_zeros)
            tfenc_check_fail(c, TFENC_ERR_CONFIG, "document %lld has length 0 in 'lengths' (a "
                             "document without tokens is written only by a job with [job] "
                             "empty_documents = zeros)", (long long)i);
        else if (length < -1)
            tfenc_check_fail(c, TFENC_ERR_CONFIG, "dataset 'lengths' holds %lld at index %lld, "
                             "expected -1 (not written yet) or a token count >= %d",
                             (long long)length, (long long)i, c->empty_zeros ? 0 : 1);
        census->finished += length >= 0;
        /* Which entries a killed run wrote: only a marked file tells. */
        const int finished = marked ? length >= 0 : c->complete;
        const int next_known = i + 1 == n || (marked ? next_length >= 0 : c->complete);
        if (!finished)
            continue;
        if (has_truncated && length >= 0 && integer_at(c, truncated, i) > 0)
            census->truncated++;
        for (size_t j = 0; c->status == TFENC_OK && j < c->n_per_document; j++) {
            const size_t k = c->per_document[j];
            const tfenc_output_dataset *d = described(k);
            if (d->indexing == TFENC_BY_DOCUMENT && d->rule == TFENC_RULE_SOURCE)
                check_source(c, k, i);
            else if (d->indexing == TFENC_BY_DOCUMENT)
                check_count(c, k, i, i, 0);
            else if (d->indexing == TFENC_BY_BOUNDARY)
                check_boundaries(c, k, i, length, next_known);
            else if (d->indexing == TFENC_BY_RUN)
                check_run(c, k, i);
        }
    }
    /* The last boundary is written when the file is created. */
    for (size_t k = 0; c->status == TFENC_OK && n >= 0 && k < N_DATASETS; k++) {
        const tfenc_output_dataset *d = described(k);
        const int64_t end = tfenc_output_dimension_value(&c->facts, d->ends_at);
        char end_text[80];
        if (!c->present[k] || d->indexing != TFENC_BY_BOUNDARY || end < 0)
            continue;
        int64_t last = integer_at(c, k, n);
        if (c->status == TFENC_OK && last != end)
            tfenc_check_fail(c, TFENC_ERR_CONFIG, "dataset '%s' ends at %lld (index %lld), "
                             "expected %s", c->shown[k], (long long)last, (long long)n,
                             dimension_text(c, d->ends_at, end_text, sizeof end_text));
    }
    if (c->status == TFENC_OK && c->complete && marked && census->finished != n)
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "complete = 1 but %lld of %lld documents are not "
                         "written", (long long)(n - census->finished), (long long)n);
}

/* Only a -1 fill value makes an unwritten length recognisable. */
static int lengths_marked(hid_t file)
{
    hid_t lengths = H5Dopen2(file, "lengths", H5P_DEFAULT);
    hid_t create = lengths >= 0 ? H5Dget_create_plist(lengths) : -1;
    int32_t fill = 0;
    H5D_fill_value_t defined = H5D_FILL_VALUE_UNDEFINED;
    int marked = create >= 0 && H5Pfill_value_defined(create, &defined) >= 0 &&
                 defined == H5D_FILL_VALUE_USER_DEFINED &&
                 H5Pget_fill_value(create, H5T_NATIVE_INT32, &fill) >= 0 && fill == -1;
    if (create >= 0)
        H5Pclose(create);
    if (lengths >= 0)
        H5Dclose(lengths);
    H5Eclear2(H5E_DEFAULT);
    return marked;
}

/* One location's datasets (the root, or a head's group) against the
 * description: shapes, then contents. A head's documents are the root's:
 * its `lengths` say which of them are finished. */
static int check_location(tfenc_check *c, tfenc_output_census *census)
{
    memset(census, 0, sizeof *census);
    census->sparse_entries = census->truncated = -1;
    tfenc_check_read_facts(c);
    const int head = c->facts.further_head;
    if (c->facts.kind == NULL || (head && c->facts.kind->rows == TFENC_ROWS_PER_TOKEN)) {
        char *kind = tfenc_hdf5_attribute_string(c->group, "output_kind");
        /* (Only a head's group names no kind: a root without one is of an
         * older tfenc, whose datasets tell.) */
        tfenc_check_fail(c, TFENC_ERR_CONFIG, "%.*s: attribute output_kind = %s is no kind of a "
                         "head's output (pooled, scores or sparse)",
                         (int)strlen(c->prefix) - 1, c->prefix,
                         kind != NULL ? kind : "(missing)");
        free(kind);
        return c->status;
    }
    check_shapes(c);
    census->n_documents = c->n_documents;
    if (c->status == TFENC_OK && !head)
        tfenc_check_read_shards(c, &c->shards);
    const size_t lengths = TFENC_DATASET_LENGTHS;
    for (size_t k = 0; c->status == TFENC_OK && k < N_DATASETS; k++)
        if (c->present[k] && described(k)->indexing != TFENC_UNREAD)
            reader_open(c, &c->readers[k], c->group, k);
    /* A head's rows follow the root's documents. */
    if (c->status == TFENC_OK && head) {
        c->names[lengths] = tfenc_output_dataset_name(TFENC_DATASET_LENGTHS, &c->facts);
        snprintf(c->shown[lengths], sizeof c->shown[lengths], "%s", c->names[lengths]);
        reader_open(c, &c->readers[lengths], c->file, lengths);
    }
    /* A document's own entries (chunks before the runs it counts), then
     * the bounds of its runs, then the runs; lengths' own rule runs first,
     * for every document. */
    static const tfenc_output_indexing per_document[] = {TFENC_BY_DOCUMENT, TFENC_BY_BOUNDARY,
                                                         TFENC_BY_RUN};
    for (size_t pass = 0; pass < sizeof per_document / sizeof *per_document; pass++)
        for (size_t k = 0; k < N_DATASETS; k++)
            if (c->present[k] && described(k)->rule != TFENC_RULE_LENGTH &&
                described(k)->indexing == per_document[pass])
                c->per_document[c->n_per_document++] = (tfenc_output_dataset_id)k;
    for (size_t k = 0; c->status == TFENC_OK && k < N_DATASETS; k++) {
        if (c->present[k] && described(k)->rule == TFENC_RULE_RANGES)
            check_ranges(c, k);
        else if (c->present[k] && described(k)->rule == TFENC_RULE_DOCUMENT_INDEX)
            check_document_indices(c, k);
    }
    const int marked = lengths_marked(c->file);
    if (c->status == TFENC_OK)
        check_documents(c, marked, census);
    census->lengths_marked = marked;
    if (c->present[TFENC_DATASET_SPARSE_VALUES])
        census->sparse_entries = c->entries;
    for (size_t k = 0; k < N_DATASETS; k++)
        if (c->readers[k].open)
            reader_close(&c->readers[k]);
    free(c->shards.rows);
    c->shards.rows = NULL;
    return c->status;
}

/* A head's group as the root is: its attributes in their domains, then
 * its datasets against the description. */
typedef struct head_check {
    tfenc_context *ctx;
    const char *path;
    hid_t file;
} head_check;

static int check_head(void *user, hid_t group, const char *name)
{
    const head_check *head = user;
    char prefix[300];
    snprintf(prefix, sizeof prefix, "/outputs/%s/", name);
    tfenc_check *c = calloc(1, sizeof *c);
    if (c == NULL)
        return tfenc_error(head->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    *c = (tfenc_check){.ctx = head->ctx, .path = head->path, .file = head->file, .group = group,
                       .prefix = prefix, .status = TFENC_OK};
    tfenc_output_census census;
    int status = tfenc_check_attributes(c);
    if (status == TFENC_OK) {
        *c = (tfenc_check){.ctx = head->ctx, .path = head->path, .file = head->file,
                           .group = group, .prefix = prefix, .status = TFENC_OK};
        status = check_location(c, &census);
    }
    free(c);
    return status;
}

int tfenc_output_check_datasets(tfenc_context *ctx, const char *path, hid_t file,
                                tfenc_output_census *census)
{
    tfenc_check *c = calloc(1, sizeof *c);
    if (c == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    *c = (tfenc_check){.ctx = ctx, .path = path, .file = file, .group = file, .prefix = "",
                       .status = TFENC_OK};
    int status = check_location(c, census);
    free(c);
    head_check head = {ctx, path, file};
    return status == TFENC_OK ? tfenc_head_groups_visit(ctx, path, file, check_head, &head)
                              : status;
}

int tfenc_output_names_dataset(const char *name)
{
    /* The groups besides the table's datasets: the calibration, and the
     * further heads' /outputs. */
    if (strcmp(name, TFENC_CALIBRATION_GROUP) == 0 || strcmp(name, "outputs") == 0)
        return 1;
    for (size_t i = 0; i < TFENC_DATASET_COUNT; i++)
        if (tfenc_output_datasets[i].name != NULL &&
            strcmp(tfenc_output_datasets[i].name, name) == 0)
            return 1;
    /* The datasets named by the kinds: their rows and offsets. */
    for (int k = 0; k < TFENC_OUTPUT_AUTO; k++) {
        const tfenc_output_kind_entry *kind = &tfenc_output_kinds[k];
        if ((kind->rows_dataset != NULL && strcmp(kind->rows_dataset, name) == 0) ||
            (kind->offsets_dataset != NULL && strcmp(kind->offsets_dataset, name) == 0))
            return 1;
    }
    return 0;
}
