/* Checks the mha plugin against a naive double-precision attention written
 * here from the textbook formulas, one sequence at a time, full L x L. */
#include "config.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <stddef.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/checks.h"
#include "harness/cunit_main.h"
#include "base/context.h"
#include "job/jobfile.h"
#include "matrix/matrix.h"
#include "job/params.h"
#include "plugin/plugin_loader.h"
#include "model/weights.h"
#include "tfenc/plugin_math.h"
#include "attention_kernel.h" /* plugins/: the fused kernel, linked in directly */

#ifdef HAVE_ONEDNN
#include <dlfcn.h>
#include <dnnl.h>

/* The largest sizes of the batched (3-D) products oneDNN has run since
 * the last reset: attention's, which are made of [batch, rows, columns]
 * operands (the linear maps' are 2-D). libtfenc calls oneDNN through its
 * exported name; this definition comes first and hands the call on, as
 * tests/test_batch_invariance.c does for the maps. This test is not linked
 * with oneDNN itself (libtfenc is): its functions are looked up. */
static int batched_largest[3]; /* rows of A, columns of A, columns of C */

dnnl_status_t dnnl_primitive_execute(const_dnnl_primitive_t primitive, dnnl_stream_t stream,
                                     int nargs, const dnnl_exec_arg_t *args)
{
    static dnnl_status_t (*real)(const_dnnl_primitive_t, dnnl_stream_t, int,
                                 const dnnl_exec_arg_t *);
    static dnnl_status_t (*describe)(const_dnnl_memory_t, const dnnl_memory_desc_t **);
#pragma omp critical(batched_products)
    {
        if (real == NULL) {
            *(void **)&real = dlsym(RTLD_NEXT, "dnnl_primitive_execute");
            *(void **)&describe = dlsym(RTLD_DEFAULT, "dnnl_memory_get_memory_desc");
        }
        for (int i = 0; i < nargs; i++) {
            const dnnl_memory_desc_t *desc = NULL;
            if ((args[i].arg != DNNL_ARG_SRC && args[i].arg != DNNL_ARG_DST) ||
                describe(args[i].memory, &desc) != dnnl_success ||
                desc->ndims != 3)
                continue;
            const int columns = args[i].arg == DNNL_ARG_SRC ? 1 : 2;
            if (args[i].arg == DNNL_ARG_SRC && desc->dims[1] > batched_largest[0])
                batched_largest[0] = (int)desc->dims[1];
            if (desc->dims[2] > batched_largest[columns])
                batched_largest[columns] = (int)desc->dims[2];
        }
    }
    return real(primitive, stream, nargs, args);
}
#endif

/* Tolerance, relative to the largest output magnitude: each output is a float32
 * sum of at most ~100 products of O(1) values (projections over d <= 32, softmax
 * over L <= 69 keys), so rounding stays near sqrt(100) * 6e-8 = 6e-7 of the
 * output scale; 1e-5 leaves a margin while any wrong index or formula errs by
 * far more (percent level). */
#define TOLERANCE 1e-5

static tfenc_plugin_registry *registry;
static const tfenc_layer_descriptor *mha;

/* ------------------------------------------------------------ test setup */

/* Deterministic uniform values in [-1, 1): a 64-bit LCG, so runs repeat. */
static double next_uniform(unsigned long long *state)
{
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(*state >> 11) / (double)(1ULL << 53) * 2.0 - 1.0;
}

static void fill_uniform(float *values, size_t count, double amplitude, unsigned long long *state)
{
    for (size_t i = 0; i < count; i++)
        values[i] = (float)(amplitude * next_uniform(state));
}

enum { POSITION_NONE, POSITION_ROPE, POSITION_ALIBI, POSITION_BUCKETS, POSITION_DISENTANGLED };

/* relative_buckets as MPNet configures it (the plugin's defaults). */
#define NUM_BUCKETS 32
#define MAX_DISTANCE 128
/* disentangled (DeBERTa) scaled down: distances up to 4 exact, log buckets
 * up to 20, clamped beyond, all within the 69-token sequence. */
#define POSITION_BUCKETS_DEBERTA 8
#define MAX_RELATIVE_POSITIONS 20

typedef struct attention_case {
    int d;
    int heads;
    int bias;
    int fused;               /* store qkv_weight/qkv_bias instead of q/k/v */
    const char *qkv_key;     /* value of `qkv =`, NULL leaves it out (auto) */
    int position;
    int rope_interleaved;
    int rope_dims;           /* 0: key left out (head_dim) */
    double rope_theta;       /* 0: key left out (10000) */
    double rope_ntk_factor;  /* > 0: rope_scaling = ntk with this rope_factor */
    double rope_mixed_b;     /* > 0: and this rope_mixed_b */
    double scale;            /* 0: key left out (1/sqrt(head_dim)) */
    const char *extra;       /* more job lines, or NULL */
    const char *omit_weight; /* a dataset left out of the store, or NULL */
    tfenc_precision precision; /* of the projections and products; fp32 by default */
    int window;              /* > 0: `window =` key, keys |i - j| <= window only */
    int causal;              /* `causal = true` */
    const char *relative_terms; /* disentangled: "c2p" or "p2c" alone, NULL: both */
    int masked_tail;         /* > 0: each sequence's last masked_tail tokens are queries, not
                              * keys (tfenc_batch.seq_keys); its first token stays a key */
} attention_case;

/* The keys of a sequence of L tokens in case c: the first case_keys(). */
static int case_keys(const attention_case *c, int L)
{
    if (c->masked_tail <= 0)
        return L;
    return L - c->masked_tail > 1 ? L - c->masked_tail : 1;
}

/* Weights in PyTorch layout: qkv [3d, d] (Q rows, K rows, V rows), out [d, d]. */
typedef struct attention_weights {
    int d;
    float *qkv_weight, *qkv_bias, *out_weight, *out_bias;
    float *relative_bias; /* [NUM_BUCKETS, 64]: relative_attention_bias for up to 64 heads */
    float *relative_embeddings; /* [2 POSITION_BUCKETS_DEBERTA, d] (disentangled) */
    float *relative_norm;       /* [2, d]: the LayerNorm's weight, then its bias */
} attention_weights;

static void weights_make(attention_weights *w, int d, unsigned long long seed)
{
    unsigned long long state = seed;
    w->d = d;
    w->qkv_weight = malloc(sizeof(float) * 3 * d * d);
    w->qkv_bias = malloc(sizeof(float) * 3 * d);
    w->out_weight = malloc(sizeof(float) * d * d);
    w->out_bias = malloc(sizeof(float) * d);
    /* Amplitude sqrt(3/d) gives unit-variance projections of unit inputs:
     * scores and outputs stay O(1), as in a trained layer. */
    double amplitude = sqrt(3.0 / d);
    fill_uniform(w->qkv_weight, (size_t)3 * d * d, amplitude, &state);
    fill_uniform(w->qkv_bias, (size_t)3 * d, 0.5, &state);
    fill_uniform(w->out_weight, (size_t)d * d, amplitude, &state);
    fill_uniform(w->out_bias, (size_t)d, 0.5, &state);
    /* Biases of order 1, as trained MPNet's are: a wrong bucket changes
     * the softmax by percents. */
    w->relative_bias = malloc(sizeof(float) * NUM_BUCKETS * 64);
    fill_uniform(w->relative_bias, (size_t)NUM_BUCKETS * 64, 1.5, &state);
    w->relative_embeddings = malloc(sizeof(float) * 2 * POSITION_BUCKETS_DEBERTA * d);
    fill_uniform(w->relative_embeddings, (size_t)2 * POSITION_BUCKETS_DEBERTA * d, 1.7, &state);
    w->relative_norm = malloc(sizeof(float) * 2 * d);
    fill_uniform(w->relative_norm, (size_t)2 * d, 0.3, &state);
    for (int e = 0; e < d; e++)
        w->relative_norm[e] += 1.0f;
}

static void weights_free(attention_weights *w)
{
    free(w->qkv_weight);
    free(w->qkv_bias);
    free(w->out_weight);
    free(w->out_bias);
    free(w->relative_bias);
    free(w->relative_embeddings);
    free(w->relative_norm);
}

static void store_add(tfenc_context *ctx, tfenc_weight_store *store, const attention_case *c,
                      const char *name, int rank, int64_t rows, int64_t columns, const float *data)
{
    if (c->omit_weight != NULL && strcmp(c->omit_weight, name) == 0)
        return;
    char path[128];
    snprintf(path, sizeof path, "/attention/%s", name);
    int64_t dims[2] = {rows, columns};
    CU_ASSERT_EQUAL_FATAL(tfenc_weight_store_add(ctx, store, path, rank, dims, data), TFENC_OK);
}

static void store_fill(tfenc_context *ctx, tfenc_weight_store *store, const attention_case *c,
                       const attention_weights *w)
{
    int d = w->d;
    if (c->fused) {
        store_add(ctx, store, c, "qkv_weight", 2, 3 * d, d, w->qkv_weight);
        if (c->bias)
            store_add(ctx, store, c, "qkv_bias", 1, 3 * d, 0, w->qkv_bias);
    } else {
        static const char *const weight_names[] = {"q_weight", "k_weight", "v_weight"};
        static const char *const bias_names[] = {"q_bias", "k_bias", "v_bias"};
        for (int part = 0; part < 3; part++) {
            store_add(ctx, store, c, weight_names[part], 2, d, d,
                      w->qkv_weight + (size_t)part * d * d);
            if (c->bias)
                store_add(ctx, store, c, bias_names[part], 1, d, 0, w->qkv_bias + (size_t)part * d);
        }
    }
    store_add(ctx, store, c, "out_weight", 2, d, d, w->out_weight);
    if (c->bias)
        store_add(ctx, store, c, "out_bias", 1, d, 0, w->out_bias);
    if (c->position == POSITION_BUCKETS) {
        /* [NUM_BUCKETS, heads], taken from the [NUM_BUCKETS, 64] table */
        float *table = malloc(sizeof(float) * NUM_BUCKETS * c->heads);
        for (int b = 0; b < NUM_BUCKETS; b++)
            for (int h = 0; h < c->heads; h++)
                table[b * c->heads + h] = w->relative_bias[b * 64 + h];
        store_add(ctx, store, c, "relative_attention_bias", 2, NUM_BUCKETS, c->heads, table);
        free(table);
    }
    if (c->position == POSITION_DISENTANGLED) {
        store_add(ctx, store, c, "relative_embeddings", 2, 2 * POSITION_BUCKETS_DEBERTA, d,
                  w->relative_embeddings);
        store_add(ctx, store, c, "relative_norm_weight", 1, d, 0, w->relative_norm);
        store_add(ctx, store, c, "relative_norm_bias", 1, d, 0, w->relative_norm + d);
    }
}

static void job_text(const attention_case *c, char *text, size_t size)
{
    int used = snprintf(text, size, "[attention]\nn_heads = %d\nbias = %s\n", c->heads,
                        c->bias ? "true" : "false");
    if (c->qkv_key != NULL)
        used += snprintf(text + used, size - used, "qkv = %s\n", c->qkv_key);
    if (c->position == POSITION_ROPE)
        used += snprintf(text + used, size - used, "position = rope\nrope_style = %s\n",
                         c->rope_interleaved ? "interleaved" : "half");
    if (c->position == POSITION_ALIBI)
        used += snprintf(text + used, size - used, "position = alibi\n");
    if (c->position == POSITION_BUCKETS)
        used += snprintf(text + used, size - used,
                         "position = relative_buckets\nnum_buckets = %d\nmax_distance = %d\n",
                         NUM_BUCKETS, MAX_DISTANCE);
    if (c->position == POSITION_DISENTANGLED)
        used += snprintf(text + used, size - used,
                         "position = disentangled\nposition_buckets = %d\n"
                         "max_relative_positions = %d\n",
                         POSITION_BUCKETS_DEBERTA, MAX_RELATIVE_POSITIONS);
    if (c->relative_terms != NULL)
        used += snprintf(text + used, size - used, "relative_terms = %s\n", c->relative_terms);
    if (c->window > 0)
        used += snprintf(text + used, size - used, "window = %d\n", c->window);
    if (c->causal)
        used += snprintf(text + used, size - used, "causal = true\n");
    if (c->rope_dims != 0)
        used += snprintf(text + used, size - used, "rope_dims = %d\n", c->rope_dims);
    if (c->rope_theta != 0)
        used += snprintf(text + used, size - used, "rope_theta = %.17g\n", c->rope_theta);
    if (c->rope_ntk_factor > 0)
        used += snprintf(text + used, size - used, "rope_scaling = ntk\nrope_factor = %.17g\n",
                         c->rope_ntk_factor);
    if (c->rope_mixed_b > 0)
        used += snprintf(text + used, size - used, "rope_mixed_b = %.17g\n", c->rope_mixed_b);
    if (c->scale != 0)
        used += snprintf(text + used, size - used, "scale = %.17g\n", c->scale);
    if (c->extra != NULL)
        snprintf(text + used, size - used, "%s\n", c->extra);
}

