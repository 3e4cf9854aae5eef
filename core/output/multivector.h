/* Multi-vector (ColBERT-style) rows: which tokens of a sequence keep a
 * vector, and packing the kept ones for the file.
 *
 * ColBERT.doc() multiplies each document's vectors by a mask that drops the
 * skiplist (the ids of string.punctuation's characters when the checkpoint
 * says mask_punctuation) and padding, then keeps only the unmasked rows; a
 * query keeps every row. The feeder counts the kept rows of each document
 * with the same rule before the job (so that `offsets` is known up front)
 * and the writer packs them, so the two can never disagree. */
#ifndef TFENC_MULTIVECTOR_H
#define TFENC_MULTIVECTOR_H

#include <stddef.h>
#include <stdint.h>

/* The tokens left out: flags[id] = 1 for each id of the skiplist, over
 * ids 0 .. n_ids - 1 (ids beyond are kept). NULL flags keep every id.
 * skip_first leaves out each sequence's first token whatever its id
 * (BGE-M3's colbert_vecs are last_hidden_state[:, 1:]). */
typedef struct tfenc_skiplist {
    const uint8_t *flags;
    int n_ids;
    int skip_first;
} tfenc_skiplist;

/* 1 when token `id` keeps its vector (by its id: skip_first is the callers'). */
static inline int tfenc_skiplist_keeps(const tfenc_skiplist *skip, int32_t id)
{
    return skip == NULL || skip->flags == NULL || id < 0 || id >= skip->n_ids ||
           !skip->flags[id];
}

/* How many of a sequence's `length` tokens keep their vectors. */
int32_t tfenc_skiplist_count(const tfenc_skiplist *skip, const int32_t *ids, int32_t length);

/* Packs in place the rows that keep their vectors: x holds n_seq sequences
 * of rows (sequence j is rows seq_start[j] .. seq_start[j+1]-1, each d
 * floats wide); afterwards x holds the kept rows' first `width` values one
 * after another ([kept, width]), ids the kept rows' token ids, kept[j] each
 * sequence's count. Returns the rows kept. */
int64_t tfenc_multivector_pack(const tfenc_skiplist *skip, float *x, int32_t *ids, int d,
                               int width, int n_seq, const int32_t *seq_start, int32_t *kept);

#endif
