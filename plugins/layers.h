/* Shared pieces of the layers plugin (plugins/layers.la): the descriptor of
 * each layer type it enumerates, and the small helpers they all use. The
 * descriptors have external linkage only so that plugins/layers.c can list
 * them; the module exports nothing but tfenc_plugin_descriptor. */
#ifndef TFENC_PLUGINS_LAYERS_H
#define TFENC_PLUGINS_LAYERS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tfenc/plugin.h"
#include "tfenc/plugin_math.h"
#include "tfenc/plugin_parallel.h"

extern const tfenc_layer_descriptor tfenc_layers_embedding;  /* plugins/embedding.c */
extern const tfenc_layer_descriptor tfenc_layers_sinusoidal; /* plugins/positional.c */
extern const tfenc_layer_descriptor tfenc_layers_ffn;        /* plugins/ffn.c */
extern const tfenc_layer_descriptor tfenc_layers_layernorm;  /* plugins/norm.c */
extern const tfenc_layer_descriptor tfenc_layers_rmsnorm;    /* plugins/norm.c */
extern const tfenc_layer_descriptor tfenc_layers_pooling;    /* plugins/pooling.c */
extern const tfenc_layer_descriptor tfenc_layers_classifier; /* plugins/classifier.c */
extern const tfenc_layer_descriptor tfenc_layers_splade;     /* plugins/splade.c */
extern const tfenc_layer_descriptor tfenc_layers_lexical_weights; /* plugins/lexical_weights.c */
extern const tfenc_layer_descriptor tfenc_layers_multivector; /* plugins/multivector.c */
extern const tfenc_layer_descriptor tfenc_layers_static_embedding; /* plugins/static_embedding.c */
extern const tfenc_layer_descriptor tfenc_layers_moe;        /* plugins/moe.c */

/* Workspace pieces start on 64-byte boundaries, like the workspace itself,
 * so that every piece is as well aligned as the GEMM backend expects. */
static inline size_t layers_align(size_t bytes)
{
    return (bytes + 63) / 64 * 64;
}

/* A batch built for another model width would be read out of bounds: refuse
 * it with both widths rather than trust the host. */
static inline int layers_check_width(tfenc_context *ctx, const char *type,
                                     const tfenc_batch *batch, int d_model)
{
    if (batch->d_model != d_model)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL,
                           "%s: batch has d_model %d but the layer was created for %d", type,
                           batch->d_model, d_model);
    return TFENC_OK;
}

/* The end of sequence s's keys: its last row + 1, or, when the batch masks
 * keys (seq_keys, a query's padding), the row after its last key. What
 * pools a sequence (pooling, heads) pools rows seq_start[s] up to it, as
 * sentence-transformers pools by the attention mask. */
/* A head's linear map whose bias dataset is optional (ModernBERT's
 * classifier_bias, PyLate's Dense, BGE-M3's heads): weight [out, in], and
 * bias [out] when the weights group has it. */
static inline int layers_load_map(tfenc_weights *weights, const char *weight, const char *bias,
                                  int in, int *out, const tfenc_linear **linear)
{
    const char *const weight_names[] = {weight};
    const char *const bias_names[] = {bias};
    tfenc_linear *map = NULL;
    int status = tfenc_linear_load(weights, 1, weight_names,
                                   tfenc_weight_exists(weights, bias) ? bias_names : NULL, in,
                                   out, &map);
    *linear = map;
    return status;
}

static inline int layers_keys_end(const tfenc_batch *batch, int s)
{
    const int start = batch->seq_start[s], end = batch->seq_start[s + 1];
    if (batch->seq_keys != NULL && batch->seq_keys[s] < end - start)
        return start + batch->seq_keys[s];
    return end;
}

/* Position of row t (of sequence s, which starts at row `start`) inside its
 * sequence: the batch's positions when it has them, else counted from the
 * sequence start, which is what the tokenizer would have written. */
static inline int32_t layers_position(const tfenc_batch *batch, int t, int32_t start)
{
    return batch->positions != NULL ? batch->positions[t] : t - start;
}

/* torch.nn.LayerNorm over one row of a head's hidden state (classifier,
 * splade), statistics in double: a head's norm runs once per row it
 * keeps, so it is written for its reference, not for speed (norm.c's
 * layernorm_row is the per-token one). */
static inline void layers_head_layer_norm(float *row, int d, double eps, const float *weight,
                                          const float *bias)
{
    double mean = 0.0, variance = 0.0;
    for (int j = 0; j < d; j++)
        mean += row[j];
    mean /= d;
    for (int j = 0; j < d; j++)
        variance += (row[j] - mean) * (row[j] - mean);
    const double inverse = 1.0 / sqrt(variance / d + eps);
    for (int j = 0; j < d; j++)
        row[j] = (float)((row[j] - mean) * inverse) * weight[j] + (bias ? bias[j] : 0.0f);
}

#endif
