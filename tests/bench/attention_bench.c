/* Tokens/s of one mha layer alone (Q/K/V map, attention, output map) on one
 * sequence, for two builds of the attention plugin side by side: each
 * repetition runs A then B (then B then A), so that the load of a shared
 * machine falls on both alike. Not a test: it asserts nothing.
 *
 *   make tests/bench/attention_bench
 *   tests/bench/attention_bench OLD.so NEW.so [d heads reps longest]
 *
 * or two paths of one build, a job line added to A's or B's section:
 *
 *   ATTENTION_BENCH_B='kernel = products' tests/bench/attention_bench X.so X.so
 *
 * prints, per length (128, 512, 2048, 8192), window (0, 128) and precision
 * (fp32, bf16 where it runs; ATTENTION_BENCH_PRECISION=bf16 or fp32 runs
 * one), the best tokens per CPU second of each plugin (with
 * OMP_NUM_THREADS=1: tokens/s of one core) and B / A. */
#include <dlfcn.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/context.h"
#include "job/jobfile.h"
#include "job/params.h"
#include "matrix/matrix.h"
#include "model/weights.h"

typedef const tfenc_layer_descriptor *(*descriptor_function)(unsigned);

/* CPU seconds of the process, not wall time: on a machine shared with
 * other jobs (the load average far above the cores) the wall time mostly
 * measures the neighbours; with one thread this is the time the layer
 * would take on a core of its own (caches shared aside). */
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void fill(float *values, size_t count, double amplitude, unsigned long long *state)
{
    for (size_t i = 0; i < count; i++) {
        *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
        values[i] = (float)(amplitude * ((double)(*state >> 11) / (double)(1ULL << 53) * 2 - 1));
    }
}

