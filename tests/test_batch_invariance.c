/* One row, one result: a linear map's output row is bitwise a function of
 * its input row alone (core/matrix/matrix.c, "rows in fixed blocks"),
 * whatever the batch around it, its place in that batch and the thread
 * count, at fp32 (on OpenBLAS and on oneDNN), bf16 and int8, for every input and output
 * element type, fused activation and residual (whose add is bitwise a pass of its own). And,
 * looking inside: every product the libraries
 * are asked for has its precision's block of rows
 * (tfenc_matrix_block_rows), whatever the batch (the
 * test takes the place of cblas's and oneDNN's entry points, counts the
 * rows of each call and hands it on).
 *
 * The inputs span six orders of magnitude, so that two orders of summation
 * would round apart. */
#include "config.h"

#include <dlfcn.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_ONEDNN
#include <dnnl.h>
#endif

#include "harness/cunit_main.h"
#include "base/aligned.h"
#include "base/context.h"
#include "matrix/matrix.h"
#include "matrix/openblas.h"

enum { IN = 96, OUT = 80, ROWS = 300 };

/* ------------------------------------------ the rows of every product */

static int products_seen, products_of_other_sizes, other_size, block_rows;
static int onednn_products; /* of products_seen, those oneDNN ran */

static void count_rows(int rows)
{
    products_seen++;
    if (rows != block_rows) {
        products_of_other_sizes++;
        other_size = rows;
    }
}

/* libtfenc calls the matrix backend's OpenBLAS entry through its exported
 * name; this definition comes first and hands the call on. */
void tfenc_openblas_sgemm(int b_transposed, int m, int n, int k, float alpha, const float *a,
                          int a_row_stride, const float *b, int b_row_stride, float beta, float *c,
                          int c_row_stride)
{
    static void (*real)(int, int, int, int, float, const float *, int, const float *, int, float,
                        float *, int);
    if (real == NULL)
        *(void **)&real = dlsym(RTLD_NEXT, "tfenc_openblas_sgemm");
    count_rows(m);
    real(b_transposed, m, n, k, alpha, a, a_row_stride, b, b_row_stride, beta, c, c_row_stride);
}

#ifdef HAVE_ONEDNN
dnnl_status_t dnnl_primitive_execute(const_dnnl_primitive_t primitive, dnnl_stream_t stream,
                                     int nargs, const dnnl_exec_arg_t *args)
{
    static dnnl_status_t (*real)(const_dnnl_primitive_t, dnnl_stream_t, int,
                                 const dnnl_exec_arg_t *);
    if (real == NULL)
        *(void **)&real = dlsym(RTLD_NEXT, "dnnl_primitive_execute");
    const_dnnl_primitive_desc_t primitive_desc = NULL;
    dnnl_primitive_kind_t kind = dnnl_undefined_primitive;
    if (dnnl_primitive_get_primitive_desc(primitive, &primitive_desc) != dnnl_success ||
        dnnl_primitive_desc_query(primitive_desc, dnnl_query_primitive_kind, 0, &kind) !=
            dnnl_success)
        kind = dnnl_undefined_primitive;
    /* Products only (not the reorders that pack the weights), of two
     * dimensions (not attention's batched ones). */
    for (int i = 0; kind == dnnl_matmul && i < nargs; i++) {
        const dnnl_memory_desc_t *desc = NULL;
        if (args[i].arg == DNNL_ARG_SRC &&
            dnnl_memory_get_memory_desc(args[i].memory, &desc) == dnnl_success &&
            desc->ndims == 2) {
            count_rows((int)desc->dims[0]);
            onednn_products++;
        }
    }
    return real(primitive, stream, nargs, args);
}
#endif

/* ------------------------------------------------------------- inputs */

static uint32_t state = 12345u;

static float random_value(void)
{
    state = state * 1664525u + 1013904223u;
    const float unit = (float)(state >> 8) / 16777216.0f - 0.5f;
    const int octave = (int)(state >> 4) % 20 - 10; /* 2^-10 .. 2^9 */
    return ldexpf(unit, octave);
}

static float *random_floats(size_t n)
{
    float *values = tfenc_aligned_alloc(n * sizeof(float));
    for (size_t i = 0; values != NULL && i < n; i++)
        values[i] = random_value();
    return values;
}

/* ----------------------------------------------------------------- runs */

typedef struct setting {
    tfenc_precision precision;
    tfenc_fp32_products fp32_products; /* fp32's library */
    tfenc_element_type x_dtype, y_dtype;
    tfenc_activation activation;
    int accumulate; /* y += the result (y its own residual): y starts as `skip`'s rows */
} setting;

static size_t element_bytes(tfenc_element_type type)
{
    return type == TFENC_BFLOAT16 ? 2 : 4;
}

