/* The GEMM library's speed at given shapes and precision: the rooflines the
 * benchmark compares tfenc with (tests/bench/bench.py runs it).
 *
 * usage: gemm_rate [--seconds S] LIBRARY PRECISION M:N:K:B ...
 *   LIBRARY PRECISION: openblas f32 | onednn f32 | onednn bf16 | onednn int8
 * Each shape is C[M, N] = A[M, K] B', with B' stored as B says:
 *   w  a weight matrix, [N, K] as nn.Linear stores it; oneDNN may repack it
 *      once into the layout its kernel prefers (outside the timing), as an
 *      engine that prepares its weights at load does;
 *   t  an activation [N, K] used as is (attention's keys in Q K^T);
 *   n  an activation [K, N] used as is (attention's values in P V).
 * int8 is u8 activations x s8 weights (VNNI), f32 results scaled per output
 * column; bf16 is bf16 x bf16 with f32 results. Prints one line per shape:
 * "M N K B GFLOP/s IMPLEMENTATION" (oneDNN's kernel name, so a reference
 * fallback without native instructions shows as such; "cblas" for OpenBLAS).
 * Threads are the libraries' own: OPENBLAS_NUM_THREADS for OpenBLAS,
 * OMP_NUM_THREADS for oneDNN (Debian builds it on OpenMP); the caller sets
 * them. One library per process, so that one pool never spins beside the
 * other's. */
#include "config.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef HAVE_ONEDNN
#include <dnnl.h>
#endif

typedef struct {
    int m, n, k;
    char layout; /* w, t or n, as above */
} shape;

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Values in [low, high): zeros or denormals could take other code paths. */
static float *random_matrix(size_t n, float low, float high)
{
    float *m = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (m == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++)
        m[i] = low + (high - low) * (float)rand() / (float)RAND_MAX;
    return m;
}

/* One GEMM call of the library under test; returns 0 on success. */
typedef int (*gemm_call)(void *operands);

/* Calls `call` once to warm up, then again until `seconds` have passed;
 * GFLOP/s, or a negative number if a call failed. */
static double time_calls(gemm_call call, void *operands, double flops, double seconds)
{
    if (call(operands) != 0)
        return -1;
    long calls = 0;
    double start = now_seconds(), elapsed;
    do {
        if (call(operands) != 0)
            return -1;
        calls++;
        elapsed = now_seconds() - start;
    } while (elapsed < seconds);
    return flops * (double)calls / elapsed / 1e9;
}

typedef struct {
    const shape *s;
    const float *a, *b;
    float *c;
} openblas_operands;

static int openblas_call(void *operands)
{
    const openblas_operands *o = operands;
    const shape *s = o->s;
    int transposed = s->layout != 'n';
    cblas_sgemm(CblasRowMajor, CblasNoTrans, transposed ? CblasTrans : CblasNoTrans, s->m, s->n,
                s->k, 1.0f, o->a, s->k, o->b, transposed ? s->k : s->n, 0.0f, o->c, s->n);
    return 0;
}

static int openblas_rate(const shape *s, double seconds, double *out_rate)
{
    float *a = random_matrix((size_t)s->m * s->k, -1, 1);
    float *b = random_matrix((size_t)s->k * s->n, -1, 1);
    float *c = random_matrix((size_t)s->m * s->n, -1, 1);
    if (a == NULL || b == NULL || c == NULL) {
        free(a), free(b), free(c);
        return -1;
    }
    openblas_operands operands = {s, a, b, c};
    double rate = time_calls(openblas_call, &operands, 2.0 * s->m * s->n * s->k, seconds);
    free(a), free(b), free(c);
    *out_rate = rate;
    return rate < 0 ? -1 : 0;
}

#ifdef HAVE_ONEDNN

static dnnl_engine_t engine;
static dnnl_stream_t stream;

/* A memory of `desc` holding random values: made in f32 in `user_tag` and
 * reordered into `desc` (its type, its layout), outside any timing. */
