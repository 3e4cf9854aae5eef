/* Late chunking ([job] long_documents = late_chunk, docs/job-file.md): a
 * document is encoded once, whole, up to max_seq_len tokens, and its token
 * vectors are pooled over spans of its pieces, one vector per span with
 * the whole document as its context (Günther et al., "Late Chunking",
 * 2024). The spans ([job] chunk_spans):
 *   - tokens: chunk_tokens pieces starting every chunk_tokens -
 *     chunk_overlap pieces, the last one ending with the document;
 *   - sentences: one per sentence, ending after each piece the tokenizer
 *     marks as a sentence's end (a sentence mark followed by whitespace:
 *     tfenc_tokenizer_mark_sentences) and with the document; a sentence of
 *     more than chunk_tokens pieces is cut into spans of chunk_tokens
 *     (the last one the rest), so that no span outgrows the limit.
 * The special tokens around the pieces are context only: no span holds
 * them. A document longer than max_seq_len is encoded in windows of whole
 * spans, each window the context of its spans.
 *
 * The rules here are the one description the feeder cuts documents by
 * (the pass that counts the rows and the one that encodes them), and its
 * spans travel with the microbatch to the pooling, so that all agree. */
#ifndef TFENC_LATE_CHUNKS_H
#define TFENC_LATE_CHUNKS_H

#include <stdint.h>

#include "model/model.h"
#include "ranks/pipeline.h"

typedef struct tfenc_late_chunks {
    int span;               /* pieces of a span ([job] chunk_tokens), >= 1: at most, by sentence */
    int step;               /* tokens: a span starts every step pieces, >= 1
                             * (span - chunk_overlap) */
    int room;               /* pieces a sequence holds: max_seq_len less the special tokens */
    int n_prefix, n_suffix; /* the special tokens before and after a sequence's pieces */
    int sentences;          /* [job] chunk_spans = sentences */
} tfenc_late_chunks;

/* A document's spans, [begin[k], end[k]) of its n_pieces pieces, written
 * to begin and end (room for n_pieces, at least 1, each); returns their
 * count. tokens: 1 when the pieces fit one span, else one every step
 * pieces until one reaches the end. sentences: sentence_ends[i] (one per
 * piece, may be NULL: no sentence ends) set ends a span after piece i. An
 * empty document has one empty span. The spans' ends never decrease. */
int tfenc_late_chunks_spans(const tfenc_late_chunks *c, int n_pieces,
                            const uint8_t *sentence_ends, int32_t *begin, int32_t *end);

/* The window of a document's sequence that starts at span `first` of its
 * n_spans: how many spans it holds. Every span when the document's pieces
 * fit `room`; else, by tokens, 1 + (room - span) / step spans (the last
 * window the rest), by sentences the most whole spans from `first` whose
 * pieces, begin[first] .. end[last], fit it. */
int tfenc_late_chunks_window(const tfenc_late_chunks *c, int n_pieces, const int32_t *begin,
                             const int32_t *end, int n_spans, int first);

/* The microbatch through the model (created with late_chunks), its rows
 * become one per span: the spans of sequence 0, then of sequence 1, ...
 * (microbatch->spans[j] each, at span_begin / span_end in the document's
 * pieces; the sequence holds the document's pieces from chunk_start[j]). */
int tfenc_late_chunks_forward(tfenc_context *ctx, tfenc_model *model, const tfenc_late_chunks *c,
                              tfenc_microbatch *microbatch);

#endif
