/* Windows of documents -> length-sorted microbatches for the first stage. */
#include "run/feeder.h"

#include "base/context.h"
#include "base/growth.h"
#include "run/late_chunks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A sequence of the current window: a whole document, or one chunk of a
 * long one. */
typedef struct pending {
    int64_t global_index;
    int64_t token_offset; /* first row of its document in the output: its first
                           * token's (tokens kind), its first chunk's (EACH) */
    size_t ids_at;        /* its ids start here in the window's id pool */
    int64_t source_line;  /* its document's line (row) in its file (tfenc_document.line) */
    int32_t source;       /* the file its document was read from */
    int32_t length;
    int32_t keys;         /* its first tokens that are keys of attention (tfenc_batch.seq_keys) */
    int32_t truncated;    /* pieces its document lost to max_seq_len */
    int32_t chunk, n_chunks, chunk_start;
    int32_t spans;        /* late chunking: the spans it pools from chunk on; else 1 */
    size_t spans_at;      /* late chunking: its spans start here in the window's span pool */
    char *id;             /* document id, or NULL */
} pending;

/* A microbatch of the window: sequences order[first .. end). */
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
    pending *sequences;
    int *order;          /* sequences sorted by length, longest first */
    planned_batch *batches;
    int n_sequences, n_batches, next_batch;
    int capacity;        /* sequences the arrays above hold */
    int32_t *id_pool;    /* every sequence's ids, end to end */
    int32_t *type_pool;  /* and their token types (pairs: 0 then 1 for BERT) */
    size_t pool_used, pool_capacity;
    int32_t *span_begin_pool, *span_end_pool; /* late chunking: every sequence's spans */
    size_t spans_used, spans_capacity;
    int32_t *document_begin, *document_end; /* late chunking: one document's spans */
    size_t document_capacity;
    int32_t *scratch;    /* [max_seq_len]: one document's ids */
    int32_t *scratch_types; /* [max_seq_len]: and their types */
    char *text;          /* the prompt, then the document being tokenized */
    size_t text_capacity;
    tfenc_kept_text carried; /* carries_kept: the document's id and kept values */
};

