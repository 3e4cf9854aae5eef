/* The output file's handle (output_internal.h): its names, preparing and
 * opening it, the helpers every file of the writer shares, and closing
 * it. The bottom of the writer: output_layout.c, output_attributes.c,
 * output_rows.c, output.c and output_resume.c call it, it calls none of
 * them. */
#include "output/output.h"

#include "base/files.h"
#include "base/hdf5_attributes.h"
#include "base/hdf5_error.h"
#include "base/names.h"

#include <limits.h>
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
#include "output/calibration.h"
#include "output/corpus_shards.h"
#include "output/output_internal.h"
#include "output/quantize.h"


/* ---------------------------------------------------------- error helper */

/* Records "PATH: what: HDF5's innermost message" and clears HDF5's stack,
 * whose own printing is off: the message says which file, what we were
 * doing, and HDF5's cause. */
int tfenc_output_hdf5_fail(tfenc_context *ctx, int status, const char *path, const char *format,
                           ...)
{
    char what[512], detail[256] = "";
    va_list args;
    va_start(args, format);
    vsnprintf(what, sizeof what, format, args);
    va_end(args);
    return tfenc_error(ctx, status, "%s: %s: %s", path, what,
                       tfenc_hdf5_error_detail(detail, sizeof detail));
}

/* ------------------------------------------------------------------ names */

/* Kinds whose documents own runs of rows, one per (kept) token, found
 * through `offsets`. */
int tfenc_output_per_token(const tfenc_output_kind_entry *kind)
{
    return kind->rows == TFENC_ROWS_PER_TOKEN;
}

const char *const tfenc_output_dtype_names[] = {"float32", "float16", "bfloat16", "int8",
                                                "uint8", "binary", "ubinary", NULL};
const char *const tfenc_output_compression_names[] = {"none", "gzip", NULL};
const char *const tfenc_output_chunks_names[] = {"off", "mean", "each", "max", "first", NULL};

/* Looks `name` up among the first `count` names of a table (those after
 * them, such as "auto", are no value a file can have). */
static int from_name(const char *const *names, int count, const char *name, int *value)
{
    int index = tfenc_name_index(names, name);
    if (index < 0 || index >= count)
        return TFENC_ERR_NOT_FOUND;
    *value = index;
    return TFENC_OK;
}

int tfenc_output_dtype_from_name(const char *name, tfenc_output_dtype *dtype)
{
    int value = 0, status = from_name(tfenc_output_dtype_names, TFENC_DTYPE_COUNT, name, &value);
    *dtype = status == TFENC_OK ? (tfenc_output_dtype)value : *dtype;
    return status;
}

int tfenc_output_compression_from_name(const char *name, tfenc_output_compression *compression)
{
    int value = 0, status = from_name(tfenc_output_compression_names, 2, name, &value);
    *compression = status == TFENC_OK ? (tfenc_output_compression)value : *compression;
    return status;
}

const char *tfenc_output_dtype_name(tfenc_output_dtype dtype)
{
    return tfenc_name_of(tfenc_output_dtype_names, TFENC_DTYPE_COUNT, dtype);
}

const char *tfenc_output_path(const tfenc_output *out)
{
    return out->path;
}


/* ------------------------------------------------------------ opening */

/* The chunk cache: none for uncompressed data (see create_dataset), room
 * for out-of-order rows when compressing. Returns nonzero on success. */
int tfenc_output_set_chunk_cache(hid_t access, int compress)
{
    return compress ? H5Pset_chunk_cache(access, CHUNK_CACHE_SLOTS, CHUNK_CACHE_BYTES, 1.0) >= 0
                    : H5Pset_chunk_cache(access, 0, 0, 1.0) >= 0;
}

