/* The corpus over its format's reader (reader.h, found in the formats'
 * table): the files and their counts, the documents' numbering and the
 * window starts, the same for every format. */
#include "input/corpus.h"

#include <stdlib.h>
#include <string.h>

#include "base/context.h"
#include "base/files.h"
#include "input/reader.h"

struct tfenc_corpus {
    const tfenc_corpus_reader *reader;
    void *state;          /* the reader's */
    char *path;           /* [job] input as given, for messages */
    tfenc_corpus_files files;
    int64_t first_index;  /* global index of the selection's first document, or -1 */
    int64_t next_local;   /* local index the next document gets */
    int64_t total_documents;
    int64_t end_position;
    int n_keep_fields;    /* the options' keep_fields */
};

const char *const tfenc_null_text_names[] = {"error", "empty", "skip", NULL};

/* Indexed readers know their first index at open and need no positions. */
static int positioned(const tfenc_corpus *corpus)
{
    return corpus->reader->window_starts != NULL;
}

int64_t tfenc_corpus_first_index(const tfenc_corpus *corpus)
{
    return corpus->first_index;
}

void tfenc_corpus_set_first_index(tfenc_corpus *corpus, int64_t first_index)
{
    if (positioned(corpus))
        corpus->first_index = first_index;
}

int tfenc_corpus_windows_by_position(const tfenc_corpus *corpus)
{
    return positioned(corpus);
}

int tfenc_corpus_n_sources(const tfenc_corpus *corpus)
{
    return corpus->files.n;
}

const char *tfenc_corpus_source_path(const tfenc_corpus *corpus, int source)
{
    return source >= 0 && source < corpus->files.n ? corpus->files.paths[source] : NULL;
}

int64_t tfenc_corpus_source_size(const tfenc_corpus *corpus, int source)
{
    return corpus->files.stored_size[source];
}

tfenc_stream_codec tfenc_corpus_source_compression(const tfenc_corpus *corpus, int source)
{
    return (tfenc_stream_codec)corpus->files.compression[source];
}

int tfenc_corpus_position_source(int64_t position)
{
    return tfenc_position_source(position);
}

int tfenc_corpus_source_whole(const tfenc_corpus *corpus, int source)
{
    return source >= 0 && source < corpus->files.n && corpus->files.whole[source];
}

const int64_t *tfenc_corpus_source_documents(const tfenc_corpus *corpus)
{
    return corpus->files.documents;
}

const int64_t *tfenc_corpus_source_skipped(const tfenc_corpus *corpus)
{
    return corpus->files.skipped;
}

const int64_t *tfenc_corpus_source_lines(const tfenc_corpus *corpus)
{
    return corpus->files.lines;
}

int64_t tfenc_corpus_file_size(const tfenc_corpus *corpus)
{
    return corpus->end_position;
}

int64_t tfenc_corpus_total_documents(const tfenc_corpus *corpus)
{
    return corpus->total_documents;
}