/* A packed batch of sequences of the given lengths, with its own buffers. */
typedef struct packed_batch {
    tfenc_batch batch;
    int32_t *seq_start, *positions, *zeros;
    int longest;
} packed_batch;

static void packed_make(packed_batch *p, const int *lengths, int n_seq, int d, const float *x)
{
    p->seq_start = malloc(sizeof(int32_t) * (n_seq + 1));
    p->seq_start[0] = 0;
    p->longest = 0;
    for (int s = 0; s < n_seq; s++) {
        p->seq_start[s + 1] = p->seq_start[s] + lengths[s];
        if (lengths[s] > p->longest)
            p->longest = lengths[s];
    }
    int tokens = p->seq_start[n_seq];
    p->positions = malloc(sizeof(int32_t) * (tokens + 1));
    p->zeros = calloc((size_t)tokens + 1, sizeof(int32_t));
    for (int s = 0; s < n_seq; s++)
        for (int t = p->seq_start[s]; t < p->seq_start[s + 1]; t++)
            p->positions[t] = t - p->seq_start[s];
    size_t bytes = ((sizeof(float) * tokens * d + 63) / 64 + 1) * 64;
    float *activations = aligned_alloc(64, bytes);
    memcpy(activations, x, sizeof(float) * tokens * d);
    p->batch = (tfenc_batch){.n_seq = n_seq, .n_tokens = tokens, .seq_start = p->seq_start,
                             .token_ids = p->zeros, .token_types = p->zeros,
                             .positions = p->positions, .x = activations, .rows = tokens,
                             .d_model = d};
}

static void packed_free(packed_batch *p)
{
    free(p->seq_start);
    free(p->positions);
    free(p->zeros);
    free(p->batch.x);
}

static const tfenc_layer_descriptor *mha_descriptor(void)
{
    return mha;
}

/* An instance of the plugin built as the host would, or its create status. */
typedef struct instance {
    tfenc_context ctx;
    tfenc_jobfile *job;
    tfenc_weight_store *store;
    tfenc_params params;
    void *layer;
    int status;
} instance;

static void instance_create(instance *in, const attention_case *c, const attention_weights *w,
                            tfenc_limits limits)
{
    char text[1024];
    job_text(c, text, sizeof text);
    memset(in, 0, sizeof *in);
    tfenc_context_init(&in->ctx);
    CU_ASSERT_EQUAL_FATAL(tfenc_jobfile_parse_string(&in->ctx, "test.ini", text, &in->job),
                          TFENC_OK);
    CU_ASSERT_EQUAL_FATAL(tfenc_weight_store_create_memory(&in->ctx, &in->store), TFENC_OK);
    store_fill(&in->ctx, in->store, c, w);
    tfenc_weights *group = NULL;
    const tfenc_weight_options options = {.precision = c->precision};
    CU_ASSERT_EQUAL_FATAL(
        tfenc_weight_store_group(&in->ctx, in->store, "/attention", &options, &group), TFENC_OK);
    tfenc_params_bind(&in->params, &in->ctx, in->job, tfenc_jobfile_find(in->job, "attention"));
    tfenc_layer_init init = {.struct_size = sizeof init, .name = "attention",
                             .params = &in->params, .weights = group,
                             .model = {.d_model = w->d, .max_positions = 512, .n_layers = 1,
                                       .layer_index = -1},
                             .limits = limits};
    const tfenc_layer_descriptor *descriptor = mha_descriptor();
    CU_ASSERT_PTR_NOT_NULL_FATAL(descriptor);
    in->status = descriptor->create(&in->ctx, &init, &in->layer);
    if (in->status != TFENC_OK)
        in->layer = NULL;
}

static void instance_destroy(instance *in)
{
    if (in->layer != NULL)
        mha_descriptor()->destroy(in->layer);
    if (in->store != NULL)
        tfenc_weight_store_close(in->store);
    if (in->job != NULL)
        tfenc_jobfile_destroy(in->job);
}

/* Runs the plugin on a packed batch; y receives [tokens, d]. */
static int plugin_run(const attention_case *c, const attention_weights *w, const int *lengths,
                      int n_seq, const float *x, float *y)
{
    packed_batch p;
    packed_make(&p, lengths, n_seq, w->d, x);
    int32_t *keys = malloc(sizeof(int32_t) * (size_t)n_seq);
    for (int s = 0; s < n_seq; s++)
        keys[s] = case_keys(c, lengths[s]);
    if (c->masked_tail > 0)
        p.batch.seq_keys = keys;
    tfenc_limits limits = {.max_tokens = p.batch.n_tokens, .max_seq_len = p.longest,
                           .max_seqs = n_seq};
    instance in;
    instance_create(&in, c, w, limits);
    int status = in.status;
    if (status != TFENC_OK)
        fprintf(stderr, "create failed: %s\n", tfenc_context_message(&in.ctx));
    CU_ASSERT_EQUAL(status, TFENC_OK);
    if (status == TFENC_OK) {
        const tfenc_layer_descriptor *descriptor = mha_descriptor();
        size_t bytes = descriptor->workspace_size(in.layer, &limits);
        bytes = (bytes + 63) / 64 * 64 + 64;
        float *workspace = aligned_alloc(64, bytes);
        /* NaN everywhere: a read of workspace the plugin did not write shows up. */
        for (size_t i = 0; i < bytes / sizeof(float); i++)
            workspace[i] = NAN;
        status = descriptor->forward(in.layer, &in.ctx, &p.batch, workspace);
        if (status != TFENC_OK)
            fprintf(stderr, "forward failed: %s\n", tfenc_context_message(&in.ctx));
        CU_ASSERT_EQUAL(status, TFENC_OK);
        memcpy(y, p.batch.x, sizeof(float) * p.batch.n_tokens * w->d);
        free(workspace);
    }
    instance_destroy(&in);
    packed_free(&p);
    free(keys);
    return status;
}

/* ------------------------------------------------------- the reference */

/* ALiBi slopes exactly as the paper's reference code (get_slopes) states them,
 * recursion included. */
static void reference_slopes(int n, double *slopes)
{
    double log2n = log2((double)n);
    if (log2n == floor(log2n)) {
        double start = pow(2.0, -pow(2.0, -(log2n - 3.0)));
        for (int i = 0; i < n; i++)
            slopes[i] = start * pow(start, i);
        return;
    }
    int closest = 1 << (int)floor(log2n);
    reference_slopes(closest, slopes);
    double *doubled = malloc(sizeof(double) * 2 * closest);
    reference_slopes(2 * closest, doubled);
    for (int i = 0; i < n - closest; i++)
        slopes[closest + i] = doubled[2 * i];
    free(doubled);
}

/* Rate i of `dims` rotated features, step by step as the GTE v1.5 / mGTE
 * code (Alibaba-NLP new-impl, NTKScalingRotaryEmbedding) computes it under
 * NTK scaling: the fixed form's base times the factor, then (6) of its
 * source divides by factor^(2/dims); the mixed form's (13), (12) and (10). */
static double reference_rope_rate(const attention_case *c, int i, int dims)
{
    double theta = c->rope_theta != 0 ? c->rope_theta : 10000.0;
    double factor = c->rope_ntk_factor;
    if (factor <= 0)
        return 1.0 / pow(theta, 2.0 * i / dims);
    if (c->rope_mixed_b <= 0)
        return 1.0 / pow(theta * factor, 2.0 * i / dims) / pow(factor, 2.0 / dims);
    double a = log(factor) / pow(dims / 2.0, c->rope_mixed_b);
    double lambda = exp(a * pow(i + 1, c->rope_mixed_b));
    return 1.0 / pow(theta, 2.0 * i / dims) / lambda;
}

/* Hugging Face's formulation: x * cos + rotate(x) * sin, with cos and sin
 * broadcast over the rotated dims, written independently of the plugin. */
static void reference_rope(const attention_case *c, double *head, int head_dim, int position)
{
    int dims = c->rope_dims != 0 ? c->rope_dims : head_dim;
    double rotated[64], cosine[64], sine[64];
    for (int j = 0; j < dims; j++) {
        /* frequency index: j mod dims/2 (half: cat(freqs, freqs)); j/2 (interleaved) */
        int i = c->rope_interleaved ? j / 2 : j % (dims / 2);
        double angle = position * reference_rope_rate(c, i, dims);
        cosine[j] = cos(angle);
        sine[j] = sin(angle);
        if (c->rope_interleaved)
            rotated[j] = j % 2 == 0 ? -head[j + 1] : head[j - 1];
        else
            rotated[j] = j < dims / 2 ? -head[j + dims / 2] : head[j - dims / 2];
    }
    for (int j = 0; j < dims; j++)
        head[j] = head[j] * cosine[j] + rotated[j] * sine[j];
}

/* The bucket of key j for query i as transformers' MPNet
 * relative_position_bucket states it (bidirectional, T5's rule), with its
 * float32 logarithm: n = i - j; keys after the query (n < 0) take the upper
 * half; |n| below a quarter of the buckets is exact, longer distances are
 * log-spaced up to MAX_DISTANCE. */
static int reference_bucket(int i, int j)
{
    int n = i - j, half = NUM_BUCKETS / 2, max_exact = half / 2;
    int bucket = n < 0 ? half : 0;
    n = n < 0 ? -n : n;
    if (n < max_exact)
        return bucket + n;
    float ratio = (float)n / (float)max_exact;
    float large = logf(ratio) / (float)log((double)MAX_DISTANCE / max_exact)
                  * (float)(half - max_exact);
    int value = max_exact + (int)large;
    return bucket + (value < half - 1 ? value : half - 1);
}

/* The row of DeBERTa's relative embeddings for query i and key j as
 * transformers states it: make_log_bucket_position(i - j) (torch.where's
 * three steps, its float32 logarithms) plus the span, clamped to the
 * 2 x span rows. */
static int reference_relative_row(int i, int j)
{
    const int relative = i - j, mid = POSITION_BUCKETS_DEBERTA / 2;
    const int sign = (relative > 0) - (relative < 0);
    const int abs_pos = relative < mid && relative > -mid ? mid - 1 : abs(relative);
    const float log_pos =
        ceilf(logf((float)abs_pos / (float)mid) /
              logf((float)((MAX_RELATIVE_POSITIONS - 1) / (double)mid)) * (float)(mid - 1)) +
        (float)mid;
    int bucket = abs_pos <= mid ? relative : (int)log_pos * sign;
    int row = bucket + POSITION_BUCKETS_DEBERTA;
    return row < 0 ? 0 : row > 2 * POSITION_BUCKETS_DEBERTA - 1 ? 2 * POSITION_BUCKETS_DEBERTA - 1
                                                                 : row;
}

/* k_rel (part 1, the K map) or q_rel (part 0) [2 span, d]: DeBERTa's
 * relative embeddings through their LayerNorm and the layer's map, in double. */
static double *reference_relative(const attention_case *c, const attention_weights *w, int part)
{
    const int d = w->d, rows = 2 * POSITION_BUCKETS_DEBERTA;
    double *normalised = malloc(sizeof(double) * rows * d);
    double *mapped = malloc(sizeof(double) * rows * d);
    for (int b = 0; b < rows; b++) {
        const float *row = w->relative_embeddings + (size_t)b * d;
        double mean = 0.0, variance = 0.0;
        for (int e = 0; e < d; e++)
            mean += row[e] / (double)d;
        for (int e = 0; e < d; e++)
            variance += (row[e] - mean) * (row[e] - mean) / d;
        for (int e = 0; e < d; e++)
            normalised[(size_t)b * d + e] = (row[e] - mean) / sqrt(variance + 1e-7) *
                                                w->relative_norm[e] + w->relative_norm[d + e];
    }
    for (int b = 0; b < rows; b++)
        for (int o = 0; o < d; o++) {
            double sum = c->bias ? w->qkv_bias[part * d + o] : 0.0;
            for (int e = 0; e < d; e++)
                sum += (double)w->qkv_weight[((size_t)part * d + o) * d + e] *
                       normalised[(size_t)b * d + e];
            mapped[(size_t)b * d + o] = sum;
        }
    free(normalised);
    return mapped;
}

