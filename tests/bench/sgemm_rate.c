/* OpenBLAS sgemm speed at given GEMM shapes: the physical limit the benchmark
 * compares tfenc's achieved GFLOP/s with (tests/bench/bench.py runs it).
 *
 * usage: sgemm_rate [--seconds S] M:N:K:TRANSB ...
 * Each shape is C[M, N] = A[M, K] op(B), op(B) = B^T ([N, K] stored, as
 * nn.Linear weights are) when TRANSB is t, B ([K, N]) when it is n. Prints one
 * line per shape: "M N K TRANSB GFLOP/s". The thread count is OpenBLAS's own
 * (OPENBLAS_NUM_THREADS), so the caller sets it as tfenc runs. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float *random_matrix(size_t n)
{
    float *m = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (m == NULL)
        return NULL;
    /* Values in [-1, 1): denormals or zeros could take other code paths. */
    for (size_t i = 0; i < n; i++)
        m[i] = (float)((double)rand() / RAND_MAX * 2.0 - 1.0);
    return m;
}

/* Runs the shape for at least `seconds` after one warm-up call and returns GFLOP/s. */
static double measure(int m, int n, int k, int transpose_b, double seconds)
{
    float *a = random_matrix((size_t)m * k), *b = random_matrix((size_t)k * n);
    float *c = random_matrix((size_t)m * n);
    if (a == NULL || b == NULL || c == NULL) {
        free(a), free(b), free(c);
        return -1.0;
    }
    int ldb = transpose_b ? k : n;
    enum CBLAS_TRANSPOSE op = transpose_b ? CblasTrans : CblasNoTrans;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, op, m, n, k, 1.0f, a, k, b, ldb, 0.0f, c, n);
    long calls = 0;
    double start = now_seconds(), elapsed;
    do {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, op, m, n, k, 1.0f, a, k, b, ldb, 0.0f, c, n);
        calls++;
        elapsed = now_seconds() - start;
    } while (elapsed < seconds);
    free(a), free(b), free(c);
    return 2.0 * m * n * k * (double)calls / elapsed / 1e9;
}

int main(int argc, char **argv)
{
    double seconds = 0.5;
    int first = 1;
    if (argc > 2 && strcmp(argv[1], "--seconds") == 0) {
        seconds = atof(argv[2]);
        first = 3;
    }
    if (first >= argc) {
        fprintf(stderr, "usage: sgemm_rate [--seconds S] M:N:K:t|n ...\n");
        return 2;
    }
    for (int i = first; i < argc; i++) {
        int m, n, k;
        char op;
        if (sscanf(argv[i], "%d:%d:%d:%c", &m, &n, &k, &op) != 4 || m < 1 || n < 1 || k < 1 ||
            (op != 't' && op != 'n')) {
            fprintf(stderr, "sgemm_rate: bad shape '%s' (want M:N:K:t or M:N:K:n)\n", argv[i]);
            return 2;
        }
        double rate = measure(m, n, k, op == 't', seconds);
        if (rate < 0) {
            fprintf(stderr, "sgemm_rate: out of memory for shape %s\n", argv[i]);
            return 1;
        }
        printf("%d %d %d %c %.2f\n", m, n, k, op, rate);
    }
    return 0;
}
