/* Late chunking ([job] long_documents = late_chunk, docs/job-file.md): a
 * document is encoded once, whole, up to max_seq_len tokens, and its token
 * vectors are pooled over spans of chunk_tokens pieces starting every
 * chunk_tokens - chunk_overlap pieces (the last one ending with the
 * document), one vector per span with the whole document as its context
 * (Günther et al., "Late Chunking", 2024). The special tokens around the
 * pieces are context only: no span holds them. A document longer than
 * max_seq_len is encoded in windows of whole spans, each window the
 * context of its spans.
 *
 * The rules here are the one description the feeder cuts documents by and
 * the last stage pools by, so that the two agree. */
#ifndef TFENC_LATE_CHUNKS_H
#define TFENC_LATE_CHUNKS_H

#include <stdint.h>

#include "model/model.h"
#include "ranks/pipeline.h"

typedef struct tfenc_late_chunks {
    int span;               /* pieces of a span ([job] chunk_tokens), >= 1 */
    int step;               /* a span starts every step pieces (span - chunk_overlap), >= 1 */
    int room;               /* pieces a sequence holds: max_seq_len less the special tokens */
    int n_prefix, n_suffix; /* the special tokens before and after a sequence's pieces */
} tfenc_late_chunks;

/* The spans of a document of n_pieces pieces: 1 when they fit one span
 * (an empty document has one empty span), else one every step pieces
 * until one reaches the end. */
int tfenc_late_chunks_count(const tfenc_late_chunks *c, int n_pieces);

/* A document's windows: 1 when its pieces fit `room`, else windows of
 * 1 + (room - span) / step whole spans (the last one the rest). Window w's
 * spans first_span .. first_span + n_spans - 1, its pieces
 * [first_piece, end_piece) of the document. Returns the windows. */
int tfenc_late_chunks_windows(const tfenc_late_chunks *c, int n_pieces);
void tfenc_late_chunks_window(const tfenc_late_chunks *c, int n_pieces, int w, int *first_span,
                              int *n_spans, int *first_piece, int *end_piece);

/* Span k of a document, in a sequence whose pieces are the document's
 * [first_piece, first_piece + seq_pieces): its rows [*begin, *end) in the
 * sequence (special tokens counted). */
void tfenc_late_chunks_span_rows(const tfenc_late_chunks *c, int k, int first_piece,
                                 int seq_pieces, int32_t *begin, int32_t *end);

/* The microbatch through the model (created with late_chunks), its rows
 * become one per span: the spans of sequence 0, then of sequence 1, ...
 * (microbatch->spans[j] each). */
int tfenc_late_chunks_forward(tfenc_context *ctx, tfenc_model *model, const tfenc_late_chunks *c,
                              tfenc_microbatch *microbatch);

#endif
