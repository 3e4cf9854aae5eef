/* Corpus readers: each rank streams only its share of the corpus's files
 * (text and JSON Lines lines, Parquet rows, HDF5 token ids through
 * hdf5_corpus.h), and every malformed input is reported with its file and
 * line (row, or dataset). */
#include "config.h"
#include "input/corpus.h"
#include "base/files.h"
#include "base/names.h"
#include "input/hdf5_corpus.h"
#include "input/jsonl_record.h"
#include "input/stream.h"
#ifdef HAVE_PARQUET
#include "input/parquet_reader.h"
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/context.h"

struct tfenc_corpus {
    tfenc_corpus_format format;
    char *path;
    char *text_field;
    char *pair_field;     /* the second text of a pair, or NULL */
    char *id_field;
    size_t max_id_bytes;
    int64_t first_index; /* global index of the share's first document, or -1 */
    int64_t next_local;  /* local index the next document gets */

    /* Text and JSON Lines: positions are source_of/offset_of pairs (below). */
    int n_sources;
    char **source_paths;  /* [n_sources] in order */
    int64_t *stored_size; /* [n_sources] bytes on disk */
    uint8_t *compression; /* [n_sources] tfenc_stream_codec */
    int64_t *source_documents; /* [n_sources] this share's documents per source, once counted */
    int64_t *source_skipped;   /* [n_sources] this share's records skipped per source (null
                                * texts under null_text = skip), once counted */
    int64_t *source_lines;     /* [n_sources] this share's lines (rows) per source, skipped
                                * ones included, once counted */
    int counted;
    int64_t end_position; /* the corpus's end: past the last source */
    tfenc_stream *stream; /* the source being read, or NULL */
    int stream_source;    /* its index, or -1 */
    int segment_valid;      /* 0 after a rewind or select: the stream must be positioned */
    /* Line numbers within the source, 0-based: of the next line the stream
     * gives, of the line (row) just read, and of the line at share_start
     * (told by the driver, or by the range a window was selected with);
     * -1 when not known (a plain source entered in the middle): messages
     * then count the newlines before the line. */
    int64_t next_line;
    int64_t document_line;
    int64_t start_line;
    int64_t line_byte;      /* decompressed offset of the line just read in its source */
    tfenc_null_text null_text;
#ifdef HAVE_PARQUET
    tfenc_parquet *parquet; /* the Parquet source being read, or NULL */
    int parquet_source;     /* its index, or -1 */
    int parquet_group;      /* the row group loaded, or -1 */
    int64_t group_first;    /* its first row */
    int64_t group_end;      /* the row after its last */
#endif
    int64_t share_end;   /* lines starting at or after this position belong to the next share */
    int64_t share_start; /* first line start at or after the share's byte range start */
    int64_t position;    /* position of the next line start */
    char *line;
    size_t line_capacity;
    tfenc_jsonl_record record; /* the current JSON Lines line, kept while its document lives */

    tfenc_hdf5_corpus *hdf5; /* HDF5 token ids: the reader (hdf5_corpus.h) */
};

/* ------------------------------------------------------------ helpers */

static char *copy_string(const char *text)
{
    if (text == NULL)
        return NULL;
    size_t size = strlen(text) + 1;
    char *copy = malloc(size);
    if (copy != NULL)
        memcpy(copy, text, size);
    return copy;
}

const char *const tfenc_corpus_format_names[] = {"text", "jsonl", "hdf5", "parquet", "auto", NULL};
const char *const tfenc_null_text_names[] = {"error", "empty", "skip", NULL};

int tfenc_corpus_format_from_name(const char *name, tfenc_corpus_format *format)
{
    int index = tfenc_name_index(tfenc_corpus_format_names, name);
    if (index < 0 || index == TFENC_CORPUS_AUTO)
        return TFENC_ERR_NOT_FOUND;
    *format = (tfenc_corpus_format)index;
    return TFENC_OK;
}

/* The extensions compressed shards carry after their format's. */
static const char *const compression_extensions[] = {".gz", ".zst", ".zstd", ".xz", NULL};

tfenc_corpus_format tfenc_corpus_format_from_path(const char *path)
{
    const char *dot = path != NULL ? strrchr(path, '.') : NULL;
    if (dot == NULL || strchr(dot, '/') != NULL)
        return TFENC_CORPUS_TEXT;
    for (int i = 0; compression_extensions[i] != NULL; i++)
        if (strcasecmp(dot, compression_extensions[i]) == 0) {
            /* "c4-0001.json.gz": the format's extension comes before. */
            const char *format_dot = dot;
            while (format_dot > path && *--format_dot != '.' && *format_dot != '/')
                ;
            if (*format_dot != '.')
                return TFENC_CORPUS_TEXT;
            char format_extension[16];
            size_t n = (size_t)(dot - format_dot);
            if (n >= sizeof format_extension)
                return TFENC_CORPUS_TEXT;
            memcpy(format_extension, format_dot, n);
            format_extension[n] = '\0';
            /* C4 and Dolma name their JSON Lines shards "*.json.gz". */
            if (strcasecmp(format_extension, ".json") == 0)
                return TFENC_CORPUS_JSONL;
            return tfenc_corpus_format_from_path(format_extension);
        }
    if (strcasecmp(dot, ".jsonl") == 0 || strcasecmp(dot, ".ndjson") == 0)
        return TFENC_CORPUS_JSONL;
    if (strcasecmp(dot, ".h5") == 0 || strcasecmp(dot, ".hdf5") == 0)
        return TFENC_CORPUS_HDF5;
    if (strcasecmp(dot, ".parquet") == 0 || strcasecmp(dot, ".pq") == 0)
        return TFENC_CORPUS_PARQUET;
    return TFENC_CORPUS_TEXT;
}

