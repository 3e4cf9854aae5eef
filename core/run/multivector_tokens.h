/* The token ids a multi-vector job ([job] multivector_mode and its keys,
 * docs/output.md) adds to the tokenizer's: the marker put after [CLS], the
 * [MASK] that pads a query, and the skiplist of a document's punctuation.
 * Rank 0 finds them in the job's tokenizer; every rank gets them (the last
 * stage writes the skiplist's rule, the first stages count with it). */
#ifndef TFENC_MULTIVECTOR_TOKENS_H
#define TFENC_MULTIVECTOR_TOKENS_H

#include "output/multivector.h"
#include "run/job_settings.h"
#include "tokenizer/tokenizer.h"

#include <mpi.h>

typedef struct tfenc_multivector_tokens {
    int used;            /* the job asked for any of it */
    int32_t marker_id;   /* -1: no marker */
    int32_t pad_id;      /* a query's [MASK]; -1 for documents */
    uint8_t *skip_flags; /* [n_ids]: 1 for a skiplist id; NULL without skiplist */
    tfenc_skiplist skiplist;
    char *skiplist_text; /* the skiplist's ids, space-separated ("" without) */
} tfenc_multivector_tokens;

/* From the settings and the job's tokenizer (NULL for a token-id corpus,
 * which can only run without markers, padding or skiplist): a marker or
 * [MASK] the vocabulary lacks is refused naming it; the skiplist is the
 * first id of each of string.punctuation's characters, as ColBERT's is. */
int tfenc_multivector_tokens_find(tfenc_context *ctx, const tfenc_job_settings *settings,
                                  tfenc_tokenizer *tokenizer, tfenc_multivector_tokens *tokens);

/* Rank 0's to every rank of comm. Collective. */
int tfenc_multivector_tokens_share(tfenc_context *ctx, MPI_Comm comm,
                                   tfenc_multivector_tokens *tokens);

void tfenc_multivector_tokens_free(tfenc_multivector_tokens *tokens);

#endif
