/* Sparse output (output kind sparse): one row per document over the
 * vocabulary, from a layer that declares TFENC_LAYER_OUTPUT_SPARSE (the
 * SPLADE head), stored as CSR in the output file:
 *
 *   sparse_indptr  [N+1] int64    document i's entries are
 *                                 sparse_indptr[i] .. sparse_indptr[i+1]-1
 *   sparse_indices [nnz] int32    their token ids, ascending within a row
 *   sparse_values  [nnz] float32  their weights, > sparse_threshold
 *   vocabulary     [V]   string   each id's token (fixed-length, NUL-padded
 *                                 UTF-8, as `ids`), so an index maps ids
 *                                 back to text
 * and the root attributes sparse_top_k (0: all) and sparse_threshold.
 *
 * A row's size depends on the data, so no writer can know where its rows
 * go in the file before every row before them exists. The rows therefore
 * travel, and are stored, in three steps:
 *   1. the layer hands each sequence's row to the host from forward()
 *      (tfenc_batch_sparse_row, to the batch's sparse_rows) into the
 *      tfenc_sparse_rows the microbatch carries for its head (each head of
 *      a job of several has its own), which keeps the top-k above the
 *      threshold: rows never travel between ranks, since the head is the
 *      model's last step and the last stage writes;
 *   2. each writer appends its microbatches' rows to a log file of its own
 *      beside the output (PATH.sparse-RUN-RANK: records of document index,
 *      count, indices, values), synced before the documents' lengths are
 *      written, like the rows of every other kind: a document whose length
 *      is in the file has its row in some log, and a killed job's logs stay
 *      for the run that resumes it;
 *   3. when the job completes, rank 0 of the writers reads every log of the
 *      file (this run's and earlier runs'), takes each document's row and
 *      writes the CSR in document order: the same file at every layout and
 *      after any resume. The logs are then removed.
 * The logs are checked record by record (checksums and fields): a damaged
 * one never reaches the CSR, and a resume encodes its document again. */
#ifndef TFENC_SPARSE_H
#define TFENC_SPARSE_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "base/context.h"
#include "output/output.h"

/* ------------------------------------------------ one microbatch's rows */

typedef struct tfenc_sparse_rows {
    int width;          /* columns: the vocabulary size */
    long top_k;         /* > 0: keep the k largest values of a row */
    double threshold;   /* keep values > threshold */
    int n_seq;          /* rows expected in this microbatch */
    int n_rows;         /* rows received so far */
    int64_t *row_start; /* [n_seq + 1] into indices and values */
    int32_t *indices;
    float *values;
    int64_t capacity;   /* entries indices and values hold */
    int64_t row_capacity;
    struct sparse_entry *scratch; /* [width] for choosing the top k */
    int nonfinite_sequence; /* the row refused for a NaN or an infinity, or -1 */
    /* What a batch's sparse_rows points at (plugin.h) to send its rows
     * here: tfenc_sparse_rows_sink with these rows. */
    tfenc_sparse_destination destination;
} tfenc_sparse_rows;

/* top_k 0 keeps every value above the threshold; a top_k larger than the
 * width is the caller's to refuse (it is a job error). */
int tfenc_sparse_rows_create(tfenc_context *ctx, int width, long top_k, double threshold,
                             tfenc_sparse_rows **rows);
/* Empties it for a microbatch of n_seq sequences. */
int tfenc_sparse_rows_begin(tfenc_context *ctx, tfenc_sparse_rows *rows, int n_seq);
/* The receiver of the rows' destination (and of a context's sink, user =
 * the rows):
 * checks the row (sequence in order, indices ascending inside the width,
 * values finite, as the host checks dense rows) and keeps what the top-k
 * and threshold keep. */
int tfenc_sparse_rows_sink(void *user, tfenc_context *ctx, int sequence, int n,
                           const int32_t *indices, const float *values);
/* The sequence of this microbatch whose row held a NaN or an infinity
 * (the sink refused it), or -1: the run names its document. */
int tfenc_sparse_rows_nonfinite_sequence(const tfenc_sparse_rows *rows);
void tfenc_sparse_rows_destroy(tfenc_sparse_rows *rows);

/* ---------------------------------------------------- the writer's log */