const char *tfenc_corpus_format_name(tfenc_corpus_format format)
{
    return tfenc_name_of(tfenc_corpus_format_names, TFENC_CORPUS_AUTO, format);
}

int64_t tfenc_corpus_first_index(const tfenc_corpus *corpus)
{
    return corpus->first_index;
}

void tfenc_corpus_set_first_index(tfenc_corpus *corpus, int64_t first_index)
{
    if (corpus->format != TFENC_CORPUS_HDF5)
        corpus->first_index = first_index;
}

/* -------------------------------------------------- text and JSON Lines */

/* Reading positions name a source and a place in it: the source's index
 * above bit 40 (up to 2^22 sources), so positions of later sources are
 * larger and one int64 orders every line of the corpus. The place is the
 * byte offset in a plain source (which seeks) and the 0-based line number in
 * a compressed one: reaching either means decoding from the start anyway,
 * and line numbers are known from the counting pass without a second pass
 * over the decompressed bytes (collect_line_starts). A single plain file's
 * positions are its byte offsets. */
#define SOURCE_SHIFT 40
#define OFFSET_MASK (((int64_t)1 << SOURCE_SHIFT) - 1)

static int64_t position_of(int source, int64_t offset)
{
    return ((int64_t)source << SOURCE_SHIFT) + offset;
}

static int source_of(int64_t position)
{
    return (int)(position >> SOURCE_SHIFT);
}

static int64_t offset_of(int64_t position)
{
    return position & OFFSET_MASK;
}

/* Where source `source` starts; past the last one, the corpus's end. */
static int64_t source_start(const tfenc_corpus *corpus, int source)
{
    return source >= corpus->n_sources ? corpus->end_position : position_of(source, 0);
}

const char *tfenc_corpus_source_path(const tfenc_corpus *corpus, int source)
{
    return source >= 0 && source < corpus->n_sources ? corpus->source_paths[source] : NULL;
}

int tfenc_corpus_n_sources(const tfenc_corpus *corpus)
{
    return corpus->n_sources;
}

int64_t tfenc_corpus_source_size(const tfenc_corpus *corpus, int source)
{
    return corpus->stored_size[source];
}

tfenc_stream_codec tfenc_corpus_source_compression(const tfenc_corpus *corpus, int source)
{
    return (tfenc_stream_codec)corpus->compression[source];
}

/* The path named in messages about the line being read. */
static const char *current_path(const tfenc_corpus *corpus)
{
    return corpus->stream_source >= 0 ? corpus->source_paths[corpus->stream_source]
                                      : corpus->source_paths[0];
}

/* Byte k*size/n without overflowing 64 bits for any file size. */
static int64_t share_boundary(int64_t size, int share, int n_shares)
{
    return (size / n_shares) * share + (size % n_shares) * share / n_shares;
}

/* Sources a share takes whole, whose places are line (or row) numbers:
 * compressed files and Parquet files. */
static int placed_by_line(const tfenc_corpus *corpus, int source)
{
    return corpus->compression[source] != TFENC_STREAM_PLAIN
           || corpus->format == TFENC_CORPUS_PARQUET;
}

int tfenc_corpus_position_source(int64_t position)
{
    return source_of(position);
}

int tfenc_corpus_source_whole(const tfenc_corpus *corpus, int source)
{
    return source >= 0 && source < corpus->n_sources && placed_by_line(corpus, source);
}

/* Where the open stream is, in its source's kind of place. */
static int64_t stream_place(const tfenc_corpus *corpus)
{
    return corpus->compression[corpus->stream_source] != TFENC_STREAM_PLAIN
               ? tfenc_stream_line(corpus->stream) : tfenc_stream_offset(corpus->stream);
}

/* Positions the stream on `source` at place `offset` (a byte offset or,
 * compressed, a line), opening the
 * source if another one is open, and starts a new segment there. */
static int position_stream(tfenc_context *ctx, tfenc_corpus *corpus, int source, int64_t offset)
{
    if (corpus->stream_source != source) {
        tfenc_stream_close(corpus->stream);
        corpus->stream = NULL;
        corpus->stream_source = -1;
        int status = tfenc_stream_open(ctx, "[job] input", corpus->source_paths[source],
                                       &corpus->stream);
        if (status != TFENC_OK)
            return status;
        corpus->stream_source = source;
    }
    int by_line = corpus->compression[source] != TFENC_STREAM_PLAIN;
    corpus->segment_valid = 1;
    corpus->next_line = offset == 0 || by_line ? offset
                        : position_of(source, offset) == corpus->share_start ? corpus->start_line
                                                                              : -1;
    if (stream_place(corpus) == offset)
        return TFENC_OK;
    int status = by_line ? tfenc_stream_seek_line(corpus->stream, offset)
                         : tfenc_stream_seek(corpus->stream, offset);
    if (status == TFENC_ERR_NOT_FOUND)
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: ends before %s %lld (changed while "
                           "reading?)", corpus->source_paths[source], by_line ? "line" : "byte",
                           (long long)(offset + by_line));
    if (status != TFENC_OK)
        return tfenc_error(ctx, status, "%s: %s", corpus->source_paths[source],
                           tfenc_stream_why(corpus->stream));
    return TFENC_OK;
}