/* 1 if the reference computes query row i of L: every row of short
 * sequences, and of long ones (where the full L x L reference would take
 * minutes) both ends and every step-th row, which covers window edges,
 * tile boundaries and the middle alike. */
static int reference_row(int i, int L)
{
    int step = L > 256 ? L / 64 + 1 : 1;
    return i < 3 || i >= L - 3 || i % step == 0;
}

/* One sequence of L tokens, x and y [L, d], everything in double; only the
 * rows reference_row() names are computed (the others stay 0). */
static void reference_sequence(const attention_case *c, const attention_weights *w, int L,
                               const float *x, double *y)
{
    int d = w->d, heads = c->heads, head_dim = d / heads;
    double *q = calloc((size_t)L * d, sizeof(double));
    double *k = calloc((size_t)L * d, sizeof(double));
    double *v = calloc((size_t)L * d, sizeof(double));
    double *context = calloc((size_t)L * d, sizeof(double));
    double *scores = calloc((size_t)L, sizeof(double));
    double *projections[3] = {q, k, v};
    for (int part = 0; part < 3; part++)
        for (int t = 0; t < L; t++)
            for (int o = 0; o < d; o++) {
                double sum = c->bias ? w->qkv_bias[part * d + o] : 0.0;
                for (int i = 0; i < d; i++)
                    sum += (double)w->qkv_weight[((size_t)part * d + o) * d + i] *
                           x[(size_t)t * d + i];
                projections[part][(size_t)t * d + o] = sum;
            }
    double slopes[64];
    if (c->position == POSITION_ALIBI)
        reference_slopes(heads, slopes);
    double scale = c->scale != 0 ? c->scale : 1.0 / sqrt((double)head_dim);
    /* DeBERTa: scores (q_i . k_j + q_i . k_rel + k_j . q_rel) / sqrt(3 head_dim), or
     * over sqrt(2 head_dim) with one of the terms */
    double *key_relative = NULL, *query_relative = NULL;
    if (c->position == POSITION_DISENTANGLED) {
        key_relative = reference_relative(c, w, 1);
        query_relative = reference_relative(c, w, 0);
        scale = c->scale != 0 ? c->scale
                              : 1.0 / sqrt((c->relative_terms == NULL ? 3.0 : 2.0) * head_dim);
    }
    for (int h = 0; h < heads; h++) {
        if (c->position == POSITION_ROPE)
            for (int t = 0; t < L; t++) {
                reference_rope(c, q + (size_t)t * d + h * head_dim, head_dim, t);
                reference_rope(c, k + (size_t)t * d + h * head_dim, head_dim, t);
            }
        for (int i = 0; i < L; i++) {
            if (!reference_row(i, L))
                continue;
            /* -inf for the keys query i must not see: the softmax gives them 0 */
            for (int j = 0; j < L; j++) {
                if ((c->window > 0 && abs(i - j) > c->window) || (c->causal && j > i) ||
                    j >= case_keys(c, L)) {
                    scores[j] = -INFINITY;
                    continue;
                }
                double dot = 0.0;
                for (int e = 0; e < head_dim; e++)
                    dot += q[(size_t)i * d + h * head_dim + e] * k[(size_t)j * d + h * head_dim + e];
                if (c->position == POSITION_DISENTANGLED) {
                    const int row = reference_relative_row(i, j);
                    const int c2p = c->relative_terms == NULL ||
                                    strcmp(c->relative_terms, "c2p") == 0;
                    const int p2c = c->relative_terms == NULL ||
                                    strcmp(c->relative_terms, "p2c") == 0;
                    for (int e = 0; e < head_dim; e++)
                        dot += c2p * q[(size_t)i * d + h * head_dim + e] *
                                   key_relative[(size_t)row * d + h * head_dim + e] +
                               p2c * k[(size_t)j * d + h * head_dim + e] *
                                   query_relative[(size_t)row * d + h * head_dim + e];
                }
                scores[j] = dot * scale;
                if (c->position == POSITION_ALIBI)
                    scores[j] -= slopes[h] * fabs((double)(i - j));
                if (c->position == POSITION_BUCKETS)
                    scores[j] += w->relative_bias[reference_bucket(i, j) * 64 + h];
            }
            /* The row maximum cancels in the softmax; subtracting it keeps exp()
             * finite for the large-scale case. */
            double maximum = -INFINITY;
            for (int j = 0; j < L; j++)
                maximum = fmax(maximum, scores[j]);
            double total = 0.0;
            for (int j = 0; j < L; j++)
                total += exp(scores[j] - maximum);
            /* A query whose window lies past every key sees none: the
             * plugin's context is zero there (attention_kernel.h). */
            if (maximum == -INFINITY) {
                for (int e = 0; e < head_dim; e++)
                    context[(size_t)i * d + h * head_dim + e] = 0.0;
                continue;
            }
            for (int e = 0; e < head_dim; e++) {
                double sum = 0.0;
                for (int j = 0; j < L; j++)
                    sum += exp(scores[j] - maximum) / total * v[(size_t)j * d + h * head_dim + e];
                context[(size_t)i * d + h * head_dim + e] = sum;
            }
        }
    }
    for (int t = 0; t < L; t++)
        for (int o = 0; o < d; o++) {
            double sum = c->bias ? w->out_bias[o] : 0.0;
            for (int i = 0; i < d; i++)
                sum += (double)w->out_weight[(size_t)o * d + i] * context[(size_t)t * d + i];
            y[(size_t)t * d + o] = reference_row(t, L) ? sum : 0.0;
        }
    free(q);
    free(k);
    free(v);
    free(context);
    free(scores);
    free(key_relative);
    free(query_relative);
}

/* The larger error, where NaN counts as the worst of all: fmax() would drop
 * it and let a NaN output pass. */
static double worse(double worst, double error)
{
    return isnan(error) || error > worst ? error : worst;
}

/* The float64 reference of a packed batch: each sequence's rows in turn. */
static double *reference_batch(const attention_case *c, const attention_weights *w,
                               const int *lengths, int n_seq, const float *x)
{
    size_t tokens = 0;
    for (int s = 0; s < n_seq; s++)
        tokens += (size_t)lengths[s];
    double *reference = malloc(sizeof(double) * tokens * w->d);
    size_t offset = 0;
    for (int s = 0; s < n_seq; s++) {
        reference_sequence(c, w, lengths[s], x + offset, reference + offset);
        offset += (size_t)lengths[s] * w->d;
    }
    return reference;
}

/* max |y - reference| / max |reference| over the rows the reference
 * computes; with `rms` not NULL also the root mean square of y - reference
 * over that of the reference: unlike the largest error, it does not grow
 * with the number of rows compared, and an error that moves every row (a
 * key too many in each window) raises it as much as the largest. */
static double error_to_reference(const double *reference, const int *lengths, int n_seq, int d,
                                 const float *y, double *rms)
{
    double worst = 0.0, largest = 0.0, squares = 0.0, size = 0.0;
    size_t offset = 0;
    for (int s = 0; s < n_seq; s++) {
        for (int i = 0; i < lengths[s] * d; i++) {
            if (!reference_row(i / d, lengths[s]))
                continue;
            const double difference = reference[offset + i] - y[offset + i];
            worst = worse(worst, fabs(difference));
            largest = fmax(largest, fabs(reference[offset + i]));
            squares += difference * difference;
            size += reference[offset + i] * reference[offset + i];
        }
        offset += (size_t)lengths[s] * d;
    }
    if (rms != NULL)
        *rms = isnan(squares) ? INFINITY : sqrt(squares / fmax(size, 1e-300));
    return worst / fmax(largest, 1e-30);
}

static double relative_error(const attention_case *c, const attention_weights *w,
                             const int *lengths, int n_seq, const float *x, const float *y)
{
    double *reference = reference_batch(c, w, lengths, n_seq, x);
    const double error = error_to_reference(reference, lengths, n_seq, w->d, y, NULL);
    free(reference);
    return error;
}

/* The smallest cosine between the rows of y and z ([tokens, d]); two
 * zero rows count as equal. */
static double lowest_cosine(const float *y, const float *z, int tokens, int d)
{
    double lowest = 1.0;
    for (int t = 0; t < tokens; t++) {
        double dot = 0, a = 0, b = 0;
        for (int j = 0; j < d; j++) {
            dot += (double)y[(size_t)t * d + j] * z[(size_t)t * d + j];
            a += (double)y[(size_t)t * d + j] * y[(size_t)t * d + j];
            b += (double)z[(size_t)t * d + j] * z[(size_t)t * d + j];
        }
        lowest = fmin(lowest, a == 0 && b == 0 ? 1.0 : dot / sqrt(a * b));
    }
    return lowest;
}

/* Runs the case on the standard mixed batch {1, 3, 7, 69} (69 spans two query
 * tiles of 64) and returns the relative error, printing it for the log. */
static const int mixed_lengths[] = {1, 3, 7, 69};
#define MIXED_SEQS 4
#define MIXED_TOKENS 80

static double check_case(const char *label, const attention_case *c, float *y_out)
{
    attention_weights w;
    weights_make(&w, c->d, 1234 + c->d);
    unsigned long long state = 99;
    float *x = malloc(sizeof(float) * MIXED_TOKENS * c->d);
    fill_uniform(x, (size_t)MIXED_TOKENS * c->d, 1.7, &state);
    float *y = malloc(sizeof(float) * MIXED_TOKENS * c->d);
    double error = INFINITY;
    if (plugin_run(c, &w, mixed_lengths, MIXED_SEQS, x, y) == TFENC_OK)
        error = relative_error(c, &w, mixed_lengths, MIXED_SEQS, x, y);
    printf("\n    %-44s relative error %.2e", label, error);
    if (y_out != NULL)
        memcpy(y_out, y, sizeof(float) * MIXED_TOKENS * c->d);
    free(x);
    free(y);
    weights_free(&w);
    return error;
}

/* ------------------------------------------------------------- the tests */

static void test_plain(void)
{
    attention_case c = {.d = 32, .heads = 4, .bias = 1};
    CU_ASSERT(check_case("d=32 h=4 bias separate", &c, NULL) <= TOLERANCE);
    attention_case c2 = {.d = 16, .heads = 2, .bias = 0};
    CU_ASSERT(check_case("d=16 h=2 no bias separate", &c2, NULL) <= TOLERANCE);
    attention_case c3 = {.d = 16, .heads = 4, .bias = 1, .scale = 0.3};
    CU_ASSERT(check_case("d=16 h=4 scale=0.3", &c3, NULL) <= TOLERANCE);
    attention_case c4 = {.d = 32, .heads = 1, .bias = 1, .qkv_key = "separate"};
    CU_ASSERT(check_case("d=32 h=1 qkv=separate", &c4, NULL) <= TOLERANCE);
    /* Scores in the hundreds: expf() of them overflows float unless the
     * softmax subtracts the row maximum first. */
    attention_case large = {.d = 16, .heads = 2, .bias = 1, .scale = 12.0};
    CU_ASSERT(check_case("d=16 h=2 scale=12 (softmax overflow)", &large, NULL) <= TOLERANCE);
}

static void test_fused_equals_separate(void)
{
    float separate[MIXED_TOKENS * 32], fused[MIXED_TOKENS * 32], automatic[MIXED_TOKENS * 32];
    attention_case c = {.d = 32, .heads = 4, .bias = 1};
    CU_ASSERT(check_case("separate (auto)", &c, separate) <= TOLERANCE);
    attention_case f = {.d = 32, .heads = 4, .bias = 1, .fused = 1, .qkv_key = "fused"};
    CU_ASSERT(check_case("fused (qkv=fused)", &f, fused) <= TOLERANCE);
    attention_case a = {.d = 32, .heads = 4, .bias = 1, .fused = 1};
    CU_ASSERT(check_case("fused (auto)", &a, automatic) <= TOLERANCE);
    /* Same numbers stacked the same way: the outputs must agree closely; report
     * whether they agree bit for bit (they do when the host stacks the parts). */
    double worst = 0.0;
    for (int i = 0; i < MIXED_TOKENS * 32; i++)
        worst = worse(worst, fabs((double)separate[i] - fused[i]));
    printf("\n    fused vs separate: max abs difference %.2e (%s)", worst,
           memcmp(separate, fused, sizeof fused) == 0 ? "bitwise equal" : "not bitwise");
    CU_ASSERT(worst <= TOLERANCE);
    CU_ASSERT(memcmp(fused, automatic, sizeof fused) == 0);
    attention_case fb = {.d = 16, .heads = 2, .bias = 0, .fused = 1};
    CU_ASSERT(check_case("fused no bias d=16 h=2", &fb, NULL) <= TOLERANCE);
}