/* The files named by the options, or the path alone. */
static int copy_files(tfenc_context *ctx, tfenc_corpus_files *files,
                      const tfenc_corpus_options *options)
{
    int n = options->n_sources > 0 ? options->n_sources : 1;
    files->paths = calloc((size_t)n, sizeof *files->paths);
    files->stored_size = calloc((size_t)n, sizeof *files->stored_size);
    files->compression = calloc((size_t)n, sizeof *files->compression);
    files->whole = calloc((size_t)n, sizeof *files->whole);
    files->documents = calloc((size_t)n, sizeof *files->documents);
    files->skipped = calloc((size_t)n, sizeof *files->skipped);
    files->lines = calloc((size_t)n, sizeof *files->lines);
    if (files->paths == NULL || files->stored_size == NULL || files->compression == NULL
        || files->whole == NULL || files->documents == NULL || files->skipped == NULL
        || files->lines == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", options->path);
    files->n = n;
    for (int i = 0; i < n; i++)
        if ((files->paths[i] = strdup(options->n_sources > 0 ? options->sources[i]
                                                             : options->path)) == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", options->path);
    return TFENC_OK;
}

static void free_files(tfenc_corpus_files *files)
{
    for (int i = 0; files->paths != NULL && i < files->n; i++)
        free(files->paths[i]);
    free(files->paths);
    free(files->stored_size);
    free(files->compression);
    free(files->whole);
    free(files->documents);
    free(files->skipped);
    free(files->lines);
}

/* What the options ask of the format, before its reader opens anything. */
static int check_format(tfenc_context *ctx, const tfenc_corpus_options *options,
                        const tfenc_corpus_files *files, const tfenc_corpus_format_info *format)
{
    if (format == NULL)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: corpus format %d is none tfenc reads",
                           options->path, (int)options->format);
    if (options->text_pair_field != NULL && !format->pairs) {
        char readers[128];
        tfenc_corpus_format_pair_titles(readers, sizeof readers);
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "[job] text_pair_field = %s: pairs of texts "
                           "are read from %s, not from a %s corpus (%s)",
                           options->text_pair_field, readers,
                           tfenc_corpus_format_name(options->format), options->path);
    }
    if (options->n_keep_fields > 0 && !format->pairs)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "[job] keep_fields = %s: fields are kept from "
                           "JSON Lines records or Parquet columns, not from a %s corpus (%s)",
                           options->keep_fields[0], tfenc_corpus_format_name(options->format),
                           options->path);
    if (options->n_keep_fields > TFENC_MAX_KEEP_FIELDS)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "[job] keep_fields: %d fields, more than the "
                           "%d a job keeps", options->n_keep_fields, TFENC_MAX_KEEP_FIELDS);
    if (format->reader != NULL)
        return TFENC_OK;
    /* A file that is not there is said so first, as the reader would. */
    int status = tfenc_file_check_regular(ctx, "[job] input", files->paths[0]);
    if (status != TFENC_OK)
        return status;
    return tfenc_error(ctx, TFENC_ERR_CONFIG, "[job] input %s: this tfenc was built without %s "
                       "(%s)", files->paths[0], format->title, format->missing);
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
    const tfenc_corpus_format_info *format = tfenc_corpus_format_info_of(options->format);
    tfenc_reader_opened opened = {.first_index = -1, .total_documents = -1,
                                  .end_position = -1};
    int status = copy_files(ctx, &corpus->files, options);
    corpus->n_keep_fields = options->n_keep_fields;
    if (status == TFENC_OK && (corpus->path = strdup(options->path)) == NULL)
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", options->path);
    if (status == TFENC_OK)
        status = check_format(ctx, options, &corpus->files, format);
    if (status == TFENC_OK) {
        corpus->reader = format->reader;
        status = corpus->reader->open(ctx, options, &corpus->files, share, n_shares,
                                      &corpus->state, &opened);
    }
    if (status != TFENC_OK) {
        tfenc_corpus_close(corpus);
        return status;
    }
    corpus->first_index = opened.first_index;
    corpus->total_documents = opened.total_documents;
    corpus->end_position = opened.end_position;
    *corpus_out = corpus;
    return TFENC_OK;
}

int tfenc_corpus_next(tfenc_context *ctx, tfenc_corpus *corpus, tfenc_document *document)
{
    memset(document, 0, sizeof *document);
    int status = corpus->reader->next(ctx, corpus->state, document);
    if (status != TFENC_OK)
        return status;
    document->local_index = corpus->next_local++;
    return TFENC_OK;
}

int tfenc_corpus_rewind(tfenc_context *ctx, tfenc_corpus *corpus)
{
    corpus->next_local = 0;
    return corpus->reader->rewind(ctx, corpus->state);
}

/* What the counting pass learns from a document's kept values: the first
 * document of each type per field, the longest string. */
static int count_kept(tfenc_context *ctx, const tfenc_corpus *corpus,
                      const tfenc_document *document, tfenc_corpus_counts *counts)
{
    const char *cursor = document->kept != NULL ? document->kept : "";
    if (document->kept_length > counts->max_kept_length)
        counts->max_kept_length = document->kept_length;
    for (int k = 0; k < corpus->n_keep_fields; k++) {
        tfenc_kept_value value;
        if (tfenc_kept_next(&cursor, &value) != 0)
            return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: the reader gave document %lld "
                               "fewer kept values than keep_fields names", corpus->path,
                               (long long)document->local_index);
        tfenc_kept_field_count *field = &counts->kept[k];
        if (field->first[value.type] < 0) {
            field->first[value.type] = document->local_index;
            field->first_source[value.type] = document->source;
        }
        if (value.type == TFENC_KEPT_STRING && value.length > field->longest)
            field->longest = value.length;
    }
    return TFENC_OK;
}

