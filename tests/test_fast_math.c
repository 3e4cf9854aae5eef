/* The SDK's fast math (core/include/tfenc/plugin_math.h) against float64
 * libm: tfenc_exp_nonpositive, the softmax's exponential, within its
 * stated bound over its whole domain, its edge values, and the same
 * results in each instruction set a plugin's TFENC_VECTOR_CLONES loop may
 * run in (AVX-512, AVX2 + FMA, the x86-64 baseline), each compiled
 * explicitly here and run where this CPU has it. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/cunit_main.h"
#include "tfenc/plugin_math.h"

/* The bound plugin_math.h states for -87 <= x <= 0 (and up to 88). */
#define EXP_RELATIVE_BOUND 3e-7

/* A loop as a plugin writes it, compiled for one instruction set and with
 * the plugins' flags (tests/plugins.mk): GCC vectorises it 16 (AVX-512),
 * 8 (AVX2) or 4 (SSE2) floats wide, with fused multiply-adds in the first
 * two. */
#define EXP_LOOP(name, target)                                                        \
    target static void name(const float *in, float *out, size_t count)                \
    {                                                                                 \
        _Pragma("omp simd")                                                           \
        for (size_t i = 0; i < count; i++)                                            \
            out[i] = tfenc_exp_nonpositive(in[i]);                                    \
    }
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
EXP_LOOP(exp_loop_avx512, __attribute__((target("arch=x86-64-v4"))))
EXP_LOOP(exp_loop_avx2, __attribute__((target("arch=x86-64-v3"))))
#define HAVE_ISA_LOOPS 1
#endif
EXP_LOOP(exp_loop_baseline, )

typedef void (*exp_loop)(const float *, float *, size_t);

typedef struct isa_loop {
    const char *name;
    exp_loop run;
    int available;
} isa_loop;

