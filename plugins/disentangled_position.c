/* DeBERTa-v2/v3's disentangled attention terms: the relative embeddings
 * through the layer's maps once at create(), c2p and p2c as products
 * against the embeddings a sequence meets, a table lookup per score. */
#include "disentangled_position.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attention_kernel.h"
#include "layers.h"

/* The register block of the products of queries and keys with the
 * embeddings: rows x columns sums, 12 AVX2 registers of 8 floats. */
#define PRODUCT_ROWS 6
#define PRODUCT_COLUMNS 16

int disentangled_bucket(int relative_position, int position_buckets, int max_relative_positions)
{
    const int mid = position_buckets / 2;
    const int magnitude = abs(relative_position);
    /* transformers keeps distances up to mid as they are */
    if (magnitude <= mid)
        return relative_position;
    /* torch: abs_pos / mid in float32, log(tensor((max - 1) / mid)) of a
     * float32 made from a double, ceil(... * (mid - 1)) + mid */
    const float numerator = logf((float)magnitude / (float)mid);
    const float denominator = logf((float)((double)(max_relative_positions - 1) / mid));
    const float bucket = ceilf(numerator / denominator * (float)(mid - 1)) + (float)mid;
    return relative_position < 0 ? -(int)bucket : (int)bucket;
}

/* 8 floats as one value (GCC's vector extension, one AVX2 register): the
 * 12 sums of a block stay in registers, where a loop over an array of
 * sums loads and stores each of them at every multiply-add. aligned(4) and
 * may_alias: loads and stores at any float address of float data. */
typedef float vector8 __attribute__((vector_size(32), aligned(4), may_alias));
#define LOAD8(p) (*(const vector8 *)(p))
#define STORE8(p, v) (*(vector8 *)(p) = (v))

/* out[m][b] = x_m . column b of transposed ([depth][columns]) for the
 * count (<= PRODUCT_ROWS) rows x_m = x + m * x_stride and the columns of the
 * register blocks that hold first_column .. last_column, written to out + m
 * * out_stride. Each value is one sum over the depth in order, the same
 * whichever rows and columns share its block: the results do not depend on
 * the sequences or threads around them. */
TFENC_VECTOR_CLONES
static void multiply_rows(const float *x, long x_stride, int count, const float *transposed,
                          int columns, int depth, int first_column, int last_column,
                          float *out, long out_stride)
{
    /* a block of fewer rows computes its first row again in place of the
     * missing ones and stores only its own */
    const float *x0 = x, *x1 = x + (count > 1 ? x_stride : 0),
                *x2 = x + (count > 2 ? 2 * x_stride : 0),
                *x3 = x + (count > 3 ? 3 * x_stride : 0),
                *x4 = x + (count > 4 ? 4 * x_stride : 0),
                *x5 = x + (count > 5 ? 5 * x_stride : 0);
    for (int b = first_column / PRODUCT_COLUMNS * PRODUCT_COLUMNS; b <= last_column;
         b += PRODUCT_COLUMNS) {
        vector8 s00 = {0}, s01 = {0}, s10 = {0}, s11 = {0}, s20 = {0}, s21 = {0};
        vector8 s30 = {0}, s31 = {0}, s40 = {0}, s41 = {0}, s50 = {0}, s51 = {0};
        for (int e = 0; e < depth; e++) {
            const float *t = transposed + (size_t)e * columns + b;
            const vector8 t0 = LOAD8(t), t1 = LOAD8(t + 8);
            s00 += x0[e] * t0;
            s01 += x0[e] * t1;
            s10 += x1[e] * t0;
            s11 += x1[e] * t1;
            s20 += x2[e] * t0;
            s21 += x2[e] * t1;
            s30 += x3[e] * t0;
            s31 += x3[e] * t1;
            s40 += x4[e] * t0;
            s41 += x4[e] * t1;
            s50 += x5[e] * t0;
            s51 += x5[e] * t1;
        }
        const vector8 sums[PRODUCT_ROWS][2] = {{s00, s01}, {s10, s11}, {s20, s21},
                                               {s30, s31}, {s40, s41}, {s50, s51}};
        for (int m = 0; m < count; m++) {
            STORE8(out + m * out_stride + b, sums[m][0]);
            STORE8(out + m * out_stride + b + 8, sums[m][1]);
        }
    }
}

