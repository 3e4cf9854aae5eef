/* A microbatch's sparse rows (core/output/sparse): what a layer hands over
 * through the context's sink is kept as it came, cut to the values above
 * the threshold and to the k largest (the smaller column first among equal
 * values), in column order; a row out of turn, a column outside the width
 * or out of order is refused as the layer's bug, naming the row; a NaN or
 * an infinity as the dense rows' check refuses it, naming the layer. The logs
 * and the CSR the finished job writes are tests/sparse/sparse.sh's. */
#include "base/context.h"
#include "harness/cunit_main.h"
#include "output/sparse.h"

#include <CUnit/CUnit.h>
#include <math.h>
#include <string.h>

static tfenc_context ctx;

/* Rows with a sink installed, as the run installs it. */
static tfenc_sparse_rows *make_rows(int width, long top_k, double threshold, int n_seq)
{
    tfenc_context_init(&ctx);
    tfenc_sparse_rows *rows = NULL;
    CU_ASSERT_EQUAL_FATAL(tfenc_sparse_rows_create(&ctx, width, top_k, threshold, &rows), TFENC_OK);
    CU_ASSERT_EQUAL_FATAL(tfenc_sparse_rows_begin(&ctx, rows, n_seq), TFENC_OK);
    tfenc_context_set_sparse_sink(&ctx, tfenc_sparse_rows_sink, rows);
    return rows;
}

static void test_rows_kept_as_given(void)
{
    tfenc_sparse_rows *rows = make_rows(10, 0, 0.0, 3);
    const int32_t first[] = {1, 4, 9}, third[] = {0};
    const float first_values[] = {0.5f, 2.0f, 0.25f}, third_values[] = {7.0f};
    CU_ASSERT_EQUAL(tfenc_sparse_row(&ctx, 0, 3, first, first_values), TFENC_OK);
    CU_ASSERT_EQUAL(tfenc_sparse_row(&ctx, 1, 0, NULL, NULL), TFENC_OK); /* an empty row */
    CU_ASSERT_EQUAL(tfenc_sparse_row(&ctx, 2, 1, third, third_values), TFENC_OK);
    CU_ASSERT_EQUAL(rows->n_rows, 3);
    const int64_t starts[] = {0, 3, 3, 4};
    CU_ASSERT_EQUAL(memcmp(rows->row_start, starts, sizeof starts), 0);
    const int32_t columns[] = {1, 4, 9, 0};
    const float values[] = {0.5f, 2.0f, 0.25f, 7.0f};
    CU_ASSERT_EQUAL(memcmp(rows->indices, columns, sizeof columns), 0);
    CU_ASSERT_EQUAL(memcmp(rows->values, values, sizeof values), 0);
    /* The next microbatch starts empty. */
    CU_ASSERT_EQUAL(tfenc_sparse_rows_begin(&ctx, rows, 1), TFENC_OK);
    CU_ASSERT_EQUAL(rows->n_rows, 0);
    tfenc_sparse_rows_destroy(rows);
}

static void test_top_k_and_threshold(void)
{
    tfenc_sparse_rows *rows = make_rows(8, 3, 0.5, 1);
    const int32_t columns[] = {0, 1, 2, 3, 4, 5, 6, 7};
    /* Above 0.5 (0.5 itself is not): columns 1, 2, 4, 5 and 7. The three
     * largest: 7 (4.0), then two of the three 3.0s, the smaller columns 2
     * and 4; kept in column order 2, 4, 7. */
    const float values[] = {0.5f, 1.0f, 3.0f, 0.25f, 3.0f, 3.0f, 0.1f, 4.0f};
    CU_ASSERT_EQUAL(tfenc_sparse_row(&ctx, 0, 8, columns, values), TFENC_OK);
    CU_ASSERT_EQUAL_FATAL(rows->row_start[1], 3);
    CU_ASSERT_EQUAL(rows->indices[0], 2);
    CU_ASSERT_EQUAL(rows->indices[1], 4);
    CU_ASSERT_EQUAL(rows->indices[2], 7);
    CU_ASSERT_EQUAL(rows->values[0], 3.0f);
    CU_ASSERT_EQUAL(rows->values[1], 3.0f);
    CU_ASSERT_EQUAL(rows->values[2], 4.0f);
    tfenc_sparse_rows_destroy(rows);
}

static void test_bad_rows_refused(void)
{
    const int32_t unordered[] = {3, 2}, outside[] = {1, 8};
    const float values[] = {1.0f, 1.0f};
    tfenc_sparse_rows *rows = make_rows(8, 0, 0.0, 2);
    CU_ASSERT_EQUAL(tfenc_sparse_row(&ctx, 1, 2, outside, values), TFENC_ERR_INTERNAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(&ctx), "row 0 of 2 was due"));
    tfenc_context_clear(&ctx);
    CU_ASSERT_EQUAL(tfenc_sparse_row(&ctx, 0, 2, unordered, values), TFENC_ERR_INTERNAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(&ctx), "not ascending"));
    tfenc_context_clear(&ctx);
    CU_ASSERT_EQUAL(tfenc_sparse_row(&ctx, 0, 2, outside, values), TFENC_ERR_INTERNAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(&ctx), "outside 0..7"));
    tfenc_sparse_rows_destroy(rows);
    /* Without a sink (a trial run of the model) rows are dropped. */
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_sparse_row(&ctx, 5, 2, unordered, values), TFENC_OK);
}