/* Newlines in `source` before decompressed byte `offset`, or -1. Only
 * messages need it, so it costs nothing otherwise. */
static int64_t count_newlines(const tfenc_corpus *corpus, int source, int64_t offset)
{
    tfenc_stream *stream = NULL;
    if (tfenc_stream_open(NULL, "[job] input", corpus->source_paths[source], &stream) != TFENC_OK)
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

/* The 1-based line number, within its source, of the line just read (or
 * being read, when reading it failed). Not known when the stream entered a
 * plain source in the middle: the newlines before the line are counted
 * then, and the count is kept for the lines that follow. */
static int64_t line_number(tfenc_corpus *corpus)
{
    if (corpus->document_line < 0 && corpus->stream_source >= 0) {
        int64_t before = count_newlines(corpus, corpus->stream_source, corpus->line_byte);
        if (before >= 0) {
            corpus->document_line = before;
            corpus->next_line = before + 1;
        }
    }
    return corpus->document_line >= 0 ? corpus->document_line + 1 : -1;
}

/* The position of stored byte `x` of the sources laid end to end: in a
 * plain source the same byte, and a compressed source (which cannot be
 * entered in the middle) belongs whole to the share its first byte falls
 * in, so a byte inside it maps to the next source's start. */
static int64_t stored_to_position(const tfenc_corpus *corpus, int64_t x, int *source,
                                  int64_t *offset)
{
    int64_t base = 0;
    for (int i = 0; i < corpus->n_sources; i++) {
        int64_t size = corpus->stored_size[i];
        if (x < base + size) {
            *source = i;
            *offset = x - base;
            if (placed_by_line(corpus, i))
                return x == base ? position_of(i, 0) : source_start(corpus, i + 1);
            return position_of(i, x - base);
        }
        base += size;
    }
    *source = -1;
    return corpus->end_position;
}

/* Finds the first line that starts at or after stored byte `start` of the
 * sources laid end to end. */
static int find_share_start(tfenc_context *ctx, tfenc_corpus *corpus, int64_t start)
{
    int source;
    int64_t offset;
    corpus->share_start = stored_to_position(corpus, start, &source, &offset);
    if (source < 0 || offset == 0 || placed_by_line(corpus, source))
        return TFENC_OK;
    /* Reading from the byte before the range tells whether the range starts
     * a line (that byte is a newline) or where the line in progress ends. */
    int status = position_stream(ctx, corpus, source, offset - 1);
    size_t got = 0;
    if (status == TFENC_OK) {
        status = tfenc_stream_getline(corpus->stream, &corpus->line, &corpus->line_capacity, &got);
        if (status != TFENC_OK && status != TFENC_ERR_NOT_FOUND)
            return tfenc_error(ctx, status, "%s: near byte %lld: %s",
                               corpus->source_paths[source], (long long)offset,
                               tfenc_stream_why(corpus->stream));
        status = TFENC_OK;
    }
    if (status == TFENC_OK) {
        int64_t next = offset - 1 + (int64_t)got;
        corpus->share_start = next >= corpus->stored_size[source] ? source_start(corpus, source + 1)
                                                                  : position_of(source, next);
    }
    return status;
}

static int text_rewind(tfenc_context *ctx, tfenc_corpus *corpus)
{
    (void)ctx; /* the stream is positioned when the first line is read */
    corpus->position = corpus->share_start;
    corpus->segment_valid = 0;
    return TFENC_OK;
}

static int probe_parquet(tfenc_context *ctx, tfenc_corpus *corpus, int source);

static int open_text(tfenc_context *ctx, tfenc_corpus *corpus, int share, int n_shares)
{
    /* Every rank looks at every source's size and compression (the magic
     * bytes) so that all cut the shares alike; regular files only: shares
     * are byte ranges, and a FIFO would block. */
    int64_t total = 0;
    for (int i = 0; i < corpus->n_sources; i++) {
        tfenc_stream *stream = NULL;
        /* Parquet files are opened by Arrow: only checked and sized here. */
        int status = corpus->format == TFENC_CORPUS_PARQUET
                         ? probe_parquet(ctx, corpus, i)
                         : tfenc_stream_open(ctx, "[job] input", corpus->source_paths[i], &stream);
        if (status == TFENC_OK && stream == NULL) {
            total += corpus->stored_size[i];
            continue;
        }
        if (status != TFENC_OK)
            return status;
        corpus->stored_size[i] = tfenc_stream_stored_size(stream);
        corpus->compression[i] = (uint8_t)tfenc_stream_compression(stream);
        tfenc_stream_close(stream);
        total += corpus->stored_size[i];
    }
    /* A plain file's places are byte offsets below bit 40 (a file alone
     * has no such limit: its positions are its offsets). */
    for (int i = 0; corpus->n_sources > 1 && i < corpus->n_sources; i++)
        if (!placed_by_line(corpus, i) && corpus->stored_size[i] > OFFSET_MASK)
            return tfenc_error(ctx, TFENC_ERR_INPUT, "[job] input %s: %lld bytes, more than "
                               "the 1 TiB a plain file of a corpus of several may hold "
                               "(compress it, or split it)", corpus->source_paths[i],
                               (long long)corpus->stored_size[i]);
    corpus->end_position = corpus->n_sources == 1 && !placed_by_line(corpus, 0)
                               ? corpus->stored_size[0]
                               : position_of(corpus->n_sources, 0);
    int source;
    int64_t offset;
    corpus->share_end = stored_to_position(corpus, share_boundary(total, share + 1, n_shares),
                                           &source, &offset);
    int status = find_share_start(ctx, corpus, share_boundary(total, share, n_shares));
    if (status != TFENC_OK)
        return status;
    corpus->first_index = share == 0 ? 0 : -1;
    return text_rewind(ctx, corpus);
}

/* Reads the next line of the share into corpus->line without its line end,
 * and where it starts into *line_start. TFENC_ERR_NOT_FOUND when the share
 * has no more lines. */
static int read_line(tfenc_context *ctx, tfenc_corpus *corpus, size_t *length,
                     int64_t *line_start)
{
    size_t got = 0;
    int64_t line_byte = 0; /* decompressed offset of the line in its source */
    for (;;) {
        if (corpus->position >= corpus->share_end || corpus->position >= corpus->end_position)
            return TFENC_ERR_NOT_FOUND;
        int source = source_of(corpus->position);
        int64_t offset = offset_of(corpus->position);
        if (corpus->n_sources == 1 && corpus->compression[0] == TFENC_STREAM_PLAIN) {
            source = 0;
            offset = corpus->position;
        }
        if (!corpus->segment_valid || corpus->stream_source != source
            || stream_place(corpus) != offset) {
            int status = position_stream(ctx, corpus, source, offset);
            if (status != TFENC_OK)
                return status;
        }
        line_byte = tfenc_stream_offset(corpus->stream);
        corpus->line_byte = line_byte;
        corpus->document_line = corpus->next_line;
        int status = tfenc_stream_getline(corpus->stream, &corpus->line, &corpus->line_capacity,
                                          &got);
        if (status == TFENC_OK) {
            if (corpus->next_line >= 0)
                corpus->next_line++;
            break;
        }
        if (status != TFENC_ERR_NOT_FOUND)
            return tfenc_error(ctx, status, "%s: line %lld: %s", corpus->source_paths[source],
                               (long long)line_number(corpus),
                               tfenc_stream_why(corpus->stream));
        if (corpus->compression[source] == TFENC_STREAM_PLAIN
            && offset < corpus->stored_size[source])
            return tfenc_error(ctx, TFENC_ERR_IO, "%s: the file ended at byte %lld, before its "
                               "size of %lld bytes (changed while reading?)",
                               corpus->source_paths[source], (long long)offset,
                               (long long)corpus->stored_size[source]);
        corpus->position = source_start(corpus, source + 1);
    }
    int source = corpus->stream_source;
    /* A line without its end before the size the file had when opened: the
     * file was cut short while the job read it, and this line with it. */
    if (got > 0 && corpus->line[got - 1] != '\n' && corpus->compression[source] == TFENC_STREAM_PLAIN
        && line_byte + (int64_t)got < corpus->stored_size[source])
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: the file ended at byte %lld, before its "
                           "size of %lld bytes (changed while reading?)",
                           corpus->source_paths[source], (long long)(line_byte + (int64_t)got),
                           (long long)corpus->stored_size[source]);
    *line_start = corpus->position;
    corpus->position += corpus->compression[source] != TFENC_STREAM_PLAIN ? 1 : (int64_t)got;
    /* A plain source's end is known: step to the next source at once, so
     * that a window never starts at the end of the source before it. */
    if (corpus->n_sources > 1 && corpus->compression[source] == TFENC_STREAM_PLAIN
        && offset_of(corpus->position) >= corpus->stored_size[source])
        corpus->position = source_start(corpus, source + 1);
    size_t n = got;
    if (n > 0 && corpus->line[n - 1] == '\n')
        n--;
    if (n > 0 && corpus->line[n - 1] == '\r')
        n--;
    corpus->line[n] = '\0';
    const char *nul = memchr(corpus->line, '\0', n);
    if (nul != NULL)
        return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: line %lld: NUL byte at byte offset %lld "
                           "(is the file UTF-16 or binary?)", current_path(corpus),
                           (long long)line_number(corpus),
                           (long long)(line_byte + (nul - corpus->line)));
    *length = n;
    return TFENC_OK;
}

