/* Checks the mha plugin's head_dim (Q wider or narrower than d_model, as in
 * Qwen3 and Gemma3) and qk_norm (each head of Q and K divided by its root
 * mean square and scaled by qk_norm_weight_offset + weight, before RoPE)
 * against a naive double-precision attention written here, one sequence at
 * a time, with grouped-query heads, RoPE, windows and causal masks, in the
 * fused fp32 kernel and the host's bf16 products. */
#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/checks.h"
#include "harness/cunit_main.h"
#include "base/context.h"
#include "job/jobfile.h"
#include "job/params.h"
#include "matrix/matrix.h"
#include "model/weights.h"
#include "plugin/plugin_loader.h"

/* Relative to the largest output: float32 sums of O(100) O(1) products
 * leave ~1e-6 (test_attention.c argues the same bar); a wrong head width,
 * norm or offset errs by percents. bf16 rounds every product's inputs to 8
 * bits of mantissa: 2e-2. */
#define TOLERANCE_FP32 1e-5
#define TOLERANCE_BF16 2e-2

static tfenc_plugin_registry *registry;
static const tfenc_layer_descriptor *mha;

typedef struct heads_case {
    int d, heads, kv_heads, head_dim;
    int qk_norm;
    double weight_offset; /* qk_norm_weight_offset */
    int window, causal, rope;
    tfenc_precision precision;
    int omit_norms; /* qk_norm without its weights in the store */
} heads_case;

/* Weights in PyTorch layout: q [h e, d], k and v [kv e, d], out [d, h e],
 * the two norms [e]. */
typedef struct heads_weights {
    float *q, *k, *v, *out, *q_norm, *k_norm;
} heads_weights;

static unsigned long long random_state = 88172645463325252ULL;

static double uniform(double low, double high)
{
    random_state ^= random_state << 13;
    random_state ^= random_state >> 7;
    random_state ^= random_state << 17;
    return low + (high - low) * (double)(random_state >> 11) / 9007199254740992.0;
}

static float *filled(size_t count, double low, double high)
{
    float *values = malloc(sizeof(float) * (count + 1));
    for (size_t i = 0; i < count; i++)
        values[i] = (float)uniform(low, high);
    return values;
}

static void weights_make(heads_weights *w, const heads_case *c)
{
    const int q = c->heads * c->head_dim, k = c->kv_heads * c->head_dim;
    /* unit-variance projections of unit inputs; norm weights away from 0
     * and from -offset, so that a missing offset shows */
    const double in_amplitude = sqrt(3.0 / c->d), out_amplitude = sqrt(3.0 / q);
    w->q = filled((size_t)q * c->d, -in_amplitude, in_amplitude);
    w->k = filled((size_t)k * c->d, -in_amplitude, in_amplitude);
    w->v = filled((size_t)k * c->d, -in_amplitude, in_amplitude);
    w->out = filled((size_t)c->d * q, -out_amplitude, out_amplitude);
    w->q_norm = filled((size_t)c->head_dim, 0.3, 1.2);
    w->k_norm = filled((size_t)c->head_dim, 0.3, 1.2);
}

static void weights_free(heads_weights *w)
{
    free(w->q);
    free(w->k);
    free(w->v);
    free(w->out);
    free(w->q_norm);
    free(w->k_norm);
}

/* ------------------------------------------------------- the reference */

/* x / rms(x) * (offset + weight) over one head. */
static void reference_norm(double *head, const float *weight, double offset, int head_dim)
{
    double squares = 0.0;
    for (int e = 0; e < head_dim; e++)
        squares += head[e] * head[e];
    const double inverse = 1.0 / sqrt(squares / head_dim + 1e-6);
    for (int e = 0; e < head_dim; e++)
        head[e] = head[e] * inverse * (offset + weight[e]);
}

/* GPT-NeoX rotation: dim j pairs with j + e/2, base 10000. */
static void reference_rope(double *head, int head_dim, int position)
{
    const int half = head_dim / 2;
    for (int i = 0; i < half; i++) {
        const double angle = position * pow(10000.0, -2.0 * i / head_dim);
        const double a = head[i], b = head[i + half];
        head[i] = a * cos(angle) - b * sin(angle);
        head[i + half] = b * cos(angle) + a * sin(angle);
    }
}

static void project(double *y, const float *x, const float *weight, int rows, int in, int out)
{
    for (int t = 0; t < rows; t++)
        for (int o = 0; o < out; o++) {
            double sum = 0.0;
            for (int i = 0; i < in; i++)
                sum += (double)weight[(size_t)o * in + i] * x[(size_t)t * in + i];
            y[(size_t)t * out + o] = sum;
        }
}