/* y[o][b] = scale * (w_o . x_b + bias[o]) (bias may be NULL) for the d rows
 * w_o of a map W [d][d] and the embeddings b < rows, x_b column b of
 * transposed [d][columns]: once per layer at create(), written straight in
 * the layout the products read (a head's rows of [n_heads][head_dim]
 * [columns] are the rows of W that make its dims), in the products' blocks,
 * which take a fraction of the time that dot product loops took. */
static void map_embeddings(const float *transposed, int rows, int columns, int d,
                           const float *weight, const float *bias, float scale, float *y)
{
    for (int first = 0; first < d; first += PRODUCT_ROWS) {
        const int count = d - first < PRODUCT_ROWS ? d - first : PRODUCT_ROWS;
        multiply_rows(weight + (size_t)first * d, d, count, transposed, columns, d, 0, rows - 1,
                      y + (size_t)first * columns, columns);
    }
    for (int o = 0; o < d; o++)
        for (int b = 0; b < rows; b++)
            y[(size_t)o * columns + b] =
                scale * (y[(size_t)o * columns + b] + (bias != NULL ? bias[o] : 0.0f));
}

/* x [rows][d] -> [d][columns], the columns past rows left as they are. */
static void transpose_embeddings(const float *x, int rows, int d, int columns, float *transposed)
{
    for (int b = 0; b < rows; b++)
        for (int e = 0; e < d; e++)
            transposed[(size_t)e * columns + b] = x[(size_t)b * d + e];
}

/* A d x d map and its bias: the layer's Q or K rows (`part` 0 or 1 of the
 * fused qkv_weight, or part_names[part]) or a map of its own. */
static int load_map(tfenc_weights *weights, const char *weight_name, const char *bias_name,
                    int64_t first_row, int d_model, int with_bias, const float **weight,
                    const float **bias)
{
    int64_t dims[2] = {-1, d_model};
    int status = tfenc_weight_load(weights, weight_name, 2, dims, weight);
    if (status != TFENC_OK)
        return status;
    *weight += first_row * d_model;
    *bias = NULL;
    if (!with_bias)
        return TFENC_OK;
    int64_t bias_dims[1] = {-1};
    if ((status = tfenc_weight_load(weights, bias_name, 1, bias_dims, bias)) != TFENC_OK)
        return status;
    *bias += first_row;
    return TFENC_OK;
}

/* The relative embeddings [2 span, d] after their LayerNorm (torch's:
 * biased variance, eps inside the root). */
static int load_embeddings(tfenc_context *ctx, tfenc_weights *weights,
                           const disentangled_settings *settings, int span, int d,
                           float *normalised)
{
    int64_t dims[2] = {-1, d};
    const float *table;
    int status = tfenc_weight_load(weights, "relative_embeddings", 2, dims, &table);
    if (status != TFENC_OK)
        return status;
    if (dims[0] < 2 * (int64_t)span)
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                           "mha: relative_embeddings has %lld rows, fewer than 2 * %d (twice "
                           "position_buckets, or max_relative_positions without buckets)",
                           (long long)dims[0], span);
    const float *norm_weight = NULL, *norm_bias = NULL;
    if (settings->relative_norm) {
        int64_t norm_dims[1] = {d};
        if ((status = tfenc_weight_load(weights, "relative_norm_weight", 1, norm_dims,
                                        &norm_weight)) != TFENC_OK ||
            (status = tfenc_weight_load(weights, "relative_norm_bias", 1, norm_dims,
                                        &norm_bias)) != TFENC_OK)
            return status;
    }
    for (int b = 0; b < 2 * span; b++) {
        const float *row = table + (size_t)b * d;
        float *out = normalised + (size_t)b * d;
        if (!settings->relative_norm) {
            memcpy(out, row, (size_t)d * sizeof(float));
            continue;
        }
        double mean = 0.0, variance = 0.0;
        for (int e = 0; e < d; e++)
            mean += row[e];
        mean /= d;
        for (int e = 0; e < d; e++)
            variance += (row[e] - mean) * (row[e] - mean);
        const double inverse = 1.0 / sqrt(variance / d + settings->relative_norm_eps);
        for (int e = 0; e < d; e++)
            out[e] = (float)((row[e] - mean) * inverse * norm_weight[e] + norm_bias[e]);
    }
    return TFENC_OK;
}

