/* Files read record by record, laid end to end: the shares cut by stored
 * bytes, the positions, the lines through stream.h, and the window starts
 * the counting pass reports; each positioned reader adds only its records. */
#include "input/record_files.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/context.h"

int64_t tfenc_record_files_file_start(const tfenc_record_files *records, int file)
{
    return file >= records->files->n ? records->end_position : tfenc_position(file, 0);
}

const char *tfenc_record_files_path(const tfenc_record_files *records)
{
    return records->source >= 0 ? records->files->paths[records->source]
                                : records->files->paths[0];
}

/* Where the open stream is, in its file's kind of place. */
static int64_t stream_place(const tfenc_record_files *records)
{
    return records->files->compression[records->source] != TFENC_STREAM_PLAIN
               ? tfenc_stream_line(records->stream) : tfenc_stream_offset(records->stream);
}

/* Positions the stream on `source` at place `offset` (a byte offset or,
 * compressed, a line), opening the source if another one is open, and
 * starts a new segment there. */
static int position_stream(tfenc_context *ctx, tfenc_record_files *records, int source,
                           int64_t offset)
{
    const tfenc_corpus_files *files = records->files;
    if (records->source != source) {
        tfenc_stream_close(records->stream);
        records->stream = NULL;
        records->source = -1;
        int status = tfenc_stream_open(ctx, "[job] input", files->paths[source],
                                       &records->stream);
        if (status != TFENC_OK)
            return status;
        records->source = source;
    }
    int by_line = files->compression[source] != TFENC_STREAM_PLAIN;
    records->segment_valid = 1;
    records->next_line = offset == 0 || by_line ? offset
                         : tfenc_position(source, offset) == records->share_start
                             ? records->start_line
                             : -1;
    if (stream_place(records) == offset)
        return TFENC_OK;
    int status = by_line ? tfenc_stream_seek_line(records->stream, offset)
                         : tfenc_stream_seek(records->stream, offset);
    if (status == TFENC_ERR_NOT_FOUND)
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: ends before %s %lld (changed while "
                           "reading?)", files->paths[source], by_line ? "line" : "byte",
                           (long long)(offset + by_line));
    if (status != TFENC_OK)
        return tfenc_error(ctx, status, "%s: %s", files->paths[source],
                           tfenc_stream_why(records->stream));
    return TFENC_OK;
}

/* Newlines in `source` before decompressed byte `offset`, or -1. Only
 * messages need it, so it costs nothing otherwise. */
static int64_t count_newlines(const tfenc_record_files *records, int source, int64_t offset)
{
    tfenc_stream *stream = NULL;
    if (tfenc_stream_open(NULL, "[job] input", records->files->paths[source], &stream)
        != TFENC_OK)
        return -1;
    int64_t newlines = 0;
    char *line = NULL;
    size_t capacity = 0, length = 0;
    while (tfenc_stream_offset(stream) < offset
           && tfenc_stream_getline(stream, &line, &capacity, &length) == TFENC_OK)
        if (tfenc_stream_offset(stream) <= offset && length > 0 && line[length - 1] == '\n')
            newlines++;
    int reached = tfenc_stream_offset(stream) >= offset;
    free(line);
    tfenc_stream_close(stream);
    return reached ? newlines : -1;
}

/* The 1-based line number, within its file, of the line just read (or
 * being read, when reading it failed). Not known when the stream entered a
 * plain file in the middle: the newlines before the line are counted
 * then, and the count is kept for the lines that follow. */
int64_t tfenc_record_files_line_number(tfenc_record_files *records)
{
    if (records->document_line < 0 && records->source >= 0) {
        int64_t before = count_newlines(records, records->source, records->line_byte);
        if (before >= 0) {
            records->document_line = before;
            records->next_line = before + 1;
        }
    }
    return records->document_line >= 0 ? records->document_line + 1 : -1;
}

void tfenc_record_files_line_document(const tfenc_record_files *records,
                                      tfenc_document *document)
{
    document->source = records->source;
    document->line = records->document_line >= 0 ? records->document_line + 1 : -1;
}

/* The position of stored byte `x` of the files laid end to end: in a plain
 * file the same byte, and a file read whole (which cannot be entered in
 * the middle) belongs whole to the share its first byte falls in, so a
 * byte inside it maps to the next file's start. */
static int64_t stored_to_position(const tfenc_record_files *records, int64_t x, int *source,
                                  int64_t *offset)
{
    const tfenc_corpus_files *files = records->files;
    int64_t base = 0;
    for (int i = 0; i < files->n; i++) {
        int64_t size = files->stored_size[i];
        if (x < base + size) {
            *source = i;
            *offset = x - base;
            if (files->whole[i])
                return x == base ? tfenc_position(i, 0) : tfenc_record_files_file_start(records, i + 1);
            return tfenc_position(i, x - base);
        }
        base += size;
    }
    *source = -1;
    return records->end_position;
}