int tfenc_feeder_tokenize(tfenc_context *ctx, const tfenc_feeder_options *options, tfenc_tokenizer *tokenizer,
                    const tfenc_document *document, int64_t global_index, int32_t *ids,
                    int32_t *types, int32_t *length, int32_t *keys, int32_t *truncated)
{
    /* A marker takes one place of max_seq_len (ColBERT tokenizes ". " +
     * text to max_len and writes the marker over the ".") */
    const int marked = options->marker_id >= 0;
    const int max_length = options->max_seq_len - marked;
    int n_ids = 0, cut = 0, status = TFENC_OK;
    if (document->text_pair != NULL && tokenizer != NULL) {
        status = tfenc_tokenizer_encode_pair(ctx, tokenizer, document->text, document->text_length,
                                             document->text_pair, document->text_pair_length,
                                             ids, types, max_length, &n_ids, &cut);
    } else if (document->token_ids != NULL || tokenizer == NULL) {
        n_ids = document->n_tokens < max_length ? document->n_tokens : max_length;
        cut = document->n_tokens - n_ids;
        if (n_ids > 0)
            memcpy(ids, document->token_ids, (size_t)n_ids * sizeof *ids);
        if (options->vocab_size > 0)
            for (int i = 0; i < n_ids; i++)
                if (ids[i] >= options->vocab_size)
                    return tfenc_error(ctx, TFENC_ERR_INPUT,
                                       "%s: document %lld: token id %d is outside the "
                                       "vocabulary (vocab_size %d)",
                                       options->input, (long long)global_index, ids[i],
                                       options->vocab_size);
    } else {
        status = tfenc_tokenizer_encode(ctx, tokenizer, document->text, document->text_length,
                                        ids, max_length, &n_ids, &cut);
    }
    if (status != TFENC_OK) {
        /* The tokenizer knows the text, not where it came from. */
        return tfenc_error_prefix(ctx, status, "%s: document %lld (0-based)", options->input,
                                  (long long)global_index);
    }
    /* A single text is all type 0; a pair's types come from its template. */
    if (document->text_pair == NULL || tokenizer == NULL)
        memset(types, 0, (size_t)n_ids * sizeof *types);
    /* Token ids or text alike (a tokenizer without special tokens gives an
     * empty line none): a layer cannot make a row of nothing. */
    if (n_ids == 0 && (!options->empty_documents || marked))
        return tfenc_error(ctx, TFENC_ERR_INPUT,
                           "%s: document %lld has no tokens (an encoder needs at least one)",
                           options->input, (long long)global_index);
    if (cut > 0 && !options->truncation)
        return tfenc_error(ctx, TFENC_ERR_INPUT,
                           "%s: document %lld has %d tokens, more than max_seq_len %d "
                           "(set [job] truncation = true to cut it)",
                           options->input, (long long)global_index, n_ids + cut,
                           max_length);
    if (marked) {
        memmove(ids + 2, ids + 1, (size_t)(n_ids - 1) * sizeof *ids);
        memmove(types + 2, types + 1, (size_t)(n_ids - 1) * sizeof *types);
        ids[1] = options->marker_id;
        types[1] = types[0];
        n_ids++;
    }
    *keys = n_ids;
    while (options->pad_id >= 0 && n_ids < options->max_seq_len) {
        types[n_ids] = 0;
        ids[n_ids++] = options->pad_id;
    }
    if (options->pad_attended)
        *keys = n_ids;
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
    if (options->chunks != TFENC_CHUNKS_OFF) {
        int room = options->max_seq_len - (tokenizer != NULL ? tfenc_tokenizer_special_count(tokenizer)
                                                             : 0);
        if (tokenizer == NULL)
            return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: long_documents = chunk cuts text "
                               "documents; a token-id corpus is used as given",
                               options->input);
        if (options->late_chunk_tokens > room)
            return tfenc_error(ctx, TFENC_ERR_CONFIG, "[job] chunk_tokens = %d: must be in "
                               "1..%d (max_seq_len %d less the %d special tokens)",
                               options->late_chunk_tokens, room, options->max_seq_len,
                               options->max_seq_len - room);
        if (options->late_chunk_tokens > 0)
            room = options->late_chunk_tokens;
        if (options->chunk_overlap < 0 || options->chunk_overlap >= room)
            return tfenc_error(ctx, TFENC_ERR_CONFIG, "[job] chunk_overlap = %d: must be in "
                               "0..%d (max_seq_len %d less the %d special tokens, less one)",
                               options->chunk_overlap, room - 1, options->max_seq_len,
                               options->max_seq_len - room);
    }
    tfenc_feeder *f = calloc(1, sizeof *f);
    if (f == NULL || (f->scratch = malloc((size_t)options->max_seq_len * sizeof *f->scratch)) == NULL
        || (f->scratch_types = malloc((size_t)options->max_seq_len * sizeof *f->scratch_types))
               == NULL) {
        if (f != NULL)
            free(f->scratch);
        free(f);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    }
    f->options = *options;
    f->tokenizer = tokenizer;
    if (options->late_chunk_tokens > 0 && options->late_chunk_sentences) {
        int status = tfenc_tokenizer_mark_sentences(ctx, tokenizer, 1);
        if (status != TFENC_OK) {
            tfenc_feeder_destroy(f);
            return status;
        }
    }
    f->corpus = corpus;
    *feeder_out = f;
    return TFENC_OK;
}

static void clear_window(tfenc_feeder *f)
{
    for (int i = 0; i < f->n_sequences; i++) {
        free(f->sequences[i].id);
        f->sequences[i].id = NULL;
    }
    f->n_sequences = 0;
    f->n_batches = 0;
    f->next_batch = 0;
    f->pool_used = 0;
    f->spans_used = 0;
}

