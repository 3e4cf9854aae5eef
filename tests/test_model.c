/* The model (core/model/model): blocks composed from a job with the norm
 * after or before each sublayer, composition errors naming the line, the
 * memory promises (weights live with their layers; forward never
 * allocates, checked with a counting allocator), and a bf16 encoder against
 * the fp32 one. */
#include "allocation_counter.h"
#include "encoder_fixture.h"
#include "harness/checks.h"
#include "harness/cunit_main.h"
#include "matrix/matrix.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

static int compose(composed *c, const char *text)
{
    char directory[1024];
    snprintf(directory, sizeof directory, "%s/tests/plugins/.libs", build_dir());
    int status = compose_pieces(c, text, directory);
    if (status == TFENC_OK) {
        float bias[2] = {100, 200};
        int64_t dims[1] = {2};
        tfenc_weight_store_add(&ctx, c->store, "/blk/1/inc/bias", 1, dims, bias);
        tfenc_model_options options = {
            .job = c->job, .config = &c->config, .plan = &c->plan, .registry = c->registry,
            .weights = c->store, .limits = {.max_tokens = 8, .max_seq_len = 8, .max_seqs = 8},
            .first_step = 0, .end_step = c->plan.n_steps};
        status = tfenc_model_create(&ctx, &options, &c->model);
    }
    return status;
}

static void run_one_token(composed *c, float value, float *out)
{
    int32_t starts[2] = {0, 1}, zero[1] = {0};
    float x[2] = {value, value};
    tfenc_batch batch = {.n_seq = 1, .n_tokens = 1, .seq_start = starts, .token_ids = zero,
                         .token_types = zero, .positions = zero, .x = x, .rows = 1, .d_model = 2};
    CU_ASSERT_EQUAL(tfenc_model_forward(&ctx, c->model, &batch), TFENC_OK);
    out[0] = x[0];
    out[1] = x[1];
}

static void test_model_post_and_pre_norm(void)
{
    const char *post =
        "[model]\nweights = w.h5\nd_model = 2\n"
        "[first]\ntype = add\noffset = 1\n"
        "[blk]\nrepeat = 2\n"
        "[blk.f]\ntype = scale\nfactor = 3\n"
        "[blk.f.norm]\ntype = scale\nfactor = 0.5\n"
        "[blk.inc]\ntype = add\nresidual = false\n";
    composed c;
    CU_ASSERT_EQUAL_FATAL(compose(&c, post), TFENC_OK);
    CU_ASSERT_EQUAL(c.plan.n_steps, 5);
    CU_ASSERT_STRING_EQUAL(c.plan.steps[3].name, "blk.1.f");
    CU_ASSERT_STRING_EQUAL(c.plan.steps[3].group, "/blk/1/f");
    CU_ASSERT_STRING_EQUAL(c.plan.steps[3].norm_group, "/blk/1/f/norm");
    float y[2];
    run_one_token(&c, 1.0f, y);
    /* x=2; post-norm: 0.5*(x + 3x) = 2x -> 4; inc (no bias at repeat 0) -> 4;
     * repeat 1: 8; inc adds bias [100, 200] from /blk/1/inc -> [108, 208]. */
    CU_ASSERT_DOUBLE_EQUAL(y[0], 108.0, 1e-5);
    CU_ASSERT_DOUBLE_EQUAL(y[1], 208.0, 1e-5);
    release(&c);

    const char *pre =
        "[model]\nweights = w.h5\nd_model = 2\n"
        /* compose() always stores /blk/1/inc/bias: one layer more than this
         * block runs, on purpose here. */
        "[blk]\nrepeat = 1\nnorm_position = pre\nextra_layers = ignore\n"
        "[blk.f]\ntype = scale\nfactor = 3\n"
        "[blk.f.norm]\ntype = scale\nfactor = 0.5\n";
    CU_ASSERT_EQUAL_FATAL(compose(&c, pre), TFENC_OK);
    run_one_token(&c, 2.0f, y);
    /* pre-norm: x + 3 * (0.5 x) = 2.5 x = 5 */
    CU_ASSERT_DOUBLE_EQUAL(y[0], 5.0, 1e-5);
    release(&c);
}

static void expect_compose_error(const char *text, const char *message);

/* An output norm acts on the sublayer's result before the residual adds
 * it, x + output_norm(f(norm(x))) (Gemma's norms after attention and MLP),
 * and reads its own group. */