/* What the logs and the CSR of one output hold. */
typedef struct tfenc_sparse_settings {
    const char *path;    /* the output's path; its logs are PATH.sparse-* */
    /* A further head of a job of several (output.h's /outputs/NAME): its
     * logs are LOG_PATH.sparse-* (PATH.head-NAME), NULL for the first
     * head's. */
    const char *log_path;
    int64_t n_documents; /* the corpus's */
    int width;           /* columns: the vocabulary size */
    long top_k;          /* [job] sparse_top_k: a row holds at most this many (0: any) */
    double threshold;    /* [job] sparse_threshold: every value is above it */
} tfenc_sparse_settings;

/* A log is a header (a magic string, the format's version, the width and
 * the corpus's size, under a CRC-32) and records: document index, count,
 * the CRC-32 of the payload, the CRC-32 of those 16 bytes, then count
 * int32 indices and count float32 values. A record whose checksums or
 * fields do not hold (a column outside the width or out of order, a count
 * above the width or top-k, a value not finite or not above the threshold)
 * is damaged and never read as a row: its document is encoded again. */
typedef struct tfenc_sparse_log tfenc_sparse_log;

/* Collective over `writers` (MPI_COMM_NULL: this process alone). A new
 * output (resumed = 0) first loses the logs an earlier job left for the
 * same path; then each writer opens a log of its own for this run. */
int tfenc_sparse_log_open(tfenc_context *ctx, const tfenc_sparse_settings *settings,
                          MPI_Comm writers, int resumed, tfenc_sparse_log **log);
/* The microbatch's rows, row j for document documents[j]. */
int tfenc_sparse_log_append(tfenc_context *ctx, tfenc_sparse_log *log,
                            const tfenc_sparse_rows *rows, const int64_t *documents);
/* Makes what was appended durable (before the documents' lengths). */
int tfenc_sparse_log_sync(tfenc_context *ctx, tfenc_sparse_log *log);
void tfenc_sparse_log_close(tfenc_sparse_log *log);

/* Calls visit(path, user) for each log of output_path (whatever its
 * content: a file named as one); a non-zero return stops the walk and is
 * returned. -1 when the directory cannot be read. */
int tfenc_sparse_each_log(const char *output_path, int (*visit)(const char *path, void *user),
                          void *user);

/* 1 when the file at `path` begins as a sparse log does (whatever output
 * it belongs to), else 0: a side file no job may take as its output. */
int tfenc_sparse_is_log(const char *path);

/* ----------------------------------------------------------- a resume */

/* Collective over the output's writers, before a resumed run decides what
 * is left to encode. *logged: bit i set when document i has a sound row
 * in a log (malloc'ed, n_documents bits; tfenc_sparse_has_row), so that
 * a document whose length the file holds but whose row was lost (a log
 * damaged or removed) is encoded again instead of being missing from the
 * CSR. *logged is NULL when the file's CSR is whole already (the file was
 * complete and no log is left). `report` receives one sentence naming the
 * first damaged log and the byte where the damage is, or "" when none. */
int tfenc_sparse_logged(tfenc_context *ctx, tfenc_output *output,
                        const tfenc_sparse_settings *settings, int was_complete,
                        uint8_t **logged, char *report, size_t report_size);
int tfenc_sparse_has_row(const uint8_t *logged, int64_t document);

/* --------------------------------------------------------------- the end */

/* Collective over the output's writers, before tfenc_output_finish: writes
 * the CSR datasets, the vocabulary ([width] each id's token; NULL: none
 * stored) and the attributes from every log of the path. csr_whole (from
 * tfenc_sparse_logged): the file holds its CSR already, and with no row in
 * any log nothing is written. A document without a sound row in any log
 * is an error naming it (or the damaged log): the file stays incomplete,
 * and a resume encodes that document again. The bytes the CSR takes are
 * allocated to the file before it is touched: a disk without room for
 * them is refused with the file as it was, which a resume completes once
 * there is room. */
int tfenc_sparse_finish(tfenc_context *ctx, tfenc_output *output,
                        const tfenc_sparse_settings *settings, const char *const *vocabulary,
                        int csr_whole);

/* Removes the logs of `output_path` (after the file is complete). */
void tfenc_sparse_remove_logs(const char *output_path);

/* After the file is closed: gives back what the finish allocated to it
 * beyond its end and did not use. */
void tfenc_sparse_release_space(const char *output_path);

#endif