/* k_rel and q_rel, times scale, per head. */
static int load_relative_maps(tfenc_context *ctx, tfenc_weights *weights,
                              const disentangled_settings *settings, int d, int qkv_fused,
                              int bias, float scale, disentangled_position *position)
{
    const int rows = 2 * position->span, columns = position->columns;
    float *normalised = malloc((size_t)rows * d * sizeof(float));
    /* zeroed: the products read the padding columns along with the others */
    float *transposed = calloc((size_t)columns * d, sizeof(float));
    position->key_relative = calloc((size_t)columns * d, sizeof(float));
    position->query_relative = calloc((size_t)columns * d, sizeof(float));
    int status = TFENC_OK;
    if (normalised == NULL || transposed == NULL || position->key_relative == NULL ||
        position->query_relative == NULL)
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY,
                             "mha: out of memory for the relative embeddings");
    if (status == TFENC_OK)
        status = load_embeddings(ctx, weights, settings, position->span, d, normalised);
    if (status == TFENC_OK)
        transpose_embeddings(normalised, rows, d, columns, transposed);
    /* c2p uses the K map, p2c the Q map: index 0 key, 1 query */
    for (int which = 0; which < 2 && status == TFENC_OK; which++) {
        if (which == 0 ? !position->content_to_position : !position->position_to_content)
            continue;
        const float *weight, *map_bias;
        if (!settings->share_att_key)
            status = load_map(weights, which == 0 ? "position_key_weight" : "position_query_weight",
                              which == 0 ? "position_key_bias" : "position_query_bias", 0, d, 1,
                              &weight, &map_bias);
        else if (qkv_fused)
            status = load_map(weights, "qkv_weight", "qkv_bias", which == 0 ? d : 0, d, bias,
                              &weight, &map_bias);
        else
            status = load_map(weights, which == 0 ? "k_weight" : "q_weight",
                              which == 0 ? "k_bias" : "q_bias", 0, d, bias, &weight, &map_bias);
        if (status != TFENC_OK)
            break;
        map_embeddings(transposed, rows, columns, d, weight, map_bias, scale,
                       which == 0 ? position->key_relative : position->query_relative);
    }
    free(normalised);
    free(transposed);
    return status;
}