/* The loops this CPU can run, baseline first. */
static int isa_loops(isa_loop *loops)
{
    int count = 0;
    loops[count++] = (isa_loop){"baseline", exp_loop_baseline, 1};
#ifdef HAVE_ISA_LOOPS
    __builtin_cpu_init();
    loops[count++] = (isa_loop){"x86-64-v3 (AVX2, FMA)", exp_loop_avx2,
                                __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")};
    loops[count++] = (isa_loop){"x86-64-v4 (AVX-512)", exp_loop_avx512,
                                __builtin_cpu_supports("avx512f") &&
                                    __builtin_cpu_supports("avx512bw") &&
                                    __builtin_cpu_supports("avx512dq") &&
                                    __builtin_cpu_supports("avx512vl")};
#endif
    return count;
}

static float float_from_bits(uint32_t bits)
{
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* Every 61st float from -0 down to -87 (some 18 million, all binades and
 * all mantissa patterns mod 61), then 0 .. 88 the same way: each loop's
 * worst relative error against exp() in float64 must be within the bound,
 * and the AVX-512 loop must give the AVX2 loop's bits (the same fused
 * operations element by element: the width must not change a result; the
 * baseline rounds each product, so its bits may differ). */
static void test_exp_bound_every_isa(void)
{
    const uint32_t negative_end = 0xc2ae0000u; /* -87.0f */
    const uint32_t positive_end = 0x42b00000u; /* 88.0f */
    const uint32_t step = 61;
    size_t count = 0;
    float *in = malloc(sizeof(float) * (size_t)(negative_end - 0x80000000u + positive_end) /
                       step + 16 * sizeof(float));
    CU_ASSERT_FATAL(in != NULL);
    CU_ASSERT_EQUAL(float_from_bits(negative_end), -87.0f);
    CU_ASSERT_EQUAL(float_from_bits(positive_end), 88.0f);
    for (uint32_t bits = 0x80000000u; bits <= negative_end; bits += step)
        in[count++] = float_from_bits(bits);
    in[count++] = -87.0f;
    for (uint32_t bits = 0; bits <= positive_end; bits += step)
        in[count++] = float_from_bits(bits);
    float *results[3];
    for (int l = 0; l < 3; l++)
        CU_ASSERT_FATAL((results[l] = malloc(sizeof(float) * count)) != NULL);

    isa_loop loops[3];
    const int loop_count = isa_loops(loops);
    for (int l = 0; l < loop_count; l++) {
        if (!loops[l].available) {
            printf("\n    %s: not on this CPU", loops[l].name);
            continue;
        }
        float *result = results[l];
        loops[l].run(in, result, count);
        double worst = 0;
        float worst_at = 0;
        for (size_t i = 0; i < count; i++) {
            const double truth = exp((double)in[i]);
            const double error = fabs((double)result[i] - truth) / truth;
            if (!(error <= worst)) {
                worst = error;
                worst_at = in[i];
            }
        }
        printf("\n    %s: %zu values, worst relative error %.3g at x = %.9g", loops[l].name,
               count, worst, (double)worst_at);
        CU_ASSERT(worst <= EXP_RELATIVE_BOUND);
    }
    if (loop_count == 3 && loops[1].available && loops[2].available)
        CU_ASSERT(memcmp(results[1], results[2], sizeof(float) * count) == 0);
    free(in);
    for (int l = 0; l < 3; l++)
        free(results[l]);
}

/* exp(0) is exactly 1 (the row maximum's probability); below -87, -inf
 * included, exactly 0; NaN stays NaN; and values just above -87 stay
 * normal floats near exp(x). */
static void test_exp_edges(void)
{
    float in[] = {0.0f, -0.0f, -87.0f, -87.0001f, -88.0f, -103.9f, -1e30f, -INFINITY, NAN,
                  -1e-30f, -0.34657359f, -0.34657362f, -86.99999f};
    const size_t count = sizeof in / sizeof in[0];
    isa_loop loops[3];
    const int loop_count = isa_loops(loops);
    for (int l = 0; l < loop_count; l++) {
        if (!loops[l].available)
            continue;
        float out[sizeof in / sizeof in[0]];
        loops[l].run(in, out, count);
        CU_ASSERT_EQUAL(out[0], 1.0f);
        CU_ASSERT_EQUAL(out[1], 1.0f);
        CU_ASSERT(fabs(out[2] / exp(-87.0) - 1) <= EXP_RELATIVE_BOUND);
        for (int i = 3; i <= 7; i++)
            CU_ASSERT_EQUAL(out[i], 0.0f);
        CU_ASSERT(isnan(out[8]));
        CU_ASSERT_EQUAL(out[9], 1.0f);
        for (int i = 10; i < 13; i++)
            CU_ASSERT(fabs(out[i] / exp((double)in[i]) - 1) <= EXP_RELATIVE_BOUND);
    }
}

/* A softmax of one row through tfenc_exp_nonpositive, in every ISA,
 * against float64 from the same exponents: each probability within the
 * bound twice (its own exponential and the sum's), a row of 4096 scores
 * spread over 40 units, as a long sequence's with large logits. */
static void test_softmax_row(void)
{
    enum { KEYS = 4096 };
    static float scores[KEYS], shifted[KEYS], probabilities[KEYS];
    unsigned long long state = 7;
    float maximum = -INFINITY;
    for (int j = 0; j < KEYS; j++) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        scores[j] = (float)(40.0 * ((double)(state >> 11) / (double)(1ULL << 53)) - 20.0);
        maximum = scores[j] > maximum ? scores[j] : maximum;
    }
    double total = 0;
    for (int j = 0; j < KEYS; j++) {
        shifted[j] = scores[j] - maximum; /* the exponent, as the plugins round it */
        total += exp((double)shifted[j]);
    }
    isa_loop loops[3];
    const int loop_count = isa_loops(loops);
    for (int l = 0; l < loop_count; l++) {
        if (!loops[l].available)
            continue;
        loops[l].run(shifted, probabilities, KEYS);
        double sum = 0, worst = 0;
        for (int j = 0; j < KEYS; j++)
            sum += probabilities[j];
        for (int j = 0; j < KEYS; j++) {
            const double truth = exp((double)shifted[j]) / total;
            const double error = fabs(probabilities[j] / sum - truth) / truth;
            worst = error > worst ? error : worst;
        }
        /* each probability within the bound, the sum within it too */
        CU_ASSERT(worst <= 2 * EXP_RELATIVE_BOUND);
    }
}

static const test_case fast_math_cases[] = {
    {"exp_nonpositive within its bound in every ISA", test_exp_bound_every_isa},
    {"exp_nonpositive at its edges", test_exp_edges},
    {"a softmax row against float64", test_softmax_row},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"fast math", NULL, NULL, fast_math_cases},
    {NULL, NULL, NULL, NULL}};