/* The counting pass keeps what it skipped per source, for the output's
 * shard list (a skipped record has no row, and its line still counts). */
static void note_skipped(tfenc_corpus *corpus, int source)
{
    if (!corpus->counted)
        corpus->source_skipped[source]++;
}

/* --------------------------------------------------------------- Parquet */

/* Checks a Parquet source like any file and notes its size; Arrow opens
 * it when it is read. */
static int probe_parquet(tfenc_context *ctx, tfenc_corpus *corpus, int source)
{
    const char *path = corpus->source_paths[source];
    int status = tfenc_file_check_regular(ctx, "[job] input", path);
    struct stat info;
    if (status == TFENC_OK && stat(path, &info) != 0)
        status = tfenc_error(ctx, TFENC_ERR_IO, "[job] input %s: cannot examine: %s", path,
                             strerror(errno));
    if (status == TFENC_OK)
        corpus->stored_size[source] = (int64_t)info.st_size;
#ifndef HAVE_PARQUET
    if (status == TFENC_OK)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "[job] input %s: this tfenc was built "
                             "without Parquet (Apache Arrow was not found: run "
                             "tests/setup-python-venv and configure --with-parquet)", path);
#endif
    return status;
}

#ifdef HAVE_PARQUET
/* The row at corpus->position as the next document: the source opened and
 * its row group loaded as needed; rows past a file's end move on to the
 * next file. */