int tfenc_output_open_file(tfenc_context *ctx, tfenc_output *out, MPI_Comm writers, int n_writers,
                     int create)
{
    hid_t access = H5Pcreate(H5P_FILE_ACCESS);
    if (access < 0)
        return tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, out->path, "cannot make file properties");
    int ok = 1;
    if (out->parallel)
        /* Metadata writes happen only in the collective calls (create,
         * finish), so they may be collective; metadata READS stay
         * independent, because an independent H5Dwrite may need one (a chunk
         * index lookup) while the other ranks are busy elsewhere. */
        ok = H5Pset_fapl_mpio(access, writers, MPI_INFO_NULL) >= 0
             && H5Pset_coll_metadata_write(access, 1) >= 0;
    /* The job's own lock on the file (core/output/ownership.h) stands for
     * HDF5's flock(), which a file system that emulates flock() with fcntl
     * locks (NFS) would see as a conflict with it. */
    if (ok)
        ok = H5Pset_file_locking(access, 0, 1) >= 0;
    /* Newest format that HDF5 1.10 readers (h5py, h5dump) still open. */
    if (ok)
        ok = H5Pset_libver_bounds(access, H5F_LIBVER_EARLIEST, H5F_LIBVER_V18) >= 0;
    if (ok)
        out->file = create ? H5Fcreate(out->path, H5F_ACC_TRUNC, H5P_DEFAULT, access)
                           : H5Fopen(out->path, H5F_ACC_RDWR, access);
    /* The message is taken before H5Pclose, which would clear HDF5's stack. */
    int status = !ok || out->file < 0 ? tfenc_output_hdf5_fail(
                     ctx, TFENC_ERR_IO, out->path, "cannot %s the output file%s",
                     create ? "create" : "reopen", n_writers > 1 ? " (with MPI-IO)" : "")
                                      : TFENC_OK;
    H5Pclose(access);
    if (status != TFENC_OK)
        return status;
    out->transfer = H5Pcreate(H5P_DATASET_XFER);
    if (out->transfer < 0
        || (out->parallel && H5Pset_dxpl_mpio(out->transfer, H5FD_MPIO_INDEPENDENT) < 0))
        return tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, out->path,
                                      "cannot make transfer properties");
    return TFENC_OK;
}

/* Every writer must agree on the file's shape; a mismatch is a bug in the
 * caller, caught here rather than as a hang or a corrupt file. */
static int check_agreement(tfenc_context *ctx, const tfenc_output_options *options,
                           MPI_Comm writers, unsigned long long *longest_id)
{
    long long mine[7] = {options->kind->id, options->dtype, options->compression, options->width,
                         options->n_documents, options->has_ids, options->has_token_ids};
    long long low[7], high[7];
    if (MPI_Allreduce(mine, low, 7, MPI_LONG_LONG, MPI_MIN, writers) != MPI_SUCCESS
        || MPI_Allreduce(mine, high, 7, MPI_LONG_LONG, MPI_MAX, writers) != MPI_SUCCESS)
        return tfenc_error(ctx, TFENC_ERR_MPI, "%s: writers could not agree on the output shape",
                           options->path);
    if (memcmp(low, high, sizeof low) != 0)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: the writing ranks disagree on the "
                           "output's kind, dtype, compression, d_model, documents, ids or "
                           "token ids",
                           options->path);
    unsigned long long length = options->max_id_length;
    if (MPI_Allreduce(&length, longest_id, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, writers)
        != MPI_SUCCESS)
        return tfenc_error(ctx, TFENC_ERR_MPI, "%s: writers could not agree on the id length",
                           options->path);
    return TFENC_OK;
}


/* Outputs whose documents own runs of rows, found through an offsets
 * dataset: per-token states, and every chunk's vector. */
int tfenc_output_has_row_runs(const tfenc_output *out)
{
    return tfenc_output_per_token(out->kind) || out->chunks == TFENC_CHUNKS_EACH;
}

const char *tfenc_output_rows_name(const tfenc_output *out)
{
    return out->kind->rows_dataset;
}

const char *tfenc_output_offsets_name(const tfenc_output *out)
{
    return tfenc_output_per_token(out->kind) ? out->kind->offsets_dataset
                                          : TFENC_CHUNK_OFFSETS_DATASET;
}

