/* The HDF5 output file: one file that every writing rank fills at its
 * documents' global indices (parallel HDF5, independent I/O), so that its
 * content does not depend on the number of ranks or the layout.
 *
 * Layout (N documents, d = d_model, T = tokens of all documents):
 *   embeddings [N, d]            pooled kind: one row per document
 *   scores     [N, k]            scores kind: a head's k values per document
 *                                (d_model holds k), `id2label` attribute
 *   sparse_indptr, sparse_indices, sparse_values, vocabulary
 *                                sparse kind: CSR rows over the vocabulary,
 *                                written when the job completes (sparse.h)
 *   hidden     [T, d]            tokens kind: rows offsets[i] .. offsets[i+1]-1
 *   vectors    [T, d]            vectors kind: the same with the multi-vector rows
 *                                (projected, unit length, skiplist tokens left out)
 *   offsets    [N+1] int64       tokens and vectors kinds: offsets[0] = 0, offsets[N] = T
 *   lengths    [N]   int32       tokens encoded per document, special tokens
 *                                included; -1 (the fill value) until the
 *                                document's metadata is written
 *   truncated  [N]   int32       word pieces cut from the document
 *   token_ids  [T]   int32       tokens kind with has_token_ids ([job] output_ids):
 *                                the vocabulary id of each row of hidden, special
 *                                tokens included, under the same offsets
 *   ids        [N]   string      only when the corpus has ids: fixed-length,
 *                                NUL-padded UTF-8, as long as the longest id
 *                                (variable-length strings cannot be written in
 *                                parallel HDF5; h5py returns them as bytes)
 *   NAME       [N]   string, int64 or float64
 *   NAME_valid [N]   uint8       with [job] keep_fields, for each field NAME:
 *                                its values (strings as ids are) and 1 where the
 *                                record had one, 0 where it was null or absent
 *                                (NAME then holds "", 0 or NaN); the root
 *                                attribute keep_fields names them, one a line
 *   document_source [N] {shard int32, line int64}
 *                                with has_document_source (a corpus of several
 *                                files, or one that leaves records out): the
 *                                file each row was read from (its index in
 *                                corpus_shards) and its 1-based line there
 *                                (Parquet: its 0-based row)
 *   corpus_shards [n] {path, bytes, fingerprint, first_document, documents, skipped}
 *                                the corpus's files (output/corpus_shards.h)
 * float datasets are float32, float16 (IEEE half, numpy.float16 in h5py) or
 * bfloat16 (docs/weights.md's layout), chunked about 1 MiB per chunk.
 * Pooled rows may instead be compact (output/quantize.h): embeddings int8 or
 * uint8 [N, d], or packed signs [N, d/8]; int8 and uint8 add
 *   quantization_ranges [2, d] float32  row 0 the minimum, row 1 the maximum
 *                                        of each dimension (quantize_embeddings'
 *                                        `ranges`), also the attributes
 *                                        quantization_min and quantization_max,
 * the attribute quantization_ranges_source saying where they came from, and
 * for ranges calibrated on the corpus
 *   quantization_sample [S] int64       the sample's global document indices.
 * An int8 job records its calibration in the group int8_calibration
 * (output/calibration.h).
 * Root attributes (strings are variable-length UTF-8): job, job_settings, weights_sha256,
 * corpus_fingerprint, vocabulary_fingerprint ("" without a vocabulary file),
 * plugins_sha256,
 * tfenc_version, layout, created (ISO-8601 UTC), output_kind, dtype,
 * compression, d_model, n_documents, n_tokens (tokens kind), job_path,
 * working_directory, job_overrides, precision, kernels (what ran the products:
 * libraries, versions, kernel families), path_choices (the ways of computing
 * auto chose: "section.key=value" lines, run/path_choice.h), precision_sample_min_cosine
 * (float64), precision_steps, and complete:
 * 0 while the job runs, 1 once tfenc_output_finish() has flushed everything.
 *
 * Parallelism: create and finish are collective over `writers`; the write
 * functions are independent, so ranks with more work never hold up the
 * others. With one writer (or MPI_COMM_NULL, which needs no MPI at all) the
 * file is written with HDF5's sec2 driver instead of MPI-IO.
 *
 * Compression: gzip level 4 with shuffle is offered with ONE writer only.
 * Parallel HDF5 1.10 writes compressed datasets only with collective calls,
 * which would make every writer wait for the slowest at each write;
 * tfenc_output_create() refuses gzip with several writers, saying so
 * (compress afterwards with h5repack). */
