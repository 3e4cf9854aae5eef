/* A model's pieces for the model and accuracy-gate tests: composition
 * from job text, and the random BERT-like encoder. */
#include "encoder_fixture.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

tfenc_context ctx;

int compose_pieces(composed *c, const char *text, const char *directory)
{
    memset(c, 0, sizeof *c);
    tfenc_context_init(&ctx);
    int status = tfenc_jobfile_parse_string(&ctx, "m.ini", text, &c->job);
    if (status == TFENC_OK)
        status = tfenc_model_config_read(&ctx, c->job, &c->config);
    if (status == TFENC_OK)
        status = tfenc_model_plan_read(&ctx, c->job, &c->plan);
    if (status == TFENC_OK)
        status = tfenc_plugin_registry_create(&ctx, directory, NULL, &c->registry);
    if (status == TFENC_OK)
        status = tfenc_plugin_registry_scan(&ctx, c->registry);
    if (status == TFENC_OK)
        status = tfenc_weight_store_create_memory(&ctx, &c->store);
    return status;
}

void release(composed *c)
{
    tfenc_model_destroy(c->model);
    tfenc_weight_store_close(c->store);
    tfenc_plugin_registry_destroy(c->registry);
    tfenc_model_plan_free(&c->plan);
    tfenc_model_config_free(&c->config);
    tfenc_jobfile_destroy(c->job);
}

static void add_random(tfenc_weight_store *store, const char *path, int rank, int64_t rows,
                       int64_t columns, unsigned *seed)
{
    size_t count = (size_t)rows * (size_t)(rank == 2 ? columns : 1);
    float *values = malloc(count * sizeof *values);
    /* Amplitude 1/sqrt(inputs): unit-scale activations through the layers. */
    float amplitude = 1.0f / sqrtf((float)(rank == 2 ? columns : 64));
    for (size_t i = 0; i < count; i++) {
        *seed = *seed * 1103515245u + 12345u;
        values[i] = amplitude * ((float)(*seed >> 8) / 16777216.0f * 2.0f - 1.0f);
    }
    int64_t dims[2] = {rows, columns};
    CU_ASSERT_EQUAL(tfenc_weight_store_add(&ctx, store, path, rank, dims, values), TFENC_OK);
    free(values);
}

static void add_encoder_weights(tfenc_weight_store *store)
{
    unsigned seed = 5;
    char path[128];
    /* Token vectors of unit scale (amplitude sqrt(3) gives unit variance). */
    add_random(store, "/embeddings/token_embeddings", 2, ENCODER_VOCAB, ENCODER_D, &seed);
    add_random(store, "/embeddings_norm/weight", 1, ENCODER_D, 0, &seed);
    add_random(store, "/embeddings_norm/bias", 1, ENCODER_D, 0, &seed);
    for (int i = 0; i < ENCODER_REPEAT; i++) {
        static const char *const projections[] = {"q", "k", "v", "out"};
        for (int p = 0; p < 4; p++) {
            snprintf(path, sizeof path, "/enc/%d/attention/%s_weight", i, projections[p]);
            add_random(store, path, 2, ENCODER_D, ENCODER_D, &seed);
            snprintf(path, sizeof path, "/enc/%d/attention/%s_bias", i, projections[p]);
            add_random(store, path, 1, ENCODER_D, 0, &seed);
        }
        snprintf(path, sizeof path, "/enc/%d/ffn/in_weight", i);
        add_random(store, path, 2, ENCODER_F, ENCODER_D, &seed);
        snprintf(path, sizeof path, "/enc/%d/ffn/in_bias", i);
        add_random(store, path, 1, ENCODER_F, 0, &seed);
        snprintf(path, sizeof path, "/enc/%d/ffn/out_weight", i);
        add_random(store, path, 2, ENCODER_D, ENCODER_F, &seed);
        snprintf(path, sizeof path, "/enc/%d/ffn/out_bias", i);
        add_random(store, path, 1, ENCODER_D, 0, &seed);
        static const char *const norms[] = {"attention", "ffn"};
        for (int n = 0; n < 2; n++) {
            /* Two channels 20 times larger than the rest, as trained BERTs
             * have: what makes per-token int8 lose precision. */
            float scale[ENCODER_D];
            for (int j = 0; j < ENCODER_D; j++)
                scale[j] = j == 5 || j == 41 ? 20.0f : 1.0f + 0.01f * (float)j;
            int64_t dims[1] = {ENCODER_D};
            snprintf(path, sizeof path, "/enc/%d/%s/norm/weight", i, norms[n]);
            CU_ASSERT_EQUAL(tfenc_weight_store_add(&ctx, store, path, 1, dims, scale), TFENC_OK);
            snprintf(path, sizeof path, "/enc/%d/%s/norm/bias", i, norms[n]);
            add_random(store, path, 1, ENCODER_D, 0, &seed);
        }
    }
}