/* ------------------------------------------------------- compact vectors */

static hid_t compact_type(tfenc_output_dtype dtype)
{
    return H5Tcopy(dtype == TFENC_DTYPE_INT8 || dtype == TFENC_DTYPE_BINARY ? H5T_STD_I8LE
                                                                            : H5T_STD_U8LE);
}

/* Compact dtypes are for pooled vectors; int8 and uint8 keep their ranges
 * (a copy) and the starts and steps derived from them. */
static int prepare_compact(tfenc_context *ctx, tfenc_output *out,
                           const tfenc_output_options *options)
{
    if (!tfenc_dtype_is_compact(out->dtype))
        return TFENC_OK;
    const char *name = tfenc_output_dtype_name(out->dtype);
    if (!out->kind->compact_dtypes)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: output_dtype = %s applies to pooled "
                           "vectors, not to output of kind %s", out->path, name,
                           out->kind->name);
    if (!tfenc_dtype_needs_ranges(out->dtype)) {
        if (out->d_model % 8 != 0)
            return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: output_dtype = %s packs 8 dimensions "
                               "per byte but the vectors have %d", out->path, name, out->d_model);
        return TFENC_OK;
    }
    if (options->ranges == NULL)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: output_dtype = %s without ranges",
                           out->path, name);
    size_t d = (size_t)out->d_model;
    out->ranges = malloc(2 * d * sizeof *out->ranges);
    out->quantize_starts = malloc(d * sizeof *out->quantize_starts);
    out->quantize_steps = malloc(d * sizeof *out->quantize_steps);
    if (out->ranges == NULL || out->quantize_starts == NULL || out->quantize_steps == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", out->path);
    memcpy(out->ranges, options->ranges, 2 * d * sizeof *out->ranges);
    tfenc_quantize_steps(out->ranges, out->d_model, out->quantize_starts, out->quantize_steps);
    return TFENC_OK;
}


/* What create and reopen share: checks that the writers agree, refuses
 * gzip with several writers, and fills a new handle (no file yet). */
hid_t tfenc_output_string_type(size_t length)
{
    hid_t type = H5Tcopy(H5T_C_S1);
    if (type >= 0
        && (H5Tset_size(type, length) < 0 || H5Tset_strpad(type, H5T_STR_NULLPAD) < 0
            || H5Tset_cset(type, H5T_CSET_UTF8) < 0)) {
        H5Tclose(type);
        type = -1;
    }
    return type;
}

/* The kept fields' names, masks and file types (the same on every writer:
 * the counting pass reduced them over the ranks). */
static int prepare_kept(tfenc_context *ctx, tfenc_output *out, const tfenc_output_options *options)
{
    if (options->n_kept_fields < 0 || options->n_kept_fields > TFENC_MAX_KEEP_FIELDS)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: %d kept fields", out->path,
                           options->n_kept_fields);
    for (int k = 0; k < options->n_kept_fields; k++) {
        const tfenc_kept_field *field = &options->kept_fields[k];
        tfenc_output_kept *kept = &out->kept[k];
        out->n_kept = k + 1;
        kept->type = field->type;
        kept->width = field->longest > 0 ? field->longest : 1;
        size_t bytes = strlen(field->name) + sizeof TFENC_KEPT_MASK_SUFFIX;
        kept->name = strdup(field->name);
        kept->mask = malloc(bytes);
        if (kept->name == NULL || kept->mask == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", out->path);
        snprintf(kept->mask, bytes, "%s" TFENC_KEPT_MASK_SUFFIX, field->name);
        kept->file_type = kept->type == TFENC_KEPT_STRING    ? tfenc_output_string_type(kept->width)
                          : kept->type == TFENC_KEPT_INTEGER ? H5Tcopy(H5T_STD_I64LE)
                                                             : H5Tcopy(H5T_IEEE_F64LE);
        if (kept->file_type < 0)
            return tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, out->path, "cannot make the type "
                                          "of '%s'", kept->name);
    }
    return TFENC_OK;
}

