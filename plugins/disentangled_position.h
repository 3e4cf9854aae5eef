/* DeBERTa-v2/v3's disentangled attention as position terms of the mha
 * plugin (attention_kernel.h's interface): to the score of query i and key
 * j of head h it adds
 *
 *   content-to-position  c2p = q_i . k_rel[row(i - j)]
 *   position-to-content  p2c = k_j . q_rel[row(i - j)]
 *
 * both times the layer's scale, where k_rel and q_rel are the relative
 * embeddings [2 span, d] (after their LayerNorm) through the layer's own K
 * and Q maps (share_att_key) or through maps of their own, and row() is
 * transformers' make_log_bucket_position shifted by span and clamped to
 * [0, 2 span): exact distances up to position_buckets / 2, log-spaced ones
 * up to max_relative_positions (span = position_buckets, or
 * max_relative_positions without buckets). The p2c index is the c2p one:
 * transformers gathers p2c at -bucket(j - i), and the buckets are odd.
 *
 * c2p is prepared per (query block, head) as the block's rows times the
 * embeddings those rows meet in their sequence; p2c per group of sequences
 * as each key times the embeddings it meets (a sequence of n tokens meets
 * at most 2n - 1 of the 2 span, and one token at most n), both in
 * register blocks of rows x 16 columns
 * (disentangled_fill_position_to_content); add() then only looks up. */
#ifndef TFENC_PLUGINS_DISENTANGLED_POSITION_H
#define TFENC_PLUGINS_DISENTANGLED_POSITION_H

#include <stddef.h>

#include "tfenc/plugin.h"

typedef struct disentangled_position {
    int n_heads;
    int head_dim;
    int span;                  /* relative embeddings per side */
    int longest;               /* max_seq_len the tables cover */
    int columns;               /* 2 span rounded up to whole register blocks, and one
                                * block more (a stride that is no power of two): the row
                                * stride of the tables below, of prepare()'s rows and of a
                                * head's p2c row */
    int key_stride;            /* floats between two keys' p2c rows (all heads): an odd
                                * number of cache lines */
    int content_to_position;   /* the c2p term is added */
    int position_to_content;   /* the p2c term is added */
    int *row_of;               /* [2 longest - 1]: row of k_rel / q_rel for key j and query i
                                * at [j - i + longest - 1] */
    float *key_relative;       /* [n_heads][head_dim][columns]: scale * K map of the embeddings
                                * (columns past 2 span zero) */
    float *query_relative;     /* [n_heads][head_dim][columns]: scale * Q map of the embeddings */
} disentangled_position;

/* What one sequence's terms read: the layer's tables, the sequence's
 * length (which bounds the embeddings its tokens meet) and the p2c rows of
 * its keys ([length][key_stride], NULL without p2c). */
typedef struct disentangled_sequence {
    const disentangled_position *position;
    const float *position_to_content;
    int length;
} disentangled_sequence;

/* The settings of the job's keys (mha's position = disentangled). */
typedef struct disentangled_settings {
    int position_buckets;       /* 0: no buckets, exact distances clamped to the span */
    int max_relative_positions;
    int content_to_position;
    int position_to_content;
    int share_att_key;          /* k_rel and q_rel through the layer's K and Q maps */
    int relative_norm;          /* LayerNorm of the relative embeddings */
    double relative_norm_eps;
} disentangled_settings;

/* transformers' make_log_bucket_position for one relative position (query
 * minus key), its float32 arithmetic included. */
int disentangled_bucket(int relative_position, int position_buckets, int max_relative_positions);

/* Loads the relative embeddings (and their norm and maps) from the layer's
 * weights and computes k_rel and q_rel, times scale, and the table of rows
 * for sequences up to `longest` tokens. qkv_fused: the layer's Q and K
 * rows are those of qkv_weight/qkv_bias (else q_weight, k_weight, ...);
 * bias: the layer's maps have biases. On failure the message is in ctx
 * and disentangled_position_free() releases what was made. */
int disentangled_position_load(tfenc_context *ctx, tfenc_weights *weights,
                               const disentangled_settings *settings, int d_model, int n_heads,
                               int longest, float scale, int qkv_fused, int bias,
                               disentangled_position *position);

void disentangled_position_free(disentangled_position *position);

/* Floats prepare() fills per call (0 without c2p). */
size_t disentangled_prepared_floats(const disentangled_position *position);

/* Flops per token of the terms' products in sequences of mean_seq_len
 * tokens: a token's Q (c2p) or K (p2c) against the embeddings its block of
 * rows meets, about one per token of the sequence and at most 2 span. */
double disentangled_flops_per_token(const disentangled_position *position, double mean_seq_len);

/* Floats of the p2c rows of `tokens` keys (0 without p2c). */
size_t disentangled_position_to_content_floats(const disentangled_position *position,
                                               int tokens);

/* p2c rows of the keys of `sequences` sequences, sequence s at tokens
 * sequence_start[s] .. sequence_start[s + 1] - 1, whose K rows (head h at
 * columns h * head_dim) start at keys (token sequence_start[0]) with row
 * stride `stride`: table[t * key_stride + h * columns + b] = k_t,h .
 * q_rel[h][b] for every embedding b that key t meets among its sequence's
 * queries (the others are left as they are: add() never reads them). */
void disentangled_fill_position_to_content(const disentangled_position *position,
                                           const float *keys, int stride,
                                           const int *sequence_start, int sequences,
                                           float *table);

/* The interface's functions; their state is a disentangled_sequence. */
void disentangled_prepare(const void *state, int head, const float *queries, int query_stride,
                          int first_query, int rows, float *prepared);
void disentangled_add(const void *state, int head, int first_query, int rows, int first_key,
                      int keys, float *tile, int tile_stride, const float *prepared);

#endif