/* Room for `n` sequences and `ids` more token ids in the window. */
static int reserve(tfenc_context *ctx, tfenc_feeder *f, int64_t n, size_t ids)
{
    if (n > f->capacity) {
        const int64_t capacity = tfenc_grown_capacity(f->capacity, n, 256, INT32_MAX);
        if (capacity < 0)
            return tfenc_error(ctx, TFENC_ERR_INPUT, "a window of more than 2^31 sequences");
        int grew = 1;
        TFENC_GROW_ARRAY(f->sequences, capacity, grew);
        TFENC_GROW_ARRAY(f->order, capacity, grew);
        TFENC_GROW_ARRAY(f->batches, capacity, grew);
        if (!grew)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for a window of %lld "
                               "sequences", (long long)n);
        f->capacity = (int)capacity;
    }
    if (f->pool_used + ids > f->pool_capacity) {
        const int64_t capacity = tfenc_grown_capacity((int64_t)f->pool_capacity,
                                                      (int64_t)(f->pool_used + ids), 1 << 16,
                                                      INT64_MAX);
        int grew = 1; /* a capacity of -1 (too many) fails each growth */
        TFENC_GROW_ARRAY(f->id_pool, capacity, grew);
        TFENC_GROW_ARRAY(f->type_pool, capacity, grew);
        if (!grew)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for a window's tokens");
        f->pool_capacity = (size_t)capacity;
    }
    return TFENC_OK;
}

static const pending *sort_sequences;

/* Longest first; ties by document, then chunk, so that the order is
 * reproducible. */
static int by_length(const void *a, const void *b)
{
    const pending *x = &sort_sequences[*(const int *)a], *y = &sort_sequences[*(const int *)b];
    if (x->length != y->length)
        return x->length > y->length ? -1 : 1;
    if (x->global_index != y->global_index)
        return x->global_index < y->global_index ? -1 : 1;
    return (x->chunk > y->chunk) - (x->chunk < y->chunk);
}

/* The cut into microbatches: the longest remaining sequences that fit
 * batch_tokens together, in sorted order. */
static void plan_batches(tfenc_feeder *f, const uint8_t *finished, int64_t first_index)
{
    f->n_batches = 0;
    for (int at = 0; at < f->n_sequences;) {
        planned_batch *b = &f->batches[f->n_batches++];
        int tokens = 0, end = at;
        /* batch_tokens bounds the sequences too: empty ones (empty_documents
         * = zeros) take no tokens. */
        while (end < f->n_sequences && end - at < f->options.batch_tokens &&
               tokens + f->sequences[f->order[end]].length <= f->options.batch_tokens)
            tokens += f->sequences[f->order[end++]].length;
        b->first = at;
        b->end = end;
        b->skip = finished != NULL;
        for (int j = at; b->skip && j < end; j++)
            b->skip = finished[f->sequences[f->order[j]].global_index - first_index] != 0;
        at = end;
    }
}

/* How a long document is cut: chunks of `room` pieces starting every
 * room - overlap pieces, the last one ending with the document, each
 * between the tokenizer's special tokens. Loading, counting (what a dry
 * run counts) and the samples taken before a job (calibrated ranges) all
 * read this one description, so that they see what the job encodes. */
typedef struct chunking {
    const int32_t *pieces; /* the document's pieces, in the tokenizer */
    int n_pieces, room, overlap;
} chunking;

/* The document just tokenized: 1 with *c describing its chunks when it is
 * long and the job chunks long documents, else 0 (one sequence, its
 * truncated tokens as tokenized). */
static int document_chunking(const tfenc_feeder_options *options,
                             const tfenc_tokenizer *tokenizer, int32_t truncated, chunking *c)
{
    if (options->chunks == TFENC_CHUNKS_OFF || options->late_chunk_tokens > 0 ||
        truncated <= 0 || tokenizer == NULL)
        return 0;
    c->pieces = tfenc_tokenizer_last_pieces(tokenizer, &c->n_pieces);
    c->room = options->max_seq_len - tfenc_tokenizer_special_count(tokenizer);
    c->overlap = options->chunk_overlap;
    return 1;
}

static int chunk_count(const chunking *c)
{
    if (c->n_pieces <= c->room)
        return 1;
    int step = c->room - c->overlap;
    return 1 + (c->n_pieces - c->room + step - 1) / step;
}