static void test_nonfinite_values_refused(void)
{
    const int32_t columns[] = {2, 5};
    const float sound[] = {1.0f, 2.0f}, infinite[] = {1.0f, INFINITY},
                not_a_number[] = {NAN, 1.0f}, negative[] = {-INFINITY, 1.0f};
    const float *const bad[] = {infinite, not_a_number, negative};
    const char *const named[] = {"infinity at column 5", "NaN at column 2",
                                 "infinity at column 2"};
    for (int k = 0; k < 3; k++) {
        tfenc_sparse_rows *rows = make_rows(8, 0, 0.0, 3);
        CU_ASSERT_EQUAL(tfenc_sparse_row(&ctx, 0, 2, columns, sound), TFENC_OK);
        CU_ASSERT_EQUAL(tfenc_sparse_rows_nonfinite_sequence(rows), -1);
        CU_ASSERT_EQUAL(tfenc_sparse_row(&ctx, 1, 2, columns, bad[k]), TFENC_ERR_WEIGHTS);
        CU_ASSERT_EQUAL(tfenc_sparse_rows_nonfinite_sequence(rows), 1);
        CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(&ctx), named[k]));
        /* The next microbatch starts clean. */
        CU_ASSERT_EQUAL(tfenc_sparse_rows_begin(&ctx, rows, 1), TFENC_OK);
        CU_ASSERT_EQUAL(tfenc_sparse_rows_nonfinite_sequence(rows), -1);
        tfenc_sparse_rows_destroy(rows);
    }
    /* Inside a layer's forward the layer leads, as in the dense check's
     * "LAYER made a non-finite value". */
    tfenc_sparse_rows *rows = make_rows(8, 0, 0.0, 1);
    tfenc_context_set_scope(&ctx, "layer head (splade)");
    CU_ASSERT_EQUAL(tfenc_sparse_row(&ctx, 0, 2, columns, infinite), TFENC_ERR_WEIGHTS);
    tfenc_context_set_scope(&ctx, NULL);
    const char *expected = "layer head (splade) made a non-finite sparse value (infinity at "
                           "column 5): the weights or the input overflow float32";
    CU_ASSERT_STRING_EQUAL(tfenc_context_message(&ctx), expected);
    tfenc_sparse_rows_destroy(rows);
}

/* ABI 1.6: a layer's rows go to the destination its batch carries (each
 * head of a job of several has its own), whatever the context's sink; a
 * batch without one drops them. */
static void test_rows_travel_with_the_batch(void)
{
    tfenc_sparse_rows *mine = make_rows(10, 0, 0.0, 1);
    tfenc_sparse_rows *other = NULL;
    CU_ASSERT_EQUAL_FATAL(tfenc_sparse_rows_create(&ctx, 10, 0, 0.0, &other), TFENC_OK);
    CU_ASSERT_EQUAL_FATAL(tfenc_sparse_rows_begin(&ctx, other, 1), TFENC_OK);
    const int32_t columns[] = {2, 7};
    const float values[] = {1.5f, 0.5f};
    tfenc_batch batch = {.n_seq = 1, .sparse_rows = &other->destination};
    CU_ASSERT_EQUAL(tfenc_batch_sparse_row(&ctx, &batch, 0, 2, columns, values), TFENC_OK);
    CU_ASSERT_EQUAL(other->n_rows, 1);
    CU_ASSERT_EQUAL(mine->n_rows, 0); /* not the context's sink */
    CU_ASSERT_EQUAL(memcmp(other->indices, columns, sizeof columns), 0);
    batch.sparse_rows = NULL;
    CU_ASSERT_EQUAL(tfenc_batch_sparse_row(&ctx, &batch, 0, 2, columns, values), TFENC_OK);
    CU_ASSERT_EQUAL(mine->n_rows, 0);
    tfenc_sparse_rows_destroy(other);
    tfenc_sparse_rows_destroy(mine);
}

static const test_case sparse_cases[] = {
    {"rows kept as handed over", test_rows_kept_as_given},
    {"rows go where their batch says", test_rows_travel_with_the_batch},
    {"the top k above the threshold", test_top_k_and_threshold},
    {"rows out of turn or order refused", test_bad_rows_refused},
    {"NaN and infinities refused", test_nonfinite_values_refused},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"sparse rows", NULL, NULL, sparse_cases},
    {NULL, NULL, NULL, NULL}};