/* One sequence of L tokens: x [L, d] -> y [L, d]. */
static void reference_sequence(const heads_case *c, const heads_weights *w, int L,
                               const float *x, double *y)
{
    const int e = c->head_dim, qw = c->heads * e, kw = c->kv_heads * e;
    double *q = malloc(sizeof(double) * L * qw), *k = malloc(sizeof(double) * L * kw);
    double *v = malloc(sizeof(double) * L * kw), *context = malloc(sizeof(double) * L * qw);
    double *scores = malloc(sizeof(double) * L);
    project(q, x, w->q, L, c->d, qw);
    project(k, x, w->k, L, c->d, kw);
    project(v, x, w->v, L, c->d, kw);
    for (int t = 0; t < L; t++) {
        for (int h = 0; h < c->heads; h++) {
            if (c->qk_norm)
                reference_norm(q + (size_t)t * qw + h * e, w->q_norm, c->weight_offset, e);
            if (c->rope)
                reference_rope(q + (size_t)t * qw + h * e, e, t);
        }
        for (int h = 0; h < c->kv_heads; h++) {
            if (c->qk_norm)
                reference_norm(k + (size_t)t * kw + h * e, w->k_norm, c->weight_offset, e);
            if (c->rope)
                reference_rope(k + (size_t)t * kw + h * e, e, t);
        }
    }
    const int group = c->heads / c->kv_heads;
    for (int h = 0; h < c->heads; h++) {
        const int kv = h / group;
        for (int i = 0; i < L; i++) {
            double maximum = -INFINITY;
            for (int j = 0; j < L; j++) {
                scores[j] = -INFINITY;
                if ((c->window > 0 && abs(i - j) > c->window) || (c->causal && j > i))
                    continue;
                double dot = 0.0;
                for (int f = 0; f < e; f++)
                    dot += q[(size_t)i * qw + h * e + f] * k[(size_t)j * kw + kv * e + f];
                scores[j] = dot / sqrt((double)e);
                maximum = fmax(maximum, scores[j]);
            }
            double total = 0.0;
            for (int j = 0; j < L; j++)
                total += exp(scores[j] - maximum);
            for (int f = 0; f < e; f++) {
                double sum = 0.0;
                for (int j = 0; j < L; j++)
                    sum += exp(scores[j] - maximum) / total * v[(size_t)j * kw + kv * e + f];
                context[(size_t)i * qw + h * e + f] = sum;
            }
        }
    }
    for (int t = 0; t < L; t++)
        for (int o = 0; o < c->d; o++) {
            double sum = 0.0;
            for (int i = 0; i < qw; i++)
                sum += (double)w->out[(size_t)o * qw + i] * context[(size_t)t * qw + i];
            y[(size_t)t * c->d + o] = sum;
        }
    free(q);
    free(k);
    free(v);
    free(context);
    free(scores);
}

/* ------------------------------------------------------------ the plugin */

static void store_add(tfenc_context *ctx, tfenc_weight_store *store, const char *name,
                      int rank, int64_t rows, int64_t columns, const float *data)
{
    char path[96];
    snprintf(path, sizeof path, "/attention/%s", name);
    int64_t dims[2] = {rows, columns};
    CU_ASSERT_EQUAL_FATAL(tfenc_weight_store_add(ctx, store, path, rank, dims, data), TFENC_OK);
}

/* Runs the plugin on sequences of `lengths` (x [tokens, d]) into y; returns
 * create's or forward's status (its message in `message`). */