/* Seconds of one forward() of a fresh layer of `descriptor`, or -1. */
static double run_once(const tfenc_layer_descriptor *descriptor, const char *extra, int d,
                       int heads, int length, int window, tfenc_precision precision,
                       const float *weights, const float *x)
{
    char text[512];
    snprintf(text, sizeof text, "[attention]\nn_heads = %d\nwindow = %d\nposition = alibi\n%s\n",
             heads, window, extra != NULL ? extra : "");
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_jobfile *job = NULL;
    tfenc_weight_store *store = NULL;
    tfenc_weights *group = NULL;
    double seconds = -1;
    if (tfenc_jobfile_parse_string(&ctx, "bench.ini", text, &job) != TFENC_OK ||
        tfenc_weight_store_create_memory(&ctx, &store) != TFENC_OK)
        goto done;
    int64_t qkv_dims[2] = {3 * d, d}, bias_dims[2] = {3 * d, 0}, out_dims[2] = {d, d},
            out_bias_dims[2] = {d, 0};
    if (tfenc_weight_store_add(&ctx, store, "/a/qkv_weight", 2, qkv_dims, weights) != TFENC_OK ||
        tfenc_weight_store_add(&ctx, store, "/a/qkv_bias", 1, bias_dims, weights) != TFENC_OK ||
        tfenc_weight_store_add(&ctx, store, "/a/out_weight", 2, out_dims, weights) != TFENC_OK ||
        tfenc_weight_store_add(&ctx, store, "/a/out_bias", 1, out_bias_dims, weights) != TFENC_OK)
        goto done;
    const tfenc_weight_options options = {.precision = precision};
    if (tfenc_weight_store_group(&ctx, store, "/a", &options, &group) != TFENC_OK)
        goto done;
    tfenc_params params;
    tfenc_params_bind(&params, &ctx, job, tfenc_jobfile_find(job, "attention"));
    tfenc_limits limits = {.max_tokens = length, .max_seq_len = length, .max_seqs = 1};
    tfenc_layer_init init = {.struct_size = sizeof init, .name = "attention", .params = &params,
                             .weights = group,
                             .model = {.d_model = d, .max_positions = length, .n_layers = 1,
                                       .layer_index = -1},
                             .limits = limits};
    void *layer = NULL;
    if (descriptor->create(&ctx, &init, &layer) != TFENC_OK)
        goto done;
    size_t bytes = (descriptor->workspace_size(layer, &limits) + 63) / 64 * 64 + 64;
    void *workspace = aligned_alloc(64, bytes);
    float *activations = aligned_alloc(64, ((sizeof(float) * length * d + 63) / 64 + 1) * 64);
    int32_t *zeros = calloc((size_t)length + 1, sizeof(int32_t));
    int32_t *positions = malloc(sizeof(int32_t) * (length + 1));
    for (int t = 0; t < length; t++)
        positions[t] = t;
    int32_t seq_start[2] = {0, length};
    memcpy(activations, x, sizeof(float) * length * d);
    tfenc_batch batch = {.n_seq = 1, .n_tokens = length, .seq_start = seq_start,
                         .token_ids = zeros, .token_types = zeros, .positions = positions,
                         .x = activations, .rows = length, .d_model = d};
    double start = now();
    if (descriptor->forward(layer, &ctx, &batch, workspace) == TFENC_OK)
        seconds = now() - start;
    descriptor->destroy(layer);
    free(workspace);
    free(activations);
    free(zeros);
    free(positions);
done:
    if (seconds < 0)
        fprintf(stderr, "attention_bench: %s\n", tfenc_context_message(&ctx));
    if (store != NULL)
        tfenc_weight_store_close(store);
    if (job != NULL)
        tfenc_jobfile_destroy(job);
    return seconds;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s A.so B.so [d heads reps longest]\n", argv[0]);
        return 2;
    }
    const tfenc_layer_descriptor *plugins[2];
    const char *extra[2] = {getenv("ATTENTION_BENCH_A"), getenv("ATTENTION_BENCH_B")};
    for (int p = 0; p < 2; p++) {
        void *handle = dlopen(argv[1 + p], RTLD_NOW | RTLD_LOCAL);
        descriptor_function entry = handle != NULL ? (descriptor_function)(uintptr_t)dlsym(
                                                         handle, "tfenc_plugin_descriptor")
                                                   : NULL;
        if (entry == NULL) {
            fprintf(stderr, "attention_bench: %s: %s\n", argv[1 + p], dlerror());
            return 1;
        }
        plugins[p] = entry(0);
    }
    const int d = argc > 3 ? atoi(argv[3]) : 768, heads = argc > 4 ? atoi(argv[4]) : 12;
    const int reps = argc > 5 ? atoi(argv[5]) : 3;
    const int longest = argc > 6 ? atoi(argv[6]) : 8192; /* lengths above it are left out */
    static const int lengths[] = {128, 512, 2048, 8192};
    static const int windows[] = {0, 128};
    const tfenc_precision precisions[] = {TFENC_PRECISION_FP32, TFENC_PRECISION_BF16};
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    const int bf16 = tfenc_matrix_check_precision(&ctx, TFENC_PRECISION_BF16) == TFENC_OK;
    float *weights = malloc(sizeof(float) * 3 * d * d);
    float *x = malloc(sizeof(float) * 8192 * d);
    unsigned long long state = 1;
    fill(weights, (size_t)3 * d * d, sqrt(3.0 / d), &state);
    fill(x, (size_t)8192 * d, 1.0, &state);
    printf("d=%d heads=%d threads=%d reps=%d A: %s B: %s\n"
           "precision,length,window,A_tokens_s,B_tokens_s,B_over_A\n",
           d, heads, omp_get_max_threads(), reps, extra[0] != NULL ? extra[0] : "-",
           extra[1] != NULL ? extra[1] : "-");
    /* ATTENTION_BENCH_PRECISION=bf16 (or fp32): that precision alone */
    const char *only = getenv("ATTENTION_BENCH_PRECISION");
    for (int p = 0; p < 2 - !bf16; p++) {
        if (only != NULL && strcmp(only, p == 0 ? "fp32" : "bf16") != 0)
            continue;
        for (size_t l = 0; l < 4 && lengths[l] <= longest; l++)
            for (size_t w = 0; w < 2; w++) {
                double best[2] = {INFINITY, INFINITY};
                for (int r = 0; r < reps; r++)
                    for (int k = 0; k < 2; k++) {
                        int which = (r + k) % 2; /* A B, B A, ... */
                        double s = run_once(plugins[which], extra[which], d, heads, lengths[l],
                                            windows[w], precisions[p], weights, x);
                        if (s < 0)
                            return 1;
                        best[which] = s < best[which] ? s : best[which];
                    }
                printf("%s,%d,%d,%.0f,%.0f,%.2f\n", p == 0 ? "fp32" : "bf16", lengths[l],
                       windows[w], lengths[l] / best[0], lengths[l] / best[1], best[0] / best[1]);
                fflush(stdout);
            }
    }
    free(weights);
    free(x);
    return 0;
}
