/* What the files of the output writer share (output_handle.c at the
 * bottom; output_layout.c, output_attributes.c, output_rows.c above it;
 * output.c and output_resume.c on top): the handle's
 * members and the helpers each of them calls in another. Not for callers
 * outside core/output/output*.c, which use output/output.h. */
#ifndef TFENC_OUTPUT_INTERNAL_H
#define TFENC_OUTPUT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <hdf5.h>
#include <mpi.h>

#include "base/context.h"
#include "output/output_options.h"

/* output/output.h's handle, declared again (C11 allows the same typedef
 * twice) so that this header sits below output.h. */
typedef struct tfenc_output tfenc_output;

/* About 1 MiB per chunk: large enough for efficient I/O and compression,
 * small enough that reading one document's row stays cheap. */
#define CHUNK_BYTES ((size_t)1 << 20)
/* Chunk cache for the single-writer gzip case, where rows arrive out of
 * order: 64 chunks in memory before one is compressed and evicted. */
#define CHUNK_CACHE_BYTES ((size_t)64 << 20)
#define CHUNK_CACHE_SLOTS 12421 /* a prime about 100 times the chunks cached, as HDF5 advises */


/* A kept field's two datasets (output.h): NAME, its values, and
 * NAME_valid, its mask. */
typedef struct tfenc_output_kept {
    char *name;
    char *mask;           /* NAME_valid */
    tfenc_kept_type type; /* STRING, INTEGER or FLOAT */
    size_t width;         /* strings: bytes per value in the file, at least 1 */
    hid_t file_type;      /* the values' type in the file (strings: of `width` bytes) */
    hid_t values, valid;
} tfenc_output_kept;

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
    tfenc_output_kept kept[TFENC_MAX_KEEP_FIELDS]; /* [n_kept] [job] keep_fields */
    int n_kept;
    hid_t id_type;
    size_t id_length;      /* bytes per id in the file */
    int compress;          /* gzip + shuffle */
    int n_writers;
    /* Staging for sorted, converted rows; grows, reused across writes. */
    void *staging;
    size_t staging_bytes;
    int reopened;          /* opened by tfenc_output_reopen */
    /* A further head's output (output_heads.c): `file` is its group
     * /outputs/NAME, where its datasets and attributes go; the transfer
     * properties are its file's, which closes it. 0 for the file itself. */
    int borrowed;
    struct tfenc_output **heads; /* the file's further heads' outputs, closed first */
    int n_heads;
};

/* A document_source element: where a document was read from (its file's
 * index in corpus_shards and its line there). */
typedef struct tfenc_output_source {
    int32_t shard;
    int64_t line;
} tfenc_output_source;

/* ----------------------------------------------------- output_handle.c */

/* document_source's HDF5 type: packed little-endian in the file (12
 * bytes), tfenc_output_source's layout in memory (in_memory = 1). */
hid_t tfenc_output_source_type(int in_memory);

/* "PATH: what: HDF5's innermost message" as the context's error, HDF5's
 * stack cleared. */
int tfenc_output_hdf5_fail(tfenc_context *ctx, int status, const char *path, const char *format,
                           ...) TFENC_PRINTF(4, 5);
/* A fixed-length, NUL-padded UTF-8 string type of `length` bytes (ids,
 * kept strings); -1 on failure. */
hid_t tfenc_output_string_type(size_t length);
/* Kinds whose documents own runs of rows, one per (kept) token. */
int tfenc_output_per_token(const tfenc_output_kind_entry *kind);
/* Outputs whose documents own runs of rows, found through an offsets
 * dataset: per-token states, and every chunk's vector. */
int tfenc_output_has_row_runs(const tfenc_output *out);
const char *tfenc_output_rows_name(const tfenc_output *out);
const char *tfenc_output_offsets_name(const tfenc_output *out);
/* The row runs' dataset of a kind without offsets of its own (chunks =
 * each): output_description.c's name for it. */
#define TFENC_CHUNK_OFFSETS_DATASET "chunk_offsets"
/* The chunk cache of a dataset's access properties; nonzero on success. */
int tfenc_output_set_chunk_cache(hid_t access, int compress);
/* What create and reopen share: the writers agree, gzip only with one,
 * a new handle filled in (no file yet). */
int tfenc_output_prepare(tfenc_context *ctx, MPI_Comm writers, const tfenc_output_options *options,
                         tfenc_output **out_result);
/* Creates (create = 1) or opens read-write the handle's file. */
int tfenc_output_open_file(tfenc_context *ctx, tfenc_output *out, MPI_Comm writers, int n_writers,
                           int create);
/* Closes every handle of `out`: nonzero if HDF5 reported a failure. */
int tfenc_output_close_handles(tfenc_output *out);
/* A dataset [length, width] (rank 1 for width 0) of out->file (a head's:
 * its group), chunked as every dataset of the file is. */
int tfenc_output_create_dataset(tfenc_context *ctx, tfenc_output *out, const char *name,
                                hid_t type, int64_t length, int64_t width, int compress,
                                const void *fill, hid_t *dataset);
/* Frees `out` (its handles closed). */
void tfenc_output_free(tfenc_output *out);

/* ------------------------------------------------- output_attributes.c */

/* One-value root attributes (base/hdf5_attributes.h), "PATH: cannot
 * write attribute 'NAME'" on failure; NULL strings store "". */
int tfenc_output_write_attribute(tfenc_context *ctx, tfenc_output *out, const char *name,
                                 hid_t type, const void *value);
int tfenc_output_write_string(tfenc_context *ctx, tfenc_output *out, const char *name,
                              const char *value);
/* How this run was started: rewritten by every run (create and resume). */
int tfenc_output_write_run_attributes(tfenc_context *ctx, tfenc_output *out,
                                      const tfenc_output_options *options);
int tfenc_output_write_unit_norm(tfenc_context *ctx, tfenc_output *out,
                                 const tfenc_output_options *options);
/* Every root attribute of a new file (output.h), complete = 0 last. */
int tfenc_output_write_attributes(tfenc_context *ctx, tfenc_output *out,
                                  const tfenc_output_options *options);
/* The plugins_sha256 text: one "NAME SHA256" line per plugin file, sorted,
 * each once. NULL when out of memory. */
char *tfenc_output_plugins_text(const tfenc_output_options *options);
/* The small whole datasets of a new file, collectively. */
int tfenc_output_write_ranges(tfenc_context *ctx, tfenc_output *out,
                              const tfenc_output_options *options);
int tfenc_output_write_calibration(tfenc_context *ctx, tfenc_output *out,
                                   const tfenc_int8_calibration *calibration);
int tfenc_output_write_corpus_shards(tfenc_context *ctx, tfenc_output *out,
                                     const tfenc_corpus_shards *table);

/* ------------------------------------------------------- output_rows.c */

/* Writes sorted, disjoint runs of rows (`width` elements each, single
 * elements for width 0) of `dataset` from `data`. */
int tfenc_output_write_elements(tfenc_context *ctx, tfenc_output *out, hid_t dataset,
                                const char *name, int64_t n_runs, const int64_t *run_start,
                                const int64_t *run_length, int64_t width, hid_t memory_type,
                                const void *data);

#endif
