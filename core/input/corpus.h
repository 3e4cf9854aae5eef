/* The corpus: plain text (one document per line), JSON Lines, Parquet and
 * HDF5 token ids, each format read by its reader (reader.h), named by the
 * formats' table (formats.h); this interface is the same for all. A
 * corpus streams one share, so a rank never holds more than the share's
 * current line (or row group, or block of token ids).
 *
 * Sources. A text, JSON Lines or Parquet corpus is a list of files
 * (input/sources.h), each plain or compressed (input/stream.h: gzip, zstd,
 * xz, found by magic bytes; Parquet files are read by row group through
 * Arrow); documents are numbered over the files in their order, then line
 * by line (row by row), as if the decompressed files were one. Messages
 * name the file and the line (or row and row group) within it. HDF5 token
 * ids are one file.
 *
 * Shares. Text, JSON Lines and Parquet: share k of n covers the bytes
 * [k*S/n, (k+1)*S/n) of the S bytes of the files as stored, laid end to
 * end, and owns every line (row) that STARTS in that range
 * (record_files.h); a compressed or Parquet file cannot be entered in the
 * middle, so it belongs whole to the share its first byte falls in. The
 * shares therefore partition the lines exactly, whatever the line
 * lengths. A share does not know its documents' global indices:
 * tfenc_corpus_count() scans it, the driver adds counts up over the
 * earlier shares (MPI_Exscan) and may hand the result back with
 * tfenc_corpus_set_first_index(). HDF5: shares are contiguous document
 * ranges of about equal counts (share k starts at document k*N/n), and the
 * first global index is known at open. Shares are for reading the whole
 * corpus once, in parallel (to check it and cut it into windows); the work
 * itself reads any range of documents with tfenc_corpus_select().
 *
 * Lines. A trailing "\n" and then "\r" are stripped; the last line needs no
 * final newline; an empty line of a text corpus is an empty document (it
 * still gets its output row). Lines of any length are read whole.
 *
 * Errors (TFENC_ERR_INPUT, one line naming the file):
 * - a NUL byte in a text or JSON Lines line names the 1-based line number
 *   and the byte offset of the NUL in the file. A share that does not know
 *   where it starts in line numbers counts the newlines before it when
 *   (and only when) it reports an error, so messages always carry the true
 *   line number;
 * - JSON Lines (input/jsonl_record.h): a blank line is an error (every
 *   line must be an object: a silently skipped line would shift every later
 *   document's index), as is invalid JSON, a value that is not an object, a
 *   missing text field or one that is not a string (a null one as
 *   null_text says; the same for the text_pair_field of pairs,
 *   named in the message), and, when an id field is configured, a missing id or
 *   one that is neither a string nor an integer, or one longer than
 *   max_id_bytes; with keep_fields, a kept value that is an object, an
 *   array or a boolean, or a string longer than max_field_bytes (Parquet:
 *   a kept column missing from a file's schema or of another type);
 * - HDF5 (input/hdf5_corpus.c): a missing dataset, a wrong rank, a
 *   non-integer type, offsets that do not start at 0, decrease, or do not
 *   end at the token count, a length outside [0, L], a negative token id:
 *   each names the file and dataset. */
#ifndef TFENC_CORPUS_H
#define TFENC_CORPUS_H

#include <stddef.h>
#include <stdint.h>

#include "input/corpus_types.h"
#include "input/formats.h"
#include "input/stream.h"

/* The null_text values' names, indexed by value, NULL-terminated. */
extern const char *const tfenc_null_text_names[];

typedef struct tfenc_corpus tfenc_corpus;

/* Opens share `share` (0 <= share < n_shares) of the corpus. Only reads
 * what the share needs: for HDF5 the offsets or lengths (to cut the shares)
 * but never another share's token ids. */
int tfenc_corpus_open(tfenc_context *ctx, const tfenc_corpus_options *options, int share,
                      int n_shares, tfenc_corpus **corpus);

/* Reads the whole share once and fills *counts, validating every document
 * as tfenc_corpus_next() does (JSON Lines are parsed), so that a malformed
 * line stops the job before any encoding is spent; then rewinds. HDF5
 * counts come from the offsets or lengths without reading token ids. */
int tfenc_corpus_count(tfenc_context *ctx, tfenc_corpus *corpus, tfenc_corpus_counts *counts);

/* Global index of the share's first document: known for HDF5, for share 0,
 * and after tfenc_corpus_set_first_index(); otherwise -1. */