static void test_model_output_norm(void)
{
    const char *sandwich =
        "[model]\nweights = w.h5\nd_model = 2\n"
        "[blk]\nrepeat = 1\nnorm_position = pre\nextra_layers = ignore\n"
        "[blk.f]\ntype = scale\nfactor = 3\n"
        "[blk.f.norm]\ntype = scale\nfactor = 0.5\n"
        "[blk.f.output_norm]\ntype = scale\nfactor = 0.25\n";
    composed c;
    CU_ASSERT_EQUAL_FATAL(compose(&c, sandwich), TFENC_OK);
    CU_ASSERT_EQUAL(c.plan.n_steps, 1);
    CU_ASSERT_STRING_EQUAL(c.plan.steps[0].output_norm_group, "/blk/0/f/output_norm");
    float y[2];
    run_one_token(&c, 2.0f, y);
    /* x + 0.25 * (3 * (0.5 x)) = 1.375 x = 2.75 (without it: 5) */
    CU_ASSERT_DOUBLE_EQUAL(y[0], 2.75, 1e-5);
    release(&c);

    /* post-norm: norm(x + output_norm(f(x))) = 0.5 (x + 0.25 * 3x) = 0.875 x */
    const char *post =
        "[model]\nweights = w.h5\nd_model = 2\n"
        "[blk]\nrepeat = 1\nextra_layers = ignore\n"
        "[blk.f]\ntype = scale\nfactor = 3\n"
        "[blk.f.norm]\ntype = scale\nfactor = 0.5\n"
        "[blk.f.output_norm]\ntype = scale\nfactor = 0.25\n";
    CU_ASSERT_EQUAL_FATAL(compose(&c, post), TFENC_OK);
    run_one_token(&c, 2.0f, y);
    CU_ASSERT_DOUBLE_EQUAL(y[0], 1.75, 1e-5);
    release(&c);

    expect_compose_error("[model]\nweights = w.h5\nd_model = 2\n[blk]\nrepeat = 1\n"
                         "[blk.g.output_norm]\ntype = scale\n",
                         "is a norm for a sublayer that is not defined before it");
}

/* Where a residual connection's skip is the sublayer's own input (post-norm,
 * or no norm) and its plugin can add that input itself
 * (TFENC_EXTENSION_ADDS_INPUT: the add in its last product's epilogue), the
 * host lets it and makes neither its copy nor its add; pre-norm, an output
 * norm and residual = false keep the host's way. The test layer's adding
 * forward() adds adding_marker too, which shows the path that ran. */
static void test_model_layer_adds_its_input(void)
{
    static const struct {
        const char *block, *norm;
        float expected;
    } cases[] = {
        /* 0.5 (x + 3x + 1000) with x = 2 */
        {"[blk]\nrepeat = 1\nextra_layers = ignore\n[blk.f]\ntype = scale\nfactor = 3\n"
         "adding_marker = 1000\n",
         "[blk.f.norm]\ntype = scale\nfactor = 0.5\n", 504.0f},
        /* x + 3x + 1000 */
        {"[blk]\nrepeat = 1\nextra_layers = ignore\n[blk.f]\ntype = scale\nfactor = 3\n"
         "adding_marker = 1000\n", "", 1008.0f},
        /* pre-norm: x + 3 (0.5 x), the skip is not f's input */
        {"[blk]\nrepeat = 1\nnorm_position = pre\nextra_layers = ignore\n[blk.f]\n"
         "type = scale\nfactor = 3\nadding_marker = 1000\n",
         "[blk.f.norm]\ntype = scale\nfactor = 0.5\n", 5.0f},
        /* an output norm comes between f and the add: 0.5 (x + 0.25 (3x)) */
        {"[blk]\nrepeat = 1\nextra_layers = ignore\n[blk.f]\ntype = scale\nfactor = 3\n"
         "adding_marker = 1000\n[blk.f.output_norm]\ntype = scale\nfactor = 0.25\n",
         "[blk.f.norm]\ntype = scale\nfactor = 0.5\n", 1.75f},
        /* residual = false: 3x */
        {"[blk]\nrepeat = 1\nextra_layers = ignore\n[blk.f]\ntype = scale\nfactor = 3\n"
         "adding_marker = 1000\nresidual = false\n", "", 6.0f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, "[model]\nweights = w.h5\nd_model = 2\n%s%s",
                 cases[i].block, cases[i].norm);
        composed c;
        CU_ASSERT_EQUAL_FATAL(compose(&c, text), TFENC_OK);
        float y[2];
        run_one_token(&c, 2.0f, y);
        if (y[0] != cases[i].expected)
            printf("\n  case %zu: %g, expected %g\n", i, y[0], cases[i].expected);
        CU_ASSERT_DOUBLE_EQUAL(y[0], cases[i].expected, 1e-5);
        release(&c);
    }
}

static void expect_compose_error(const char *text, const char *message)
{
    composed c;
    CU_ASSERT_NOT_EQUAL(compose(&c, text), TFENC_OK);
    CU_ASSERT(contains(tfenc_context_message(&ctx), message));
    release(&c);
}