/* y for rows [first, first + rows) of x, run as one batch. */
static int run(tfenc_context *ctx, const tfenc_linear *linear, const setting *s, const void *x,
               int first, int rows, void *y)
{
    const int out_width = s->activation == TFENC_ACTIVATION_SWIGLU ? OUT / 2 : OUT;
    char *y_rows = (char *)y + (size_t)first * out_width * element_bytes(s->y_dtype);
    tfenc_linear_args args = {.struct_size = sizeof args,
                              .x = (const char *)x + (size_t)first * IN * element_bytes(s->x_dtype),
                              .x_dtype = s->x_dtype,
                              .y = y_rows,
                              .y_dtype = s->y_dtype,
                              .rows = rows,
                              .activation = s->activation,
                              .residual = s->accumulate ? (const float *)y_rows : NULL};
    return tfenc_linear_run(ctx, linear, &args);
}

/* Every row alone, then the batches, at 1 and 2 threads: each row bitwise
 * the same as alone. Returns the rows that differed. */
static int rows_that_differ(const setting *s)
{
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_matrix_set_threads(2);
    float *weight = random_floats((size_t)OUT * IN), *bias = random_floats(OUT);
    float *x32 = random_floats((size_t)ROWS * IN);
    const int out_width = s->activation == TFENC_ACTIVATION_SWIGLU ? OUT / 2 : OUT;
    const size_t y_row = (size_t)out_width * element_bytes(s->y_dtype);
    char *alone = calloc(ROWS, y_row), *batch = calloc(ROWS, y_row);
    uint16_t *x16 = calloc((size_t)ROWS * IN, sizeof *x16);
    CU_ASSERT_FATAL(weight && bias && x32 && alone && batch && x16);
    tfenc_matrix_to_bf16(x32, x16, (size_t)ROWS * IN);
    const void *x = s->x_dtype == TFENC_BFLOAT16 ? (const void *)x16 : (const void *)x32;
    /* What an accumulating run adds its result to (float32 y only). */
    float *skip = random_floats((size_t)ROWS * out_width);
    CU_ASSERT_FATAL(skip != NULL);
    if (s->accumulate)
        memcpy(alone, skip, (size_t)ROWS * y_row);

    tfenc_matrix_scratch *scratch = NULL;
    tfenc_linear *linear = NULL;
    tfenc_matrix_linear_options options = {.precision = s->precision,
                                           .fp32_products = s->fp32_products};
    CU_ASSERT_EQUAL_FATAL(tfenc_matrix_scratch_create(&ctx, &scratch), TFENC_OK);
    int status = tfenc_matrix_linear_create(&ctx, &options, weight, bias, OUT, IN, scratch, &linear);
    CU_ASSERT_EQUAL_FATAL(status, TFENC_OK);
    for (int r = 0; r < ROWS; r++)
        CU_ASSERT_EQUAL_FATAL(run(&ctx, linear, s, x, r, 1, alone), TFENC_OK);

    /* Batches that put each row at other places of other blocks. */
    static const struct { int first, rows, threads; } batches[] = {
        {0, ROWS, 2}, {0, ROWS, 1}, {5, 200, 2}, {37, 63, 1}, {1, 64, 2}, {100, 65, 2}, {250, 50, 1}};
    int differ = 0;
    for (size_t i = 0; i < sizeof batches / sizeof batches[0]; i++) {
        tfenc_matrix_set_threads(batches[i].threads);
        if (s->accumulate)
            memcpy(batch, skip, (size_t)ROWS * y_row);
        else
            memset(batch, 0, (size_t)ROWS * y_row);
        CU_ASSERT_EQUAL_FATAL(run(&ctx, linear, s, x, batches[i].first, batches[i].rows, batch),
                              TFENC_OK);
        for (int r = batches[i].first; r < batches[i].first + batches[i].rows; r++)
            differ += memcmp(alone + (size_t)r * y_row, batch + (size_t)r * y_row, y_row) != 0;
    }
    tfenc_matrix_set_threads(2);
    tfenc_matrix_linear_destroy(linear);
    tfenc_matrix_scratch_destroy(scratch);
    tfenc_aligned_free(bias);
    tfenc_aligned_free(x32);
    tfenc_aligned_free(skip);
    free(x16);
    free(alone);
    free(batch);
    return differ;
}

static int precision_runs(tfenc_precision precision)
{
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    return tfenc_matrix_check_precision(&ctx, precision) == TFENC_OK;
}