int tfenc_feeder_chunks(const tfenc_feeder_options *options, const tfenc_tokenizer *tokenizer,
                        int32_t truncated)
{
    chunking cut;
    return document_chunking(options, tokenizer, truncated, &cut) ? chunk_count(&cut) : 1;
}

/* Pieces [first, end) between the tokenizer's special tokens, into ids
 * (may be NULL): a chunk's sequence, or a window's. Returns its length. */
static int32_t wrap_pieces(const tfenc_tokenizer *tokenizer, const int32_t *pieces, int first,
                           int end, int32_t *ids)
{
    const int32_t *prefix = NULL, *suffix = NULL;
    int n_prefix = 0, n_suffix = 0;
    tfenc_tokenizer_specials(tokenizer, &prefix, &n_prefix, &suffix, &n_suffix);
    if (ids != NULL) {
        memcpy(ids, prefix, (size_t)n_prefix * sizeof *ids);
        memcpy(ids + n_prefix, pieces + first, (size_t)(end - first) * sizeof *ids);
        memcpy(ids + n_prefix + (end - first), suffix, (size_t)n_suffix * sizeof *ids);
    }
    return n_prefix + (end - first) + n_suffix;
}

int32_t tfenc_feeder_chunk(const tfenc_feeder_options *options, const tfenc_tokenizer *tokenizer,
                           int32_t truncated, int k, int32_t *ids, int32_t *types,
                           int32_t *start)
{
    chunking cut;
    if (!document_chunking(options, tokenizer, truncated, &cut))
        return 0;
    const int first = k * (cut.room - cut.overlap);
    const int end = first + cut.room < cut.n_pieces ? first + cut.room : cut.n_pieces;
    const int32_t length = wrap_pieces(tokenizer, cut.pieces, first, end, ids);
    if (types != NULL)
        memset(types, 0, (size_t)length * sizeof *types);
    if (start != NULL)
        *start = first;
    return length;
}

tfenc_late_chunks tfenc_feeder_late_chunks(const tfenc_feeder_options *options,
                                           const tfenc_tokenizer *tokenizer)
{
    const int32_t *prefix = NULL, *suffix = NULL;
    int n_prefix = 0, n_suffix = 0;
    tfenc_tokenizer_specials(tokenizer, &prefix, &n_prefix, &suffix, &n_suffix);
    return (tfenc_late_chunks){.span = options->late_chunk_tokens,
                               .step = options->late_chunk_tokens - options->chunk_overlap,
                               .room = options->max_seq_len - n_prefix - n_suffix,
                               .n_prefix = n_prefix, .n_suffix = n_suffix,
                               .sentences = options->late_chunk_sentences};
}

/* The pieces of the document just tokenized: the tokenizer's (all of
 * them) when it was cut, else those between the special tokens. */
static const int32_t *document_pieces(const tfenc_tokenizer *tokenizer,
                                      const tfenc_late_chunks *c, const int32_t *ids,
                                      int32_t length, int32_t truncated, int *n_pieces)
{
    if (truncated > 0)
        return tfenc_tokenizer_last_pieces(tokenizer, n_pieces);
    *n_pieces = length - c->n_prefix - c->n_suffix > 0 ? length - c->n_prefix - c->n_suffix : 0;
    return ids + c->n_prefix;
}

/* Late chunking: the spans of the document just tokenized (its n_pieces
 * pieces) into f->document_begin / f->document_end; *n_spans their count. */