static int plugin_run(const heads_case *c, const heads_weights *w, const int *lengths, int n_seq,
                      const float *x, float *y, char *message, size_t message_size)
{
    const int e = c->head_dim;
    char text[512];
    snprintf(text, sizeof text,
             "[attention]\nn_heads = %d\nn_kv_heads = %d\nhead_dim = %d\nbias = false\n"
             "qk_norm = %s\nqk_norm_weight_offset = %g\nwindow = %d\ncausal = %s\n%s",
             c->heads, c->kv_heads, e, c->qk_norm ? "true" : "false", c->weight_offset,
             c->window, c->causal ? "true" : "false", c->rope ? "position = rope\n" : "");
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_jobfile *job = NULL;
    tfenc_weight_store *store = NULL;
    CU_ASSERT_EQUAL_FATAL(tfenc_jobfile_parse_string(&ctx, "test.ini", text, &job), TFENC_OK);
    CU_ASSERT_EQUAL_FATAL(tfenc_weight_store_create_memory(&ctx, &store), TFENC_OK);
    store_add(&ctx, store, "q_weight", 2, c->heads * e, c->d, w->q);
    store_add(&ctx, store, "k_weight", 2, c->kv_heads * e, c->d, w->k);
    store_add(&ctx, store, "v_weight", 2, c->kv_heads * e, c->d, w->v);
    store_add(&ctx, store, "out_weight", 2, c->d, c->heads * e, w->out);
    if (c->qk_norm && !c->omit_norms) {
        store_add(&ctx, store, "q_norm_weight", 1, e, 0, w->q_norm);
        store_add(&ctx, store, "k_norm_weight", 1, e, 0, w->k_norm);
    }
    int tokens = 0, longest = 0;
    int32_t *seq_start = malloc(sizeof(int32_t) * (n_seq + 1));
    seq_start[0] = 0;
    for (int s = 0; s < n_seq; s++) {
        tokens += lengths[s];
        longest = lengths[s] > longest ? lengths[s] : longest;
        seq_start[s + 1] = tokens;
    }
    int32_t *positions = malloc(sizeof(int32_t) * tokens), *zeros = calloc(tokens, 4);
    for (int s = 0; s < n_seq; s++)
        for (int t = seq_start[s]; t < seq_start[s + 1]; t++)
            positions[t] = t - seq_start[s];
    tfenc_limits limits = {.max_tokens = tokens, .max_seq_len = longest, .max_seqs = n_seq};
    tfenc_weights *group = NULL;
    const tfenc_weight_options options = {.precision = c->precision};
    CU_ASSERT_EQUAL_FATAL(tfenc_weight_store_group(&ctx, store, "/attention", &options, &group),
                          TFENC_OK);
    tfenc_params params;
    tfenc_params_bind(&params, &ctx, job, tfenc_jobfile_find(job, "attention"));
    tfenc_layer_init init = {.struct_size = sizeof init, .name = "attention", .params = &params,
                             .weights = group,
                             .model = {.d_model = c->d, .max_positions = 512, .n_layers = 1,
                                       .layer_index = -1},
                             .limits = limits};
    void *layer = NULL;
    int status = mha->create(&ctx, &init, &layer);
    if (status == TFENC_OK) {
        size_t bytes = (mha->workspace_size(layer, &limits) + 63) / 64 * 64 + 64;
        float *workspace = aligned_alloc(64, bytes);
        for (size_t i = 0; i < bytes / sizeof(float); i++)
            workspace[i] = NAN; /* a read of what the plugin did not write shows */
        float *activations = aligned_alloc(64, ((sizeof(float) * tokens * c->d + 63) / 64 + 1) * 64);
        memcpy(activations, x, sizeof(float) * tokens * c->d);
        tfenc_batch batch = {.n_seq = n_seq, .n_tokens = tokens, .seq_start = seq_start,
                             .token_ids = zeros, .token_types = zeros, .positions = positions,
                             .x = activations, .rows = tokens, .d_model = c->d};
        status = mha->forward(layer, &ctx, &batch, workspace);
        memcpy(y, activations, sizeof(float) * tokens * c->d);
        free(activations);
        free(workspace);
        mha->destroy(layer);
    }
    snprintf(message, message_size, "%s", tfenc_context_message(&ctx));
    free(seq_start);
    free(positions);
    free(zeros);
    tfenc_weight_store_close(store);
    tfenc_jobfile_destroy(job);
    return status;
}

/* The largest |plugin - reference| over the largest |reference|, on
 * sequences of 1, 9 and 70 tokens (70 spans two query blocks of 64). */
static double check_case(const char *label, const heads_case *c)
{
    static const int lengths[] = {1, 9, 70};
    const int n_seq = 3, tokens = 80;
    heads_weights w;
    weights_make(&w, c);
    float *x = filled((size_t)tokens * c->d, -1.7, 1.7);
    float *y = malloc(sizeof(float) * tokens * c->d);
    double *want = malloc(sizeof(double) * tokens * c->d);
    char message[512];
    double worst = INFINITY;
    int status = plugin_run(c, &w, lengths, n_seq, x, y, message, sizeof message);
    if (status == TFENC_OK) {
        double largest = 0.0;
        worst = 0.0;
        for (int s = 0, offset = 0; s < n_seq; offset += lengths[s++]) {
            reference_sequence(c, &w, lengths[s], x + (size_t)offset * c->d,
                               want + (size_t)offset * c->d);
        }
        for (int i = 0; i < tokens * c->d; i++) {
            double error = fabs(want[i] - y[i]);
            worst = isnan(error) || error > worst ? error : worst;
            largest = fmax(largest, fabs(want[i]));
        }
        worst /= fmax(largest, 1e-30);
    } else {
        printf("\n    %s: %s", label, message);
    }
    printf("\n    %-52s relative error %.2e", label, worst);
    free(x);
    free(y);
    free(want);
    weights_free(&w);
    return worst;
}

/* ------------------------------------------------------------- the tests */

