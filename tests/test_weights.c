/* Weight stores and linear maps (core/model/weights): shapes checked with
 * messages naming the dataset, non-finite values refused, float16 datasets
 * read from HDF5, files that are not HDF5 or are missing, a file attached
 * for one group (a head's weights_file), and a linear map of stacked parts
 * against a naive product. */
#include "base/context.h"
#include "harness/checks.h"
#include "harness/cunit_main.h"
#include "model/weights.h"

#include <CUnit/CUnit.h>
#include <hdf5.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static tfenc_context ctx;

static void test_weights_memory_shapes_and_nan(void)
{
    tfenc_context_init(&ctx);
    tfenc_weight_store *store = NULL;
    CU_ASSERT_EQUAL_FATAL(tfenc_weight_store_create_memory(&ctx, &store), TFENC_OK);
    const float values[6] = {1, 2, 3, 4, 5, 6};
    const float bad[2] = {1, NAN};
    int64_t shape[2] = {2, 3}, bad_shape[1] = {2};
    CU_ASSERT_EQUAL(tfenc_weight_store_add(&ctx, store, "/g/w", 2, shape, values), TFENC_OK);
    CU_ASSERT_EQUAL(tfenc_weight_store_add(&ctx, store, "/g/bad", 1, bad_shape, bad), TFENC_OK);
    tfenc_weights *group = NULL;
    CU_ASSERT_EQUAL_FATAL(tfenc_weight_store_group(&ctx, store, "g/", NULL, &group), TFENC_OK);
    CU_ASSERT(tfenc_weight_exists(group, "w"));
    CU_ASSERT(!tfenc_weight_exists(group, "nothing"));
    int64_t dims[2] = {-1, 3};
    const float *data = NULL;
    CU_ASSERT_EQUAL(tfenc_weight_load(group, "w", 2, dims, &data), TFENC_OK);
    CU_ASSERT_EQUAL(dims[0], 2);
    CU_ASSERT_EQUAL(data[5], 6.0f);
    CU_ASSERT_EQUAL((uintptr_t)data % 64, 0);
    int64_t wrong[2] = {3, 3};
    CU_ASSERT_EQUAL(tfenc_weight_load(group, "w", 2, wrong, &data), TFENC_ERR_WEIGHTS);
    CU_ASSERT(contains(tfenc_context_message(&ctx),
                       "dataset /g/w: expected shape [3, 3], found [2, 3]"));
    tfenc_context_init(&ctx);
    int64_t any[1] = {-1};
    CU_ASSERT_EQUAL(tfenc_weight_load(group, "bad", 1, any, &data), TFENC_ERR_WEIGHTS);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "dataset /g/bad holds a non-finite value"));
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_weight_load(group, "missing", 1, any, &data), TFENC_ERR_WEIGHTS);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "dataset /g/missing not found"));
    tfenc_weight_store_close(store);
}

/* Writes `values` as a 16-bit IEEE half dataset, the layout docs/weights.md gives. */
static void write_half_dataset(hid_t file, const char *name, const float *values, hsize_t count)
{
    hid_t half = H5Tcopy(H5T_IEEE_F32LE);
    H5Tset_fields(half, 15, 10, 5, 0, 10);
    H5Tset_size(half, 2);
    H5Tset_ebias(half, 15);
    hid_t space = H5Screate_simple(1, &count, NULL);
    hid_t dataset = H5Dcreate2(file, name, half, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values);
    H5Dclose(dataset);
    H5Sclose(space);
    H5Tclose(half);
}

/* A new HDF5 file at the temporary path made from the mkstemp template
 * `path`, holding the groups `groups` (NULL-terminated), open for writing. */