static void test_model_composition_errors(void)
{
    const char *head = "[model]\nweights = w.h5\nd_model = 2\n";
    char text[1024];
    snprintf(text, sizeof text, "%s[l]\ntype = scale\nfactr = 2\n", head);
    expect_compose_error(text, "m.ini:6: [l] unknown key 'factr' (not a parameter of layer type scale)");
    snprintf(text, sizeof text, "%s[l]\ntype = nosuch\n", head);
    expect_compose_error(text, "m.ini:4: [l]: no plugin provides layer type 'nosuch'");
    snprintf(text, sizeof text, "%s[l]\nfactor = 2\n", head);
    expect_compose_error(text, "m.ini:4: section [l] has no 'type' key");
    snprintf(text, sizeof text, "%s[b.x]\ntype = scale\n", head);
    expect_compose_error(text, "no block (a section with 'repeat') precedes it");
    snprintf(text, sizeof text, "%s[b]\nrepeat = 0\n[b.x]\ntype = scale\n", head);
    expect_compose_error(text, "[b] repeat = '0': expected an integer in 1..100000");
    snprintf(text, sizeof text, "%s[b]\nrepeat = 2\nnorm = pre\n[b.x]\ntype = scale\n", head);
    expect_compose_error(text, "m.ini:6: [b] unknown key 'norm'");
    /* compose() stores /blk/1/inc/bias: weights of two layers for a block of one. */
    snprintf(text, sizeof text, "%s[blk]\nrepeat = 1\n[blk.inc]\ntype = add\n", head);
    expect_compose_error(text, "m.ini:4: [blk] repeat = 1, but weights (memory) hold group /blk/1 too");
    expect_compose_error("[model]\nd_model = 2\n[l]\ntype = scale\n", "[model] requires key 'weights'");
    expect_compose_error("[model]\nweights = w\nd_model = 2\nwat = 1\n[l]\ntype = scale\n",
                         "m.ini:4: [model] unknown key 'wat'");
}

/* Bytes of one FFN step's weights, the largest step of the encoder. */
static const long long ffn_step_bytes = 2LL * ENCODER_D * ENCODER_F * (long long)sizeof(float);

/* The pipeline survey builds every step once and destroys it: afterwards
 * no step's weights may stay behind (they did while the store owned every
 * load, which kept all of a model on rank 0 of a pipelined job), and a
 * destroyed stage model leaves nothing behind either. */
static void test_weights_live_with_their_layers(void)
{
    if (!allocation_counter_works()) {
        CU_FAIL("the counting allocator sees no allocations in this build");
        return;
    }
    composed c;
    tfenc_model_options options;
    CU_ASSERT_EQUAL_FATAL(encoder_open(&c, "fp32", &options), TFENC_OK);
    double flops[16];
    int pools = 0;
    /* Once to let the libraries set up what they keep for the process. */
    CU_ASSERT_EQUAL(tfenc_model_survey(&ctx, &options, 10.0, flops, &pools, NULL), TFENC_OK);
    allocation_counter_start();
    int status = tfenc_model_survey(&ctx, &options, 10.0, flops, &pools, NULL);
    allocation_counts survey = allocation_counter_stop();
    CU_ASSERT_EQUAL(status, TFENC_OK);
    if (survey.live_bytes >= ffn_step_bytes / 2)
        fprintf(stderr, "\n  the survey left %lld bytes allocated (one FFN step: %lld)\n",
                survey.live_bytes, ffn_step_bytes);
    CU_ASSERT(survey.live_bytes < ffn_step_bytes / 2);

    /* A stage of two steps holds their weights, and gives them back. */
    options.first_step = 4;
    options.end_step = 6;
    allocation_counter_start();
    CU_ASSERT_EQUAL_FATAL(tfenc_model_create(&ctx, &options, &c.model), TFENC_OK);
    allocation_counts built = allocation_counter_stop();
    CU_ASSERT(built.live_bytes >= ffn_step_bytes);
    allocation_counter_start();
    tfenc_model_destroy(c.model);
    allocation_counts destroyed = allocation_counter_stop();
    c.model = NULL;
    CU_ASSERT(built.live_bytes + destroyed.live_bytes < ffn_step_bytes / 2);
    release(&c);
}

/* Forward never allocates: no scratch grows, no oneDNN primitive or memory
 * object is made, even for a batch of more rows and longer sequences than
 * every earlier one (the model's build made them all). Two forward passes
 * come first, so that the libraries' once-per-process set-up (OpenMP's
 * thread team, OpenBLAS's buffers) is not counted. oneDNN's execute itself
 * allocates a few small blocks of bookkeeping per call (its argument map)
 * and frees them before it returns: measured at 5 blocks of at most 104
 * bytes with oneDNN 2.6, so the bf16 and int8 check is "nothing kept,
 * nothing larger than 256 bytes"; fp32 (OpenBLAS) allocates nothing.
 * Without VNNI, oneDNN 2.6 runs int8 through its gemm driver, which
 * allocates its packing buffers on every call (measured: 387 blocks of up
 * to 92 kB for this batch on an AVX2 CPU) and frees them: there the check
 * is "nothing kept". */
