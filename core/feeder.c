/* Windows of documents -> length-sorted microbatches for the first stage. */
#include "feeder.h"

#include "context.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Documents read ahead and sorted by length before batching: enough to make
 * microbatches of similar lengths, small enough that memory stays flat. */
#define WINDOW_DOCUMENTS 2048

/* A document of the current window, tokenized. */
typedef struct pending {
    int64_t global_index;
    int64_t token_offset; /* first row in the output's hidden (tokens kind) */
    int32_t *ids;         /* into the window's id pool */
    int32_t length;
    int32_t truncated;
    char *id;             /* document id, or NULL */
} pending;

struct tfenc_feeder {
    tfenc_feeder_options options;
    tfenc_tokenizer *tokenizer;
    tfenc_corpus *corpus;
    const uint8_t *done;
    int64_t first_index;
    int64_t token_cursor;
    int64_t documents_read;
    int corpus_finished;
    pending documents[WINDOW_DOCUMENTS];
    int n_documents;
    int next; /* position in `order` of the next document to batch */
    int order[WINDOW_DOCUMENTS]; /* documents sorted by length, longest first */
    int32_t *id_pool;            /* WINDOW_DOCUMENTS * max_seq_len ids */
    size_t pool_used;
};

int tfenc_feeder_tokenize(tfenc_context *ctx, const tfenc_feeder_options *options, tfenc_tokenizer *tokenizer,
                    const tfenc_document *document, int64_t global_index, int32_t *ids,
                    int32_t *length, int32_t *truncated)
{
    const int max_length = options->max_seq_len;
    int n_ids = 0, cut = 0;
    if (document->token_ids != NULL || tokenizer == NULL) {
        n_ids = document->n_tokens < max_length ? document->n_tokens : max_length;
        cut = document->n_tokens - n_ids;
        if (n_ids > 0)
            memcpy(ids, document->token_ids, (size_t)n_ids * sizeof *ids);
        if (n_ids == 0)
            return tfenc_error(ctx, TFENC_ERR_INPUT,
                               "%s: document %lld has no tokens (an encoder needs at least one)",
                               options->input, (long long)global_index);
        if (options->vocab_size > 0)
            for (int i = 0; i < n_ids; i++)
                if (ids[i] >= options->vocab_size)
                    return tfenc_error(ctx, TFENC_ERR_INPUT,
                                       "%s: document %lld: token id %d is outside the "
                                       "vocabulary (vocab_size %d)",
                                       options->input, (long long)global_index, ids[i],
                                       options->vocab_size);
    } else {
        int status = tfenc_tokenizer_encode(ctx, tokenizer, document->text, document->text_length,
                                            ids, max_length, &n_ids, &cut);
        if (status != TFENC_OK) {
            /* The tokenizer knows the text, not where it came from. */
            char message[TFENC_MESSAGE_MAX];
            snprintf(message, sizeof message, "%s", tfenc_context_message(ctx));
            tfenc_context_clear(ctx);
            return tfenc_error(ctx, status, "%s: document %lld (0-based): %s", options->input,
                               (long long)global_index, message);
        }
    }
    if (cut > 0 && !options->truncation)
        return tfenc_error(ctx, TFENC_ERR_INPUT,
                           "%s: document %lld has %d tokens, more than max_seq_len %d "
                           "(set [job] truncation = true to cut it)",
                           options->input, (long long)global_index, n_ids + cut,
                           options->max_seq_len);
    *length = n_ids;
    *truncated = cut;
    return TFENC_OK;
}