static hid_t create_weights_file(char *path, const char *const *groups)
{
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    for (int i = 0; groups[i] != NULL; i++)
        H5Gclose(H5Gcreate2(file, groups[i], H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    return file;
}

static void test_weights_hdf5_file(void)
{
    char path[] = "/tmp/tfenc-test-weights-XXXXXX";
    hid_t file = create_weights_file(path, (const char *const[]){"/layer", NULL});
    const float halves[3] = {0.5f, -1.25f, 65504.0f}; /* exactly representable in float16 */
    write_half_dataset(file, "/layer/scale", halves, 3);
    H5Fclose(file);

    tfenc_context_init(&ctx);
    tfenc_weight_store *store = NULL;
    CU_ASSERT_EQUAL_FATAL(tfenc_weight_store_open(&ctx, path, &store), TFENC_OK);
    tfenc_weights *weights = NULL;
    CU_ASSERT_EQUAL_FATAL(tfenc_weight_store_group(&ctx, store, "/layer", NULL, &weights), TFENC_OK);
    int64_t dims[1] = {3};
    const float *data = NULL;
    CU_ASSERT_EQUAL(tfenc_weight_load(weights, "scale", 1, dims, &data), TFENC_OK);
    CU_ASSERT_EQUAL(data[0], 0.5f);
    CU_ASSERT_EQUAL(data[1], -1.25f);
    CU_ASSERT_EQUAL(data[2], 65504.0f);
    CU_ASSERT_EQUAL(tfenc_weight_load(weights, "none/deeper", 1, dims, &data), TFENC_ERR_WEIGHTS);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "dataset /layer/none/deeper not found"));
    tfenc_weight_store_close(store);

    /* Not HDF5 at all, and missing. */
    FILE *junk = fopen(path, "wb");
    fputs("not hdf5", junk);
    fclose(junk);
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_weight_store_open(&ctx, path, &store), TFENC_ERR_WEIGHTS);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "not an HDF5 file"));
    unlink(path);
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_weight_store_open(&ctx, path, &store), TFENC_ERR_IO);
}

/* A head's file attached beside the store's own ([LAYER] weights_file):
 * the attached group and the groups inside it read from it, every other
 * group from the store; errors name the attached file. */
static void test_weights_attached_file(void)
{
    char path[] = "/tmp/tfenc-test-head-XXXXXX";
    hid_t file = create_weights_file(path, (const char *const[]){"/head", "/head/dense", NULL});
    const float from_file[2] = {7.0f, 8.0f};
    write_half_dataset(file, "/head/w", from_file, 2);
    write_half_dataset(file, "/head/dense/w", from_file, 2);
    H5Fclose(file);

    tfenc_context_init(&ctx);
    tfenc_weight_store *store = NULL;
    CU_ASSERT_EQUAL_FATAL(tfenc_weight_store_create_memory(&ctx, &store), TFENC_OK);
    const float from_store[2] = {1.0f, 2.0f};
    int64_t shape[1] = {2};
    CU_ASSERT_EQUAL(tfenc_weight_store_add(&ctx, store, "/head/w", 1, shape, from_store), TFENC_OK);
    CU_ASSERT_EQUAL(tfenc_weight_store_add(&ctx, store, "/headless/w", 1, shape, from_store),
                    TFENC_OK);
    const size_t own_bytes = tfenc_weight_store_float32_bytes(store);
    CU_ASSERT_EQUAL_FATAL(tfenc_weight_store_attach(&ctx, store, "head/", path, "[head] weights_file"),
                          TFENC_OK);
    CU_ASSERT(tfenc_weight_store_float32_bytes(store) >= own_bytes + 4 * sizeof(float));
    /* One file per group, and never the whole model's. */
    CU_ASSERT_EQUAL(tfenc_weight_store_attach(&ctx, store, "/head", path, "[again] weights_file"),
                    TFENC_ERR_CONFIG);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "[again] weights_file"));
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_weight_store_attach(&ctx, store, "/", path, "[all] weights_file"),
                    TFENC_ERR_CONFIG);
    tfenc_context_init(&ctx);

    const char *const groups[] = {"/head", "/head/dense", "/headless"};
    const float expected[] = {7.0f, 7.0f, 1.0f};
    for (int i = 0; i < 3; i++) {
        tfenc_weights *weights = NULL;
        CU_ASSERT_EQUAL_FATAL(tfenc_weight_store_group(&ctx, store, groups[i], NULL, &weights),
                              TFENC_OK);
        int64_t dims[1] = {2};
        const float *data = NULL;
        CU_ASSERT_EQUAL(tfenc_weight_load(weights, "w", 1, dims, &data), TFENC_OK);
        CU_ASSERT(data != NULL && data[0] == expected[i]);
        tfenc_weights_release(weights);
    }
    CU_ASSERT(tfenc_weight_store_has_group(store, "/head/dense"));
    tfenc_weights *weights = NULL;
    CU_ASSERT_EQUAL_FATAL(tfenc_weight_store_group(&ctx, store, "/head", NULL, &weights), TFENC_OK);
    int64_t dims[1] = {3};
    const float *data = NULL;
    CU_ASSERT_EQUAL(tfenc_weight_load(weights, "w", 1, dims, &data), TFENC_ERR_WEIGHTS);
    char wanted[256];
    snprintf(wanted, sizeof wanted, "weights %s: dataset /head/w: expected shape [3], found [2]",
             path);
    CU_ASSERT(contains(tfenc_context_message(&ctx), wanted));
    tfenc_weight_store_close(store);

    /* A missing file: the setting and the path. */
    unlink(path);
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL_FATAL(tfenc_weight_store_create_memory(&ctx, &store), TFENC_OK);
    CU_ASSERT_EQUAL(tfenc_weight_store_attach(&ctx, store, "/head", path, "[head] weights_file"),
                    TFENC_ERR_IO);
    snprintf(wanted, sizeof wanted, "[head] weights_file %s: cannot open", path);
    CU_ASSERT(contains(tfenc_context_message(&ctx), wanted));
    tfenc_weight_store_close(store);
}