int64_t tfenc_corpus_first_index(const tfenc_corpus *corpus);
/* Tells a text or JSON Lines share its first global index (from the
 * driver's MPI_Exscan of the counts); error messages then need no scan. */
void tfenc_corpus_set_first_index(tfenc_corpus *corpus, int64_t first_index);

/* The next document: TFENC_OK, TFENC_ERR_NOT_FOUND after the share's last
 * document (no message is recorded), or an error. */
int tfenc_corpus_next(tfenc_context *ctx, tfenc_corpus *corpus, tfenc_document *document);

/* Back to the share's first document. */
int tfenc_corpus_rewind(tfenc_context *ctx, tfenc_corpus *corpus);

/* Makes the corpus read exactly the range's documents from now on (any
 * part of the corpus, not only the share it was opened with), from its
 * first. HDF5 reads and checks the range's part of the index. */
int tfenc_corpus_select(tfenc_context *ctx, tfenc_corpus *corpus, const tfenc_corpus_range *range);

/* HDF5: the number of documents in the whole corpus, known at open; -1 for
 * text and JSON Lines (count the shares). */
int64_t tfenc_corpus_total_documents(const tfenc_corpus *corpus);

/* Text and JSON Lines: the position just past the corpus's last line (a
 * single plain file's size in bytes; with several sources or compression,
 * an opaque position, like byte_start and byte_end); -1 for HDF5. */
int64_t tfenc_corpus_file_size(const tfenc_corpus *corpus);

/* Text and JSON Lines, once the share knows its first global index: the
 * byte offsets of the share's lines whose global index is a multiple of
 * `stride`, in order (malloc'ed into *starts; free() it). Rewinds. */
int tfenc_corpus_line_starts(tfenc_context *ctx, tfenc_corpus *corpus, int64_t stride,
                             int64_t **starts, int64_t *n_starts);
/* The same for the lines whose global index is one of `indices`
 * (ascending; indices outside the share are passed over). */
int tfenc_corpus_line_starts_at(tfenc_context *ctx, tfenc_corpus *corpus, const int64_t *indices,
                                int64_t n_indices, int64_t **starts, int64_t **line_numbers,
                                int64_t *n_starts);
/* (line_numbers, when not NULL, gets each start's 1-based line (row + 1)
 * in its file, as tfenc_corpus_range.first_line_number; it needs
 * tfenc_corpus_set_start_line() for a share that starts inside a plain
 * file.) */

/* Text and JSON Lines: the sources (files) the corpus reads, in order,
 * with their sizes on disk and compressions (known from open). */
int tfenc_corpus_n_sources(const tfenc_corpus *corpus);
const char *tfenc_corpus_source_path(const tfenc_corpus *corpus, int source);
int64_t tfenc_corpus_source_size(const tfenc_corpus *corpus, int source);
tfenc_stream_codec tfenc_corpus_source_compression(const tfenc_corpus *corpus, int source);

/* The source a position (a range's byte_start) lies in. */
int tfenc_corpus_position_source(int64_t position);
/* Nonzero for a source that cannot be entered in the middle (compressed or
 * Parquet): reaching a place in it decodes it from its start. */
int tfenc_corpus_source_whole(const tfenc_corpus *corpus, int source);

/* After tfenc_corpus_count(): the share's documents in each source
 * ([tfenc_corpus_n_sources()]; a source the share does not reach has 0),
 * the records it left out (null_text = skip), and its lines (rows) in
 * each, those left out included. */
const int64_t *tfenc_corpus_source_documents(const tfenc_corpus *corpus);
const int64_t *tfenc_corpus_source_skipped(const tfenc_corpus *corpus);
const int64_t *tfenc_corpus_source_lines(const tfenc_corpus *corpus);

/* Tells a share where it starts in line numbers: earlier_lines[s] is the
 * lines of source s in the shares before this one (the driver's
 * MPI_Exscan of tfenc_corpus_source_lines()). */
void tfenc_corpus_set_start_line(tfenc_corpus *corpus, const int64_t *earlier_lines);

/* 1 when the windows of this corpus start at positions its shares report
 * (tfenc_corpus_line_starts_at: text, JSON Lines, Parquet), 0 when they are
 * ranges of document indices alone (HDF5). */
int tfenc_corpus_windows_by_position(const tfenc_corpus *corpus);

/* Frees everything; NULL is allowed. */
void tfenc_corpus_close(tfenc_corpus *corpus);

#endif