/* Finds the first line that starts at or after stored byte `start` of the
 * files laid end to end. */
static int find_share_start(tfenc_context *ctx, tfenc_record_files *records, int64_t start)
{
    int source;
    int64_t offset;
    records->share_start = stored_to_position(records, start, &source, &offset);
    if (source < 0 || offset == 0 || records->files->whole[source])
        return TFENC_OK;
    /* Reading from the byte before the range tells whether the range starts
     * a line (that byte is a newline) or where the line in progress ends. */
    int status = position_stream(ctx, records, source, offset - 1);
    size_t got = 0;
    if (status == TFENC_OK) {
        status = tfenc_stream_getline(records->stream, &records->line, &records->line_capacity,
                                      &got);
        if (status != TFENC_OK && status != TFENC_ERR_NOT_FOUND)
            return tfenc_error(ctx, status, "%s: near byte %lld: %s",
                               records->files->paths[source], (long long)offset,
                               tfenc_stream_why(records->stream));
        status = TFENC_OK;
    }
    if (status == TFENC_OK) {
        int64_t next = offset - 1 + (int64_t)got;
        records->share_start = next >= records->files->stored_size[source]
                                   ? tfenc_record_files_file_start(records, source + 1)
                                   : tfenc_position(source, next);
    }
    return status;
}

int tfenc_record_files_rewind(tfenc_context *ctx, void *state)
{
    (void)ctx; /* the stream is positioned when the first line is read */
    tfenc_record_files *records = state;
    records->position = records->share_start;
    records->segment_valid = 0;
    return TFENC_OK;
}

int tfenc_record_files_probe_stream(tfenc_context *ctx, tfenc_corpus_files *files, int file)
{
    tfenc_stream *stream = NULL;
    int status = tfenc_stream_open(ctx, "[job] input", files->paths[file], &stream);
    if (status != TFENC_OK)
        return status;
    files->stored_size[file] = tfenc_stream_stored_size(stream);
    files->compression[file] = (uint8_t)tfenc_stream_compression(stream);
    files->whole[file] = files->compression[file] != TFENC_STREAM_PLAIN;
    tfenc_stream_close(stream);
    return TFENC_OK;
}

int tfenc_record_files_open(tfenc_context *ctx, tfenc_record_files *records,
                            tfenc_corpus_files *files, int share, int n_shares,
                            tfenc_record_probe probe, tfenc_reader_opened *opened)
{
    records->files = files;
    records->start_line = records->next_line = records->document_line = -1;
    records->source = -1;
    /* Every rank looks at every file's size and kind (compression: the
     * magic bytes) so that all cut the shares alike; regular files only:
     * shares are byte ranges, and a FIFO would block. */
    int64_t total = 0;
    for (int i = 0; i < files->n; i++) {
        int status = probe(ctx, files, i);
        if (status != TFENC_OK)
            return status;
        total += files->stored_size[i];
    }
    /* A plain file's places are byte offsets below bit 40 (a file alone
     * has no such limit: its positions are its offsets). */
    for (int i = 0; files->n > 1 && i < files->n; i++)
        if (!files->whole[i] && files->stored_size[i] > TFENC_POSITION_PLACE_MASK)
            return tfenc_error(ctx, TFENC_ERR_INPUT, "[job] input %s: %lld bytes, more than "
                               "the 1 TiB a plain file of a corpus of several may hold "
                               "(compress it, or split it)", files->paths[i],
                               (long long)files->stored_size[i]);
    records->end_position = files->n == 1 && !files->whole[0] ? files->stored_size[0]
                                                              : tfenc_position(files->n, 0);
    int source;
    int64_t offset;
    records->share_end = stored_to_position(
        records, tfenc_share_boundary(total, share + 1, n_shares), &source, &offset);
    int status = find_share_start(ctx, records, tfenc_share_boundary(total, share, n_shares));
    if (status != TFENC_OK)
        return status;
    opened->first_index = share == 0 ? 0 : -1;
    opened->end_position = records->end_position;
    return tfenc_record_files_rewind(ctx, records);
}

