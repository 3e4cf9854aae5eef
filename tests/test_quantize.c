/* Compact vectors (core/output/quantize.c) without Python: numpy's bucket
 * arithmetic and x86-64 casts on chosen values (out of range, NaN, a
 * dimension whose minimum is its maximum), packbits' bit order and the
 * binary shift, the running ranges, and given ranges read from .npy files
 * (written here byte by byte as numpy.save writes them), .h5 and JSON lists,
 * with their errors. tests/compact/compact.sh and minilm.sh check the same against
 * sentence-transformers itself. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <CUnit/CUnit.h>
#include <hdf5.h>

#include "base/context.h"
#include "output/quantize.h"
#include "harness/cunit_main.h"

static char directory[64];

static void test_bucket_arithmetic(void)
{
    /* min 0, max 1: step = 1/255 in float32 */
    const float ranges[2] = {0.0f, 1.0f};
    float starts[1], steps[1];
    tfenc_quantize_steps(ranges, 1, starts, steps);
    CU_ASSERT_EQUAL(steps[0], 1.0f / 255.0f);
    const float x[] = {0.0f, 1.0f, 0.5f, -0.01f, 1.01f, 2.0f, NAN, 1e30f};
    /* (x - 0) / step: 0, just under 255 (1/255 rounds up in float32), 127.5,
     * -2.55, 257.5, just under 510, NaN, huge; the cast keeps the low byte
     * of int32 (INT32_MIN for NaN and beyond). What numpy 1.24 gives:
     * quantize_embeddings(x, "uint8", ranges=[[0], [1]]). */
    const uint8_t want_uint8[] = {0, 254, 127, 254, 1, 253, 0, 0};
    /* minus 128 first */
    const int8_t want_int8[] = {-128, 126, 0, 126, -127, 125, 0, 0};
    uint8_t u[8];
    int8_t s[8];
    for (int i = 0; i < 8; i++) {
        tfenc_quantize_rows(TFENC_DTYPE_UINT8, starts, steps, 1, &x[i], 1, &u[i]);
        tfenc_quantize_rows(TFENC_DTYPE_INT8, starts, steps, 1, &x[i], 1, &s[i]);
        CU_ASSERT_EQUAL(u[i], want_uint8[i]);
        CU_ASSERT_EQUAL(s[i], want_int8[i]);
    }
    /* A dimension with min == max: step 0, x / 0 is inf or NaN, both 0. */
    const float flat[2] = {0.25f, 0.25f};
    tfenc_quantize_steps(flat, 1, starts, steps);
    const float at = 0.25f, above = 0.5f;
    tfenc_quantize_rows(TFENC_DTYPE_UINT8, starts, steps, 1, &at, 1, &u[0]);
    tfenc_quantize_rows(TFENC_DTYPE_UINT8, starts, steps, 1, &above, 1, &u[1]);
    CU_ASSERT_EQUAL(u[0], 0);
    CU_ASSERT_EQUAL(u[1], 0);
}

static void test_packed_signs(void)
{
    /* 16 dimensions: signs 1000 0001 | 0111 1111 (0 is not > 0) */
    const float x[16] = {1, -1, 0, -2, -3, -0.0f, -1, 0.5f, -1, 2, 3, 4, 5, 6, 7, 8};
    uint8_t packed[2];
    tfenc_quantize_rows(TFENC_DTYPE_UBINARY, NULL, NULL, 16, x, 1, packed);
    CU_ASSERT_EQUAL(packed[0], 0x81);
    CU_ASSERT_EQUAL(packed[1], 0x7f);
    int8_t shifted[2];
    tfenc_quantize_rows(TFENC_DTYPE_BINARY, NULL, NULL, 16, x, 1, shifted);
    CU_ASSERT_EQUAL(shifted[0], 0x81 - 128);
    CU_ASSERT_EQUAL(shifted[1], 0x7f - 128);
    CU_ASSERT_EQUAL(tfenc_dtype_row_width(TFENC_DTYPE_BINARY, 1024), 128);
    CU_ASSERT_EQUAL(tfenc_dtype_row_width(TFENC_DTYPE_INT8, 1024), 1024);
}

static void test_running_ranges(void)
{
    const float rows[6] = {1, -1, 3, 0.5f, -2, 2}; /* 3 rows of 2 */
    float ranges[4] = {99, 99, 99, 99};
    tfenc_quantize_ranges_update(ranges, 2, rows, 2, 1);
    tfenc_quantize_ranges_update(ranges, 2, rows + 4, 1, 0);
    CU_ASSERT_EQUAL(ranges[0], -2.0f);
    CU_ASSERT_EQUAL(ranges[1], -1.0f);
    CU_ASSERT_EQUAL(ranges[2], 3.0f);
    CU_ASSERT_EQUAL(ranges[3], 2.0f);
}

/* A .npy file as numpy.save writes it: version 1.0, the header padded with
 * spaces to a multiple of 64 bytes, ending in a newline. */
