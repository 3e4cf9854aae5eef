/* The HDF5 output writer: datasets created collectively, rows written
 * independently by each rank at their documents' global indices. */
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
const char *const tfenc_output_chunks_names[] = {"off", "mean", "each", NULL};

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


/* ------------------------------------------------------------------ create */

/* The chunk cache: none for uncompressed data (see create_dataset), room
 * for out-of-order rows when compressing. Returns nonzero on success. */
int tfenc_output_set_chunk_cache(hid_t access, int compress)
{
    return compress ? H5Pset_chunk_cache(access, CHUNK_CACHE_SLOTS, CHUNK_CACHE_BYTES, 1.0) >= 0
                    : H5Pset_chunk_cache(access, 0, 0, 1.0) >= 0;
}

/* Creates a dataset [dims[0], width] (rank 2 when width > 0, else rank 1),
 * chunked about CHUNK_BYTES per chunk. */
static int create_dataset(tfenc_context *ctx, tfenc_output *out, const char *name, hid_t type,
                          int64_t length, int64_t width, int compress, const void *fill,
                          hid_t *dataset)
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
    return tfenc_output_per_token(out->kind) ? out->kind->offsets_dataset : "chunk_offsets";
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

/* A disk that cannot hold the whole file is refused before any work: the
 * datasets are allocated at creation but their rows are only written as
 * documents finish, so without this check the job would run until the
 * disk fills. Every writer sees the same file system, hence the same answer. */
static int check_free_space(tfenc_context *ctx, const tfenc_output *out,
                            const tfenc_output_options *options)
{
    const double rows
        = tfenc_output_has_row_runs(out) ? (double)out->n_tokens : (double)out->n_documents;
    /* sparse rows: their size is known only once they are written */
    const double row_bytes = out->kind->rows_dataset == NULL
                                 ? 0.0
                                 : (double)out->row_width * (double)out->float_size;
    const double per_document = 4 + 4 + (tfenc_output_has_row_runs(out) ? 8 : 0) +
                                (out->chunks != TFENC_CHUNKS_OFF ? 4 : 0) +
                                (options->has_ids ? (double)out->id_length : 0);
    /* token_ids: 4 bytes per row of hidden */
    const double id_bytes = tfenc_output_per_token(out->kind) && options->has_token_ids ? 4 : 0;
    const double needed = rows * (row_bytes + id_bytes) + (double)out->n_documents * per_document;
    double available = 0.0;
    int status = tfenc_file_free_space(ctx, "[job] output", out->path, &available);
    if (status != TFENC_OK || available < 0)
        return status; /* a missing directory: the create below reports it better */
    if (needed > available)
        return tfenc_error(ctx, TFENC_ERR_IO,
                           "%s: the output needs %.1f MiB but its file system has %.1f MiB "
                           "free; free some space or choose another output",
                           out->path, needed / 1048576.0, available / 1048576.0);
    return TFENC_OK;
}

/* Its HDF5 type: packed little-endian in the file (12 bytes), the C
 * struct's layout in memory. */
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

int tfenc_output_create(tfenc_context *ctx, MPI_Comm writers, const tfenc_output_options *options,
                        tfenc_output **out_result)
{
    tfenc_output *out = NULL;
    int status = tfenc_output_prepare(ctx, writers, options, &out);
    *out_result = NULL;
    if (status != TFENC_OK)
        return status;
    const char *path = options->path;
    if (!out->compress)
        status = check_free_space(ctx, out, options);
    if (status == TFENC_OK)
        status = tfenc_output_open_file(ctx, out, writers, out->n_writers, 1);
    int compress = out->compress;
    /* Sparse rows are written at the end, in document order (sparse.h). */
    if (status == TFENC_OK && out->kind->rows_dataset != NULL)
        status = create_dataset(ctx, out, tfenc_output_rows_name(out), out->float_type,
                                tfenc_output_has_row_runs(out) ? out->n_tokens : out->n_documents,
                                out->row_width, compress, NULL, &out->rows);
    if (status == TFENC_OK && tfenc_output_has_row_runs(out))
        status = create_dataset(ctx, out, tfenc_output_offsets_name(out), H5T_STD_I64LE,
                                out->n_documents + 1, 0, compress, NULL, &out->offsets);
    if (status == TFENC_OK && out->chunks == TFENC_CHUNKS_EACH)
        status = create_dataset(ctx, out, "chunk_starts", H5T_STD_I32LE, out->n_tokens, 0,
                                compress, NULL, &out->chunk_starts);
    if (status == TFENC_OK && tfenc_output_per_token(out->kind) && options->has_token_ids)
        status = create_dataset(ctx, out, "token_ids", H5T_STD_I32LE, out->n_tokens, 0,
                                compress, NULL, &out->token_ids);
    if (status == TFENC_OK && out->chunks != TFENC_CHUNKS_OFF)
        status = create_dataset(ctx, out, "chunks", H5T_STD_I32LE, out->n_documents, 0,
                                compress, NULL, &out->chunk_counts);
    int32_t not_written = -1;
    if (status == TFENC_OK)
        status = create_dataset(ctx, out, "lengths", H5T_STD_I32LE, out->n_documents, 0, compress,
                                &not_written, &out->lengths);
    if (status == TFENC_OK)
        status = create_dataset(ctx, out, "truncated", H5T_STD_I32LE, out->n_documents, 0,
                                compress, NULL, &out->truncated);
    if (status == TFENC_OK && options->has_ids) {
        /* id_length is at least 1: a zero-size string type is invalid, and
         * every id could be empty. */
        out->id_type = H5Tcopy(H5T_C_S1);
        if (out->id_type < 0 || H5Tset_size(out->id_type, out->id_length) < 0
            || H5Tset_strpad(out->id_type, H5T_STR_NULLPAD) < 0
            || H5Tset_cset(out->id_type, H5T_CSET_UTF8) < 0)
            status = tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, path,
                                            "cannot make a %zu-byte string type", out->id_length);
        if (status == TFENC_OK)
            status = create_dataset(ctx, out, "ids", out->id_type, out->n_documents, 0, compress,
                                    NULL, &out->ids);
    }
    if (status == TFENC_OK && options->has_document_source) {
        hid_t type = tfenc_output_source_type(0);
        status = type < 0 ? tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, path,
                                                   "cannot make the type of "
                                                   "'document_source'")
                          : create_dataset(ctx, out, "document_source", type, out->n_documents, 0,
                                           compress, NULL, &out->document_source);
        if (type >= 0)
            H5Tclose(type);
    }
    if (status == TFENC_OK)
        status = tfenc_output_write_attributes(ctx, out, options);
    if (status == TFENC_OK)
        status = tfenc_output_write_ranges(ctx, out, options);
    if (status == TFENC_OK)
        status = tfenc_output_write_calibration(ctx, out, options->calibration);
    if (status == TFENC_OK)
        status = tfenc_output_write_corpus_shards(ctx, out, options->corpus_shards);
    /* offsets[N] = T belongs to no document: the first writer stores it. */
    int rank = 0;
    if (writers != MPI_COMM_NULL)
        MPI_Comm_rank(writers, &rank);
    if (status == TFENC_OK && tfenc_output_has_row_runs(out) && rank == 0) {
        int64_t start = out->n_documents, one = 1;
        status = tfenc_output_write_elements(ctx, out, out->offsets, tfenc_output_offsets_name(out),
                                             1, &start, &one, 0, H5T_NATIVE_INT64, &out->n_tokens);
    }
    /* The file's structure reaches the disk now, so that a killed job
     * leaves a file that opens and says complete = 0. */
    if (status == TFENC_OK && H5Fflush(out->file, H5F_SCOPE_GLOBAL) < 0)
        status = tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, path, "cannot flush the new file");
    if (status != TFENC_OK) {
        tfenc_output_close(out);
        return status;
    }
    *out_result = out;
    return TFENC_OK;
}


