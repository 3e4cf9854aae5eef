/* Spans of late chunking: where they are, and their pooling. */
#include "run/late_chunks.h"

#include "base/context.h"

#include <stdlib.h>

static int token_spans(const tfenc_late_chunks *c, int n_pieces, int32_t *begin, int32_t *end)
{
    const int count = n_pieces <= c->span ? 1 : 1 + (n_pieces - c->span + c->step - 1) / c->step;
    for (int k = 0; k < count; k++) {
        begin[k] = k * c->step;
        end[k] = begin[k] + c->span < n_pieces ? begin[k] + c->span : n_pieces;
    }
    return count;
}

static int sentence_spans(const tfenc_late_chunks *c, int n_pieces, const uint8_t *sentence_ends,
                          int32_t *begin, int32_t *end)
{
    int count = 0, start = 0;
    for (int i = 0; i < n_pieces; i++) {
        const int last = i == n_pieces - 1 || i + 1 - start == c->span ||
                         (sentence_ends != NULL && sentence_ends[i]);
        if (last) {
            begin[count] = start;
            end[count++] = i + 1;
            start = i + 1;
        }
    }
    if (count == 0) { /* the empty span of an empty document */
        begin[0] = end[0] = 0;
        count = 1;
    }
    return count;
}

int tfenc_late_chunks_spans(const tfenc_late_chunks *c, int n_pieces,
                            const uint8_t *sentence_ends, int32_t *begin, int32_t *end)
{
    return c->sentences ? sentence_spans(c, n_pieces, sentence_ends, begin, end)
                        : token_spans(c, n_pieces, begin, end);
}

int tfenc_late_chunks_window(const tfenc_late_chunks *c, int n_pieces, const int32_t *begin,
                             const int32_t *end, int n_spans, int first)
{
    if (n_pieces <= c->room)
        return n_spans - first;
    if (!c->sentences) {
        /* The union of n spans, (n - 1) x step + span pieces, fits the room. */
        const int per_window = 1 + (c->room - c->span) / c->step;
        return n_spans - first < per_window ? n_spans - first : per_window;
    }
    /* Every span fits the room (span <= room), so a window holds one at least. */
    int last = first;
    while (last + 1 < n_spans && end[last + 1] - begin[first] <= c->room)
        last++;
    return last - first + 1;
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
        /* A span's pieces of the document, as rows of its sequence. */
        const int32_t first_row = m->seq_start[j] + c->n_prefix - m->chunk_start[j];
        for (int k = 0; k < m->spans[j]; k++, s++) {
            begin[s] = first_row + m->span_begin[s];
            end[s] = first_row + m->span_end[s];
        }
    }
    const tfenc_model_spans spans = {.n_spans = n_spans, .begin = begin, .end = end};
    int status = tfenc_model_forward_spans(ctx, model, &m->batch, &spans);
    free(begin);
    return status;
}