static void write_npy(const char *path, const char *descr, const char *fortran,
                      const char *shape, const void *data, size_t bytes)
{
    char header[128];
    int length = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': %s, "
                          "'shape': %s, }", descr, fortran, shape);
    int total = 10 + length + 1;
    int padded = (total + 63) / 64 * 64;
    memset(header + length, ' ', (size_t)(padded - total));
    header[padded - 10 - 1] = '\n';
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    unsigned short header_length = (unsigned short)(padded - 10);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(header_length & 0xff, f);
    fputc(header_length >> 8, f);
    fwrite(header, 1, header_length, f);
    fwrite(data, 1, bytes, f);
    fclose(f);
}

static void test_given_ranges(void)
{
    tfenc_context context;
    tfenc_context_init(&context);
    tfenc_context *ctx = &context;
    char path[128];
    float got[6];
    const float want[6] = {-1, -0.5f, 0, 1, 0.5f, 2};
    snprintf(path, sizeof path, "%s/f4.npy", directory);
    write_npy(path, "<f4", "False", "(2, 3)", want, sizeof want);
    CU_ASSERT_EQUAL(tfenc_quantize_ranges_read(ctx, "job.ini: [job] output_ranges", path, 3, got),
                    TFENC_OK);
    CU_ASSERT_EQUAL(memcmp(got, want, sizeof want), 0);
    const double wide[6] = {-1, -0.5, 0, 1, 0.5, 2};
    snprintf(path, sizeof path, "%s/f8.npy", directory);
    write_npy(path, "<f8", "False", "(2, 3)", wide, sizeof wide);
    CU_ASSERT_EQUAL(tfenc_quantize_ranges_read(ctx, "job.ini: [job] output_ranges", path, 3, got),
                    TFENC_OK);
    CU_ASSERT_EQUAL(memcmp(got, want, sizeof want), 0);
    /* the wrong width, Fortran order, a minimum above its maximum */
    CU_ASSERT_EQUAL(tfenc_quantize_ranges_read(ctx, "job.ini: [job] output_ranges", path, 4, got),
                    TFENC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(ctx), "f8.npy: has shape (2, 3)"));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(ctx), "job.ini: [job] output_ranges"));
    tfenc_context_clear(ctx);
    snprintf(path, sizeof path, "%s/fortran.npy", directory);
    write_npy(path, "<f4", "True", "(2, 3)", want, sizeof want);
    CU_ASSERT_EQUAL(tfenc_quantize_ranges_read(ctx, "w", path, 3, got), TFENC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(ctx), "Fortran order"));
    tfenc_context_clear(ctx);
    const float upside_down[6] = {1, 0, 0, 0, 1, 1};
    snprintf(path, sizeof path, "%s/upside.npy", directory);
    write_npy(path, "<f4", "False", "(2, 3)", upside_down, sizeof upside_down);
    CU_ASSERT_EQUAL(tfenc_quantize_ranges_read(ctx, "w", path, 3, got), TFENC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(ctx), "dimension 0 has minimum 1 above "
                                                              "maximum 0"));
    tfenc_context_clear(ctx);
    /* an HDF5 file with `ranges` [2, 3] */
    snprintf(path, sizeof path, "%s/ranges.h5", directory);
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dims[2] = {2, 3};
    hid_t space = H5Screate_simple(2, dims, NULL);
    hid_t dataset = H5Dcreate2(file, "ranges", H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT,
                               H5P_DEFAULT);
    H5Dwrite(dataset, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, wide);
    H5Dclose(dataset);
    H5Sclose(space);
    H5Fclose(file);
    memset(got, 0, sizeof got);
    CU_ASSERT_EQUAL(tfenc_quantize_ranges_read(ctx, "w", path, 3, got), TFENC_OK);
    CU_ASSERT_EQUAL(memcmp(got, want, sizeof want), 0);
    CU_ASSERT_EQUAL(tfenc_quantize_ranges_read(ctx, "w", path, 2, got), TFENC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(ctx), "dataset 'ranges' has shape [2, 3]"));
    tfenc_context_clear(ctx);
    /* two JSON lists */
    memset(got, 0, sizeof got);
    CU_ASSERT_EQUAL(tfenc_quantize_ranges_parse(ctx, "w", "[[-1, -0.5, 0], [1, 0.5, 2]]", 3, got),
                    TFENC_OK);
    CU_ASSERT_EQUAL(memcmp(got, want, sizeof want), 0);
    CU_ASSERT_EQUAL(tfenc_quantize_ranges_parse(ctx, "w", "[[-1, -0.5, 0]]", 3, got),
                    TFENC_ERR_CONFIG);
    tfenc_context_clear(ctx);
    CU_ASSERT_EQUAL(tfenc_quantize_ranges_parse(ctx, "w", "[[-1, \"a\", 0], [1, 1, 1]]", 3, got),
                    TFENC_ERR_CONFIG);
}

/* The scratch directory of the given-ranges files. */
static int make_scratch(void)
{
    snprintf(directory, sizeof directory, "/tmp/tfenc-quantize.XXXXXX");
    return mkdtemp(directory) == NULL;
}

static int remove_scratch(void)
{
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", directory);
    return system(command) != 0;
}

static const test_case quantize_cases[] = {
    {"numpy's bucket arithmetic and casts", test_bucket_arithmetic},
    {"packbits order and the binary shift", test_packed_signs},
    {"running ranges", test_running_ranges},
    {"given ranges: .npy, .h5, JSON lists", test_given_ranges},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"quantize", make_scratch, remove_scratch, quantize_cases},
    {NULL, NULL, NULL, NULL}};
