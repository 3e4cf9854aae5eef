/* What the corpus (corpus.h) and its readers (reader.h) share: the formats,
 * the options a corpus is opened with, a document, the counts of a share
 * and a range of documents. A header of its own so that the readers, the
 * JSON Lines record (jsonl_record.h) and the corpus above them all include
 * it, and nothing beneath the corpus includes corpus.h. */
#ifndef TFENC_CORPUS_TYPES_H
#define TFENC_CORPUS_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "tfenc/plugin.h"
#include "base/kept_values.h"

/* The formats, indexed as the formats' table (formats.c) lists them. AUTO
 * is a job's choice (decided by the file name), never a corpus's. */
typedef enum tfenc_corpus_format {
    TFENC_CORPUS_TEXT,
    TFENC_CORPUS_JSONL,
    TFENC_CORPUS_HDF5,
    TFENC_CORPUS_PARQUET, /* when built with Apache Arrow (parquet_reader.h) */
    TFENC_CORPUS_AUTO
} tfenc_corpus_format;

/* What a null text is ([job] null_text): JSON Lines `"text": null`, or a
 * null in a Parquet text column. ERROR stops the job naming the file and
 * the line (row); EMPTY reads it as an empty document; SKIP leaves the
 * record out: it is no document and gets no output row, documents are
 * numbered without it, and its line still counts in the next documents'
 * line numbers (tfenc_document.line), so rows trace back to their lines. */
typedef enum tfenc_null_text {
    TFENC_NULL_TEXT_ERROR,
    TFENC_NULL_TEXT_EMPTY,
    TFENC_NULL_TEXT_SKIP
} tfenc_null_text;

typedef struct tfenc_corpus_options {
    const char *path;            /* [job] input as resolved: names the corpus in messages */
    const char *const *sources;  /* the files, in order (input/sources.h); NULL: `path` alone */
    int n_sources;
    tfenc_corpus_format format;
    const char *text_field;      /* JSON Lines, Parquet: field (column) with the document;
                                  * NULL means "text" */
    const char *text_pair_field; /* JSON Lines, Parquet: field (column) with the second
                                  * text of a pair (cross-encoders); NULL: single texts */
    const char *id_field;        /* JSON Lines, Parquet: field with the id; NULL: no ids */
    tfenc_null_text null_text;   /* JSON Lines, Parquet: what a null text is */
    size_t max_id_bytes;         /* JSON Lines: longer ids are refused (0: no limit) */
    /* JSON Lines, Parquet ([job] keep_fields): fields (columns) whose values
     * each document carries (tfenc_document.kept) into the output; at most
     * TFENC_MAX_KEEP_FIELDS. A string longer than max_field_bytes is refused
     * (0: no limit), and so is a value that is an object, an array or a
     * boolean. */
    const char *const *keep_fields;
    int n_keep_fields;
    size_t max_field_bytes;
    const char *tokens_dataset;  /* HDF5 ragged: int ids [T]; NULL means "tokens" */
    const char *offsets_dataset; /* HDF5 ragged: [N+1] from 0 to T; NULL means "offsets" */
    const char *ids_dataset;     /* HDF5 padded: int ids [N, L]; set with lengths_dataset */
    const char *lengths_dataset; /* HDF5 padded: tokens per row [N]; when both are set the
                                  * input is padded, else ragged */
} tfenc_corpus_options;

/* One document. Everything it points to is owned by the corpus and valid
 * until the next tfenc_corpus_next(), _rewind(), _count() or _close(). */
typedef struct tfenc_document {
    int64_t local_index;      /* 0, 1, ... within the share */
    const char *text;         /* text / JSON Lines: UTF-8 bytes, NUL-terminated; else NULL */
    size_t text_length;       /* bytes, without the terminating NUL */
    const char *text_pair;    /* with a text_pair_field: the pair's second text, as text;
                               * else NULL */
    size_t text_pair_length;
    const char *id;           /* JSON Lines with an id field: NUL-terminated; else NULL */
    size_t id_length;
    const char *kept;         /* with keep_fields: their values, in order, as
                               * base/kept_values.h writes them; else NULL */
    size_t kept_length;
    const int32_t *token_ids; /* HDF5: the document's ids (non-negative); else NULL */
    int n_tokens;             /* HDF5: number of ids; else 0 */
    int source;               /* the file it was read from (0 for HDF5) */
    int64_t line;             /* text, JSON Lines: its 1-based line in that file; Parquet:
                               * its 0-based row; -1 when not known (HDF5, or a plain
                               * file entered in the middle without being told where:
                               * tfenc_corpus_set_start_line, tfenc_corpus_range) */
} tfenc_document;

/* What the counting pass saw of one kept field: for each type (absent,
 * null, string, ...) the first document holding a value of it, -1 for
 * none, and the file it came from; the longest string. A share's counts
 * number its documents from 0 (tfenc_document.local_index); the windows
 * (windows.h) hold the whole corpus's, by global index. */
typedef struct tfenc_kept_field_count {
    int64_t first[TFENC_KEPT_TYPES];
    int first_source[TFENC_KEPT_TYPES];
    size_t longest;
} tfenc_kept_field_count;

typedef struct tfenc_corpus_counts {
    int64_t n_documents;  /* documents in the share */
    int64_t n_tokens;     /* HDF5: token ids in the share; -1 for text and JSON Lines */
    int64_t n_skipped;    /* records left out (null_text = skip) */
    size_t max_id_length; /* JSON Lines with an id field: longest id in bytes; else 0 */
    size_t max_kept_length; /* with keep_fields: longest tfenc_document.kept */
    tfenc_kept_field_count kept[TFENC_MAX_KEEP_FIELDS]; /* [n_keep_fields] */
} tfenc_corpus_counts;

/* A run of consecutive documents: the unit a window of work reads. */
typedef struct tfenc_corpus_range {
    int64_t first_index; /* global index of the first document */
    int64_t n_documents;
    int64_t byte_start;  /* text and JSON Lines: where the first line starts (a byte offset
                          * of a single plain file; else the source's index above bit 40
                          * and the decompressed offset in it) */
    int64_t byte_end;    /* text and JSON Lines: the next range's byte_start, or the end */
    int64_t first_line_number; /* text and JSON Lines, Parquet: the 1-based line (row + 1)
                                * of the first document in its file; 0: not known */
} tfenc_corpus_range;

#endif