static dnnl_status_t random_memory(const dnnl_memory_desc_t *desc, int rows, int columns,
                                   dnnl_format_tag_t user_tag, float low, float high,
                                   dnnl_memory_t *memory)
{
    dnnl_dims_t dims = {rows, columns};
    dnnl_memory_desc_t user_desc;
    dnnl_memory_t user = NULL;
    dnnl_primitive_desc_t reorder_desc = NULL;
    dnnl_primitive_t reorder = NULL;
    float *values = random_matrix((size_t)rows * columns, low, high);
    dnnl_status_t status = values == NULL ? dnnl_out_of_memory : dnnl_success;
    if (status == dnnl_success)
        status = dnnl_memory_desc_init_by_tag(&user_desc, 2, dims, dnnl_f32, user_tag);
    if (status == dnnl_success)
        status = dnnl_memory_create(&user, &user_desc, engine, values);
    if (status == dnnl_success)
        status = dnnl_memory_create(memory, desc, engine, DNNL_MEMORY_ALLOCATE);
    if (status == dnnl_success)
        status = dnnl_reorder_primitive_desc_create(&reorder_desc, &user_desc, engine, desc,
                                                    engine, NULL);
    if (status == dnnl_success)
        status = dnnl_primitive_create(&reorder, reorder_desc);
    if (status == dnnl_success) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, *memory}};
        status = dnnl_primitive_execute(reorder, stream, 2, args);
    }
    if (status == dnnl_success)
        status = dnnl_stream_wait(stream);
    if (reorder != NULL)
        dnnl_primitive_destroy(reorder);
    if (reorder_desc != NULL)
        dnnl_primitive_desc_destroy(reorder_desc);
    if (user != NULL)
        dnnl_memory_destroy(user);
    free(values);
    return status;
}

typedef struct {
    dnnl_primitive_t matmul;
    dnnl_exec_arg_t args[3];
} onednn_operands;

static int onednn_call(void *operands)
{
    onednn_operands *o = operands;
    return dnnl_primitive_execute(o->matmul, stream, 3, o->args) != dnnl_success ||
           dnnl_stream_wait(stream) != dnnl_success;
}

static int onednn_rate(const shape *s, const char *precision, double seconds, double *out_rate,
                       char *implementation, size_t implementation_size)
{
    int int8 = strcmp(precision, "int8") == 0, bf16 = strcmp(precision, "bf16") == 0;
    dnnl_data_type_t source_type = int8 ? dnnl_u8 : bf16 ? dnnl_bf16 : dnnl_f32;
    dnnl_data_type_t weight_type = int8 ? dnnl_s8 : bf16 ? dnnl_bf16 : dnnl_f32;
    /* B' is [K, N] to oneDNN: tag ba reads an [N, K] array, ab a [K, N] one. */
    dnnl_format_tag_t stored = s->layout == 'n' ? dnnl_ab : dnnl_ba;
    dnnl_dims_t source_dims = {s->m, s->k}, weight_dims = {s->k, s->n}, dest_dims = {s->m, s->n};
    dnnl_memory_desc_t source_desc, weight_desc, dest_desc;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t matmul_desc = NULL;
    dnnl_primitive_t matmul = NULL;
    dnnl_memory_t memory[3] = {NULL, NULL, NULL};
    float *scales = NULL;
    dnnl_status_t status = dnnl_memory_desc_init_by_tag(&source_desc, 2, source_dims,
                                                        source_type, dnnl_ab);
    if (status == dnnl_success)
        status = dnnl_memory_desc_init_by_tag(&weight_desc, 2, weight_dims, weight_type,
                                              s->layout == 'w' ? dnnl_format_tag_any : stored);
    if (status == dnnl_success)
        status = dnnl_memory_desc_init_by_tag(&dest_desc, 2, dest_dims, dnnl_f32, dnnl_ab);
    dnnl_matmul_desc_t desc;
    if (status == dnnl_success)
        status = dnnl_matmul_desc_init(&desc, &source_desc, &weight_desc, NULL, &dest_desc);
    if (status == dnnl_success)
        status = dnnl_primitive_attr_create(&attr);
    if (status == dnnl_success && int8) {
        /* Dequantization: one scale per output column (per-channel weights). */
        scales = random_matrix((size_t)s->n, 0.001f, 0.01f);
        status = scales == NULL ? dnnl_out_of_memory
                                : dnnl_primitive_attr_set_output_scales(attr, s->n, 1 << 1, scales);
    }
    if (status == dnnl_success)
        status = dnnl_primitive_desc_create(&matmul_desc, &desc, attr, engine, NULL);
    if (status == dnnl_success) {
        const char *name = NULL;
        if (dnnl_primitive_desc_query(matmul_desc, dnnl_query_impl_info_str, 0, &name) ==
                dnnl_success &&
            name != NULL)
            snprintf(implementation, implementation_size, "%s", name);
        status = dnnl_primitive_create(&matmul, matmul_desc);
    }
    const dnnl_memory_desc_t *chosen[3] = {NULL, NULL, NULL};
    if (status == dnnl_success) {
        chosen[0] = dnnl_primitive_desc_query_md(matmul_desc, dnnl_query_src_md, 0);
        chosen[1] = dnnl_primitive_desc_query_md(matmul_desc, dnnl_query_weights_md, 0);
        chosen[2] = dnnl_primitive_desc_query_md(matmul_desc, dnnl_query_dst_md, 0);
        /* u8 activations over their range; the others in [-1, 1). */
        status = random_memory(chosen[0], s->m, s->k, dnnl_ab, int8 ? 0 : -1, int8 ? 255 : 1,
                               &memory[0]);
    }
    if (status == dnnl_success)
        status = random_memory(chosen[1], s->k, s->n, stored, int8 ? -127 : -1, int8 ? 127 : 1,
                               &memory[1]);
    if (status == dnnl_success)
        status = random_memory(chosen[2], s->m, s->n, dnnl_ab, -1, 1, &memory[2]);
    double rate = -1;
    if (status == dnnl_success) {
        onednn_operands operands = {matmul,
                                    {{DNNL_ARG_SRC, memory[0]},
                                     {DNNL_ARG_WEIGHTS, memory[1]},
                                     {DNNL_ARG_DST, memory[2]}}};
        rate = time_calls(onednn_call, &operands, 2.0 * s->m * s->n * s->k, seconds);
    }
    for (int i = 0; i < 3; i++)
        if (memory[i] != NULL)
            dnnl_memory_destroy(memory[i]);
    if (matmul != NULL)
        dnnl_primitive_destroy(matmul);
    if (matmul_desc != NULL)
        dnnl_primitive_desc_destroy(matmul_desc);
    if (attr != NULL)
        dnnl_primitive_attr_destroy(attr);
    free(scales);
    *out_rate = rate;
    return rate < 0 ? -1 : 0;
}