static int next_parquet(tfenc_context *ctx, tfenc_corpus *corpus, tfenc_document *document)
{
    char why[512];
    for (;;) {
        if (corpus->position >= corpus->share_end || corpus->position >= corpus->end_position)
            return TFENC_ERR_NOT_FOUND;
        int source = source_of(corpus->position);
        int64_t row = offset_of(corpus->position);
        const char *path = corpus->source_paths[source];
        if (corpus->parquet_source != source) {
            tfenc_parquet_close(corpus->parquet);
            corpus->parquet = NULL;
            corpus->parquet_source = corpus->parquet_group = -1;
            int status = tfenc_parquet_open(path, corpus->text_field, corpus->pair_field,
                                            corpus->id_field,
                                            &corpus->parquet, why, sizeof why);
            if (status != TFENC_OK)
                return tfenc_error(ctx, status, "%s: %s", path, why);
            corpus->parquet_source = source;
        }
        if (row >= tfenc_parquet_rows(corpus->parquet)) {
            corpus->position = source_start(corpus, source + 1);
            continue;
        }
        if (corpus->parquet_group < 0 || row < corpus->group_first || row >= corpus->group_end) {
            int64_t first = 0;
            int group = 0, n_groups = tfenc_parquet_row_groups(corpus->parquet);
            while (group < n_groups && first + tfenc_parquet_row_group_rows(corpus->parquet,
                                                                            group) <= row)
                first += tfenc_parquet_row_group_rows(corpus->parquet, group++);
            corpus->parquet_group = -1;
            int status = tfenc_parquet_load_row_group(corpus->parquet, group, why, sizeof why);
            if (status != TFENC_OK)
                return tfenc_error(ctx, status, "%s: row group %d: %s", path, group, why);
            corpus->parquet_group = group;
            corpus->group_first = first;
            corpus->group_end = first + tfenc_parquet_row_group_rows(corpus->parquet, group);
        }
        const char *text, *id;
        size_t length, id_length;
        tfenc_parquet_row(corpus->parquet, row - corpus->group_first, &text, &length, &id,
                          &id_length);
        corpus->stream_source = source; /* counted per source like a stream's lines */
        corpus->document_line = row;
        if (text == NULL && corpus->null_text == TFENC_NULL_TEXT_ERROR)
            return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: row %lld (row group %d): column '%s' "
                               "is null (set [job] null_text = empty to read it as an empty "
                               "document, or skip to leave it out)", path, (long long)row,
                               corpus->parquet_group, corpus->text_field);
        if (text == NULL && corpus->null_text == TFENC_NULL_TEXT_SKIP) {
            corpus->position++;
            note_skipped(corpus, source);
            continue;
        }
        if (corpus->id_field != NULL && id == NULL)
            return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: row %lld (row group %d): id column "
                               "'%s' is null", path, (long long)row, corpus->parquet_group,
                               corpus->id_field);
        if (corpus->max_id_bytes > 0 && id != NULL && id_length > corpus->max_id_bytes)
            return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: row %lld (row group %d): id column "
                               "'%s' is %zu bytes long, more than [job] max_id_bytes = %zu",
                               path, (long long)row, corpus->parquet_group, corpus->id_field,
                               id_length, corpus->max_id_bytes);
        const char *nul = text != NULL ? memchr(text, '\0', length) : NULL;
        if (nul != NULL)
            return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: row %lld (row group %d): NUL byte at "
                               "byte %lld of the text", path, (long long)row,
                               corpus->parquet_group, (long long)(nul - text));
        document->text = text != NULL ? text : "";
        document->text_length = length;
        if (corpus->pair_field != NULL) {
            const char *pair;
            size_t pair_length;
            tfenc_parquet_pair_text(corpus->parquet, row - corpus->group_first, &pair,
                                    &pair_length);
            if (pair == NULL && corpus->null_text == TFENC_NULL_TEXT_ERROR)
                return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: row %lld (row group %d): column "
                                   "'%s' (text_pair_field) is null (set [job] null_text = empty "
                                   "to read it as an empty text, or skip to leave the pair out)",
                                   path, (long long)row, corpus->parquet_group,
                                   corpus->pair_field);
            if (pair == NULL && corpus->null_text == TFENC_NULL_TEXT_SKIP) {
                corpus->position++;
                note_skipped(corpus, source);
                continue;
            }
            nul = pair != NULL ? memchr(pair, '\0', pair_length) : NULL;
            if (nul != NULL)
                return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: row %lld (row group %d): NUL byte "
                                   "at byte %lld of column '%s' (text_pair_field)", path,
                                   (long long)row, corpus->parquet_group, (long long)(nul - pair),
                                   corpus->pair_field);
            document->text_pair = pair != NULL ? pair : "";
            document->text_pair_length = pair_length;
        }
        document->id = id;
        document->id_length = id_length;
        corpus->position++;
        return TFENC_OK;
    }
}
#endif