static int document_spans(tfenc_context *ctx, tfenc_feeder *f, const tfenc_late_chunks *c,
                          int64_t global_index, int n_pieces, int *n_spans)
{
    const size_t needed = n_pieces > 0 ? (size_t)n_pieces : 1;
    if (needed > f->document_capacity) {
        const int64_t capacity = tfenc_grown_capacity((int64_t)f->document_capacity,
                                                      (int64_t)needed, 1024, INT32_MAX);
        int grew = 1;
        TFENC_GROW_ARRAY(f->document_begin, capacity, grew);
        TFENC_GROW_ARRAY(f->document_end, capacity, grew);
        if (!grew)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for the spans of a "
                               "document of %d pieces", n_pieces);
        f->document_capacity = (size_t)capacity;
    }
    const uint8_t *sentence_ends = NULL;
    if (c->sentences) {
        int marked = 0;
        sentence_ends = tfenc_tokenizer_last_sentence_ends(f->tokenizer, &marked);
        if (marked != n_pieces)
            return tfenc_error(ctx, TFENC_ERR_INPUT, "%s: document %lld: chunk_spans = "
                               "sentences found %d sentence marks for %d pieces (a pair of "
                               "texts is not split into sentences)", f->options.input,
                               (long long)global_index, marked, n_pieces);
    }
    *n_spans = tfenc_late_chunks_spans(c, n_pieces, sentence_ends, f->document_begin,
                                       f->document_end);
    return TFENC_OK;
}

/* Late chunking: the document just tokenized as its windows (one when it
 * fits max_seq_len), each a sequence with its spans. *spans gets the
 * document's spans, its rows in the output. */
static int add_late_chunked(tfenc_context *ctx, tfenc_feeder *f, const pending *document,
                            int32_t length, int32_t truncated, int *added, int *spans)
{
    const tfenc_late_chunks c = tfenc_feeder_late_chunks(&f->options, f->tokenizer);
    int n_pieces = 0, n_spans = 0;
    const int32_t *pieces = document_pieces(f->tokenizer, &c, f->scratch, length, truncated,
                                            &n_pieces);
    *added = *spans = 0;
    int status = document_spans(ctx, f, &c, document->global_index, n_pieces, &n_spans);
    if (status == TFENC_OK && f->spans_used + (size_t)n_spans > f->spans_capacity) {
        const int64_t capacity = tfenc_grown_capacity((int64_t)f->spans_capacity,
                                                      (int64_t)(f->spans_used + (size_t)n_spans),
                                                      4096, INT64_MAX);
        int grew = 1;
        TFENC_GROW_ARRAY(f->span_begin_pool, capacity, grew);
        TFENC_GROW_ARRAY(f->span_end_pool, capacity, grew);
        if (!grew)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for a window's spans");
        f->spans_capacity = (size_t)capacity;
    }
    *spans = n_spans;
    for (int first = 0; status == TFENC_OK && first < n_spans;) {
        const int in_window = tfenc_late_chunks_window(&c, n_pieces, f->document_begin,
                                                       f->document_end, n_spans, first);
        const int first_piece = f->document_begin[first];
        const int end_piece = f->document_end[first + in_window - 1];
        status = reserve(ctx, f, (int64_t)f->n_sequences + 1, (size_t)f->options.max_seq_len);
        if (status != TFENC_OK)
            break;
        pending *sequence = &f->sequences[f->n_sequences];
        *sequence = *document;
        sequence->ids_at = f->pool_used;
        sequence->length = wrap_pieces(f->tokenizer, pieces, first_piece, end_piece,
                                       f->id_pool + f->pool_used);
        memset(f->type_pool + f->pool_used, 0, (size_t)sequence->length * sizeof(int32_t));
        sequence->keys = sequence->length;
        sequence->truncated = 0;
        sequence->chunk = first;
        sequence->n_chunks = n_spans;
        sequence->chunk_start = first_piece;
        sequence->spans = in_window;
        sequence->spans_at = f->spans_used;
        memcpy(f->span_begin_pool + f->spans_used, f->document_begin + first,
               (size_t)in_window * sizeof(int32_t));
        memcpy(f->span_end_pool + f->spans_used, f->document_end + first,
               (size_t)in_window * sizeof(int32_t));
        f->spans_used += (size_t)in_window;
        sequence->id = NULL;
        if (document->id != NULL && (sequence->id = strdup(document->id)) == NULL)
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        f->pool_used += (size_t)sequence->length;
        f->n_sequences++;
        (*added)++;
        first += in_window;
    }
    return status;
}

