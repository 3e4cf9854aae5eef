/* Tests of the layers plugin (embedding, sinusoidal, ffn, layernorm, rmsnorm,
 * pooling): each layer, loaded from layers.so as the host loads it, against a
 * naive double-precision reference written from the formulas, on packed
 * batches that mix sequence lengths (1 included).
 *
 * Tolerance: a check passes when max |tfenc - reference| <= 1e-5 * max(1,
 * max |reference|). The plugin computes in float32 (unit roundoff 6e-8); the
 * longest reduction here has 16 terms of magnitude <= ~2, so the rounding
 * error is bounded by about 16 * 6e-8 * 2 = 2e-6 before the few-ulp error of
 * erff/tanhf/expf, leaving a margin of 5x. A wrong formula, index, offset or
 * eps is off by 1e-3 or more in these cases. */
#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/checks.h"
#include "harness/cunit_main.h"
#include "base/aligned.h"
#include "base/context.h"
#include "matrix/matrix.h"
#include "job/jobfile.h"
#include "job/params.h"
#include "plugin/plugin_loader.h"
#include "model/weights.h"

#define TOLERANCE 1e-5

static tfenc_plugin_registry *registry;

/* ------------------------------------------------------------ fixtures */

/* Deterministic uniform numbers in [low, high): tests must not depend on luck. */
static unsigned long long random_state = 88172645463325252ULL;

static double uniform(double low, double high)
{
    random_state ^= random_state << 13;
    random_state ^= random_state >> 7;
    random_state ^= random_state << 17;
    return low + (high - low) * (double)(random_state >> 11) / 9007199254740992.0;
}

static void fill(float *data, size_t n, double low, double high)
{
    for (size_t i = 0; i < n; i++)
        data[i] = (float)uniform(low, high);
}

/* A packed batch of sequences with the given lengths. */
typedef struct test_batch {
    tfenc_batch batch;
    int32_t *seq_start, *token_ids, *token_types, *positions;
    float *x;
} test_batch;

static void batch_make(test_batch *b, const int *lengths, int n_seq, int d)
{
    memset(b, 0, sizeof *b);
    b->seq_start = calloc((size_t)n_seq + 1, sizeof(int32_t));
    for (int s = 0; s < n_seq; s++)
        b->seq_start[s + 1] = b->seq_start[s] + lengths[s];
    const int n = b->seq_start[n_seq];
    b->token_ids = calloc((size_t)n + 1, sizeof(int32_t));
    b->token_types = calloc((size_t)n + 1, sizeof(int32_t));
    b->positions = calloc((size_t)n + 1, sizeof(int32_t));
    b->x = tfenc_aligned_alloc((size_t)(n + 1) * d * sizeof(float));
    for (int s = 0; s < n_seq; s++)
        for (int t = b->seq_start[s]; t < b->seq_start[s + 1]; t++)
            b->positions[t] = t - b->seq_start[s];
    b->batch = (tfenc_batch){.n_seq = n_seq, .n_tokens = n, .seq_start = b->seq_start,
                             .token_ids = b->token_ids, .token_types = b->token_types,
                             .positions = b->positions, .x = b->x, .rows = n, .d_model = d};
}

static void batch_free(test_batch *b)
{
    free(b->seq_start);
    free(b->token_ids);
    free(b->token_types);
    free(b->positions);
    tfenc_aligned_free(b->x);
}

/* One layer instance as the host would build it: a job section parsed from
 * text, weights from an in-memory store under group /layer. */
typedef struct harness {
    tfenc_context ctx;
    tfenc_weight_store *store;
    tfenc_jobfile *job;
    tfenc_params params;
    tfenc_layer_init init;
    const tfenc_layer_descriptor *descriptor;
    void *instance;
    tfenc_precision precision; /* of the layer's linear maps; fp32 unless a test sets it */
} harness;

static void harness_open(harness *h, int d_model, int vocab_size, int max_positions)
{
    memset(h, 0, sizeof *h);
    tfenc_context_init(&h->ctx);
    CU_ASSERT_FATAL(tfenc_weight_store_create_memory(&h->ctx, &h->store) == TFENC_OK);
    h->init.struct_size = sizeof h->init;
    h->init.name = "layer";
    h->init.model = (tfenc_model_info){.d_model = d_model, .vocab_size = vocab_size,
                                       .max_positions = max_positions, .n_layers = 1,
                                       .layer_index = -1};
    h->init.limits = (tfenc_limits){.max_tokens = 64, .max_seq_len = 32, .max_seqs = 16};
}

static void harness_add(harness *h, const char *name, int rank, const int64_t *dims,
                        const float *data)
{
    char path[256];
    snprintf(path, sizeof path, "/layer/%s", name);
    CU_ASSERT_FATAL(tfenc_weight_store_add(&h->ctx, h->store, path, rank, dims, data) ==
                    TFENC_OK);
}

/* Creates the layer from `keys` (job-file lines); returns create's status.
 * On success it also checks that create() read every key of the section,
 * which the host requires. */
static int harness_create(harness *h, const char *type, const char *keys)
{
    char text[1024];
    snprintf(text, sizeof text, "[layer]\n%s", keys);
    CU_ASSERT_FATAL(tfenc_jobfile_parse_string(&h->ctx, "test.ini", text, &h->job) == TFENC_OK);
    tfenc_params_bind(&h->params, &h->ctx, h->job, tfenc_jobfile_find(h->job, "layer"));
    const tfenc_weight_options options = {.precision = h->precision};
    CU_ASSERT_FATAL(tfenc_weight_store_group(&h->ctx, h->store, "/layer", &options,
                                             &h->init.weights) == TFENC_OK);
    h->init.params = &h->params;
    const tfenc_plugin_layer *layer = tfenc_plugin_registry_find(registry, type);
    CU_ASSERT_FATAL(layer != NULL);
    h->descriptor = layer->descriptor;
    int status = h->descriptor->create(&h->ctx, &h->init, &h->instance);
    if (status == TFENC_OK) {
        CU_ASSERT_EQUAL(tfenc_params_check_all_used(&h->params, type), TFENC_OK);
    } else {
        h->instance = NULL;
    }
    return status;
}

/* Runs forward() with a workspace of exactly workspace_size() bytes followed
 * by a guard zone that must come back untouched. */
static int harness_forward(harness *h, tfenc_batch *batch)
{
    enum { GUARD = 256 };
    tfenc_limits limits = {.max_tokens = batch->n_tokens, .max_seq_len = 0,
                           .max_seqs = batch->n_seq};
    for (int s = 0; s < batch->n_seq; s++) {
        int length = batch->seq_start[s + 1] - batch->seq_start[s];
        if (length > limits.max_seq_len)
            limits.max_seq_len = length;
    }
    size_t size = h->descriptor->workspace_size != NULL
                      ? h->descriptor->workspace_size(h->instance, &limits)
                      : 0;
    unsigned char *workspace = tfenc_aligned_alloc(size + GUARD);
    CU_ASSERT_FATAL(workspace != NULL);
    memset(workspace + size, 0xA5, GUARD);
    int status = h->descriptor->forward(h->instance, &h->ctx, batch, workspace);
    int intact = 1;
    for (size_t i = size; i < size + GUARD; i++)
        intact &= workspace[i] == 0xA5;
    CU_ASSERT(intact);
    tfenc_aligned_free(workspace);
    return status;
}

static void harness_close(harness *h)
{
    if (h->instance != NULL)
        h->descriptor->destroy(h->instance);
    tfenc_jobfile_destroy(h->job);
    tfenc_weight_store_close(h->store);
}

/* max |got - want| <= TOLERANCE * max(1, max |want|), reported when not. */
static void assert_close(const float *got, const double *want, size_t n, const char *what)
{
    double scale = 1.0, worst = 0.0;
    for (size_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        double diff = fabs((double)got[i] - want[i]);
        worst = fmax(worst, isnan(got[i]) ? INFINITY : diff);
    }
    if (!(worst <= TOLERANCE * scale))
        fprintf(stderr, "\n  %s: max abs difference %g exceeds %g\n", what, worst,
                TOLERANCE * scale);
    CU_ASSERT(worst <= TOLERANCE * scale);
}

static int message_has(const harness *h, const char *text)
{
    const char *message = tfenc_context_message(&h->ctx);
    int found = strstr(message, text) != NULL;
    if (!found)
        fprintf(stderr, "\n  message '%s' lacks '%s'\n", message, text);
    return found;
}