static void test_rope(void)
{
    attention_case half = {.d = 32, .heads = 4, .bias = 1, .position = POSITION_ROPE};
    CU_ASSERT(check_case("rope half", &half, NULL) <= TOLERANCE);
    attention_case interleaved = {.d = 32, .heads = 4, .bias = 1, .position = POSITION_ROPE,
                                  .rope_interleaved = 1};
    CU_ASSERT(check_case("rope interleaved", &interleaved, NULL) <= TOLERANCE);
    attention_case partial = {.d = 32, .heads = 2, .bias = 0, .position = POSITION_ROPE,
                              .rope_dims = 6, .rope_theta = 500.0};
    CU_ASSERT(check_case("rope half rope_dims=6/16 theta=500", &partial, NULL) <= TOLERANCE);
    attention_case partial_gptj = {.d = 16, .heads = 2, .bias = 1, .position = POSITION_ROPE,
                                   .rope_interleaved = 1, .rope_dims = 4, .fused = 1};
    CU_ASSERT(check_case("rope interleaved rope_dims=4/8 fused", &partial_gptj, NULL) <= TOLERANCE);
}

/* GTE v1.5's and mGTE's NTK scaling (rope_scaling = ntk), fixed and mixed,
 * on gte-base-en-v1.5's base with a factor that turns the first pair of a
 * 16-wide head 8% slower: a wrong rate moves the scores of the later tokens
 * by whole radians. */
static void test_rope_ntk(void)
{
    attention_case fixed = {.d = 32, .heads = 2, .bias = 1, .position = POSITION_ROPE,
                            .rope_theta = 500000.0, .rope_ntk_factor = 2.0, .fused = 1};
    CU_ASSERT(check_case("rope ntk factor 2 theta 500000", &fixed, NULL) <= TOLERANCE);
    attention_case mixed = {.d = 32, .heads = 2, .bias = 1, .position = POSITION_ROPE,
                            .rope_theta = 1000.0, .rope_ntk_factor = 8.0, .rope_mixed_b = 0.75};
    CU_ASSERT(check_case("rope ntk mixed b 0.75 factor 8", &mixed, NULL) <= TOLERANCE);
    /* factor 1 is plain RoPE in both forms */
    attention_case unit = {.d = 32, .heads = 4, .bias = 1, .position = POSITION_ROPE,
                           .rope_ntk_factor = 1.0, .rope_interleaved = 1, .rope_dims = 6};
    CU_ASSERT(check_case("rope ntk factor 1 interleaved rope_dims=6/8", &unit, NULL) <= TOLERANCE);
}

static void test_alibi(void)
{
    /* The reference slopes themselves, against the paper's closed forms:
     * 4 heads 2^-2, 2^-4, 2^-6, 2^-8; 6 heads adds 8 heads' 1st and 3rd, 2^-1, 2^-3. */
    double slopes[6];
    reference_slopes(6, slopes);
    const double expected[6] = {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};
    for (int i = 0; i < 6; i++)
        CU_ASSERT_DOUBLE_EQUAL(slopes[i], expected[i], 1e-15);

    attention_case three = {.d = 24, .heads = 3, .bias = 1, .position = POSITION_ALIBI};
    CU_ASSERT(check_case("alibi 3 heads d=24", &three, NULL) <= TOLERANCE);
    attention_case four = {.d = 16, .heads = 4, .bias = 1, .position = POSITION_ALIBI};
    CU_ASSERT(check_case("alibi 4 heads d=16", &four, NULL) <= TOLERANCE);
    attention_case six = {.d = 24, .heads = 6, .bias = 0, .position = POSITION_ALIBI};
    CU_ASSERT(check_case("alibi 6 heads d=24", &six, NULL) <= TOLERANCE);
}

/* DeBERTa's disentangled terms (c2p and p2c over log buckets, clamped past
 * max_relative_positions, through the layer's own Q and K maps, separate
 * or fused) on the mixed batch, whose 69-token sequence reaches the clamp
 * and spans two query blocks. */
static void test_disentangled(void)
{
    /* The reference rows: exact up to mid = 4, then log-spaced, clamped at 15. */
    CU_ASSERT_EQUAL(reference_relative_row(0, 0), 8);
    CU_ASSERT_EQUAL(reference_relative_row(4, 0), 12);
    CU_ASSERT_EQUAL(reference_relative_row(0, 4), 4);
    CU_ASSERT_EQUAL(reference_relative_row(60, 0), 15);
    CU_ASSERT_EQUAL(reference_relative_row(0, 60), 0);
    attention_case separate = {.d = 32, .heads = 4, .bias = 1,
                               .position = POSITION_DISENTANGLED};
    CU_ASSERT(check_case("disentangled d=32 h=4", &separate, NULL) <= TOLERANCE);
    attention_case fused = {.d = 16, .heads = 2, .bias = 0, .fused = 1,
                            .position = POSITION_DISENTANGLED};
    CU_ASSERT(check_case("disentangled d=16 h=2 fused, no bias", &fused, NULL) <= TOLERANCE);
    /* each term alone: the other's tables and steps are left out */
    attention_case content = {.d = 32, .heads = 4, .bias = 1, .position = POSITION_DISENTANGLED,
                              .relative_terms = "c2p"};
    CU_ASSERT(check_case("disentangled c2p alone", &content, NULL) <= TOLERANCE);
    attention_case position = {.d = 32, .heads = 4, .bias = 1,
                               .position = POSITION_DISENTANGLED, .relative_terms = "p2c"};
    CU_ASSERT(check_case("disentangled p2c alone", &position, NULL) <= TOLERANCE);
}

/* Each sequence of a packed batch against the reference and against the
 * same sequence run alone: its output must not depend on its neighbours
 * (RoPE positions and ALiBi distances count from its own start). */