/* The line just read as a JSON Lines record (jsonl_record.h). */
static int next_jsonl(tfenc_context *ctx, tfenc_corpus *corpus, size_t length,
                      tfenc_document *document)
{
    const tfenc_jsonl_fields fields = {.text_field = corpus->text_field,
                                       .pair_field = corpus->pair_field,
                                       .id_field = corpus->id_field,
                                       .max_id_bytes = corpus->max_id_bytes,
                                       .null_text = corpus->null_text};
    char why[512];
    int status = tfenc_jsonl_record_read(&fields, corpus->line, length, &corpus->record, document,
                                         why, sizeof why);
    if (status == TFENC_ERR_INPUT)
        return tfenc_error(ctx, status, "%s: line %lld%s", current_path(corpus),
                           (long long)line_number(corpus), why);
    return status;
}

static int next_text(tfenc_context *ctx, tfenc_corpus *corpus, tfenc_document *document)
{
#ifdef HAVE_PARQUET
    if (corpus->format == TFENC_CORPUS_PARQUET)
        return next_parquet(ctx, corpus, document);
#endif
    for (;;) {
        size_t length = 0;
        int64_t line_start;
        int status = read_line(ctx, corpus, &length, &line_start);
        if (status != TFENC_OK)
            return status;
        if (corpus->format != TFENC_CORPUS_JSONL) {
            document->text = corpus->line;
            document->text_length = length;
            return TFENC_OK;
        }
        status = next_jsonl(ctx, corpus, length, document);
        if (status != TFENC_JSONL_SKIPPED)
            return status;
        tfenc_jsonl_record_clear(&corpus->record);
        note_skipped(corpus, corpus->stream_source);
    }
}

/* ------------------------------------------------------------ interface */

/* The sources named by the options, or the path alone. */
static int copy_sources(tfenc_context *ctx, tfenc_corpus *corpus,
                        const tfenc_corpus_options *options)
{
    int n = options->n_sources > 0 ? options->n_sources : 1;
    corpus->source_paths = calloc((size_t)n, sizeof *corpus->source_paths);
    corpus->stored_size = calloc((size_t)n, sizeof *corpus->stored_size);
    corpus->compression = calloc((size_t)n, sizeof *corpus->compression);
    corpus->source_documents = calloc((size_t)n, sizeof *corpus->source_documents);
    corpus->source_skipped = calloc((size_t)n, sizeof *corpus->source_skipped);
    corpus->source_lines = calloc((size_t)n, sizeof *corpus->source_lines);
    if (corpus->source_paths == NULL || corpus->stored_size == NULL || corpus->compression == NULL
        || corpus->source_documents == NULL || corpus->source_skipped == NULL
        || corpus->source_lines == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", options->path);
    corpus->n_sources = n;
    for (int i = 0; i < n; i++)
        if ((corpus->source_paths[i] = copy_string(options->n_sources > 0 ? options->sources[i]
                                                                         : options->path)) == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", options->path);
    return TFENC_OK;
}

int tfenc_corpus_open(tfenc_context *ctx, const tfenc_corpus_options *options, int share,
                      int n_shares, tfenc_corpus **corpus_out)
{
    *corpus_out = NULL;
    if (options == NULL || options->path == NULL)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "corpus: no input path given");
    if (n_shares < 1 || share < 0 || share >= n_shares)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: share %d of %d does not exist",
                           options->path, share, n_shares);
    tfenc_corpus *corpus = calloc(1, sizeof *corpus);
    if (corpus == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", options->path);
    corpus->format = options->format;
    corpus->first_index = -1;
    corpus->path = copy_string(options->path);
    corpus->text_field = copy_string(options->text_field != NULL ? options->text_field : "text");
    corpus->id_field = copy_string(options->id_field);
    corpus->pair_field = copy_string(options->text_pair_field);
    corpus->max_id_bytes = options->max_id_bytes;
    corpus->null_text = options->null_text;
    corpus->start_line = corpus->next_line = corpus->document_line = -1;
    corpus->stream_source = -1;
#ifdef HAVE_PARQUET
    corpus->parquet_source = corpus->parquet_group = -1;
#endif
    int status = copy_sources(ctx, corpus, options);
    if (status == TFENC_OK && (corpus->path == NULL || corpus->text_field == NULL
        || (options->id_field != NULL && corpus->id_field == NULL)
        || (options->text_pair_field != NULL && corpus->pair_field == NULL)))
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", options->path);
    if (status != TFENC_OK)
        ;
    else if (corpus->pair_field != NULL && corpus->format != TFENC_CORPUS_JSONL
             && corpus->format != TFENC_CORPUS_PARQUET)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "[job] text_pair_field = %s: pairs of texts "
                             "are read from JSON Lines or Parquet, not from a %s corpus (%s)",
                             corpus->pair_field, tfenc_corpus_format_name(corpus->format),
                             options->path);
    else if (corpus->format == TFENC_CORPUS_HDF5 && corpus->n_sources > 1)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "[job] input %s: names %d files, but HDF5 "
                             "token ids are read from one file", options->path,
                             corpus->n_sources);
    else if (corpus->format == TFENC_CORPUS_HDF5) {
        status = tfenc_hdf5_corpus_open(ctx, corpus->path, options, share, n_shares,
                                        &corpus->hdf5);
        if (status == TFENC_OK)
            corpus->first_index = tfenc_hdf5_corpus_first(corpus->hdf5);
    }
    else
        status = open_text(ctx, corpus, share, n_shares);
    if (status != TFENC_OK) {
        tfenc_corpus_close(corpus);
        return status;
    }
    *corpus_out = corpus;
    return TFENC_OK;
}