/* Adds the document just tokenized (its truncated form in f->scratch, its
 * whole pieces in the tokenizer) as one sequence, or as chunks when it is
 * long and the job chunks long documents (late chunking: as its windows).
 * *added gets the sequences added, *rows the rows of an output of every
 * chunk (its chunks, or its spans). */
static int add_document(tfenc_context *ctx, tfenc_feeder *f, int64_t global_index,
                        const tfenc_document *document, const char *id, int32_t length,
                        int32_t keys, int32_t truncated, int64_t first_row, int *added,
                        int *rows)
{
    if (f->options.late_chunk_tokens > 0) {
        /* What every window of the document shares. */
        const pending whole = {.global_index = global_index, .source = document->source,
                               .source_line = document->line, .token_offset = first_row,
                               .id = (char *)id};
        return add_late_chunked(ctx, f, &whole, length, truncated, added, rows);
    }
    const int n_chunks = tfenc_feeder_chunks(&f->options, f->tokenizer, truncated);
    const int chunked = n_chunks > 1;
    int status = reserve(ctx, f, (int64_t)f->n_sequences + n_chunks,
                         (size_t)n_chunks * (size_t)f->options.max_seq_len);
    for (int c = 0; status == TFENC_OK && c < n_chunks; c++) {
        pending *sequence = &f->sequences[f->n_sequences];
        int32_t *ids = f->id_pool + f->pool_used, *types = f->type_pool + f->pool_used;
        sequence->global_index = global_index;
        sequence->source = document->source;
        sequence->source_line = document->line;
        sequence->token_offset = first_row;
        sequence->ids_at = f->pool_used;
        sequence->chunk = c;
        sequence->n_chunks = n_chunks;
        sequence->spans = 1;
        sequence->id = NULL;
        if (!chunked) {
            memcpy(ids, f->scratch, (size_t)length * sizeof *ids);
            memcpy(types, f->scratch_types, (size_t)length * sizeof *types);
            sequence->length = length;
            sequence->keys = keys;
            sequence->truncated = truncated;
            sequence->chunk_start = 0;
        } else {
            sequence->length = tfenc_feeder_chunk(&f->options, f->tokenizer, truncated, c, ids,
                                                  types, &sequence->chunk_start);
            sequence->keys = sequence->length;
            sequence->truncated = 0;
        }
        if (id != NULL && (sequence->id = strdup(id)) == NULL)
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        f->pool_used += (size_t)sequence->length;
        f->n_sequences++;
    }
    *added = *rows = n_chunks;
    return status;
}

/* The text a document carries to the writer with kept fields: its id as
 * the first value, then the reader's kept values. */
static int carry_kept(tfenc_context *ctx, tfenc_feeder *f, const tfenc_document *document,
                      const char **carried)
{
    tfenc_kept_value id = {.type = TFENC_KEPT_ABSENT};
    if (document->id != NULL)
        id = (tfenc_kept_value){.type = TFENC_KEPT_STRING, .string = document->id,
                                .length = document->id_length};
    tfenc_kept_text_clear(&f->carried);
    if (tfenc_kept_append(&f->carried, &id) != 0
        || tfenc_kept_append_text(&f->carried, document->kept,
                                  document->kept != NULL ? document->kept_length : 0) != 0)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    *carried = f->carried.text;
    return TFENC_OK;
}