static void check_packed(const char *label, const int *lengths, int n_seq)
{
    int tokens = 0;
    for (int s = 0; s < n_seq; s++)
        tokens += lengths[s];
    attention_case cases[] = {
        {.d = 32, .heads = 4, .bias = 1, .position = POSITION_ROPE},
        {.d = 24, .heads = 6, .bias = 1, .position = POSITION_ALIBI, .fused = 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const attention_case *c = &cases[k];
        const int d = c->d;
        attention_weights w;
        weights_make(&w, d, 77);
        unsigned long long state = 5;
        float *x = malloc(sizeof(float) * tokens * d);
        float *packed = malloc(sizeof(float) * tokens * d);
        fill_uniform(x, (size_t)tokens * d, 1.0, &state);
        double error = INFINITY;
        if (plugin_run(c, &w, lengths, n_seq, x, packed) == TFENC_OK)
            error = relative_error(c, &w, lengths, n_seq, x, packed);
        int bitwise = 1;
        double worst = 0.0;
        size_t offset = 0;
        for (int s = 0; s < n_seq; s++) {
            float *alone = malloc(sizeof(float) * lengths[s] * d);
            CU_ASSERT_EQUAL(plugin_run(c, &w, &lengths[s], 1, x + offset, alone), TFENC_OK);
            for (int i = 0; i < lengths[s] * d; i++)
                worst = worse(worst, fabs((double)alone[i] - packed[offset + i]));
            if (memcmp(alone, packed + offset, sizeof(float) * lengths[s] * d) != 0)
                bitwise = 0;
            offset += (size_t)lengths[s] * d;
            free(alone);
        }
        printf("\n    %s, %d tokens (%s): relative error %.2e; alone vs packed: max abs "
               "difference %.2e (%s)",
               label, tokens, c->position == POSITION_ROPE ? "rope" : "alibi", error, worst,
               bitwise ? "bitwise equal" : "not bitwise");
        CU_ASSERT(error <= TOLERANCE);
        CU_ASSERT(worst <= TOLERANCE);
        free(x);
        free(packed);
        weights_free(&w);
    }
}

static void test_packing_invariance(void)
{
    check_packed("mixed batch", mixed_lengths, MIXED_SEQS);
}

/* A batch larger than a group (512 tokens at 1 or 2 threads) runs in
 * several groups of whole sequences, each through the maps and the scores
 * before the next. Two threads at most, so that the groups stay 512 tokens
 * on any machine. */
static void test_groups(void)
{
    static const int lengths[] = {100, 7, 100, 1, 90, 100, 64, 100, 33, 100, 17};
    const int threads = omp_get_max_threads();
    omp_set_num_threads(threads < 2 ? threads : 2);
    check_packed("several groups", lengths, (int)(sizeof lengths / sizeof *lengths));
    omp_set_num_threads(threads);
}

/* One sequence of each of the lengths, alone in its batch, with
 * and without a local window and with each position term. The context is
 * a weighted mean (weights >= 0 summing to 1) of V rows, so its rounding
 * does not grow with L the way a plain sum's would: the 1e-5 of the short
 * cases holds at 8192 (measured 1e-7 to 5e-7), while one key too many or
 * too few at a window's edge costs about 1 / (2 window + 1) of the output
 * and a wrong bucket or slope percents. Under the sanitizers (which look
 * for memory errors, not rounding) the cases without a window run at 8192
 * tokens once, without position terms: each is O(L^2) in the layer and
 * in the double-precision reference, and they were most of this test's
 * time there, while their position terms' paths run at 2048 (beyond any
 * bucket's or slope's range) and the windowed cases still run at 8192.
 * The host's products path (kernel = products) runs the same cases up to
 * 2048 tokens (513 under the sanitizers), and bf16 both paths, each
 * against the same float64 reference, computed once per case. */
static void test_lengths(void)
{
    static const int lengths[] = {1, 7, 128, 129, 513, 2048, 8192};
    attention_case cases[] = {
        {.d = 64, .heads = 2, .bias = 1},
        {.d = 64, .heads = 2, .bias = 1, .window = 128},
        {.d = 64, .heads = 4, .bias = 1, .position = POSITION_ALIBI},
        {.d = 64, .heads = 4, .bias = 1, .position = POSITION_ALIBI, .window = 128},
        {.d = 64, .heads = 2, .bias = 1, .position = POSITION_BUCKETS},
        {.d = 64, .heads = 2, .bias = 0, .position = POSITION_BUCKETS, .window = 5},
        {.d = 64, .heads = 2, .bias = 1, .position = POSITION_ROPE, .window = 128},
        {.d = 32, .heads = 4, .bias = 1, .position = POSITION_ROPE, .window = 63, .causal = 1},
        {.d = 64, .heads = 2, .bias = 1, .causal = 1},
        /* head_dim 64 and 32 have kernels of their own width */
        {.d = 128, .heads = 2, .bias = 1, .position = POSITION_ALIBI},
        {.d = 128, .heads = 2, .bias = 1, .position = POSITION_BUCKETS, .window = 128},
    };
    static const char *const position_label[] = {"none", "rope", "alibi", "buckets"};
    enum { N_CASES = sizeof cases / sizeof *cases };
    /* Each case's bf16 products' error to the reference at the longest
     * length they ran (2048): the bar of the fused bf16 kernel at 8192. */
    double bf16_products_error[N_CASES], bf16_products_rms[N_CASES];
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    const int bf16 = tfenc_matrix_check_precision(&ctx, TFENC_PRECISION_BF16) == TFENC_OK;
    const int sanitizers = getenv("TFENC_SANITIZER_BUILD") != NULL;
    for (size_t l = 0; l < sizeof lengths / sizeof *lengths; l++) {
        const int L = lengths[l];
        for (size_t k = 0; k < N_CASES; k++) {
            const attention_case *c = &cases[k];
            if (sanitizers && L > 2048 && c->window == 0 && k > 0)
                continue;
            attention_weights w;
            weights_make(&w, c->d, 500 + k);
            unsigned long long state = 17 + l;
            float *x = malloc(sizeof(float) * L * c->d);
            float *y = malloc(sizeof(float) * L * c->d);
            float *out = malloc(sizeof(float) * L * c->d);
            fill_uniform(x, (size_t)L * c->d, 1.0, &state);
            double *reference = reference_batch(c, &w, &L, 1, x);
            double error = INFINITY;
            if (plugin_run(c, &w, &L, 1, x, y) == TFENC_OK)
                error = error_to_reference(reference, &L, 1, c->d, y, NULL);
            printf("\n    L=%-5d %-7s window=%-3d%s relative error %.2e", L,
                   position_label[c->position], c->window, c->causal ? " causal" : "", error);
            CU_ASSERT(error <= TOLERANCE);
            /* The host's products path (kernel = products, float32 here) at
             * the same lengths, up to 2048 (beyond, its blocks are the same
             * as at 2048, and the fused kernel's 8192 stay). */
            if (L <= 2048 && !(sanitizers && L > 513)) {
                attention_case products = *c;
                products.extra = "kernel = products";
                error = INFINITY;
                if (plugin_run(&products, &w, &L, 1, x, out) == TFENC_OK)
                    error = error_to_reference(reference, &L, 1, c->d, out, NULL);
                printf(" (products: %.2e)", error);
                CU_ASSERT(error <= TOLERANCE);
            }
            /* bf16 on both paths: the host's products over the key blocks
             * its query blocks see up to 2048, then the fused kernel (on bf16
             * operands where the CPU has AVX512_BF16 and head_dim is a
             * multiple of 32, else float32) at every length. Against the
             * float64 reference: every product of the layer rounds its
             * operands to bf16 (a relative 2^-9 each), so the fused
             * kernel's bar is the products' error on the same case, as a
             * root mean square with a quarter to spare (at 8192, theirs at
             * 2048: the context is a weighted mean, whose error does not
             * grow with L) and as the largest error with twice (the
             * largest of more rows is larger: measured 1.42 times at 8192
             * against 2048). Against fp32 by the smallest cosine over
             * tokens (see test_bf16_against_fp32 for the bar). */
            for (int path = 1; bf16 && path >= 0 && !(sanitizers && L > 513); path--) {
                if (path == 1 && L > 2048)
                    continue;
                attention_case low = *c;
                low.precision = TFENC_PRECISION_BF16;
                low.extra = path == 0 ? "kernel = fused" : "kernel = products";
                CU_ASSERT_EQUAL(plugin_run(&low, &w, &L, 1, x, out), TFENC_OK);
                double rms = INFINITY;
                error = error_to_reference(reference, &L, 1, c->d, out, &rms);
                const double lowest = lowest_cosine(y, out, L, c->d);
                printf(" (bf16 %s: relative error %.2e, rms %.2e, min cosine to fp32 %.7f)",
                       path == 0 ? "fused" : "products", error, rms, lowest);
                if (path == 1) {
                    bf16_products_error[k] = error;
                    bf16_products_rms[k] = rms;
                } else {
                    CU_ASSERT(rms <= 1.25 * bf16_products_rms[k]);
                    CU_ASSERT(error <= 2.0 * bf16_products_error[k]);
                }
                CU_ASSERT(lowest >= 0.9999);
            }
            free(reference);
            free(x);
            free(y);
            free(out);
            weights_free(&w);
        }
    }
}

/* The fused kernel (linked into this test) splits a sequence into (head,
 * query block) items that the layer shares among its threads dynamically.
 * A row's arithmetic must not depend on the split: the items run in order
 * on one thread, and in reverse order over 3 threads with scratch full of
 * NaN, give bitwise the same context. (The whole layer is not compared
 * across thread counts here: its Q/K/V and output maps run on the host's
 * GEMM, whose sums the thread count may reorder.) */
static void test_kernel_bitwise(void)
{
    const int length = 1000, heads = 4, head_dim = 16, d = heads * head_dim;
    const int stride = 3 * d, blocks = (length + ATTENTION_QUERY_BLOCK - 1) / ATTENTION_QUERY_BLOCK;
    float *qkv = malloc(sizeof(float) * length * stride);
    float *transposed = malloc(sizeof(float) * d * (length + ATTENTION_KEY_BLOCK));
    float *one = malloc(sizeof(float) * length * d);
    float *shared = malloc(sizeof(float) * length * d);
    unsigned long long state = 8;
    fill_uniform(qkv, (size_t)length * stride, 1.0, &state);
    for (int window = 0; window <= 100; window += 100) {
        attention_kernel_shape shape = {.head_dim = head_dim, .heads_per_kv = 1,
                                        .row_stride = stride, .key_offset = d, .value_offset = d,
                                        .context_stride = d, .scale = 0.25f, .window = window,
                                        .transposed_stride = length + ATTENTION_KEY_BLOCK};
        /* past the last key: NaN, which the kernel must never use */
        for (size_t i = 0; i < (size_t)d * (length + ATTENTION_KEY_BLOCK); i++)
            transposed[i] = NAN;
        for (int dim = 0; dim < d; dim++)
            attention_kernel_transpose_keys(&shape, qkv, length, dim, transposed);
        size_t floats = attention_kernel_scratch_floats(&shape, NULL);
        float *scratch = malloc(sizeof(float) * floats * 3);
        for (size_t i = 0; i < floats * 3; i++)
            scratch[i] = NAN;
        for (int item = 0; item < heads * blocks; item++) {
            int first = item / heads * ATTENTION_QUERY_BLOCK;
            int rows = length - first < ATTENTION_QUERY_BLOCK ? length - first
                                                              : ATTENTION_QUERY_BLOCK;
            attention_kernel_run(&shape, NULL, qkv, transposed, length, item % heads, first, rows,
                                 one, scratch);
        }
        for (size_t i = 0; i < floats * 3; i++)
            scratch[i] = NAN;
#pragma omp parallel for schedule(dynamic, 1) num_threads(3)
        for (int reversed = 0; reversed < heads * blocks; reversed++) {
            int item = heads * blocks - 1 - reversed;
            int first = item / heads * ATTENTION_QUERY_BLOCK;
            int rows = length - first < ATTENTION_QUERY_BLOCK ? length - first
                                                              : ATTENTION_QUERY_BLOCK;
            attention_kernel_run(&shape, NULL, qkv, transposed, length, item % heads, first, rows,
                                 shared, scratch + (size_t)omp_get_thread_num() * floats);
        }
        int equal = memcmp(one, shared, sizeof(float) * length * d) == 0, finite = 1;
        for (int i = 0; i < length * d; i++)
            finite = finite && isfinite(one[i]);
        CU_ASSERT(finite); /* the NaN past the keys (and in the scratch) never reached it */
        printf("\n    window=%d: 1 thread in order vs 3 threads reversed: %s", window,
               equal ? "bitwise equal" : "different");
        CU_ASSERT(equal);
        free(scratch);
    }
    free(qkv);
    free(transposed);
    free(one);
    free(shared);
}

/* The kernel runs 16-float vectors on AVX-512 and 8-float ones elsewhere
 * (GCC spilled the 16-float ones through the stack in the AVX2 clone): each
 * lane is its own key or dim, summed in the same order, so both widths must
 * give bitwise the same context, at head_dim 64 and 32 (their own loops)
 * and 16 (the generic one), with and without a window, on whichever clone
 * this CPU runs. */
static void test_kernel_widths(void)
{
    const int length = 700, heads = 2;
    for (int head_dim = 16; head_dim <= 64; head_dim *= 2) {
        const int d = heads * head_dim, stride = 3 * d;
        float *qkv = malloc(sizeof(float) * length * stride);
        float *transposed = malloc(sizeof(float) * d * (length + ATTENTION_KEY_BLOCK));
        float *wide = malloc(sizeof(float) * length * d);
        float *narrow = malloc(sizeof(float) * length * d);
        unsigned long long state = 25;
        fill_uniform(qkv, (size_t)length * stride, 1.0, &state);
        for (int window = 0; window <= 64; window += 64) {
            attention_kernel_shape shape = {.head_dim = head_dim, .heads_per_kv = 1,
                                            .row_stride = stride, .key_offset = d,
                                            .value_offset = d, .context_stride = d,
                                            .scale = 0.125f, .window = window,
                                            .transposed_stride = length + ATTENTION_KEY_BLOCK};
            for (size_t i = 0; i < (size_t)d * (length + ATTENTION_KEY_BLOCK); i++)
                transposed[i] = 0.0f;
            for (int dim = 0; dim < d; dim++)
                attention_kernel_transpose_keys(&shape, qkv, length, dim, transposed);
            float *scratch = malloc(sizeof(float) * attention_kernel_scratch_floats(&shape, NULL));
            for (int width = 8; width <= 16; width += 8) {
                shape.vector_width = width;
                for (int h = 0; h < heads; h++)
                    for (int first = 0; first < length; first += ATTENTION_QUERY_BLOCK) {
                        int rows = length - first < ATTENTION_QUERY_BLOCK ? length - first
                                                                          : ATTENTION_QUERY_BLOCK;
                        attention_kernel_run(&shape, NULL, qkv, transposed, length, h, first, rows,
                                             width == 8 ? narrow : wide, scratch);
                    }
            }
            int equal = memcmp(wide, narrow, sizeof(float) * length * d) == 0;
            printf("\n    head_dim %d, window %d: 8 vs 16 floats a vector: %s", head_dim, window,
                   equal ? "bitwise equal" : "different");
            CU_ASSERT(equal);
            free(scratch);
        }
        free(qkv);
        free(transposed);
        free(wide);
        free(narrow);
    }
}

/* create() must fail with the right status and a message naming the culprit. */
static void expect_create_error(const attention_case *c, int status, const char *needle1,
                                const char *needle2)
{
    attention_weights w;
    weights_make(&w, c->d, 3);
    tfenc_limits limits = {.max_tokens = 16, .max_seq_len = 16, .max_seqs = 4};
    instance in;
    instance_create(&in, c, &w, limits);
    const char *message = tfenc_context_message(&in.ctx);
    printf("\n    expected error: %s", message);
    CU_ASSERT_EQUAL(in.status, status);
    CU_ASSERT_PTR_NULL(in.layer);
    CU_ASSERT_PTR_NOT_NULL(strstr(message, needle1));
    if (needle2 != NULL)
        CU_ASSERT_PTR_NOT_NULL(strstr(message, needle2));
    instance_destroy(&in);
    weights_free(&w);
}

static void test_errors(void)
{
    attention_case indivisible = {.d = 16, .heads = 3, .bias = 1};
    expect_create_error(&indivisible, TFENC_ERR_CONFIG, "n_heads = 3", "d_model = 16");
    attention_case no_heads = {.d = 16, .heads = 0, .bias = 1};
    expect_create_error(&no_heads, TFENC_ERR_CONFIG, "n_heads", NULL);
    attention_case missing_out = {.d = 16, .heads = 2, .bias = 1, .omit_weight = "out_weight"};
    expect_create_error(&missing_out, TFENC_ERR_WEIGHTS, "out_weight", NULL);
    attention_case missing_k = {.d = 16, .heads = 2, .bias = 1, .omit_weight = "k_bias"};
    expect_create_error(&missing_k, TFENC_ERR_WEIGHTS, "k_bias", NULL);
    /* qkv = fused demanded, but the store holds separate weights. */
    attention_case wrong_layout = {.d = 16, .heads = 2, .bias = 0, .qkv_key = "fused"};
    expect_create_error(&wrong_layout, TFENC_ERR_WEIGHTS, "qkv_weight", NULL);
    attention_case odd_rope = {.d = 16, .heads = 2, .bias = 1, .position = POSITION_ROPE,
                               .rope_dims = 3};
    expect_create_error(&odd_rope, TFENC_ERR_CONFIG, "rope_dims", NULL);
    attention_case big_rope = {.d = 16, .heads = 2, .bias = 1, .position = POSITION_ROPE,
                               .rope_dims = 10};
    expect_create_error(&big_rope, TFENC_ERR_CONFIG, "rope_dims", NULL);
    attention_case bad_choice = {.d = 16, .heads = 2, .bias = 1, .extra = "position = sinusoid"};
    expect_create_error(&bad_choice, TFENC_ERR_CONFIG, "position", NULL);
}

/* bf16 (projections and both products) against fp32 on the same weights:
 * the smallest cosine over tokens. Sequences of 1 to 300 tokens exercise
 * the padded product sizes and a second key block. bf16 rounds x, the
 * weights, Q, K, V and the probabilities to 8 significant bits (2^-9
 * relative); about five such roundings on the way to each output give
 * 1 - cos near (5 * 2^-9 / sqrt 3)^2 / 2 ~ 1.6e-5 at worst: the bf16 bar
 * of 0.9999 holds with room, while any mistake in the padded or gathered
 * layouts mixes heads or tokens and costs percents. */
static void test_bf16_against_fp32(void)
{
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    if (!precision_runs_here(TFENC_PRECISION_BF16))
        return;
    static const int lengths[] = {1, 5, 37, 129, 300};
    const int n_seq = 5, tokens = 472;
    attention_case cases[] = {
        {.d = 64, .heads = 4, .bias = 1},
        {.d = 48, .heads = 6, .bias = 1, .position = POSITION_ALIBI},
        {.d = 32, .heads = 2, .bias = 0, .position = POSITION_ROPE, .fused = 1},
        {.d = 64, .heads = 4, .bias = 1, .extra = "causal = true"},
        {.d = 64, .heads = 4, .bias = 1, .extra = "window = 20"},
        /* its prepare() step, once per head and block of 64 queries */
        {.d = 64, .heads = 4, .bias = 1, .position = POSITION_DISENTANGLED},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        attention_case c = cases[k];
        attention_weights w;
        weights_make(&w, c.d, 41 + k);
        unsigned long long state = 9;
        float *x = malloc(sizeof(float) * tokens * c.d);
        float *want = malloc(sizeof(float) * tokens * c.d);
        float *got = malloc(sizeof(float) * tokens * c.d);
        fill_uniform(x, (size_t)tokens * c.d, 1.0, &state);
        c.precision = TFENC_PRECISION_FP32;
        CU_ASSERT_EQUAL(plugin_run(&c, &w, lengths, n_seq, x, want), TFENC_OK);
        c.precision = TFENC_PRECISION_BF16;
        CU_ASSERT_EQUAL(plugin_run(&c, &w, lengths, n_seq, x, got), TFENC_OK);
        const double lowest = lowest_cosine(want, got, tokens, c.d);
        printf("\n    bf16 d=%d h=%d: min cosine to fp32 %.7f", c.d, c.heads, lowest);
        CU_ASSERT(lowest >= 0.9999 && lowest < 1.0);
        free(x);
        free(want);
        free(got);
        weights_free(&w);
    }
}

static double bf16_rounded(float value)
{
    const uint32_t bits = (uint32_t)tfenc_round_to_bf16(value) << 16;
    float rounded;
    memcpy(&rounded, &bits, sizeof rounded);
    return rounded;
}

/* The bf16 kernel alone, against a float64 reference on the same bf16
 * operands (Q times the scale, K and V rounded as the kernel rounds them):
 * what is left is the probabilities' rounding to bf16 (at most 2^-9 of
 * each; the kernel divides by the sum of the unrounded ones, so the
 * context moves by at most 2^-9 of the largest |v|) and float32 sums
 * (1e-5 allowed). head_dim 64 and 32, with and without a window, keys masked after
 * 650 of 701 tokens (an odd length: the last pair of values is padded),
 * the words past the last key NaN; 1 thread in order and 3 threads in
 * reverse give the same bits. */
static void test_bf16_kernel_alone(void)
{
    if (!attention_kernel_bf16_available()) {
        printf("\n    not run: this CPU has no AVX512_BF16");
        return;
    }
    const int length = 701, heads = 2;
    for (int head_dim = 32; head_dim <= 64; head_dim *= 2)
        for (int variant = 0; variant < 3; variant++) {
            const int d = heads * head_dim, stride = 3 * d;
            const int window = variant == 1 ? 64 : 0, keys = variant == 2 ? 650 : length;
            attention_kernel_shape shape = {.head_dim = head_dim, .heads_per_kv = 1,
                                            .row_stride = stride, .key_offset = d,
                                            .value_offset = d, .context_stride = d,
                                            .scale = 0.125f, .window = window,
                                            .transposed_stride = length + ATTENTION_KEY_BLOCK,
                                            .value_pair_stride = d};
            float *qkv = malloc(sizeof(float) * length * stride);
            uint32_t *key_pairs = malloc(sizeof(uint32_t) * d / 2 * shape.transposed_stride);
            uint32_t *value_pairs = malloc(sizeof(uint32_t) * d * length);
            float *one = malloc(sizeof(float) * length * d);
            float *shared = malloc(sizeof(float) * length * d);
            unsigned long long state = 61 + head_dim + variant;
            fill_uniform(qkv, (size_t)length * stride, 2.0, &state);
            memset(key_pairs, 0xff, sizeof(uint32_t) * d / 2 * shape.transposed_stride); /* NaN */
            const size_t floats = attention_kernel_scratch_floats(&shape, NULL);
            float *scratch = malloc(sizeof(float) * floats * 3);
            /* in two calls, as threads sharing a group pack it */
            attention_kernel_pack_key_pairs(&shape, qkv, 0, 300, key_pairs, (uint16_t *)scratch);
            attention_kernel_pack_key_pairs(&shape, qkv, 300, length - 300, key_pairs,
                                            (uint16_t *)scratch);
            attention_kernel_pack_value_pairs(&shape, qkv, length, value_pairs);
            const int blocks = (length + ATTENTION_QUERY_BLOCK - 1) / ATTENTION_QUERY_BLOCK;
            for (int item = 0; item < heads * blocks; item++) {
                const int first = item / heads * ATTENTION_QUERY_BLOCK;
                const int rows = length - first < ATTENTION_QUERY_BLOCK ? length - first
                                                                        : ATTENTION_QUERY_BLOCK;
                attention_kernel_run_bf16(&shape, NULL, qkv, key_pairs, value_pairs, keys,
                                          item % heads, first, rows, one, scratch);
            }
#pragma omp parallel for schedule(dynamic, 1) num_threads(3)
            for (int reversed = 0; reversed < heads * blocks; reversed++) {
                const int item = heads * blocks - 1 - reversed;
                const int first = item / heads * ATTENTION_QUERY_BLOCK;
                const int rows = length - first < ATTENTION_QUERY_BLOCK ? length - first
                                                                        : ATTENTION_QUERY_BLOCK;
                attention_kernel_run_bf16(&shape, NULL, qkv, key_pairs, value_pairs, keys,
                                          item % heads, first, rows, shared,
                                          scratch + (size_t)omp_get_thread_num() * floats);
            }
            double worst = 0.0, largest = 0.0;
            double *scores = malloc(sizeof(double) * length);
            for (int h = 0; h < heads; h++)
                for (int i = 0; i < length; i++) {
                    const float *q = qkv + (size_t)i * stride + h * head_dim;
                    const int lo = window > 0 && i - window > 0 ? i - window : 0;
                    const int hi = window > 0 && i + window + 1 < keys ? i + window + 1 : keys;
                    double maximum = -INFINITY, sum = 0.0;
                    for (int j = lo; j < hi; j++) {
                        const float *k = qkv + (size_t)j * stride + d + h * head_dim;
                        double dot = 0.0;
                        for (int e = 0; e < head_dim; e++)
                            dot += bf16_rounded(q[e] * shape.scale) * bf16_rounded(k[e]);
                        scores[j] = dot;
                        maximum = fmax(maximum, dot);
                    }
                    for (int j = lo; j < hi; j++)
                        sum += scores[j] = exp(scores[j] - maximum);
                    for (int e = 0; e < head_dim; e++) {
                        double context = 0.0;
                        for (int j = lo; j < hi; j++) {
                            const double v = bf16_rounded(qkv[(size_t)j * stride + 2 * d +
                                                              h * head_dim + e]);
                            context += scores[j] / sum * v;
                            largest = fmax(largest, fabs(v));
                        }
                        const double got = one[(size_t)i * d + h * head_dim + e];
                        /* a query that sees no key gets a zero context */
                        worst = fmax(worst, fabs((lo < hi ? context : 0.0) - got));
                    }
                }
            const int equal = memcmp(one, shared, sizeof(float) * length * d) == 0;
            printf("\n    head_dim %d window %d keys %d: largest difference to the reference "
                   "%.2e of max |v| (bar 2^-9 = 1.95e-3); 1 thread vs 3 reversed: %s",
                   head_dim, window, keys, worst / largest, equal ? "bitwise equal" : "different");
            CU_ASSERT(worst / largest <= 1.0 / 512 + 1e-5);
            CU_ASSERT(equal);
            free(scores);
            free(scratch);
            free(qkv);
            free(key_pairs);
            free(value_pairs);
            free(one);
            free(shared);
        }
}

/* The fused kernel on bf16 operands (kernel = fused in a bf16 job, on a
 * CPU with AVX512_BF16), for head_dim 32 and 64, every position term, a
 * window, causal, and masked keys whose window leaves queries no key, at
 * lengths across the query and key blocks. Against the float64 reference:
 * the projections and the attention products all round their operands to
 * bf16 (8 significant bits, a relative 2^-9 each), so the bar is the
 * error the host's bf16 products make on the same case (measured beside
 * it) with a quarter to spare, and a cosine of 0.9999 to the fp32 layer
 * per row, as the other bf16 tests ask. Each sequence alone gives the
 * packed batch's bits, on the kernel and on the host's products (their
 * blocks of queries and keys start at the sequence's first token, and
 * their sizes follow its length alone), and the result differs from the
 * float32 kernel's (the bf16 operands are really used). */
static void test_bf16_kernel(void)
{
    if (!precision_runs_here(TFENC_PRECISION_BF16) || !attention_kernel_bf16_available()) {
        printf("\n    not run: this CPU has no AVX512_BF16 (or oneDNN is capped below it)");
        return;
    }
    static const int lengths[] = {1, 7, 64, 65, 128, 129, 300, 513};
    const int n_seq = 8, tokens = 1207;
    attention_case cases[] = {
        {.d = 128, .heads = 2, .bias = 1},
        {.d = 128, .heads = 4, .bias = 1, .position = POSITION_ALIBI},
        {.d = 64, .heads = 1, .bias = 1, .position = POSITION_BUCKETS, .window = 5},
        {.d = 128, .heads = 2, .bias = 0, .position = POSITION_ROPE, .window = 70},
        {.d = 128, .heads = 4, .bias = 1, .position = POSITION_ROPE, .causal = 1},
        {.d = 128, .heads = 2, .bias = 1, .position = POSITION_DISENTANGLED},
        {.d = 128, .heads = 2, .bias = 1, .masked_tail = 12, .window = 4},
        {.d = 64, .heads = 2, .bias = 1, .masked_tail = 40, .position = POSITION_ALIBI},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        attention_case c = cases[k];
        attention_weights w;
        weights_make(&w, c.d, 900 + k);
        unsigned long long state = 31 + k;
        const size_t floats = (size_t)tokens * c.d;
        float *x = malloc(sizeof(float) * floats);
        float *fp32 = malloc(sizeof(float) * floats);
        float *fused = malloc(sizeof(float) * floats);
        float *products = malloc(sizeof(float) * floats);
        fill_uniform(x, floats, 1.0, &state);
        CU_ASSERT_EQUAL(plugin_run(&c, &w, lengths, n_seq, x, fp32), TFENC_OK);
        c.precision = TFENC_PRECISION_BF16;
        c.extra = "kernel = products";
        CU_ASSERT_EQUAL(plugin_run(&c, &w, lengths, n_seq, x, products), TFENC_OK);
        c.extra = "kernel = fused";
        CU_ASSERT_EQUAL(plugin_run(&c, &w, lengths, n_seq, x, fused), TFENC_OK);
        const double products_error = relative_error(&c, &w, lengths, n_seq, x, products);
        const double error = relative_error(&c, &w, lengths, n_seq, x, fused);
        const double lowest = lowest_cosine(fp32, fused, tokens, c.d);
        int bitwise = 1, products_bitwise = 1;
        size_t offset = 0;
        for (int s = 0; s < n_seq; s++) {
            float *alone = malloc(sizeof(float) * (size_t)lengths[s] * c.d);
            CU_ASSERT_EQUAL(plugin_run(&c, &w, &lengths[s], 1, x + offset, alone), TFENC_OK);
            bitwise &= memcmp(alone, fused + offset, sizeof(float) * lengths[s] * c.d) == 0;
            attention_case products_case = c;
            products_case.extra = "kernel = products";
            CU_ASSERT_EQUAL(plugin_run(&products_case, &w, &lengths[s], 1, x + offset, alone),
                            TFENC_OK);
            products_bitwise &=
                memcmp(alone, products + offset, sizeof(float) * lengths[s] * c.d) == 0;
            offset += (size_t)lengths[s] * c.d;
            free(alone);
        }
        printf("\n    head_dim %d position %d window %d%s%s: relative error %.2e (bf16 "
               "products %.2e), min cosine to fp32 %.7f, alone vs packed %s (products: %s)",
               c.d / c.heads, c.position, c.window, c.causal ? " causal" : "",
               c.masked_tail ? " masked" : "", error, products_error, lowest,
               bitwise ? "bitwise equal" : "NOT bitwise equal",
               products_bitwise ? "bitwise equal" : "NOT bitwise equal");
        CU_ASSERT(error <= 1.25 * products_error);
        CU_ASSERT(lowest >= 0.9999);
        CU_ASSERT(bitwise);
        CU_ASSERT(products_bitwise);
        CU_ASSERT(memcmp(fp32, fused, sizeof(float) * floats) != 0);
        free(x);
        free(fp32);
        free(fused);
        free(products);
        weights_free(&w);
    }
}

/* Keys masked by the batch (seq_keys, a ColBERT query whose [MASK]
 * padding is not attended to): each sequence's last tokens are queries
 * only. Against the reference with those keys at -inf, on the fused fp32
 * kernel and on the host's products (kernel = products) with every kind of
 * position term, a window that leaves the last queries no key at all
 * (their context is zero), causal masks, sequences of one key, and lengths
 * across query and key blocks and tiles; then bf16 (the host's products in
 * their own layout) against fp32 by cosine where bf16 runs. */
static void test_masked_keys(void)
{
    attention_case cases[] = {
        {.d = 32, .heads = 4, .bias = 1, .masked_tail = 5},
        {.d = 64, .heads = 2, .bias = 1, .masked_tail = 40},
        {.d = 64, .heads = 2, .bias = 1, .masked_tail = 12, .window = 4},
        {.d = 64, .heads = 4, .bias = 1, .masked_tail = 9, .position = POSITION_ALIBI},
        {.d = 32, .heads = 2, .bias = 1, .masked_tail = 9, .position = POSITION_BUCKETS},
        {.d = 32, .heads = 2, .bias = 1, .masked_tail = 9, .position = POSITION_ROPE},
        {.d = 64, .heads = 4, .bias = 1, .masked_tail = 9, .position = POSITION_DISENTANGLED},
        {.d = 64, .heads = 2, .bias = 1, .masked_tail = 9, .causal = 1},
        {.d = 48, .heads = 3, .bias = 0, .masked_tail = 100}, /* one key up to 101 tokens */
    };
    static const int lengths[] = {1, 2, 7, 64, 65, 129, 300};
    const int n_seq = 7, tokens = 568;
    const int bf16 = precision_runs_here(TFENC_PRECISION_BF16);
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        attention_case c = cases[k];
        attention_weights w;
        weights_make(&w, c.d, 700 + k);
        unsigned long long state = 5 + k;
        float *x = malloc(sizeof(float) * tokens * c.d);
        float *y = malloc(sizeof(float) * tokens * c.d);
        float *z = malloc(sizeof(float) * tokens * c.d);
        fill_uniform(x, (size_t)tokens * c.d, 1.0, &state);
        double error = INFINITY;
        if (plugin_run(&c, &w, lengths, n_seq, x, y) == TFENC_OK)
            error = relative_error(&c, &w, lengths, n_seq, x, y);
        printf("\n    masked tail %-3d d=%d window=%d%s: relative error %.2e", c.masked_tail, c.d,
               c.window, c.causal ? " causal" : "", error);
        CU_ASSERT(error <= TOLERANCE);
        /* Masking changes the result: the same batch without it differs. */
        attention_case unmasked = c;
        unmasked.masked_tail = 0;
        CU_ASSERT_EQUAL(plugin_run(&unmasked, &w, lengths, n_seq, x, z), TFENC_OK);
        CU_ASSERT(memcmp(y, z, sizeof(float) * tokens * c.d) != 0);
        /* The host's products path (kernel = products: float32 on OpenBLAS
         * here, bf16 on oneDNN in bf16 jobs), its blocks' key ranges and
         * softmax, masked and not, against the same reference. */
        for (int masked = 0; masked < 2; masked++) {
            attention_case products = masked ? c : unmasked;
            products.extra = "kernel = products";
            error = INFINITY;
            if (plugin_run(&products, &w, lengths, n_seq, x, z) == TFENC_OK)
                error = relative_error(&products, &w, lengths, n_seq, x, z);
            printf(" (products%s: %.2e)", masked ? ", masked" : "", error);
            CU_ASSERT(error <= TOLERANCE);
        }
        if (bf16) {
            c.precision = TFENC_PRECISION_BF16;
            CU_ASSERT_EQUAL(plugin_run(&c, &w, lengths, n_seq, x, z), TFENC_OK);
            const double lowest = lowest_cosine(y, z, tokens, c.d);
            printf(" (bf16: min cosine to fp32 %.7f)", lowest);
            CU_ASSERT(lowest >= 0.9999);
        }
        free(x);
        free(y);
        free(z);
        weights_free(&w);
    }
}