int tfenc_record_files_read_line(tfenc_context *ctx, tfenc_record_files *records,
                                 size_t *length, int64_t *line_start)
{
    const tfenc_corpus_files *files = records->files;
    size_t got = 0;
    int64_t line_byte = 0; /* decompressed offset of the line in its file */
    for (;;) {
        if (records->position >= records->share_end || records->position >= records->end_position)
            return TFENC_ERR_NOT_FOUND;
        int source = tfenc_position_source(records->position);
        int64_t offset = tfenc_position_place(records->position);
        if (files->n == 1 && files->compression[0] == TFENC_STREAM_PLAIN) {
            source = 0;
            offset = records->position;
        }
        if (!records->segment_valid || records->source != source
            || stream_place(records) != offset) {
            int status = position_stream(ctx, records, source, offset);
            if (status != TFENC_OK)
                return status;
        }
        line_byte = tfenc_stream_offset(records->stream);
        records->line_byte = line_byte;
        records->document_line = records->next_line;
        int status = tfenc_stream_getline(records->stream, &records->line,
                                          &records->line_capacity, &got);
        if (status == TFENC_OK) {
            if (records->next_line >= 0)
                records->next_line++;
            break;
        }
        if (status != TFENC_ERR_NOT_FOUND)
            return tfenc_error(ctx, status, "%s: line %lld: %s", files->paths[source],
                               (long long)tfenc_record_files_line_number(records),
                               tfenc_stream_why(records->stream));
        if (files->compression[source] == TFENC_STREAM_PLAIN && offset < files->stored_size[source])
            return tfenc_error(ctx, TFENC_ERR_IO, "%s: the file ended at byte %lld, before its "
                               "size of %lld bytes (changed while reading?)",
                               files->paths[source], (long long)offset,
                               (long long)files->stored_size[source]);
        records->position = tfenc_record_files_file_start(records, source + 1);
    }
    int source = records->source;
    /* A line without its end before the size the file had when opened: the
     * file was cut short while the job read it, and this line with it. */
    if (got > 0 && records->line[got - 1] != '\n'
        && files->compression[source] == TFENC_STREAM_PLAIN
        && line_byte + (int64_t)got < files->stored_size[source])
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: the file ended at byte %lld, before its "
                           "size of %lld bytes (changed while reading?)",
                           files->paths[source], (long long)(line_byte + (int64_t)got),
                           (long long)files->stored_size[source]);
    *line_start = records->position;
    records->position += files->compression[source] != TFENC_STREAM_PLAIN ? 1 : (int64_t)got;
    /* A plain file's end is known: step to the next file at once, so that
     * a window never starts at the end of the file before it. */
    if (files->n > 1 && files->compression[source] == TFENC_STREAM_PLAIN
        && tfenc_position_place(records->position) >= files->stored_size[source])
        records->position = tfenc_record_files_file_start(records, source + 1);
    size_t n = got;
    if (n > 0 && records->line[n - 1] == '\n')
        n--;
    if (n > 0 && records->line[n - 1] == '\r')
        n--;
    records->line[n] = '\0';
    const char *nul = memchr(records->line, '\0', n);
    if (nul != NULL)
        return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: line %lld: NUL byte at byte offset %lld "
                           "(is the file UTF-16 or binary?)", tfenc_record_files_path(records),
                           (long long)tfenc_record_files_line_number(records),
                           (long long)(line_byte + (nul - records->line)));
    *length = n;
    return TFENC_OK;
}

/* The counting pass keeps what it skipped per file, for the output's shard
 * list (a skipped record has no row, and its line still counts). */
void tfenc_record_files_note_skipped(tfenc_record_files *records)
{
    if (!records->files->counted)
        records->files->skipped[records->source]++;
}

void tfenc_record_files_set_start_line(void *state, const int64_t *earlier_lines)
{
    tfenc_record_files *records = state;
    if (records->share_start >= records->end_position)
        return;
    records->start_line = earlier_lines[records->files->n == 1
                                            ? 0
                                            : tfenc_position_source(records->share_start)];
}

int tfenc_record_files_select(tfenc_context *ctx, void *state, const tfenc_corpus_range *range)
{
    tfenc_record_files *records = state;
    records->share_start = range->byte_start;
    records->share_end = range->byte_end;
    records->start_line = range->first_line_number - 1;
    return tfenc_record_files_rewind(ctx, records);
}