int tfenc_feeder_count_tokens(tfenc_context *ctx, const tfenc_feeder_options *options,
                        tfenc_tokenizer *tokenizer, tfenc_corpus *corpus, int64_t *tokens)
{
    *tokens = 0;
    int32_t *ids = malloc((size_t)options->max_seq_len * sizeof *ids);
    if (ids == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    tfenc_document document;
    int64_t first = tfenc_corpus_first_index(corpus);
    int status;
    while ((status = tfenc_corpus_next(ctx, corpus, &document)) == TFENC_OK) {
        int32_t length, truncated;
        status = tfenc_feeder_tokenize(ctx, options, tokenizer, &document, first + document.local_index,
                                 ids, &length, &truncated);
        if (status != TFENC_OK)
            break;
        *tokens += length;
    }
    free(ids);
    if (status == TFENC_ERR_NOT_FOUND) {
        tfenc_context_clear(ctx);
        status = tfenc_corpus_rewind(ctx, corpus);
    }
    return status;
}

int tfenc_feeder_create(tfenc_context *ctx, const tfenc_feeder_options *options, tfenc_tokenizer *tokenizer,
                  tfenc_corpus *corpus, int64_t first_token, const uint8_t *done,
                  tfenc_feeder **feeder_out)
{
    *feeder_out = NULL;
    tfenc_feeder *f = calloc(1, sizeof *f);
    if (f == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    f->options = *options;
    f->tokenizer = tokenizer;
    f->corpus = corpus;
    f->done = done;
    f->first_index = tfenc_corpus_first_index(corpus);
    f->token_cursor = first_token;
    f->id_pool = malloc((size_t)WINDOW_DOCUMENTS * (size_t)options->max_seq_len * sizeof(int32_t));
    if (f->id_pool == NULL) {
        free(f);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for the document window");
    }
    *feeder_out = f;
    return TFENC_OK;
}

static void clear_window(tfenc_feeder *f)
{
    for (int i = 0; i < f->n_documents; i++) {
        free(f->documents[i].id);
        f->documents[i].id = NULL;
    }
    f->n_documents = 0;
    f->next = 0;
    f->pool_used = 0;
}

static const pending *sort_documents;

/* Longest first; ties by index so that the order is reproducible. */
static int by_length(const void *a, const void *b)
{
    const pending *x = &sort_documents[*(const int *)a], *y = &sort_documents[*(const int *)b];
    if (x->length != y->length)
        return x->length > y->length ? -1 : 1;
    return x->global_index < y->global_index ? -1 : x->global_index > y->global_index;
}

/* Reads and tokenizes up to a window of documents still to encode. */
static int fill_window(tfenc_context *ctx, tfenc_feeder *f)
{
    clear_window(f);
    tfenc_document document;
    int done_in_window = 0;
    while (f->n_documents < WINDOW_DOCUMENTS && !f->corpus_finished) {
        int status = tfenc_corpus_next(ctx, f->corpus, &document);
        if (status == TFENC_ERR_NOT_FOUND) {
            tfenc_context_clear(ctx);
            f->corpus_finished = 1;
            break;
        }
        if (status != TFENC_OK)
            return status;
        pending *doc = &f->documents[f->n_documents];
        doc->global_index = f->first_index + document.local_index;
        doc->ids = f->id_pool + f->pool_used;
        status = tfenc_feeder_tokenize(ctx, &f->options, f->tokenizer, &document, doc->global_index,
                                 doc->ids, &doc->length, &doc->truncated);
        if (status != TFENC_OK)
            return status;
        doc->token_offset = f->token_cursor;
        f->token_cursor += doc->length;
        f->documents_read++;
        if (f->done != NULL && f->done[document.local_index])
            done_in_window++;
        doc->id = NULL;
        if (f->options.has_ids) {
            doc->id = strdup(document.id != NULL ? document.id : "");
            if (doc->id == NULL)
                return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        }
        f->pool_used += (size_t)doc->length;
        f->n_documents++;
    }
    /* Resuming: a window a previous run finished is skipped; one it left
     * unfinished is encoded whole, so that every microbatch holds the same
     * documents as in an uninterrupted run and (at the same layout) the
     * rows come out bitwise the same. Rewriting finished rows with equal
     * values is harmless. */
    if (done_in_window > 0 && done_in_window == f->n_documents) {
        clear_window(f);
        return TFENC_OK;
    }
    for (int i = 0; i < f->n_documents; i++)
        f->order[i] = i;
    sort_documents = f->documents;
    qsort(f->order, (size_t)f->n_documents, sizeof *f->order, by_length);
    return TFENC_OK;
}

int tfenc_feeder_next(tfenc_context *ctx, tfenc_feeder *f, tfenc_pipeline *pipeline,
                tfenc_microbatch **microbatch_out)
{
    *microbatch_out = NULL;
    /* A resumed run may find whole windows already done. */
    while (f->next >= f->n_documents) {
        if (f->corpus_finished) {
            clear_window(f);
            return TFENC_ERR_NOT_FOUND;
        }
        int status = fill_window(ctx, f);
        if (status != TFENC_OK)
            return status;
    }
    /* The longest remaining documents that fit batch_tokens together. */
    int n_seq = 0, n_tokens = 0;
    size_t ids_bytes = 0;
    while (f->next + n_seq < f->n_documents) {
        const pending *doc = &f->documents[f->order[f->next + n_seq]];
        if (n_tokens + doc->length > f->options.batch_tokens)
            break;
        n_tokens += doc->length;
        if (doc->id != NULL)
            ids_bytes += strlen(doc->id) + 1;
        n_seq++;
    }
    tfenc_microbatch *m = NULL;
    int status = tfenc_pipeline_acquire(ctx, pipeline, &m);
    if (status == TFENC_OK)
        status = tfenc_microbatch_shape(ctx, pipeline, m, n_seq, n_tokens, ids_bytes);
    if (status != TFENC_OK)
        return status;
    char *id_cursor = m->ids;
    int row = 0;
    m->seq_start[0] = 0;
    for (int j = 0; j < n_seq; j++) {
        const pending *doc = &f->documents[f->order[f->next + j]];
        memcpy(m->token_ids + row, doc->ids, (size_t)doc->length * sizeof(int32_t));
        for (int t = 0; t < doc->length; t++) {
            m->positions[row + t] = t;
            m->token_types[row + t] = 0;
        }
        row += doc->length;
        m->seq_start[j + 1] = row;
        m->indices[j] = doc->global_index;
        m->token_offsets[j] = doc->token_offset;
        m->lengths[j] = doc->length;
        m->truncated[j] = doc->truncated;
        if (id_cursor != NULL) {
            size_t bytes = strlen(doc->id) + 1;
            memcpy(id_cursor, doc->id, bytes);
            id_cursor += bytes;
        }
    }
    f->next += n_seq;
    *microbatch_out = m;
    return TFENC_OK;
}

int64_t tfenc_feeder_documents_read(const tfenc_feeder *f)
{
    return f->documents_read;
}

void tfenc_feeder_destroy(tfenc_feeder *f)
{
    if (f == NULL)
        return;
    clear_window(f);
    free(f->id_pool);
    free(f);
}