/* ------------------------------------------------------------------ close */

/* Closes every handle; returns nonzero if HDF5 reported a failure. */
static int close_handles(tfenc_output *out)
{
    int failed = 0;
    hid_t *datasets[] = {&out->rows, &out->offsets, &out->lengths, &out->truncated, &out->ids,
                         &out->chunk_counts, &out->chunk_starts, &out->token_ids,
                         &out->document_source};
    for (size_t i = 0; i < sizeof datasets / sizeof datasets[0]; i++)
        if (*datasets[i] >= 0) {
            failed |= H5Dclose(*datasets[i]) < 0;
            *datasets[i] = -1;
        }
    hid_t *types[] = {&out->float_type, &out->id_type};
    for (size_t i = 0; i < 2; i++)
        if (*types[i] >= 0) {
            H5Tclose(*types[i]);
            *types[i] = -1;
        }
    if (out->transfer >= 0)
        H5Pclose(out->transfer);
    out->transfer = -1;
    if (out->file >= 0)
        failed |= H5Fclose(out->file) < 0;
    out->file = -1;
    return failed;
}

static void free_output(tfenc_output *out)
{
    free(out->ranges);
    free(out->quantize_starts);
    free(out->quantize_steps);
    free(out->staging);
    free(out->path);
    free(out);
}

int tfenc_output_add_run_summary(tfenc_context *ctx, tfenc_output *out, const char *entry)
{
    json_t *runs = NULL, *run = json_loads(entry, 0, NULL);
    char *before = tfenc_hdf5_attribute_string(out->file, "run_summaries"), *text = NULL;
    H5Eclear2(H5E_DEFAULT);
    int status = TFENC_OK;
    if (before != NULL)
        runs = json_loads(before, 0, NULL);
    if (!json_is_array(runs)) {
        json_decref(runs);
        runs = json_array();
    }
    if (run == NULL || runs == NULL || json_array_append_new(runs, run) != 0) {
        run = NULL;
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: cannot add the run summary", out->path);
        goto done;
    }
    run = NULL;
    /* Compact and in the order built: every writer writes the same bytes. */
    text = json_dumps(runs, JSON_COMPACT | JSON_PRESERVE_ORDER);
    status = text != NULL ? tfenc_output_write_string(ctx, out, "run_summaries", text)
                          : tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
done:
    json_decref(run);
    json_decref(runs);
    free(before);
    free(text);
    return status;
}

int tfenc_output_finish(tfenc_context *ctx, tfenc_output *out)
{
    /* Data first, then the mark: a reader that sees complete = 1 must find
     * every row on disk. */
    int status = TFENC_OK;
    if (H5Fflush(out->file, H5F_SCOPE_GLOBAL) < 0)
        status = tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, out->path, "cannot flush the rows");
    int32_t complete = 1;
    if (status == TFENC_OK)
        status = tfenc_output_write_attribute(ctx, out, "complete", H5T_NATIVE_INT32, &complete);
    if (close_handles(out) && status == TFENC_OK)
        status = tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, out->path, "cannot close the file");
    free_output(out);
    return status;
}

int tfenc_output_close(tfenc_output *out)
{
    if (out == NULL)
        return 0;
    int failed = close_handles(out);
    H5Eclear2(H5E_DEFAULT);
    free_output(out);
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
