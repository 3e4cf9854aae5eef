/* A corpus format as a component: the slots a format's reader fills, through
 * which the corpus (corpus.h) reads every format alike. Each format is one
 * file that defines one tfenc_corpus_reader (text_corpus.c, jsonl_corpus.c,
 * hdf5_corpus.c, parquet_corpus.c) and one entry of the formats' table
 * (formats.h) that names it; nothing else in tfenc decides by the format
 * (tests/structure.py checks that). docs/architecture.md gives the recipe
 * for a new format.
 *
 * Two kinds of reader fill the slots:
 * - positioned readers (text, JSON Lines, Parquet) read records (lines,
 *   rows) from files laid end to end; a share is a range of their stored
 *   bytes and a window starts at a position (below) that the counting pass
 *   reports. record_files.h does all of that for them: such a reader only
 *   turns the record at hand into a document;
 * - indexed readers (HDF5 token ids) know their documents by index: a share
 *   or a window is a range of indices, and the share's first index is
 *   known at open. Their window_starts and set_start_line slots are NULL.
 *
 * Compression is beneath the readers (stream.h), and so is the fingerprint
 * a resume checks: it is over every stored byte of every file
 * (output/fingerprint.h), whatever the format, so no reader has a slot for
 * it.
 *
 * A reader never prints or exits: it sets tfenc_error(ctx, ...) naming the
 * file (and line, row or dataset) and returns the status. */
#ifndef TFENC_READER_H
#define TFENC_READER_H

#include <stddef.h>
#include <stdint.h>

#include "input/corpus_types.h"

/* The files of a corpus, whatever its format: the corpus keeps them (and
 * answers tfenc_corpus_n_sources() and the like from them); the reader
 * fills in what it learns. */
typedef struct tfenc_corpus_files {
    int n;                /* files, in order (input/sources.h); one for `path` alone */
    char **paths;         /* [n] */
    int64_t *stored_size; /* [n] bytes on disk: set by the reader's open */
    uint8_t *compression; /* [n] tfenc_stream_codec: set by the reader's open */
    uint8_t *whole;       /* [n] 1: a file read from its start only (compressed, or of a
                           * format that cannot be entered in the middle): set by open */
    int64_t *documents;   /* [n] the share's documents in each, once counted */
    int64_t *skipped;     /* [n] the share's records left out of each (null_text = skip) */
    int64_t *lines;       /* [n] the share's lines (rows) in each, those left out included */
    int counted;          /* 1 once documents, skipped and lines are counted */
} tfenc_corpus_files;

/* What a reader knows once open: -1 for what it does not. */
typedef struct tfenc_reader_opened {
    int64_t first_index;     /* global index of the share's first document */
    int64_t total_documents; /* documents in the whole corpus (indexed readers) */
    int64_t end_position;    /* positioned readers: the position past the last record */
} tfenc_reader_opened;

/* Which documents' positions the counting pass wants: the global indices
 * that are multiples of `stride` (> 0), or else those `listed` (ascending). */
typedef struct tfenc_wanted_documents {
    int64_t stride;
    const int64_t *listed;
    int64_t n_listed;
    int64_t next; /* the first listed index not yet passed */
} tfenc_wanted_documents;

static inline int tfenc_document_wanted(tfenc_wanted_documents *wanted, int64_t index)
{
    if (wanted->stride > 0)
        return index % wanted->stride == 0;
    while (wanted->next < wanted->n_listed && wanted->listed[wanted->next] < index)
        wanted->next++;
    return wanted->next < wanted->n_listed && wanted->listed[wanted->next] == index;
}

typedef struct tfenc_corpus_reader {
    /* Opens share `share` of `n_shares` (0 <= share < n_shares): reads only
     * what the share needs, checks every file's kind, fills `files`'
     * stored_size, compression and whole, and *opened. *state MUST be set
     * (NULL allowed) even when open fails: close() is called on it then. */
    int (*open)(tfenc_context *ctx, const tfenc_corpus_options *options,
                tfenc_corpus_files *files, int share, int n_shares, void **state,
                tfenc_reader_opened *opened);
    /* The next document of the selection: text, pair, id or token ids, and
     * its source and line (the corpus has cleared it and numbers it).
     * TFENC_ERR_NOT_FOUND after the last, without a message. A record left
     * out (null_text = skip) is passed over and counted in
     * files->skipped while !files->counted. */
    int (*next)(tfenc_context *ctx, void *state, tfenc_document *document);
    /* Back to the selection's first document. */
    int (*rewind)(tfenc_context *ctx, void *state);
    /* Reads exactly `range` from now on (its first_index is the corpus's). */
    int (*select)(tfenc_context *ctx, void *state, const tfenc_corpus_range *range);
    /* Fills counts (and files' documents, lines; counted = 1) without
     * reading the documents; the corpus rewinds afterwards. NULL: the corpus
     * counts by reading every document through next(). */
    int (*count)(tfenc_context *ctx, void *state, tfenc_corpus_counts *counts);
    /* NULL is allowed. */
    void (*close)(void *state);
    /* What the options make it read, one phrase for --dry-run ("the text in
     * field 'text', ids in field 'id'"); "" when there is nothing to say. */
    void (*describe)(const tfenc_corpus_options *options, char *line, size_t size);

    /* Positioned readers only; NULL for an indexed one. */
    /* The positions (and 1-based line numbers, when line_numbers is not
     * NULL) of the share's documents `wanted` picks, the first being global
     * index first_index; malloc'ed; rewinds before and after. */
    int (*window_starts)(tfenc_context *ctx, void *state, int64_t first_index,
                         tfenc_wanted_documents *wanted, int64_t **starts,
                         int64_t **line_numbers, int64_t *n_starts);
    /* earlier_lines[s]: the lines of file s in the shares before this one. */
    void (*set_start_line)(void *state, const int64_t *earlier_lines);
} tfenc_corpus_reader;

/* Positions name a file and a place in it: the file's index above bit 40
 * (up to 2^22 files), so positions of later files are larger and one int64
 * orders every record of the corpus. The place is the byte offset in a
 * plain file (which seeks) and the 0-based record number in a file read
 * whole: reaching either means decoding from the start anyway, and record
 * numbers are known from the counting pass without a second pass over the
 * decompressed bytes. A single plain file's positions are its byte offsets.
 * A range's byte_start and byte_end are positions. */
#define TFENC_POSITION_SHIFT 40
#define TFENC_POSITION_PLACE_MASK (((int64_t)1 << TFENC_POSITION_SHIFT) - 1)

static inline int64_t tfenc_position(int source, int64_t place)
{
    return ((int64_t)source << TFENC_POSITION_SHIFT) + place;
}

static inline int tfenc_position_source(int64_t position)
{
    return (int)(position >> TFENC_POSITION_SHIFT);
}

static inline int64_t tfenc_position_place(int64_t position)
{
    return position & TFENC_POSITION_PLACE_MASK;
}

/* Where share k of n of `size` things (bytes, documents) starts:
 * k*size/n without overflowing 64 bits for any size. */
static inline int64_t tfenc_share_boundary(int64_t size, int share, int n_shares)
{
    return (size / n_shares) * share + (size % n_shares) * share / n_shares;
}

#endif
