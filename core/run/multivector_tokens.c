/* A multi-vector job's marker, mask ([MASK] or <mask>) and skiplist ids. */
#include "run/multivector_tokens.h"

#include "base/context.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Python's string.punctuation, which ColBERT's skiplist is made of. */
static const char punctuation[] = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

static int token_id(tfenc_context *ctx, tfenc_tokenizer *tokenizer, const char *key,
                    const char *token, int32_t *id)
{
    *id = tfenc_tokenizer_token_id(tokenizer, token);
    if (*id < 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "[job] %s = %s: the tokenizer has no such "
                           "token", key, token);
    return TFENC_OK;
}

/* The first id of each punctuation character's encoding without the
 * special tokens (ColBERT: encode(symbol, add_special_tokens=False)[0]). */
static int find_skiplist(tfenc_context *ctx, tfenc_tokenizer *tokenizer,
                         tfenc_multivector_tokens *tokens)
{
    const int n_ids = tfenc_tokenizer_vocab_size(tokenizer);
    const int32_t *prefix, *suffix;
    int n_prefix, n_suffix;
    tfenc_tokenizer_specials(tokenizer, &prefix, &n_prefix, &suffix, &n_suffix);
    tokens->skip_flags = calloc((size_t)n_ids, 1);
    tokens->skiplist_text = calloc(sizeof punctuation, 12);
    if (tokens->skip_flags == NULL || tokens->skiplist_text == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    int32_t ids[16];
    size_t written = 0;
    for (const char *c = punctuation; *c != '\0'; c++) {
        int n = 0;
        int status = tfenc_tokenizer_encode(ctx, tokenizer, c, 1, ids, 16, &n, NULL);
        if (status != TFENC_OK)
            return status;
        if (n <= n_prefix + n_suffix)
            continue; /* a tokenizer that drops the character has nothing to skip */
        int32_t id = ids[n_prefix];
        if (id < 0 || id >= n_ids || tokens->skip_flags[id])
            continue;
        tokens->skip_flags[id] = 1;
        written += (size_t)sprintf(tokens->skiplist_text + written, "%s%d",
                                   written > 0 ? " " : "", id);
    }
    tokens->skiplist.flags = tokens->skip_flags;
    tokens->skiplist.n_ids = n_ids;
    return TFENC_OK;
}

int tfenc_multivector_tokens_find(tfenc_context *ctx, const tfenc_job_settings *settings,
                                  tfenc_tokenizer *tokenizer, tfenc_multivector_tokens *tokens)
{
    *tokens = (tfenc_multivector_tokens){.marker_id = -1, .pad_id = -1};
    const int query = settings->multivector_query;
    const char *marker = query ? settings->query_marker : settings->document_marker;
    const int skips = settings->skip_punctuation && !query; /* a query keeps every vector */
    /* Leaving out the first token reads no id: a token-id corpus may too. */
    tokens->skiplist.skip_first = settings->skip_first_token;
    tokens->used = query || marker != NULL || skips;
    if (!tokens->used) {
        tokens->used = settings->skip_first_token;
        return TFENC_OK;
    }
    if (tokenizer == NULL)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: [job] multivector_mode, its markers and "
                           "skip_punctuation need a tokenizer; a token-id corpus is used as "
                           "given", settings->input);
    int status = TFENC_OK;
    if (marker != NULL)
        status = token_id(ctx, tokenizer, query ? "query_marker" : "document_marker", marker,
                          &tokens->marker_id);
    if (status == TFENC_OK && query) {
        /* ColBERT pads queries with the tokenizer's mask token, whichever the
         * model family spells it. */
        tokens->pad_id = tfenc_tokenizer_special_id(tokenizer, TFENC_SPECIAL_MASK);
        if (tokens->pad_id < 0)
            status = tfenc_error(ctx, TFENC_ERR_CONFIG, "[job] multivector_mode = query pads "
                                 "queries with the mask token, and the tokenizer has neither "
                                 "[MASK] nor <mask>");
    }
    if (status == TFENC_OK && skips)
        status = find_skiplist(ctx, tokenizer, tokens);
    return status;
}

int tfenc_multivector_tokens_share(tfenc_context *ctx, MPI_Comm comm,
                                   tfenc_multivector_tokens *tokens)
{
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    long header[6] = {tokens->used, tokens->marker_id, tokens->pad_id, tokens->skiplist.n_ids,
                      tokens->skiplist_text != NULL ? (long)strlen(tokens->skiplist_text) + 1
                                                    : 0,
                      tokens->skiplist.skip_first};
    MPI_Bcast(header, 6, MPI_LONG, 0, comm);
    if (rank != 0) {
        tfenc_multivector_tokens_free(tokens);
        tokens->used = (int)header[0];
        tokens->marker_id = (int32_t)header[1];
        tokens->pad_id = (int32_t)header[2];
        tokens->skiplist.skip_first = (int)header[5];
        if (header[3] > 0) {
            tokens->skip_flags = malloc((size_t)header[3]);
            tokens->skiplist_text = malloc((size_t)header[4]);
        }
    }
    int have = header[3] == 0 || (tokens->skip_flags != NULL && tokens->skiplist_text != NULL);
    MPI_Allreduce(MPI_IN_PLACE, &have, 1, MPI_INT, MPI_MIN, comm);
    if (!have)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for the skiplist");
    if (header[3] > 0) {
        MPI_Bcast(tokens->skip_flags, (int)header[3], MPI_UINT8_T, 0, comm);
        MPI_Bcast(tokens->skiplist_text, (int)header[4], MPI_CHAR, 0, comm);
        tokens->skiplist.flags = tokens->skip_flags;
        tokens->skiplist.n_ids = (int)header[3];
    }
    return TFENC_OK;
}

void tfenc_multivector_tokens_free(tfenc_multivector_tokens *tokens)
{
    free(tokens->skip_flags);
    free(tokens->skiplist_text);
    *tokens = (tfenc_multivector_tokens){.marker_id = -1, .pad_id = -1};
}