/* The mixed lengths used by most tests: 1-token sequences at both ends. */
static const int lengths[] = {1, 4, 2, 5, 1};
enum { N_SEQ = 5, N_TOKENS = 13, MAX_LENGTH = 5 };

/* ----------------------------------------------------------- the plugin */

static void test_descriptors(void)
{
    static const char *const types[] = {"embedding", "sinusoidal", "ffn", "layernorm",
                                        "rmsnorm", "pooling"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const tfenc_plugin_layer *layer = tfenc_plugin_registry_find(registry, types[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(layer);
        CU_ASSERT_EQUAL(layer->descriptor->abi_major, TFENC_ABI_MAJOR);
        CU_ASSERT_EQUAL(layer->descriptor->struct_size, sizeof(tfenc_layer_descriptor));
        CU_ASSERT_PTR_NOT_NULL(strstr(layer->file, "layers.so"));
    }
}

/* ----------------------------------------------------------- embedding */

enum { EMB_D = 8, EMB_V = 13, EMB_P = 12, EMB_G = 2 };
static float token_table[EMB_V * EMB_D], position_table[EMB_P * EMB_D],
    type_table[EMB_G * EMB_D];

static void embedding_weights(harness *h, int positions, int types, int n_positions)
{
    fill(token_table, sizeof token_table / sizeof(float), -1, 1);
    fill(position_table, sizeof position_table / sizeof(float), -1, 1);
    fill(type_table, sizeof type_table / sizeof(float), -1, 1);
    harness_add(h, "token_embeddings", 2, (int64_t[]){EMB_V, EMB_D}, token_table);
    if (positions)
        harness_add(h, "position_embeddings", 2, (int64_t[]){n_positions, EMB_D},
                    position_table);
    if (types)
        harness_add(h, "token_type_embeddings", 2, (int64_t[]){EMB_G, EMB_D}, type_table);
}

static void embedding_case(const char *keys, double scale, int positions, int types,
                           int offset)
{
    harness h;
    harness_open(&h, EMB_D, EMB_V, 512);
    embedding_weights(&h, positions, types, EMB_P);
    CU_ASSERT_EQUAL_FATAL(harness_create(&h, "embedding", keys), TFENC_OK);
    test_batch b;
    batch_make(&b, lengths, N_SEQ, EMB_D);
    for (int t = 0; t < N_TOKENS; t++) {
        b.token_ids[t] = (t * 7 + 3) % EMB_V;
        b.token_types[t] = t % 3 == 1;
    }
    b.token_ids[0] = 0;
    b.token_ids[1] = EMB_V - 1; /* both ends of the vocabulary */
    CU_ASSERT_EQUAL(harness_forward(&h, &b.batch), TFENC_OK);

    double want[N_TOKENS * EMB_D];
    for (int t = 0; t < N_TOKENS; t++)
        for (int j = 0; j < EMB_D; j++) {
            double v = token_table[b.token_ids[t] * EMB_D + j] * scale;
            if (positions)
                v += position_table[(b.positions[t] + offset) * EMB_D + j];
            if (types)
                v += type_table[b.token_types[t] * EMB_D + j];
            want[t * EMB_D + j] = v;
        }
    assert_close(b.x, want, N_TOKENS * EMB_D, keys);
    CU_ASSERT_EQUAL(b.batch.rows, N_TOKENS);
    batch_free(&b);
    harness_close(&h);
}

static void test_embedding_plain(void)
{
    embedding_case("", 1.0, 0, 0, 0);
}

static void test_embedding_scaled(void)
{
    embedding_case("scale_by_sqrt_d = true\n", sqrt(EMB_D), 0, 0, 0);
}

static void test_embedding_bert(void)
{
    embedding_case("learned_positions = true\ntoken_types = true\n", 1.0, 1, 1, 0);
}

static void test_embedding_roberta_offset(void)
{
    /* RoBERTa: positions start at padding_idx + 1 = 2 */
    embedding_case("learned_positions = true\nposition_offset = 2\nscale_by_sqrt_d = false\n"
                   "token_types = false\n", 1.0, 1, 0, 2);
}

/* A batch with one bad value at row 6 must fail with TFENC_ERR_INPUT and a
 * message holding `expect1` and `expect2`. */
static void embedding_error_case(const char *keys, int n_positions, int bad_id, int bad_type,
                                 const char *expect1, const char *expect2)
{
    harness h;
    harness_open(&h, EMB_D, 0, 512);
    embedding_weights(&h, 1, 1, n_positions);
    CU_ASSERT_EQUAL_FATAL(harness_create(&h, "embedding", keys), TFENC_OK);
    test_batch b;
    batch_make(&b, lengths, N_SEQ, EMB_D);
    b.token_ids[6] = bad_id;
    b.token_types[6] = bad_type;
    CU_ASSERT_EQUAL(harness_forward(&h, &b.batch), TFENC_ERR_INPUT);
    CU_ASSERT(message_has(&h, expect1));
    CU_ASSERT(message_has(&h, expect2));
    CU_ASSERT(message_has(&h, "embedding"));
    batch_free(&b);
    harness_close(&h);
}

static void test_embedding_errors(void)
{
    const char *all = "learned_positions = true\ntoken_types = true\n";
    embedding_error_case(all, EMB_P, EMB_V, 0, "token id 13", "13)");
    embedding_error_case(all, EMB_P, -1, 0, "token id -1", "vocabulary");
    embedding_error_case(all, EMB_P, 0, EMB_G, "token type 2", "token_type_embeddings");
    /* sequence 3 has positions 0..4: a table of 4 positions is one short */
    embedding_error_case(all, 4, 0, 0, "position 4", "4 max positions");
    /* with RoBERTa's offset, positions 0..4 need 7 rows */
    embedding_error_case("learned_positions = true\ntoken_types = true\nposition_offset = 2\n",
                         6, 0, 0, "position 6", "6 max positions");
}

static void test_embedding_vocab_mismatch(void)
{
    harness h;
    harness_open(&h, EMB_D, EMB_V + 1, 512);
    embedding_weights(&h, 0, 0, EMB_P);
    CU_ASSERT_EQUAL(harness_create(&h, "embedding", ""), TFENC_ERR_WEIGHTS);
    CU_ASSERT(message_has(&h, "token_embeddings"));
    harness_close(&h);
}

static void test_embedding_missing_positions(void)
{
    harness h;
    harness_open(&h, EMB_D, 0, 512);
    embedding_weights(&h, 0, 0, EMB_P);
    CU_ASSERT_EQUAL(harness_create(&h, "embedding", "learned_positions = yes\n"),
                    TFENC_ERR_WEIGHTS);
    CU_ASSERT(message_has(&h, "position_embeddings"));
    harness_close(&h);
}

/* ----------------------------------------------------------- sinusoidal */

/* The PyTorch tutorial's PositionalEncoding, written as it is there:
 * div_term = exp(arange(0, d, 2) * (-log(base) / d)). */
static double tutorial_encoding(int position, int j, int d, double base)
{
    double div_term = exp((j - j % 2) * (-log(base) / d));
    return j % 2 == 0 ? sin(position * div_term) : cos(position * div_term);
}

static void sinusoidal_case(int d, const char *keys, double base, int long_positions)
{
    harness h;
    harness_open(&h, d, 0, 512);
    CU_ASSERT_EQUAL_FATAL(harness_create(&h, "sinusoidal", keys), TFENC_OK);
    test_batch b;
    batch_make(&b, lengths, N_SEQ, d);
    /* late positions too: they are where a float-precision table would drift */
    if (long_positions)
        for (int t = 0; t < N_TOKENS; t++)
            b.positions[t] = 511 - t * 37;
    fill(b.x, (size_t)N_TOKENS * d, -1, 1);
    double *want = malloc((size_t)N_TOKENS * d * sizeof *want);
    for (int t = 0; t < N_TOKENS; t++)
        for (int j = 0; j < d; j++)
            want[t * d + j] = b.x[t * d + j] + tutorial_encoding(b.positions[t], j, d, base);
    CU_ASSERT_EQUAL(harness_forward(&h, &b.batch), TFENC_OK);
    assert_close(b.x, want, (size_t)N_TOKENS * d, "sinusoidal");
    free(want);
    batch_free(&b);
    harness_close(&h);
}

static void test_sinusoidal(void)
{
    sinusoidal_case(10, "", 10000.0, 0);
    sinusoidal_case(16, "", 10000.0, 1);
    sinusoidal_case(7, "base = 100\n", 100.0, 1); /* odd width: the last column is a sine */
}

static void test_sinusoidal_too_long(void)
{
    harness h;
    harness_open(&h, 4, 0, 4); /* max_positions = 4, but sequence 3 has 5 tokens */
    CU_ASSERT_EQUAL_FATAL(harness_create(&h, "sinusoidal", ""), TFENC_OK);
    test_batch b;
    batch_make(&b, lengths, N_SEQ, 4);
    CU_ASSERT_EQUAL(harness_forward(&h, &b.batch), TFENC_ERR_INPUT);
    CU_ASSERT(message_has(&h, "position 4"));
    CU_ASSERT(message_has(&h, "4 max positions"));
    batch_free(&b);
    harness_close(&h);
}

/* ------------------------------------------------------------------ ffn */

enum { FFN_D = 8, FFN_F = 12 };

static double reference_activation(const char *name, double x)
{
    if (strcmp(name, "relu") == 0)
        return x > 0 ? x : 0;
    if (strcmp(name, "gelu") == 0 || strcmp(name, "geglu") == 0)
        return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    if (strcmp(name, "gelu_tanh") == 0 || strcmp(name, "geglu_tanh") == 0)
        return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    if (strcmp(name, "identity") == 0)
        return x;
    return x / (1.0 + exp(-x)); /* silu, swiglu */
}

/* y = x W^T + b for one row, in double. */
static void reference_linear(double *y, const double *x, const float *w, const float *b,
                             int in, int out)
{
    for (int o = 0; o < out; o++) {
        double sum = b != NULL ? b[o] : 0.0;
        for (int i = 0; i < in; i++)
            sum += (double)w[o * in + i] * x[i];
        y[o] = sum;
    }
}

/* The FFN of `activation` against the reference on a batch of the given
 * sequence lengths (within the harness's limits, raised to the batch). */
static void ffn_run(const char *activation, int bias, const int *seq_lengths, int n_seq)
{
    const int gated = strcmp(activation, "swiglu") == 0 || strcmp(activation, "geglu") == 0 ||
                      strcmp(activation, "geglu_tanh") == 0;
    float in_w[FFN_F * FFN_D], in_b[FFN_F], gate_w[FFN_F * FFN_D], gate_b[FFN_F];
    float out_w[FFN_D * FFN_F], out_b[FFN_D];
    /* weights ~ 1/sqrt(fan_in) as nn.Linear initialises them, inputs in [-2, 2]
     * so that pre-activations reach both tails of each nonlinearity */
    fill(in_w, FFN_F * FFN_D, -0.9, 0.9);
    fill(gate_w, FFN_F * FFN_D, -0.9, 0.9);
    fill(in_b, FFN_F, -0.5, 0.5);
    fill(gate_b, FFN_F, -0.5, 0.5);
    fill(out_w, FFN_D * FFN_F, -0.3, 0.3);
    fill(out_b, FFN_D, -0.5, 0.5);

    harness h;
    harness_open(&h, FFN_D, 0, 512);
    harness_add(&h, "in_weight", 2, (int64_t[]){FFN_F, FFN_D}, in_w);
    harness_add(&h, "out_weight", 2, (int64_t[]){FFN_D, FFN_F}, out_w);
    if (bias) {
        harness_add(&h, "in_bias", 1, (int64_t[]){FFN_F}, in_b);
        harness_add(&h, "out_bias", 1, (int64_t[]){FFN_D}, out_b);
    }
    if (gated) {
        harness_add(&h, "gate_weight", 2, (int64_t[]){FFN_F, FFN_D}, gate_w);
        if (bias)
            harness_add(&h, "gate_bias", 1, (int64_t[]){FFN_F}, gate_b);
    }
    char keys[128];
    snprintf(keys, sizeof keys, "activation = %s\nbias = %s\n", activation,
             bias ? "true" : "false");
    int tokens = 0;
    for (int s = 0; s < n_seq; s++)
        tokens += seq_lengths[s];
    if (tokens > h.init.limits.max_tokens)
        h.init.limits.max_tokens = tokens;
    if (n_seq > h.init.limits.max_seqs)
        h.init.limits.max_seqs = n_seq;
    CU_ASSERT_EQUAL_FATAL(harness_create(&h, "ffn", keys), TFENC_OK);
    const double flops = h.descriptor->flops_per_token(h.instance, 10.0);
    CU_ASSERT_DOUBLE_EQUAL(flops, 2.0 * FFN_D * FFN_F * (gated ? 3 : 2), 0.5);

    test_batch b;
    batch_make(&b, seq_lengths, n_seq, FFN_D);
    fill(b.x, (size_t)tokens * FFN_D, -2, 2);
    double *want = malloc(sizeof(double) * tokens * FFN_D);
    for (int t = 0; t < tokens; t++) {
        double x[FFN_D], up[FFN_F], gate[FFN_F], hidden[FFN_F];
        for (int j = 0; j < FFN_D; j++)
            x[j] = b.x[t * FFN_D + j];
        reference_linear(up, x, in_w, bias ? in_b : NULL, FFN_D, FFN_F);
        reference_linear(gate, x, gate_w, bias ? gate_b : NULL, FFN_D, FFN_F);
        for (int k = 0; k < FFN_F; k++)
            hidden[k] = gated ? reference_activation(activation, gate[k]) * up[k]
                              : reference_activation(activation, up[k]);
        reference_linear(want + t * FFN_D, hidden, out_w, bias ? out_b : NULL, FFN_F, FFN_D);
    }
    CU_ASSERT_EQUAL(harness_forward(&h, &b.batch), TFENC_OK);
    assert_close(b.x, want, (size_t)tokens * FFN_D, keys);
    free(want);
    batch_free(&b);
    harness_close(&h);
}

static void ffn_case(const char *activation, int bias)
{
    ffn_run(activation, bias, lengths, N_SEQ);
}

/* A batch of 1,120 tokens runs through the network in chunks of 512 rows
 * (the workspace holds one chunk): every chunk, the short last one
 * included, must match. */
static void test_ffn_chunks(void)
{
    int many[35];
    for (int s = 0; s < 35; s++)
        many[s] = 32;
    ffn_run("gelu", 1, many, 35);
    ffn_run("swiglu", 0, many, 35);
}

static void test_ffn_activations(void)
{
    ffn_case("relu", 1);
    ffn_case("gelu", 1);
    ffn_case("gelu_tanh", 1);
    ffn_case("silu", 1);
}

/* Each activation element by element over its whole range, tails and
 * specials included, by an FFN whose two linear maps are the identity (so x
 * reaches the activation exactly and its result comes back exactly). The
 * activations use their own exp and erf (vectorised, not libm's), so they are
 * held to a bar near float rounding, not the 1e-5 of the layer tests:
 * |got - want| <= 4e-7 max(1, |x|). GELU's erf (Abramowitz-Stegun 7.1.26)
 * errs by at most 1.5e-7, which 0.5 x (1 + erf) scales by 0.5 |x|; exp errs
 * by about 2 ulp (2.4e-7 relative), and x / (1 + exp) adds two roundings. A
 * wrong coefficient or clamp errs by 1e-4 or more. d = 67 also leaves a
 * remainder after every vector width. */
enum { RANGE_D = 67, RANGE_ROWS = 9 };

static void activation_range_case(const char *activation)
{
    static float identity[RANGE_D * RANGE_D];
    for (int i = 0; i < RANGE_D; i++)
        for (int j = 0; j < RANGE_D; j++)
            identity[i * RANGE_D + j] = i == j ? 1.0f : 0.0f;
    harness h;
    harness_open(&h, RANGE_D, 0, 512);
    harness_add(&h, "in_weight", 2, (int64_t[]){RANGE_D, RANGE_D}, identity);
    harness_add(&h, "out_weight", 2, (int64_t[]){RANGE_D, RANGE_D}, identity);
    char keys[128];
    snprintf(keys, sizeof keys, "activation = %s\nbias = false\n", activation);
    CU_ASSERT_EQUAL_FATAL(harness_create(&h, "ffn", keys), TFENC_OK);

    const int sequence[] = {RANGE_ROWS};
    test_batch b;
    batch_make(&b, sequence, 1, RANGE_D);
    const int n = RANGE_ROWS * RANGE_D;
    float x[RANGE_ROWS * RANGE_D];
    /* a sweep of [-30, 30], then the far tails and values around zero */
    const float specials[] = {0.0f, -0.0f, 1e-20f, -1e-20f, 1e-3f, -1e-3f, 88.0f, -88.0f,
                              100.0f, -100.0f, 1e4f, -1e4f};
    const int n_specials = (int)(sizeof specials / sizeof specials[0]);
    for (int i = 0; i < n; i++)
        x[i] = i < n - n_specials ? -30.0f + 60.0f * (float)i / (float)(n - n_specials - 1)
                                  : specials[i - (n - n_specials)];
    memcpy(b.x, x, sizeof x);
    CU_ASSERT_EQUAL_FATAL(harness_forward(&h, &b.batch), TFENC_OK);
    double worst = 0.0;
    int worst_index = 0;
    for (int i = 0; i < n; i++) {
        double want = reference_activation(activation, x[i]);
        double error = fabs((double)b.x[i] - want) / fmax(1.0, fabs((double)x[i]));
        if (!(error <= worst)) {
            worst = isnan(error) ? INFINITY : error;
            worst_index = i;
        }
    }
    if (!(worst <= 4e-7))
        fprintf(stderr, "\n  %s: at x = %.9g got %.9g, want %.9g (error %.3g per max(1,|x|))\n",
                activation, x[worst_index], b.x[worst_index],
                reference_activation(activation, x[worst_index]), worst);
    CU_ASSERT(worst <= 4e-7);
    batch_free(&b);
    harness_close(&h);
}

static void test_ffn_activation_range(void)
{
    activation_range_case("relu");
    activation_range_case("gelu");
    activation_range_case("gelu_tanh");
    activation_range_case("silu");
}

static void test_ffn_no_bias(void)
{
    ffn_case("relu", 0);
    ffn_case("gelu", 0);
}

static void test_ffn_gated(void)
{
    ffn_case("swiglu", 1);
    ffn_case("swiglu", 0);
    ffn_case("geglu", 1);
    ffn_case("geglu", 0);
    /* Gemma's gate: gelu_pytorch_tanh(gate) * up */
    ffn_case("geglu_tanh", 1);
    ffn_case("geglu_tanh", 0);
}

/* identity: two linear maps in a row (sentence-transformers' Dense pairs,
 * EmbeddingGemma's), on pooled rows as on tokens. */
static void test_ffn_identity(void)
{
    ffn_case("identity", 0);
    ffn_case("identity", 1);
}

static void test_ffn_default_is_exact_gelu(void)
{
    /* the same weights with and without `activation = gelu` give the same result */
    float in_w[FFN_F * FFN_D], out_w[FFN_D * FFN_F], in_b[FFN_F], out_b[FFN_D];
    fill(in_w, FFN_F * FFN_D, -0.9, 0.9);
    fill(out_w, FFN_D * FFN_F, -0.3, 0.3);
    fill(in_b, FFN_F, -0.5, 0.5);
    fill(out_b, FFN_D, -0.5, 0.5);
    double want[N_TOKENS * FFN_D];
    test_batch b;
    batch_make(&b, lengths, N_SEQ, FFN_D);
    fill(b.x, N_TOKENS * FFN_D, -2, 2);
    for (int t = 0; t < N_TOKENS; t++) {
        double x[FFN_D], hidden[FFN_F];
        for (int j = 0; j < FFN_D; j++)
            x[j] = b.x[t * FFN_D + j];
        reference_linear(hidden, x, in_w, in_b, FFN_D, FFN_F);
        for (int k = 0; k < FFN_F; k++)
            hidden[k] = reference_activation("gelu", hidden[k]);
        reference_linear(want + t * FFN_D, hidden, out_w, out_b, FFN_F, FFN_D);
    }
    harness h;
    harness_open(&h, FFN_D, 0, 512);
    harness_add(&h, "in_weight", 2, (int64_t[]){FFN_F, FFN_D}, in_w);
    harness_add(&h, "out_weight", 2, (int64_t[]){FFN_D, FFN_F}, out_w);
    harness_add(&h, "in_bias", 1, (int64_t[]){FFN_F}, in_b);
    harness_add(&h, "out_bias", 1, (int64_t[]){FFN_D}, out_b);
    CU_ASSERT_EQUAL_FATAL(harness_create(&h, "ffn", ""), TFENC_OK);
    CU_ASSERT_EQUAL(harness_forward(&h, &b.batch), TFENC_OK);
    assert_close(b.x, want, N_TOKENS * FFN_D, "ffn defaults");
    batch_free(&b);
    harness_close(&h);
}

static void test_ffn_weight_errors(void)
{
    float data[FFN_F * FFN_D * 2] = {0};
    harness h;

    /* gate weights under an ungated activation */
    harness_open(&h, FFN_D, 0, 512);
    harness_add(&h, "in_weight", 2, (int64_t[]){FFN_F, FFN_D}, data);
    harness_add(&h, "gate_weight", 2, (int64_t[]){FFN_F, FFN_D}, data);
    harness_add(&h, "out_weight", 2, (int64_t[]){FFN_D, FFN_F}, data);
    CU_ASSERT_EQUAL(harness_create(&h, "ffn", "activation = silu\nbias = false\n"),
                    TFENC_ERR_CONFIG);
    CU_ASSERT(message_has(&h, "gate_weight"));
    harness_close(&h);

    /* a gated activation without gate weights */
    harness_open(&h, FFN_D, 0, 512);
    harness_add(&h, "in_weight", 2, (int64_t[]){FFN_F, FFN_D}, data);
    harness_add(&h, "out_weight", 2, (int64_t[]){FFN_D, FFN_F}, data);
    CU_ASSERT_EQUAL(harness_create(&h, "ffn", "activation = swiglu\nbias = false\n"),
                    TFENC_ERR_WEIGHTS);
    CU_ASSERT(message_has(&h, "gate_weight"));
    harness_close(&h);

    /* out_weight of the wrong width: [d, f + 1] */
    harness_open(&h, FFN_D, 0, 512);
    harness_add(&h, "in_weight", 2, (int64_t[]){FFN_F, FFN_D}, data);
    harness_add(&h, "out_weight", 2, (int64_t[]){FFN_D, FFN_F + 1}, data);
    CU_ASSERT_EQUAL(harness_create(&h, "ffn", "bias = false\n"), TFENC_ERR_WEIGHTS);
    CU_ASSERT(message_has(&h, "out_weight"));
    harness_close(&h);

    /* out_weight with the wrong number of rows: [d + 1, f] */
    harness_open(&h, FFN_D, 0, 512);
    harness_add(&h, "in_weight", 2, (int64_t[]){FFN_F, FFN_D}, data);
    harness_add(&h, "out_weight", 2, (int64_t[]){FFN_D + 1, FFN_F}, data);
    CU_ASSERT_EQUAL(harness_create(&h, "ffn", "bias = false\n"), TFENC_ERR_WEIGHTS);
    CU_ASSERT(message_has(&h, "out_weight"));
    harness_close(&h);

    /* an unknown activation name */
    harness_open(&h, FFN_D, 0, 512);
    CU_ASSERT_EQUAL(harness_create(&h, "ffn", "activation = tanh\n"), TFENC_ERR_CONFIG);
    CU_ASSERT(message_has(&h, "activation"));
    harness_close(&h);
}

/* ------------------------------------------------------------- norms */

enum { NORM_D = 16 };

static void norm_case_offset(const char *type, const char *keys, double eps, int bias,
                             double low, double high, double weight_offset)
{
    float weight[NORM_D], shift[NORM_D];
    fill(weight, NORM_D, 0.5, 1.5);
    fill(shift, NORM_D, -0.5, 0.5);
    harness h;
    harness_open(&h, NORM_D, 0, 512);
    harness_add(&h, "weight", 1, (int64_t[]){NORM_D}, weight);
    if (bias)
        harness_add(&h, "bias", 1, (int64_t[]){NORM_D}, shift);
    CU_ASSERT_EQUAL_FATAL(harness_create(&h, type, keys), TFENC_OK);

    test_batch b;
    batch_make(&b, lengths, N_SEQ, NORM_D);
    fill(b.x, N_TOKENS * NORM_D, low, high);
    double want[N_TOKENS * NORM_D];
    const int layernorm = strcmp(type, "layernorm") == 0;
    for (int t = 0; t < N_TOKENS; t++) {
        const float *x = b.x + t * NORM_D;
        double mean = 0.0, variance = 0.0;
        if (layernorm) {
            for (int j = 0; j < NORM_D; j++)
                mean += x[j];
            mean /= NORM_D;
        }
        for (int j = 0; j < NORM_D; j++)
            variance += (x[j] - mean) * (x[j] - mean);
        variance /= NORM_D; /* biased (layernorm), or mean of squares (rmsnorm) */
        for (int j = 0; j < NORM_D; j++)
            want[t * NORM_D + j] = (x[j] - mean) / sqrt(variance + eps) *
                                       (weight_offset + weight[j]) +
                                   (bias ? shift[j] : 0.0);
    }
    CU_ASSERT_EQUAL(harness_forward(&h, &b.batch), TFENC_OK);
    assert_close(b.x, want, N_TOKENS * NORM_D, keys);
    batch_free(&b);
    harness_close(&h);
}

static void norm_case(const char *type, const char *keys, double eps, int bias, double low,
                      double high)
{
    norm_case_offset(type, keys, eps, bias, low, high, 0.0);
}

static void test_layernorm(void)
{
    /* BERT's eps, with a mean far from 0 that a one-pass variance would spoil */
    norm_case("layernorm", "eps = 1e-12\n", 1e-12, 1, 9.0, 11.0);
    /* the default eps 1e-5 matters for inputs of variance ~3e-5 */
    norm_case("layernorm", "", 1e-5, 1, -0.01, 0.01);
    norm_case("layernorm", "bias = false\neps = 0.5\n", 0.5, 0, -1.0, 1.0);
}

static void test_layernorm_missing_bias(void)
{
    float weight[NORM_D] = {0};
    harness h;
    harness_open(&h, NORM_D, 0, 512);
    harness_add(&h, "weight", 1, (int64_t[]){NORM_D}, weight);
    CU_ASSERT_EQUAL(harness_create(&h, "layernorm", ""), TFENC_ERR_WEIGHTS);
    CU_ASSERT(message_has(&h, "bias"));
    harness_close(&h);
}

static void test_rmsnorm(void)
{
    /* the default eps 1e-6 matters for inputs of mean square ~3e-7 */
    norm_case("rmsnorm", "", 1e-6, 0, -0.001, 0.001);
    norm_case("rmsnorm", "eps = 0.25\n", 0.25, 0, -1.0, 1.0);
    norm_case("rmsnorm", "eps = 1e-5\n", 1e-5, 0, 2.0, 3.0);
    /* Gemma's norms scale by 1 + weight */
    norm_case_offset("rmsnorm", "weight_offset = 1\n", 1e-6, 0, -1.0, 1.0, 1.0);
}

/* ------------------------------------------------------------- pooling */

enum { POOL_D = 6 };

static void pooling_case(const char *mode, int normalize, const int *seq_lengths, int n_seq)
{
    harness h;
    harness_open(&h, POOL_D, 0, 512);
    char keys[128];
    snprintf(keys, sizeof keys, "mode = %s\nnormalize = %s\n", mode, normalize ? "on" : "off");
    CU_ASSERT_EQUAL_FATAL(harness_create(&h, "pooling", keys), TFENC_OK);
    test_batch b;
    batch_make(&b, seq_lengths, n_seq, POOL_D);
    const int n = b.batch.n_tokens;
    fill(b.x, (size_t)n * POOL_D, -1, 1);

    const int per_token = strcmp(mode, "none") == 0;
    const int out_rows = per_token ? n : n_seq;
    double *want = calloc((size_t)out_rows * POOL_D, sizeof *want);
    if (per_token) {
        for (int i = 0; i < n * POOL_D; i++)
            want[i] = b.x[i];
    } else {
        for (int s = 0; s < n_seq; s++) {
            const int start = b.seq_start[s], end = b.seq_start[s + 1];
            for (int j = 0; j < POOL_D; j++) {
                double v = 0.0; /* an empty sequence pools to zeros */
                if (end > start && strcmp(mode, "cls") == 0)
                    v = b.x[start * POOL_D + j];
                for (int t = start; t < end && strcmp(mode, "mean") == 0; t++)
                    v += b.x[t * POOL_D + j] / (double)(end - start);
                for (int t = start; t < end && strcmp(mode, "max") == 0; t++)
                    v = t == start ? b.x[t * POOL_D + j] : fmax(v, b.x[t * POOL_D + j]);
                want[s * POOL_D + j] = v;
            }
        }
    }
    if (normalize)
        for (int r = 0; r < out_rows; r++) {
            double norm = 0.0;
            for (int j = 0; j < POOL_D; j++)
                norm += want[r * POOL_D + j] * want[r * POOL_D + j];
            norm = fmax(sqrt(norm), 1e-12);
            for (int j = 0; j < POOL_D; j++)
                want[r * POOL_D + j] /= norm;
        }
    CU_ASSERT_EQUAL(harness_forward(&h, &b.batch), TFENC_OK);
    CU_ASSERT_EQUAL(b.batch.rows, out_rows);
    assert_close(b.x, want, (size_t)out_rows * POOL_D, keys);
    free(want);
    batch_free(&b);
    harness_close(&h);
}

static void test_pooling_modes(void)
{
    static const char *const modes[] = {"cls", "mean", "max", "none"};
    for (int m = 0; m < 4; m++)
        for (int normalize = 0; normalize <= 1; normalize++)
            pooling_case(modes[m], normalize, lengths, N_SEQ);
}

static void test_pooling_empty_sequences(void)
{
    /* Empty sequences first: pooled row s then lies on token rows that later
     * sequences still read, so pooling in place would corrupt them. */
    static const int with_empty[] = {0, 0, 3, 1, 0, 2};
    static const char *const modes[] = {"cls", "mean", "max"};
    for (int m = 0; m < 3; m++)
        for (int normalize = 0; normalize <= 1; normalize++)
            pooling_case(modes[m], normalize, with_empty, 6);
}

/* A batch that masks keys (seq_keys, a query's padding) pools each
 * sequence's keys only: bit for bit what the same rows give when the
 * sequences end at their last key, in every mode. */
static void test_pooling_masked_keys(void)
{
    static const int full[] = {5, 1, 4, 7}, keys[] = {3, 1, 4, 2};
    static const char *const modes[] = {"cls", "mean", "max", "mean_sqrt_len", "weightedmean",
                                        "lasttoken"};
    for (int m = 0; m < 6; m++) {
        test_batch masked, cut;
        batch_make(&masked, full, 4, POOL_D);
        batch_make(&cut, keys, 4, POOL_D);
        fill(masked.x, (size_t)masked.batch.n_tokens * POOL_D, -1, 1);
        for (int s = 0; s < 4; s++)
            memcpy(cut.x + (size_t)cut.seq_start[s] * POOL_D,
                   masked.x + (size_t)masked.seq_start[s] * POOL_D,
                   (size_t)keys[s] * POOL_D * sizeof(float));
        int32_t seq_keys[4];
        memcpy(seq_keys, keys, sizeof seq_keys);
        masked.batch.seq_keys = seq_keys;
        float pooled[2][4 * POOL_D];
        test_batch *batches[2] = {&masked, &cut};
        for (int k = 0; k < 2; k++) {
            harness h;
            harness_open(&h, POOL_D, 0, 512);
            char section[64];
            snprintf(section, sizeof section, "mode = %s\n", modes[m]);
            CU_ASSERT_EQUAL_FATAL(harness_create(&h, "pooling", section), TFENC_OK);
            CU_ASSERT_EQUAL(harness_forward(&h, &batches[k]->batch), TFENC_OK);
            CU_ASSERT_EQUAL(batches[k]->batch.rows, 4);
            memcpy(pooled[k], batches[k]->x, sizeof pooled[k]);
            harness_close(&h);
        }
        if (memcmp(pooled[0], pooled[1], sizeof pooled[0]) != 0)
            printf("\n    mode %s: masked keys pool other rows than the keys", modes[m]);
        CU_ASSERT(memcmp(pooled[0], pooled[1], sizeof pooled[0]) == 0);
        batch_free(&masked);
        batch_free(&cut);
    }
}

static void test_pooling_default_is_mean(void)
{
    harness h;
    harness_open(&h, POOL_D, 0, 512);
    CU_ASSERT_EQUAL_FATAL(harness_create(&h, "pooling", ""), TFENC_OK);
    test_batch b;
    batch_make(&b, lengths, N_SEQ, POOL_D);
    fill(b.x, N_TOKENS * POOL_D, -1, 1);
    double want[N_SEQ * POOL_D] = {0};
    for (int s = 0; s < N_SEQ; s++)
        for (int t = b.seq_start[s]; t < b.seq_start[s + 1]; t++)
            for (int j = 0; j < POOL_D; j++)
                want[s * POOL_D + j] += b.x[t * POOL_D + j] / lengths[s];
    CU_ASSERT_EQUAL(harness_forward(&h, &b.batch), TFENC_OK);
    CU_ASSERT_EQUAL(b.batch.rows, N_SEQ);
    assert_close(b.x, want, N_SEQ * POOL_D, "pooling defaults");
    batch_free(&b);
    harness_close(&h);
}

/* ---------------------------------------------------------------- main */

static int suite_init(void)
{
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    if (tfenc_plugin_registry_create(&ctx, NULL, NULL, &registry) != TFENC_OK)
        return 1;
    /* layers.so from the first directory of the host's search path that has it */
    for (int i = 0; i < tfenc_plugin_registry_n_directories(registry); i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/layers.so", tfenc_plugin_registry_directory(registry, i));
        FILE *file = fopen(path, "rb");
        if (file == NULL)
            continue;
        fclose(file);
        if (tfenc_plugin_registry_load_file(&ctx, registry, path) == TFENC_OK)
            return 0;
        fprintf(stderr, "%s\n", tfenc_context_message(&ctx));
        return 1;
    }
    fprintf(stderr, "layers.so not found along the plugin path (TFENC_PLUGIN_PATH=%s)\n",
            getenv("TFENC_PLUGIN_PATH") != NULL ? getenv("TFENC_PLUGIN_PATH") : "");
    return 1;
}

static int suite_clean(void)
{
    tfenc_plugin_registry_destroy(registry);
    return 0;
}

/* --------------------------------------------------------- bf16 backend */

/* Rounding to bfloat16 (the bf16 backend's inputs and weights), against the
 * definition: keep the top 16 bits, round to nearest, ties to even. */
static void test_round_bf16(void)
{
    const float in[] = {1.0f,
                        1.0f + 0x1p-8f,        /* tie between 1 and 1 + 2^-7: even is 1 */
                        1.0f + 3 * 0x1p-8f,    /* tie between 1 + 2^-7 and 1 + 2^-6: even up */
                        1.0f + 0x1p-8f + 0x1p-20f, /* just above the tie: up */
                        -2.5f, 0.0f, -0.0f, INFINITY, -INFINITY, NAN,
                        3.4028235e38f,         /* the largest float rounds to infinity */
                        1e-40f};               /* a subnormal keeps its top bits */
    const uint16_t want[] = {0x3f80, 0x3f80, 0x3f82, 0x3f81, 0xc020, 0x0000, 0x8000,
                             0x7f80, 0xff80, 0x0000 /* checked as NaN below */, 0x7f80,
                             0x0001};
    const size_t n = sizeof in / sizeof in[0];
    uint16_t got[sizeof in / sizeof in[0]];
    tfenc_matrix_to_bf16(in, got, n);
    for (size_t i = 0; i < n; i++) {
        int ok = isnan(in[i]) ? (got[i] & 0x7f80) == 0x7f80 && (got[i] & 0x007f) != 0
                              : got[i] == want[i];
        if (!ok)
            fprintf(stderr, "\n  bf16(%g) = 0x%04x, want 0x%04x\n", in[i], got[i], want[i]);
        CU_ASSERT(ok);
    }
}

/* Each precision of an FFN (GELU, and gated SwiGLU) against the fp32 layer
 * on the same weights and batch: the smallest cosine over tokens.
 *
 * bf16 rounds x, the weights and the hidden layer to 8 significant bits
 * (relative error <= 2^-9 each, about 2^-9 / sqrt(3) on average); the sums
 * stay fp32. Three roundings on the way give a relative error near
 * 3 * 2^-9 / sqrt(3) ~ 3.4e-3 per output, so 1 - cos ~ (3.4e-3)^2 / 2 ~ 6e-6:
 * the bf16 bar of 0.9999 holds with a margin of 15x, and a wrong layout
 * (transposed or shifted weights) gives cosines near 0.
 *
 * int8 rounds each weight row to 255 levels of its largest magnitude and
 * each token likewise: uniform values lose about 1 / (127 sqrt 12) ~ 2.3e-3
 * of their range, ~4e-3 of their RMS, per operand; two products and the
 * bf16 hidden layer give ~7e-3, 1 - cos ~ 2.5e-5. The job's default
 * min_cosine, 0.999, is the bar: 40x margin. */
static double ffn_precision_cosine(tfenc_precision precision, const char *activation)
{
    enum { D = 64, F = 256 };
    static const int seq_lengths[] = {1, 7, 33, 260}; /* 260: two chunks of rows and a tail */
    const int gated = strcmp(activation, "swiglu") == 0;
    float *in_w = malloc(sizeof(float) * F * D), *gate_w = malloc(sizeof(float) * F * D);
    float *out_w = malloc(sizeof(float) * D * F), in_b[F], gate_b[F], out_b[D];
    fill(in_w, (size_t)F * D, -0.2, 0.2);
    fill(gate_w, (size_t)F * D, -0.2, 0.2);
    fill(out_w, (size_t)D * F, -0.1, 0.1);
    fill(in_b, F, -0.5, 0.5);
    fill(gate_b, F, -0.5, 0.5);
    fill(out_b, D, -0.5, 0.5);
    test_batch reference, tested;
    batch_make(&reference, seq_lengths, 4, D);
    batch_make(&tested, seq_lengths, 4, D);
    fill(reference.x, (size_t)reference.batch.n_tokens * D, -2, 2);
    memcpy(tested.x, reference.x, sizeof(float) * reference.batch.n_tokens * D);
    char keys[128];
    snprintf(keys, sizeof keys, "activation = %s\n", activation);
    test_batch *batches[2] = {&reference, &tested};
    tfenc_precision precisions[2] = {TFENC_PRECISION_FP32, precision};
    for (int i = 0; i < 2; i++) {
        harness h;
        harness_open(&h, D, 0, 512);
        h.init.limits = (tfenc_limits){.max_tokens = 301, .max_seq_len = 260, .max_seqs = 4};
        h.precision = precisions[i];
        harness_add(&h, "in_weight", 2, (int64_t[]){F, D}, in_w);
        harness_add(&h, "in_bias", 1, (int64_t[]){F}, in_b);
        if (gated) {
            harness_add(&h, "gate_weight", 2, (int64_t[]){F, D}, gate_w);
            harness_add(&h, "gate_bias", 1, (int64_t[]){F}, gate_b);
        }
        harness_add(&h, "out_weight", 2, (int64_t[]){D, F}, out_w);
        harness_add(&h, "out_bias", 1, (int64_t[]){D}, out_b);
        CU_ASSERT_EQUAL_FATAL(harness_create(&h, "ffn", keys), TFENC_OK);
        CU_ASSERT_EQUAL(harness_forward(&h, &batches[i]->batch), TFENC_OK);
        harness_close(&h);
    }
    double lowest = 1.0;
    for (int t = 0; t < reference.batch.n_tokens; t++) {
        double dot = 0, a = 0, b = 0;
        for (int j = 0; j < D; j++) {
            double u = reference.x[t * D + j], v = tested.x[t * D + j];
            dot += u * v;
            a += u * u;
            b += v * v;
        }
        lowest = fmin(lowest, dot / sqrt(a * b));
    }
    batch_free(&reference);
    batch_free(&tested);
    free(in_w);
    free(gate_w);
    free(out_w);
    return lowest;
}

static void test_ffn_bf16_int8_against_fp32(void)
{
    /* Each precision the CPU runs (an AVX2-only CPU has int8 products but
     * no bf16 ones: precision_runs_here checks the fallback then). */
    const int bf16_runs = precision_runs_here(TFENC_PRECISION_BF16);
    const int int8_runs = precision_runs_here(TFENC_PRECISION_INT8);
    const char *activations[] = {"gelu", "swiglu"};
    for (int a = 0; a < 2; a++) {
        if (bf16_runs) {
            double bf16 = ffn_precision_cosine(TFENC_PRECISION_BF16, activations[a]);
            fprintf(stderr, "\n  ffn %s: min cosine to fp32: bf16 %.7f ", activations[a], bf16);
            CU_ASSERT(bf16 >= 0.9999);
            CU_ASSERT(bf16 < 1.0); /* it did run in bf16 */
        }
        if (int8_runs) {
            double int8 = ffn_precision_cosine(TFENC_PRECISION_INT8, activations[a]);
            fprintf(stderr, "\n  ffn %s: min cosine to fp32: int8 %.7f ", activations[a], int8);
            CU_ASSERT(int8 >= 0.999);
            CU_ASSERT(int8 < 1.0); /* it did run in int8 */
        }
    }
}

/* ------------------------------------------------------------------ moe */

enum { MOE_D = 8, MOE_F = 12, MOE_E = 4 };

typedef struct moe_weights {
    float router[MOE_E * MOE_D];
    float in_w[MOE_E][MOE_F * MOE_D], out_w[MOE_E][MOE_D * MOE_F];
    float bias[MOE_D];
} moe_weights;

static void moe_fill(moe_weights *m)
{
    fill(m->router, MOE_E * MOE_D, -1, 1);
    for (int e = 0; e < MOE_E; e++) {
        fill(m->in_w[e], MOE_F * MOE_D, -0.9, 0.9);
        fill(m->out_w[e], MOE_D * MOE_F, -0.3, 0.3);
    }
    fill(m->bias, MOE_D, -0.5, 0.5);
}

/* The weights of `experts` experts (at most MOE_E), expert `skip` without
 * its out_weight (-1: none skipped). */
static void moe_add(harness *h, const moe_weights *m, int experts, int skip)
{
    harness_add(h, "router_weight", 2, (int64_t[]){experts, MOE_D}, m->router);
    for (int e = 0; e < experts; e++) {
        char name[48];
        snprintf(name, sizeof name, "experts/%d/in_weight", e);
        harness_add(h, name, 2, (int64_t[]){MOE_F, MOE_D}, m->in_w[e]);
        snprintf(name, sizeof name, "experts/%d/out_weight", e);
        if (e != skip)
            harness_add(h, name, 2, (int64_t[]){MOE_D, MOE_F}, m->out_w[e]);
    }
    harness_add(h, "out_bias", 1, (int64_t[]){MOE_D}, m->bias);
}

/* Expert e of `m` on row x, in double, plus weight times it into y. */
static void moe_reference_expert(const moe_weights *m, int e, const double *x, double weight,
                                 double *y)
{
    double hidden[MOE_F], out[MOE_D];
    reference_linear(hidden, x, m->in_w[e], NULL, MOE_D, MOE_F);
    for (int k = 0; k < MOE_F; k++)
        hidden[k] = reference_activation("gelu", hidden[k]);
    reference_linear(out, hidden, m->out_w[e], NULL, MOE_F, MOE_D);
    for (int j = 0; j < MOE_D; j++)
        y[j] += weight * out[j];
}

/* megablocks' LearnedRouter in double on one row: softmax, the top k
 * (highest first, equal ones by ascending expert), normalized by the
 * q-norm when q > 0, into chosen[] and weights[]. */
static void moe_reference_route(const moe_weights *m, const double *x, int k, double q,
                                int *chosen, double *weights)
{
    double p[MOE_E], largest = -INFINITY, sum = 0.0;
    for (int e = 0; e < MOE_E; e++) {
        reference_linear(&p[e], x, m->router + e * MOE_D, NULL, MOE_D, 1);
        largest = fmax(largest, p[e]);
    }
    for (int e = 0; e < MOE_E; e++)
        sum += p[e] = exp(p[e] - largest);
    int taken[MOE_E] = {0};
    for (int r = 0; r < k; r++) {
        int best = -1;
        for (int e = 0; e < MOE_E; e++)
            if (!taken[e] && (best < 0 || p[e] > p[best]))
                best = e;
        taken[best] = 1;
        chosen[r] = best;
        weights[r] = p[best] / sum;
    }
    if (q > 0) {
        double norm = 0.0;
        for (int r = 0; r < k; r++)
            norm += pow(weights[r], q);
        for (int r = 0; r < k; r++)
            weights[r] /= pow(norm, 1.0 / q);
    }
}

/* The moe layer against the reference on a mixed batch, for top_k 1..E
 * with and without normalization; every expert's rows are compared. */
static void test_moe_against_reference(void)
{
    moe_weights m;
    moe_fill(&m);
    const double norms[] = {0.0, 1.0, 2.0};
    for (int k = 1; k <= MOE_E; k++)
        for (int n = 0; n < 3; n++) {
            harness h;
            harness_open(&h, MOE_D, 0, 512);
            moe_add(&h, &m, MOE_E, -1);
            char keys[128];
            snprintf(keys, sizeof keys, "experts = %d\ntop_k = %d\nnormalize = %g\n", MOE_E, k,
                     norms[n]);
            CU_ASSERT_EQUAL_FATAL(harness_create(&h, "moe", keys), TFENC_OK);
            CU_ASSERT_DOUBLE_EQUAL(h.descriptor->flops_per_token(h.instance, 10.0),
                                   2.0 * MOE_D * MOE_E + 4.0 * k * MOE_D * MOE_F, 0.5);
            test_batch b;
            batch_make(&b, lengths, N_SEQ, MOE_D);
            fill(b.x, N_TOKENS * MOE_D, -2, 2);
            double want[N_TOKENS * MOE_D] = {0};
            int used[MOE_E] = {0};
            for (int t = 0; t < N_TOKENS; t++) {
                double x[MOE_D], weights[MOE_E];
                int chosen[MOE_E];
                for (int j = 0; j < MOE_D; j++)
                    x[j] = b.x[t * MOE_D + j];
                moe_reference_route(&m, x, k, norms[n], chosen, weights);
                for (int r = 0; r < k; r++) {
                    moe_reference_expert(&m, chosen[r], x, weights[r], want + t * MOE_D);
                    used[chosen[r]] = 1;
                }
                for (int j = 0; j < MOE_D; j++)
                    want[t * MOE_D + j] += m.bias[j];
            }
            /* The random router spreads the 13 tokens over several experts. */
            CU_ASSERT(used[0] + used[1] + used[2] + used[3] >= (k < 2 ? 2 : 3));
            CU_ASSERT_EQUAL(harness_forward(&h, &b.batch), TFENC_OK);
            assert_close(b.x, want, N_TOKENS * MOE_D, keys);
            batch_free(&b);
            harness_close(&h);
        }
}

/* A router whose rows are all zero gives every expert probability 1/E:
 * the top k are experts 0 .. k-1, in that order, each once (with k = E,
 * all of them: none twice), and experts k .. E-1 get no tokens at all. */
static void test_moe_ties_and_idle_experts(void)
{
    moe_weights m;
    moe_fill(&m);
    memset(m.router, 0, sizeof m.router);
    for (int k = 1; k <= MOE_E; k++) {
        harness h;
        harness_open(&h, MOE_D, 0, 512);
        moe_add(&h, &m, MOE_E, -1);
        char keys[64];
        snprintf(keys, sizeof keys, "experts = %d\ntop_k = %d\n", MOE_E, k);
        CU_ASSERT_EQUAL_FATAL(harness_create(&h, "moe", keys), TFENC_OK);
        test_batch b;
        batch_make(&b, lengths, N_SEQ, MOE_D);
        fill(b.x, N_TOKENS * MOE_D, -2, 2);
        double want[N_TOKENS * MOE_D] = {0};
        for (int t = 0; t < N_TOKENS; t++) {
            double x[MOE_D];
            for (int j = 0; j < MOE_D; j++)
                x[j] = b.x[t * MOE_D + j];
            for (int e = 0; e < k; e++)
                moe_reference_expert(&m, e, x, 1.0 / MOE_E, want + t * MOE_D);
            for (int j = 0; j < MOE_D; j++)
                want[t * MOE_D + j] += m.bias[j];
        }
        CU_ASSERT_EQUAL(harness_forward(&h, &b.batch), TFENC_OK);
        assert_close(b.x, want, N_TOKENS * MOE_D, keys);
        batch_free(&b);
        harness_close(&h);
    }
}

/* A token's output is the same bits alone as among 300 others, whichever
 * of them share its experts (several of the host's row blocks each). */
static void test_moe_batch_invariance(void)
{
    moe_weights m;
    moe_fill(&m);
    const int many[] = {1, 150, 149};
    test_batch alone, crowd;
    batch_make(&alone, many, 1, MOE_D);
    batch_make(&crowd, many, 3, MOE_D);
    fill(crowd.x, 300 * MOE_D, -2, 2);
    memcpy(alone.x, crowd.x, sizeof(float) * MOE_D);
    test_batch *batches[2] = {&alone, &crowd};
    for (int i = 0; i < 2; i++) {
        harness h;
        harness_open(&h, MOE_D, 0, 512);
        h.init.limits = (tfenc_limits){.max_tokens = 300, .max_seq_len = 150, .max_seqs = 3};
        moe_add(&h, &m, MOE_E, -1);
        CU_ASSERT_EQUAL_FATAL(harness_create(&h, "moe", "experts = 4\n"), TFENC_OK);
        CU_ASSERT_EQUAL(harness_forward(&h, &batches[i]->batch), TFENC_OK);
        harness_close(&h);
    }
    CU_ASSERT(memcmp(alone.x, crowd.x, sizeof(float) * MOE_D) == 0);
    batch_free(&alone);
    batch_free(&crowd);
}

/* A NaN row (a non-finite input the host reports after the layer) still
 * routes to valid experts: its output is NaN and the other rows are the
 * bits they are without it. */
static void test_moe_nan_row(void)
{
    moe_weights m;
    moe_fill(&m);
    test_batch clean, poisoned;
    batch_make(&clean, lengths, N_SEQ, MOE_D);
    batch_make(&poisoned, lengths, N_SEQ, MOE_D);
    fill(clean.x, N_TOKENS * MOE_D, -2, 2);
    memcpy(poisoned.x, clean.x, sizeof(float) * N_TOKENS * MOE_D);
    for (int j = 0; j < MOE_D; j++)
        poisoned.x[5 * MOE_D + j] = NAN;
    test_batch *batches[2] = {&clean, &poisoned};
    for (int i = 0; i < 2; i++) {
        harness h;
        harness_open(&h, MOE_D, 0, 512);
        moe_add(&h, &m, MOE_E, -1);
        CU_ASSERT_EQUAL_FATAL(harness_create(&h, "moe", "experts = 4\n"), TFENC_OK);
        CU_ASSERT_EQUAL(harness_forward(&h, &batches[i]->batch), TFENC_OK);
        /* Its counters (what --dry-run prints): every token went to 2
         * experts, the NaN one too. */
        const tfenc_counters_extension *counters = h.descriptor->extension(TFENC_COUNTERS_URI);
        CU_ASSERT_PTR_NOT_NULL_FATAL(counters);
        const char *label;
        const long long *values;
        int n = 0;
        CU_ASSERT_EQUAL(counters->counters(h.instance, &label, &n, &values), TFENC_OK);
        CU_ASSERT_STRING_EQUAL(label, "tokens per expert");
        CU_ASSERT_EQUAL_FATAL(n, MOE_E);
        long long routed = 0;
        for (int e = 0; e < n; e++)
            routed += values[e];
        CU_ASSERT_EQUAL(routed, 2 * N_TOKENS);
        harness_close(&h);
    }
    CU_ASSERT(isnan(poisoned.x[5 * MOE_D]));
    CU_ASSERT(memcmp(clean.x, poisoned.x, sizeof(float) * 5 * MOE_D) == 0);
    CU_ASSERT(memcmp(clean.x + 6 * MOE_D, poisoned.x + 6 * MOE_D,
                     sizeof(float) * (N_TOKENS - 6) * MOE_D) == 0);
    batch_free(&clean);
    batch_free(&poisoned);
}

static void test_moe_errors(void)
{
    moe_weights m;
    moe_fill(&m);
    harness h;

    harness_open(&h, MOE_D, 0, 512);
    moe_add(&h, &m, MOE_E, -1);
    CU_ASSERT_EQUAL(harness_create(&h, "moe", "experts = 4\ntop_k = 5\n"), TFENC_ERR_CONFIG);
    CU_ASSERT(message_has(&h, "top_k = 5 exceeds experts = 4"));
    harness_close(&h);

    /* the weights of 3 experts under experts = 4 */
    harness_open(&h, MOE_D, 0, 512);
    moe_add(&h, &m, 3, -1);
    CU_ASSERT_EQUAL(harness_create(&h, "moe", "experts = 4\n"), TFENC_ERR_WEIGHTS);
    CU_ASSERT(message_has(&h, "router_weight has 3 rows (experts) but the job says experts = 4"));
    harness_close(&h);

    /* 4 experts' weights under experts = 3: the router's rows say so */
    harness_open(&h, MOE_D, 0, 512);
    moe_add(&h, &m, MOE_E, -1);
    CU_ASSERT_EQUAL(harness_create(&h, "moe", "experts = 3\n"), TFENC_ERR_WEIGHTS);
    CU_ASSERT(message_has(&h, "router_weight has 4 rows"));
    harness_close(&h);

    /* a router of 3 experts beside the maps of a fourth */
    harness_open(&h, MOE_D, 0, 512);
    moe_add(&h, &m, 3, -1);
    harness_add(&h, "experts/3/in_weight", 2, (int64_t[]){MOE_F, MOE_D}, m.in_w[3]);
    harness_add(&h, "experts/3/out_weight", 2, (int64_t[]){MOE_D, MOE_F}, m.out_w[3]);
    CU_ASSERT_EQUAL(harness_create(&h, "moe", "experts = 3\n"), TFENC_ERR_WEIGHTS);
    CU_ASSERT(message_has(&h, "experts/3/in_weight, more experts than experts = 3"));
    harness_close(&h);

    /* an expert without its second map */
    harness_open(&h, MOE_D, 0, 512);
    moe_add(&h, &m, MOE_E, 2);
    CU_ASSERT_EQUAL(harness_create(&h, "moe", "experts = 4\n"), TFENC_ERR_WEIGHTS);
    CU_ASSERT(message_has(&h, "experts/2/out_weight"));
    harness_close(&h);

    /* experts is required */
    harness_open(&h, MOE_D, 0, 512);
    moe_add(&h, &m, MOE_E, -1);
    CU_ASSERT_EQUAL(harness_create(&h, "moe", "top_k = 2\n"), TFENC_ERR_CONFIG);
    CU_ASSERT(message_has(&h, "experts"));
    harness_close(&h);
}

static const test_case layers_cases[] = {
    {"descriptors", test_descriptors},
    {"embedding plain", test_embedding_plain},
    {"embedding scaled by sqrt(d)", test_embedding_scaled},
    {"embedding BERT positions and types", test_embedding_bert},
    {"embedding RoBERTa position offset", test_embedding_roberta_offset},
    {"embedding out-of-range inputs", test_embedding_errors},
    {"embedding vocab_size mismatch", test_embedding_vocab_mismatch},
    {"embedding missing position table", test_embedding_missing_positions},
    {"sinusoidal against the tutorial formula", test_sinusoidal},
    {"sinusoidal beyond max positions", test_sinusoidal_too_long},
    {"ffn activations", test_ffn_activations},
    {"ffn activations over their range", test_ffn_activation_range},
    {"ffn without bias", test_ffn_no_bias},
    {"ffn gated swiglu geglu geglu_tanh", test_ffn_gated},
    {"ffn identity (Dense pairs)", test_ffn_identity},
    {"ffn in chunks of 512 rows", test_ffn_chunks},
    {"ffn default exact gelu", test_ffn_default_is_exact_gelu},
    {"ffn weight and key errors", test_ffn_weight_errors},
    {"layernorm", test_layernorm},
    {"layernorm missing bias", test_layernorm_missing_bias},
    {"rmsnorm", test_rmsnorm},
    {"pooling modes and normalize", test_pooling_modes},
    {"pooling empty sequences", test_pooling_empty_sequences},
    {"pooling default mean", test_pooling_default_is_mean},
    {"pooling keys only when the batch masks keys", test_pooling_masked_keys},
    {"bf16 rounding", test_round_bf16},
    {"ffn bf16 and int8 against fp32", test_ffn_bf16_int8_against_fp32},
    {"moe against the reference, top_k 1..E, normalized or not", test_moe_against_reference},
    {"moe ties in expert order, idle experts", test_moe_ties_and_idle_experts},
    {"moe rows independent of their batch", test_moe_batch_invariance},
    {"moe a NaN row harms no other", test_moe_nan_row},
    {"moe key and weight errors", test_moe_errors},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"layers", suite_init, suite_clean, layers_cases},
    {NULL, NULL, NULL, NULL}};