static void encoder_job(char *text, size_t size, const char *precision)
{
    snprintf(text, size,
             "[model]\nweights = w.h5\nd_model = %d\nprecision = %s\n"
             "[embeddings]\ntype = embedding\nscale_by_sqrt_d = true\n"
             "[embeddings_norm]\ntype = layernorm\n"
             "[enc]\nrepeat = %d\n"
             "[enc.attention]\ntype = mha\nn_heads = %d\n"
             "[enc.attention.norm]\ntype = layernorm\n"
             "[enc.ffn]\ntype = ffn\nactivation = gelu\n"
             "[enc.ffn.norm]\ntype = layernorm\n",
             ENCODER_D, precision, ENCODER_REPEAT, ENCODER_HEADS);
}

int encoder_open(composed *c, const char *precision, tfenc_model_options *options)
{
    return encoder_open_with(c, precision, "", options);
}

int encoder_open_with(composed *c, const char *precision, const char *after,
                      tfenc_model_options *options)
{
    char text[2048];
    encoder_job(text, sizeof text, precision);
    strncat(text, after, sizeof text - strlen(text) - 1);
    /* TFENC_PLUGIN_PATH (set by the test harness) leads to the build's plugins. */
    int status = compose_pieces(c, text, NULL);
    if (status == TFENC_OK)
        add_encoder_weights(c->store);
    *options = (tfenc_model_options){
        .job = c->job, .config = &c->config, .plan = &c->plan, .registry = c->registry,
        .weights = c->store, .limits = {.max_tokens = 128, .max_seq_len = 128, .max_seqs = 128},
        .first_step = 0, .end_step = c->plan.n_steps};
    return status;
}

void owned_batch_fill(owned_batch *b, int n_seq, int length, float value)
{
    memset(b, 0, sizeof *b);
    for (int s = 0; s <= n_seq; s++)
        b->seq_start[s] = s * length;
    for (int t = 0; t < n_seq * length; t++) {
        b->positions[t] = t % length;
        b->ids[t] = (t * 37 + 11) % ENCODER_VOCAB;
        for (int j = 0; j < ENCODER_D; j++)
            b->x[t * ENCODER_D + j] = value * sinf((float)(t * 7 + j));
    }
    b->batch = (tfenc_batch){.n_seq = n_seq, .n_tokens = n_seq * length,
                             .seq_start = b->seq_start, .token_ids = b->ids,
                             .token_types = b->types, .positions = b->positions, .x = b->x,
                             .rows = n_seq * length, .d_model = ENCODER_D};
}

int encoder_output(composed *c, tfenc_model_options options,
                          const tfenc_precision *step_precision, const owned_batch *in,
                          owned_batch *out)
{
    *out = *in;
    out->batch.seq_start = out->seq_start;
    out->batch.token_ids = out->ids;
    out->batch.token_types = out->types;
    out->batch.positions = out->positions;
    out->batch.x = out->x;
    options.step_precision = step_precision;
    tfenc_model *model = NULL;
    int status = tfenc_model_create(&ctx, &options, &model);
    if (status == TFENC_OK)
        status = tfenc_model_forward(&ctx, model, &out->batch);
    tfenc_model_destroy(model);
    return status;
}

double smallest_cosine(const owned_batch *a, const owned_batch *b)
{
    double lowest = 1.0;
    for (int r = 0; r < a->batch.rows; r++) {
        double dot = 0, aa = 0, bb = 0;
        for (int j = 0; j < ENCODER_D; j++) {
            dot += (double)a->x[r * ENCODER_D + j] * b->x[r * ENCODER_D + j];
            aa += (double)a->x[r * ENCODER_D + j] * a->x[r * ENCODER_D + j];
            bb += (double)b->x[r * ENCODER_D + j] * b->x[r * ENCODER_D + j];
        }
        lowest = fmin(lowest, dot / sqrt(aa * bb));
    }
    return lowest;
}