#ifndef TFENC_OUTPUT_H
#define TFENC_OUTPUT_H

#include <stddef.h>
#include <stdint.h>
#include <mpi.h>
#include "tfenc/plugin.h"
#include "output/calibration.h"
#include "output/corpus_shards.h"
#include "output/output_kind.h"
#include "output/output_options.h"
#include "output/output_types.h"

typedef struct tfenc_output tfenc_output;

/* The names of each enum's values, indexed by value, NULL-terminated: the
 * job file's output_dtype / compression choices (output_kind's are the
 * kinds' table's, output/kinds.h). */
extern const char *const tfenc_output_dtype_names[];
extern const char *const tfenc_output_compression_names[];
extern const char *const tfenc_output_chunks_names[];

/* Name -> value through those tables: TFENC_ERR_NOT_FOUND for an unknown
 * name. */
int tfenc_output_dtype_from_name(const char *name, tfenc_output_dtype *dtype);
int tfenc_output_compression_from_name(const char *name, tfenc_output_compression *compression);
const char *tfenc_output_dtype_name(tfenc_output_dtype dtype);

/* Creates (truncating any existing file) the file and every dataset, writes
 * the attributes with complete = 0 and flushes, so that a job killed later
 * leaves a readable, visibly incomplete file. Collective over `writers`
 * (MPI_COMM_NULL: this process alone, without MPI). */
int tfenc_output_create(tfenc_context *ctx, MPI_Comm writers, const tfenc_output_options *options,
                        tfenc_output **out);

/* Resuming. Reopens the file a killed run of the same job left, so that
 * only the documents it did not finish are encoded again. Collective.
 * Returns TFENC_ERR_NOT_FOUND, recording no message, when there is no file
 * at options->path (then call tfenc_output_create). Returns
 * TFENC_ERR_CONFIG naming the first attribute or dataset that differs when
 * the file holds another job's output (job settings, weights checksum, kind,
 * dtype, compression, d_model, documents, tokens, ids): such a file is never
 * appended to. On success *was_complete says whether that run had finished;
 * the file is marked complete = 0 (and gets this run's job text and layout) until
 * tfenc_output_finish(). A compressed output (gzip) is never reopened:
 * TFENC_ERR_CONFIG, since HDF5 compresses whole chunks in memory and a
 * killed run's file cannot say which rows reached the disk. */
int tfenc_output_reopen(tfenc_context *ctx, MPI_Comm writers, const tfenc_output_options *options,
                        tfenc_output **out, int *was_complete);

/* written[i] = 1 if document first + i is finished (its length was stored,
 * which write_metadata does after the rows), else 0. Independent: each
 * rank asks about its own share. */
int tfenc_output_written(tfenc_context *ctx, tfenc_output *out, int64_t first, int64_t count,
                         uint8_t *written);

/* Pooled kind: rows[j] (d floats) goes to embeddings[global_indices[j]].
 * Indices may come in any order but not twice in one call. */
int tfenc_output_write_pooled(tfenc_context *ctx, tfenc_output *out, int64_t n_rows,
                              const int64_t *global_indices, const float *rows);

/* Tokens kind: document j (global index global_indices[j]) has n_tokens[j]
 * rows, stored one document after another in `rows`; they go to hidden
 * rows token_offsets[j] ..., and offsets[global_indices[j]] =
 * token_offsets[j]. token_offsets MUST be the exclusive running sum of the
 * lengths in global document order (the driver gets it with an MPI_Exscan),
 * so that offsets is consistent across writers. */
int tfenc_output_write_tokens(tfenc_context *ctx, tfenc_output *out, int64_t n_documents,
                              const int64_t *global_indices, const int64_t *token_offsets,
                              const int32_t *n_tokens, const float *rows);
/* The same, with each row's token id (laid out as the rows), which go to
 * token_ids when the file has it and are ignored otherwise. */
int tfenc_output_write_tokens_with_ids(tfenc_context *ctx, tfenc_output *out,
                                       int64_t n_documents, const int64_t *global_indices,
                                       const int64_t *token_offsets, const int32_t *n_tokens,
                                       const int32_t *token_ids, const float *rows);

