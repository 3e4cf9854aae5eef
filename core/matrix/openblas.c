/* OpenBLAS through dlopen, once per process.
 *
 * Why not link it: a library's constructor runs before main(), and
 * OpenBLAS's reads OPENBLAS_NUM_THREADS there and starts a pool of one
 * thread per core, which spins about 0.1 CPU-s before tfenc could turn it
 * to one thread (every rank of every job paid it). Loaded here, the pool is
 * off from the start: the variable is set to 1 for the length of dlopen and
 * then put back as it was, because the user's value still means the
 * rank's thread count (tfenc_matrix_set_threads reads it).
 *
 * The same moment chooses its kernels. OpenBLAS names the CPU by its model
 * number, and one older than the CPU falls back to its oldest kernels
 * without a word (Debian 12's 0.3.21 on Emerald Rapids ran "Prescott", 4.7x
 * slower than its SapphireRapids kernels). Which kernels run follows from
 * the CPU's instruction sets (and the system's consent to their state, as
 * XGETBV reports it), so unless the user set OPENBLAS_CORETYPE, tfenc sets
 * it for the length of dlopen to the family those sets run, and reads back
 * what OpenBLAS took: a library that lacks the family says so through
 * tfenc_openblas_fallback. The sets say which kernels can run, not which
 * run fastest (on an AMD EPYC with AVX-512, OpenBLAS's Haswell kernels
 * took 8% less CPU time than its Cooperlake ones, which both its own
 * detection and this choose): timing the families on the job is the next
 * step.
 *
 * The library is found as a linked one would be (its soname, which
 * configure read from the library it checked: LD_LIBRARY_PATH, libtfenc's
 * RUNPATH, the loader's cache); RTLD_LOCAL keeps its symbols out of the
 * process's namespace, where a plugin's own BLAS might meet them. */
#include "config.h"

#include "matrix/openblas.h"

#include <cpuid.h>
#include <dlfcn.h>
#include <stdio.h>
#include <strings.h>
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
typedef char *(*config_function)(void);
typedef void (*set_threads_function)(int threads);

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static sgemm_function sgemm;
static core_name_function core_name;
static config_function config;
static char load_failure[512]; /* empty when the load succeeded */
static const char *wanted_core;  /* the family asked for, or NULL (the user's, or none) */

/* ------------------------------------------------- the CPU's kernel family */

static unsigned long long enabled_state(void)
{
    unsigned int low, high;
    __asm__ volatile("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
    return ((unsigned long long)high << 32) | low;
}

/* OpenBLAS's name of the best kernel family for this CPU's instruction
 * sets, highest first: AMX with AVX512_BF16 (SapphireRapids), AVX512_BF16
 * (Cooperlake), AVX-512 F, BW, VL (SkylakeX), AVX2 with FMA (Haswell); NULL
 * below that, where OpenBLAS's own choice stands. */
static const char *core_for_cpu(void)
{
    unsigned int a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE) || !(c & bit_AVX))
        return NULL;
    const int fma = (c & bit_FMA) != 0;
    const unsigned long long state = enabled_state();
    const int avx_state = (state & 0x6) == 0x6;      /* SSE and AVX registers */
    const int avx512_state = (state & 0xe6) == 0xe6; /* and the mask and upper ZMM ones */
    if (!avx_state || !__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return NULL;
    const int avx2 = (b & bit_AVX2) != 0;
    const int avx512 = (b & bit_AVX512F) && (b & bit_AVX512BW) && (b & bit_AVX512VL) && avx512_state;
    const int amx = (d & (1u << 22)) && (d & (1u << 24)); /* AMX-BF16, AMX-TILE */
    unsigned int sub_a = 0, sub_b, sub_c, sub_d;
    const int bf16 = __get_cpuid_count(7, 1, &sub_a, &sub_b, &sub_c, &sub_d) && (sub_a & (1u << 5));
    if (avx512 && bf16 && amx)
        return "SapphireRapids";
    if (avx512 && bf16)
        return "Cooperlake";
    if (avx512)
        return "SkylakeX";
    if (avx2 && fma)
        return "Haswell";
    return NULL;
}

/* Sets OPENBLAS_NUM_THREADS to 1 and, unless the user set it,
 * OPENBLAS_CORETYPE to the CPU's family while OpenBLAS starts, then puts
 * both back as they were. */
static void *open_without_pool(void)
{
    const char *threads = "OPENBLAS_NUM_THREADS", *core = "OPENBLAS_CORETYPE";
    const char *user = getenv(threads);
    char *saved = user != NULL ? strdup(user) : NULL;
    if (user != NULL && saved == NULL)
        return NULL;
    setenv(threads, "1", 1);
    wanted_core = getenv(core) == NULL ? core_for_cpu() : NULL;
    if (wanted_core != NULL)
        setenv(core, wanted_core, 1);
    void *library = dlopen(TFENC_OPENBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (saved != NULL)
        setenv(threads, saved, 1);
    else
        unsetenv(threads);
    if (wanted_core != NULL)
        unsetenv(core);
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
    *(void **)&config = dlsym(library, "openblas_get_config");
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

const char *tfenc_openblas_config(void)
{
    if (sgemm == NULL)
        return "not loaded";
    return config != NULL ? config() : "OpenBLAS (no openblas_get_config)";
}

int tfenc_openblas_family_width(const char *family)
{
    static const struct {
        const char *name;
        int width;
    } families[] = {
        {"SapphireRapids", 3}, {"Cooperlake", 3},  {"SkylakeX", 3},   {"Haswell", 2},
        {"Zen", 2},            {"Excavator", 2},   {"Sandybridge", 1}, {"Bulldozer", 1},
        {"Piledriver", 1},     {"Steamroller", 1},
    };
    for (size_t i = 0; family != NULL && i < sizeof families / sizeof families[0]; i++)
        if (strcasecmp(family, families[i].name) == 0)
            return families[i].width;
    return 0;
}

int tfenc_openblas_runs_narrower(const char *running, const char *wanted)
{
    return tfenc_openblas_family_width(running) < tfenc_openblas_family_width(wanted);
}

int tfenc_openblas_fallback(char *line, size_t size)
{
    line[0] = '\0';
    if (sgemm == NULL || wanted_core == NULL || core_name == NULL)
        return 0;
    /* Debian 12's 0.3.21 asked for SapphireRapids runs Cooperlake, whose
     * sgemm is the same AVX-512 kernel: only a narrower one is news. */
    const char *running = core_name();
    if (!tfenc_openblas_runs_narrower(running, wanted_core))
        return 0;
    snprintf(line, size,
             "fp32 products: OpenBLAS (%s) runs its %s kernels, not the %s ones this CPU's "
             "instruction sets run (it does not know them): fp32 runs slower; [model] "
             "fp32_products = onednn (or auto, which measures both), an OpenBLAS built for "
             "this CPU, or precision = bf16, runs at the CPU's speed",
             TFENC_OPENBLAS_SONAME, running != NULL ? running : "unknown", wanted_core);
    return 1;
}