int tfenc_feeder_load_window(tfenc_context *ctx, tfenc_feeder *f, const tfenc_corpus_range *window,
                             int64_t first_row, const uint8_t *finished)
{
    clear_window(f);
    int status = tfenc_corpus_select(ctx, f->corpus, window);
    tfenc_document document;
    int64_t row = first_row;
    for (int64_t i = 0; status == TFENC_OK && i < window->n_documents; i++) {
        status = tfenc_corpus_next(ctx, f->corpus, &document);
        if (status == TFENC_ERR_NOT_FOUND)
            status = tfenc_error(ctx, TFENC_ERR_IO, "%s: window of documents %lld.. ended after "
                                 "%lld of %lld documents (did the file change while the job "
                                 "ran?)", f->options.input, (long long)window->first_index,
                                 (long long)i, (long long)window->n_documents);
        if (status == TFENC_OK)
            status = put_prompt(ctx, f, &document);
        int32_t length = 0, keys = 0, truncated = 0;
        int64_t global_index = window->first_index + document.local_index;
        if (status == TFENC_OK)
            status = tfenc_feeder_tokenize(ctx, &f->options, f->tokenizer, &document,
                                           global_index, f->scratch, f->scratch_types, &length,
                                           &keys, &truncated);
        int added = 0, chunk_rows = 0;
        const char *id = f->options.has_ids ? (document.id != NULL ? document.id : "") : NULL;
        if (status == TFENC_OK && f->options.carries_kept)
            status = carry_kept(ctx, f, &document, &id);
        if (status == TFENC_OK)
            status = add_document(ctx, f, global_index, &document, id, length, keys, truncated,
                                  row, &added, &chunk_rows);
        /* The document's rows in the output: its tokens, or its chunks. */
        row += f->options.chunks == TFENC_CHUNKS_EACH
                   ? chunk_rows
                   : tfenc_skiplist_count(f->options.skiplist, f->scratch, length);
    }
    if (status != TFENC_OK) {
        clear_window(f);
        return status;
    }
    for (int i = 0; i < f->n_sequences; i++)
        f->order[i] = i;
    /* A model whose cost per token does not depend on the length (a static
     * one) gains nothing from sorting, and its rows in order are written
     * as one block. */
    sort_sequences = f->sequences;
    if (!f->options.document_order)
        qsort(f->order, (size_t)f->n_sequences, sizeof *f->order, by_length);
    plan_batches(f, finished, window->first_index);
    return TFENC_OK;
}

/* Late chunking: the tokens of the document's windows, the windows and
 * its spans, as add_late_chunked makes them. */
static int count_late_chunked(tfenc_context *ctx, tfenc_feeder *f, int64_t global_index,
                              int32_t length, int32_t truncated, int64_t *tokens,
                              int64_t *windows, int64_t *spans)
{
    const tfenc_late_chunks c = tfenc_feeder_late_chunks(&f->options, f->tokenizer);
    int n_pieces = 0, n_spans = 0;
    document_pieces(f->tokenizer, &c, f->scratch, length, truncated, &n_pieces);
    int status = document_spans(ctx, f, &c, global_index, n_pieces, &n_spans);
    for (int first = 0; status == TFENC_OK && first < n_spans;) {
        const int in_window = tfenc_late_chunks_window(&c, n_pieces, f->document_begin,
                                                       f->document_end, n_spans, first);
        *tokens += wrap_pieces(f->tokenizer, NULL, f->document_begin[first],
                               f->document_end[first + in_window - 1], NULL);
        (*windows)++;
        first += in_window;
    }
    *spans += n_spans;
    return status;
}

