/* The first pipeline stage's input side: reads the replica's share of the
 * corpus in windows of documents, tokenizes them, sorts each window by
 * length and cuts it into microbatches of at most batch_tokens real tokens.
 * Sorting by length inside a window keeps microbatches of similar lengths
 * (attention cost per sequence is quadratic) while memory stays flat. */
#ifndef TFENC_FEEDER_H
#define TFENC_FEEDER_H

#include "corpus.h"
#include "pipeline.h"
#include "tokenizer.h"

#include <stdint.h>

typedef struct tfenc_feeder_options {
    const char *input;  /* the corpus path, for messages */
    int max_seq_len;
    int batch_tokens;
    int truncation;     /* cut long documents (else refuse them) */
    int vocab_size;     /* > 0: token ids must be below it */
    int has_ids;        /* carry document ids to the writer */
} tfenc_feeder_options;

/* Turns a document into ids: the tokenizer for text (tokenizer != NULL),
 * the ids as given for token-id corpora; refuses empty documents, ids
 * outside the vocabulary, and long documents when truncation is off. */
int tfenc_feeder_tokenize(tfenc_context *ctx, const tfenc_feeder_options *options, tfenc_tokenizer *tokenizer,
                    const tfenc_document *document, int64_t global_index, int32_t *ids,
                    int32_t *length, int32_t *truncated);

/* Pass 1 over the share, after tfenc_corpus_count() and once the share's
 * first global index is known (so that errors name the right document):
 * tokenizes every document for the tokens after truncation, then rewinds.
 * Token offsets follow from these counts by an MPI scan. */
int tfenc_feeder_count_tokens(tfenc_context *ctx, const tfenc_feeder_options *options,
                        tfenc_tokenizer *tokenizer, tfenc_corpus *corpus, int64_t *tokens);

typedef struct tfenc_feeder tfenc_feeder;

/* done[k] != 0 (k = 0 .. documents of the share - 1) marks documents a
 * previous run finished. A window made only of such documents is read
 * (its tokens still count for the offsets) but not encoded again; a window
 * with any unfinished document is encoded whole, so that its microbatches
 * are those of an uninterrupted run. done may be NULL. */
int tfenc_feeder_create(tfenc_context *ctx, const tfenc_feeder_options *options, tfenc_tokenizer *tokenizer,
                  tfenc_corpus *corpus, int64_t first_token, const uint8_t *done,
                  tfenc_feeder **feeder_out);

/* Acquires a slot of the pipeline and fills it with the next microbatch
 * (tokens, positions, documents' indices, offsets, lengths, ids).
 * TFENC_ERR_NOT_FOUND, with no message, when the share is finished. */
int tfenc_feeder_next(tfenc_context *ctx, tfenc_feeder *f, tfenc_pipeline *pipeline,
                tfenc_microbatch **microbatch);

/* Documents read so far. */
int64_t tfenc_feeder_documents_read(const tfenc_feeder *f);

void tfenc_feeder_destroy(tfenc_feeder *f);

#endif
