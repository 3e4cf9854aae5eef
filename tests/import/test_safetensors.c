/* CUnit tests of the safetensors reader: hostile headers are refused with a
 * message, and F32/F16/BF16 data decode to the values IEEE 754 defines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <CUnit/CUnit.h>

#include "harness/cunit_main.h"
#include "base/context.h"
#include "model/safetensors.h"

/* Parses `header` as if followed by `data_size` bytes; returns the status
 * and leaves the message in *ctx. */
static int parse(tfenc_context *ctx, const char *header, unsigned long long data_size)
{
    tfenc_safetensors *file = NULL;
    tfenc_context_init(ctx);
    int status = tfenc_safetensors_parse_header(ctx, "test.safetensors", header, strlen(header),
                                                data_size, &file);
    CU_ASSERT((status == TFENC_OK) == (file != NULL));
    tfenc_safetensors_close(file);
    return status;
}

static void expect_refused(const char *header, unsigned long long data_size, const char *phrase)
{
    tfenc_context ctx;
    int status = parse(&ctx, header, data_size);
    CU_ASSERT_EQUAL(status, TFENC_ERR_WEIGHTS);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(&ctx), "test.safetensors"));
    if (strstr(tfenc_context_message(&ctx), phrase) == NULL) {
        printf("\n  header %s: message '%s' lacks '%s'", header, tfenc_context_message(&ctx),
               phrase);
        CU_FAIL("message lacks the expected phrase");
    }
}

static void test_valid_header(void)
{
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    const char *header = "{\"__metadata__\":{\"format\":\"pt\"},"
                         "\"b\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[24,30]},"
                         "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                         "\"ids\":{\"dtype\":\"I64\",\"shape\":[1,2],\"data_offsets\":[30,46]},"
                         "\"empty\":{\"dtype\":\"BF16\",\"shape\":[0,4],\"data_offsets\":[46,46]}"
                         "}   ";
    tfenc_safetensors *file = NULL;
    CU_ASSERT_EQUAL_FATAL(tfenc_safetensors_parse_header(&ctx, "x", header, strlen(header), 46,
                                                         &file), TFENC_OK);
    CU_ASSERT_EQUAL(tfenc_safetensors_count(file), 4);
    const tfenc_safetensors_tensor *a = tfenc_safetensors_find(file, "a");
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_EQUAL(a->rank, 2);
    CU_ASSERT_EQUAL(a->dims[0], 2);
    CU_ASSERT_EQUAL(a->dims[1], 3);
    CU_ASSERT_EQUAL(a->n_elements, 6);
    CU_ASSERT_STRING_EQUAL(a->dtype, "F32");
    CU_ASSERT_EQUAL(tfenc_safetensors_find(file, "empty")->n_elements, 0);
    CU_ASSERT_PTR_NULL(tfenc_safetensors_find(file, "missing"));
    CU_ASSERT_PTR_NULL(tfenc_safetensors_find(file, "__metadata__"));
    CU_ASSERT_STRING_EQUAL(tfenc_safetensors_metadata(file, "format"), "pt");
    tfenc_safetensors_close(file);
}

static void test_hostile_headers(void)
{
    expect_refused("", 0, "JSON object");
    expect_refused("[1, 2]", 0, "JSON object");
    expect_refused("{\"a\": ", 0, "not valid JSON");
    expect_refused("{\"a\": 3}", 0, "not a JSON object");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "data_offsets");
    expect_refused("{\"a\":{\"dtype\":\"F99\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
                   "unknown dtype");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4,
                   "non-negative");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4,
                   "non-negative");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4,
                   "begin <= end");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8,
                   "data_offsets");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
                   "truncated");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
                   "need 3 elements");
    /* 2^62 * 2^62 elements would wrap a 64-bit size to a small one. */
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,"
                   "4611686018427387904],\"data_offsets\":[0,0]}}", 8, "too large");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],"
                   "\"data_offsets\":[0,0]}}", 8, "need");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],"
                   "\"data_offsets\":[0,4]}}", 4, "rank 9");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
                   "overlap");
    expect_refused("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                   "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
                   "duplicate");
    expect_refused("{\"__metadata__\":{\"format\":1}}", 0, "__metadata__");
    expect_refused("{\"__metadata__\":[]}", 0, "__metadata__");
    expect_refused("{\"a\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype");
}

/* Writes a file: u64 header length, header, data. */
static char *write_file(const char *header, const unsigned char *data, size_t data_size,
                        long long claimed_length)
{
    char *path = strdup("/tmp/test_safetensors.XXXXXX");
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    unsigned long long length = claimed_length >= 0 ? (unsigned long long)claimed_length
                                                    : strlen(header);
    unsigned char prefix[8];
    for (int i = 0; i < 8; i++)
        prefix[i] = (unsigned char)(length >> (8 * i));
    CU_ASSERT(write(fd, prefix, 8) == 8);
    CU_ASSERT(write(fd, header, strlen(header)) == (ssize_t)strlen(header));
    CU_ASSERT(write(fd, data, data_size) == (ssize_t)data_size);
    close(fd);
    return path;
}