int tfenc_record_files_window_starts(tfenc_context *ctx, void *state, int64_t first_index,
                                     tfenc_wanted_documents *wanted, int64_t **starts,
                                     int64_t **line_numbers, int64_t *n_starts)
{
    tfenc_record_files *records = state;
    const tfenc_corpus_files *files = records->files;
    *starts = NULL;
    if (line_numbers != NULL)
        *line_numbers = NULL;
    *n_starts = 0;
    int status = tfenc_record_files_rewind(ctx, records);
    int64_t capacity = 0;
    /* Only the line ends are looked at: no record is parsed again; and a
     * file read whole, whose places are record numbers, is not read again
     * at all once counted: its records' places are 0, 1, ... Records left
     * out (null_text = skip) are the exception: only parsing tells which
     * records are documents, so such a job reads its documents whole. */
    const int by_document = records->leaves_records_out;
    for (int64_t local = 0; status == TFENC_OK;) {
        int64_t line_start, lines = 1, line = -1;
        int source = tfenc_position_source(records->position);
        if (files->counted && !by_document && records->position < records->share_end
            && records->position < records->end_position && files->whole[source]
            && tfenc_position_place(records->position) == 0) {
            lines = files->documents[source];
            line_start = records->position;
            line = 0;
            records->position = tfenc_record_files_file_start(records, source + 1);
        } else if (by_document) {
            tfenc_document document;
            memset(&document, 0, sizeof document);
            status = records->next(ctx, records, &document);
            if (status != TFENC_OK)
                break;
            /* The document's own line: skipped lines lie before it. */
            line = records->document_line;
            line_start = files->whole[document.source]
                             ? tfenc_position(document.source, line)
                             : (files->n == 1 ? 0 : tfenc_position(document.source, 0))
                                   + records->line_byte;
        } else {
            size_t length;
            status = tfenc_record_files_read_line(ctx, records, &length, &line_start);
            if (status != TFENC_OK)
                break;
            line = records->document_line;
        }
        for (int64_t k = 0; k < lines; k++, local++) {
            if (!tfenc_document_wanted(wanted, first_index + local))
                continue;
            if (*n_starts == capacity) {
                capacity = capacity > 0 ? 2 * capacity : 64;
                int64_t *grown = realloc(*starts, (size_t)capacity * sizeof *grown);
                if (grown != NULL)
                    *starts = grown;
                int64_t *grown_lines = line_numbers == NULL ? NULL
                    : realloc(*line_numbers, (size_t)capacity * sizeof *grown_lines);
                if (grown_lines != NULL)
                    *line_numbers = grown_lines;
                if (grown == NULL || (line_numbers != NULL && grown_lines == NULL)) {
                    status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory",
                                         files->paths[0]);
                    break;
                }
            }
            (*starts)[*n_starts] = line_start + k;
            if (line_numbers != NULL)
                (*line_numbers)[*n_starts] = line >= 0 ? line + k + 1 : 0;
            (*n_starts)++;
        }
    }
    if (status == TFENC_ERR_NOT_FOUND)
        status = tfenc_record_files_rewind(ctx, records);
    if (status != TFENC_OK) {
        free(*starts);
        *starts = NULL;
        if (line_numbers != NULL) {
            free(*line_numbers);
            *line_numbers = NULL;
        }
        *n_starts = 0;
    }
    return status;
}

int tfenc_record_fields_copy(tfenc_context *ctx, const tfenc_corpus_options *options,
                             tfenc_record_fields *fields)
{
    fields->text = strdup(options->text_field != NULL ? options->text_field : "text");
    fields->pair = options->text_pair_field != NULL ? strdup(options->text_pair_field) : NULL;
    fields->id = options->id_field != NULL ? strdup(options->id_field) : NULL;
    if (fields->text == NULL || (options->text_pair_field != NULL && fields->pair == NULL)
        || (options->id_field != NULL && fields->id == NULL))
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", options->path);
    return TFENC_OK;
}

void tfenc_record_fields_free(tfenc_record_fields *fields)
{
    free(fields->text);
    free(fields->pair);
    free(fields->id);
}

void tfenc_record_files_describe_fields(const tfenc_corpus_options *options, const char *field,
                                        char *line, size_t size)
{
    int n = snprintf(line, size, "the text in %s '%s'", field,
                     options->text_field != NULL ? options->text_field : "text");
    if (options->text_pair_field != NULL && n >= 0 && (size_t)n < size)
        n += snprintf(line + n, size - (size_t)n, ", the pair's second in %s '%s'", field,
                      options->text_pair_field);
    if (options->id_field != NULL && n >= 0 && (size_t)n < size)
        n += snprintf(line + n, size - (size_t)n, ", ids in %s '%s'", field, options->id_field);
    for (int k = 0; k < options->n_keep_fields && n >= 0 && (size_t)n < size; k++)
        n += snprintf(line + n, size - (size_t)n, "%s'%s'", k == 0 ? ", keeping " : ", ",
                      options->keep_fields[k]);
    if (options->null_text != TFENC_NULL_TEXT_ERROR && n >= 0 && (size_t)n < size)
        snprintf(line + n, size - (size_t)n, ", null texts %s",
                 options->null_text == TFENC_NULL_TEXT_SKIP ? "left out" : "read as empty");
}

void tfenc_record_files_release(tfenc_record_files *records)
{
    tfenc_stream_close(records->stream);
    records->stream = NULL;
    free(records->line);
    records->line = NULL;
}