int tfenc_output_prepare(tfenc_context *ctx, MPI_Comm writers, const tfenc_output_options *options,
                   tfenc_output **out_result)
{
    *out_result = NULL;
    if (options == NULL || options->path == NULL)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "output: no path given");
    const char *path = options->path;
    if (options->kind == NULL || options->width < 1 || options->n_documents < 0
        || (tfenc_output_per_token(options->kind) && options->n_rows < 0)
        || (options->kind->chunks && options->chunks == TFENC_CHUNKS_EACH
            && options->n_rows < options->n_documents))
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: bad output shape (d_model %d, %lld "
                           "documents, %lld rows)", path, options->width,
                           (long long)options->n_documents, (long long)options->n_rows);
    int n_writers = 1;
    unsigned long long longest_id = options->max_id_length;
    if (writers != MPI_COMM_NULL) {
        if (MPI_Comm_size(writers, &n_writers) != MPI_SUCCESS)
            return tfenc_error(ctx, TFENC_ERR_MPI, "%s: invalid writers communicator", path);
        int status = check_agreement(ctx, options, writers, &longest_id);
        if (status != TFENC_OK)
            return status;
    }
    if (options->compression == TFENC_COMPRESSION_GZIP && n_writers > 1)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: compression = gzip needs a single writing "
                           "rank (%d write here): parallel HDF5 1.10 writes compressed datasets "
                           "only collectively; use compression = none and compress afterwards "
                           "with h5repack -f SHUF -f GZIP=4", path, n_writers);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if (options->compression == TFENC_COMPRESSION_GZIP
        && H5Zfilter_avail(H5Z_FILTER_DEFLATE) <= 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: this HDF5 library has no gzip filter",
                           path);

    tfenc_output *out = calloc(1, sizeof *out);
    if (out == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", path);
    out->file = out->transfer = out->float_type = out->rows = out->offsets = -1;
    out->lengths = out->truncated = out->ids = out->id_type = out->document_source = -1;
    out->chunk_counts = out->chunk_starts = out->token_ids = -1;
    for (int k = 0; k < TFENC_MAX_KEEP_FIELDS; k++)
        out->kept[k].file_type = out->kept[k].values = out->kept[k].valid = -1;
    out->chunks = options->kind->chunks ? options->chunks : TFENC_CHUNKS_OFF;
    out->writers = writers;
    out->parallel = n_writers > 1;
    out->kind = options->kind;
    out->dtype = options->dtype;
    out->d_model = options->width;
    out->n_documents = options->n_documents;
    /* Rows of the float dataset beyond one per document: tokens, or chunks. */
    out->n_tokens = tfenc_output_per_token(options->kind) || out->chunks == TFENC_CHUNKS_EACH
                        ? options->n_rows
                        : 0;
    out->compress = options->compression == TFENC_COMPRESSION_GZIP;
    out->n_writers = n_writers;
    out->path = malloc(strlen(path) + 1);
    if (out->path == NULL) {
        free(out);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", path);
    }
    strcpy(out->path, path);
    out->id_length = longest_id > 0 ? (size_t)longest_id : 1;
    /* The float type is made here so that reopen can compare it. */
    out->float_type = tfenc_dtype_is_compact(out->dtype) ? compact_type(out->dtype)
                    : out->dtype == TFENC_DTYPE_FLOAT16    ? tfenc_h5_float16_type()
                    : out->dtype == TFENC_DTYPE_BFLOAT16 ? tfenc_h5_bfloat16_type()
                                                         : H5Tcopy(H5T_IEEE_F32LE);
    out->float_size = tfenc_dtype_element_size(out->dtype);
    out->row_width = tfenc_dtype_row_width(out->dtype, out->d_model);
    int compact_status = prepare_compact(ctx, out, options);
    if (compact_status == TFENC_OK)
        compact_status = prepare_kept(ctx, out, options);
    if (compact_status != TFENC_OK) {
        tfenc_output_close(out);
        return compact_status;
    }
    if (out->float_type < 0) {
        int status = tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, path, "cannot make the %s type",
                                            tfenc_output_dtype_name(out->dtype));
        tfenc_output_close(out);
        return status;
    }
    *out_result = out;
    return TFENC_OK;
}

