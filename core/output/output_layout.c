/* The datasets a job writes as it goes, made and reopened as the
 * description (output_description.h) gives them (output_layout.h). */
#include "output/output_layout.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#include "config.h"
#include "base/context.h"
#include "output/output_description.h"
#include "output/output_internal.h"

/* One dataset the layout makes and keeps open: an entry of the
 * description, or one of a kept field's two ([job] keep_fields), which
 * vary with the job and follow the description's in the file: its values,
 * and (mask) NAME_valid, whose 0 fill says null until the document is
 * written. */
typedef struct layout_item {
    tfenc_output_dataset_id id; /* TFENC_DATASET_COUNT: a kept field's */
    int kept;                   /* the field's index in out->kept */
    int mask;
} layout_item;

static layout_item described(tfenc_output_dataset_id id)
{
    return (layout_item){.id = id};
}

static layout_item kept_item(int k, int mask)
{
    return (layout_item){.id = TFENC_DATASET_COUNT, .kept = k, .mask = mask};
}

static int is_kept(const layout_item *item)
{
    return item->id == TFENC_DATASET_COUNT;
}

/* What the job's options say the file is, as the description asks it. */
static tfenc_output_facts job_facts(const tfenc_output *out, const tfenc_output_options *options)
{
    return (tfenc_output_facts){
        .kind = out->kind, .chunks = out->chunks, .dtype = out->dtype, .job_known = 1,
        .ids = options != NULL && options->has_ids,
        .document_source = options != NULL && options->has_document_source,
        .token_ids = options != NULL && options->has_token_ids,
        .n_documents = out->n_documents,
        .rows = tfenc_output_has_row_runs(out) ? out->n_tokens : out->n_documents,
        .width = out->row_width, .d_model = out->d_model, .entries = -1};
}

static const char *described_name(const tfenc_output *out, tfenc_output_dataset_id id)
{
    const tfenc_output_facts facts = job_facts(out, NULL);
    return tfenc_output_dataset_name(id, &facts);
}

static const char *item_name(const tfenc_output *out, const layout_item *item)
{
    if (is_kept(item))
        return item->mask ? out->kept[item->kept].mask : out->kept[item->kept].name;
    return described_name(out, item->id);
}

static int64_t item_length(const tfenc_output *out, const layout_item *item)
{
    if (is_kept(item))
        return out->n_documents;
    const tfenc_output_facts facts = job_facts(out, NULL);
    return tfenc_output_dimension_value(&facts, tfenc_output_datasets[item->id].dims[0]);
}

static int item_row_wide(const layout_item *item)
{
    return !is_kept(item) && tfenc_output_dataset_rank(item->id) == 2;
}

static hid_t *item_handle(tfenc_output *out, const layout_item *item)
{
    if (is_kept(item))
        return item->mask ? &out->kept[item->kept].valid : &out->kept[item->kept].values;
    return (hid_t *)((char *)out + tfenc_output_datasets[item->id].handle);
}

/* The item's file type, a new handle to close (the rows' and the ids'
 * are copies of the handle's). */
