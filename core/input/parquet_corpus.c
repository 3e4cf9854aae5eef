/* Parquet corpora: rows of a text column (and a pair's and an id column)
 * as documents, read row group by row group through Apache Arrow
 * (parquet_reader.h, the C++ side). Built only when configure found Arrow
 * (--with-parquet); the formats' table names this reader then. A Parquet
 * file cannot be entered in the middle: it belongs whole to one share, and
 * its places are row numbers (record_files.h). Messages name the file, the
 * row and its row group. */
#include "input/reader.h"
#include "input/parquet_reader.h"
#include "input/record_files.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/context.h"
#include "base/files.h"

typedef struct parquet_corpus {
    tfenc_record_files records; /* first: the shared slots take the state as this */
    tfenc_record_fields columns; /* the columns' names */
    size_t max_id_bytes;
    tfenc_null_text null_text;
    const char *const *keep_fields; /* [n_keep_fields] the options' */
    int n_keep_fields;
    size_t max_field_bytes;
    tfenc_kept_text kept;       /* the current row's kept values */
    tfenc_parquet *parquet;     /* the file being read, or NULL */
    int parquet_source;         /* its index, or -1 */
    int parquet_group;          /* the row group loaded, or -1 */
    int64_t group_first;        /* its first row */
    int64_t group_end;          /* the row after its last */
} parquet_corpus;

/* Checks a Parquet file like any file and notes its size; Arrow opens it
 * when it is read. */
static int probe_parquet(tfenc_context *ctx, tfenc_corpus_files *files, int file)
{
    const char *path = files->paths[file];
    int status = tfenc_file_check_regular(ctx, "[job] input", path);
    struct stat info;
    if (status == TFENC_OK && stat(path, &info) != 0)
        status = tfenc_error(ctx, TFENC_ERR_IO, "[job] input %s: cannot examine: %s", path,
                             strerror(errno));
    if (status == TFENC_OK) {
        files->stored_size[file] = (int64_t)info.st_size;
        files->whole[file] = 1;
    }
    return status;
}

/* Opens file `source` (closing the one before) unless it is open. */
static int open_source(tfenc_context *ctx, parquet_corpus *corpus, int source)
{
    if (corpus->parquet_source == source)
        return TFENC_OK;
    tfenc_parquet_close(corpus->parquet);
    corpus->parquet = NULL;
    corpus->parquet_source = corpus->parquet_group = -1;
    const char *path = corpus->records.files->paths[source];
    char why[512];
    int status = tfenc_parquet_open(path, corpus->columns.text, corpus->columns.pair,
                                    corpus->columns.id, corpus->keep_fields,
                                    corpus->n_keep_fields, &corpus->parquet, why, sizeof why);
    if (status != TFENC_OK)
        return tfenc_error(ctx, status, "%s: %s", path, why);
    corpus->parquet_source = source;
    return TFENC_OK;
}

/* Loads the row group that holds `row` unless it is loaded. */
static int load_group_of(tfenc_context *ctx, parquet_corpus *corpus, int64_t row)
{
    if (corpus->parquet_group >= 0 && row >= corpus->group_first && row < corpus->group_end)
        return TFENC_OK;
    int64_t first = 0;
    int group = 0, n_groups = tfenc_parquet_row_groups(corpus->parquet);
    while (group < n_groups && first + tfenc_parquet_row_group_rows(corpus->parquet, group) <= row)
        first += tfenc_parquet_row_group_rows(corpus->parquet, group++);
    corpus->parquet_group = -1;
    char why[512];
    int status = tfenc_parquet_load_row_group(corpus->parquet, group, why, sizeof why);
    if (status != TFENC_OK)
        return tfenc_error(ctx, status, "%s: row group %d: %s",
                           corpus->records.files->paths[corpus->parquet_source], group, why);
    corpus->parquet_group = group;
    corpus->group_first = first;
    corpus->group_end = first + tfenc_parquet_row_group_rows(corpus->parquet, group);
    return TFENC_OK;
}

