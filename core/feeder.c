/* Windows of documents -> length-sorted microbatches for the first stage. */
#include "feeder.h"

#include "context.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A document of the current window, tokenized. */
typedef struct pending {
    int64_t global_index;
    int64_t token_offset; /* first row in the output's hidden (tokens kind) */
    size_t ids_at;        /* its ids start here in the window's id pool */
    int32_t length;
    int32_t truncated;
    char *id;             /* document id, or NULL */
} pending;

/* A microbatch of the window: documents order[first .. end). */
typedef struct planned_batch {
    int first, end;
    int skip; /* every document finished by an earlier run */
} planned_batch;

struct tfenc_feeder {
    tfenc_feeder_options options;
    tfenc_tokenizer *tokenizer;
    tfenc_corpus *corpus;
    int64_t documents_fed;
    /* The current window. */
    pending *documents;
    int *order;          /* documents sorted by length, longest first */
    planned_batch *batches;
    int n_documents, n_batches, next_batch;
    int capacity;        /* documents the arrays above hold */
    int32_t *id_pool;    /* every document's ids, end to end */
    size_t pool_used, pool_capacity;
    int32_t *scratch;    /* [max_seq_len]: one document's ids while counting */
    char *text;          /* the prompt, then the document being tokenized */
    size_t text_capacity;
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

/* With a prompt, the document's text becomes prompt + text, as
 * sentence-transformers encodes it (the prompt's tokens are part of the
 * document: they count toward max_seq_len and are pooled with it). */
static int put_prompt(tfenc_context *ctx, tfenc_feeder *f, tfenc_document *document)
{
    if (f->options.prompt == NULL || document->text == NULL)
        return TFENC_OK;
    size_t prompt = strlen(f->options.prompt), needed = prompt + document->text_length + 1;
    if (needed > f->text_capacity) {
        size_t capacity = f->text_capacity > 0 ? f->text_capacity : 4096;
        while (capacity < needed)
            capacity *= 2;
        char *grown = realloc(f->text, capacity);
        if (grown == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for a %zu-byte document",
                               needed);
        f->text = grown;
        f->text_capacity = capacity;
    }
    memcpy(f->text, f->options.prompt, prompt);
    memcpy(f->text + prompt, document->text, document->text_length);
    f->text[prompt + document->text_length] = '\0';
    document->text = f->text;
    document->text_length += prompt;
    return TFENC_OK;
}

int tfenc_feeder_create(tfenc_context *ctx, const tfenc_feeder_options *options,
                        tfenc_tokenizer *tokenizer, tfenc_corpus *corpus,
                        tfenc_feeder **feeder_out)
{
    *feeder_out = NULL;
    tfenc_feeder *f = calloc(1, sizeof *f);
    if (f == NULL || (f->scratch = malloc((size_t)options->max_seq_len * sizeof *f->scratch)) == NULL) {
        free(f);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    }
    f->options = *options;
    f->tokenizer = tokenizer;
    f->corpus = corpus;
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
    f->n_batches = 0;
    f->next_batch = 0;
    f->pool_used = 0;
}

/* Room for `n` documents and `ids` more token ids in the window. */
static int reserve(tfenc_context *ctx, tfenc_feeder *f, int64_t n, size_t ids)
{
    if (n > f->capacity) {
        pending *documents = realloc(f->documents, (size_t)n * sizeof *documents);
        if (documents != NULL)
            f->documents = documents;
        int *order = realloc(f->order, (size_t)n * sizeof *order);
        if (order != NULL)
            f->order = order;
        planned_batch *batches = realloc(f->batches, (size_t)n * sizeof *batches);
        if (batches != NULL)
            f->batches = batches;
        if (documents == NULL || order == NULL || batches == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for a window of %lld "
                               "documents", (long long)n);
        f->capacity = (int)n;
    }
    if (f->pool_used + ids > f->pool_capacity) {
        size_t capacity = f->pool_capacity > 0 ? f->pool_capacity : 1 << 16;
        while (capacity < f->pool_used + ids)
            capacity *= 2;
        int32_t *grown = realloc(f->id_pool, capacity * sizeof *grown);
        if (grown == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for a window's tokens");
        f->id_pool = grown;
        f->pool_capacity = capacity;
    }
    return TFENC_OK;
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

/* The cut into microbatches: the longest remaining documents that fit
 * batch_tokens together, in sorted order. */
static void plan_batches(tfenc_feeder *f, const uint8_t *finished, int64_t first_index)
{
    f->n_batches = 0;
    for (int at = 0; at < f->n_documents;) {
        planned_batch *b = &f->batches[f->n_batches++];
        int tokens = 0, end = at;
        while (end < f->n_documents &&
               tokens + f->documents[f->order[end]].length <= f->options.batch_tokens)
            tokens += f->documents[f->order[end++]].length;
        b->first = at;
        b->end = end;
        b->skip = finished != NULL;
        for (int j = at; b->skip && j < end; j++)
            b->skip = finished[f->documents[f->order[j]].global_index - first_index] != 0;
        at = end;
    }
}

int tfenc_feeder_load_window(tfenc_context *ctx, tfenc_feeder *f, const tfenc_corpus_range *window,
                             int64_t first_token, const uint8_t *finished)
{
    clear_window(f);
    int status = tfenc_corpus_select(ctx, f->corpus, window);
    if (status == TFENC_OK)
        status = reserve(ctx, f, window->n_documents, 0);
    tfenc_document document;
    int64_t token_cursor = first_token;
    while (status == TFENC_OK && f->n_documents < window->n_documents) {
        status = tfenc_corpus_next(ctx, f->corpus, &document);
        if (status == TFENC_ERR_NOT_FOUND)
            status = tfenc_error(ctx, TFENC_ERR_IO, "%s: window of documents %lld.. ended after "
                                 "%d of %lld documents (did the file change while the job "
                                 "ran?)", f->options.input, (long long)window->first_index,
                                 f->n_documents, (long long)window->n_documents);
        if (status == TFENC_OK)
            status = reserve(ctx, f, window->n_documents, (size_t)f->options.max_seq_len);
        if (status != TFENC_OK)
            break;
        pending *doc = &f->documents[f->n_documents];
        doc->global_index = window->first_index + document.local_index;
        doc->ids_at = f->pool_used;
        doc->id = NULL;
        if ((status = put_prompt(ctx, f, &document)) != TFENC_OK)
            break;
        status = tfenc_feeder_tokenize(ctx, &f->options, f->tokenizer, &document,
                                       doc->global_index, f->id_pool + doc->ids_at,
                                       &doc->length, &doc->truncated);
        if (status != TFENC_OK)
            break;
        doc->token_offset = token_cursor;
        token_cursor += doc->length;
        if (f->options.has_ids) {
            doc->id = strdup(document.id != NULL ? document.id : "");
            if (doc->id == NULL)
                status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        }
        f->pool_used += (size_t)doc->length;
        f->n_documents++;
    }
    if (status != TFENC_OK) {
        clear_window(f);
        return status;
    }
    for (int i = 0; i < f->n_documents; i++)
        f->order[i] = i;
    sort_documents = f->documents;
    qsort(f->order, (size_t)f->n_documents, sizeof *f->order, by_length);
    plan_batches(f, finished, window->first_index);
    return TFENC_OK;
}

int tfenc_feeder_count_window(tfenc_context *ctx, tfenc_feeder *f,
                              const tfenc_corpus_range *window, int64_t *tokens)
{
    *tokens = 0;
    int status = tfenc_corpus_select(ctx, f->corpus, window);
    tfenc_document document;
    for (int64_t i = 0; status == TFENC_OK && i < window->n_documents; i++) {
        status = tfenc_corpus_next(ctx, f->corpus, &document);
        if (status == TFENC_ERR_NOT_FOUND)
            status = tfenc_error(ctx, TFENC_ERR_IO, "%s: window of documents %lld.. ended after "
                                 "%lld of %lld documents (did the file change?)",
                                 f->options.input, (long long)window->first_index, (long long)i,
                                 (long long)window->n_documents);
        int32_t length = 0, truncated = 0;
        if (status == TFENC_OK)
            status = put_prompt(ctx, f, &document);
        if (status == TFENC_OK)
            status = tfenc_feeder_tokenize(ctx, &f->options, f->tokenizer, &document,
                                           window->first_index + i, f->scratch, &length,
                                           &truncated);
        *tokens += length;
    }
    return status;
}

int tfenc_feeder_next(tfenc_context *ctx, tfenc_feeder *f, tfenc_pipeline *pipeline,
                      tfenc_microbatch **microbatch_out)
{
    *microbatch_out = NULL;
    while (f->next_batch < f->n_batches && f->batches[f->next_batch].skip)
        f->next_batch++;
    if (f->next_batch >= f->n_batches)
        return TFENC_ERR_NOT_FOUND;
    const planned_batch *b = &f->batches[f->next_batch];
    int n_seq = b->end - b->first, n_tokens = 0;
    size_t ids_bytes = 0;
    for (int j = b->first; j < b->end; j++) {
        const pending *doc = &f->documents[f->order[j]];
        n_tokens += doc->length;
        if (doc->id != NULL)
            ids_bytes += strlen(doc->id) + 1;
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
        const pending *doc = &f->documents[f->order[b->first + j]];
        memcpy(m->token_ids + row, f->id_pool + doc->ids_at, (size_t)doc->length * sizeof(int32_t));
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
    f->next_batch++;
    f->documents_fed += n_seq;
    *microbatch_out = m;
    return TFENC_OK;
}

int64_t tfenc_feeder_documents_fed(const tfenc_feeder *f)
{
    return f->documents_fed;
}

void tfenc_feeder_destroy(tfenc_feeder *f)
{
    if (f == NULL)
        return;
    clear_window(f);
    free(f->documents);
    free(f->order);
    free(f->batches);
    free(f->id_pool);
    free(f->scratch);
    free(f->text);
    free(f);
}