int disentangled_position_load(tfenc_context *ctx, tfenc_weights *weights,
                               const disentangled_settings *settings, int d_model, int n_heads,
                               int longest, float scale, int qkv_fused, int bias,
                               disentangled_position *position)
{
    memset(position, 0, sizeof *position);
    position->n_heads = n_heads;
    position->head_dim = d_model / n_heads;
    position->span = settings->position_buckets > 0 ? settings->position_buckets
                                                    : settings->max_relative_positions;
    position->longest = longest > 0 ? longest : 1;
    /* Whole blocks, and one block more: the products read a block of each
     * of the head's dims in turn, rows that at a stride of a power of two
     * (2 span) all fall into one or two sets of the L1 cache and evict each
     * other; a cache line more spreads them over the sets. */
    position->columns = (2 * position->span + PRODUCT_COLUMNS - 1) / PRODUCT_COLUMNS *
                            PRODUCT_COLUMNS +
                        PRODUCT_COLUMNS;
    /* The same for add(), which reads one value from each of 64 keys' rows
     * at once: an odd number of cache lines between them. */
    position->key_stride = n_heads * position->columns;
    if (position->key_stride / PRODUCT_COLUMNS % 2 == 0)
        position->key_stride += PRODUCT_COLUMNS;
    position->content_to_position = settings->content_to_position;
    position->position_to_content = settings->position_to_content;

    size_t count = 2 * (size_t)position->longest - 1;
    position->row_of = malloc(count * sizeof(int));
    if (position->row_of == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "mha: out of memory for relative positions");
    for (int key_minus_query = 1 - position->longest; key_minus_query < position->longest;
         key_minus_query++) {
        int relative = -key_minus_query; /* transformers' query minus key */
        if (settings->position_buckets > 0)
            relative = disentangled_bucket(relative, settings->position_buckets,
                                           settings->max_relative_positions);
        int row = relative + position->span;
        row = row < 0 ? 0 : row > 2 * position->span - 1 ? 2 * position->span - 1 : row;
        position->row_of[key_minus_query + position->longest - 1] = row;
    }
    return load_relative_maps(ctx, weights, settings, d_model, qkv_fused, bias, scale, position);
}

void disentangled_position_free(disentangled_position *position)
{
    free(position->row_of);
    free(position->key_relative);
    free(position->query_relative);
    position->row_of = NULL;
    position->key_relative = position->query_relative = NULL;
}

size_t disentangled_prepared_floats(const disentangled_position *position)
{
    return position->content_to_position
               ? (size_t)ATTENTION_QUERY_BLOCK * (size_t)position->columns
               : 0;
}

double disentangled_flops_per_token(const disentangled_position *position, double mean_seq_len)
{
    /* a block of rows meets the distances of its rows to every key, its
     * first and last columns rounded out to whole blocks */
    const double most = position->columns - PRODUCT_COLUMNS; /* 2 span in whole blocks */
    double met = mean_seq_len + (PRODUCT_ROWS - 1) + (PRODUCT_COLUMNS - 1);
    met = met < most ? met : most;
    return (position->content_to_position + position->position_to_content) * 2.0 * met *
           position->n_heads * position->head_dim;
}

size_t disentangled_position_to_content_floats(const disentangled_position *position,
                                               int tokens)
{
    return position->position_to_content
               ? (size_t)(tokens > 0 ? tokens : 0) * (size_t)position->key_stride
               : 0;
}

/* The embedding rows [*first, *last] that queries first_query .. end_query
 * - 1 meet among keys first_key .. end_key - 1 of one sequence: row_of
 * falls as j - i grows, so the ends of the range of j - i give them. */
static void rows_met(const disentangled_position *position, int first_query, int end_query,
                     int first_key, int end_key, int *first, int *last)
{
    const int *row_of = position->row_of + (position->longest - 1);
    *first = row_of[(end_key - 1) - first_query];
    *last = row_of[first_key - (end_query - 1)];
}

/* p2c of one head of one sequence: its keys in blocks of PRODUCT_ROWS, each
 * against the embeddings its keys meet among the sequence's queries. */
static void fill_head(const disentangled_position *position, const float *keys, int stride,
                      int length, int head, float *table)
{
    const int columns = position->columns, head_dim = position->head_dim;
    for (int first = 0; first < length; first += PRODUCT_ROWS) {
        const int count = length - first < PRODUCT_ROWS ? length - first : PRODUCT_ROWS;
        int first_row, last_row;
        rows_met(position, 0, length, first, first + count, &first_row, &last_row);
        multiply_rows(keys + (size_t)first * stride + (size_t)head * head_dim, stride, count,
                      position->query_relative + (size_t)head * head_dim * columns, columns,
                      head_dim, first_row, last_row,
                      table + (size_t)first * position->key_stride + (size_t)head * columns,
                      position->key_stride);
    }
}