/* Every document read once: the count, and per file the documents, the
 * records left out and the lines. */
static int count_by_reading(tfenc_context *ctx, tfenc_corpus *corpus,
                            tfenc_corpus_counts *counts)
{
    tfenc_corpus_files *files = &corpus->files;
    int status = tfenc_corpus_rewind(ctx, corpus);
    tfenc_document document;
    memset(files->documents, 0, (size_t)files->n * sizeof *files->documents);
    memset(files->skipped, 0, (size_t)files->n * sizeof *files->skipped);
    files->counted = 0;
    while (status == TFENC_OK && (status = tfenc_corpus_next(ctx, corpus, &document)) == TFENC_OK) {
        counts->n_documents++;
        files->documents[document.source]++;
        if (document.id_length > counts->max_id_length)
            counts->max_id_length = document.id_length;
        if (corpus->n_keep_fields > 0)
            status = count_kept(ctx, corpus, &document, counts);
    }
    if (status != TFENC_ERR_NOT_FOUND)
        return status;
    for (int i = 0; i < files->n; i++) {
        files->lines[i] = files->documents[i] + files->skipped[i];
        counts->n_skipped += files->skipped[i];
    }
    files->counted = 1;
    return TFENC_OK;
}

int tfenc_corpus_count(tfenc_context *ctx, tfenc_corpus *corpus, tfenc_corpus_counts *counts)
{
    memset(counts, 0, sizeof *counts);
    counts->n_tokens = -1;
    for (int k = 0; k < TFENC_MAX_KEEP_FIELDS; k++)
        for (int t = 0; t < TFENC_KEPT_TYPES; t++)
            counts->kept[k].first[t] = -1;
    int status = corpus->reader->count != NULL
                     ? corpus->reader->count(ctx, corpus->state, counts)
                     : count_by_reading(ctx, corpus, counts);
    if (status != TFENC_OK)
        return status;
    return tfenc_corpus_rewind(ctx, corpus);
}

void tfenc_corpus_set_start_line(tfenc_corpus *corpus, const int64_t *earlier_lines)
{
    if (corpus->reader->set_start_line != NULL)
        corpus->reader->set_start_line(corpus->state, earlier_lines);
}

int tfenc_corpus_select(tfenc_context *ctx, tfenc_corpus *corpus, const tfenc_corpus_range *range)
{
    int status = corpus->reader->select(ctx, corpus->state, range);
    if (status != TFENC_OK)
        return status;
    corpus->first_index = range->first_index;
    corpus->next_local = 0;
    return TFENC_OK;
}

static int window_starts(tfenc_context *ctx, tfenc_corpus *corpus,
                         tfenc_wanted_documents *wanted, int64_t **starts,
                         int64_t **line_numbers, int64_t *n_starts)
{
    *starts = NULL;
    if (line_numbers != NULL)
        *line_numbers = NULL;
    *n_starts = 0;
    if (!positioned(corpus) || corpus->first_index < 0)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: line starts need a text share that "
                           "knows its first index", corpus->path);
    corpus->next_local = 0; /* the reader rewinds before and after */
    return corpus->reader->window_starts(ctx, corpus->state, corpus->first_index, wanted, starts,
                                         line_numbers, n_starts);
}

int tfenc_corpus_line_starts(tfenc_context *ctx, tfenc_corpus *corpus, int64_t stride,
                             int64_t **starts, int64_t *n_starts)
{
    tfenc_wanted_documents wanted = {.stride = stride};
    if (stride < 1) {
        *starts = NULL;
        *n_starts = 0;
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: line starts every %lld lines",
                           corpus->path, (long long)stride);
    }
    return window_starts(ctx, corpus, &wanted, starts, NULL, n_starts);
}

int tfenc_corpus_line_starts_at(tfenc_context *ctx, tfenc_corpus *corpus, const int64_t *indices,
                                int64_t n_indices, int64_t **starts, int64_t **line_numbers,
                                int64_t *n_starts)
{
    tfenc_wanted_documents wanted = {.listed = indices, .n_listed = n_indices};
    return window_starts(ctx, corpus, &wanted, starts, line_numbers, n_starts);
}

void tfenc_corpus_close(tfenc_corpus *corpus)
{
    if (corpus == NULL)
        return;
    if (corpus->reader != NULL)
        corpus->reader->close(corpus->state);
    free_files(&corpus->files);
    free(corpus->path);
    free(corpus);
}
