/* Reading a tfenc output file (core/output/output.h) back a block of
 * finished documents at a time, in document order, for tfenc-export: never
 * more of the file in memory than one window of its per-document
 * bookkeeping and one block of rows.
 *
 * The file is checked first by tfenc-batch --status's reader
 * (core/output/inspect.h: a tfenc output, its datasets' shapes, which
 * documents are finished) and opened read-only without HDF5's lock, so a
 * file a job is writing right now can be read: what it holds is the
 * documents finished so far.
 *
 * A document is finished when its length is stored (lengths >= 0). Its
 * rows are then in the file, but for the kinds whose documents own runs of
 * rows, the file records where a run ends only as the next document's
 * start (offsets[i + 1]), written when that document is finished:
 *   tokens     the run has lengths[i] rows (one per token encoded);
 *   chunks     (long_documents = chunk, chunk_pooling = none) chunks[i] rows;
 *   vectors    the run's length is not recorded anywhere else (the skiplist
 *              leaves tokens out): a finished document followed by an
 *              unfinished one is left out, and counted in `left_out`.
 * A complete file has every end. Sparse rows reach the file only when the
 * job completes (core/output/sparse.h): an unfinished sparse file is
 * refused. */
#ifndef TFENC_EXPORT_OUTPUT_READER_H
#define TFENC_EXPORT_OUTPUT_READER_H

#include <stddef.h>
#include <stdint.h>

#include "base/kept_values.h"
#include "export/parquet.h"
#include "output/inspect.h"
#include "output/output.h"
#include "output/output_kind.h"

/* How a file's documents own their rows. */
typedef enum export_rows {
    EXPORT_ROWS_ONE,   /* one row each: embeddings [N, w] or scores [N, k] */
    EXPORT_ROWS_RUNS,  /* a run each through an offsets dataset: hidden, vectors,
                        * or embeddings [C, w] through chunk_offsets */
    EXPORT_ROWS_SPARSE /* CSR entries through sparse_indptr */
} export_rows;

typedef struct export_reader export_reader;

/* A kept field ([job] keep_fields): its dataset (and NAME_valid), and
 * what its column holds. */
typedef struct export_kept {
    const char *name;       /* the inspection's */
    export_element element; /* EXPORT_STRING, EXPORT_INT64 or EXPORT_FLOAT64 */
} export_kept;

/* What the file holds, for naming the columns. */
typedef struct export_layout {
    const tfenc_inspection *inspection; /* its attributes, corpus_shards, counts */
    const tfenc_output_kind_entry *kind; /* output/kinds.h */
    export_rows rows;
    const char *rows_name;   /* embeddings, scores, hidden, vectors; sparse_values */
    export_element element;  /* of a row's values as read (16-bit floats widened to float32) */
    int64_t width;           /* values per row; 0 for sparse */
    int has_ids;             /* ids */
    export_kept kept[TFENC_MAX_KEEP_FIELDS]; /* [n_kept] the kept fields, in the job's order */
    int n_kept;
    int has_source;          /* document_source (and corpus_shards to name the files) */
    int has_token_ids;       /* token_ids beside hidden or vectors */
    int has_chunks;          /* chunks [N]: long_documents = chunk */
    int has_chunk_starts;    /* chunk_starts [C]: each chunk's first piece */
    /* int8 / uint8: quantization_ranges [2, width] (row 0 the minimum), else NULL */
    const float *ranges;
    /* sparse: the vocabulary's tokens (each NUL-terminated), else NULL */
    char *const *vocabulary;
    int64_t vocabulary_size;
    /* A file of several heads: the head exported (NULL: the first, the
     * root's rows) and its dtype and id2label (the head's or the root's). */
    const char *head;
    const char *dtype;
    const char *labels;
} export_layout;

/* One block of finished documents, in document order. Arrays of the
 * columns a file does not have stay NULL. */
typedef struct export_block {
    int64_t n;            /* documents */
    int64_t *documents;   /* [n] their row in the file */
    int32_t *lengths;     /* [n] */
    int32_t *truncated;   /* [n] */
    int32_t *chunks;      /* [n] */
    char *ids;            /* id i is bytes id_offsets[i] .. id_offsets[i+1]-1 */
    int64_t *id_offsets;  /* [n + 1] */
    /* Kept field k: [n] int64 or double, or strings as ids are (with
     * kept_offsets[k]; NULL for numbers), and [n] valid flags. */
    void *kept_values[TFENC_MAX_KEEP_FIELDS];
    int64_t *kept_offsets[TFENC_MAX_KEEP_FIELDS];
    uint8_t *kept_valid[TFENC_MAX_KEEP_FIELDS];
    char *sources;        /* the file of each document's corpus_shards row, as ids */
    int64_t *source_offsets;
    int64_t *source_lines; /* [n] */
    /* The rows: ONE [n * width]; RUNS [row_offsets[n] * width], document i's
     * row_offsets[i] .. row_offsets[i+1]-1; SPARSE values [row_offsets[n]]
     * with their indices. float32, int8 or uint8 as the layout says. */
    void *values;
    int64_t *row_offsets; /* [n + 1] */
    int32_t *indices;     /* sparse */
    int32_t *token_ids;   /* [row_offsets[n]] */
    int32_t *chunk_starts;
    void *storage;        /* where the arrays live: the reader's, reused by the next block */
} export_block;

/* Opens and checks `path`; `head` (NULL: the first) names the output of a
 * file of several heads (output.h's groups /outputs/NAME) to read. Errors in one line naming the file: missing,
 * unreadable or not HDF5 (TFENC_ERR_IO); not a tfenc output, an output kind
 * this reader does not know, a dataset that is not as tfenc writes it, an
 * unfinished sparse file, a file that cannot tell which documents are
 * finished (TFENC_ERR_CONFIG). */
int export_reader_open(tfenc_context *ctx, const char *path, const char *head,
                       export_reader **reader);

const export_layout *export_reader_layout(const export_reader *reader);

/* The next block: at most max_documents finished documents (and one at
 * least, whatever its size, when any is left) and about max_bytes of rows;
 * block->n = 0 at the end. The block's arrays are reused from call to call. */
int export_reader_next(tfenc_context *ctx, export_reader *reader, int64_t max_documents,
                       size_t max_bytes, export_block *block);

/* Finished documents left out because the file does not record where
 * their rows end (vectors, above), counted as the blocks pass them. */
int64_t export_reader_left_out(const export_reader *reader);

void export_block_free(export_block *block);
void export_reader_close(export_reader *reader);

#endif