static hid_t item_type(const tfenc_output *out, const layout_item *item)
{
    if (is_kept(item))
        return H5Tcopy(item->mask ? H5T_STD_U8LE : out->kept[item->kept].file_type);
    switch (tfenc_output_datasets[item->id].element) {
    case TFENC_ELEMENT_ROW:
        return H5Tcopy(out->float_type);
    case TFENC_ELEMENT_INT64:
        return H5Tcopy(H5T_STD_I64LE);
    case TFENC_ELEMENT_STRING: /* the one string the layout makes: ids */
        return out->id_type >= 0 ? H5Tcopy(out->id_type)
                                 : tfenc_output_string_type(out->id_length);
    case TFENC_ELEMENT_SOURCE:
        return tfenc_output_source_type(0);
    case TFENC_ELEMENT_FLOAT32:
        return H5Tcopy(H5T_IEEE_F32LE);
    case TFENC_ELEMENT_INT32:
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


/* Creates one item's dataset, filled with what an unwritten element
 * means: -1 for lengths, 0 (null) for a kept field's mask, "", 0 or NaN
 * for its values; the rest are left unfilled (the job writes them all). */
static int create_item(tfenc_context *ctx, tfenc_output *out, const layout_item *item)
{
    const char *name = item_name(out, item);
    const int32_t not_written = -1;
    const uint8_t null = 0;
    const int64_t zero = 0;
    const double not_a_number = NAN;
    const tfenc_output_kept *kept = is_kept(item) ? &out->kept[item->kept] : NULL;
    char *empty = kept != NULL && !item->mask ? calloc(1, kept->width) : NULL;
    const void *fill = kept == NULL ? (tfenc_output_datasets[item->id].fill_unwritten
                                           ? (const void *)&not_written
                                           : NULL)
                       : item->mask                          ? (const void *)&null
                       : kept->type == TFENC_KEPT_STRING  ? (const void *)empty
                       : kept->type == TFENC_KEPT_INTEGER ? (const void *)&zero
                                                          : &not_a_number;
    hid_t type = item_type(out, item);
    int status = type < 0 || (kept != NULL && !item->mask && empty == NULL)
                     ? tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, out->path,
                                              "cannot make the type of '%s'", name)
                     : tfenc_output_create_dataset(ctx, out, name, type, item_length(out, item),
                                                   item_row_wide(item) ? out->row_width : 0,
                                                   out->compress, fill, item_handle(out, item));
    if (type >= 0)
        H5Tclose(type);
    free(empty);
    return status;
}

/* Whether the layout makes the described dataset for this job. */
static int layout_makes(tfenc_output_dataset_id id, const tfenc_output_facts *facts)
{
    return tfenc_output_datasets[id].maker == TFENC_MADE_BY_LAYOUT &&
           tfenc_output_dataset_presence(id, facts) == TFENC_REQUIRED;
}

int tfenc_output_layout_create(tfenc_context *ctx, tfenc_output *out,
                               const tfenc_output_options *options)
{
    int status = TFENC_OK;
    if (options->has_ids && (out->id_type = tfenc_output_string_type(out->id_length)) < 0)
        return tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, out->path,
                                      "cannot make a %zu-byte string type", out->id_length);
    const tfenc_output_facts facts = job_facts(out, options);
    for (int i = 0; status == TFENC_OK && i < TFENC_DATASET_COUNT; i++)
        if (layout_makes((tfenc_output_dataset_id)i, &facts)) {
            const layout_item item = described((tfenc_output_dataset_id)i);
            status = create_item(ctx, out, &item);
        }
    for (int k = 0; status == TFENC_OK && k < 2 * out->n_kept; k++) {
        const layout_item item = kept_item(k / 2, k % 2);
        status = create_item(ctx, out, &item);
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
static int same_type(hid_t stored, hid_t wanted)
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

/* Opens the item's dataset and holds it to the description: its rank,
 * its dimensions and its element type. */
static int open_item(tfenc_context *ctx, tfenc_output *out, const layout_item *item)
{
    const char *name = item_name(out, item);
    hid_t *dataset = item_handle(out, item);
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
    const int64_t length = item_length(out, item);
    const int row_wide = item_row_wide(item);
    const int wanted_rank = row_wide ? 2 : 1;
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
    else if (row_wide && dims[1] != (hsize_t)out->row_width)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: dataset '%s' has rows of %llu values, "
                             "this job writes %lld; refusing to append to it", out->path, name,
                             (unsigned long long)dims[1], (long long)out->row_width);
    hid_t stored = H5Dget_type(*dataset), wanted = stored >= 0 ? item_type(out, item) : -1;
    if (status == TFENC_OK && (stored < 0 || wanted < 0))
        status = tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, out->path,
                                        "cannot read the type of dataset '%s'", name);
    if (status == TFENC_OK && !same_type(stored, wanted)) {
        char found[64], expected[64];
        describe_type(stored, found, sizeof found);
        describe_type(wanted, expected, sizeof expected);
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: dataset '%s' holds %s, this job writes "
                             "%s; refusing to append to it", out->path, name, found, expected);
    }
    if (wanted >= 0)
        H5Tclose(wanted);
    if (status == TFENC_OK && is_kept(item) && !item->mask
        && out->kept[item->kept].type == TFENC_KEPT_STRING) {
        /* A stored width at least the longest value's is kept, as the ids'. */
        tfenc_output_kept *kept = &out->kept[item->kept];
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
    if (status == TFENC_OK && item->id == TFENC_DATASET_IDS) {
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
    const tfenc_output_facts facts = job_facts(out, options);
    for (int i = 0; status == TFENC_OK && i < TFENC_DATASET_COUNT; i++) {
        const layout_item item = described((tfenc_output_dataset_id)i);
        const char *name = item_name(out, &item);
        if (tfenc_output_datasets[i].maker != TFENC_MADE_BY_LAYOUT)
            continue;
        if (layout_makes(item.id, &facts))
            status = open_item(ctx, out, &item);
        else if (name != NULL && H5Lexists(out->file, name, H5P_DEFAULT) > 0)
            status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: has a dataset '%s' but this job "
                                 "writes none; refusing to append to it", out->path, name);
        H5Eclear2(H5E_DEFAULT);
    }
    for (int k = 0; status == TFENC_OK && k < 2 * out->n_kept; k++) {
        const layout_item item = kept_item(k / 2, k % 2);
        status = open_item(ctx, out, &item);
    }
    return status;
}