hid_t tfenc_output_source_type(int in_memory)
{
    hid_t type = H5Tcreate(H5T_COMPOUND, in_memory ? sizeof(tfenc_output_source) : 12);
    if (type < 0)
        return -1;
    if (H5Tinsert(type, "shard", in_memory ? HOFFSET(tfenc_output_source, shard) : 0,
                  in_memory ? H5T_NATIVE_INT32 : H5T_STD_I32LE) < 0
        || H5Tinsert(type, "line", in_memory ? HOFFSET(tfenc_output_source, line) : 4,
                     in_memory ? H5T_NATIVE_INT64 : H5T_STD_I64LE) < 0) {
        H5Tclose(type);
        return -1;
    }
    return type;
}

/* ------------------------------------------------------------------ close */

/* Closes every handle; returns nonzero if HDF5 reported a failure. */
int tfenc_output_close_handles(tfenc_output *out)
{
    int failed = 0;
    /* The heads' objects first: a file of MPI-IO closes only without any. */
    for (int h = 0; h < out->n_heads; h++) {
        failed |= tfenc_output_close_handles(out->heads[h]);
        tfenc_output_free(out->heads[h]);
    }
    out->n_heads = 0;
    hid_t *datasets[] = {&out->rows, &out->offsets, &out->lengths, &out->truncated, &out->ids,
                         &out->chunk_counts, &out->chunk_starts, &out->token_ids,
                         &out->document_source};
    for (size_t i = 0; i < sizeof datasets / sizeof datasets[0]; i++)
        if (*datasets[i] >= 0) {
            failed |= H5Dclose(*datasets[i]) < 0;
            *datasets[i] = -1;
        }
    for (int k = 0; k < out->n_kept; k++) {
        hid_t *handles[] = {&out->kept[k].values, &out->kept[k].valid};
        for (size_t i = 0; i < 2; i++)
            if (*handles[i] >= 0) {
                failed |= H5Dclose(*handles[i]) < 0;
                *handles[i] = -1;
            }
    }
    hid_t *types[] = {&out->float_type, &out->id_type};
    for (size_t i = 0; i < 2; i++)
        if (*types[i] >= 0) {
            H5Tclose(*types[i]);
            *types[i] = -1;
        }
    /* A head's `file` is its group; the transfer properties are its file's. */
    if (out->borrowed && out->file >= 0)
        failed |= H5Gclose(out->file) < 0;
    if (out->borrowed)
        out->transfer = out->file = -1;
    if (out->transfer >= 0)
        H5Pclose(out->transfer);
    out->transfer = -1;
    if (out->file >= 0)
        failed |= H5Fclose(out->file) < 0;
    out->file = -1;
    return failed;
}

void tfenc_output_free(tfenc_output *out)
{
    for (int k = 0; k < out->n_kept; k++) {
        if (out->kept[k].file_type >= 0)
            H5Tclose(out->kept[k].file_type);
        free(out->kept[k].name);
        free(out->kept[k].mask);
    }
    free(out->ranges);
    free(out->quantize_starts);
    free(out->quantize_steps);
    free(out->staging);
    free(out->path);
    free(out->heads);
    free(out);
}

int tfenc_output_close(tfenc_output *out)
{
    if (out == NULL)
        return 0;
    int failed = tfenc_output_close_handles(out);
    H5Eclear2(H5E_DEFAULT);
    tfenc_output_free(out);
    return failed;
}

int64_t tfenc_output_hdf5_file(const tfenc_output *out)
{
    return out->file;
}

int64_t tfenc_output_hdf5_transfer(const tfenc_output *out)
{
    return out->transfer;
}

MPI_Comm tfenc_output_writers(const tfenc_output *out)
{
    return out->parallel ? out->writers : MPI_COMM_NULL;
}