/* Per-thread scratch of the fused fp32 kernel: blocks of 64 queries x 64
 * keys (scores, the running context), whatever L. */
#define FUSED_THREAD_BOUND (sizeof(float) * 4 * 64 * 64)

static void test_workspace_and_flops(void)
{
    attention_case c = {.d = 32, .heads = 4, .bias = 1};
    attention_weights w;
    weights_make(&w, 32, 3);
    tfenc_limits limits = {.max_tokens = 1000, .max_seq_len = 500, .max_seqs = 10};
    instance in;
    instance_create(&in, &c, &w, limits);
    CU_ASSERT_EQUAL_FATAL(in.status, TFENC_OK);
    const tfenc_layer_descriptor *descriptor = mha_descriptor();
    size_t bytes = descriptor->workspace_size(in.layer, &limits);
    /* qkv + context of a group (here the whole batch: two 500-token
     * sequences per thread are more than it holds), its keys transposed
     * (and one key block), and for each thread of the pool the fused
     * kernel's blocks: never a tile of scores that grows with L. */
    size_t threads = (size_t)omp_get_max_threads();
    size_t needed = sizeof(float) * ((size_t)1000 * 4 * 32 + 32 * (1000 + 64));
    CU_ASSERT(bytes >= needed);
    CU_ASSERT(bytes < needed + threads * FUSED_THREAD_BOUND);
    instance_destroy(&in);
    /* A batch of many short sequences: qkv + context for one group, 512
     * tokens or two 100-token sequences per thread, not for the batch. */
    limits = (tfenc_limits){.max_tokens = 100000, .max_seq_len = 100, .max_seqs = 1000};
    instance_create(&in, &c, &w, limits);
    CU_ASSERT_EQUAL_FATAL(in.status, TFENC_OK);
    size_t group = 2 * threads * 100 > 512 ? 2 * threads * 100 : 512;
    needed = sizeof(float) * (group * 4 * 32 + 32 * (group + 64));
    bytes = descriptor->workspace_size(in.layer, &limits);
    CU_ASSERT(bytes >= needed);
    CU_ASSERT(bytes < needed + threads * FUSED_THREAD_BOUND);
    double d = 32, length = 100;
    CU_ASSERT_DOUBLE_EQUAL(descriptor->flops_per_token(in.layer, length),
                           2 * (3 * d * d + d * d) + 4 * length * d, 1e-9);
    instance_destroy(&in);
    /* bf16 keeps the host's products: per thread one block of 64 queries
     * against 128 keys for each of the 4 heads (float32 scores, their bf16
     * probabilities beside them), the block's queries and contexts, and
     * the sequence's bf16 keys and values; never a tile of scores that
     * grows with L. Between max_seq_len 500 and 1000 (the same 1000-token
     * group) a thread's part grows by the 500 keys' and values' bf16 rows
     * alone (head_dim 8, padded to 32 by the products; one key block of
     * slack): the [4 heads, 128, L] tiles of scores before grew by 1.5 MiB. */
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    if (tfenc_matrix_check_precision(&ctx, TFENC_PRECISION_BF16) == TFENC_OK) {
        c.precision = TFENC_PRECISION_BF16;
        size_t sizes[2];
        for (int i = 0; i < 2; i++) {
            limits = (tfenc_limits){.max_tokens = 1000, .max_seq_len = 500 * (i + 1),
                                    .max_seqs = 10};
            instance_create(&in, &c, &w, limits);
            CU_ASSERT_EQUAL_FATAL(in.status, TFENC_OK);
            sizes[i] = descriptor->workspace_size(in.layer, &limits);
            instance_destroy(&in);
        }
        const size_t group_floats = (size_t)1000 * 4 * 32;
        CU_ASSERT(sizes[0] >= sizeof(float) * (group_floats + threads * 4 * 64 * 128 * 3 / 2));
        const size_t key_value_bytes = 2 * sizeof(uint16_t) * 4 * (500 + 128) * 32;
        printf("\n    bf16 workspace at max_seq_len 500: %zu bytes, 1000: %zu (bound on the "
               "growth: %zu per thread)",
               sizes[0], sizes[1], key_value_bytes);
        CU_ASSERT(sizes[1] <= sizes[0] + threads * key_value_bytes);
    }
    weights_free(&w);
}

