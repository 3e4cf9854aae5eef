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
#include "output/kept_datasets.h"
#include "output/quantize.h"

/* About 1 MiB per chunk: large enough for efficient I/O and compression,
 * small enough that reading one document's row stays cheap. */
#define CHUNK_BYTES ((size_t)1 << 20)
/* Chunk cache for the single-writer gzip case, where rows arrive out of
 * order: 64 chunks in memory before one is compressed and evicted. */
#define CHUNK_CACHE_BYTES ((size_t)64 << 20)
#define CHUNK_CACHE_SLOTS 12421 /* a prime about 100 times the chunks cached, as HDF5 advises */

struct tfenc_output {
    char *path;
    const tfenc_output_kind_entry *kind; /* output/kinds.h's entry: what the rows are */
    tfenc_output_dtype dtype;
    int d_model;
    int64_t n_documents;
    int64_t n_tokens;
    int parallel;          /* MPI-IO driver with several writers */
    MPI_Comm writers;      /* MPI_COMM_NULL when serial without MPI */
    hid_t file;
    hid_t transfer;        /* dataset transfer properties (independent MPI-IO) */
    hid_t float_type;      /* memory = file type of the rows (float, or compact) */
    size_t float_size;     /* bytes of one element of the rows */
    int64_t row_width;     /* elements of a stored row: d_model, d_model / 8 packed */
    float *quantize_starts; /* int8 / uint8: [d_model] each, else NULL */
    float *quantize_steps;
    float *ranges;          /* int8 / uint8: [2, d_model] as stored */
    hid_t rows;            /* embeddings or hidden */
    hid_t offsets;         /* tokens kind (offsets) or chunk rows (chunk_offsets), else -1 */
    tfenc_output_chunks chunks;
    hid_t chunk_counts;    /* chunks [N] of a chunked output, else -1 */
    hid_t chunk_starts;    /* chunk_starts [C] with a row per chunk, else -1 */
    hid_t token_ids;       /* token_ids [T] beside hidden, else -1 */
    hid_t lengths;
    hid_t truncated;
    hid_t ids;             /* -1 without ids */
    hid_t document_source; /* document_source [N] {shard, line}, else -1 */
    tfenc_kept_datasets *kept; /* keep_fields' datasets, else NULL */
    hid_t id_type;
    size_t id_length;      /* bytes per id in the file */
    int compress;          /* gzip + shuffle */
    int n_writers;
    /* Staging for sorted, converted rows; grows, reused across writes. */
    void *staging;
    size_t staging_bytes;
};

/* ---------------------------------------------------------- error helper */

/* Records "PATH: what: HDF5's innermost message" and clears HDF5's stack,
 * whose own printing is off: the message says which file, what we were
 * doing, and HDF5's cause. */
static int h5_fail(tfenc_context *ctx, int status, const char *path, const char *format, ...)
    TFENC_PRINTF(4, 5);
static int h5_fail(tfenc_context *ctx, int status, const char *path, const char *format, ...)
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
static int per_token(const tfenc_output_kind_entry *kind)
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

/* ------------------------------------------------------------- attributes */

