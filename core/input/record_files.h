/* What the positioned readers share (reader.h): files read record by record
 * (lines; Parquet's rows), laid end to end, cut into shares by their stored
 * bytes, reached at positions, with line numbers for messages. A format's
 * reader keeps a tfenc_record_files as the FIRST member of its state, so
 * that the slots below (rewind, select, window_starts, set_start_line)
 * take that state as their own; it only writes next(), and its open()
 * calls tfenc_record_files_open().
 *
 * Shares. Share k of n covers the bytes [k*S/n, (k+1)*S/n) of the S bytes
 * of the files as stored, laid end to end, and owns every record that
 * STARTS in that range (a share that starts mid-line skips to the next
 * line start; its last line is read to its end, past the range). A file
 * read whole (compressed, or Parquet) belongs whole to the share its first
 * byte falls in. The shares therefore partition the records exactly,
 * whatever their lengths.
 *
 * Lines. A trailing "\n" and then "\r" are stripped; the last line needs no
 * final newline; lines of any length are read whole. A NUL byte in a line
 * is an error naming the 1-based line number and the byte offset of the
 * NUL in the file. A share that does not know where it starts in line
 * numbers counts the newlines before it when (and only when) it reports an
 * error, so messages always carry the true line number. */
#ifndef TFENC_RECORD_FILES_H
#define TFENC_RECORD_FILES_H

#include <stddef.h>
#include <stdint.h>

#include "input/reader.h"
#include "input/stream.h"

typedef struct tfenc_record_files {
    tfenc_corpus_files *files; /* the corpus's, which outlives this */
    /* The format's next(), on the state this opens: the window starts of a
     * corpus that leaves records out read documents through it. */
    int (*next)(tfenc_context *ctx, void *state, tfenc_document *document);
    int leaves_records_out;    /* null_text = skip for a format of records that may be
                                * null: only reading a record tells whether it is one */
    int64_t end_position;      /* past the last file */
    int64_t share_end;         /* records starting at or after this belong to the next share */
    int64_t share_start;       /* first record start at or after the share's byte range start */
    int64_t position;          /* position of the next record start */
    int source;                /* the file being read (its stream's, or Parquet's), or -1 */
    tfenc_stream *stream;      /* lines: the file being read, or NULL */
    int segment_valid;         /* 0 after a rewind or select: the stream must be positioned */
    /* Line numbers within the file, 0-based: of the next line the stream
     * gives, of the line (row) just read, and of the line at share_start
     * (told by the driver, or by the range a window was selected with);
     * -1 when not known (a plain file entered in the middle): messages
     * then count the newlines before the line. */
    int64_t next_line;
    int64_t document_line;
    int64_t start_line;
    int64_t line_byte;         /* decompressed offset of the line just read in its file */
    char *line;                /* the line just read, without its end, NUL-terminated */
    size_t line_capacity;
} tfenc_record_files;

/* Checks one file and sets files' stored_size, compression and whole for
 * it: tfenc_record_files_probe_stream() for formats read as lines. */
typedef int (*tfenc_record_probe)(tfenc_context *ctx, tfenc_corpus_files *files, int file);
int tfenc_record_files_probe_stream(tfenc_context *ctx, tfenc_corpus_files *files, int file);

/* Opens share `share` of `n_shares` of `files` (every file probed, so that
 * every rank cuts the shares alike) and fills *opened. `records` is
 * zeroed but for `next` and `leaves_records_out`, which the caller set. */
int tfenc_record_files_open(tfenc_context *ctx, tfenc_record_files *records,
                            tfenc_corpus_files *files, int share, int n_shares,
                            tfenc_record_probe probe, tfenc_reader_opened *opened);

/* The next line of the share into records->line (without its end; *length
 * bytes) and where it starts into *line_start. TFENC_ERR_NOT_FOUND when
 * the share has no more lines. */
int tfenc_record_files_read_line(tfenc_context *ctx, tfenc_record_files *records,
                                 size_t *length, int64_t *line_start);

/* For messages about the line just read (or being read): its file's path,
 * and its 1-based line number (-1 if it cannot be found). */
const char *tfenc_record_files_path(const tfenc_record_files *records);
int64_t tfenc_record_files_line_number(tfenc_record_files *records);

/* The line just read is `document`'s: its file and 1-based line. */
void tfenc_record_files_line_document(const tfenc_record_files *records,
                                      tfenc_document *document);

/* The record just read is left out (null_text = skip): counted per file by
 * the counting pass. */
void tfenc_record_files_note_skipped(tfenc_record_files *records);

/* Where file `file` starts: its first position, or past the last file the
 * corpus's end. */
int64_t tfenc_record_files_file_start(const tfenc_record_files *records, int file);

/* The named fields a format of records reads (JSON Lines fields, Parquet
 * columns): copies of the options' ("text" when text_field is NULL). */
typedef struct tfenc_record_fields {
    char *text;
    char *pair; /* the second text of a pair, or NULL */
    char *id;   /* NULL: no ids */
} tfenc_record_fields;
int tfenc_record_fields_copy(tfenc_context *ctx, const tfenc_corpus_options *options,
                             tfenc_record_fields *fields);
void tfenc_record_fields_free(tfenc_record_fields *fields);

/* describe() of a format whose records have named fields (`field`:
 * "field", "column"): the text's, the pair's and the id's, and null_text. */
void tfenc_record_files_describe_fields(const tfenc_corpus_options *options, const char *field,
                                        char *line, size_t size);

/* Frees what the records hold (the stream, the line), not `records`. */
void tfenc_record_files_release(tfenc_record_files *records);

/* Slots of tfenc_corpus_reader, for a state that begins with a
 * tfenc_record_files. */
int tfenc_record_files_rewind(tfenc_context *ctx, void *state);
int tfenc_record_files_select(tfenc_context *ctx, void *state, const tfenc_corpus_range *range);
int tfenc_record_files_window_starts(tfenc_context *ctx, void *state, int64_t first_index,
                                     tfenc_wanted_documents *wanted, int64_t **starts,
                                     int64_t **line_numbers, int64_t *n_starts);
void tfenc_record_files_set_start_line(void *state, const int64_t *earlier_lines);

#endif