static void check_precision(tfenc_precision precision, tfenc_fp32_products fp32_products)
{
    if (!precision_runs(precision)) {
        printf("\n  %s does not run on this CPU (as oneDNN sees it): the fp32 cases stand\n",
               tfenc_precision_names[precision]);
        return;
    }
    static const setting settings[] = {
        {0, 0, TFENC_FLOAT32, TFENC_FLOAT32, TFENC_ACTIVATION_NONE, 0},
        {0, 0, TFENC_BFLOAT16, TFENC_FLOAT32, TFENC_ACTIVATION_GELU, 0},
        {0, 0, TFENC_FLOAT32, TFENC_BFLOAT16, TFENC_ACTIVATION_NONE, 0},
        {0, 0, TFENC_BFLOAT16, TFENC_BFLOAT16, TFENC_ACTIVATION_RELU, 0},
        {0, 0, TFENC_FLOAT32, TFENC_FLOAT32, TFENC_ACTIVATION_SWIGLU, 0},
        {0, 0, TFENC_BFLOAT16, TFENC_FLOAT32, TFENC_ACTIVATION_NONE, 1},
        {0, 0, TFENC_FLOAT32, TFENC_FLOAT32, TFENC_ACTIVATION_GELU, 1},
    };
    for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++) {
        setting s = settings[i];
        s.precision = precision;
        s.fp32_products = fp32_products;
        products_seen = products_of_other_sizes = onednn_products = 0;
        block_rows = tfenc_matrix_block_rows(precision);
        const int differ = rows_that_differ(&s);
        if (differ != 0 || products_of_other_sizes != 0)
            printf("\n  %s on %s, x %s, y %s, activation %d%s: %d rows differ from alone; %d of "
                   "%d products not of %d rows (one of %d)\n",
                   tfenc_precision_names[precision], tfenc_fp32_products_names[fp32_products],
                   s.x_dtype == TFENC_BFLOAT16 ? "bf16" : "f32",
                   s.y_dtype == TFENC_BFLOAT16 ? "bf16" : "f32", (int)s.activation,
                   s.accumulate ? ", accumulated" : "", differ,
                   products_of_other_sizes, products_seen, block_rows, other_size);
        CU_ASSERT_EQUAL(differ, 0);
        CU_ASSERT(products_seen > 0);
        CU_ASSERT_EQUAL(products_of_other_sizes, 0);
        /* The library the map was made for ran every product. */
        if (precision == TFENC_PRECISION_FP32)
            CU_ASSERT_EQUAL(onednn_products,
                            fp32_products == TFENC_FP32_PRODUCTS_ONEDNN ? products_seen : 0);
    }
}

/* A run with a residual leaves y = residual + result, bitwise what the
 * result plus the residual in a pass of its own gives (the add the
 * model's host made before the products took it over), over full blocks
 * and a tail, with y its own residual and with a residual elsewhere.
 * Returns the values that differ. */
static int accumulated_values_that_differ(tfenc_precision precision,
                                          tfenc_fp32_products fp32_products,
                                          tfenc_element_type x_dtype, tfenc_activation activation)
{
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_matrix_set_threads(2);
    float *weight = random_floats((size_t)OUT * IN), *bias = random_floats(OUT);
    float *x32 = random_floats((size_t)ROWS * IN), *skip = random_floats((size_t)ROWS * OUT);
    float *plain = calloc((size_t)ROWS * OUT, sizeof(float));
    float *accumulated = calloc((size_t)ROWS * OUT, sizeof(float));
    uint16_t *x16 = calloc((size_t)ROWS * IN, sizeof *x16);
    CU_ASSERT_FATAL(weight && bias && x32 && skip && plain && accumulated && x16);
    tfenc_matrix_to_bf16(x32, x16, (size_t)ROWS * IN);
    tfenc_matrix_scratch *scratch = NULL;
    tfenc_linear *linear = NULL;
    tfenc_matrix_linear_options options = {.precision = precision,
                                           .fp32_products = fp32_products};
    CU_ASSERT_EQUAL_FATAL(tfenc_matrix_scratch_create(&ctx, &scratch), TFENC_OK);
    CU_ASSERT_EQUAL_FATAL(
        tfenc_matrix_linear_create(&ctx, &options, weight, bias, OUT, IN, scratch, &linear),
        TFENC_OK);
    setting s = {.precision = precision, .fp32_products = fp32_products, .x_dtype = x_dtype,
                 .y_dtype = TFENC_FLOAT32, .activation = activation};
    const void *x = x_dtype == TFENC_BFLOAT16 ? (const void *)x16 : (const void *)x32;
    CU_ASSERT_EQUAL_FATAL(run(&ctx, linear, &s, x, 0, ROWS, plain), TFENC_OK);
    memcpy(accumulated, skip, (size_t)ROWS * OUT * sizeof(float));
    s.accumulate = 1;
    CU_ASSERT_EQUAL_FATAL(run(&ctx, linear, &s, x, 0, ROWS, accumulated), TFENC_OK);
    int differ = 0;
    for (size_t i = 0; i < (size_t)ROWS * OUT; i++) {
        const float expected = plain[i] + skip[i];
        differ += memcmp(&expected, &accumulated[i], sizeof expected) != 0;
    }
    /* The residual apart from y, which holds anything before. */
    memset(accumulated, 0xff, (size_t)ROWS * OUT * sizeof(float));
    tfenc_linear_args apart = {.struct_size = sizeof apart, .x = x, .x_dtype = x_dtype,
                               .y = accumulated, .y_dtype = TFENC_FLOAT32, .rows = ROWS,
                               .activation = activation, .residual = skip};
    CU_ASSERT_EQUAL_FATAL(tfenc_linear_run(&ctx, linear, &apart), TFENC_OK);
    for (size_t i = 0; i < (size_t)ROWS * OUT; i++) {
        const float expected = plain[i] + skip[i];
        differ += memcmp(&expected, &accumulated[i], sizeof expected) != 0;
    }
    /* A plugin built before ABI 1.5 passes the struct without residual:
     * what lies where the field would be is not read. */
    memset(accumulated, 0xff, (size_t)ROWS * OUT * sizeof(float));
    tfenc_linear_args older = apart;
    older.struct_size = offsetof(tfenc_linear_args, residual);
    older.residual = (const float *)(uintptr_t)1;
    CU_ASSERT_EQUAL_FATAL(tfenc_linear_run(&ctx, linear, &older), TFENC_OK);
    differ += memcmp(plain, accumulated, (size_t)ROWS * OUT * sizeof(float)) != 0;
    tfenc_matrix_linear_destroy(linear);
    tfenc_matrix_scratch_destroy(scratch);
    tfenc_aligned_free(bias);
    tfenc_aligned_free(x32);
    tfenc_aligned_free(skip);
    free(plain);
    free(accumulated);
    free(x16);
    return differ;
}