/* TFENC_CHUNKS_EACH: document j's n_chunks[j] chunk vectors, packed one
 * document after another in `rows` (with their chunk_starts), go to rows
 * chunk_offsets[j] ... of embeddings, and chunk_offsets[global_indices[j]]
 * is set; chunk offsets MUST grow with the document index (a running sum
 * of the chunk counts in document order), as token offsets do. */
int tfenc_output_write_chunks(tfenc_context *ctx, tfenc_output *out, int64_t n_documents,
                              const int64_t *global_indices, const int64_t *chunk_offsets,
                              const int32_t *n_chunks, const int32_t *chunk_starts,
                              const float *rows);

/* Chunked outputs: how many chunks each document had. Write it before the
 * document's metadata (whose lengths mark it finished). */
int tfenc_output_write_chunk_counts(tfenc_context *ctx, tfenc_output *out, int64_t n_documents,
                                    const int64_t *global_indices, const int32_t *n_chunks);

/* Per-document metadata at the documents' global indices: lengths and
 * truncated (required), ids (NULL-terminated strings; required when the file
 * has ids, else ignored), sources and source_lines (the file and line each
 * was read from; required when the file has document_source, else
 * ignored). Write it after the document's rows: a length of -1 then means
 * "not written yet" in a file left by a killed job. */
int tfenc_output_write_metadata(tfenc_context *ctx, tfenc_output *out, int64_t n_documents,
                                const int64_t *global_indices, const int32_t *lengths,
                                const int32_t *truncated, const char *const *ids,
                                const int32_t *sources, const int64_t *source_lines);

/* Appends one run's summary (`entry`, a JSON object as text) to the
 * attribute run_summaries, a JSON array with one object per run that
 * reached its end (finished, or stopped on request), oldest first
 * (docs/output.md). A JSON text rather than a dataset: h5py reads it with
 * json.loads and pandas with DataFrame(...), and a run adds to it without
 * resizing anything. Collective: every writer passes the same `entry`. An
 * attribute that is not a JSON array (a file damaged by hand) is replaced. */
int tfenc_output_add_run_summary(tfenc_context *ctx, tfenc_output *out, const char *entry);

/* Flushes everything, sets complete = 1 and closes; frees `out` whatever
 * happens. Collective. */
int tfenc_output_finish(tfenc_context *ctx, tfenc_output *out);

/* Closes without marking the file complete, for error paths; frees `out`.
 * Collective in parallel like every HDF5 file close: a driver that is about
 * to MPI_Abort should skip it. NULL is allowed. Non-zero when HDF5 failed
 * to close the file (a full disk), which can leave it unable to shut down
 * (tfenc_run_result's skip_finalize). */
int tfenc_output_close(tfenc_output *out);

/* A further head's output in the same file (a job of several heads,
 * docs/output.md): its rows in the group /outputs/NAME, with the
 * attributes output_kind, dtype, d_model, unit_norm and its kind's own
 * (id2label) on the group; the documents' metadata (lengths, ids, ...)
 * stays the file's, which the first head's rows share. options gives the
 * kind (one row per document: float32, or a sparse row), width, unit_norm
 * and the kind's attribute values; the rest is the file's. A reopened file
 * must hold the group as this head makes it (TFENC_ERR_CONFIG otherwise).
 * The handle belongs to `file`, whose finish or close closes it; write its
 * rows with tfenc_output_write_pooled, or a sparse head's CSR with
 * output/sparse.h's finish (tfenc_output_hdf5_file gives its group).
 * Collective, as create. */
int tfenc_output_open_head(tfenc_context *ctx, tfenc_output *file, const char *name,
                           const tfenc_output_options *options, tfenc_output **head);

/* A job of several heads: the root attribute `head` names the first,
 * whose rows are the root's (written once, when the file is created). */
int tfenc_output_name_first_head(tfenc_context *ctx, tfenc_output *file, const char *name);

/* For output/sparse.c, which adds its datasets at the end: the open file
 * (a further head's: its group) and the dataset transfer properties (hid_t
 * values, so that this header needs no hdf5.h), and the writers'
 * communicator when the file is written in parallel, else MPI_COMM_NULL. */
int64_t tfenc_output_hdf5_file(const tfenc_output *out);
int64_t tfenc_output_hdf5_transfer(const tfenc_output *out);
MPI_Comm tfenc_output_writers(const tfenc_output *out);

/* The path the file was created at. */
const char *tfenc_output_path(const tfenc_output *out);
/* Its documents (n_documents). */
int64_t tfenc_output_documents(const tfenc_output *out);

#endif