/* A one-value attribute of `object` (the file, or a group of it). */
static int write_attribute_of(tfenc_context *ctx, tfenc_output *out, hid_t object,
                              const char *name, hid_t type, const void *value)
{
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t attribute = -1;
    herr_t result = -1;
    if (space >= 0) {
        if (H5Aexists(object, name) > 0)
            attribute = H5Aopen(object, name, H5P_DEFAULT);
        else
            attribute = H5Acreate2(object, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    }
    if (attribute >= 0)
        result = H5Awrite(attribute, type, value);
    int status = result < 0 ? h5_fail(ctx, TFENC_ERR_IO, out->path,
                                      "cannot write attribute '%s'", name)
                            : TFENC_OK;
    if (attribute >= 0)
        H5Aclose(attribute);
    if (space >= 0)
        H5Sclose(space);
    return status;
}

static int write_attribute(tfenc_context *ctx, tfenc_output *out, const char *name, hid_t type,
                           const void *value)
{
    return write_attribute_of(ctx, out, out->file, name, type, value);
}

static int write_string_attribute_of(tfenc_context *ctx, tfenc_output *out, hid_t object,
                                     const char *name, const char *value)
{
    hid_t type = H5Tcopy(H5T_C_S1);
    if (type < 0 || H5Tset_size(type, H5T_VARIABLE) < 0 || H5Tset_cset(type, H5T_CSET_UTF8) < 0)
        return h5_fail(ctx, TFENC_ERR_IO, out->path, "cannot make a string type");
    const char *text = value != NULL ? value : "";
    int status = write_attribute_of(ctx, out, object, name, type, &text);
    H5Tclose(type);
    return status;
}

static int write_string_attribute(tfenc_context *ctx, tfenc_output *out, const char *name,
                                  const char *value)
{
    return write_string_attribute_of(ctx, out, out->file, name, value);
}

static int write_int64_attribute(tfenc_context *ctx, tfenc_output *out, const char *name,
                                 int64_t value)
{
    return write_attribute(ctx, out, name, H5T_NATIVE_INT64, &value);
}

/* The attributes that say how this run was started (tfenc-batch --status
 * rebuilds the resume command from them). Rank 0's absolute job path and
 * working directory for everyone: attribute values must be identical on
 * every writer. */
static int write_run_attributes(tfenc_context *ctx, tfenc_output *out,
                                const tfenc_output_options *options)
{
    char job_path[PATH_MAX] = "", directory[PATH_MAX] = "";
    int rank = 0;
    if (out->writers != MPI_COMM_NULL)
        MPI_Comm_rank(out->writers, &rank);
    if (rank == 0) {
        if (getcwd(directory, sizeof directory) == NULL)
            directory[0] = '\0';
        if (options->job_path == NULL || realpath(options->job_path, job_path) == NULL)
            snprintf(job_path, sizeof job_path, "%s",
                     options->job_path != NULL ? options->job_path : "");
    }
    if (out->writers != MPI_COMM_NULL
        && (MPI_Bcast(job_path, sizeof job_path, MPI_CHAR, 0, out->writers) != MPI_SUCCESS
            || MPI_Bcast(directory, sizeof directory, MPI_CHAR, 0, out->writers) != MPI_SUCCESS))
        return tfenc_error(ctx, TFENC_ERR_MPI, "%s: cannot share the job's path", out->path);
    size_t length = 1;
    for (int i = 0; i < options->n_overrides; i++)
        length += strlen(options->overrides[i]) + 1;
    char *overrides = malloc(length);
    if (overrides == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", out->path);
    overrides[0] = '\0';
    for (int i = 0; i < options->n_overrides; i++) {
        strcat(overrides, options->overrides[i]);
        strcat(overrides, "\n");
    }
    int status = write_string_attribute(ctx, out, "job_path", job_path);
    if (status == TFENC_OK)
        status = write_string_attribute(ctx, out, "working_directory", directory);
    if (status == TFENC_OK)
        status = write_string_attribute(ctx, out, "job_overrides", overrides);
    if (status == TFENC_OK)
        status = write_string_attribute(ctx, out, "precision", options->precision);
    if (status == TFENC_OK && options->kernels != NULL)
        status = write_string_attribute(ctx, out, "kernels", options->kernels);
    if (status == TFENC_OK && options->path_choices != NULL)
        status = write_string_attribute(ctx, out, "path_choices", options->path_choices);
    /* Rewritten by every run, like precision, which a resume must find the
     * same (check_model); a resumed int8 run takes the file's calibration,
     * so the cosine and steps stay the file's. */
    double cosine = options->precision_steps != NULL ? options->sample_min_cosine : 1.0;
    if (status == TFENC_OK)
        status = write_attribute(ctx, out, "precision_sample_min_cosine", H5T_NATIVE_DOUBLE,
                                 &cosine);
    if (status == TFENC_OK)
        status = write_string_attribute(ctx, out, "precision_steps", options->precision_steps);
    free(overrides);
    return status;
}

/* ------------------------------------------------------------------ create */

/* The chunk cache: none for uncompressed data (see create_dataset), room
 * for out-of-order rows when compressing. Returns nonzero on success. */
static int set_chunk_cache(hid_t access, int compress)
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
            ok = set_chunk_cache(access, compress);
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
        ? h5_fail(ctx, TFENC_ERR_IO, out->path, "cannot create dataset '%s'", name)
        : TFENC_OK;
    if (space >= 0)
        H5Sclose(space);
    if (create >= 0)
        H5Pclose(create);
    if (access >= 0)
        H5Pclose(access);
    return status;
}

static int open_file(tfenc_context *ctx, tfenc_output *out, MPI_Comm writers, int n_writers,
                     int create)
{
    hid_t access = H5Pcreate(H5P_FILE_ACCESS);
    if (access < 0)
        return h5_fail(ctx, TFENC_ERR_IO, out->path, "cannot make file properties");
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
    int status = !ok || out->file < 0
        ? h5_fail(ctx, TFENC_ERR_IO, out->path, "cannot %s the output file%s",
                  create ? "create" : "reopen", n_writers > 1 ? " (with MPI-IO)" : "")
        : TFENC_OK;
    H5Pclose(access);
    if (status != TFENC_OK)
        return status;
    out->transfer = H5Pcreate(H5P_DATASET_XFER);
    if (out->transfer < 0
        || (out->parallel && H5Pset_dxpl_mpio(out->transfer, H5FD_MPIO_INDEPENDENT) < 0))
        return h5_fail(ctx, TFENC_ERR_IO, out->path, "cannot make transfer properties");
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

static int compare_text(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* One "NAME SHA256" line per plugin file (output.h), sorted, each once:
 * what the `plugins_sha256` attribute holds. NULL when out of memory. */
static char *plugins_text(const tfenc_output_options *options)
{
    const int n = options->n_plugins > 0 ? options->n_plugins : 0;
    char **lines = calloc((size_t)n + 1, sizeof *lines);
    size_t total = 1;
    int ok = lines != NULL;
    for (int i = 0; ok && i < n; i++) {
        const char *name = strrchr(options->plugin_paths[i], '/');
        name = name != NULL ? name + 1 : options->plugin_paths[i];
        const char *digest = options->plugin_sha256[i] != NULL ? options->plugin_sha256[i] : "";
        size_t size = strlen(name) + strlen(digest) + 3;
        ok = (lines[i] = malloc(size)) != NULL;
        if (ok)
            total += (size_t)snprintf(lines[i], size, "%s %s\n", name, digest);
    }
    char *text = ok ? malloc(total) : NULL;
    if (text != NULL) {
        qsort(lines, (size_t)n, sizeof *lines, compare_text);
        text[0] = '\0';
        for (int i = 0; i < n; i++)
            if (i == 0 || strcmp(lines[i], lines[i - 1]) != 0)
                strcat(text, lines[i]);
    }
    for (int i = 0; lines != NULL && i < n; i++)
        free(lines[i]);
    free(lines);
    return text;
}


/* What a multi-vector file's rows are: which side of late interaction they
 * encode, with which marker, and which tokens were left out. */
/* The kind's own string attributes (id2label, multivector_mode, ...),
 * from the options its entry names. */
static int write_kind_attributes(tfenc_context *ctx, tfenc_output *out,
                                 const tfenc_output_options *options)
{
    int status = TFENC_OK;
    for (const tfenc_output_kind_attribute *a = out->kind->attributes;
         status == TFENC_OK && a->name != NULL; a++) {
        const char *value = *(const char *const *)((const char *)options + a->option);
        status = write_string_attribute(ctx, out, a->name, value != NULL ? value : "");
    }
    return status;
}

/* Whether the rows have unit length: what the README's dot-product
 * search assumes, and --status says. */
static int write_unit_norm(tfenc_context *ctx, tfenc_output *out,
                           const tfenc_output_options *options)
{
    int32_t unit = options->unit_norm != 0;
    return write_attribute(ctx, out, "unit_norm", H5T_NATIVE_INT32, &unit);
}

static int write_attributes(tfenc_context *ctx, tfenc_output *out,
                            const tfenc_output_options *options)
{
    /* Rank 0's clock for everyone: attribute values must be identical on
     * every writer. */
    char created[32] = "";
    int rank = 0;
    if (out->writers != MPI_COMM_NULL)
        MPI_Comm_rank(out->writers, &rank);
    if (rank == 0) {
        time_t now = time(NULL);
        struct tm utc;
        gmtime_r(&now, &utc);
        strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &utc);
    }
    if (out->writers != MPI_COMM_NULL
        && MPI_Bcast(created, sizeof created, MPI_CHAR, 0, out->writers) != MPI_SUCCESS)
        return tfenc_error(ctx, TFENC_ERR_MPI, "%s: cannot share the creation time", out->path);
    int status = write_string_attribute(ctx, out, "job", options->job_text);
    if (status == TFENC_OK)
        status = write_string_attribute(ctx, out, "job_settings", options->job_settings);
    if (status == TFENC_OK)
        status = write_string_attribute(ctx, out, "weights_sha256", options->weights_sha256);
    if (status == TFENC_OK)
        status = write_string_attribute(ctx, out, "corpus_fingerprint",
                                        options->corpus_fingerprint);
    if (status == TFENC_OK)
        status = write_string_attribute(ctx, out, "vocabulary_fingerprint",
                                        options->vocabulary_fingerprint);
    if (status == TFENC_OK) {
        char *plugins = plugins_text(options);
        status = plugins == NULL
                     ? tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", out->path)
                     : write_string_attribute(ctx, out, "plugins_sha256", plugins);
        free(plugins);
    }
    if (status == TFENC_OK)
        status = write_string_attribute(ctx, out, "tfenc_version", PACKAGE_VERSION);
    if (status == TFENC_OK)
        status = write_string_attribute(ctx, out, "layout", options->layout);
    if (status == TFENC_OK)
        status = write_run_attributes(ctx, out, options);
    if (status == TFENC_OK)
        status = write_string_attribute(ctx, out, "created", created);
    if (status == TFENC_OK)
        status = write_string_attribute(ctx, out, "output_kind", out->kind->name);
    if (status == TFENC_OK)
        status = write_string_attribute(ctx, out, "chunks",
                                        tfenc_name_of(tfenc_output_chunks_names, 3, out->chunks));
    if (status == TFENC_OK)
        status = write_string_attribute(ctx, out, "dtype", tfenc_output_dtype_name(out->dtype));
    if (status == TFENC_OK)
        status = write_string_attribute(ctx, out, "compression",
                                        options->compression == TFENC_COMPRESSION_GZIP ? "gzip"
                                                                                      : "none");
    if (status == TFENC_OK)
        status = write_int64_attribute(ctx, out, "d_model", out->d_model);
    if (status == TFENC_OK)
        status = write_unit_norm(ctx, out, options);
    if (status == TFENC_OK)
        status = write_int64_attribute(ctx, out, "n_documents", out->n_documents);
    if (status == TFENC_OK && per_token(out->kind))
        status = write_int64_attribute(ctx, out, "n_tokens", out->n_tokens);
    if (status == TFENC_OK)
        status = write_kind_attributes(ctx, out, options);
    if (status == TFENC_OK && out->chunks == TFENC_CHUNKS_EACH)
        status = write_int64_attribute(ctx, out, "n_chunks", out->n_tokens);
    int32_t complete = 0;
    if (status == TFENC_OK)
        status = write_attribute(ctx, out, "complete", H5T_NATIVE_INT32, &complete);
    return status;
}

static int write_elements(tfenc_context *ctx, tfenc_output *out, hid_t dataset, const char *name,
                          int64_t n_runs, const int64_t *run_start, const int64_t *run_length,
                          int64_t width, hid_t memory_type, const void *data);

/* Outputs whose documents own runs of rows, found through an offsets
 * dataset: per-token states, and every chunk's vector. */
static int has_row_runs(const tfenc_output *out)
{
    return per_token(out->kind) || out->chunks == TFENC_CHUNKS_EACH;
}

static const char *rows_name(const tfenc_output *out)
{
    return out->kind->rows_dataset;
}

static const char *offsets_name(const tfenc_output *out)
{
    return per_token(out->kind) ? out->kind->offsets_dataset : "chunk_offsets";
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

static int write_float_array_attribute(tfenc_context *ctx, tfenc_output *out, const char *name,
                                       const float *values, hsize_t count)
{
    hid_t space = H5Screate_simple(1, &count, NULL);
    hid_t attribute = -1;
    herr_t result = -1;
    if (space >= 0) {
        if (H5Aexists(out->file, name) > 0)
            H5Adelete(out->file, name);
        attribute = H5Acreate2(out->file, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT);
    }
    if (attribute >= 0)
        result = H5Awrite(attribute, H5T_NATIVE_FLOAT, values);
    int status = result < 0 ? h5_fail(ctx, TFENC_ERR_IO, out->path,
                                      "cannot write attribute '%s'", name)
                            : TFENC_OK;
    if (attribute >= 0)
        H5Aclose(attribute);
    if (space >= 0)
        H5Sclose(space);
    return status;
}

/* A small whole dataset (rank 1 or 2) that the first writer fills; the
 * others take part in the collective creation and select nothing. A name
 * with slashes makes the groups it passes through. */
static int write_small_dataset(tfenc_context *ctx, tfenc_output *out, const char *name,
                               hid_t file_type, hid_t memory_type, int rank_of_data,
                               const hsize_t *dims, const void *values)
{
    hid_t links = H5Pcreate(H5P_LINK_CREATE);
    hid_t space = links >= 0 && H5Pset_create_intermediate_group(links, 1) >= 0
                      ? H5Screate_simple(rank_of_data, dims, NULL)
                      : -1;
    hid_t dataset = space >= 0 ? H5Dcreate2(out->file, name, file_type, space, links,
                                            H5P_DEFAULT, H5P_DEFAULT)
                               : -1;
    if (links >= 0)
        H5Pclose(links);
    int rank = 0;
    if (out->writers != MPI_COMM_NULL)
        MPI_Comm_rank(out->writers, &rank);
    int ok = dataset >= 0;
    if (ok && rank != 0)
        ok = H5Sselect_none(space) >= 0;
    hid_t memory = ok ? H5Screate_simple(rank_of_data, dims, NULL) : -1;
    if (ok && rank != 0)
        ok = memory >= 0 && H5Sselect_none(memory) >= 0;
    if (ok)
        ok = memory >= 0 && H5Dwrite(dataset, memory_type, memory, space, out->transfer,
                                     values) >= 0;
    int status = ok ? TFENC_OK : h5_fail(ctx, TFENC_ERR_IO, out->path, "cannot write '%s'", name);
    if (memory >= 0)
        H5Sclose(memory);
    if (dataset >= 0)
        H5Dclose(dataset);
    if (space >= 0)
        H5Sclose(space);
    return status;
}

/* int8 / uint8: the ranges as a dataset [2, d] and as attributes, so that
 * a query is quantized the same way (docs/output.md). Collective. */
static int write_ranges(tfenc_context *ctx, tfenc_output *out,
                        const tfenc_output_options *options)
{
    if (out->ranges == NULL)
        return TFENC_OK;
    hsize_t d = (hsize_t)out->d_model, dims[2] = {2, d};
    int status = write_small_dataset(ctx, out, "quantization_ranges", H5T_IEEE_F32LE,
                                     H5T_NATIVE_FLOAT, 2, dims, out->ranges);
    hsize_t n_sample = (hsize_t)options->n_sample;
    if (status == TFENC_OK && options->sample_indices != NULL && n_sample > 0)
        status = write_small_dataset(ctx, out, "quantization_sample", H5T_STD_I64LE,
                                     H5T_NATIVE_INT64, 1, &n_sample, options->sample_indices);
    const char *source = options->ranges_source;
    if (status == TFENC_OK)
        status = write_float_array_attribute(ctx, out, "quantization_min", out->ranges, d);
    if (status == TFENC_OK)
        status = write_float_array_attribute(ctx, out, "quantization_max", out->ranges + d, d);
    if (status == TFENC_OK)
        status = write_string_attribute(ctx, out, "quantization_ranges_source", source);
    return status;
}

/* int8: the job's calibration (output/calibration.h), so that a later job
 * encodes with the same int8 model. Collective: every writer holds the
 * same calibration. */
static int write_calibration(tfenc_context *ctx, tfenc_output *out,
                             const tfenc_int8_calibration *calibration)
{
    /* A model without a product to run in int8 (a static-embedding model's
     * lookup and mean) has no map: nothing to record, and no group made
     * by a map's dataset to put the attributes on. */
    if (calibration == NULL || calibration->n_maps == 0)
        return TFENC_OK;
    int status = TFENC_OK;
    for (int i = 0; status == TFENC_OK && i < calibration->n_maps; i++) {
        char name[1200];
        snprintf(name, sizeof name, TFENC_CALIBRATION_GROUP "%s", calibration->maps[i]);
        hsize_t width = (hsize_t)calibration->widths[i];
        status = write_small_dataset(ctx, out, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 1,
                                     &width, calibration->ranges[i]);
    }
    hid_t group = -1;
    if (status == TFENC_OK &&
        (group = H5Gopen2(out->file, TFENC_CALIBRATION_GROUP, H5P_DEFAULT)) < 0)
        status = h5_fail(ctx, TFENC_ERR_IO, out->path, "cannot open group '%s'",
                         TFENC_CALIBRATION_GROUP);
    const struct { const char *name; const char *value; } texts[] = {
        {"sha256", calibration->sha256}, {"source", calibration->source},
        {"precision_steps", calibration->precision_steps},
        {"weights_sha256", calibration->weights_sha256}};
    for (size_t i = 0; status == TFENC_OK && i < sizeof texts / sizeof texts[0]; i++)
        status = write_string_attribute_of(ctx, out, group, texts[i].name, texts[i].value);
    if (status == TFENC_OK)
        status = write_attribute_of(ctx, out, group, "min_cosine", H5T_NATIVE_DOUBLE,
                                    &calibration->min_cosine);
    if (status == TFENC_OK)
        status = write_attribute_of(ctx, out, group, "sample_min_cosine", H5T_NATIVE_DOUBLE,
                                    &calibration->sample_min_cosine);
    if (status == TFENC_OK)
        status = write_attribute_of(ctx, out, group, "sample_documents", H5T_NATIVE_INT64,
                                    &calibration->sample_documents);
    if (group >= 0)
        H5Gclose(group);
    return status;
}

/* The corpus's files (output/corpus_shards.h), as the first writer found
 * them; the writers make the dataset together, so they agree on the width
 * of its paths first. Collective. */
static int write_corpus_shards(tfenc_context *ctx, tfenc_output *out,
                               const tfenc_corpus_shards *table)
{
    if (table == NULL)
        return TFENC_OK;
    unsigned long long path_size = tfenc_corpus_shards_path_size(table);
    if (out->writers != MPI_COMM_NULL
        && MPI_Allreduce(MPI_IN_PLACE, &path_size, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX,
                         out->writers) != MPI_SUCCESS)
        return tfenc_error(ctx, TFENC_ERR_MPI, "%s: writers could not agree on the width of "
                           "'corpus_shards'", out->path);
    hid_t file_type = tfenc_corpus_shards_type(path_size, 0);
    hid_t memory_type = tfenc_corpus_shards_type(path_size, 1);
    void *rows = tfenc_corpus_shards_pack(table, path_size);
    hsize_t n = (hsize_t)table->n;
    int status = file_type < 0 || memory_type < 0
                     ? h5_fail(ctx, TFENC_ERR_IO, out->path, "cannot make the type of "
                               "'corpus_shards'")
                 : rows == NULL ? tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory",
                                              out->path)
                                : write_small_dataset(ctx, out, "corpus_shards", file_type,
                                                      memory_type, 1, &n, rows);
    free(rows);
    if (file_type >= 0)
        H5Tclose(file_type);
    if (memory_type >= 0)
        H5Tclose(memory_type);
    return status;
}

/* A resumed file keeps the ranges it was begun with: the rows written
 * before and after the resume must share their buckets. */
static int read_ranges(tfenc_context *ctx, tfenc_output *out)
{
    if (out->ranges == NULL)
        return TFENC_OK;
    hid_t dataset = H5Lexists(out->file, "quantization_ranges", H5P_DEFAULT) > 0
                        ? H5Dopen2(out->file, "quantization_ranges", H5P_DEFAULT)
                        : -1;
    hid_t space = dataset >= 0 ? H5Dget_space(dataset) : -1;
    hsize_t dims[2] = {0, 0};
    int ok = space >= 0 && H5Sget_simple_extent_ndims(space) == 2
             && H5Sget_simple_extent_dims(space, dims, NULL) == 2 && dims[0] == 2
             && dims[1] == (hsize_t)out->d_model;
    if (ok)
        ok = H5Dread(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out->ranges) >= 0;
    if (space >= 0)
        H5Sclose(space);
    if (dataset >= 0)
        H5Dclose(dataset);
    H5Eclear2(H5E_DEFAULT);
    if (!ok)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: has no dataset 'quantization_ranges' "
                           "[2, %d]: not a tfenc output of this job; refusing to append to it",
                           out->path, out->d_model);
    tfenc_quantize_steps(out->ranges, out->d_model, out->quantize_starts, out->quantize_steps);
    return TFENC_OK;
}

/* What create and reopen share: checks that the writers agree, refuses
 * gzip with several writers, and fills a new handle (no file yet). */
static int prepare(tfenc_context *ctx, MPI_Comm writers, const tfenc_output_options *options,
                   tfenc_output **out_result)
{
    *out_result = NULL;
    if (options == NULL || options->path == NULL)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "output: no path given");
    const char *path = options->path;
    if (options->kind == NULL || options->width < 1 || options->n_documents < 0
        || (per_token(options->kind) && options->n_rows < 0)
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
    out->n_tokens = per_token(options->kind) || out->chunks == TFENC_CHUNKS_EACH
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
        int status = h5_fail(ctx, TFENC_ERR_IO, path, "cannot make the %s type",
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
    const double rows = has_row_runs(out) ? (double)out->n_tokens : (double)out->n_documents;
    /* sparse rows: their size is known only once they are written */
    const double row_bytes = out->kind->rows_dataset == NULL
                                 ? 0.0
                                 : (double)out->row_width * (double)out->float_size;
    const double per_document = 4 + 4 + (has_row_runs(out) ? 8 : 0) +
                                (out->chunks != TFENC_CHUNKS_OFF ? 4 : 0) +
                                (options->has_ids ? (double)out->id_length : 0);
    /* token_ids: 4 bytes per row of hidden */
    const double id_bytes = per_token(out->kind) && options->has_token_ids ? 4 : 0;
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

/* A document_source element: where a document was read from. */
typedef struct document_source {
    int32_t shard;
    int64_t line;
} document_source;

/* Its HDF5 type: packed little-endian in the file (12 bytes), the C
 * struct's layout in memory. */
static hid_t source_type(int in_memory)
{
    hid_t type = H5Tcreate(H5T_COMPOUND, in_memory ? sizeof(document_source) : 12);
    if (type < 0)
        return -1;
    if (H5Tinsert(type, "shard", in_memory ? HOFFSET(document_source, shard) : 0,
                  in_memory ? H5T_NATIVE_INT32 : H5T_STD_I32LE) < 0
        || H5Tinsert(type, "line", in_memory ? HOFFSET(document_source, line) : 4,
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
    int status = prepare(ctx, writers, options, &out);
    *out_result = NULL;
    if (status != TFENC_OK)
        return status;
    const char *path = options->path;
    if (!out->compress)
        status = check_free_space(ctx, out, options);
    if (status == TFENC_OK)
        status = open_file(ctx, out, writers, out->n_writers, 1);
    int compress = out->compress;
    /* Sparse rows are written at the end, in document order (sparse.h). */
    if (status == TFENC_OK && out->kind->rows_dataset != NULL)
        status = create_dataset(ctx, out, rows_name(out), out->float_type,
                                has_row_runs(out) ? out->n_tokens : out->n_documents,
                                out->row_width, compress, NULL, &out->rows);
    if (status == TFENC_OK && has_row_runs(out))
        status = create_dataset(ctx, out, offsets_name(out), H5T_STD_I64LE,
                                out->n_documents + 1, 0, compress, NULL, &out->offsets);
    if (status == TFENC_OK && out->chunks == TFENC_CHUNKS_EACH)
        status = create_dataset(ctx, out, "chunk_starts", H5T_STD_I32LE, out->n_tokens, 0,
                                compress, NULL, &out->chunk_starts);
    if (status == TFENC_OK && per_token(out->kind) && options->has_token_ids)
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
            status = h5_fail(ctx, TFENC_ERR_IO, path, "cannot make a %zu-byte string type",
                             out->id_length);
        if (status == TFENC_OK)
            status = create_dataset(ctx, out, "ids", out->id_type, out->n_documents, 0, compress,
                                    NULL, &out->ids);
    }
    if (status == TFENC_OK && options->has_document_source) {
        hid_t type = source_type(0);
        status = type < 0 ? h5_fail(ctx, TFENC_ERR_IO, path, "cannot make the type of "
                                    "'document_source'")
                          : create_dataset(ctx, out, "document_source", type, out->n_documents, 0,
                                           compress, NULL, &out->document_source);
        if (type >= 0)
            H5Tclose(type);
    }
    if (status == TFENC_OK && options->n_kept_fields > 0)
        status = tfenc_kept_datasets_create(ctx, out->file, out->path, options->kept_fields,
                                            options->n_kept_fields, out->n_documents, &out->kept);
    if (status == TFENC_OK)
        status = write_attributes(ctx, out, options);
    if (status == TFENC_OK)
        status = write_ranges(ctx, out, options);
    if (status == TFENC_OK)
        status = write_calibration(ctx, out, options->calibration);
    if (status == TFENC_OK)
        status = write_corpus_shards(ctx, out, options->corpus_shards);
    /* offsets[N] = T belongs to no document: the first writer stores it. */
    int rank = 0;
    if (writers != MPI_COMM_NULL)
        MPI_Comm_rank(writers, &rank);
    if (status == TFENC_OK && has_row_runs(out) && rank == 0) {
        int64_t start = out->n_documents, one = 1;
        status = write_elements(ctx, out, out->offsets, offsets_name(out), 1, &start, &one, 0,
                                H5T_NATIVE_INT64, &out->n_tokens);
    }
    /* The file's structure reaches the disk now, so that a killed job
     * leaves a file that opens and says complete = 0. */
    if (status == TFENC_OK && H5Fflush(out->file, H5F_SCOPE_GLOBAL) < 0)
        status = h5_fail(ctx, TFENC_ERR_IO, path, "cannot flush the new file");
    if (status != TFENC_OK) {
        tfenc_output_close(out);
        return status;
    }
    *out_result = out;
    return TFENC_OK;
}

/* ------------------------------------------------------------------ reopen */

/* Compares a string attribute with what this job would write; returns 0 and
 * fills `found` when it differs or is missing. */
/* For multi-line attributes (job_settings): the first line that differs,
 * which says what changed better than the start of the text. */
static void describe_first_difference(const char *stored, const char *wanted, char *found,
                                      size_t found_size)
{
    for (;;) {
        size_t a = strcspn(stored, "\n"), b = strcspn(wanted, "\n");
        if (a != b || memcmp(stored, wanted, a) != 0 || (*stored == '\0') != (*wanted == '\0')) {
            snprintf(found, found_size, "'%.*s' where this job has '%.*s'", (int)(a < 80 ? a : 80),
                     stored, (int)(b < 80 ? b : 80), wanted);
            return;
        }
        if (*stored == '\0')
            return;
        stored += a + (stored[a] == '\n');
        wanted += b + (wanted[b] == '\n');
    }
}

/* 1 when `attribute` holds one value: H5Aread of an array (a hostile or
 * damaged file) would write past the single value these readers give it. */
static int one_value(hid_t attribute, char *found, size_t found_size)
{
    hid_t space = attribute >= 0 ? H5Aget_space(attribute) : -1;
    hssize_t count = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
    if (space >= 0)
        H5Sclose(space);
    if (count != 1 && attribute >= 0)
        snprintf(found, found_size, "an array of %lld values, not one", (long long)count);
    return count == 1;
}

static int same_string_attribute(tfenc_output *out, const char *name, const char *expected,
                                 char *found, size_t found_size)
{
    snprintf(found, found_size, "(missing)");
    hid_t attribute = H5Aexists(out->file, name) > 0 ? H5Aopen(out->file, name, H5P_DEFAULT) : -1;
    hid_t type = H5Tcopy(H5T_C_S1);
    int same = 0;
    char *value = NULL;
    if (attribute >= 0 && type >= 0 && one_value(attribute, found, found_size)
        && H5Tset_size(type, H5T_VARIABLE) >= 0
        && H5Tset_cset(type, H5T_CSET_UTF8) >= 0 && H5Aread(attribute, type, &value) >= 0) {
        const char *wanted = expected != NULL ? expected : "";
        same = value != NULL && strcmp(value, wanted) == 0;
        snprintf(found, found_size, "'%.60s%s'", value != NULL ? value : "",
                 value != NULL && strlen(value) > 60 ? "..." : "");
        if (!same && value != NULL && strchr(value, '\n') != NULL)
            describe_first_difference(value, wanted, found, found_size);
        hid_t space = H5Screate(H5S_SCALAR);
        H5Dvlen_reclaim(type, space, H5P_DEFAULT, &value);
        H5Sclose(space);
    }
    if (type >= 0)
        H5Tclose(type);
    if (attribute >= 0)
        H5Aclose(attribute);
    H5Eclear2(H5E_DEFAULT);
    return same;
}

/* The text of string attribute `name` (free() it), or NULL. */
static char *stored_string_of(hid_t object, const char *name)
{
    hid_t attribute = H5Aexists(object, name) > 0 ? H5Aopen(object, name, H5P_DEFAULT) : -1;
    hid_t type = H5Tcopy(H5T_C_S1);
    char *value = NULL, *copy = NULL;
    if (attribute >= 0 && type >= 0 && H5Tset_size(type, H5T_VARIABLE) >= 0
        && H5Tset_cset(type, H5T_CSET_UTF8) >= 0 && H5Aread(attribute, type, &value) >= 0) {
        copy = value != NULL ? strdup(value) : NULL;
        hid_t space = H5Screate(H5S_SCALAR);
        H5Dvlen_reclaim(type, space, H5P_DEFAULT, &value);
        H5Sclose(space);
    }
    if (type >= 0)
        H5Tclose(type);
    if (attribute >= 0)
        H5Aclose(attribute);
    H5Eclear2(H5E_DEFAULT);
    return copy;
}

static char *stored_string(tfenc_output *out, const char *name)
{
    return stored_string_of(out->file, name);
}

/* The digest the file's int8 calibration says it holds: NULL when the
 * file has no calibration, "" when its digest cannot be read. */
static char *stored_calibration_digest(tfenc_output *out)
{
    if (H5Lexists(out->file, TFENC_CALIBRATION_GROUP, H5P_DEFAULT) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return NULL;
    }
    hid_t group = H5Gopen2(out->file, TFENC_CALIBRATION_GROUP, H5P_DEFAULT);
    char *digest = group >= 0 ? stored_string_of(group, "sha256") : NULL;
    if (group >= 0)
        H5Gclose(group);
    H5Eclear2(H5E_DEFAULT);
    return digest != NULL ? digest : strdup("");
}

/* What a refusal to resume over changed input advises: resume = false
 * alone would overwrite the rows already finished. */
#define KEEP_THE_ROWS "restore it to resume; to run with it as it is now, choose another " \
    "[job] output, which keeps this file and its finished rows, where resume = false would " \
    "overwrite them"

/* The plugins' code, by content: a plugin rebuilt with other arithmetic
 * would mix two builds' rows in one file marked complete. */
static int check_plugins(tfenc_context *ctx, tfenc_output *out, const tfenc_output_options *options)
{
    char *expected = plugins_text(options), found[256];
    if (expected == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", out->path);
    int status = TFENC_OK;
    if (!same_string_attribute(out, "plugins_sha256", expected, found, sizeof found)) {
        char *stored = stored_string(out, "plugins_sha256");
        int changed = -1;
        for (int i = 0; stored != NULL && changed < 0 && i < options->n_plugins; i++) {
            const char *name = strrchr(options->plugin_paths[i], '/');
            name = name != NULL ? name + 1 : options->plugin_paths[i];
            char line[1024];
            snprintf(line, sizeof line, "%s %s\n", name,
                     options->plugin_sha256[i] != NULL ? options->plugin_sha256[i] : "");
            int present = 0;
            for (const char *at = stored; !present && (at = strstr(at, line)) != NULL; at++)
                present = at == stored || at[-1] == '\n';
            if (!present)
                changed = i;
        }
        if (changed >= 0)
            status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                                 "%s: the plugin %s is not the one the run that began this file "
                                 "loaded (its SHA-256 differs from attribute 'plugins_sha256'); "
                                 "refusing to resume with changed code (" KEEP_THE_ROWS ")",
                                 out->path, options->plugin_paths[changed]);
        else
            status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                                 "%s: was written with other plugins: attribute 'plugins_sha256' "
                                 "is %s; refusing to resume with changed code (choose another "
                                 "[job] output, which keeps this file and its finished rows, "
                                 "where resume = false would overwrite them)", out->path, found);
        free(stored);
    }
    free(expected);
    return status;
}

/* The first row of `table` whose file has the name `name`, or -1. */
static int find_shard_name(const tfenc_corpus_shards *table, const char *name)
{
    for (int i = 0; i < table->n; i++)
        if (strcmp(tfenc_corpus_shard_name(table->shards[i].path), name) == 0)
            return i;
    return -1;
}

/* A shard is the same file when its name (the last component of its
 * path), its size and its fingerprint are: the rows depend on its content
 * and on its name (which may say its format), not on the directory it is
 * reached through. */
static int same_shard(const tfenc_corpus_shard *a, const tfenc_corpus_shard *b)
{
    return strcmp(tfenc_corpus_shard_name(a->path), tfenc_corpus_shard_name(b->path)) == 0
           && a->bytes == b->bytes && strcmp(a->fingerprint, b->fingerprint) == 0;
}

/* The file's table of shards: the dataset, or an older file's attribute.
 * TFENC_ERR_NOT_FOUND (no message) when it has neither. */
static int read_corpus_shards(tfenc_context *ctx, tfenc_output *out,
                              tfenc_corpus_shards *table)
{
    int status = tfenc_corpus_shards_read(ctx, out->path, out->file, table);
    if (status != TFENC_ERR_NOT_FOUND)
        return status;
    char *legacy = stored_string(out, "corpus_shards");
    status = legacy != NULL ? tfenc_corpus_shards_parse(ctx, out->path, legacy, table)
                            : TFENC_ERR_NOT_FOUND;
    free(legacy);
    return status;
}

/* A resume over another list of shards would mix two corpora's rows in one
 * file: the shards must be the same files (same_shard) in the same order,
 * wherever they are reached from (another working directory, the job file
 * named another way, a link to a directory). A refusal names the first
 * shard, in corpus order, that was added, removed or changed: with
 * thousands of shards, "the corpus changed" alone leaves the user to find
 * which. A corpus of one file before and after is left to the corpus
 * fingerprint, and so are files written before shards were recorded (no
 * table). *compared: the table was compared, which the corpus fingerprint
 * (over the same names and fingerprints, or in older files over the paths
 * as they were spelled) need not repeat. */
static int check_corpus_shards(tfenc_context *ctx, tfenc_output *out,
                               const tfenc_corpus_shards *wanted, int *compared)
{
    *compared = 0;
    tfenc_corpus_shards stored = {0};
    int status = wanted != NULL ? read_corpus_shards(ctx, out, &stored) : TFENC_ERR_NOT_FOUND;
    if (status != TFENC_OK || stored.n == 0 || (stored.n == 1 && wanted->n == 1)) {
        tfenc_corpus_shards_free(&stored);
        return status == TFENC_ERR_NOT_FOUND ? TFENC_OK : status;
    }
    *compared = 1;
    const int n = stored.n > wanted->n ? stored.n : wanted->n;
    for (int i = 0; status == TFENC_OK && i < n; i++) {
        const tfenc_corpus_shard *was = i < stored.n ? &stored.shards[i] : NULL;
        const tfenc_corpus_shard *is = i < wanted->n ? &wanted->shards[i] : NULL;
        if (was != NULL && is != NULL && same_shard(was, is))
            continue;
        const char *what = "is not where the run that began this file read it (the shards are "
                           "in another order, or one of the same name was added or removed)";
        const tfenc_corpus_shard *named = is != NULL ? is : was;
        if (was != NULL && is != NULL
            && strcmp(tfenc_corpus_shard_name(was->path), tfenc_corpus_shard_name(is->path)) == 0)
            what = "changed since the run that began this file read it";
        else if (was != NULL && find_shard_name(wanted, tfenc_corpus_shard_name(was->path)) < 0)
            what = "was read by the run that began this file and is no longer in the corpus",
            named = was;
        else if (is != NULL && find_shard_name(&stored, tfenc_corpus_shard_name(is->path)) < 0)
            what = "was not in the corpus of the run that began this file";
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: shard %s %s; refusing to resume with "
                             "changed input (" KEEP_THE_ROWS ")", out->path, named->path, what);
    }
    tfenc_corpus_shards_free(&stored);
    return status;
}

static int same_int_attribute(tfenc_output *out, const char *name, int64_t expected,
                              char *found, size_t found_size)
{
    snprintf(found, found_size, "(missing)");
    hid_t attribute = H5Aexists(out->file, name) > 0 ? H5Aopen(out->file, name, H5P_DEFAULT) : -1;
    int64_t value = 0;
    int same = 0;
    if (attribute >= 0 && one_value(attribute, found, found_size)
        && H5Aread(attribute, H5T_NATIVE_INT64, &value) >= 0) {
        same = value == expected;
        snprintf(found, found_size, "%lld", (long long)value);
    }
    if (attribute >= 0)
        H5Aclose(attribute);
    H5Eclear2(H5E_DEFAULT);
    return same;
}

/* Opens dataset `name`, checking its type class and first dimension. */
static int open_existing_dataset(tfenc_context *ctx, tfenc_output *out, const char *name,
                                 int64_t length, hid_t *dataset)
{
    hid_t access = H5Pcreate(H5P_DATASET_ACCESS);
    if (access >= 0 && set_chunk_cache(access, out->compress)
        && H5Lexists(out->file, name, H5P_DEFAULT) > 0)
        *dataset = H5Dopen2(out->file, name, access);
    if (access >= 0)
        H5Pclose(access);
    H5Eclear2(H5E_DEFAULT);
    if (*dataset < 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: has no dataset '%s': not a tfenc output of "
                           "this job; refusing to append to it", out->path, name);
    hid_t space = H5Dget_space(*dataset);
    hsize_t dims[2] = {0, 0};
    int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    if (rank >= 1 && rank <= 2)
        H5Sget_simple_extent_dims(space, dims, NULL);
    if (space >= 0)
        H5Sclose(space);
    if (rank < 1 || rank > 2 || dims[0] != (hsize_t)length)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: dataset '%s' has %llu rows, this job "
                           "needs %lld; refusing to append to it", out->path, name,
                           (unsigned long long)dims[0], (long long)length);
    return TFENC_OK;
}

/* Rows of unit length or not, as this job makes them. A file begun before
 * tfenc recorded it holds the rows that version made: the same, but for
 * chunk means of a normalising model, which it left shorter than unit. */
static int check_unit_norm(tfenc_context *ctx, tfenc_output *out,
                           const tfenc_output_options *options)
{
    char found[256];
    if (same_int_attribute(out, "unit_norm", options->unit_norm != 0, found, sizeof found))
        return TFENC_OK;
    if (strcmp(found, "(missing)") != 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: was written by a different job: "
                           "attribute 'unit_norm' is %s, and this job's rows %s unit length; "
                           "refusing to append to it (remove it, choose another output, or "
                           "set [job] resume = false to overwrite it)", out->path, found,
                           options->unit_norm ? "have" : "do not have");
    if (options->unit_chunk_means)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: was begun by an older tfenc, whose "
                           "chunk means are not scaled back to unit length as this version's "
                           "are; refusing to mix both in one file (finish it with that "
                           "version, or set [job] resume = false to start over)", out->path);
    return TFENC_OK;
}