/* ------------------------------------------------------------ the runner */

/* Finds the mha layer the way the host does: the registry scans the search
 * path ($TFENC_PLUGIN_PATH, then the build tree) and checks the ABI. */
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
    if (layer == NULL || strstr(layer->file, "attention") == NULL) {
        tfenc_plugin_registry_missing(&ctx, registry, "mha", "test_attention");
        fprintf(stderr, "%s%s%s\n", tfenc_context_message(&ctx), layer != NULL ? " found in " : "",
                layer != NULL ? layer->file : "");
        return NULL;
    }
    return layer->descriptor;
}


/* The host's products in their own layout (ABI 1.3, what the bf16 path's
 * in-place tiles use): C written to c_padded, A and B read from a_bf16 and
 * b_bf16 give the bits of the copying call; a 1.2-sized args is still accepted; alpha
 * != 1 with c_padded and float32 plans are refused. */
static void products_run(tfenc_context *ctx, tfenc_precision precision)
{
    enum { BATCH = 2, M = 40, N = 70, K = 16 };
    tfenc_weight_store *store = NULL;
    tfenc_weights *group = NULL;
    static float a[BATCH * M * K], b[BATCH * N * K], c[BATCH * M * N];
    unsigned long long state = 11;
    fill_uniform(a, sizeof a / sizeof a[0], 1.0, &state);
    fill_uniform(b, sizeof b / sizeof b[0], 1.0, &state);
    int64_t dims[2] = {1, 1};
    CU_ASSERT_EQUAL_FATAL(tfenc_weight_store_create_memory(ctx, &store), TFENC_OK);
    CU_ASSERT_EQUAL_FATAL(tfenc_weight_store_add(ctx, store, "/m/w", 2, dims, a), TFENC_OK);
    const tfenc_weight_options options = {.precision = precision};
    CU_ASSERT_EQUAL_FATAL(tfenc_weight_store_group(ctx, store, "/m", &options, &group), TFENC_OK);
    tfenc_matmul_shape shape = {.struct_size = sizeof shape, .batch = BATCH, .m = M, .n = N,
                                .k = K, .b_transposed = 1};
    tfenc_matmul_plan *plan = NULL;
    CU_ASSERT_EQUAL_FATAL(tfenc_matmul_plan_create(group, &shape, &plan), TFENC_OK);
    tfenc_matmul_layout layout = {.struct_size = sizeof layout};
    const int status = tfenc_matmul_padded_layout(plan, M, N, K, &layout);
    tfenc_matmul_args copying = {.struct_size = sizeof copying, .m = M, .n = N, .k = K,
                                 .alpha = 1.0f, .a = a, .a_row_stride = K,
                                 .a_batch_stride = M * K, .b = b, .b_row_stride = K,
                                 .b_batch_stride = N * K, .c = c, .c_row_stride = N,
                                 .c_batch_stride = M * N};
    CU_ASSERT_EQUAL(tfenc_matmul(ctx, plan, &copying), TFENC_OK);
    /* ABI 1.2's args end before a_bf16: the same call, the same bits */
    static float c_1_2[BATCH * M * N];
    tfenc_matmul_args old = copying;
    old.struct_size = offsetof(tfenc_matmul_args, a_bf16);
    old.c = c_1_2;
    CU_ASSERT_EQUAL(tfenc_matmul(ctx, plan, &old), TFENC_OK);
    CU_ASSERT(memcmp(c, c_1_2, sizeof c) == 0);
    if (precision == TFENC_PRECISION_FP32 || status != TFENC_OK) {
        /* float32 products copy nothing: no layout to share */
        CU_ASSERT_EQUAL(status, TFENC_ERR_NOT_FOUND);
        tfenc_matmul_args refused = copying;
        refused.c_padded = c_1_2;
        CU_ASSERT_EQUAL(tfenc_matmul(ctx, plan, &refused), TFENC_ERR_INTERNAL);
        tfenc_weight_store_close(store);
        return;
    }
    CU_ASSERT(layout.m_padded >= M && layout.n_padded >= N && layout.k_padded >= K);
    const size_t padded_c = (size_t)BATCH * layout.m_padded * layout.n_padded;
    const size_t padded_a = (size_t)BATCH * layout.m_padded * layout.k_padded;
    float *c_padded = malloc(sizeof(float) * padded_c);
    const size_t padded_b = (size_t)BATCH * layout.n_padded * layout.k_padded;
    uint16_t *a_bf16 = calloc(padded_a, sizeof(uint16_t));
    uint16_t *b_bf16 = calloc(padded_b, sizeof(uint16_t));
    float *zeros = calloc((size_t)BATCH * N * K, sizeof(float));
    CU_ASSERT_FATAL(c_padded != NULL && a_bf16 != NULL && b_bf16 != NULL && zeros != NULL);
    for (int e = 0; e < BATCH; e++) {
        for (int i = 0; i < M; i++)
            for (int j = 0; j < K; j++)
                a_bf16[((size_t)e * layout.m_padded + i) * layout.k_padded + j] =
                    tfenc_round_to_bf16(a[(e * M + i) * K + j]);
        for (int i = 0; i < N; i++) /* B stored transposed: [n][k] */
            for (int j = 0; j < K; j++)
                b_bf16[((size_t)e * layout.n_padded + i) * layout.k_padded + j] =
                    tfenc_round_to_bf16(b[(e * N + i) * K + j]);
    }
    /* a and b point at zeros: a host that read them would get zeros */
    tfenc_matmul_args in_place = copying;
    in_place.a = zeros;
    in_place.a_bf16 = a_bf16;
    in_place.b = zeros;
    in_place.b_bf16 = b_bf16;
    in_place.c = NULL;
    in_place.c_padded = c_padded;
    CU_ASSERT_EQUAL(tfenc_matmul(ctx, plan, &in_place), TFENC_OK);
    size_t differing = 0;
    for (int e = 0; e < BATCH; e++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++)
                differing += memcmp(&c[(e * M + i) * N + j],
                                    &c_padded[((size_t)e * layout.m_padded + i) *
                                                  layout.n_padded + j],
                                    sizeof(float)) != 0;
    CU_ASSERT_EQUAL(differing, 0);
    /* the product is what it should be, not only the same twice */
    double worst = 0;
    for (int e = 0; e < BATCH; e++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double sum = 0, magnitude = 0;
                for (int l = 0; l < K; l++) {
                    sum += (double)a[(e * M + i) * K + l] * b[(e * N + j) * K + l];
                    magnitude += fabs((double)a[(e * M + i) * K + l] * b[(e * N + j) * K + l]);
                }
                double error = fabs(c[(e * M + i) * N + j] - sum) / magnitude;
                worst = error > worst ? error : worst;
            }
    CU_ASSERT(worst < 1.0 / 128); /* two bf16 roundings of 2^-9 each, float sums */
    in_place.alpha = 0.5f;
    CU_ASSERT_EQUAL(tfenc_matmul(ctx, plan, &in_place), TFENC_ERR_INTERNAL);
    free(c_padded);
    free(a_bf16);
    free(b_bf16);
    free(zeros);
    tfenc_weight_store_close(store);
}

