/* OpenBLAS as the matrix backend loads it (core/matrix/openblas.c): no
 * thread of its own from the program's start to its first product, the
 * user's OPENBLAS_NUM_THREADS left as it was (it still means the rank's
 * thread count), and the products right.
 *
 * The program starts itself again with OPENBLAS_NUM_THREADS=7, whatever the
 * test environment set (tests/environment.sh sets 1, which would hide a
 * pool): a linked OpenBLAS would start min(7, cores) - 1 threads before
 * main(). On a machine of one core no pool exists to find; the test says so. */
#include "config.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness/cunit_main.h"
#include "base/aligned.h"
#include "base/context.h"
#include "matrix/matrix.h"
#include "matrix/openblas.h"

#define USER_THREADS "7"

/* glibc passes the program's arguments to its constructors. */
__attribute__((constructor)) static void start_with_user_threads(int argc, char **argv)
{
    const char *value = getenv("OPENBLAS_NUM_THREADS");
    if (value != NULL && strcmp(value, USER_THREADS) == 0)
        return;
    setenv("OPENBLAS_NUM_THREADS", USER_THREADS, 1);
    execv("/proc/self/exe", argv);
    perror("test_openblas: execv /proc/self/exe");
    _exit(1);
    (void)argc;
}

/* The name a thread carries (its comm), "" when unreadable. */
static void thread_name(const char *task, char *name, size_t size)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", task);
    name[0] = '\0';
    FILE *file = fopen(path, "r");
    if (file == NULL)
        return;
    if (fgets(name, (int)size, file) == NULL)
        name[0] = '\0';
    fclose(file);
}

/* Threads that carry the main thread's name: the main thread, and every
 * pool thread that was never named (OpenBLAS's, OpenMP's). Threads that
 * name themselves (the allocator Arrow's library brings,
 * "jemalloc_bg_thd") are not what this test is about. */
static int unnamed_threads(void)
{
    char own[64], name[64];
    char main_task[32];
    snprintf(main_task, sizeof main_task, "%d", (int)getpid());
    thread_name(main_task, own, sizeof own);
    DIR *tasks = opendir("/proc/self/task");
    if (tasks == NULL)
        return -1;
    int count = 0;
    for (struct dirent *entry; (entry = readdir(tasks)) != NULL;) {
        if (entry->d_name[0] == '.')
            continue;
        thread_name(entry->d_name, name, sizeof name);
        count += strcmp(name, own) == 0;
    }
    closedir(tasks);
    return count;
}

/* The unnamed threads once those that name themselves have done so: a
 * thread is born with its creator's name and takes its own a moment later
 * (the allocator's, started by a library's constructor), so a count of 1
 * may take a few milliseconds to appear; an OpenBLAS pool never names its
 * threads, and keeps the count above 1 for the whole second. */
static int settled_unnamed_threads(void)
{
    int count = unnamed_threads();
    for (int waited = 0; count > 1 && waited < 100; waited++) {
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
        count = unnamed_threads();
    }
    return count;
}

static void test_no_pool_before_the_first_product(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 2)
        printf("\n  one core: a linked OpenBLAS would start no pool either; nothing to tell apart\n");
    /* Nothing has started a thread yet: not OpenMP (no parallel region
     * ran), not OpenBLAS (not loaded until a product is made). */
    CU_ASSERT_EQUAL(settled_unnamed_threads(), 1);
    CU_ASSERT_STRING_EQUAL(tfenc_openblas_core_name(), "not loaded");
}

