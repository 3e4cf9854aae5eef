/* The further heads of a job of several (output.h's tfenc_output_open_head):
 * each a handle of its own whose `file` is its group /outputs/NAME of the
 * file, which owns and closes it. */
#include "output/output.h"
#include "output/output_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#include "base/hdf5_attributes.h"

int64_t tfenc_output_documents(const tfenc_output *out)
{
    return out->n_documents;
}

int tfenc_output_name_first_head(tfenc_context *ctx, tfenc_output *file, const char *name)
{
    if (file->reopened)
        return TFENC_OK;
    int status = tfenc_output_write_string(ctx, file, "head", name);
    if (status == TFENC_OK && H5Fflush(file->file, H5F_SCOPE_GLOBAL) < 0)
        status = tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, file->path,
                                        "cannot flush attribute 'head'");
    return status;
}

/* A head's group, checked on resume: what it says it holds must be what
 * this job's head writes, or the job's rows would join another's. */
static int check_head_group(tfenc_context *ctx, tfenc_output *head, const char *group)
{
    char *kind = tfenc_hdf5_attribute_string(head->file, "output_kind");
    int64_t width = -1;
    if (!tfenc_hdf5_attribute_number(head->file, "d_model", H5T_INTEGER, H5T_NATIVE_INT64,
                                     &width))
        width = -1;
    H5Eclear2(H5E_DEFAULT);
    int same = kind != NULL && strcmp(kind, head->kind->name) == 0 && width == head->d_model;
    int status = same ? TFENC_OK
                      : tfenc_error(ctx, TFENC_ERR_CONFIG,
                                    "%s: %s holds output_kind %s of width %lld, this job's head "
                                    "writes %s of width %d; refusing to append to it",
                                    head->path, group, kind != NULL ? kind : "(missing)",
                                    (long long)width, head->kind->name, head->d_model);
    free(kind);
    return status;
}

/* The group of a head, as its handle's `file`: /outputs/NAME, made with
 * /outputs when new, checked when the file is reopened. */
static int open_head_group(tfenc_context *ctx, tfenc_output *file, tfenc_output *head,
                           const char *group)
{
    if (file->reopened) {
        if (H5Lexists(file->file, "outputs", H5P_DEFAULT) > 0 &&
            H5Lexists(file->file, group, H5P_DEFAULT) > 0)
            head->file = H5Gopen2(file->file, group, H5P_DEFAULT);
        H5Eclear2(H5E_DEFAULT);
        if (head->file < 0)
            return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: has no group %s for this job's "
                               "head: not a tfenc output of this job; refusing to append to "
                               "it", file->path, group);
        return check_head_group(ctx, head, group);
    }
    if (H5Lexists(file->file, "outputs", H5P_DEFAULT) <= 0) {
        hid_t outputs = H5Gcreate2(file->file, "outputs", H5P_DEFAULT, H5P_DEFAULT,
                                   H5P_DEFAULT);
        if (outputs < 0)
            return tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, file->path,
                                          "cannot create group /outputs");
        H5Gclose(outputs);
    }
    head->file = H5Gcreate2(file->file, group, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (head->file < 0)
        return tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, file->path, "cannot create group %s",
                                      group);
    return TFENC_OK;
}

/* The attributes of a new head's group: what its rows are, as the root's
 * say it of the first head's. */
static int write_head_attributes(tfenc_context *ctx, tfenc_output *head,
                                 const tfenc_output_options *options)
{
    int32_t unit = options->unit_norm != 0;
    int64_t width = head->d_model;
    int status = tfenc_output_write_string(ctx, head, "output_kind", head->kind->name);
    if (status == TFENC_OK)
        status = tfenc_output_write_string(ctx, head, "dtype",
                                           tfenc_output_dtype_name(head->dtype));
    if (status == TFENC_OK)
        status = tfenc_output_write_attribute(ctx, head, "d_model", H5T_NATIVE_INT64, &width);
    if (status == TFENC_OK)
        status = tfenc_output_write_attribute(ctx, head, "unit_norm", H5T_NATIVE_INT32, &unit);
    for (const tfenc_output_kind_attribute *a = head->kind->attributes;
         status == TFENC_OK && a->name != NULL; a++) {
        const char *value = *(const char *const *)((const char *)options + a->option);
        status = tfenc_output_write_string(ctx, head, a->name, value != NULL ? value : "");
    }
    return status;
}