/* Q twice as wide as the model (Qwen3-Embedding-0.6B: 16 x 128 on 1024),
 * half as wide, and as wide, with and without grouped-query heads. */
static void test_head_dim(void)
{
    heads_case wide = {.d = 32, .heads = 4, .kv_heads = 2, .head_dim = 16, .rope = 1};
    CU_ASSERT(check_case("d 32, 4 x 16 (Q 64), 2 kv heads, rope", &wide) <= TOLERANCE_FP32);
    heads_case narrow = {.d = 48, .heads = 2, .kv_heads = 2, .head_dim = 8, .causal = 1};
    CU_ASSERT(check_case("d 48, 2 x 8 (Q 16), causal", &narrow) <= TOLERANCE_FP32);
    heads_case gemma = {.d = 24, .heads = 3, .kv_heads = 1, .head_dim = 8, .window = 5,
                        .rope = 1};
    CU_ASSERT(check_case("d 24, 3 x 8 on 1 kv head, window 5", &gemma) <= TOLERANCE_FP32);
}

/* qk_norm as Qwen3 (offset 0) and Gemma3 (offset 1) apply it. */
static void test_qk_norm(void)
{
    heads_case qwen3 = {.d = 32, .heads = 4, .kv_heads = 2, .head_dim = 16, .qk_norm = 1,
                        .rope = 1, .causal = 1};
    CU_ASSERT(check_case("qk_norm, Q 64 on d 32, causal, rope", &qwen3) <= TOLERANCE_FP32);
    heads_case gemma3 = {.d = 32, .heads = 4, .kv_heads = 2, .head_dim = 16, .qk_norm = 1,
                         .weight_offset = 1.0, .rope = 1, .window = 7};
    CU_ASSERT(check_case("qk_norm offset 1, window 7, rope", &gemma3) <= TOLERANCE_FP32);
}

/* The host's bf16 products read Q, K and V at the head_dim strides too. */
static void test_bf16(void)
{
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    if (!precision_runs_here(TFENC_PRECISION_BF16))
        return;
    heads_case qwen3 = {.d = 32, .heads = 4, .kv_heads = 2, .head_dim = 16, .qk_norm = 1,
                        .rope = 1, .causal = 1, .precision = TFENC_PRECISION_BF16};
    CU_ASSERT(check_case("bf16 qk_norm, Q 64 on d 32, causal", &qwen3) <= TOLERANCE_BF16);
    heads_case gemma3 = {.d = 32, .heads = 4, .kv_heads = 2, .head_dim = 16, .qk_norm = 1,
                         .weight_offset = 1.0, .rope = 1, .window = 7,
                         .precision = TFENC_PRECISION_BF16};
    CU_ASSERT(check_case("bf16 qk_norm offset 1, window 7", &gemma3) <= TOLERANCE_BF16);
}

/* qk_norm without its weights: create fails naming the dataset. */
static void test_errors(void)
{
    heads_case c = {.d = 32, .heads = 4, .kv_heads = 2, .head_dim = 16, .qk_norm = 1,
                    .omit_norms = 1};
    heads_weights w;
    weights_make(&w, &c);
    float x[32] = {0}, y[32];
    char message[512];
    const int one = 1;
    int status = plugin_run(&c, &w, &one, 1, x, y, message, sizeof message);
    CU_ASSERT_NOT_EQUAL(status, TFENC_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(message, "q_norm_weight"));
    printf("\n    missing norms: %s", message);
    weights_free(&w);
}

static const tfenc_layer_descriptor *load_plugin(void)
{
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    if (tfenc_plugin_registry_create(&ctx, NULL, NULL, &registry) != TFENC_OK ||
        tfenc_plugin_registry_scan(&ctx, registry) != TFENC_OK) {
        fprintf(stderr, "plugin registry: %s\n", tfenc_context_message(&ctx));
        return NULL;
    }
    const tfenc_plugin_layer *layer = tfenc_plugin_registry_find(registry, "mha");
    if (layer == NULL) {
        tfenc_plugin_registry_missing(&ctx, registry, "mha", "test_attention_heads");
        fprintf(stderr, "%s\n", tfenc_context_message(&ctx));
        return NULL;
    }
    return layer->descriptor;
}

static int suite_init(void)
{
    mha = load_plugin();
    return mha == NULL;
}

static int suite_clean(void)
{
    tfenc_plugin_registry_destroy(registry);
    return 0;
}

static const test_case heads_cases[] = {
    {"head_dim apart from d_model / n_heads", test_head_dim},
    {"qk_norm with offsets 0 and 1", test_qk_norm},
    {"bf16 with head_dim and qk_norm", test_bf16},
    {"qk_norm weights checked", test_errors},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"attention heads", suite_init, suite_clean, heads_cases},
    {NULL, NULL, NULL, NULL}};