/* Row `row`'s kept values into corpus->kept (document->kept), each string
 * refused when it is too long or holds a NUL byte, naming the row. */
static int read_kept(tfenc_context *ctx, parquet_corpus *corpus, const char *path, int64_t row,
                     tfenc_document *document)
{
    tfenc_kept_text_clear(&corpus->kept);
    for (int k = 0; k < corpus->n_keep_fields; k++) {
        tfenc_kept_value value;
        tfenc_parquet_kept(corpus->parquet, row - corpus->group_first, k, &value);
        const char *name = corpus->keep_fields[k];
        if (value.type == TFENC_KEPT_STRING && corpus->max_field_bytes > 0
            && value.length > corpus->max_field_bytes)
            return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: row %lld (row group %d): keep_fields "
                               "'%s' is %zu bytes long, more than [job] max_field_bytes = %zu",
                               path, (long long)row, corpus->parquet_group, name, value.length,
                               corpus->max_field_bytes);
        const char *nul = value.type == TFENC_KEPT_STRING
                              ? memchr(value.string, '\0', value.length) : NULL;
        if (nul != NULL)
            return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: row %lld (row group %d): NUL byte at "
                               "byte %lld of keep_fields '%s'", path, (long long)row,
                               corpus->parquet_group, (long long)(nul - value.string), name);
        if (tfenc_kept_append(&corpus->kept, &value) != 0)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", path);
    }
    document->kept = corpus->kept.text != NULL ? corpus->kept.text : "";
    document->kept_length = corpus->kept.length;
    return TFENC_OK;
}

/* The row at the records' position as the next document: its file opened
 * and its row group loaded as needed; rows past a file's end move on to
 * the next file. */
static int parquet_next(tfenc_context *ctx, void *state, tfenc_document *document)
{
    parquet_corpus *corpus = state;
    tfenc_record_files *records = &corpus->records;
    for (;;) {
        if (records->position >= records->share_end || records->position >= records->end_position)
            return TFENC_ERR_NOT_FOUND;
        int source = tfenc_position_source(records->position);
        int64_t row = tfenc_position_place(records->position);
        const char *path = records->files->paths[source];
        int status = open_source(ctx, corpus, source);
        if (status != TFENC_OK)
            return status;
        if (row >= tfenc_parquet_rows(corpus->parquet)) {
            records->position = tfenc_record_files_file_start(records, source + 1);
            continue;
        }
        status = load_group_of(ctx, corpus, row);
        if (status != TFENC_OK)
            return status;
        const char *text, *id;
        size_t length, id_length;
        tfenc_parquet_row(corpus->parquet, row - corpus->group_first, &text, &length, &id,
                          &id_length);
        records->source = source; /* counted per file like a stream's lines */
        records->document_line = row;
        if (text == NULL && corpus->null_text == TFENC_NULL_TEXT_ERROR)
            return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: row %lld (row group %d): column '%s' "
                               "is null (set [job] null_text = empty to read it as an empty "
                               "document, or skip to leave it out)", path, (long long)row,
                               corpus->parquet_group, corpus->columns.text);
        if (text == NULL && corpus->null_text == TFENC_NULL_TEXT_SKIP) {
            records->position++;
            tfenc_record_files_note_skipped(records);
            continue;
        }
        if (corpus->columns.id != NULL && id == NULL)
            return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: row %lld (row group %d): id column "
                               "'%s' is null", path, (long long)row, corpus->parquet_group,
                               corpus->columns.id);
        if (corpus->max_id_bytes > 0 && id != NULL && id_length > corpus->max_id_bytes)
            return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: row %lld (row group %d): id column "
                               "'%s' is %zu bytes long, more than [job] max_id_bytes = %zu",
                               path, (long long)row, corpus->parquet_group, corpus->columns.id,
                               id_length, corpus->max_id_bytes);
        const char *nul = text != NULL ? memchr(text, '\0', length) : NULL;
        if (nul != NULL)
            return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: row %lld (row group %d): NUL byte at "
                               "byte %lld of the text", path, (long long)row,
                               corpus->parquet_group, (long long)(nul - text));
        document->text = text != NULL ? text : "";
        document->text_length = length;
        if (corpus->columns.pair != NULL) {
            const char *pair;
            size_t pair_length;
            tfenc_parquet_pair_text(corpus->parquet, row - corpus->group_first, &pair,
                                    &pair_length);
            if (pair == NULL && corpus->null_text == TFENC_NULL_TEXT_ERROR)
                return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: row %lld (row group %d): column "
                                   "'%s' (text_pair_field) is null (set [job] null_text = empty "
                                   "to read it as an empty text, or skip to leave the pair out)",
                                   path, (long long)row, corpus->parquet_group,
                                   corpus->columns.pair);
            if (pair == NULL && corpus->null_text == TFENC_NULL_TEXT_SKIP) {
                records->position++;
                tfenc_record_files_note_skipped(records);
                continue;
            }
            nul = pair != NULL ? memchr(pair, '\0', pair_length) : NULL;
            if (nul != NULL)
                return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: row %lld (row group %d): NUL byte "
                                   "at byte %lld of column '%s' (text_pair_field)", path,
                                   (long long)row, corpus->parquet_group, (long long)(nul - pair),
                                   corpus->columns.pair);
            document->text_pair = pair != NULL ? pair : "";
            document->text_pair_length = pair_length;
        }
        if (corpus->n_keep_fields > 0) {
            status = read_kept(ctx, corpus, path, row, document);
            if (status != TFENC_OK)
                return status;
        }
        document->id = id;
        document->id_length = id_length;
        document->source = source;
        document->line = row;
        records->position++;
        return TFENC_OK;
    }
}