static void test_linear_matches_naive_and_stacks_parts(void)
{
    enum { ROWS = 5, IN = 7, OUT_A = 3, OUT_B = 4 };
    float a[OUT_A * IN], b[OUT_B * IN], bias_a[OUT_A], bias_b[OUT_B], x[ROWS * IN];
    srand(7);
    for (int i = 0; i < OUT_A * IN; i++)
        a[i] = (float)rand() / RAND_MAX - 0.5f;
    for (int i = 0; i < OUT_B * IN; i++)
        b[i] = (float)rand() / RAND_MAX - 0.5f;
    for (int i = 0; i < OUT_A; i++)
        bias_a[i] = (float)i;
    for (int i = 0; i < OUT_B; i++)
        bias_b[i] = -(float)i;
    for (int i = 0; i < ROWS * IN; i++)
        x[i] = (float)rand() / RAND_MAX - 0.5f;
    tfenc_context_init(&ctx);
    tfenc_weight_store *store = NULL;
    tfenc_weight_store_create_memory(&ctx, &store);
    int64_t da[2] = {OUT_A, IN}, db[2] = {OUT_B, IN}, dba[1] = {OUT_A}, dbb[1] = {OUT_B};
    tfenc_weight_store_add(&ctx, store, "/l/a", 2, da, a);
    tfenc_weight_store_add(&ctx, store, "/l/b", 2, db, b);
    tfenc_weight_store_add(&ctx, store, "/l/a_bias", 1, dba, bias_a);
    tfenc_weight_store_add(&ctx, store, "/l/b_bias", 1, dbb, bias_b);
    tfenc_weights *weights = NULL;
    tfenc_weight_store_group(&ctx, store, "/l", NULL, &weights);
    const char *const names[] = {"a", "b"}, *const biases[] = {"a_bias", "b_bias"};
    tfenc_linear *linear = NULL;
    int out = 0;
    CU_ASSERT_EQUAL_FATAL(tfenc_linear_load(weights, 2, names, biases, IN, &out, &linear), TFENC_OK);
    CU_ASSERT_EQUAL(out, OUT_A + OUT_B);
    float y[ROWS * (OUT_A + OUT_B)];
    CU_ASSERT_EQUAL(tfenc_linear_forward(&ctx, linear, x, ROWS, y), TFENC_OK);
    double worst = 0;
    for (int r = 0; r < ROWS; r++)
        for (int o = 0; o < OUT_A + OUT_B; o++) {
            const float *w = o < OUT_A ? &a[o * IN] : &b[(o - OUT_A) * IN];
            double expected = o < OUT_A ? bias_a[o] : bias_b[o - OUT_A];
            for (int k = 0; k < IN; k++)
                expected += (double)x[r * IN + k] * w[k];
            worst = fmax(worst, fabs(expected - y[r * (OUT_A + OUT_B) + o]));
        }
    /* 7 products of magnitude < 0.25 in float32: error far below 1e-6. */
    CU_ASSERT(worst < 1e-6);
    int64_t wrong_in = 6;
    CU_ASSERT_EQUAL(tfenc_linear_load(weights, 1, names, NULL, (int)wrong_in, &out, &linear),
                    TFENC_ERR_WEIGHTS);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "dataset /l/a: expected shape [?, 6], found [3, 7]"));
    tfenc_weight_store_close(store);
}

static const test_case weights_cases[] = {
    {"memory store shapes and NaN", test_weights_memory_shapes_and_nan},
    {"HDF5 file and float16", test_weights_hdf5_file},
    {"a file attached for one group", test_weights_attached_file},
    {"linear maps", test_linear_matches_naive_and_stacks_parts},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"weights", NULL, NULL, weights_cases},
    {NULL, NULL, NULL, NULL}};
