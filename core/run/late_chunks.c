/* Spans of late chunking: where they are, and their pooling. */
#include "run/late_chunks.h"

#include "base/context.h"

#include <stdlib.h>

int tfenc_late_chunks_count(const tfenc_late_chunks *c, int n_pieces)
{
    if (n_pieces <= c->span)
        return 1;
    return 1 + (n_pieces - c->span + c->step - 1) / c->step;
}

/* Whole spans a window of a longer document holds: the union of n spans,
 * (n - 1) x step + span pieces, fits the room. */
static int spans_per_window(const tfenc_late_chunks *c)
{
    return 1 + (c->room - c->span) / c->step;
}

int tfenc_late_chunks_windows(const tfenc_late_chunks *c, int n_pieces)
{
    if (n_pieces <= c->room)
        return 1;
    const int per_window = spans_per_window(c);
    return (tfenc_late_chunks_count(c, n_pieces) + per_window - 1) / per_window;
}

void tfenc_late_chunks_window(const tfenc_late_chunks *c, int n_pieces, int w, int *first_span,
                              int *n_spans, int *first_piece, int *end_piece)
{
    const int total = tfenc_late_chunks_count(c, n_pieces);
    const int per_window = n_pieces <= c->room ? total : spans_per_window(c);
    *first_span = w * per_window;
    *n_spans = total - *first_span < per_window ? total - *first_span : per_window;
    *first_piece = *first_span * c->step;
    const int last_end = (*first_span + *n_spans - 1) * c->step + c->span;
    *end_piece = last_end < n_pieces ? last_end : n_pieces;
}

void tfenc_late_chunks_span_rows(const tfenc_late_chunks *c, int k, int first_piece,
                                 int seq_pieces, int32_t *begin, int32_t *end)
{
    const int start = k * c->step, stop = start + c->span;
    const int seq_end = first_piece + seq_pieces;
    *begin = c->n_prefix + start - first_piece;
    *end = c->n_prefix + (stop < seq_end ? stop : seq_end) - first_piece;
    if (*end < *begin) /* the empty span of an empty document */
        *end = *begin;
}

int tfenc_late_chunks_forward(tfenc_context *ctx, tfenc_model *model, const tfenc_late_chunks *c,
                              tfenc_microbatch *m)
{
    const tfenc_batch *b = &m->batch;
    int n_spans = 0;
    for (int j = 0; j < b->n_seq; j++)
        n_spans += m->spans[j];
    int32_t *begin = malloc((size_t)(n_spans > 0 ? n_spans : 1) * 2 * sizeof *begin);
    if (begin == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for %d spans", n_spans);
    int32_t *end = begin + n_spans;
    int s = 0;
    for (int j = 0; j < b->n_seq; j++) {
        const int seq_pieces = m->lengths[j] - c->n_prefix - c->n_suffix;
        for (int k = m->chunk[j]; k < m->chunk[j] + m->spans[j]; k++, s++) {
            tfenc_late_chunks_span_rows(c, k, m->chunk_start[j], seq_pieces, &begin[s], &end[s]);
            begin[s] += m->seq_start[j];
            end[s] += m->seq_start[j];
        }
    }
    const tfenc_model_spans spans = {.n_spans = n_spans, .begin = begin, .end = end};
    int status = tfenc_model_forward_spans(ctx, model, &m->batch, &spans);
    free(begin);
    return status;
}