/* A reopened file's rows dataset of a head: one row of d_model values per
 * document. */
static int open_head_rows(tfenc_context *ctx, tfenc_output *head, const char *group)
{
    const char *name = head->kind->rows_dataset;
    if (H5Lexists(head->file, name, H5P_DEFAULT) > 0)
        head->rows = H5Dopen2(head->file, name, H5P_DEFAULT);
    hid_t space = head->rows >= 0 ? H5Dget_space(head->rows) : -1;
    hsize_t dims[2] = {0, 0};
    int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    if (rank == 2)
        H5Sget_simple_extent_dims(space, dims, NULL);
    if (space >= 0)
        H5Sclose(space);
    H5Eclear2(H5E_DEFAULT);
    if (rank != 2 || dims[0] != (hsize_t)head->n_documents || dims[1] != (hsize_t)head->d_model)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: %s/%s is not [%lld, %d] as this job's "
                           "head writes it; refusing to append to it", head->path, group, name,
                           (long long)head->n_documents, head->d_model);
    return TFENC_OK;
}

int tfenc_output_open_head(tfenc_context *ctx, tfenc_output *file, const char *name,
                           const tfenc_output_options *options, tfenc_output **head_out)
{
    *head_out = NULL;
    const tfenc_output_kind_entry *kind = options->kind;
    if (kind == NULL || kind->rows == TFENC_ROWS_PER_TOKEN || options->width < 1)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: head %s: a further head writes one "
                           "row per document", file->path, name);
    char group[96];
    snprintf(group, sizeof group, "/outputs/%s", name);
    tfenc_output **heads = realloc(file->heads, ((size_t)file->n_heads + 1) * sizeof *heads);
    tfenc_output *head = heads != NULL ? calloc(1, sizeof *head) : NULL;
    if (heads != NULL)
        file->heads = heads;
    if (head == NULL || (head->path = strdup(file->path)) == NULL) {
        free(head);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", file->path);
    }
    head->file = head->rows = head->offsets = head->lengths = head->truncated = -1;
    head->ids = head->id_type = head->document_source = head->chunk_counts = -1;
    head->chunk_starts = head->token_ids = -1;
    head->borrowed = 1;
    head->reopened = file->reopened;
    head->transfer = file->transfer;
    head->writers = file->writers;
    head->parallel = file->parallel;
    head->n_writers = file->n_writers;
    head->kind = kind;
    head->dtype = TFENC_DTYPE_FLOAT32;
    head->d_model = options->width;
    head->row_width = options->width;
    head->n_documents = file->n_documents;
    head->chunks = TFENC_CHUNKS_OFF;
    head->float_size = sizeof(float);
    head->float_type = H5Tcopy(H5T_IEEE_F32LE);
    file->heads[file->n_heads++] = head;
    int status = head->float_type < 0
                     ? tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, file->path,
                                              "cannot make the float32 type")
                     : open_head_group(ctx, file, head, group);
    /* Sparse rows: the CSR comes when the job completes (sparse.h). */
    if (status == TFENC_OK && file->reopened) {
        if (kind->rows_dataset != NULL)
            status = open_head_rows(ctx, head, group);
    } else if (status == TFENC_OK) {
        if (kind->rows_dataset != NULL)
            status = tfenc_output_create_dataset(ctx, head, kind->rows_dataset, head->float_type,
                                                 head->n_documents, head->row_width, 0, NULL,
                                                 &head->rows);
        if (status == TFENC_OK)
            status = write_head_attributes(ctx, head, options);
        /* As create's: the group's structure on disk before any row, so
         * that a killed job leaves a file that opens with it. */
        if (status == TFENC_OK && H5Fflush(file->file, H5F_SCOPE_GLOBAL) < 0)
            status = tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, file->path,
                                            "cannot flush group %s", group);
    }
    if (status == TFENC_OK)
        *head_out = head;
    return status;
}