/* fill_head() of item = head * sequences + sequence of the group. */
static void fill_item(const disentangled_position *position, const float *keys, int stride,
                      const int *sequence_start, int sequences, int item, float *table)
{
    const int s = item % sequences, head = item / sequences;
    const int start = sequence_start[s] - sequence_start[0];
    fill_head(position, keys + (size_t)start * stride, stride,
              sequence_start[s + 1] - sequence_start[s], head,
              table + (size_t)start * position->key_stride);
}

void disentangled_fill_position_to_content(const disentangled_position *position,
                                           const float *keys, int stride,
                                           const int *sequence_start, int sequences,
                                           float *table)
{
    if (!position->position_to_content)
        return;
    const int tokens = sequence_start[sequences] - sequence_start[0];
    /* (head, sequence) pairs: a long lone sequence still has a head per
     * thread, and the threads' static shares of the pairs, whole heads of
     * every sequence, are alike even though a window's sequences come
     * sorted by length */
    TFENC_PARALLEL_FOR(item, sequences * position->n_heads,
                       (double)tokens * position->n_heads * position->columns *
                           position->head_dim,
                       fill_item(position, keys, stride, sequence_start, sequences, item, table));
}

void disentangled_prepare(const void *state, int head, const float *queries, int query_stride,
                          int first_query, int rows, float *prepared)
{
    const disentangled_sequence *sequence = state;
    const disentangled_position *position = sequence->position;
    const int columns = position->columns, head_dim = position->head_dim;
    if (!position->content_to_position)
        return;
    /* each block of rows against the embeddings it meets among the keys */
    for (int first = 0; first < rows; first += PRODUCT_ROWS) {
        const int count = rows - first < PRODUCT_ROWS ? rows - first : PRODUCT_ROWS;
        int first_row, last_row;
        rows_met(position, first_query + first, first_query + first + count, 0,
                 sequence->length, &first_row, &last_row);
        multiply_rows(queries + (size_t)first * query_stride, query_stride, count,
                      position->key_relative + (size_t)head * head_dim * columns, columns,
                      head_dim, first_row, last_row, prepared + (size_t)first * columns,
                      columns);
    }
}

TFENC_VECTOR_CLONES
void disentangled_add(const void *state, int head, int first_query, int rows, int first_key,
                      int keys, float *tile, int tile_stride, const float *prepared)
{
    const disentangled_sequence *sequence = state;
    const disentangled_position *position = sequence->position;
    const int columns = position->columns;
    const int content = position->content_to_position, by_position = position->position_to_content;
    const size_t key_stride = (size_t)position->key_stride;
    /* p2c[c * key_stride + b]: key first_key + c against embedding b */
    const float *p2c = by_position ? sequence->position_to_content +
                                         (size_t)first_key * key_stride + (size_t)head * columns
                                   : NULL;
    for (int r = 0; r < rows; r++) {
        /* row_of[c]: the embedding row of key first_key + c for this query */
        const int *row_of =
            position->row_of + (position->longest - 1) + first_key - (first_query + r);
        const float *c2p = content ? prepared + (size_t)r * columns : NULL;
        float *scores = tile + (size_t)r * tile_stride;
        /* both terms in one pass over the row: one lookup of its rows and
         * one load and store of each score, where a pass per term made two */
        if (content && by_position)
            for (int c = 0; c < keys; c++)
                scores[c] = scores[c] + c2p[row_of[c]] + p2c[(size_t)c * key_stride + row_of[c]];
        else if (content)
            for (int c = 0; c < keys; c++)
                scores[c] += c2p[row_of[c]];
        else
            for (int c = 0; c < keys; c++)
                scores[c] += p2c[(size_t)c * key_stride + row_of[c]];
    }
}