int tfenc_corpus_next(tfenc_context *ctx, tfenc_corpus *corpus, tfenc_document *document)
{
    memset(document, 0, sizeof *document);
    tfenc_jsonl_record_clear(&corpus->record);
    int status = corpus->format == TFENC_CORPUS_HDF5
                     ? tfenc_hdf5_corpus_next(ctx, corpus->hdf5, corpus->next_local, document)
                     : next_text(ctx, corpus, document);
    if (status != TFENC_OK)
        return status;
    document->local_index = corpus->next_local++;
    document->source = corpus->format == TFENC_CORPUS_HDF5 ? 0 : corpus->stream_source;
    if (corpus->format == TFENC_CORPUS_HDF5 || corpus->document_line < 0)
        document->line = -1;
    else
        document->line = corpus->document_line + (corpus->format != TFENC_CORPUS_PARQUET);
    return TFENC_OK;
}

int tfenc_corpus_rewind(tfenc_context *ctx, tfenc_corpus *corpus)
{
    corpus->next_local = 0;
    tfenc_jsonl_record_clear(&corpus->record);
    if (corpus->format == TFENC_CORPUS_HDF5)
        return TFENC_OK; /* the block stays: it is reloaded only if it is not the first */
    return text_rewind(ctx, corpus);
}

int tfenc_corpus_count(tfenc_context *ctx, tfenc_corpus *corpus, tfenc_corpus_counts *counts)
{
    memset(counts, 0, sizeof *counts);
    counts->n_tokens = -1;
    if (corpus->format == TFENC_CORPUS_HDF5) {
        int64_t n = tfenc_hdf5_corpus_selected(corpus->hdf5);
        counts->n_documents = n;
        corpus->source_documents[0] = n;
        corpus->source_lines[0] = n;
        corpus->counted = 1;
        counts->n_tokens = tfenc_hdf5_corpus_selected_tokens(corpus->hdf5);
        return tfenc_corpus_rewind(ctx, corpus);
    }
    int status = tfenc_corpus_rewind(ctx, corpus);
    tfenc_document document;
    size_t per_source = (size_t)corpus->n_sources * sizeof(int64_t);
    memset(corpus->source_documents, 0, per_source);
    memset(corpus->source_skipped, 0, per_source);
    corpus->counted = 0;
    while (status == TFENC_OK && (status = tfenc_corpus_next(ctx, corpus, &document)) == TFENC_OK) {
        counts->n_documents++;
        corpus->source_documents[corpus->stream_source]++;
        if (document.id_length > counts->max_id_length)
            counts->max_id_length = document.id_length;
    }
    if (status != TFENC_ERR_NOT_FOUND)
        return status;
    for (int i = 0; i < corpus->n_sources; i++) {
        corpus->source_lines[i] = corpus->source_documents[i] + corpus->source_skipped[i];
        counts->n_skipped += corpus->source_skipped[i];
    }
    corpus->counted = 1;
    return tfenc_corpus_rewind(ctx, corpus);
}

const int64_t *tfenc_corpus_source_documents(const tfenc_corpus *corpus)
{
    return corpus->source_documents;
}

const int64_t *tfenc_corpus_source_skipped(const tfenc_corpus *corpus)
{
    return corpus->source_skipped;
}

const int64_t *tfenc_corpus_source_lines(const tfenc_corpus *corpus)
{
    return corpus->source_lines;
}

void tfenc_corpus_set_start_line(tfenc_corpus *corpus, const int64_t *earlier_lines)
{
    if (corpus->format == TFENC_CORPUS_HDF5 || corpus->share_start >= corpus->end_position)
        return;
    corpus->start_line = earlier_lines[corpus->n_sources == 1 ? 0
                                                              : source_of(corpus->share_start)];
}

int tfenc_corpus_select(tfenc_context *ctx, tfenc_corpus *corpus, const tfenc_corpus_range *range)
{
    tfenc_jsonl_record_clear(&corpus->record);
    if (corpus->format == TFENC_CORPUS_HDF5) {
        int64_t total = tfenc_hdf5_corpus_total_documents(corpus->hdf5);
        if (range->first_index < 0 || range->n_documents < 0 ||
            range->first_index + range->n_documents > total)
            return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: documents [%lld, %lld) are not "
                               "in the corpus of %lld", corpus->path,
                               (long long)range->first_index,
                               (long long)(range->first_index + range->n_documents),
                               (long long)total);
        corpus->first_index = range->first_index;
        corpus->next_local = 0;
        return tfenc_hdf5_corpus_select(ctx, corpus->hdf5, range->first_index,
                                        range->first_index + range->n_documents);
    }
    corpus->share_start = range->byte_start;
    corpus->share_end = range->byte_end;
    corpus->start_line = range->first_line_number - 1;
    corpus->first_index = range->first_index;
    corpus->next_local = 0;
    return text_rewind(ctx, corpus);
}

int64_t tfenc_corpus_file_size(const tfenc_corpus *corpus)
{
    return corpus->format == TFENC_CORPUS_HDF5 ? -1 : corpus->end_position;
}