#endif

int main(int argc, char **argv)
{
    double seconds = 0.5;
    int first = 1;
    if (argc > 2 && strcmp(argv[1], "--seconds") == 0) {
        seconds = atof(argv[2]);
        first = 3;
    }
    if (argc - first < 3) {
        fprintf(stderr, "usage: gemm_rate [--seconds S] openblas|onednn f32|bf16|int8 "
                        "M:N:K:w|t|n ...\n");
        return 2;
    }
    const char *library = argv[first], *precision = argv[first + 1];
    int openblas = strcmp(library, "openblas") == 0;
    if (!(openblas && strcmp(precision, "f32") == 0) &&
        !(strcmp(library, "onednn") == 0 &&
          (strcmp(precision, "f32") == 0 || strcmp(precision, "bf16") == 0 ||
           strcmp(precision, "int8") == 0))) {
        fprintf(stderr, "gemm_rate: no %s %s (openblas f32, onednn f32, bf16 or int8)\n", library,
                precision);
        return 2;
    }
#ifdef HAVE_ONEDNN
    if (!openblas && (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success ||
                      dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) !=
                          dnnl_success)) {
        fprintf(stderr, "gemm_rate: no oneDNN CPU engine\n");
        return 1;
    }
#else
    if (!openblas) {
        fprintf(stderr, "gemm_rate: built without oneDNN (install libdnnl-dev and reconfigure)\n");
        return 1;
    }
#endif
    for (int i = first + 2; i < argc; i++) {
        shape s;
        if (sscanf(argv[i], "%d:%d:%d:%c", &s.m, &s.n, &s.k, &s.layout) != 4 || s.m < 1 ||
            s.n < 1 || s.k < 1 || strchr("wtn", s.layout) == NULL) {
            fprintf(stderr, "gemm_rate: bad shape '%s' (want M:N:K:w, M:N:K:t or M:N:K:n)\n",
                    argv[i]);
            return 2;
        }
        double rate = 0;
        char implementation[128] = "cblas";
        int failed = openblas ? openblas_rate(&s, seconds, &rate) : -1;
#ifdef HAVE_ONEDNN
        if (!openblas)
            failed = onednn_rate(&s, precision, seconds, &rate, implementation,
                                 sizeof implementation);
#endif
        if (failed) {
            fprintf(stderr, "gemm_rate: %s %s failed at shape %s\n", library, precision, argv[i]);
            return 1;
        }
        printf("%d %d %d %c %.3f %s\n", s.m, s.n, s.k, s.layout, rate, implementation);
    }
#ifdef HAVE_ONEDNN
    if (!openblas) {
        dnnl_stream_destroy(stream);
        dnnl_engine_destroy(engine);
    }
#endif
    return 0;
}
