/* tfenc/plugin_math.h: element-wise math for plugins' loops, part of the
 * plugin SDK beside tfenc/plugin.h (which it does not need).
 *
 * exp, GELU (exact and tanh), SiLU, ReLU and bfloat16 rounding written so
 * that a loop of them vectorises (libm's expf and erff keep a loop scalar,
 * and the activations would then cost a tenth of the GEMMs), and
 * TFENC_VECTOR_CLONES to compile a loop for the CPU it runs on. The host's
 * matrix backend uses the same functions in its epilogues, so a plugin that
 * uses them computes what the built-in layers compute.
 *
 * Header-only: everything is static inline or a macro, compiled into the
 * plugin, so it adds no symbol to the ABI and a plugin built with one
 * version keeps working with any host of the same TFENC_ABI_MAJOR. New
 * functions raise TFENC_PLUGIN_MATH_VERSION (test it with #if); the
 * results of existing ones do not change within a version.
 */
#ifndef TFENC_PLUGIN_MATH_H
#define TFENC_PLUGIN_MATH_H

#define TFENC_PLUGIN_MATH_VERSION 2 /* 2: tfenc_exp_nonpositive */

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Compiles a function three times, for the x86-64 baseline (SSE2),
 * x86-64-v3 (AVX2 + FMA, every x86 server CPU since 2013) and x86-64-v4
 * (AVX-512), and picks the clone at load time by CPU detection (an ifunc):
 * the element-wise loops run 8 or 16 floats wide with fused multiply-adds
 * where the CPU has them, and the code still loads on any x86-64. Empty on
 * other compilers and CPUs. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define TFENC_VECTOR_CLONES \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TFENC_VECTOR_CLONES
#endif

/* One float32 rounded to bfloat16 (its top 16 bits), to nearest with ties
 * to even, NaN kept a quiet NaN: torch's .to(torch.bfloat16). Inline, so
 * that a loop over short rows (attention's heads, probabilities) vectorises
 * it in place instead of calling a function per row. */
static inline uint16_t tfenc_round_to_bf16(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    /* Adding 0x7fff plus the lowest kept bit rounds to nearest, ties to
     * even; a NaN could round into infinity, so it keeps a quiet NaN. */
    uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
    int is_nan = (bits & 0x7fffffffu) > 0x7f800000u;
    return (uint16_t)(is_nan ? ((bits >> 16) | 0x40u) : rounded);
}

/* exp(x) in plain arithmetic. x is clamped to [-87, 88]: exp(-87) ~ 1.6e-38
 * keeps 2^n a normal float, exp(88) ~ 1.7e38 stays finite, and both are
 * their limits for every use here (x / (1 + exp(-x)) and erf's tail). NaN
 * goes to -87 (the comparisons are false), so callers get NaN from x itself.
 * exp(x) = 2^n exp(r), n = round(x / ln 2), |r| <= ln(2)/2, exp(r) by
 * Cephes' expf polynomial: relative error about 1 ulp. */
static inline float tfenc_fast_exp(float x)
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

/* exp(x) for x <= 0, the softmax's exponent (a score less its row's
 * maximum): about two thirds of tfenc_fast_exp's operations, for the loop
 * that costs a fifth of a bf16 encode on a CPU whose products are fast.
 * Relative error <= 3e-7 (2.5 float ulp) for -87 <= x <= 0 (measured
 * 1.8e-7, 1.7e-7 with fused multiply-adds); exp(0) is exactly 1. Below
 * -87 it returns 0 (exp(-87) ~ 1.6e-38: next to the row's largest
 * probability, 1, nothing), -inf gives 0, NaN gives NaN; x up to 88 keeps
 * the bound, larger x is outside its domain.
 *
 * exp(x) = 2^n exp(r), n = round(x / ln 2), |r| <= ln(2)/2. Adding
 * 1.5 * 2^23 + 127 to x / ln 2 rounds it to an integer and leaves n + 127
 * in the low bits of the sum, which shifted into the exponent field are
 * 2^n: no float-to-integer conversion and no clamp (x >= -87 keeps n + 127
 * >= 1). exp(r) = 1 + r q(r), q of degree 4 fitted for the least maximum
 * relative error on |r| <= 0.3466 (9e-8 in exact arithmetic), where
 * tfenc_fast_exp spends a degree-7 polynomial on 1 ulp. A NaN x runs
 * through the arithmetic as NaN. */
static inline float tfenc_exp_nonpositive(float x)
{
    const float shifter = 12582912.0f + 127.0f; /* 1.5 * 2^23 + exponent bias */
    const float shifted = x * 1.44269504088896341f + shifter;
    const float n = shifted - shifter;
    /* r = x - n ln 2, with ln 2 split in two so that n * ln 2 stays exact. */
    const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
    float q = 8.290308527648449e-3f;
    q = q * r + 4.1897963732481e-2f;
    q = q * r + 1.666763722896576e-1f;
    q = q * r + 4.999915063381195e-1f;
    q = q * r + 9.999997019767761e-1f;
    const float p = q * r + 1.0f;
    uint32_t bits;
    memcpy(&bits, &shifted, sizeof bits);
    bits <<= 23; /* n + 127 into the exponent field; 1.5 * 2^23's bits fall off the top */
    float power;
    memcpy(&power, &bits, sizeof power);
    return x < -87.0f ? 0.0f : p * power;
}

/* 0.5 x (1 + erf(x / sqrt 2)), torch's exact GELU. erf by Abramowitz and
 * Stegun 7.1.26, |error| <= 1.5e-7 (then float rounding, a few 1e-8): on
 * GELU's output that is at most 0.5 |x| 1.5e-7, below the float32 noise of
 * the GEMMs around it. */
static inline float tfenc_gelu(float x)
{
    const float a = fabsf(x) * 0.70710678118654752f; /* |x| / sqrt(2) */
    const float t = 1.0f / (1.0f + 0.3275911f * a);
    const float poly =
        t * (0.254829592f +
             t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    const float erf_abs = 1.0f - poly * tfenc_fast_exp(-a * a);
    return 0.5f * x * (1.0f + copysignf(erf_abs, x));
}

/* torch's approximate='tanh': 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x +
 * 0.044715 x^3). 0.5 (1 + tanh(u)) is exactly 1 / (1 + exp(-2u)), and exp
 * vectorises. */
static inline float tfenc_gelu_tanh(float x)
{
    const float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
    return x / (1.0f + tfenc_fast_exp(-2.0f * u));
}

/* x sigmoid(x). For very negative x, exp(-x) saturates at exp(88) and
 * x / 1.7e38 is -0 or a tiny negative number: the limit, as with an
 * infinite expf. */
static inline float tfenc_silu(float x)
{
    return x / (1.0f + tfenc_fast_exp(-x));
}

static inline float tfenc_relu(float x)
{
    return x > 0.0f ? x : 0.0f;
}

#endif