/* The model that encoded the rows: a resume runs the same precision (a CPU
 * without bf16 runs fp32 instead: rows of two precisions in one file are
 * no one model's) and, at int8, the same calibration (output/calibration.h).
 * A file of a tfenc that recorded neither is let be. */
static int check_model(tfenc_context *ctx, tfenc_output *out, const tfenc_output_options *options)
{
    char found[256];
    if (options->precision != NULL &&
        !same_string_attribute(out, "precision", options->precision, found, sizeof found) &&
        strcmp(found, "(missing)") != 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: was begun at precision %s and this run "
                           "runs precision = %s; refusing to mix the rows of two precisions in "
                           "one file (resume it where that precision runs, or set [job] resume "
                           "= false to start over)", out->path, found, options->precision);
    char *stored = stored_calibration_digest(out);
    const tfenc_int8_calibration *wanted = options->calibration;
    int status = TFENC_OK;
    if (stored != NULL && wanted == NULL)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: was begun at precision = int8 with the "
                             "int8 calibration it records, and this run runs precision = %s; "
                             "refusing to mix the rows of two models in one file (set [job] "
                             "resume = false to start over)", out->path,
                             options->precision != NULL ? options->precision : "(none)");
    else if (stored != NULL && strcmp(stored, wanted->sha256) != 0)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: was begun with another int8 calibration "
                             "(attribute '" TFENC_CALIBRATION_GROUP "/sha256' is '%.12s...', "
                             "this run's is '%.12s...', %s); refusing to continue it with "
                             "another (give [model] calibration the file it was begun with, or "
                             "set [job] resume = false to start over)", out->path,
                             stored[0] != '\0' ? stored : "(missing)", wanted->sha256,
                             wanted->source);
    free(stored);
    return status;
}

