/* The last pipeline stage's output side: writes each finished microbatch's
 * rows at once, and its documents' metadata (lengths, truncated, ids) later,
 * in groups, after the rows have reached the disk.
 *
 * That order is what makes resuming safe: a document counts as finished
 * when its length is in the file (tfenc_output_written), so its length must
 * never land before its rows. Rows go to the file with pwrite through HDF5
 * (the datasets are allocated at creation and HDF5 caches no raw data for
 * them), so they survive the process being killed; fdatasync() before each
 * metadata group makes them survive a node crash too. */
#ifndef TFENC_WRITER_H
#define TFENC_WRITER_H

#include "output/multivector.h"
#include "output/output.h"
#include "output/output_kind.h"
#include "ranks/pipeline.h"

typedef struct tfenc_writer tfenc_writer;

/* kind: what the rows are, whose writer hook writes each microbatch
 * (output/kinds.h); width: the values of each row it keeps (a head's
 * scores or vectors: its width; else the row width). output_dim > 0
 * (pooled only): each row is cut to its first output_dim
 * values and scaled back to unit length, as a Matryoshka model's vectors
 * are used at a smaller width. chunks (pooled only): a long document's
 * chunks are sequences of their own (pipeline.h); with MEAN the writer
 * writes the mean of a document's chunk vectors once all have come, with
 * EACH every chunk's vector (output.h). d_model is the model's width.
 * n_writers (the job's writing ranks) stretches the group interval past a
 * second when the job has more than 1,000, so that a job never asks the file
 * system for more than about 1,000 syncs a second. */
int tfenc_writer_create(tfenc_context *ctx, tfenc_output *output,
                        const tfenc_output_kind_entry *kind, int width, tfenc_output_chunks chunks, int output_dim, int d_model, int n_writers,
                        const char *path, tfenc_writer **writer_out);

/* A document's row of a chunk-mean output, in place, from the sum of its
 * n_chunks chunk rows of d values (one chunk: that chunk's row): their
 * mean, scaled back to unit length when unit_means (and more than one
 * chunk), then cut to its first output_dim (> 0) values and scaled back.
 * The writer's rule, for samples that must see the rows the job writes. */
void tfenc_writer_chunk_mean(float *row, int n_chunks, int d, int output_dim, int unit_means);

/* A writer of chunk means (chunks MEAN) whose model's rows have unit
 * length: each document's mean of its chunks' rows is scaled back to unit
 * length, as the rows of documents of one chunk are. */
void tfenc_writer_set_unit_means(tfenc_writer *w);

/* A writer of late chunking's rows (run/late_chunks.h): each sequence
 * has a row per span (tfenc_microbatch.spans), and each span starts at
 * its piece of the document (tfenc_microbatch.span_begin: chunk_starts). */
void tfenc_writer_set_late_chunks(tfenc_writer *w);

/* A writer whose model ends in a sparse head (output kind sparse): each
 * microbatch's rows, which it carries (its sparse_rows, filled during the
 * forward pass), go to `log`, which the writer syncs before the
 * documents' metadata (sparse.h). */
struct tfenc_sparse_log;
void tfenc_writer_set_sparse(tfenc_writer *w, struct tfenc_sparse_log *log);

/* What else must be durable before each group's metadata: sync(ctx, user)
 * runs after the file's rows are synced and before the documents'
 * lengths are written (a job of several heads: the further heads' sparse
 * logs, run/heads.h). */
void tfenc_writer_set_before_metadata(tfenc_writer *w, int (*sync)(tfenc_context *ctx, void *user),
                                      void *user);

/* The tokens whose vectors a multi-vector writer (output kind vectors)
 * leaves out: the skiplist the feeder counted the offsets with
 * (output/multivector.h: its ids, and each sequence's first token when
 * skip_first). The kind's writer hook writes each kept token's first
 * `width` values; other kinds ignore the skiplist. The flags are copied. */
int tfenc_writer_set_skiplist(tfenc_context *ctx, tfenc_writer *w, const tfenc_skiplist *skip);

/* Writes the microbatch's rows; its metadata waits for the next group. */
int tfenc_writer_write(tfenc_context *ctx, tfenc_writer *w, const tfenc_microbatch *microbatch);

/* Makes the rows written so far durable, then writes their metadata. */
int tfenc_writer_flush(tfenc_context *ctx, tfenc_writer *w);

/* A resumed run re-encodes the documents an earlier run finished that
 * share a microbatch with unfinished ones: `finished_before` (given the
 * document's index; NULL: none was) keeps them out of the finished count
 * below, so that it adds to what the file held before. */
void tfenc_writer_set_finished_before(tfenc_writer *w,
                                      int (*finished_before)(void *user, int64_t document),
                                      void *user);

/* What this writer's flushes have made finished in the file so far (the
 * documents whose metadata is written, as --status counts them, less
 * those finished before), and the tokens of every document it flushed:
 * what progress reports. */
void tfenc_writer_finished(const tfenc_writer *w, int64_t *documents, int64_t *tokens);

/* Documents and real tokens written, and documents that were truncated. */
int64_t tfenc_writer_documents(const tfenc_writer *w);
int64_t tfenc_writer_tokens(const tfenc_writer *w);
int64_t tfenc_writer_truncated_documents(const tfenc_writer *w);

void tfenc_writer_destroy(tfenc_writer *w);

/* Rows [n, d] -> their first `width` values at unit length, packed as
 * [n, width] in place: what output_dim does to every pooled row (for those
 * that must see the rows as the file gets them, such as int8 calibration). */
void tfenc_writer_truncate_rows(float *x, int64_t n, int d, int width);

#endif