static void test_read_values(void)
{
    /* Little-endian encodings of known values:
     * F32 1.5 = 0x3fc00000, -0.25 = 0xbe800000;
     * F16 1.0 = 0x3c00, -2.0 = 0xc000, 65504 = 0x7bff, 2^-24 = 0x0001 (subnormal),
     *     2^-14 = 0x0400 (smallest normal);
     * BF16 1.0 = 0x3f80, -3.0 = 0xc040. */
    const unsigned char data[] = {
        0x00, 0x00, 0xc0, 0x3f, 0x00, 0x00, 0x80, 0xbe,
        0x00, 0x3c, 0x00, 0xc0, 0xff, 0x7b, 0x01, 0x00, 0x00, 0x04,
        0x80, 0x3f, 0x40, 0xc0,
        0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    };
    const char *header = "{\"f32\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                         "\"f16\":{\"dtype\":\"F16\",\"shape\":[5],\"data_offsets\":[8,18]},"
                         "\"bf16\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[18,22]},"
                         "\"i64\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[22,30]}}";
    char *path = write_file(header, data, sizeof data, -1);
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_safetensors *file = NULL;
    CU_ASSERT_EQUAL_FATAL(tfenc_safetensors_open(&ctx, path, &file), TFENC_OK);
    float values[5];
    CU_ASSERT_EQUAL(tfenc_safetensors_read_float32(&ctx, file,
                                                   tfenc_safetensors_find(file, "f32"), values),
                    TFENC_OK);
    CU_ASSERT_EQUAL(values[0], 1.5f);
    CU_ASSERT_EQUAL(values[1], -0.25f);
    CU_ASSERT_EQUAL(tfenc_safetensors_read_float32(&ctx, file,
                                                   tfenc_safetensors_find(file, "f16"), values),
                    TFENC_OK);
    CU_ASSERT_EQUAL(values[0], 1.0f);
    CU_ASSERT_EQUAL(values[1], -2.0f);
    CU_ASSERT_EQUAL(values[2], 65504.0f);
    CU_ASSERT_EQUAL(values[3], 0x1p-24f);
    CU_ASSERT_EQUAL(values[4], 0x1p-14f);
    CU_ASSERT_EQUAL(tfenc_safetensors_read_float32(&ctx, file,
                                                   tfenc_safetensors_find(file, "bf16"), values),
                    TFENC_OK);
    CU_ASSERT_EQUAL(values[0], 1.0f);
    CU_ASSERT_EQUAL(values[1], -3.0f);
    CU_ASSERT_EQUAL(tfenc_safetensors_read_float32(&ctx, file,
                                                   tfenc_safetensors_find(file, "i64"), values),
                    TFENC_ERR_WEIGHTS);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(&ctx), "i64"));
    /* A run of values, as a table too large for memory is read in blocks;
     * a run beyond the tensor is refused, naming it. */
    const tfenc_safetensors_tensor *f16 = tfenc_safetensors_find(file, "f16");
    double run[3];
    tfenc_context_clear(&ctx);
    CU_ASSERT_EQUAL(tfenc_safetensors_read_double_range(&ctx, file, f16, 2, 3, run), TFENC_OK);
    CU_ASSERT_EQUAL(run[0], 65504.0);
    CU_ASSERT_EQUAL(run[1], 0x1p-24);
    CU_ASSERT_EQUAL(run[2], 0x1p-14);
    CU_ASSERT_EQUAL(tfenc_safetensors_read_double_range(&ctx, file, f16, 3, 3, run),
                    TFENC_ERR_INTERNAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(&ctx), "f16"));
    tfenc_safetensors_close(file);
    unlink(path);
    free(path);
}

static void test_bad_files(void)
{
    tfenc_context ctx;
    tfenc_safetensors *file = NULL;
    const unsigned char data[4] = {0};
    const char *header = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";

    /* A header length past the end of the file. */
    char *path = write_file(header, data, sizeof data, 1000);
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_safetensors_open(&ctx, path, &file), TFENC_ERR_WEIGHTS);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(&ctx), "header length 1000"));
    CU_ASSERT_PTR_NULL(file);
    unlink(path);
    free(path);

    /* Data cut short. */
    path = write_file(header, data, 2, -1);
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_safetensors_open(&ctx, path, &file), TFENC_ERR_WEIGHTS);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(&ctx), "truncated"));
    unlink(path);
    free(path);

    /* Shorter than the length field itself. */
    path = strdup("/tmp/test_safetensors.XXXXXX");
    int fd = mkstemp(path);
    CU_ASSERT(write(fd, "abc", 3) == 3);
    close(fd);
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_safetensors_open(&ctx, path, &file), TFENC_ERR_WEIGHTS);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(&ctx), "too short"));
    unlink(path);
    free(path);

    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_safetensors_open(&ctx, "/nonexistent/model.safetensors", &file),
                    TFENC_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(&ctx), "/nonexistent/model.safetensors"));
}

static const test_case safetensors_cases[] = {
    {"valid header", test_valid_header},
    {"hostile headers", test_hostile_headers},
    {"read values", test_read_values},
    {"bad files", test_bad_files},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"safetensors", NULL, NULL, safetensors_cases},
    {NULL, NULL, NULL, NULL}};
