/* The output writer read back through the HDF5 C API, the 16-bit float
 * conversions against known bit patterns (and the compiler's _Float16 where
 * it has one), SHA-256 against the FIPS 180-4 vectors and sha256sum, and
 * the multi-vector rows: which tokens keep a vector, packed as the file gets
 * them, under the vectors kind's dataset and attributes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>

#include <CUnit/CUnit.h>
#include <hdf5.h>

#include "harness/cunit_main.h"
#include "base/context.h"
#include "base/float16.h"
#include "base/hdf5_attributes.h"
#include "output/multivector.h"
#include "output/kinds.h"
#include "output/output.h"
#include "output/inspect.h"
#include "output/output_checks.h"
#include "base/sha256.h"

static char directory[256];

static float bits_to_float(uint32_t bits)
{
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

static uint32_t float_to_bits(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

/* ------------------------------------------------------------ float16 */

static void test_float16_known_values(void)
{
    static const struct { float value; uint16_t half; } cases[] = {
        {1.0f, 0x3c00}, {-2.0f, 0xc000}, {0.0f, 0x0000}, {-0.0f, 0x8000},
        {65504.0f, 0x7bff},               /* largest half */
        {65519.99f, 0x7bff},              /* below the midpoint to 2^16: stays finite */
        {65520.0f, 0x7c00},               /* the midpoint: ties to even = infinity */
        {1e10f, 0x7c00}, {-1e10f, 0xfc00},
        {0.1f, 0x2e66}, {0.333333343f, 0x3555},
        {0x1p-14f, 0x0400},               /* smallest normal */
        {0x1p-24f, 0x0001},               /* smallest subnormal */
        {0x1p-25f, 0x0000},               /* half of it: tie, rounds to even 0 */
        {0x1.8p-25f, 0x0001},             /* above the tie */
        {0x1.8p-24f, 0x0002},             /* 1.5 units: tie, to even 2 */
        {0x1.4p-23f, 0x0002},             /* 2.5 units: tie, to even 2 */
        {0x3ffp-24f, 0x03ff},             /* largest subnormal */
        {0x7ffp-25f, 0x0400},             /* 1023.5 units: tie, to even = smallest normal */
        {1.0f + 0x1p-11f, 0x3c00},        /* tie between 1 and 1+2^-10: even */
        {1.0f + 0x3p-11f, 0x3c02},        /* tie between 0x3c01 and 0x3c02: even */
        {1.0f + 0x1p-11f + 0x1p-20f, 0x3c01},
        {2047.5f, 0x6800}, {2046.5f, 0x67fe}, {2048.5f, 0x6800}, {2049.0f, 0x6800}, /* ties near 2^11 */
        {1e-10f, 0x0000}, {-1e-10f, 0x8000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t got = tfenc_float32_to_float16(cases[i].value);
        CU_ASSERT(got == cases[i].half);
        if (got != cases[i].half)
            fprintf(stderr, "\n%a -> 0x%04x, expected 0x%04x\n", cases[i].value, got,
                    cases[i].half);
    }
    CU_ASSERT(tfenc_float32_to_float16(INFINITY) == 0x7c00);
    CU_ASSERT(tfenc_float32_to_float16(-INFINITY) == 0xfc00);
    uint16_t nan = tfenc_float32_to_float16(NAN);
    CU_ASSERT((nan & 0x7c00) == 0x7c00 && (nan & 0x03ff) != 0);
    /* A signalling NaN whose payload lives only in low bits must not
     * become infinity. */
    uint16_t quiet = tfenc_float32_to_float16(bits_to_float(0x7f800001u));
    CU_ASSERT((quiet & 0x7c00) == 0x7c00 && (quiet & 0x03ff) != 0);

    CU_ASSERT(tfenc_float16_to_float32(0x3c00) == 1.0f);
    CU_ASSERT(tfenc_float16_to_float32(0x0001) == 0x1p-24f);
    CU_ASSERT(tfenc_float16_to_float32(0x03ff) == 0x3ffp-24f);
    CU_ASSERT(tfenc_float16_to_float32(0x7bff) == 65504.0f);
    CU_ASSERT(tfenc_float16_to_float32(0x3555) == 0.333251953125f);
    CU_ASSERT(tfenc_float16_to_float32(0xfc00) == -INFINITY);
    CU_ASSERT(isnan(tfenc_float16_to_float32(0x7e00)));
    CU_ASSERT(float_to_bits(tfenc_float16_to_float32(0x8000)) == 0x80000000u);
}

/* Every half converts to float32 and back to itself. */
static void test_float16_round_trip(void)
{
    int wrong = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float value = tfenc_float16_to_float32((uint16_t)h);
        if (isnan(value))
            continue;
        wrong += tfenc_float32_to_float16(value) != h;
    }
    CU_ASSERT(wrong == 0);
}

/* The compiler's own conversion (libgcc's __truncsfhf2) is an independent
 * reference: compare on 4 million float32 patterns across every exponent,
 * including each half's exact midpoints. */
static void test_float16_against_compiler(void)
{
#ifdef __FLT16_MAX__
    int wrong = 0;
    uint64_t state = 88172645463325252ull;
    for (int i = 0; i < 4000000; i++) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        uint32_t bits = (uint32_t)state;
        if (i % 4 == 1) /* midpoints between halves: low 13 bits = 0x1000 */
            bits = (bits & ~0x1fffu) | 0x1000u;
        float value = bits_to_float(bits);
        if (isnan(value))
            continue;
        _Float16 reference = (_Float16)value;
        uint16_t expected;
        memcpy(&expected, &reference, sizeof expected);
        wrong += tfenc_float32_to_float16(value) != expected;
    }
    CU_ASSERT(wrong == 0);
#else
    /* Without _Float16 the bit-pattern and round-trip tests stand alone. */
    CU_PASS("compiler has no _Float16");
#endif
}