int tfenc_feeder_count_window(tfenc_context *ctx, tfenc_feeder *f,
                              const tfenc_corpus_range *window, int64_t *tokens, int64_t *chunks,
                              int64_t *chunk_rows, int64_t *kept)
{
    *tokens = *chunks = *chunk_rows = *kept = 0;
    int status = tfenc_corpus_select(ctx, f->corpus, window);
    tfenc_document document;
    for (int64_t i = 0; status == TFENC_OK && i < window->n_documents; i++) {
        status = tfenc_corpus_next(ctx, f->corpus, &document);
        if (status == TFENC_ERR_NOT_FOUND)
            status = tfenc_error(ctx, TFENC_ERR_IO, "%s: window of documents %lld.. ended after "
                                 "%lld of %lld documents (did the file change?)",
                                 f->options.input, (long long)window->first_index, (long long)i,
                                 (long long)window->n_documents);
        int32_t length = 0, keys = 0, truncated = 0;
        if (status == TFENC_OK)
            status = put_prompt(ctx, f, &document);
        if (status == TFENC_OK)
            status = tfenc_feeder_tokenize(ctx, &f->options, f->tokenizer, &document,
                                           window->first_index + i, f->scratch,
                                           f->scratch_types, &length, &keys, &truncated);
        /* What the job encodes: the truncated document, or every chunk
         * of a long one with its special tokens (overlaps counted in each
         * chunk that holds them). */
        if (status == TFENC_OK && f->options.late_chunk_tokens > 0) {
            status = count_late_chunked(ctx, f, window->first_index + i, length, truncated,
                                        tokens, chunks, chunk_rows);
            continue;
        }
        const int n_chunks = status == TFENC_OK
                                 ? tfenc_feeder_chunks(&f->options, f->tokenizer, truncated)
                                 : 1;
        if (n_chunks == 1)
            *tokens += length;
        for (int c = 0; n_chunks > 1 && c < n_chunks; c++)
            *tokens += tfenc_feeder_chunk(&f->options, f->tokenizer, truncated, c, NULL, NULL,
                                          NULL);
        *chunks += n_chunks;
        *chunk_rows += n_chunks;
        if (status == TFENC_OK)
            *kept += tfenc_skiplist_count(f->options.skiplist, f->scratch, length);
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
        const pending *sequence = &f->sequences[f->order[j]];
        n_tokens += sequence->length;
        if (sequence->id != NULL)
            ids_bytes += strlen(sequence->id) + 1;
    }
    tfenc_microbatch *m = NULL;
    int status = tfenc_pipeline_acquire(ctx, pipeline, &m);
    if (status == TFENC_OK)
        status = tfenc_microbatch_shape(ctx, pipeline, m, n_seq, n_tokens, ids_bytes);
    if (status != TFENC_OK)
        return status;
    char *id_cursor = m->ids;
    int row = 0, span = 0;
    m->seq_start[0] = 0;
    for (int j = 0; j < n_seq; j++) {
        const pending *sequence = &f->sequences[f->order[b->first + j]];
        memcpy(m->token_ids + row, f->id_pool + sequence->ids_at,
               (size_t)sequence->length * sizeof(int32_t));
        memcpy(m->token_types + row, f->type_pool + sequence->ids_at,
               (size_t)sequence->length * sizeof(int32_t));
        for (int t = 0; t < sequence->length; t++)
            m->positions[row + t] = t;
        row += sequence->length;
        m->seq_start[j + 1] = row;
        m->indices[j] = sequence->global_index;
        m->token_offsets[j] = sequence->token_offset;
        m->sources[j] = sequence->source;
        m->source_lines[j] = sequence->source_line;
        m->lengths[j] = sequence->length;
        m->keys[j] = sequence->keys;
        m->truncated[j] = sequence->truncated;
        m->chunk[j] = sequence->chunk;
        m->n_chunks[j] = sequence->n_chunks;
        m->chunk_start[j] = sequence->chunk_start;
        m->spans[j] = sequence->spans;
        if (f->options.late_chunk_tokens > 0) {
            memcpy(m->span_begin + span, f->span_begin_pool + sequence->spans_at,
                   (size_t)sequence->spans * sizeof(int32_t));
            memcpy(m->span_end + span, f->span_end_pool + sequence->spans_at,
                   (size_t)sequence->spans * sizeof(int32_t));
            span += sequence->spans;
        }
        if (id_cursor != NULL) {
            size_t bytes = strlen(sequence->id) + 1;
            memcpy(id_cursor, sequence->id, bytes);
            id_cursor += bytes;
        }
    }
    /* Only a query whose padding is not attended to has tokens that are
     * not keys; every other batch keeps seq_keys NULL, as layers built
     * before ABI 1.4 expect. */
    if (f->options.pad_id >= 0 && !f->options.pad_attended)
        m->batch.seq_keys = m->keys;
    f->next_batch++;
    for (int j = 0; j < n_seq; j++)
        f->documents_fed += m->chunk[j] + m->spans[j] == m->n_chunks[j];
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
    free(f->sequences);
    free(f->order);
    free(f->batches);
    free(f->id_pool);
    free(f->type_pool);
    free(f->span_begin_pool);
    free(f->span_end_pool);
    free(f->document_begin);
    free(f->document_end);
    free(f->scratch_types);
    free(f->scratch);
    free(f->text);
    tfenc_kept_text_free(&f->carried);
    free(f);
}
