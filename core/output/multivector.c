/* Multi-vector rows: the skiplist's count and the in-place packing. */
#include "output/multivector.h"

#include <string.h>

int32_t tfenc_skiplist_count(const tfenc_skiplist *skip, const int32_t *ids, int32_t length)
{
    int32_t kept = 0;
    for (int32_t t = skip != NULL && skip->skip_first ? 1 : 0; t < length; t++)
        kept += tfenc_skiplist_keeps(skip, ids[t]);
    return kept;
}

int64_t tfenc_multivector_pack(const tfenc_skiplist *skip, float *x, int32_t *ids, int d,
                               int width, int n_seq, const int32_t *seq_start, int32_t *kept)
{
    /* The packed row never lies after the row it comes from, so one pass
     * front to back moves every row at most once (memmove: they may overlap). */
    int64_t to = 0;
    for (int j = 0; j < n_seq; j++) {
        kept[j] = 0;
        for (int32_t t = seq_start[j]; t < seq_start[j + 1]; t++) {
            if ((t == seq_start[j] && skip != NULL && skip->skip_first) ||
                !tfenc_skiplist_keeps(skip, ids[t]))
                continue;
            memmove(x + (size_t)to * (size_t)width, x + (size_t)t * (size_t)d,
                    (size_t)width * sizeof *x);
            ids[to] = ids[t];
            to++;
            kept[j]++;
        }
    }
    return to;
}
