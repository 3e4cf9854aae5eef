/* OpenBLAS through dlopen, once per process.
 *
 * Why not link it: a library's constructor runs before main(), and
 * OpenBLAS's reads OPENBLAS_NUM_THREADS there and starts a pool of one
 * thread per core, which spins about 0.1 CPU-s before tfenc could turn it
 * to one thread (every rank of every job paid it). Loaded here, the pool is
 * off from the start: the variable is set to 1 for the length of dlopen and
 * then put back as it was, because the user's value still means the
 * rank's thread count (tfenc_matrix_set_threads reads it). The same moment
 * is where a job can choose OpenBLAS's kernel family (OPENBLAS_CORETYPE)
 * before OpenBLAS reads it.
 *
 * The library is found as a linked one would be (its soname, which
 * configure read from the library it checked: LD_LIBRARY_PATH, libtfenc's
 * RUNPATH, the loader's cache); RTLD_LOCAL keeps its symbols out of the
 * process's namespace, where a plugin's own BLAS might meet them. */
#include "config.h"

#include "matrix/openblas.h"

#include <dlfcn.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#ifndef TFENC_OPENBLAS_SONAME
#define TFENC_OPENBLAS_SONAME "libopenblas.so.0"
#endif

/* The CBLAS constants, as every cblas.h defines them. */
enum { ROW_MAJOR = 101, NO_TRANSPOSE = 111, TRANSPOSE = 112 };

typedef void (*sgemm_function)(int order, int transpose_a, int transpose_b, int m, int n, int k,
                               float alpha, const float *a, int lda, const float *b, int ldb,
                               float beta, float *c, int ldc);
typedef char *(*core_name_function)(void);
typedef void (*set_threads_function)(int threads);

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static sgemm_function sgemm;
static core_name_function core_name;
static char load_failure[512]; /* empty when the load succeeded */

/* Sets OPENBLAS_NUM_THREADS to 1 while OpenBLAS starts, then restores it. */
static void *open_without_pool(void)
{
    const char *name = "OPENBLAS_NUM_THREADS";
    const char *user = getenv(name);
    char *saved = user != NULL ? strdup(user) : NULL;
    if (user != NULL && saved == NULL)
        return NULL;
    setenv(name, "1", 1);
    void *library = dlopen(TFENC_OPENBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (saved != NULL)
        setenv(name, saved, 1);
    else
        unsetenv(name);
    free(saved);
    return library;
}

static void load(void)
{
    void *library = open_without_pool();
    if (library == NULL) {
        const char *reason = dlerror();
        snprintf(load_failure, sizeof load_failure, "cannot load %s: %s", TFENC_OPENBLAS_SONAME,
                 reason != NULL ? reason : "out of memory");
        return;
    }
    /* dlsym returns void *; POSIX guarantees it converts to a function
     * pointer, which ISO C does not say. */
    *(void **)&sgemm = dlsym(library, "cblas_sgemm");
    *(void **)&core_name = dlsym(library, "openblas_get_corename");
    set_threads_function set_threads;
    *(void **)&set_threads = dlsym(library, "openblas_set_num_threads");
    if (sgemm == NULL || set_threads == NULL) {
        snprintf(load_failure, sizeof load_failure,
                 "%s has no cblas_sgemm or openblas_set_num_threads: not OpenBLAS?",
                 TFENC_OPENBLAS_SONAME);
        sgemm = NULL;
        return;
    }
    /* A library that ignored the variable (another build's constructor)
     * still runs single-threaded from here on. */
    set_threads(1);
}

int tfenc_openblas_load(tfenc_context *ctx)
{
    pthread_once(&load_once, load);
    if (sgemm == NULL)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "OpenBLAS (fp32 products): %s (install the Debian package "
                           "libopenblas0, or point LD_LIBRARY_PATH at the OpenBLAS "
                           "tfenc was built with)",
                           load_failure[0] != '\0' ? load_failure : "not loaded");
    return TFENC_OK;
}

void tfenc_openblas_sgemm(int b_transposed, int m, int n, int k, float alpha, const float *a,
                          int a_row_stride, const float *b, int b_row_stride, float beta, float *c,
                          int c_row_stride)
{
    sgemm(ROW_MAJOR, NO_TRANSPOSE, b_transposed ? TRANSPOSE : NO_TRANSPOSE, m, n, k, alpha, a,
          a_row_stride, b, b_row_stride, beta, c, c_row_stride);
}

const char *tfenc_openblas_core_name(void)
{
    if (sgemm == NULL)
        return "not loaded";
    return core_name != NULL ? core_name() : "unknown (no openblas_get_corename)";
}
