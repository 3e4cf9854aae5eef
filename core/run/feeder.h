/* The first pipeline stage's input side: reads one window of the corpus
 * (windows.h) at a time, tokenizes its documents, sorts them by length and
 * cuts them into microbatches of at most batch_tokens real tokens.
 *
 * The cut is a function of the window's documents alone: longest first,
 * ties by document index (or, with document_order, in the window's order),
 * each microbatch taking the next documents while they fit. So the same window always gives the same microbatches, whatever
 * rank reads it and whether a run is resumed; a resumed window skips the
 * microbatches whose documents are all finished, and encodes the others
 * exactly as before. Sorting keeps microbatches of similar lengths
 * (attention's cost per sequence is quadratic) while memory stays flat. */
#ifndef TFENC_FEEDER_H
#define TFENC_FEEDER_H

#include "input/corpus.h"
#include "output/multivector.h"
#include "output/output.h"
#include "ranks/pipeline.h"
#include "run/late_chunks.h"
#include "tokenizer/tokenizer.h"

#include <stdint.h>

typedef struct tfenc_feeder_options {
    const char *input;  /* the corpus path, for messages */
    int max_seq_len;
    int batch_tokens;
    int truncation;     /* cut long documents (else refuse them) */
    int empty_documents; /* a document without tokens is a sequence of none (else refused) */
    int document_order;  /* microbatches take the window's sequences in order, unsorted */
    int vocab_size;     /* > 0: token ids must be below it */
    int has_ids;        /* carry document ids to the writer */
    /* With [job] keep_fields: what goes to the writer as each document's
     * "id" is the id (a string, or absent without id_field) and the kept
     * values, written as base/kept_values.h says; has_ids is set too. */
    int carries_kept;
    const char *prompt; /* put before every text document, or NULL */
    /* Long documents ([job] long_documents = chunk): a text document longer
     * than max_seq_len becomes several sequences, chunks of max_seq_len
     * tokens (the special tokens around each) starting every max_seq_len -
     * specials - chunk_overlap pieces, instead of being cut. */
    tfenc_output_chunks chunks;
    int chunk_overlap;
    /* Late chunking (run/late_chunks.h; [job] long_documents = late_chunk):
     * > 0, the pieces of a span (chunk_tokens). A document is then one
     * sequence of up to max_seq_len tokens, or windows of whole spans when
     * it is longer, each carrying its spans (tfenc_microbatch.spans);
     * `chunks` says what the writer makes of them. */
    int late_chunk_tokens;
    /* Late chunking's spans by sentence ([job] chunk_spans = sentences):
     * the feeder has the tokenizer mark sentence ends. */
    int late_chunk_sentences;
    /* Multi-vector models (output/multivector.h): marker_id >= 0 goes after
     * each sequence's first token ([CLS]), as ColBERT's [unused0]/[unused1]
     * and PyLate's [Q]/[D] do, the text keeping max_seq_len - 1 tokens;
     * pad_id >= 0 (a query's [MASK]) fills every sequence up to max_seq_len
     * (ColBERT's query augmentation), as keys of attention when
     * pad_attended (attend_to_mask_tokens), else as queries only
     * (tfenc_batch.seq_keys); skiplist (NULL: none) names the tokens that
     * write no row, which the output's offsets count. */
    int32_t marker_id;
    int32_t pad_id;
    int pad_attended;
    const tfenc_skiplist *skiplist;
} tfenc_feeder_options;

/* Turns a document into ids and their token types ([max_seq_len] each):
 * the tokenizer for text (tokenizer != NULL), its pair rule for a pair of
 * texts (types as the tokenizer's template gives them; else all 0), the
 * ids as given for token-id corpora, then the marker and the padding when
 * the options have them; refuses empty documents, ids outside the
 * vocabulary, and long documents when truncation is off. *keys gets how
 * many of the *length tokens are keys of attention: all of them, but for
 * a query's padding that is not attended to. */
int tfenc_feeder_tokenize(tfenc_context *ctx, const tfenc_feeder_options *options,
                          tfenc_tokenizer *tokenizer, const tfenc_document *document,
                          int64_t global_index, int32_t *ids, int32_t *types, int32_t *length,
                          int32_t *keys, int32_t *truncated);

/* After tfenc_feeder_tokenize: the sequences the job encodes the document
 * as, 1 or, with long_documents = chunk and a document that did not fit,
 * its chunks (how loading, counting and the samples taken before a job
 * all cut it). */
int tfenc_feeder_chunks(const tfenc_feeder_options *options, const tfenc_tokenizer *tokenizer,
                        int32_t truncated);

/* Late chunking's spans and windows (options->late_chunk_tokens > 0)
 * for the tokenizer's special tokens: what the last stage pools by. */
tfenc_late_chunks tfenc_feeder_late_chunks(const tfenc_feeder_options *options,
                                           const tfenc_tokenizer *tokenizer);

/* Chunk k (of tfenc_feeder_chunks() > 1) of that document: its tokens,
 * the special tokens around its pieces, into ids and zero token types into
 * types ([max_seq_len] each; either may be NULL), *start (may be NULL) its
 * first piece in the document. Returns its length. */
int32_t tfenc_feeder_chunk(const tfenc_feeder_options *options, const tfenc_tokenizer *tokenizer,
                           int32_t truncated, int k, int32_t *ids, int32_t *types,
                           int32_t *start);

typedef struct tfenc_feeder tfenc_feeder;

/* A feeder over an open corpus (any share: windows select their own
 * documents). tokenizer is NULL for token-id corpora. */
int tfenc_feeder_create(tfenc_context *ctx, const tfenc_feeder_options *options,
                        tfenc_tokenizer *tokenizer, tfenc_corpus *corpus,
                        tfenc_feeder **feeder_out);

/* Reads and tokenizes the window's documents and cuts its microbatches.
 * first_row is the window's first row in an output of several rows per
 * document (tokens, or chunks with TFENC_CHUNKS_EACH; 0 otherwise).
 * finished (may be NULL) holds one flag per document of the window: a
 * microbatch whose documents are all finished is skipped. */
int tfenc_feeder_load_window(tfenc_context *ctx, tfenc_feeder *f, const tfenc_corpus_range *window,
                             int64_t first_row, const uint8_t *finished);

/* Acquires a slot of the pipeline and fills it with the window's next
 * microbatch (tokens, positions, documents' indices, offsets, lengths,
 * ids). TFENC_ERR_NOT_FOUND, with no message, when the window is done. */
int tfenc_feeder_next(tfenc_context *ctx, tfenc_feeder *f, tfenc_pipeline *pipeline,
                      tfenc_microbatch **microbatch);

/* What a window makes, without keeping it: the tokens the job encodes
 * (each document after truncation, or every chunk of a long one with its
 * special tokens), the sequences (documents, or their chunks, or with
 * late chunking their windows), the rows of an output of every chunk
 * (chunks, or spans) and the tokens the skiplist keeps. How outputs of several rows per document
 * learn where each window's rows go, and what a dry run counts. */
int tfenc_feeder_count_window(tfenc_context *ctx, tfenc_feeder *f,
                              const tfenc_corpus_range *window, int64_t *tokens, int64_t *chunks,
                              int64_t *chunk_rows, int64_t *kept);

/* Documents whose last sequence has been handed out (skipped ones excluded). */
int64_t tfenc_feeder_documents_fed(const tfenc_feeder *f);

void tfenc_feeder_destroy(tfenc_feeder *f);

#endif
