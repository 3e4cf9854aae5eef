/* Text corpora: one document a line, the line as it is (its end stripped);
 * an empty line is an empty document. Everything else is the files' and
 * lines' (record_files.h). */
#include "input/reader.h"
#include "input/record_files.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/context.h"

static int text_next(tfenc_context *ctx, void *state, tfenc_document *document)
{
    tfenc_record_files *records = state;
    size_t length = 0;
    int64_t line_start;
    int status = tfenc_record_files_read_line(ctx, records, &length, &line_start);
    if (status != TFENC_OK)
        return status;
    document->text = records->line;
    document->text_length = length;
    tfenc_record_files_line_document(records, document);
    return TFENC_OK;
}

static void text_close(void *state)
{
    if (state == NULL)
        return;
    tfenc_record_files_release(state);
    free(state);
}

static int text_open(tfenc_context *ctx, const tfenc_corpus_options *options,
                     tfenc_corpus_files *files, int share, int n_shares, void **state,
                     tfenc_reader_opened *opened)
{
    tfenc_record_files *records = calloc(1, sizeof *records);
    *state = records;
    if (records == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", options->path);
    records->next = text_next;
    return tfenc_record_files_open(ctx, records, files, share, n_shares,
                                   tfenc_record_files_probe_stream, opened);
}

static void text_describe(const tfenc_corpus_options *options, char *line, size_t size)
{
    (void)options;
    snprintf(line, size, "one document a line");
}

const tfenc_corpus_reader tfenc_text_reader = {
    .open = text_open,
    .next = text_next,
    .rewind = tfenc_record_files_rewind,
    .select = tfenc_record_files_select,
    .close = text_close,
    .describe = text_describe,
    .window_starts = tfenc_record_files_window_starts,
    .set_start_line = tfenc_record_files_set_start_line,
};