/* The file must be this job's, attribute by attribute: the settings that
 * shape the rows, the corpus's files, the inputs' and the plugins'
 * content, the sizes. */
static int check_identity(tfenc_context *ctx, tfenc_output *out,
                          const tfenc_output_options *options)
{
    char found[256];
    int status = TFENC_OK;
    const struct { const char *name; const char *expected; } strings[] = {
        {"job_settings", options->job_settings},
        {"weights_sha256", options->weights_sha256},
        {"output_kind", out->kind->name},
        {"chunks", tfenc_name_of(tfenc_output_chunks_names, 3, out->chunks)},
        {"dtype", tfenc_output_dtype_name(out->dtype)},
        {"compression", out->compress ? "gzip" : "none"}};
    for (size_t i = 0; status == TFENC_OK && i < sizeof strings / sizeof strings[0]; i++)
        if (!same_string_attribute(out, strings[i].name, strings[i].expected, found,
                                   sizeof found))
            status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: was written by a different job: "
                                 "attribute '%s' is %s; refusing to append to it (remove "
                                 "it, choose another output, or set [job] resume = false to "
                                 "overwrite it)", out->path,
                                 strings[i].name, found);
    int shards_compared = 0;
    if (status == TFENC_OK)
        status = check_corpus_shards(ctx, out, options->corpus_shards, &shards_compared);
    /* The inputs, by content: an edited or swapped corpus of the same size
     * would otherwise mix two corpora's rows in one file. */
    const struct { const char *name, *what, *path, *expected; int wanted; } inputs[] = {
        {"corpus_fingerprint", "the corpus", options->corpus_path, options->corpus_fingerprint,
         !shards_compared},
        {"vocabulary_fingerprint", "the vocabulary", options->vocabulary_path,
         options->vocabulary_fingerprint, 1}};
    for (size_t i = 0; status == TFENC_OK && i < sizeof inputs / sizeof inputs[0]; i++)
        if (inputs[i].wanted
            && !same_string_attribute(out, inputs[i].name, inputs[i].expected, found,
                                      sizeof found))
            status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                                 "%s: %s %s is not the one the run that began this file read "
                                 "(attribute '%s' is %s); refusing to resume with changed "
                                 "input (" KEEP_THE_ROWS ")",
                                 out->path, inputs[i].what,
                                 inputs[i].path != NULL ? inputs[i].path : "(none)",
                                 inputs[i].name, found);
    if (status == TFENC_OK)
        status = check_plugins(ctx, out, options);
    if (status == TFENC_OK)
        status = check_unit_norm(ctx, out, options);
    if (status == TFENC_OK)
        status = check_model(ctx, out, options);
    const struct { const char *name; int64_t expected; int wanted; } numbers[] = {
        {"d_model", out->d_model, 1},
        {"n_documents", out->n_documents, 1},
        {"n_tokens", out->n_tokens, per_token(out->kind)},
        {"n_chunks", out->n_tokens, out->chunks == TFENC_CHUNKS_EACH}};
    for (size_t i = 0; status == TFENC_OK && i < sizeof numbers / sizeof numbers[0]; i++)
        if (numbers[i].wanted
            && !same_int_attribute(out, numbers[i].name, numbers[i].expected, found, sizeof found))
            status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: attribute '%s' is %s but this job "
                                 "has %lld (has the corpus changed?); refusing to append to it",
                                 out->path, numbers[i].name, found,
                                 (long long)numbers[i].expected);
    return status;
}