static void check_forward_allocations(const char *precision)
{
    if (!allocation_counter_works()) {
        CU_FAIL("the counting allocator sees no allocations in this build");
        return;
    }
    composed c;
    tfenc_model_options options;
    CU_ASSERT_EQUAL_FATAL(encoder_open(&c, precision, &options), TFENC_OK);
    if (!precision_runs_here(c.config.precision)) {
        release(&c);
        return;
    }
    CU_ASSERT_EQUAL_FATAL(tfenc_model_create(&ctx, &options, &c.model), TFENC_OK);
    owned_batch small, medium, large;
    owned_batch_fill(&small, 1, 3, 1.0f);
    owned_batch_fill(&medium, 3, 30, 0.5f);
    owned_batch_fill(&large, 1, 100, 0.7f); /* more rows and longer sequences than before */
    CU_ASSERT_EQUAL(tfenc_model_forward(&ctx, c.model, &small.batch), TFENC_OK);
    CU_ASSERT_EQUAL(tfenc_model_forward(&ctx, c.model, &medium.batch), TFENC_OK);
    allocation_counter_start();
    int status = tfenc_model_forward(&ctx, c.model, &large.batch);
    allocation_counts counts = allocation_counter_stop();
    CU_ASSERT_EQUAL(status, TFENC_OK);
    fprintf(stderr, "\n  %s forward: %ld allocations, largest %zu bytes, %lld bytes kept ",
            precision, counts.calls, counts.largest, counts.live_bytes);
    CU_ASSERT_EQUAL(counts.live_bytes, 0);
    if (c.config.precision == TFENC_PRECISION_FP32)
        CU_ASSERT_EQUAL(counts.calls, 0);
    tfenc_precision runs;
    char notice[256];
    tfenc_matrix_describe(c.config.precision, &runs, notice, sizeof notice);
    if (!(c.config.precision == TFENC_PRECISION_INT8 && strstr(notice, "lacks AVX512_VNNI")))
        CU_ASSERT(counts.largest <= 256);
    release(&c);
}

static void test_forward_does_not_allocate(void)
{
    check_forward_allocations("fp32");
    check_forward_allocations("bf16");
    check_forward_allocations("int8");
}

/* The whole encoder (embedding, 3 BERT blocks) in bf16 against fp32: every
 * token's cosine >= 0.9999, the bf16 bar. Per block, bf16 rounds the
 * activations entering 6 products and the weights of 4 (relative 2^-9
 * each), 1 - cos ~ 5e-6 per block by the estimate of test_layers' FFN
 * test; three blocks stay near 2e-5, 5x under the bar. */
static void test_bf16_encoder_against_fp32(void)
{
    composed c;
    tfenc_model_options options;
    CU_ASSERT_EQUAL_FATAL(encoder_open(&c, "bf16", &options), TFENC_OK);
    if (!precision_runs_here(TFENC_PRECISION_BF16)) {
        release(&c);
        return;
    }
    owned_batch input, fp32, bf16;
    owned_batch_fill(&input, 3, 40, 0.0f);
    tfenc_precision everywhere_fp32[16];
    for (int i = 0; i < 16; i++)
        everywhere_fp32[i] = TFENC_PRECISION_FP32;
    CU_ASSERT_EQUAL(encoder_output(&c, options, everywhere_fp32, &input, &fp32), TFENC_OK);
    CU_ASSERT_EQUAL(encoder_output(&c, options, NULL, &input, &bf16), TFENC_OK);
    double cosine = smallest_cosine(&fp32, &bf16);
    fprintf(stderr, "\n  bf16 encoder: min cosine to fp32 %.7f ", cosine);
    CU_ASSERT(cosine >= 0.9999 && cosine < 1.0);
    release(&c);
}

static const test_case model_cases[] = {
    {"post and pre norm blocks", test_model_post_and_pre_norm},
    {"output norm before the residual", test_model_output_norm},
    {"a sublayer adds its own input where it can", test_model_layer_adds_its_input},
    {"composition errors", test_model_composition_errors},
    {NULL, NULL}};

static const test_case memory_cases[] = {
    {"weights live with their layers", test_weights_live_with_their_layers},
    {"forward does not allocate", test_forward_does_not_allocate},
    {NULL, NULL}};

static const test_case precision_cases[] = {
    {"bf16 encoder against fp32", test_bf16_encoder_against_fp32},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"model", NULL, NULL, model_cases},
    {"memory promises", NULL, NULL, memory_cases},
    {"precision", NULL, NULL, precision_cases},
    {NULL, NULL, NULL, NULL}};