static void test_products_in_place(void)
{
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    products_run(&ctx, TFENC_PRECISION_FP32);
    if (tfenc_matrix_check_precision(&ctx, TFENC_PRECISION_BF16) == TFENC_OK)
        products_run(&ctx, TFENC_PRECISION_BF16);
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

/* A lone sequence on the host's products path has its query blocks shared
 * by the threads (plugins/attention.c, attend_sequence): at 1, 2 and 3
 * threads it gives the bits of the same sequence packed with others (whose
 * blocks one thread runs in order), at fp32 and, where they run, bf16 and
 * int8 (whose attention products are bf16, between int8 maps), with
 * a window, causal and ALiBi, 513 tokens (nine query blocks, the last of
 * one row, and five key blocks, the last of one key). */
static void test_lone_sequence_blocks(void)
{
    static const int lengths[] = {513, 7, 300};
    const int tokens = 820, threads = omp_get_max_threads();
    attention_case cases[] = {
        {.d = 64, .heads = 2, .bias = 1, .extra = "kernel = products"},
        {.d = 64, .heads = 4, .bias = 1, .position = POSITION_ALIBI, .window = 70,
         .extra = "kernel = products"},
        {.d = 64, .heads = 2, .bias = 1, .position = POSITION_ROPE, .causal = 1,
         .extra = "kernel = products"},
    };
    /* int8 jobs keep attention's products in bf16, between int8 maps */
    static const tfenc_precision precisions[] = {TFENC_PRECISION_FP32, TFENC_PRECISION_BF16,
                                                 TFENC_PRECISION_INT8};
    for (size_t p = 0; p < sizeof precisions / sizeof *precisions; p++) {
        if (!precision_runs_here(precisions[p]))
            continue;
        for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
            attention_case c = cases[k];
            c.precision = precisions[p];
            attention_weights w;
            weights_make(&w, c.d, 1700 + k);
            unsigned long long state = 57 + k;
            const size_t floats = (size_t)tokens * c.d, lone = (size_t)lengths[0] * c.d;
            float *x = malloc(sizeof(float) * floats);
            float *packed = malloc(sizeof(float) * floats);
            float *alone = malloc(sizeof(float) * lone);
            fill_uniform(x, floats, 1.0, &state);
            omp_set_num_threads(2);
            CU_ASSERT_EQUAL(plugin_run(&c, &w, lengths, 3, x, packed), TFENC_OK);
            for (int t = 1; t <= 3; t++) {
                omp_set_num_threads(t);
                memset(alone, 0, sizeof(float) * lone);
                CU_ASSERT_EQUAL(plugin_run(&c, &w, lengths, 1, x, alone), TFENC_OK);
                const int equal = memcmp(alone, packed, sizeof(float) * lone) == 0;
                printf("\n    %s case %zu, %d threads: lone vs packed %s",
                       tfenc_precision_names[precisions[p]], k, t,
                       equal ? "bitwise equal" : "NOT bitwise equal");
                CU_ASSERT(equal);
            }
            omp_set_num_threads(threads);
            free(x);
            free(packed);
            free(alone);
            weights_free(&w);
        }
    }
}

/* A local window's query block visits only the key blocks that hold a key
 * one of its rows sees: 64 queries (a block of either path) against the
 * keys of their windows, in key blocks of 128 at most (the products'; the
 * fused kernel's are 64, inside them). A NaN token makes a visit
 * visible: its key and value are NaN, and a key a row does not see but
 * whose block the row's products visit reaches the row's context as 0 x
 * NaN. Every row whose query block's windows, widened to multiples of 128
 * keys, leave the NaN token out must keep the bits of the clean run, on
 * both paths at fp32 and bf16. The products' tiles of 128 queries over
 * their windows' keys before put NaN into rows 0..63 of the first case. */
static void test_window_visits(void)
{
    enum { LENGTH = 300, D = 64 };
    static const struct {
        int window, poisoned;
    } probes[] = {{16, 140}, {16, 200}, {64, 299}, {5, 131}};
    static const char *const kernels[] = {"kernel = products", "kernel = fused"};
    attention_weights w;
    weights_make(&w, D, 2100);
    float *x = malloc(sizeof(float) * LENGTH * D);
    float *clean = malloc(sizeof(float) * LENGTH * D);
    float *poisoned = malloc(sizeof(float) * LENGTH * D);
    const int length = LENGTH;
    for (int bf16 = 0; bf16 < 2; bf16++) {
        if (bf16 && !precision_runs_here(TFENC_PRECISION_BF16))
            continue;
        for (size_t k = 0; k < 2; k++)
            for (size_t p = 0; p < sizeof probes / sizeof *probes; p++) {
                attention_case c = {.d = D, .heads = 2, .bias = 1,
                                    .position = POSITION_ALIBI, .window = probes[p].window,
                                    .extra = kernels[k],
                                    .precision = bf16 ? TFENC_PRECISION_BF16
                                                      : TFENC_PRECISION_FP32};
                unsigned long long state = 91 + p;
                fill_uniform(x, (size_t)LENGTH * D, 1.0, &state);
                CU_ASSERT_EQUAL(plugin_run(&c, &w, &length, 1, x, clean), TFENC_OK);
                const int t = probes[p].poisoned;
                for (int e = 0; e < D; e++)
                    x[(size_t)t * D + e] = NAN;
                CU_ASSERT_EQUAL(plugin_run(&c, &w, &length, 1, x, poisoned), TFENC_OK);
                int checked = 0, equal = 0;
                for (int i = 0; i < LENGTH; i++) {
                    const int first = i / 64 * 64;
                    const int last = first + 63 < LENGTH - 1 ? first + 63 : LENGTH - 1;
                    const int lo = first - c.window > 0 ? first - c.window : 0;
                    const int hi = last + c.window + 1 < LENGTH ? last + c.window + 1 : LENGTH;
                    if (t >= lo / 128 * 128 && t < (hi + 127) / 128 * 128)
                        continue;
                    checked++;
                    equal += memcmp(clean + (size_t)i * D, poisoned + (size_t)i * D,
                                    sizeof(float) * D) == 0;
                }
                printf("\n    %s %s, window %d, NaN token %d: %d of %d rows beyond its "
                       "blocks keep their bits",
                       bf16 ? "bf16" : "fp32", kernels[k], c.window, t, equal, checked);
                CU_ASSERT(checked > 0);
                CU_ASSERT_EQUAL(equal, checked);
            }
    }
    free(x);
    free(clean);
    free(poisoned);
    weights_free(&w);
}

/* No product of the host's bf16 attention is larger than one block:
 * 64 queries (A's rows) against 128 keys (the columns of Q K^T's C and of
 * P V's A), whatever the sequence's length, so that no score matrix grows
 * with L and each product's shape (by which the library picks its kernel
 * and blocking) follows the block, not the batch. The [heads, 128, L]
 * tiles before ran 128 x 513. Sequences of 513 and 300 tokens, alone and
 * packed, with and without a window. */
static void test_products_in_blocks(void)
{
#ifdef HAVE_ONEDNN
    if (!precision_runs_here(TFENC_PRECISION_BF16)) {
        printf("\n    not run: no bf16 products here");
        return;
    }
    static const int lengths[] = {513, 300};
    attention_case cases[] = {
        {.d = 64, .heads = 2, .bias = 1, .extra = "kernel = products",
         .precision = TFENC_PRECISION_BF16},
        {.d = 64, .heads = 2, .bias = 1, .window = 70, .position = POSITION_ALIBI,
         .extra = "kernel = products", .precision = TFENC_PRECISION_BF16},
    };
    attention_weights w;
    weights_make(&w, 64, 2300);
    float *x = malloc(sizeof(float) * 813 * 64), *y = malloc(sizeof(float) * 813 * 64);
    unsigned long long state = 23;
    fill_uniform(x, (size_t)813 * 64, 1.0, &state);
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
        for (int n_seq = 1; n_seq <= 2; n_seq++) {
            memset(batched_largest, 0, sizeof batched_largest);
            CU_ASSERT_EQUAL(plugin_run(&cases[k], &w, lengths, n_seq, x, y), TFENC_OK);
            printf("\n    window %d, %d sequence(s): largest product rows %d, A columns %d, "
                   "C columns %d",
                   cases[k].window, n_seq, batched_largest[0], batched_largest[1],
                   batched_largest[2]);
            CU_ASSERT(batched_largest[0] > 0);
            CU_ASSERT(batched_largest[0] <= 64);
            CU_ASSERT(batched_largest[1] <= 128);
            CU_ASSERT(batched_largest[2] <= 128);
        }
    free(x);
    free(y);
    weights_free(&w);
#else
    printf("\n    not run: built without oneDNN");
#endif
}

static const test_case attention_cases[] = {
    {"plain attention, mixed lengths", test_plain},
    {"fused weights equal separate", test_fused_equals_separate},
    {"rope half and interleaved", test_rope},
    {"rope ntk scaling (gte)", test_rope_ntk},
    {"alibi 3, 4, 6 heads", test_alibi},
    {"disentangled (DeBERTa) c2p and p2c", test_disentangled},
    {"packing invariance", test_packing_invariance},
    {"batches in several groups", test_groups},
    {"lengths 1 to 8192, windows, position terms", test_lengths},
    {"fused kernel bitwise equal however split", test_kernel_bitwise},
    {"fused kernel bitwise equal at 8 and 16 floats a vector", test_kernel_widths},
    {"create errors", test_errors},
    {"workspace and flops", test_workspace_and_flops},
    {"bf16 against fp32", test_bf16_against_fp32},
    {"fused kernel on bf16 operands", test_bf16_kernel},
    {"fused kernel on bf16 operands alone", test_bf16_kernel_alone},
    {"keys masked by the batch (seq_keys)", test_masked_keys},
    {"host products in their own layout", test_products_in_place},
    {"lone sequence's query blocks on the threads", test_lone_sequence_blocks},
    {"a local window visits only its key blocks", test_window_visits},
    {"the host's products are blocks, whatever the length", test_products_in_blocks},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"attention", suite_init, suite_clean, attention_cases},
    {NULL, NULL, NULL, NULL}};