/* The datasets this job writes into, each of the size the job expects. */
static int open_existing_datasets(tfenc_context *ctx, tfenc_output *out,
                                  const tfenc_output_options *options)
{
    int status = out->kind->rows_dataset == NULL
                     ? TFENC_OK
                     : open_existing_dataset(ctx, out, rows_name(out),
                                             has_row_runs(out) ? out->n_tokens
                                                               : out->n_documents,
                                             &out->rows);
    if (status == TFENC_OK && has_row_runs(out))
        status = open_existing_dataset(ctx, out, offsets_name(out), out->n_documents + 1,
                                       &out->offsets);
    if (status == TFENC_OK && out->chunks == TFENC_CHUNKS_EACH)
        status = open_existing_dataset(ctx, out, "chunk_starts", out->n_tokens,
                                       &out->chunk_starts);
    if (status == TFENC_OK && per_token(out->kind) && options->has_token_ids)
        status = open_existing_dataset(ctx, out, "token_ids", out->n_tokens, &out->token_ids);
    if (status == TFENC_OK && out->chunks != TFENC_CHUNKS_OFF)
        status = open_existing_dataset(ctx, out, "chunks", out->n_documents, &out->chunk_counts);
    if (status == TFENC_OK)
        status = read_ranges(ctx, out);
    if (status == TFENC_OK)
        status = open_existing_dataset(ctx, out, "lengths", out->n_documents, &out->lengths);
    if (status == TFENC_OK)
        status = open_existing_dataset(ctx, out, "truncated", out->n_documents, &out->truncated);
    if (status == TFENC_OK && options->has_ids) {
        status = open_existing_dataset(ctx, out, "ids", out->n_documents, &out->ids);
        if (status == TFENC_OK) {
            out->id_type = H5Dget_type(out->ids);
            size_t stored = out->id_type >= 0 ? H5Tget_size(out->id_type) : 0;
            if (stored < out->id_length)
                status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: stores ids of up to %zu bytes, "
                                     "this corpus has one of %zu (has it changed?); refusing to "
                                     "append to it", out->path, stored, out->id_length);
            out->id_length = stored;
        }
    }
    if (status == TFENC_OK && options->has_document_source)
        status = open_existing_dataset(ctx, out, "document_source", out->n_documents,
                                       &out->document_source);
    if (status == TFENC_OK && options->n_kept_fields > 0)
        status = tfenc_kept_datasets_open(ctx, out->file, out->path, options->kept_fields,
                                          options->n_kept_fields, out->n_documents, &out->kept);
    if (status == TFENC_OK && !options->has_ids && H5Lexists(out->file, "ids", H5P_DEFAULT) > 0)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: has ids but this job has none; refusing "
                             "to append to it", out->path);
    H5Eclear2(H5E_DEFAULT);
    return status;
}

