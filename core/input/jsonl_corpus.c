/* JSON Lines corpora: each line an object whose text field (and a pair's
 * second text field, and an id field) makes the document, parsed by
 * jsonl_record.h; the files and lines are record_files.h's. Every refused
 * line is one message naming the file and the line. */
#include "input/reader.h"
#include "input/jsonl_record.h"
#include "input/record_files.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/context.h"

typedef struct jsonl_corpus {
    tfenc_record_files records; /* first: the shared slots take the state as this */
    tfenc_record_fields names;  /* the fields' names */
    tfenc_jsonl_fields fields;  /* what to read: the names above, and more */
    tfenc_jsonl_record record;  /* the current line, kept while its document lives */
} jsonl_corpus;

static int jsonl_next(tfenc_context *ctx, void *state, tfenc_document *document)
{
    jsonl_corpus *corpus = state;
    tfenc_record_files *records = &corpus->records;
    tfenc_jsonl_record_clear(&corpus->record);
    for (;;) {
        size_t length = 0;
        int64_t line_start;
        int status = tfenc_record_files_read_line(ctx, records, &length, &line_start);
        if (status != TFENC_OK)
            return status;
        char why[512];
        status = tfenc_jsonl_record_read(&corpus->fields, records->line, length, &corpus->record,
                                         document, why, sizeof why);
        if (status == TFENC_ERR_INPUT)
            return tfenc_error(ctx, status, "%s: line %lld%s", tfenc_record_files_path(records),
                               (long long)tfenc_record_files_line_number(records), why);
        if (status == TFENC_OK)
            tfenc_record_files_line_document(records, document);
        if (status != TFENC_JSONL_SKIPPED)
            return status;
        tfenc_jsonl_record_clear(&corpus->record);
        tfenc_record_files_note_skipped(records);
    }
}

/* The parsed line goes with the documents a rewind or a selection ends. */
static int jsonl_rewind(tfenc_context *ctx, void *state)
{
    tfenc_jsonl_record_clear(&((jsonl_corpus *)state)->record);
    return tfenc_record_files_rewind(ctx, state);
}

static int jsonl_select(tfenc_context *ctx, void *state, const tfenc_corpus_range *range)
{
    tfenc_jsonl_record_clear(&((jsonl_corpus *)state)->record);
    return tfenc_record_files_select(ctx, state, range);
}

static void jsonl_close(void *state)
{
    jsonl_corpus *corpus = state;
    if (corpus == NULL)
        return;
    tfenc_jsonl_record_free(&corpus->record);
    tfenc_record_files_release(&corpus->records);
    tfenc_record_fields_free(&corpus->names);
    free(corpus);
}

static int jsonl_open(tfenc_context *ctx, const tfenc_corpus_options *options,
                      tfenc_corpus_files *files, int share, int n_shares, void **state,
                      tfenc_reader_opened *opened)
{
    jsonl_corpus *corpus = calloc(1, sizeof *corpus);
    *state = corpus;
    if (corpus == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", options->path);
    int status = tfenc_record_fields_copy(ctx, options, &corpus->names);
    if (status != TFENC_OK)
        return status;
    corpus->fields = (tfenc_jsonl_fields){.text_field = corpus->names.text,
                                          .pair_field = corpus->names.pair,
                                          .id_field = corpus->names.id,
                                          .max_id_bytes = options->max_id_bytes,
                                          .keep_fields = options->keep_fields,
                                          .n_keep_fields = options->n_keep_fields,
                                          .max_field_bytes = options->max_field_bytes,
                                          .null_text = options->null_text};
    corpus->records.next = jsonl_next;
    corpus->records.leaves_records_out = options->null_text == TFENC_NULL_TEXT_SKIP;
    return tfenc_record_files_open(ctx, &corpus->records, files, share, n_shares,
                                   tfenc_record_files_probe_stream, opened);
}

static void jsonl_describe(const tfenc_corpus_options *options, char *line, size_t size)
{
    tfenc_record_files_describe_fields(options, "field", line, size);
}

const tfenc_corpus_reader tfenc_jsonl_reader = {
    .open = jsonl_open,
    .next = jsonl_next,
    .rewind = jsonl_rewind,
    .select = jsonl_select,
    .close = jsonl_close,
    .describe = jsonl_describe,
    .window_starts = tfenc_record_files_window_starts,
    .set_start_line = tfenc_record_files_set_start_line,
};