static void test_accumulate(void)
{
    for (int p = TFENC_PRECISION_FP32; p <= TFENC_PRECISION_INT8; p++) {
        if (!precision_runs((tfenc_precision)p))
            continue;
        static const struct { tfenc_element_type x_dtype; tfenc_activation activation; } kinds[] = {
            {TFENC_FLOAT32, TFENC_ACTIVATION_NONE},
            {TFENC_BFLOAT16, TFENC_ACTIVATION_NONE},
            {TFENC_FLOAT32, TFENC_ACTIVATION_GELU}};
        /* fp32 on both of its libraries; the others' library is oneDNN. */
        const int libraries = p == TFENC_PRECISION_FP32 ? 2 : 1;
        for (int library = 0; library < libraries; library++)
            for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
                const tfenc_fp32_products fp32_products =
                    library == 0 ? TFENC_FP32_PRODUCTS_OPENBLAS : TFENC_FP32_PRODUCTS_ONEDNN;
                const int differ = accumulated_values_that_differ(
                    (tfenc_precision)p, fp32_products, kinds[k].x_dtype, kinds[k].activation);
                if (differ != 0)
                    printf("\n  %s on %s, x %s, activation %d: %d of %d values with a residual "
                           "are not the result plus the residual\n", tfenc_precision_names[p],
                           tfenc_fp32_products_names[fp32_products],
                           kinds[k].x_dtype == TFENC_BFLOAT16 ? "bf16" : "f32",
                           (int)kinds[k].activation, differ, 2 * ROWS * OUT);
                CU_ASSERT_EQUAL(differ, 0);
            }
    }
}

static void test_fp32(void)
{
    check_precision(TFENC_PRECISION_FP32, TFENC_FP32_PRODUCTS_OPENBLAS);
}

/* fp32 on oneDNN's f32 matmul, weights packed once ([model] fp32_products
 * = onednn): its products counted through dnnl_primitive_execute. */
static void test_fp32_onednn(void)
{
#ifdef HAVE_ONEDNN
    check_precision(TFENC_PRECISION_FP32, TFENC_FP32_PRODUCTS_ONEDNN);
#else
    printf("\n  built without oneDNN: fp32 runs on OpenBLAS only\n");
#endif
}

static void test_bf16(void)
{
    check_precision(TFENC_PRECISION_BF16, 0);
}

static void test_int8(void)
{
    check_precision(TFENC_PRECISION_INT8, 0);
}

static const test_case row_cases[] = {
    {"fp32 rows alone and in batches", test_fp32},
    {"fp32 on oneDNN: rows alone and in batches", test_fp32_onednn},
    {"bf16 rows alone and in batches", test_bf16},
    {"int8 rows alone and in batches", test_int8},
    {"rows with a residual are the result plus the residual", test_accumulate},
    {NULL, NULL}};

const test_suite test_suites[] = {{"one row, one result", NULL, NULL, row_cases},
                                  {NULL, NULL, NULL, NULL}};