/* Incomplete again until this run finishes; the layout, the job text and
 * the run's attributes are this run's. *was_complete: the file said 1. */
static int mark_reopened(tfenc_context *ctx, tfenc_output *out,
                         const tfenc_output_options *options, int *was_complete)
{
    char found[256];
    same_int_attribute(out, "complete", 1, found, sizeof found);
    *was_complete = strcmp(found, "1") == 0;
    int32_t zero = 0;
    int status = write_attribute(ctx, out, "complete", H5T_NATIVE_INT32, &zero);
    if (status == TFENC_OK)
        status = write_string_attribute(ctx, out, "layout", options->layout);
    if (status == TFENC_OK)
        status = write_string_attribute(ctx, out, "job", options->job_text);
    if (status == TFENC_OK)
        status = write_run_attributes(ctx, out, options);
    /* A file of an older tfenc that passed check_unit_norm gets it. */
    if (status == TFENC_OK)
        status = write_unit_norm(ctx, out, options);
    if (status == TFENC_OK && H5Fflush(out->file, H5F_SCOPE_GLOBAL) < 0)
        status = h5_fail(ctx, TFENC_ERR_IO, out->path, "cannot flush the reopened file");
    return status;
}

int tfenc_output_reopen(tfenc_context *ctx, MPI_Comm writers, const tfenc_output_options *options,
                        tfenc_output **out_result, int *was_complete)
{
    tfenc_output *out = NULL;
    *was_complete = 0;
    int status = prepare(ctx, writers, options, &out);
    *out_result = NULL;
    if (status != TFENC_OK)
        return status;
    /* Absent on every rank alike (the path is on a shared file system).
     * An empty file is no output either: the job's lock makes the file
     * before HDF5 creates it (core/output/ownership.h). */
    struct stat existing;
    if (stat(out->path, &existing) != 0 || existing.st_size == 0) {
        tfenc_output_close(out);
        return TFENC_ERR_NOT_FOUND;
    }
    /* HDF5 compresses whole chunks in memory: a killed job's compressed
     * file cannot say which rows reached the disk. */
    if (out->compress) {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                             "%s exists and compressed output cannot be resumed: remove it, or "
                             "set [job] resume = false to overwrite it (for long jobs write "
                             "compression = none and h5repack afterwards)",
                             out->path);
        tfenc_output_close(out);
        return status;
    }
    int complete = 0;
    status = open_file(ctx, out, writers, out->n_writers, 0);
    if (status == TFENC_OK)
        status = check_identity(ctx, out, options);
    if (status == TFENC_OK)
        status = open_existing_datasets(ctx, out, options);
    if (status == TFENC_OK)
        status = mark_reopened(ctx, out, options, &complete);
    if (status != TFENC_OK) {
        tfenc_output_close(out);
        return status;
    }
    *was_complete = complete;
    *out_result = out;
    return TFENC_OK;
}

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
                    : h5_fail(ctx, TFENC_ERR_IO, out->path, "cannot read 'lengths'");
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
static int write_elements(tfenc_context *ctx, tfenc_output *out, hid_t dataset, const char *name,
                          int64_t n_runs, const int64_t *run_start, const int64_t *run_length,
                          int64_t width, hid_t memory_type, const void *data)
{
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
                    : h5_fail(ctx, TFENC_ERR_IO, out->path, "cannot write %lld rows of '%s'",
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
    if (per_token(out->kind) || out->chunks == TFENC_CHUNKS_EACH)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: one row per document written to an "
                           "output of %s", out->path,
                           per_token(out->kind) ? "tokens" : "chunks");
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
        status = write_elements(ctx, out, out->rows, rows_name(out), runs, start, length,
                                out->row_width, out->float_type, out->staging);
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
    if (per_token(out->kind)) {
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
            status = tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: document %lld: rows %lld..%lld "
                                 "do not fit in '%s' of %lld rows", out->path,
                                 (long long)global_indices[j], (long long)token_offsets[j],
                                 (long long)token_offsets[j] + n_tokens[j], rows_name(out),
                                 (long long)out->n_tokens);
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
        status = write_elements(ctx, out, out->rows, rows_name(out), runs, start, length,
                                out->row_width, out->float_type, out->staging);
        if (status == TFENC_OK && starts_sorted != NULL)
            status = write_elements(ctx, out, row_ints_dataset, row_ints_name, runs, start,
                                    length, 0, H5T_NATIVE_INT32, starts_sorted);
    }
    free(starts_sorted);
    if (status == TFENC_OK) {
        for (int64_t i = 0; i < n_documents; i++) {
            start[i] = sorted[i].key;
            length[i] = 1;
        }
        int64_t runs = coalesce(n_documents, start, length);
        status = write_elements(ctx, out, out->offsets, offsets_name(out), runs, start, length, 0,
                                H5T_NATIVE_INT64, offset_value);
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
    if (!per_token(out->kind))
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
    if (!per_token(out->kind))
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
        status = write_elements(ctx, out, out->chunk_counts, "chunks", runs, start, length, 0,
                                H5T_NATIVE_INT32, values);
    }
    free(values);
    free(start);
    free(length);
    free(sorted);
    return status;
}