int64_t tfenc_corpus_total_documents(const tfenc_corpus *corpus)
{
    return corpus->format == TFENC_CORPUS_HDF5 ? tfenc_hdf5_corpus_total_documents(corpus->hdf5)
                                               : -1;
}

/* Which lines' starts are wanted: every stride-th, or those listed. */
typedef struct wanted_lines {
    int64_t stride;        /* > 0: global indices that are multiples of it */
    const int64_t *listed; /* else: these global indices, ascending */
    int64_t n_listed;
    int64_t next;          /* the first listed index not yet passed */
} wanted_lines;

static int line_wanted(wanted_lines *w, int64_t index)
{
    if (w->stride > 0)
        return index % w->stride == 0;
    while (w->next < w->n_listed && w->listed[w->next] < index)
        w->next++;
    return w->next < w->n_listed && w->listed[w->next] == index;
}

static int collect_line_starts(tfenc_context *ctx, tfenc_corpus *corpus, wanted_lines *wanted,
                               int64_t **starts, int64_t **line_numbers, int64_t *n_starts);

int tfenc_corpus_line_starts(tfenc_context *ctx, tfenc_corpus *corpus, int64_t stride,
                             int64_t **starts, int64_t *n_starts)
{
    wanted_lines wanted = {.stride = stride};
    if (stride < 1) {
        *starts = NULL;
        *n_starts = 0;
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: line starts every %lld lines",
                           corpus->path, (long long)stride);
    }
    return collect_line_starts(ctx, corpus, &wanted, starts, NULL, n_starts);
}

int tfenc_corpus_line_starts_at(tfenc_context *ctx, tfenc_corpus *corpus, const int64_t *indices,
                                int64_t n_indices, int64_t **starts, int64_t **line_numbers,
                                int64_t *n_starts)
{
    wanted_lines wanted = {.listed = indices, .n_listed = n_indices};
    return collect_line_starts(ctx, corpus, &wanted, starts, line_numbers, n_starts);
}

static int collect_line_starts(tfenc_context *ctx, tfenc_corpus *corpus, wanted_lines *wanted,
                               int64_t **starts, int64_t **line_numbers, int64_t *n_starts)
{
    *starts = NULL;
    if (line_numbers != NULL)
        *line_numbers = NULL;
    *n_starts = 0;
    if (corpus->format == TFENC_CORPUS_HDF5 || corpus->first_index < 0)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: line starts need a text share that "
                           "knows its first index", corpus->path);
    int status = tfenc_corpus_rewind(ctx, corpus);
    int64_t capacity = 0;
    /* Only the line ends are looked at: no JSON is parsed again; and a
     * compressed source, whose places are line numbers, is not read again
     * at all once counted: its lines' places are 0, 1, ... Records left
     * out (null_text = skip) are the exception: only parsing tells which
     * lines are documents, so such a job reads its documents whole. */
    int by_document = corpus->null_text == TFENC_NULL_TEXT_SKIP
                      && corpus->format != TFENC_CORPUS_TEXT;
    for (int64_t local = 0; status == TFENC_OK;) {
        int64_t line_start, lines = 1, line = -1;
        int source = source_of(corpus->position);
        if (corpus->counted && !by_document && corpus->position < corpus->share_end
            && corpus->position < corpus->end_position
            && placed_by_line(corpus, source) && offset_of(corpus->position) == 0) {
            lines = corpus->source_documents[source];
            line_start = corpus->position;
            line = 0;
            corpus->position = source_start(corpus, source + 1);
        } else if (by_document) {
            tfenc_document document;
            line_start = corpus->position;
            status = tfenc_corpus_next(ctx, corpus, &document);
            if (status != TFENC_OK)
                break;
            /* The document's own line: skipped lines lie before it. */
            line = corpus->document_line;
            line_start = placed_by_line(corpus, document.source)
                             ? position_of(document.source, line)
                             : (corpus->n_sources == 1 ? 0 : position_of(document.source, 0))
                                   + corpus->line_byte;
        } else {
            size_t length;
            status = read_line(ctx, corpus, &length, &line_start);
            if (status != TFENC_OK)
                break;
            line = corpus->document_line;
        }
        for (int64_t k = 0; k < lines; k++, local++) {
            if (!line_wanted(wanted, corpus->first_index + local))
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
                                         corpus->path);
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
        status = tfenc_corpus_rewind(ctx, corpus);
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

void tfenc_corpus_close(tfenc_corpus *corpus)
{
    if (corpus == NULL)
        return;
    tfenc_jsonl_record_clear(&corpus->record);
    tfenc_stream_close(corpus->stream);
#ifdef HAVE_PARQUET
    tfenc_parquet_close(corpus->parquet);
#endif
    for (int i = 0; corpus->source_paths != NULL && i < corpus->n_sources; i++)
        free(corpus->source_paths[i]);
    free(corpus->source_paths);
    free(corpus->stored_size);
    free(corpus->compression);
    free(corpus->source_documents);
    free(corpus->source_skipped);
    free(corpus->source_lines);
    tfenc_hdf5_corpus_close(corpus->hdf5);
    free(corpus->line);
    free(corpus->path);
    free(corpus->text_field);
    free(corpus->id_field);
    free(corpus->pair_field);
    free(corpus);
}
