/* The corpus cut into windows of W = [job] window_documents consecutive
 * documents, and toward the end of the corpus smaller ones: a window holds
 * 1/1024 of the documents left (TFENC_WINDOW_TAIL_DIVISOR), rounded down to
 * a multiple of the grain G (W / 64, at least 32 documents, at most W), and
 * at least G and at most W. The last ~1024 W documents are so cut into
 * windows that taper from W to G, and up to about a thousand replicas finish within one small window of
 * each other instead of one whole window apart (a corpus smaller than
 * that is all small windows). Windows depend on the job and the corpus's
 * size alone, never on the number of ranks or the layout, and they are the
 * unit of everything that must not depend on the layout:
 *
 * - work: a replica takes whole windows, one at a time, as it becomes free
 *   (work_queue.h), so a slow node simply takes fewer;
 * - reproducibility: a window's documents are sorted by length and cut into
 *   microbatches inside the window only (feeder.h), so a document's
 *   microbatch companions, and hence its vector, bit for bit, depend only
 *   on the job;
 * - resume: a window a previous run finished is skipped, and inside a
 *   window it left unfinished only the microbatches it did not finish are
 *   encoded again (they are the same microbatches).
 *
 * Building the windows takes one parallel pass over the corpus: each rank
 * counts and checks its share (corpus.h), the counts give every share its
 * first global index, and text shares report the byte offsets where windows
 * start. For per-token output a second pass tokenizes each window once to
 * learn where its rows go. */
#ifndef TFENC_WINDOWS_H
#define TFENC_WINDOWS_H

#include <mpi.h>
#include <stdint.h>

#include "input/corpus.h"

/* Tail windows shrink to the grain, W / TFENC_WINDOW_TAIL_STEPS but not
 * below TFENC_WINDOW_MIN_DOCUMENTS (smaller windows would make microbatches
 * of short texts too small for efficient matrix products), nor above W;
 * each holds 1 / TFENC_WINDOW_TAIL_DIVISOR of the documents left: the
 * divisor is the number of replicas whose finishing times the taper evens
 * out. */
#define TFENC_WINDOW_TAIL_STEPS 64
#define TFENC_WINDOW_MIN_DOCUMENTS 32
#define TFENC_WINDOW_TAIL_DIVISOR 1024

/* The grain of width W: every window's size but the last is a multiple. */
int64_t tfenc_windows_grain(int64_t window_documents);

/* What an earlier run left of a window. */
typedef enum tfenc_window_state {
    TFENC_WINDOW_FRESH = 0,   /* none of its documents is finished */
    TFENC_WINDOW_PARTIAL = 1, /* some are */
    TFENC_WINDOW_DONE = 2     /* all are: nothing to do */
} tfenc_window_state;

typedef struct tfenc_windows {
    int64_t n_documents;
    int64_t window_documents; /* W: no window is larger */
    int64_t n_windows;
    int64_t *first_document;  /* [n_windows + 1] each window's first document, then N */
    size_t max_id_length;     /* longest document id in bytes (JSON Lines ids), else 0 */
    size_t max_kept_length;   /* longest kept values' text (tfenc_document.kept), else 0 */
    int n_keep_fields;
    tfenc_kept_field_count kept[TFENC_MAX_KEEP_FIELDS]; /* the whole corpus's, by global
                                                         * document index */
    int64_t *byte_start;      /* text: [n_windows + 1] offset of each window's first line,
                               * then the file size; NULL for HDF5 */
    int64_t *first_line_number; /* text: [n_windows] each window's first document's 1-based
                                 * line (row + 1) in its file; NULL for HDF5 */
    int64_t *first_row;       /* [n_windows + 1] first output row of each window, for
                               * outputs of several rows per document (tokens after
                               * truncation, or chunks), then the total; NULL until
                               * counted */
    uint8_t *state;           /* [n_windows] tfenc_window_state; all FRESH until read */
    int64_t n_partial;
    int64_t *partial;         /* [n_partial] the PARTIAL windows, ascending */
    uint8_t *partial_done;    /* [n_partial * W] per document: finished (1) or not */
    int n_sources;            /* the corpus's files (input/sources.h) */
    int64_t *source_documents; /* [n_sources] documents in each, in order */
    int64_t *source_skipped;  /* [n_sources] records left out of each (null_text = skip) */
    uint8_t *source_whole;    /* [n_sources] 1: compressed or Parquet, read from its start */
} tfenc_windows;

