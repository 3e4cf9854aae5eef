/* Shared pieces of the layers plugin (plugins/layers.la): the descriptor of
 * each layer type it enumerates, and the small helpers they all use. The
 * descriptors have external linkage only so that plugins/layers.c can list
 * them; the module exports nothing but tfenc_plugin_descriptor. */
#ifndef TFENC_PLUGINS_LAYERS_H
#define TFENC_PLUGINS_LAYERS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tfenc/plugin.h"

extern const tfenc_layer_descriptor tfenc_layers_embedding;  /* plugins/embedding.c */
extern const tfenc_layer_descriptor tfenc_layers_sinusoidal; /* plugins/positional.c */
extern const tfenc_layer_descriptor tfenc_layers_ffn;        /* plugins/ffn.c */
extern const tfenc_layer_descriptor tfenc_layers_layernorm;  /* plugins/norm.c */
extern const tfenc_layer_descriptor tfenc_layers_rmsnorm;    /* plugins/norm.c */
extern const tfenc_layer_descriptor tfenc_layers_pooling;    /* plugins/pooling.c */

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

/* Position of row t (of sequence s, which starts at row `start`) inside its
 * sequence: the batch's positions when it has them, else counted from the
 * sequence start, which is what the tokenizer would have written. */
static inline int32_t layers_position(const tfenc_batch *batch, int t, int32_t start)
{
    return batch->positions != NULL ? batch->positions[t] : t - start;
}

/* Compiles a function twice, for the x86-64 baseline (SSE2) and for
 * x86-64-v3 (AVX2 + FMA, every x86 server CPU since 2013), and picks the
 * clone at load time by CPU detection (an ifunc): the element-wise loops run
 * 8 floats wide with fused multiply-adds where the CPU has them, and the
 * plugins still load on any x86-64. Empty on other compilers and CPUs. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define LAYERS_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define LAYERS_VECTOR_CLONES
#endif

/* exp(x) in plain arithmetic, so that loops of it vectorise (a call to
 * libm's expf() keeps them scalar, and the activations would then cost a
 * tenth of the GEMMs). x is clamped to [-87, 88]: exp(-87) ~ 1.6e-38 keeps
 * 2^n a normal float, exp(88) ~ 1.7e38 stays finite, and both are their
 * limits for every use here (x / (1 + exp(-x)) and erf's tail). NaN goes to
 * -87 (the comparisons are false), so callers get NaN from x itself.
 * exp(x) = 2^n exp(r), n = round(x / ln 2), |r| <= ln(2)/2, exp(r) by Cephes'
 * expf polynomial: relative error about 1 ulp. */
static inline float layers_exp(float x)
{
    float clamped = x > -87.0f ? x : -87.0f;
    clamped = clamped < 88.0f ? clamped : 88.0f;
    /* Adding and removing 1.5 * 2^23 rounds to the nearest integer. */
    float n = (clamped * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    /* r = x - n ln 2, with ln 2 split in two so that n * ln 2 stays exact. */
    float r = clamped - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    /* 2^n from its exponent bits; n is in -126..127 after the clamp. */
    int32_t bits = ((int32_t)n + 127) * (1 << 23);
    float power;
    memcpy(&power, &bits, sizeof power);
    return p * power;
}

#endif