int tfenc_output_write_metadata(tfenc_context *ctx, tfenc_output *out, int64_t n_documents,
                                const int64_t *global_indices, const int32_t *lengths,
                                const int32_t *truncated, const char *const *ids,
                                const int32_t *sources, const int64_t *source_lines)
{
    if (n_documents <= 0)
        return TFENC_OK;
    if ((out->ids >= 0 || out->kept != NULL) && ids == NULL)
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
    /* With kept fields each document carries its id and their values: the
     * values are written here, before the lengths, and the ids found. */
    const char **carried_ids = NULL;
    if (status == TFENC_OK && out->kept != NULL) {
        carried_ids = calloc(n, sizeof *carried_ids);
        status = carried_ids == NULL
                     ? tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", out->path)
                     : tfenc_kept_datasets_write(ctx, out->kept, out->transfer, n_documents,
                                                 global_indices, ids, carried_ids);
        ids = carried_ids;
    }
    document_source *where = NULL;
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
            where[i] = (document_source){.shard = sources[j], .line = source_lines[j]};
        if (id_text != NULL) {
            const char *id = ids[j] != NULL ? ids[j] : "";
            size_t id_length = strlen(id);
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
        status = write_elements(ctx, out, out->truncated, "truncated", runs, start, length, 0,
                                H5T_NATIVE_INT32, values + n);
    if (status == TFENC_OK && id_text != NULL)
        status = write_elements(ctx, out, out->ids, "ids", runs, start, length, 0, out->id_type,
                                id_text);
    if (status == TFENC_OK && where != NULL) {
        hid_t type = source_type(1);
        status = type < 0 ? h5_fail(ctx, TFENC_ERR_IO, out->path, "cannot make the type of "
                                    "'document_source'")
                          : write_elements(ctx, out, out->document_source, "document_source",
                                           runs, start, length, 0, type, where);
        if (type >= 0)
            H5Tclose(type);
    }
    if (status == TFENC_OK)
        status = write_elements(ctx, out, out->lengths, "lengths", runs, start, length, 0,
                                H5T_NATIVE_INT32, values);
    free(id_text);
    free(carried_ids);
    free(where);
    free(values);
    free(start);
    free(length);
    free(sorted);
    return status;
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
    failed |= tfenc_kept_datasets_close(out->kept);
    out->kept = NULL;
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
    status = text != NULL ? write_string_attribute(ctx, out, "run_summaries", text)
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
        status = h5_fail(ctx, TFENC_ERR_IO, out->path, "cannot flush the rows");
    int32_t complete = 1;
    if (status == TFENC_OK)
        status = write_attribute(ctx, out, "complete", H5T_NATIVE_INT32, &complete);
    if (close_handles(out) && status == TFENC_OK)
        status = h5_fail(ctx, TFENC_ERR_IO, out->path, "cannot close the file");
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