/* What one rank learned about its share in the counting pass. */
typedef struct tfenc_windows_share {
    int64_t n_documents;
    size_t max_id_length;
    size_t max_kept_length;
    int n_keep_fields;
    tfenc_kept_field_count kept[TFENC_MAX_KEEP_FIELDS]; /* by global document index */
    int64_t *line_starts;     /* text: byte offsets of the share's lines that start a
                               * window (malloc'ed; freed by build) */
    int64_t *line_numbers;    /* text: their 1-based lines in their files (freed by build) */
    int64_t n_line_starts;
    int64_t file_size;        /* text: the corpus's size in bytes */
    int n_sources;
    int64_t *source_documents; /* [n_sources] the whole corpus's documents per source
                                * (summed over the shares; moved into the windows) */
    int64_t *source_skipped;   /* [n_sources] records left out, likewise */
    uint8_t *source_whole;     /* [n_sources] (moved into the windows) */
} tfenc_windows_share;

/* Local, on every rank: opens share `share` of `n_shares` of the corpus,
 * reads and checks all of it, and fills `share_info`; the global index of
 * the share's first document is learned by an MPI_Exscan inside, so this is
 * collective over `comm` (whose size is n_shares). A failure is this rank's
 * and is returned after the collective parts, so every rank can agree. */
int tfenc_windows_scan(tfenc_context *ctx, MPI_Comm comm, const tfenc_corpus_options *corpus,
                       int64_t window_documents, tfenc_windows_share *share_info);

/* Frees what a share holds (after a failed scan, or when it is not built). */
void tfenc_windows_share_free(tfenc_windows_share *share_info);

/* Collective over `comm`: combines every rank's share into the windows.
 * Call only when every rank's tfenc_windows_scan succeeded. */
int tfenc_windows_build(tfenc_context *ctx, MPI_Comm comm, tfenc_windows_share *share_info,
                        int64_t window_documents, tfenc_windows *windows);

/* With keep_fields: each field's type in the output (types[k]: STRING,
 * INTEGER or FLOAT) and the longest string (longest[k], at least 1), from
 * what the counting pass saw of the whole corpus. A field that no record
 * of the corpus has (JSON Lines; a Parquet file without the column is
 * refused when it is opened) is TFENC_ERR_CONFIG; so is a field holding
 * strings in one record and numbers in another, naming both documents and
 * their files. Integers and floats mix as floats; a field that is null in
 * every record is a string. The same on every rank. */
int tfenc_windows_kept_types(tfenc_context *ctx, const tfenc_windows *windows,
                             const tfenc_corpus_options *options, tfenc_kept_type *types,
                             size_t *longest);

/* The documents of window k, as a corpus range. */
void tfenc_windows_range(const tfenc_windows *windows, int64_t k, tfenc_corpus_range *range);

/* Row counting, for outputs that place each document's rows by token
 * (per-token output) or by chunk. Local, on each counting rank (one per
 * replica, say): counts its windows with `count_window` (the window's
 * output rows), in order, keeping them in the windows. The windows are
 * dealt out in groups, group g to counter g % n_counters: a window alone,
 * or all the consecutive windows that start in one compressed (or
 * Parquet) file, so that each such file is decoded by one counter, once,
 * not from its start again by every counter that has a window in it. */
typedef int (*tfenc_window_counter)(tfenc_context *ctx, void *user, int64_t window,
                                    int64_t *rows);
int tfenc_windows_count_local(tfenc_context *ctx, tfenc_windows *windows, int counter,
                              int n_counters, tfenc_window_counter count_window, void *user);
/* Collective over `comm` (ranks that counted nothing take part too): every
 * rank gets first_row. Call only when every rank's counting succeeded. */
int tfenc_windows_sum_rows(tfenc_context *ctx, MPI_Comm comm, tfenc_windows *windows);

/* Resume. Local, on each reading rank (a writer, which has the output
 * open): reads the state of the windows k with k % n_readers == reader,
 * `written` filling each document's finished flag. */
typedef int (*tfenc_window_progress)(tfenc_context *ctx, void *user, int64_t first_document,
                                     int64_t n_documents, uint8_t *done);
int tfenc_windows_progress_local(tfenc_context *ctx, tfenc_windows *windows, int reader,
                                 int n_readers, tfenc_window_progress written, void *user);
/* Collective over `comm`: every rank gets every window's state and the
 * finished flags of the partial windows. Call only when every rank's
 * reading succeeded. */
int tfenc_windows_combine_progress(tfenc_context *ctx, MPI_Comm comm, tfenc_windows *windows);

/* After progress is combined: the finished flags of a PARTIAL window's
 * documents (W bytes); NULL for a FRESH window, and for a DONE one, which
 * is never read again. */
const uint8_t *tfenc_windows_finished_documents(const tfenc_windows *windows, int64_t k);
/* Documents an earlier run finished, in all. */
int64_t tfenc_windows_documents_finished(const tfenc_windows *windows);

/* The source window k starts in when that source is compressed (or
 * Parquet), else -1. Consecutive windows that start in one such source
 * are best read by one replica, in order: each other reader would decode
 * the source from its start again. */
int tfenc_windows_whole_source(const tfenc_windows *windows, int64_t k);

void tfenc_windows_free(tfenc_windows *windows);

#endif