static void test_product_keeps_one_thread(void)
{
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_matrix_set_threads(1);
    enum { ROWS = 37, IN = 48, OUT = 29 };
    float *weight = tfenc_aligned_alloc(sizeof(float) * OUT * IN);
    float bias[OUT], x[ROWS * IN], y[ROWS * OUT];
    CU_ASSERT_FATAL(weight != NULL);
    for (int i = 0; i < OUT * IN; i++)
        weight[i] = (float)((i * 37 % 101) - 50) / 64.0f;
    for (int i = 0; i < OUT; i++)
        bias[i] = (float)i / 8.0f;
    for (int i = 0; i < ROWS * IN; i++)
        x[i] = (float)((i * 13 % 59) - 29) / 32.0f;
    tfenc_matrix_scratch *scratch = NULL;
    tfenc_linear *linear = NULL;
    tfenc_matrix_linear_options options = {.precision = TFENC_PRECISION_FP32};
    CU_ASSERT_EQUAL_FATAL(tfenc_matrix_scratch_create(&ctx, &scratch), TFENC_OK);
    int status = tfenc_matrix_linear_create(&ctx, &options, weight, bias, OUT, IN, scratch, &linear);
    CU_ASSERT_EQUAL_FATAL(status, TFENC_OK);
    CU_ASSERT_EQUAL(tfenc_linear_forward(&ctx, linear, x, ROWS, y), TFENC_OK);
    printf("\n  OpenBLAS core: %s; threads after an fp32 product: %d\n", tfenc_openblas_core_name(),
           settled_unnamed_threads());
    CU_ASSERT_EQUAL(settled_unnamed_threads(), 1);
    CU_ASSERT_STRING_NOT_EQUAL(tfenc_openblas_core_name(), "not loaded");
    /* The user's value, put back after the load. */
    const char *value = getenv("OPENBLAS_NUM_THREADS");
    CU_ASSERT_PTR_NOT_NULL_FATAL(value);
    CU_ASSERT_STRING_EQUAL(value, USER_THREADS);
    /* The product against a float64 sum: the inputs are exact in float,
     * so only the accumulation's rounding differs (48 terms of |.| < 1). */
    double worst = 0.0;
    for (int r = 0; r < ROWS; r++)
        for (int o = 0; o < OUT; o++) {
            double sum = bias[o];
            for (int i = 0; i < IN; i++)
                sum += (double)x[r * IN + i] * (double)((float)((((o * IN + i) * 37) % 101) - 50) / 64.0f);
            double error = fabs(sum - y[r * OUT + o]);
            worst = error > worst ? error : worst;
        }
    CU_ASSERT(worst < 1e-4);
    tfenc_matrix_linear_destroy(linear);
    tfenc_matrix_scratch_destroy(scratch);
}

/* The fallback line says fp32 runs slower only when the kernels running
 * are narrower than those asked for: Debian 12's 0.3.21, asked for
 * SapphireRapids on an Emerald Rapids, runs Cooperlake, whose sgemm is the
 * same AVX-512 kernel, and said so on every job's stderr. */
static void test_families_by_width(void)
{
    CU_ASSERT_FALSE(tfenc_openblas_runs_narrower("Cooperlake", "SapphireRapids"));
    CU_ASSERT_FALSE(tfenc_openblas_runs_narrower("SkylakeX", "SapphireRapids"));
    CU_ASSERT_FALSE(tfenc_openblas_runs_narrower("SKYLAKEX", "Cooperlake"));
    CU_ASSERT_FALSE(tfenc_openblas_runs_narrower("Zen", "Haswell"));
    CU_ASSERT_TRUE(tfenc_openblas_runs_narrower("Prescott", "SapphireRapids"));
    CU_ASSERT_TRUE(tfenc_openblas_runs_narrower("Haswell", "SkylakeX"));
    CU_ASSERT_TRUE(tfenc_openblas_runs_narrower("Sandybridge", "Haswell"));
    CU_ASSERT_TRUE(tfenc_openblas_runs_narrower("Core2", "Haswell"));
    CU_ASSERT_TRUE(tfenc_openblas_runs_narrower(NULL, "Haswell"));
    CU_ASSERT_EQUAL(tfenc_openblas_family_width("generic"), 0);
    CU_ASSERT_EQUAL(tfenc_openblas_family_width("SapphireRapids"), 3);
    /* Whatever this machine is: a loaded library's line agrees with the rule. */
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    if (tfenc_openblas_load(&ctx) == TFENC_OK) {
        char line[512];
        const int said = tfenc_openblas_fallback(line, sizeof line);
        printf("\n  OpenBLAS runs %s (width %d)%s%s\n", tfenc_openblas_core_name(),
               tfenc_openblas_family_width(tfenc_openblas_core_name()), said ? ": " : "",
               said ? line : "");
        CU_ASSERT_EQUAL(said != 0, line[0] != '\0');
    }
}

static const test_case openblas_cases[] = {
    {"no OpenBLAS thread before the first product", test_no_pool_before_the_first_product},
    {"an fp32 product loads it without a pool", test_product_keeps_one_thread},
    {"kernel families compared by their fp32 width", test_families_by_width},
    {NULL, NULL}};

const test_suite test_suites[] = {{"openblas", NULL, NULL, openblas_cases},
                                  {NULL, NULL, NULL, NULL}};