static void test_bfloat16(void)
{
    static const struct { uint32_t bits; uint16_t bf16; } cases[] = {
        {0x3f800000u, 0x3f80},            /* 1.0 */
        {0x3f808000u, 0x3f80},            /* 1 + 2^-8: tie, to even */
        {0x3f818000u, 0x3f82},            /* 1 + 3*2^-8: tie, to even */
        {0x3f808001u, 0x3f81},            /* just above the tie */
        {0x40490fdbu, 0x4049},            /* pi rounds down */
        {0x7f7fffffu, 0x7f80},            /* FLT_MAX rounds to infinity */
        {0x7f800000u, 0x7f80}, {0xff800000u, 0xff80},
        {0x00010000u, 0x0001},            /* subnormals are kept */
        {0x80000000u, 0x8000},
        {0xc0a18000u, 0xc0a2},            /* tie above an odd pattern: up to even */
        {0xc0a28000u, 0xc0a2},            /* tie above an even pattern: stays */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CU_ASSERT(tfenc_float32_to_bfloat16(bits_to_float(cases[i].bits)) == cases[i].bf16);
    uint16_t nan = tfenc_float32_to_bfloat16(bits_to_float(0x7f800001u));
    CU_ASSERT((nan & 0x7f80) == 0x7f80 && (nan & 0x007f) != 0);
    CU_ASSERT(tfenc_bfloat16_to_float32(0x4049) == 3.140625f);
    CU_ASSERT(tfenc_bfloat16_to_float32(0xff80) == -INFINITY);
    int wrong = 0;
    for (uint32_t b = 0; b < 0x10000; b++) {
        float value = tfenc_bfloat16_to_float32((uint16_t)b);
        if (!isnan(value))
            wrong += tfenc_float32_to_bfloat16(value) != b;
    }
    CU_ASSERT(wrong == 0);
}

/* HDF5 itself converting our types to float32 must agree with our
 * decoding: this checks the type definitions, not only the arithmetic. */
static void test_h5_types(void)
{
    hid_t half = tfenc_h5_float16_type(), brain = tfenc_h5_bfloat16_type();
    CU_ASSERT_FATAL(half >= 0 && brain >= 0);
    CU_ASSERT(tfenc_h5_float_classify(half) == TFENC_H5_FLOAT16);
    CU_ASSERT(tfenc_h5_float_classify(brain) == TFENC_H5_BFLOAT16);
    CU_ASSERT(tfenc_h5_float_classify(H5T_IEEE_F32BE) == TFENC_H5_FLOAT32);
    CU_ASSERT(tfenc_h5_float_classify(H5T_NATIVE_DOUBLE) == TFENC_H5_FLOAT64);
    CU_ASSERT(tfenc_h5_float_classify(H5T_NATIVE_INT) == TFENC_H5_FLOAT_OTHER);
    uint16_t patterns[6] = {0x3c00, 0x0001, 0x7bff, 0xc000, 0x3555, 0x0400};
    float converted[6];
    memcpy(converted, patterns, sizeof patterns);
    CU_ASSERT_FATAL(H5Tconvert(half, H5T_NATIVE_FLOAT, 6, converted, NULL, H5P_DEFAULT) >= 0);
    for (int i = 0; i < 6; i++)
        CU_ASSERT(converted[i] == tfenc_float16_to_float32(patterns[i]));
    uint16_t brain_patterns[4] = {0x3f80, 0x4049, 0xc0a1, 0x0080};
    memcpy(converted, brain_patterns, sizeof brain_patterns);
    CU_ASSERT_FATAL(H5Tconvert(brain, H5T_NATIVE_FLOAT, 4, converted, NULL, H5P_DEFAULT) >= 0);
    for (int i = 0; i < 4; i++)
        CU_ASSERT(converted[i] == tfenc_bfloat16_to_float32(brain_patterns[i]));
    H5Tclose(half);
    H5Tclose(brain);
}

/* ------------------------------------------------------------- SHA-256 */

static void test_sha256_vectors(void)
{
    char hex[65];
    tfenc_sha256_hex("", 0, hex);
    CU_ASSERT_STRING_EQUAL(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    tfenc_sha256_hex("abc", 3, hex);
    CU_ASSERT_STRING_EQUAL(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    tfenc_sha256_hex(two_blocks, strlen(two_blocks), hex);
    CU_ASSERT_STRING_EQUAL(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    /* A million 'a', fed in uneven pieces to exercise the block buffer. */
    tfenc_sha256 hash;
    CU_ASSERT_FATAL(tfenc_sha256_init(&hash) == TFENC_OK);
    char a[1000];
    memset(a, 'a', sizeof a);
    size_t fed = 0;
    for (size_t piece = 1; fed < 1000000; piece = piece % 997 + 1) {
        size_t n = piece < 1000000 - fed ? piece : 1000000 - fed;
        tfenc_sha256_update(&hash, a, n);
        fed += n;
    }
    unsigned char digest[32];
    tfenc_sha256_final(&hash, digest);
    static const unsigned char expected[32] = {
        0xcd, 0xc7, 0x6e, 0x5c, 0x99, 0x14, 0xfb, 0x92, 0x81, 0xa1, 0xc7, 0xe2, 0x84, 0xd7, 0x3e, 0x67,
        0xf1, 0x80, 0x9a, 0x48, 0xa4, 0x97, 0x20, 0x0e, 0x04, 0x6d, 0x39, 0xcc, 0xc7, 0x11, 0x2c, 0xd0};
    CU_ASSERT(memcmp(digest, expected, 32) == 0);
}

/* A file of every length around the padding boundaries, against coreutils. */
static void test_sha256_file(void)
{
    char path[300], command[400];
    snprintf(path, sizeof path, "%s/sha.bin", directory);
    for (size_t size = 0; size < 200000; size = size < 130 ? size + 1 : size * 3 + 7) {
        FILE *file = fopen(path, "wb");
        CU_ASSERT_FATAL(file != NULL);
        for (size_t i = 0; i < size; i++)
            fputc((int)((i * 2654435761u) >> 13) & 0xff, file);
        fclose(file);
        tfenc_context ctx;
        tfenc_context_init(&ctx);
        char hex[65], reference[65] = "";
        CU_ASSERT_FATAL(tfenc_sha256_file(&ctx, path, hex) == TFENC_OK);
        snprintf(command, sizeof command, "sha256sum '%s'", path);
        FILE *pipe = popen(command, "r");
        CU_ASSERT_FATAL(pipe != NULL);
        CU_ASSERT(fscanf(pipe, "%64s", reference) == 1);
        pclose(pipe);
        CU_ASSERT_STRING_EQUAL(hex, reference);
    }
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    char hex[65];
    CU_ASSERT(tfenc_sha256_file(&ctx, "/nonexistent/weights.h5", hex) == TFENC_ERR_IO);
    CU_ASSERT(strstr(ctx.message, "/nonexistent/weights.h5") != NULL);
}

/* -------------------------------------------------------------- output */

/* A value every dtype stores exactly (multiples of 1/4 below 256 fit in
 * bfloat16's 8 significant bits), so read-back compares exactly. */
static float exact_value(int64_t row, int column)
{
    return (float)((row * 7 + column * 3) % 256) * 0.25f - 16.0f;
}

static hid_t open_dataset(hid_t file, const char *name, int rank, const hsize_t *dims)
{
    hid_t dataset = H5Dopen2(file, name, H5P_DEFAULT);
    CU_ASSERT(dataset >= 0);
    if (dataset < 0)
        return dataset;
    hid_t space = H5Dget_space(dataset);
    hsize_t found[2] = {0, 0};
    CU_ASSERT(H5Sget_simple_extent_ndims(space) == rank);
    H5Sget_simple_extent_dims(space, found, NULL);
    for (int i = 0; i < rank; i++)
        CU_ASSERT(found[i] == dims[i]);
    H5Sclose(space);
    return dataset;
}

static char *string_attribute(hid_t file, const char *name)
{
    hid_t attribute = H5Aopen(file, name, H5P_DEFAULT);
    CU_ASSERT_FATAL(attribute >= 0);
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, H5T_VARIABLE);
    H5Tset_cset(type, H5T_CSET_UTF8);
    char *value = NULL;
    CU_ASSERT(H5Aread(attribute, type, &value) >= 0);
    char *copy = strdup(value != NULL ? value : "");
    hid_t space = H5Aget_space(attribute);
    H5Dvlen_reclaim(type, space, H5P_DEFAULT, &value);
    H5Sclose(space);
    H5Tclose(type);
    H5Aclose(attribute);
    return copy;
}

static int64_t int_attribute(hid_t file, const char *name)
{
    hid_t attribute = H5Aopen(file, name, H5P_DEFAULT);
    CU_ASSERT_FATAL(attribute >= 0);
    int64_t value = -12345;
    CU_ASSERT(H5Aread(attribute, H5T_NATIVE_INT64, &value) >= 0);
    H5Aclose(attribute);
    return value;
}

static void read_all(hid_t dataset, hid_t type, void *buffer)
{
    CU_ASSERT(H5Dread(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer) >= 0);
}

static void check_file_type(hid_t dataset, tfenc_h5_float_kind expected)
{
    hid_t type = H5Dget_type(dataset);
    CU_ASSERT(tfenc_h5_float_classify(type) == expected);
    H5Tclose(type);
}

/* Pooled rows written out of order, over several calls, with ids; gzip
 * and each dtype. */
static void check_pooled(tfenc_output_dtype dtype, tfenc_output_compression compression)
{
    enum { N = 11, D = 6 };
    char path[300];
    snprintf(path, sizeof path, "%s/pooled-%d-%d.h5", directory, (int)dtype, (int)compression);
    static const char *id_names[N] = {"a", "bb", "", "dddd", "e", "f", "gg", "h", "i",
                                      "jjjjjjj", "k"};
    tfenc_output_options options = {
        .path = path, .kind = &tfenc_output_kinds[TFENC_OUTPUT_POOLED], .dtype = dtype, .compression = compression,
        .width = D, .n_documents = N, .has_ids = 1, .max_id_length = 7,
        .job_text = "[job]\ninput = x.txt\n", .weights_sha256 = "ab12",
        .layout = "ranks=1 data_parallel=1 pipeline_stages=1"};
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_output *out = NULL;
    CU_ASSERT_FATAL(tfenc_output_create(&ctx, MPI_COMM_NULL, &options, &out) == TFENC_OK);
    /* Three calls, indices in scrambled order, some consecutive runs. */
    static const int64_t order[N] = {9, 2, 3, 4, 0, 10, 7, 8, 1, 6, 5};
    static const int call_end[3] = {3, 7, 11};
    int begin = 0;
    for (int call = 0; call < 3; call++) {
        int n = call_end[call] - begin;
        float rows[N * D];
        int32_t lengths[N], truncated[N];
        const char *ids[N];
        for (int j = 0; j < n; j++) {
            int64_t g = order[begin + j];
            for (int c = 0; c < D; c++)
                rows[j * D + c] = exact_value(g, c);
            lengths[j] = (int32_t)(g + 2);
            truncated[j] = (int32_t)(g % 3);
            ids[j] = id_names[g];
        }
        CU_ASSERT(tfenc_output_write_pooled(&ctx, out, n, order + begin, rows) == TFENC_OK);
        CU_ASSERT(tfenc_output_write_metadata(&ctx, out, n, order + begin, lengths, truncated,
                                              ids, NULL, NULL) == TFENC_OK);
        begin = call_end[call];
    }
    CU_ASSERT_FATAL(tfenc_output_finish(&ctx, out) == TFENC_OK);

    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    CU_ASSERT_FATAL(file >= 0);
    hsize_t dims[2] = {N, D};
    hid_t embeddings = open_dataset(file, "embeddings", 2, dims);
    check_file_type(embeddings, dtype == TFENC_DTYPE_FLOAT32   ? TFENC_H5_FLOAT32
                                : dtype == TFENC_DTYPE_FLOAT16 ? TFENC_H5_FLOAT16
                                                               : TFENC_H5_BFLOAT16);
    float values[N * D];
    read_all(embeddings, H5T_NATIVE_FLOAT, values); /* HDF5 converts 16-bit types itself */
    int wrong = 0;
    for (int g = 0; g < N; g++)
        for (int c = 0; c < D; c++)
            wrong += values[g * D + c] != exact_value(g, c);
    CU_ASSERT(wrong == 0);
    hid_t dcpl = H5Dget_create_plist(embeddings);
    CU_ASSERT(H5Pget_layout(dcpl) == H5D_CHUNKED);
    CU_ASSERT(H5Pget_nfilters(dcpl) == (compression == TFENC_COMPRESSION_GZIP ? 2 : 0));
    H5Pclose(dcpl);
    H5Dclose(embeddings);

    int32_t lengths[N], truncated[N];
    hid_t dataset = open_dataset(file, "lengths", 1, dims);
    read_all(dataset, H5T_NATIVE_INT32, lengths);
    H5Dclose(dataset);
    dataset = open_dataset(file, "truncated", 1, dims);
    read_all(dataset, H5T_NATIVE_INT32, truncated);
    H5Dclose(dataset);
    for (int g = 0; g < N; g++) {
        CU_ASSERT(lengths[g] == g + 2);
        CU_ASSERT(truncated[g] == g % 3);
    }
    dataset = open_dataset(file, "ids", 1, dims);
    hid_t type = H5Dget_type(dataset);
    CU_ASSERT(H5Tget_class(type) == H5T_STRING && H5Tget_size(type) == 7);
    char ids[N * 7];
    read_all(dataset, type, ids);
    for (int g = 0; g < N; g++)
        CU_ASSERT(strncmp(ids + g * 7, id_names[g], 7) == 0);
    H5Tclose(type);
    H5Dclose(dataset);
    CU_ASSERT(H5Lexists(file, "offsets", H5P_DEFAULT) == 0);

    char *text = string_attribute(file, "job");
    CU_ASSERT_STRING_EQUAL(text, "[job]\ninput = x.txt\n");
    free(text);
    text = string_attribute(file, "weights_sha256");
    CU_ASSERT_STRING_EQUAL(text, "ab12");
    free(text);
    text = string_attribute(file, "layout");
    CU_ASSERT_STRING_EQUAL(text, "ranks=1 data_parallel=1 pipeline_stages=1");
    free(text);
    text = string_attribute(file, "tfenc_version");
    CU_ASSERT(strlen(text) > 0);
    free(text);
    text = string_attribute(file, "output_kind");
    CU_ASSERT_STRING_EQUAL(text, "pooled");
    free(text);
    text = string_attribute(file, "dtype");
    CU_ASSERT_STRING_EQUAL(text, tfenc_output_dtype_name(dtype));
    free(text);
    /* created: ISO-8601 UTC, within a minute of now. */
    text = string_attribute(file, "created");
    struct tm parsed = {0};
    CU_ASSERT(strlen(text) == 20 && text[19] == 'Z');
    CU_ASSERT(strptime(text, "%Y-%m-%dT%H:%M:%SZ", &parsed) != NULL);
    CU_ASSERT(llabs((long long)(timegm(&parsed) - time(NULL))) < 60);
    free(text);
    CU_ASSERT(int_attribute(file, "d_model") == D);
    CU_ASSERT(int_attribute(file, "n_documents") == N);
    CU_ASSERT(int_attribute(file, "complete") == 1);
    H5Fclose(file);
}

static void test_pooled_float32(void)
{
    check_pooled(TFENC_DTYPE_FLOAT32, TFENC_COMPRESSION_NONE);
}

static void test_pooled_float16_gzip(void)
{
    check_pooled(TFENC_DTYPE_FLOAT16, TFENC_COMPRESSION_GZIP);
}

static void test_pooled_bfloat16(void)
{
    check_pooled(TFENC_DTYPE_BFLOAT16, TFENC_COMPRESSION_NONE);
}

/* Per-token output: ragged documents (one empty) written out of order;
 * offsets, hidden rows and the float16 bit patterns read back raw. */
static void test_tokens(void)
{
    enum { N = 5, D = 3 };
    static const int32_t lengths[N] = {3, 0, 2, 4, 1};
    int64_t offsets[N + 1] = {0};
    for (int i = 0; i < N; i++)
        offsets[i + 1] = offsets[i] + lengths[i];
    const int64_t total = offsets[N];
    char path[300];
    snprintf(path, sizeof path, "%s/tokens.h5", directory);
    tfenc_output_options options = {.path = path, .kind = &tfenc_output_kinds[TFENC_OUTPUT_TOKENS],
                                     .dtype = TFENC_DTYPE_FLOAT16, .width = D,
                                     .n_documents = N, .n_rows = total};
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_output *out = NULL;
    CU_ASSERT_FATAL(tfenc_output_create(&ctx, MPI_COMM_NULL, &options, &out) == TFENC_OK);
    /* Two calls: documents {3, 0} then {4, 1, 2}; values not exact in
     * float16 here, so that rounding shows in the raw bits. */
    static const int64_t order[N] = {3, 0, 4, 1, 2};
    float rows[64];
    int begin = 0;
    for (int call = 0; call < 2; call++) {
        int n = call == 0 ? 2 : 3, packed = 0;
        int64_t token_offsets[N];
        int32_t n_tokens[N], truncated[N] = {0};
        for (int j = 0; j < n; j++) {
            int64_t g = order[begin + j];
            token_offsets[j] = offsets[g];
            n_tokens[j] = lengths[g];
            for (int t = 0; t < lengths[g]; t++)
                for (int c = 0; c < D; c++)
                    rows[(packed + t) * D + c] = 0.1f * (float)((offsets[g] + t) * D + c);
            packed += lengths[g];
        }
        CU_ASSERT(tfenc_output_write_tokens(&ctx, out, n, order + begin, token_offsets, n_tokens,
                                            rows) == TFENC_OK);
        CU_ASSERT(tfenc_output_write_metadata(&ctx, out, n, order + begin, n_tokens, truncated,
                                              NULL, NULL, NULL) == TFENC_OK);
        begin += n;
    }
    CU_ASSERT_FATAL(tfenc_output_finish(&ctx, out) == TFENC_OK);

    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    CU_ASSERT_FATAL(file >= 0);
    hsize_t dims[2] = {(hsize_t)total, D}, n_plus_one[1] = {N + 1};
    hid_t hidden = open_dataset(file, "hidden", 2, dims);
    uint16_t raw[64];
    hid_t half = tfenc_h5_float16_type();
    read_all(hidden, half, raw);
    H5Tclose(half);
    int wrong = 0;
    for (int64_t i = 0; i < total * D; i++)
        wrong += raw[i] != tfenc_float32_to_float16(0.1f * (float)i);
    CU_ASSERT(wrong == 0);
    H5Dclose(hidden);
    int64_t stored[N + 1];
    hid_t dataset = open_dataset(file, "offsets", 1, n_plus_one);
    read_all(dataset, H5T_NATIVE_INT64, stored);
    H5Dclose(dataset);
    for (int i = 0; i <= N; i++)
        CU_ASSERT(stored[i] == offsets[i]);
    CU_ASSERT(H5Lexists(file, "ids", H5P_DEFAULT) == 0);
    CU_ASSERT(H5Lexists(file, "embeddings", H5P_DEFAULT) == 0);
    CU_ASSERT(int_attribute(file, "n_tokens") == total);
    char *kind = string_attribute(file, "output_kind");
    CU_ASSERT_STRING_EQUAL(kind, "tokens");
    free(kind);
    H5Fclose(file);
}

/* Many rows in random order across many calls: every row at its index,
 * and the scattered writes stay fast. */
static void test_scattered_rows(void)
{
    enum { N = 20000, D = 16, CALLS = 20 };
    int64_t *order = malloc(N * sizeof *order);
    for (int64_t i = 0; i < N; i++)
        order[i] = i;
    srand(7);
    for (int64_t i = N - 1; i > 0; i--) {
        int64_t j = rand() % (i + 1), swap = order[i];
        order[i] = order[j];
        order[j] = swap;
    }
    char path[300];
    snprintf(path, sizeof path, "%s/scattered.h5", directory);
    tfenc_output_options options = {.path = path, .kind = &tfenc_output_kinds[TFENC_OUTPUT_POOLED],
                                    .dtype = TFENC_DTYPE_FLOAT32, .width = D, .n_documents = N};
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_output *out = NULL;
    CU_ASSERT_FATAL(tfenc_output_create(&ctx, MPI_COMM_NULL, &options, &out) == TFENC_OK);
    float *rows = malloc((size_t)N / CALLS * D * sizeof *rows);
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int call = 0; call < CALLS; call++) {
        const int64_t *indices = order + call * (N / CALLS);
        for (int j = 0; j < N / CALLS; j++)
            for (int c = 0; c < D; c++)
                rows[j * D + c] = exact_value(indices[j], c);
        CU_ASSERT(tfenc_output_write_pooled(&ctx, out, N / CALLS, indices, rows) == TFENC_OK);
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    double seconds = (double)(end.tv_sec - start.tv_sec) + 1e-9 * (double)(end.tv_nsec - start.tv_nsec);
    fprintf(stderr, "\n  %d scattered rows in %d calls: %.3f s\n", N, CALLS, seconds);
    /* Generous bound for a shared machine: the point is catching a
     * quadratic selection, which takes minutes here. */
    CU_ASSERT(seconds < 10.0);
    CU_ASSERT_FATAL(tfenc_output_finish(&ctx, out) == TFENC_OK);
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hsize_t dims[2] = {N, D};
    hid_t dataset = open_dataset(file, "embeddings", 2, dims);
    float *back = malloc((size_t)N * D * sizeof *back);
    read_all(dataset, H5T_NATIVE_FLOAT, back);
    int wrong = 0;
    for (int64_t g = 0; g < N; g++)
        for (int c = 0; c < D; c++)
            wrong += back[g * D + c] != exact_value(g, c);
    CU_ASSERT(wrong == 0);
    H5Dclose(dataset);
    H5Fclose(file);
    free(back);
    free(rows);
    free(order);
}

static void test_errors(void)
{
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_output *out = NULL;
    tfenc_output_options options = {.path = "/nonexistent/dir/out.h5",
                                    .kind = &tfenc_output_kinds[TFENC_OUTPUT_POOLED], .width = 4,
                                    .n_documents = 3};
    CU_ASSERT(tfenc_output_create(&ctx, MPI_COMM_NULL, &options, &out) == TFENC_ERR_IO);
    CU_ASSERT(strstr(ctx.message, "/nonexistent/dir/out.h5") != NULL);
    CU_ASSERT(strstr(ctx.message, "unable to") != NULL); /* HDF5's cause is folded in */
    CU_ASSERT(out == NULL);

    char path[300];
    snprintf(path, sizeof path, "%s/errors.h5", directory);
    options.path = path;
    tfenc_context_init(&ctx);
    CU_ASSERT_FATAL(tfenc_output_create(&ctx, MPI_COMM_NULL, &options, &out) == TFENC_OK);
    float rows[8] = {0};
    int64_t outside[1] = {3}, twice[2] = {1, 1};
    CU_ASSERT(tfenc_output_write_pooled(&ctx, out, 1, outside, rows) == TFENC_ERR_INTERNAL);
    CU_ASSERT(strstr(ctx.message, path) != NULL && strstr(ctx.message, "outside") != NULL);
    tfenc_context_init(&ctx);
    CU_ASSERT(tfenc_output_write_pooled(&ctx, out, 2, twice, rows) == TFENC_ERR_INTERNAL);
    CU_ASSERT(strstr(ctx.message, "twice") != NULL);
    tfenc_context_init(&ctx);
    int64_t offsets[1] = {0};
    int32_t n_tokens[1] = {1};
    CU_ASSERT(tfenc_output_write_tokens(&ctx, out, 1, offsets, offsets, n_tokens, rows)
              == TFENC_ERR_INTERNAL);
    /* An abandoned file opens and says it is incomplete; unwritten
     * lengths read -1. */
    tfenc_output_close(out);
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    CU_ASSERT_FATAL(file >= 0);
    CU_ASSERT(int_attribute(file, "complete") == 0);
    hsize_t dims[1] = {3};
    hid_t dataset = open_dataset(file, "lengths", 1, dims);
    int32_t lengths[3] = {0, 0, 0};
    read_all(dataset, H5T_NATIVE_INT32, lengths);
    CU_ASSERT(lengths[0] == -1 && lengths[1] == -1 && lengths[2] == -1);
    H5Dclose(dataset);
    H5Fclose(file);

    /* Empty outputs are valid files. */
    options.n_documents = 0;
    tfenc_context_init(&ctx);
    CU_ASSERT(tfenc_output_create(&ctx, MPI_COMM_NULL, &options, &out) == TFENC_OK);
    CU_ASSERT(tfenc_output_finish(&ctx, out) == TFENC_OK);

    tfenc_output_dtype dtype;
    tfenc_output_kind kind;
    tfenc_output_compression compression;
    CU_ASSERT(tfenc_output_dtype_from_name("bfloat16", &dtype) == TFENC_OK
              && dtype == TFENC_DTYPE_BFLOAT16);
    CU_ASSERT(tfenc_output_dtype_from_name("float64", &dtype) == TFENC_ERR_NOT_FOUND);
    CU_ASSERT(tfenc_output_kind_from_name("tokens", &kind) == TFENC_OK
              && kind == TFENC_OUTPUT_TOKENS);
    CU_ASSERT(tfenc_output_compression_from_name("gzip", &compression) == TFENC_OK
              && compression == TFENC_COMPRESSION_GZIP);
}

/* A job killed mid-way (the child _exits without closing the file) is
 * resumed: the finished documents are reported, the rest written, and the
 * result equals an uninterrupted run. Files of another job are refused. */
static void write_pooled_documents(tfenc_output *out, int n, const int64_t *indices,
                                   int with_metadata)
{
    enum { D = 4 };
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    float rows[16 * D];
    int32_t lengths[16], truncated[16];
    for (int j = 0; j < n; j++) {
        for (int c = 0; c < D; c++)
            rows[j * D + c] = exact_value(indices[j], c);
        lengths[j] = (int32_t)indices[j] + 1;
        truncated[j] = 0;
    }
    CU_ASSERT(tfenc_output_write_pooled(&ctx, out, n, indices, rows) == TFENC_OK);
    if (with_metadata)
        CU_ASSERT(tfenc_output_write_metadata(&ctx, out, n, indices, lengths, truncated, NULL,
                                              NULL, NULL)
                  == TFENC_OK);
}

/* Digests as a file stores them (64 hex digits), which a resume's checks
 * hold its attributes to; refusals quote them whole. */
#define DIGEST_1 "1111111111111111111111111111111111111111111111111111111111111111"
#define DIGEST_2 "2222222222222222222222222222222222222222222222222222222222222222"
/* job_settings of several lines, one of them longer than 80 characters. */
#define JOB_A "job A\nmodel.head_sha256 = " DIGEST_1

static void test_resume(void)
{
    enum { N = 9, D = 4 };
    char path[300];
    snprintf(path, sizeof path, "%s/resume.h5", directory);
    tfenc_output_options options = {.path = path, .kind = &tfenc_output_kinds[TFENC_OUTPUT_POOLED],
                                    .dtype = TFENC_DTYPE_FLOAT32, .width = D, .n_documents = N,
                                    .job_text = "job A", .job_settings = JOB_A,
                                    .weights_sha256 = DIGEST_1, .precision = "fp32",
                                    .layout = "ranks=1"};
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_output *out = NULL;
    int was_complete = -1;
    CU_ASSERT(tfenc_output_reopen(&ctx, MPI_COMM_NULL, &options, &out, &was_complete)
              == TFENC_ERR_NOT_FOUND);
    CU_ASSERT(ctx.status == TFENC_OK && out == NULL);

    fflush(NULL);
    pid_t child = fork();
    CU_ASSERT_FATAL(child >= 0);
    if (child == 0) {
        tfenc_context child_ctx;
        tfenc_context_init(&child_ctx);
        if (tfenc_output_create(&child_ctx, MPI_COMM_NULL, &options, &out) != TFENC_OK)
            _exit(1);
        static const int64_t done[3] = {7, 0, 4}, rows_only[1] = {2};
        write_pooled_documents(out, 3, done, 1);
        write_pooled_documents(out, 1, rows_only, 0);
        _exit(0); /* killed: no close, no flush */
    }
    int child_status = -1;
    waitpid(child, &child_status, 0);
    CU_ASSERT_FATAL(WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0);

    CU_ASSERT_FATAL(tfenc_output_reopen(&ctx, MPI_COMM_NULL, &options, &out, &was_complete)
                    == TFENC_OK);
    CU_ASSERT(was_complete == 0);
    uint8_t written[N];
    CU_ASSERT(tfenc_output_written(&ctx, out, 0, N, written) == TFENC_OK);
    static const uint8_t expected_written[N] = {1, 0, 0, 0, 1, 0, 0, 1, 0};
    CU_ASSERT(memcmp(written, expected_written, N) == 0);
    CU_ASSERT(tfenc_output_written(&ctx, out, 4, 1, written) == TFENC_OK && written[0] == 1);
    static const int64_t rest[6] = {8, 1, 2, 3, 5, 6};
    write_pooled_documents(out, 6, rest, 1);
    CU_ASSERT_FATAL(tfenc_output_finish(&ctx, out) == TFENC_OK);

    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    CU_ASSERT_FATAL(file >= 0);
    hsize_t dims[2] = {N, D};
    hid_t dataset = open_dataset(file, "embeddings", 2, dims);
    float values[N * D];
    read_all(dataset, H5T_NATIVE_FLOAT, values);
    int wrong = 0;
    for (int g = 0; g < N; g++)
        for (int c = 0; c < D; c++)
            wrong += values[g * D + c] != exact_value(g, c);
    CU_ASSERT(wrong == 0);
    H5Dclose(dataset);
    int32_t lengths[N];
    dataset = open_dataset(file, "lengths", 1, dims);
    read_all(dataset, H5T_NATIVE_INT32, lengths);
    for (int g = 0; g < N; g++)
        CU_ASSERT(lengths[g] == g + 1);
    H5Dclose(dataset);
    CU_ASSERT(int_attribute(file, "complete") == 1);
    H5Fclose(file);

    /* A finished file reopens as complete. */
    CU_ASSERT_FATAL(tfenc_output_reopen(&ctx, MPI_COMM_NULL, &options, &out, &was_complete)
                    == TFENC_OK);
    CU_ASSERT(was_complete == 1);
    CU_ASSERT(tfenc_output_finish(&ctx, out) == TFENC_OK);

    /* Another job, model, corpus size or dtype: refused, naming what differs. */
    static const struct { const char *job, *weights; int64_t n; tfenc_output_dtype dtype;
                          const char *expect; } others[] = {
        {"job B", DIGEST_1, N, TFENC_DTYPE_FLOAT32, "attribute 'job_settings' is 'job A'"},
        {"job A\nmodel.head_sha256 = " DIGEST_2, DIGEST_1, N, TFENC_DTYPE_FLOAT32,
         "attribute 'job_settings' is 'model.head_sha256 = " DIGEST_1 "' where this job has "
         "'model.head_sha256 = " DIGEST_2 "'"},
        {JOB_A, DIGEST_2, N, TFENC_DTYPE_FLOAT32, "attribute 'weights_sha256' is '" DIGEST_1 "'"},
        {JOB_A, DIGEST_1, N + 1, TFENC_DTYPE_FLOAT32, "attribute 'n_documents' is 9"},
        {JOB_A, DIGEST_1, N, TFENC_DTYPE_FLOAT16, "attribute 'dtype' is 'float32'"}};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        tfenc_output_options other = options;
        other.job_settings = others[i].job;
        other.weights_sha256 = others[i].weights;
        other.n_documents = others[i].n;
        other.dtype = others[i].dtype;
        tfenc_context_init(&ctx);
        out = NULL;
        CU_ASSERT(tfenc_output_reopen(&ctx, MPI_COMM_NULL, &other, &out, &was_complete)
                  == TFENC_ERR_CONFIG);
        CU_ASSERT(out == NULL);
        CU_ASSERT(strstr(ctx.message, path) != NULL);
        CU_ASSERT(strstr(ctx.message, others[i].expect) != NULL);
        if (strstr(ctx.message, others[i].expect) == NULL)
            fprintf(stderr, "\nexpected '%s' in: %s\n", others[i].expect, ctx.message);
    }

    /* A compressed file is never reopened, even by the same job. */
    char gzip_path[300];
    snprintf(gzip_path, sizeof gzip_path, "%s/resume-gzip.h5", directory);
    tfenc_output_options compressed = options;
    compressed.path = gzip_path;
    compressed.compression = TFENC_COMPRESSION_GZIP;
    tfenc_context_init(&ctx);
    CU_ASSERT_FATAL(tfenc_output_create(&ctx, MPI_COMM_NULL, &compressed, &out) == TFENC_OK);
    CU_ASSERT(tfenc_output_finish(&ctx, out) == TFENC_OK);
    out = NULL;
    CU_ASSERT(tfenc_output_reopen(&ctx, MPI_COMM_NULL, &compressed, &out, &was_complete)
              == TFENC_ERR_CONFIG);
    CU_ASSERT(out == NULL);
    CU_ASSERT(strstr(ctx.message, "resume-gzip.h5 exists and compressed output cannot be resumed")
              != NULL);
}

/* The options of a small job of `kind`, in a variant: 0 plain; 1 with
 * ids, document_source and token ids; 2 chunks = each (a kind that takes
 * chunks). */
static tfenc_output_options described_options(const tfenc_output_kind_entry *kind, int variant,
                                              const char *path)
{
    static const char labels[] = "{\"0\": \"a\", \"1\": \"b\", \"2\": \"c\", \"3\": \"d\", "
                                 "\"4\": \"e\", \"5\": \"f\", \"6\": \"g\", \"7\": \"h\"}";
    tfenc_output_options options = {
        .path = path, .kind = kind, .dtype = TFENC_DTYPE_FLOAT32, .width = 8,
        .n_documents = 3, .n_rows = 7, .job_text = "job", .job_settings = "job",
        .weights_sha256 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        .layout = "ranks=1 data_parallel=1 pipeline_stages=1",
        .precision = "fp32", .labels = labels,
        .multivector_mode = "document", .multivector_marker = "[unused1]",
        .multivector_skiplist = "", .multivector_query_padding = ""};
    if (variant == 1) {
        options.has_ids = options.has_document_source = 1;
        options.has_token_ids = kind->token_ids;
        options.max_id_length = 5;
    } else if (variant == 2) {
        options.chunks = TFENC_CHUNKS_EACH;
    }
    return options;
}

/* The checks --status and a resume run (output_checks.h), the file's
 * message in *message. */
static int check_file(const char *path, char *message, size_t size)
{
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    CU_ASSERT_FATAL(file >= 0);
    tfenc_output_census census;
    int status = tfenc_output_check_attributes(&ctx, path, file);
    if (status == TFENC_OK)
        status = tfenc_output_check_datasets(&ctx, path, file, &census);
    CU_ASSERT(status != TFENC_OK || census.n_documents == 3);
    H5Fclose(file);
    snprintf(message, size, "%s", status == TFENC_OK ? "" : ctx.message);
    return status;
}

/* Every kind of the kinds' table, plain, with every optional dataset, and
 * chunked where it takes chunks, and every kind a further head may be
 * (/outputs/NAME): the file create writes is one the description's checks
 * (what --status holds a file to) accept, and one resume reopens, so that
 * the three cannot drift apart for any kind, a new one included. */
static void test_every_kind_described(void)
{
    for (int k = 0; k < TFENC_OUTPUT_AUTO; k++)
        for (int variant = 0; variant < 3; variant++) {
            const tfenc_output_kind_entry *kind = &tfenc_output_kinds[k];
            if (variant == 2 && !kind->chunks)
                continue;
            char path[300], message[TFENC_MESSAGE_MAX];
            snprintf(path, sizeof path, "%s/kind-%s-%d.h5", directory, kind->name, variant);
            tfenc_output_options options = described_options(kind, variant, path);
            tfenc_context ctx;
            tfenc_context_init(&ctx);
            tfenc_output *out = NULL;
            CU_ASSERT_FATAL(tfenc_output_create(&ctx, MPI_COMM_NULL, &options, &out) == TFENC_OK);
            CU_ASSERT(tfenc_output_close(out) == 0);
            int status = check_file(path, message, sizeof message);
            if (status != TFENC_OK)
                fprintf(stderr, "\n%s variant %d: %s\n", kind->name, variant, message);
            CU_ASSERT(status == TFENC_OK);

            int was_complete = -1;
            tfenc_context_init(&ctx);
            status = tfenc_output_reopen(&ctx, MPI_COMM_NULL, &options, &out, &was_complete);
            if (status != TFENC_OK)
                fprintf(stderr, "\n%s variant %d: %s\n", kind->name, variant, ctx.message);
            CU_ASSERT_FATAL(status == TFENC_OK);
            CU_ASSERT(was_complete == 0);
            CU_ASSERT(tfenc_output_close(out) == 0);
        }
    for (int k = 0; k < TFENC_OUTPUT_AUTO; k++) {
        const tfenc_output_kind_entry *kind = &tfenc_output_kinds[k];
        if (kind->rows == TFENC_ROWS_PER_TOKEN)
            continue; /* a further head writes a row per document */
        char path[300], message[TFENC_MESSAGE_MAX];
        snprintf(path, sizeof path, "%s/head-%s.h5", directory, kind->name);
        tfenc_output_options options = described_options(tfenc_output_kind_named("pooled"), 0,
                                                         path);
        tfenc_output_options head_options = described_options(kind, 0, path);
        for (int reopen = 0; reopen < 2; reopen++) {
            tfenc_context ctx;
            tfenc_context_init(&ctx);
            tfenc_output *out = NULL, *head = NULL;
            int was_complete = -1;
            int status = reopen
                             ? tfenc_output_reopen(&ctx, MPI_COMM_NULL, &options, &out,
                                                   &was_complete)
                             : tfenc_output_create(&ctx, MPI_COMM_NULL, &options, &out);
            if (status == TFENC_OK)
                status = tfenc_output_open_head(&ctx, out, kind->name, &head_options, &head);
            if (status != TFENC_OK)
                fprintf(stderr, "\nhead %s (reopened %d): %s\n", kind->name, reopen,
                        ctx.message);
            CU_ASSERT_FATAL(status == TFENC_OK);
            CU_ASSERT(tfenc_output_close(out) == 0);
            status = check_file(path, message, sizeof message);
            if (status != TFENC_OK)
                fprintf(stderr, "\nhead %s: %s\n", kind->name, message);
            CU_ASSERT(status == TFENC_OK);
        }
    }
}

/* Writes `data` over a dataset of `group` (made anew as [count] of
 * `type`). */
static void put_dataset(hid_t group, const char *name, hid_t type, hsize_t count,
                        const void *data)
{
    if (H5Lexists(group, name, H5P_DEFAULT) > 0)
        H5Ldelete(group, name, H5P_DEFAULT);
    hid_t space = H5Screate_simple(1, &count, NULL);
    hid_t dataset = H5Dcreate2(group, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CU_ASSERT_FATAL(dataset >= 0);
    CU_ASSERT(H5Dwrite(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    H5Dclose(dataset);
    H5Sclose(space);
}

/* A further head's group is held to the description's rules as the root
 * is: a sparse head's CSR with decreasing pointers, or a column outside
 * the vocabulary, a scores head's rows of the wrong width and its d_model
 * outside its domain, are each refused by --status in one line naming the
 * file, the group's dataset (and the document) or attribute; the
 * undamaged file passes. */
static void test_damaged_head(void)
{
    char path[300];
    snprintf(path, sizeof path, "%s/damaged-head.h5", directory);
    const char *kinds[] = {"sparse", "scores"};
    tfenc_output_options options = described_options(tfenc_output_kind_named("pooled"), 0, path);
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_output *out = NULL, *head = NULL;
    CU_ASSERT_FATAL(tfenc_output_create(&ctx, MPI_COMM_NULL, &options, &out) == TFENC_OK);
    for (int h = 0; h < 2; h++) {
        tfenc_output_options head_options
            = described_options(tfenc_output_kind_named(kinds[h]), 0, path);
        CU_ASSERT_FATAL(tfenc_output_open_head(&ctx, out, kinds[h], &head_options, &head)
                        == TFENC_OK);
    }
    CU_ASSERT(tfenc_output_close(out) == 0);

    /* The three documents finished, and the sparse head's CSR as
     * output/sparse.h writes it: 2, 0 and 2 entries. */
    const int32_t lengths[3] = {2, 3, 1};
    const int64_t indptr[4] = {0, 2, 2, 4}, decreasing[4] = {0, 2, 1, 4};
    const int32_t indices[4] = {1, 3, 0, 5}, outside[4] = {1, 3, 0, 13};
    const float values[4] = {1, 2, 3, 4};
    const int64_t top_k = 0;
    const double threshold = 0;
    struct {
        const int64_t *indptr;
        const int32_t *indices;
        int scores_width;
        int64_t scores_d_model; /* the group's attribute */
        const char *expect[3];
    } cases[] = {
        {indptr, indices, 8, 8, {NULL, NULL, NULL}},
        {decreasing, indices, 8, 8,
         {"inconsistent: dataset '/outputs/sparse/sparse_indptr' decreases at index 1 "
          "(2, then 1)", NULL, NULL}},
        {indptr, outside, 8, 8,
         {"inconsistent: dataset '/outputs/sparse/sparse_indices' holds 13 at index 3",
          "(document 2)", "outside the columns 0 to d_model - 1 = 7"}},
        {indptr, indices, 9, 8,
         {"inconsistent: dataset '/outputs/scores/scores' holds [3, 9] float32 values, "
          "expected [n_documents 3, d_model 8]", NULL, NULL}},
        {indptr, indices, 8, -5,
         {"inconsistent: attribute '/outputs/scores/d_model' is -5, expected 1 to 2147483647",
          NULL, NULL}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        hid_t file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
        CU_ASSERT_FATAL(file >= 0);
        hid_t lengths_dataset = H5Dopen2(file, "lengths", H5P_DEFAULT);
        CU_ASSERT(H5Dwrite(lengths_dataset, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                           lengths) >= 0);
        H5Dclose(lengths_dataset);
        hid_t sparse = H5Gopen2(file, "/outputs/sparse", H5P_DEFAULT);
        CU_ASSERT_FATAL(sparse >= 0);
        put_dataset(sparse, "sparse_indptr", H5T_NATIVE_INT64, 4, cases[i].indptr);
        put_dataset(sparse, "sparse_indices", H5T_NATIVE_INT32, 4, cases[i].indices);
        put_dataset(sparse, "sparse_values", H5T_NATIVE_FLOAT, 4, values);
        CU_ASSERT(tfenc_hdf5_write_attribute(sparse, "sparse_top_k", H5T_NATIVE_INT64,
                                             H5T_NATIVE_INT64, &top_k) == 0);
        CU_ASSERT(tfenc_hdf5_write_attribute(sparse, "sparse_threshold", H5T_NATIVE_DOUBLE,
                                             H5T_NATIVE_DOUBLE, &threshold) == 0);
        H5Gclose(sparse);
        hid_t scores = H5Gopen2(file, "/outputs/scores", H5P_DEFAULT);
        CU_ASSERT(tfenc_hdf5_write_attribute(scores, "d_model", H5T_NATIVE_INT64,
                                             H5T_NATIVE_INT64, &cases[i].scores_d_model) == 0);
        hsize_t dims[2] = {3, (hsize_t)cases[i].scores_width};
        H5Ldelete(scores, "scores", H5P_DEFAULT);
        hid_t space = H5Screate_simple(2, dims, NULL);
        hid_t rows = H5Dcreate2(scores, "scores", H5T_IEEE_F32LE, space, H5P_DEFAULT,
                                H5P_DEFAULT, H5P_DEFAULT);
        CU_ASSERT(rows >= 0);
        H5Dclose(rows);
        H5Sclose(space);
        H5Gclose(scores);
        H5Fclose(file);

        tfenc_inspection inspection;
        tfenc_context_init(&ctx);
        int status = tfenc_inspect_output(&ctx, path, &inspection);
        tfenc_inspection_free(&inspection);
        if (cases[i].expect[0] == NULL) {
            if (status != TFENC_OK)
                fprintf(stderr, "\nundamaged heads: %s\n", ctx.message);
            CU_ASSERT(status == TFENC_OK);
            continue;
        }
        CU_ASSERT(status == TFENC_ERR_CONFIG);
        CU_ASSERT(strncmp(ctx.message, path, strlen(path)) == 0);
        CU_ASSERT(strchr(ctx.message, '\n') == NULL);
        for (int e = 0; e < 3 && cases[i].expect[e] != NULL; e++) {
            CU_ASSERT(strstr(ctx.message, cases[i].expect[e]) != NULL);
            if (strstr(ctx.message, cases[i].expect[e]) == NULL)
                fprintf(stderr, "\nexpected '%s' in: %s\n", cases[i].expect[e], ctx.message);
        }
    }
}

/* corpus_shards: stored as a dataset that keeps any name (a tab, a
 * newline), read back as written; a resume knows a shard by its name, size
 * and fingerprint wherever its directory is; a damaged row, and older
 * files' tab-separated text, are read with the same checks. */
static void test_corpus_shards(void)
{
    enum { N = 9, D = 4 };
    char path[300];
    snprintf(path, sizeof path, "%s/shards.h5", directory);
    tfenc_corpus_shard rows[3] = {
        {.path = "/data/a\tb.jsonl", .bytes = 10, .first_document = 0, .documents = 2},
        {.path = "/data/c\nd.jsonl", .bytes = 20, .first_document = 2, .documents = 3},
        {.path = "/data/e.jsonl", .bytes = 30, .first_document = 5, .documents = 4, .skipped = 1}};
    for (int i = 0; i < 3; i++)
        memset(rows[i].fingerprint, "abc"[i], 64);
    tfenc_corpus_shards table = {.shards = rows, .n = 3};
    tfenc_output_options options = {.path = path, .kind = &tfenc_output_kinds[TFENC_OUTPUT_POOLED],
                                    .dtype = TFENC_DTYPE_FLOAT32, .width = D, .n_documents = N,
                                    .job_settings = "job", .weights_sha256 = DIGEST_1,
                                    .corpus_fingerprint = DIGEST_2, .precision = "fp32",
                                    .corpus_shards = &table};
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_output *out = NULL;
    CU_ASSERT_FATAL(tfenc_output_create(&ctx, MPI_COMM_NULL, &options, &out) == TFENC_OK);
    tfenc_output_close(out);

    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    CU_ASSERT_FATAL(file >= 0);
    tfenc_corpus_shards read = {0};
    CU_ASSERT_FATAL(tfenc_corpus_shards_read(&ctx, path, file, &read) == TFENC_OK);
    CU_ASSERT_FATAL(read.n == 3);
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_STRING_EQUAL(read.shards[i].path, rows[i].path);
        CU_ASSERT_STRING_EQUAL(read.shards[i].fingerprint, rows[i].fingerprint);
        CU_ASSERT(read.shards[i].bytes == rows[i].bytes
                  && read.shards[i].first_document == rows[i].first_document
                  && read.shards[i].documents == rows[i].documents
                  && read.shards[i].skipped == rows[i].skipped);
    }
    tfenc_corpus_shards_free(&read);
    H5Fclose(file);

    /* The same shards reached through another directory resume; another
     * content, a shard removed or one added are refused, naming it. */
    tfenc_corpus_shard moved[4];
    memcpy(moved, rows, sizeof rows);
    moved[0].path = "/elsewhere/a\tb.jsonl";
    moved[1].path = "/elsewhere/c\nd.jsonl";
    moved[2].path = "e.jsonl";
    tfenc_corpus_shards other = {.shards = moved, .n = 3};
    options.corpus_shards = &other;
    int was_complete = 0;
    CU_ASSERT(tfenc_output_reopen(&ctx, MPI_COMM_NULL, &options, &out, &was_complete)
              == TFENC_OK);
    CU_ASSERT_FATAL(out != NULL);
    tfenc_output_close(out);
    moved[3] = moved[2];
    moved[3].path = "/elsewhere/f.jsonl";
    moved[1].fingerprint[7] = 'f';
    static const struct { int n; const char *expect; } changes[] = {
        {3, "shard /elsewhere/c d.jsonl changed since the run that began this file read it"},
        {2, "shard /data/c d.jsonl was read by the run that began this file and is no longer"},
        {4, "shard /elsewhere/f.jsonl was not in the corpus of the run that began this file"}};
    for (size_t i = 0; i < sizeof changes / sizeof *changes; i++) {
        if (i == 1) {
            moved[1] = moved[2]; /* c\nd.jsonl removed */
            moved[1].first_document = 2;
        }
        if (i == 2) {
            memcpy(moved, rows, sizeof rows); /* f.jsonl added */
        }
        other.n = changes[i].n;
        tfenc_context_init(&ctx);
        out = NULL;
        CU_ASSERT(tfenc_output_reopen(&ctx, MPI_COMM_NULL, &options, &out, &was_complete)
                  == TFENC_ERR_CONFIG);
        CU_ASSERT(out == NULL);
        CU_ASSERT(strstr(ctx.message, changes[i].expect) != NULL);
        CU_ASSERT(strstr(ctx.message, "choose another [job] output, which keeps this file")
                  != NULL);
        if (strstr(ctx.message, changes[i].expect) == NULL)
            fprintf(stderr, "\nexpected '%s' in: %s\n", changes[i].expect, ctx.message);
    }

    /* A row no run writes: named, never trusted. */
    file = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    CU_ASSERT_FATAL(file >= 0);
    hid_t dataset = H5Dopen2(file, "corpus_shards", H5P_DEFAULT);
    hid_t memory = tfenc_corpus_shards_type(tfenc_corpus_shards_path_size(&table), 1);
    rows[1].fingerprint[3] = 'x';
    void *packed = tfenc_corpus_shards_pack(&table, tfenc_corpus_shards_path_size(&table));
    CU_ASSERT(H5Dwrite(dataset, memory, H5S_ALL, H5S_ALL, H5P_DEFAULT, packed) >= 0);
    free(packed);
    H5Tclose(memory);
    H5Dclose(dataset);
    tfenc_context_init(&ctx);
    CU_ASSERT(tfenc_corpus_shards_read(&ctx, path, file, &read) == TFENC_ERR_CONFIG);
    CU_ASSERT(strstr(ctx.message, "dataset 'corpus_shards', row 1 has a fingerprint that is "
                                  "not 64 hex digits") != NULL);
    CU_ASSERT(read.n == 0 && read.shards == NULL);
    H5Fclose(file);

    /* Older files' text: read alike, checked alike. */
    char text[400];
    snprintf(text, sizeof text, "shards/a.jsonl\t10\t%s\t0\t2\nshards/e.jsonl\t30\t%s\t2\t4\n",
             rows[0].fingerprint, rows[2].fingerprint);
    tfenc_context_init(&ctx);
    CU_ASSERT_FATAL(tfenc_corpus_shards_parse(&ctx, path, text, &read) == TFENC_OK);
    CU_ASSERT(read.n == 2 && read.from_attribute);
    CU_ASSERT(read.n == 2 && strcmp(read.shards[1].path, "shards/e.jsonl") == 0
              && read.shards[1].bytes == 30 && read.shards[1].first_document == 2
              && read.shards[1].documents == 4 && read.shards[1].skipped == 0);
    tfenc_corpus_shards_free(&read);
    snprintf(text, sizeof text, "shards/a.jsonl\t10\t%s\t0\t2\nshards/e.jsonl\t30\t%s\t3\t4\n",
             rows[0].fingerprint, rows[2].fingerprint);
    CU_ASSERT(tfenc_corpus_shards_parse(&ctx, path, text, &read) == TFENC_ERR_CONFIG);
    CU_ASSERT(strstr(ctx.message, "attribute 'corpus_shards', row 1 does not begin where the "
                                  "file before it ends") != NULL);
}

static int suite_init(void)
{
    mkdir("tests", 0755);
    mkdir("tests/data", 0755);
    mkdir("tests/data/generated", 0755);
    snprintf(directory, sizeof directory, "tests/data/generated/output-XXXXXX");
    if (mkdtemp(directory) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    return 0;
}

/* The files stay for inspection when something failed. */
static int suite_clean(void)
{
    if (CU_get_number_of_failures() != 0)
        return 0;
    char command[300];
    snprintf(command, sizeof command, "rm -rf '%s'", directory);
    return system(command) != 0;
}

/* skip_first (BGE-M3's last_hidden_state[:, 1:]): each sequence's first
 * row goes, whatever its id, before the ids of the skiplist are looked at;
 * the feeder's count agrees with the packing. */
static void test_multivector_skip_first(void)
{
    enum { D = 3, WIDTH = 2, TOKENS = 6 };
    static const uint8_t flags[8] = {0, 0, 0, 0, 0, 1, 0, 0};
    const tfenc_skiplist first_only = {.skip_first = 1};
    const tfenc_skiplist first_and_ids = {.flags = flags, .n_ids = 8, .skip_first = 1};
    int32_t ids[TOKENS] = {0, 5, 3, 0, 4, 2};
    const int32_t seq_start[3] = {0, 3, TOKENS};
    CU_ASSERT(tfenc_skiplist_count(&first_only, ids, 3) == 2);
    CU_ASSERT(tfenc_skiplist_count(&first_and_ids, ids, 3) == 1);
    CU_ASSERT(tfenc_skiplist_count(&first_only, ids + 3, 1) == 0);
    float x[TOKENS * D];
    for (int t = 0; t < TOKENS; t++)
        for (int c = 0; c < D; c++)
            x[t * D + c] = (float)(10 * t + c);
    int32_t kept[2];
    CU_ASSERT_FATAL(tfenc_multivector_pack(&first_and_ids, x, ids, D, WIDTH, 2, seq_start,
                                           kept) == 3);
    CU_ASSERT(kept[0] == 1 && kept[1] == 2);
    static const int32_t kept_ids[3] = {3, 4, 2};
    static const float kept_rows[3 * WIDTH] = {20, 21, 40, 41, 50, 51};
    CU_ASSERT(memcmp(ids, kept_ids, sizeof kept_ids) == 0);
    CU_ASSERT(memcmp(x, kept_rows, sizeof kept_rows) == 0);
}

/* Two sequences of d = 4 rows whose first 2 values are the vector: the
 * skiplist's ids (5 and 7) lose their rows, an id beyond the flags keeps
 * its own, and the count the feeder uses agrees with the packing. */
static void test_multivector_pack(void)
{
    enum { D = 4, WIDTH = 2, TOKENS = 7 };
    static const uint8_t flags[8] = {0, 0, 0, 0, 0, 1, 0, 1};
    const tfenc_skiplist skip = {.flags = flags, .n_ids = 8};
    int32_t ids[TOKENS] = {2, 5, 9, 3, 7, 7, 4}; /* 9: outside the flags, kept */
    const int32_t seq_start[3] = {0, 4, TOKENS};
    float x[TOKENS * D];
    for (int t = 0; t < TOKENS; t++)
        for (int c = 0; c < D; c++)
            x[t * D + c] = (float)(10 * t + c);
    CU_ASSERT(tfenc_skiplist_count(&skip, ids, 4) == 3);
    CU_ASSERT(tfenc_skiplist_count(&skip, ids + 4, 3) == 1);
    CU_ASSERT(tfenc_skiplist_count(NULL, ids, TOKENS) == TOKENS);
    int32_t kept[2];
    CU_ASSERT_FATAL(tfenc_multivector_pack(&skip, x, ids, D, WIDTH, 2, seq_start, kept) == 4);
    CU_ASSERT(kept[0] == 3 && kept[1] == 1);
    static const int32_t kept_ids[4] = {2, 9, 3, 4};
    static const float kept_rows[4 * WIDTH] = {0, 1, 20, 21, 30, 31, 60, 61};
    CU_ASSERT(memcmp(ids, kept_ids, sizeof kept_ids) == 0);
    CU_ASSERT(memcmp(x, kept_rows, sizeof kept_rows) == 0);

    /* The vectors kind: `vectors` under `offsets`, with its attributes. */
    char path[300];
    snprintf(path, sizeof path, "%s/vectors.h5", directory);
    tfenc_output_options options = {.path = path, .kind = &tfenc_output_kinds[TFENC_OUTPUT_VECTORS],
                                     .dtype = TFENC_DTYPE_FLOAT32, .width = WIDTH,
                                     .n_documents = 2, .n_rows = 4,
                                     .multivector_mode = "document",
                                     .multivector_marker = "[unused1]",
                                     .multivector_skiplist = "5 7"};
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_output *out = NULL;
    CU_ASSERT_FATAL(tfenc_output_create(&ctx, MPI_COMM_NULL, &options, &out) == TFENC_OK);
    const int64_t documents[2] = {1, 0}, first_rows[2] = {3, 0};
    const int32_t counts[2] = {kept[1], kept[0]}, truncated[2] = {0, 0};
    float swapped[4 * WIDTH]; /* document 1's row first, as a microbatch may hold them */
    memcpy(swapped, x + 3 * WIDTH, WIDTH * sizeof *x);
    memcpy(swapped + WIDTH, x, 3 * WIDTH * sizeof *x);
    CU_ASSERT(tfenc_output_write_tokens(&ctx, out, 2, documents, first_rows, counts,
                                        swapped) == TFENC_OK);
    CU_ASSERT(tfenc_output_write_metadata(&ctx, out, 2, documents, counts, truncated, NULL, NULL,
                                          NULL)
              == TFENC_OK);
    CU_ASSERT_FATAL(tfenc_output_finish(&ctx, out) == TFENC_OK);
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    CU_ASSERT_FATAL(file >= 0);
    CU_ASSERT(H5Lexists(file, "hidden", H5P_DEFAULT) == 0);
    hsize_t dims[2] = {4, WIDTH}, entries[1] = {3};
    float read[4 * WIDTH];
    int64_t offsets[3];
    hid_t vectors = open_dataset(file, "vectors", 2, dims);
    read_all(vectors, H5T_NATIVE_FLOAT, read);
    CU_ASSERT(memcmp(read, kept_rows, sizeof read) == 0);
    H5Dclose(vectors);
    hid_t offsets_dataset = open_dataset(file, "offsets", 1, entries);
    read_all(offsets_dataset, H5T_NATIVE_INT64, offsets);
    CU_ASSERT(offsets[0] == 0 && offsets[1] == 3 && offsets[2] == 4);
    H5Dclose(offsets_dataset);
    CU_ASSERT(H5Aexists(file, "multivector_skiplist") > 0);
    CU_ASSERT(H5Aexists(file, "multivector_marker") > 0);
    H5Fclose(file);
}

static const test_case output_cases[] = {
    {"float16 known bit patterns", test_float16_known_values},
    {"float16 round trip", test_float16_round_trip},
    {"float16 against the compiler", test_float16_against_compiler},
    {"bfloat16", test_bfloat16},
    {"HDF5 16-bit types", test_h5_types},
    {"SHA-256 vectors", test_sha256_vectors},
    {"SHA-256 of files", test_sha256_file},
    {"pooled float32", test_pooled_float32},
    {"pooled float16 gzip", test_pooled_float16_gzip},
    {"pooled bfloat16", test_pooled_bfloat16},
    {"per-token hidden states", test_tokens},
    {"scattered rows", test_scattered_rows},
    {"errors and abandoned files", test_errors},
    {"resume after a kill", test_resume},
    {"every kind: created, described, reopened", test_every_kind_described},
    {"a further head's damaged group refused", test_damaged_head},
    {"corpus_shards: any name, known by name, size and fingerprint", test_corpus_shards},
    {"multi-vector rows", test_multivector_pack},
    {"multi-vector rows without the first token", test_multivector_skip_first},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"output", suite_init, suite_clean, output_cases},
    {NULL, NULL, NULL, NULL}};