static void parquet_close(void *state)
{
    parquet_corpus *corpus = state;
    if (corpus == NULL)
        return;
    tfenc_parquet_close(corpus->parquet);
    tfenc_kept_text_free(&corpus->kept);
    tfenc_record_files_release(&corpus->records);
    tfenc_record_fields_free(&corpus->columns);
    free(corpus);
}

static int parquet_open(tfenc_context *ctx, const tfenc_corpus_options *options,
                        tfenc_corpus_files *files, int share, int n_shares, void **state,
                        tfenc_reader_opened *opened)
{
    parquet_corpus *corpus = calloc(1, sizeof *corpus);
    *state = corpus;
    if (corpus == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", options->path);
    corpus->parquet_source = corpus->parquet_group = -1;
    corpus->max_id_bytes = options->max_id_bytes;
    corpus->null_text = options->null_text;
    corpus->keep_fields = options->keep_fields;
    corpus->n_keep_fields = options->n_keep_fields;
    corpus->max_field_bytes = options->max_field_bytes;
    int status = tfenc_record_fields_copy(ctx, options, &corpus->columns);
    if (status != TFENC_OK)
        return status;
    corpus->records.next = parquet_next;
    corpus->records.leaves_records_out = options->null_text == TFENC_NULL_TEXT_SKIP;
    return tfenc_record_files_open(ctx, &corpus->records, files, share, n_shares, probe_parquet,
                                   opened);
}

static void parquet_describe(const tfenc_corpus_options *options, char *line, size_t size)
{
    tfenc_record_files_describe_fields(options, "column", line, size);
}

const tfenc_corpus_reader tfenc_parquet_reader = {
    .open = parquet_open,
    .next = parquet_next,
    .rewind = tfenc_record_files_rewind,
    .select = tfenc_record_files_select,
    .close = parquet_close,
    .describe = parquet_describe,
    .window_starts = tfenc_record_files_window_starts,
    .set_start_line = tfenc_record_files_set_start_line,
};
