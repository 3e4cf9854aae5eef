/* CUnit suite for core/input/stream (shards read as lines through zlib,
 * libzstd and liblzma): every codec gives back the bytes it was given, line
 * by line and after seeks by line or byte, and a stream cut at ANY length
 * past its magic bytes is an error, never a shorter shard. The compressed
 * files are written here by the same libraries' encoders. */
#include "base/context.h"
#include "input/stream.h"
#include "harness/cunit_main.h"

#include <CUnit/CUnit.h>
#include <lzma.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

static char work[512];
static char *payload;       /* the lines, end to end */
static size_t payload_size;
static size_t *line_starts; /* [n_lines + 1] */
static size_t n_lines;

static const char *build_dir(void)
{
    const char *dir = getenv("abs_top_builddir");
    return dir != NULL ? dir : ".";
}

/* Lines of 0 to ~200 bytes, one of 700 kB (longer than the stream's output
 * buffer), and a last line without "\n". */
static void make_payload(size_t lines)
{
    free(payload);
    free(line_starts);
    payload = malloc(lines * 220 + 800000);
    line_starts = malloc((lines + 1) * sizeof *line_starts);
    size_t used = 0;
    unsigned state = 12345;
    for (size_t i = 0; i < lines; i++) {
        line_starts[i] = used;
        size_t length = i == lines / 2 ? 700000 : (state = state * 1103515245u + 12345u) % 200;
        for (size_t k = 0; k < length; k++)
            payload[used++] = (char)('a' + (k * 7 + i) % 26);
        if (i + 1 < lines)
            payload[used++] = '\n';
    }
    line_starts[lines] = used;
    payload_size = used;
    n_lines = lines;
}

static size_t compress_gzip(const char *data, size_t size, unsigned char *out, size_t capacity)
{
    z_stream z = {0};
    CU_ASSERT_FATAL(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    z.next_in = (unsigned char *)data;
    z.avail_in = (uInt)size;
    z.next_out = out;
    z.avail_out = (uInt)capacity;
    CU_ASSERT_FATAL(deflate(&z, Z_FINISH) == Z_STREAM_END);
    size_t written = capacity - z.avail_out;
    deflateEnd(&z);
    return written;
}

static size_t compress_zstd(const char *data, size_t size, unsigned char *out, size_t capacity)
{
    ZSTD_CCtx *c = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
    size_t written = ZSTD_compress2(c, out, capacity, data, size);
    CU_ASSERT_FATAL(!ZSTD_isError(written));
    ZSTD_freeCCtx(c);
    return written;
}

static size_t compress_xz(const char *data, size_t size, unsigned char *out, size_t capacity)
{
    size_t written = 0;
    CU_ASSERT_FATAL(lzma_easy_buffer_encode(6, LZMA_CHECK_CRC64, NULL, (const uint8_t *)data,
                                            size, out, &written, capacity) == LZMA_OK);
    return written;
}

typedef size_t (*compressor)(const char *, size_t, unsigned char *, size_t);

static const struct {
    const char *name;
    tfenc_stream_codec codec;
    compressor compress; /* NULL: plain */
} codecs[] = {{"plain", TFENC_STREAM_PLAIN, NULL},
              {"gzip", TFENC_STREAM_GZIP, compress_gzip},
              {"zstd", TFENC_STREAM_ZSTD, compress_zstd},
              {"xz", TFENC_STREAM_XZ, compress_xz}};
#define N_CODECS (sizeof codecs / sizeof codecs[0])

/* Writes the payload through codec c into a file; its compressed bytes
 * stay in *bytes (malloc'ed) when asked. */
static const char *write_codec(size_t c, unsigned char **bytes, size_t *size)
{
    static char path[700];
    snprintf(path, sizeof path, "%s/payload.%s", work, codecs[c].name);
    size_t capacity = payload_size + payload_size / 2 + 4096;
    unsigned char *data = malloc(capacity);
    size_t n = payload_size;
    if (codecs[c].compress != NULL)
        n = codecs[c].compress(payload, payload_size, data, capacity);
    else
        memcpy(data, payload, payload_size);
    FILE *file = fopen(path, "wb");
    CU_ASSERT_FATAL(file != NULL);
    fwrite(data, 1, n, file);
    fclose(file);
    if (bytes != NULL) {
        *bytes = data;
        *size = n;
    } else {
        free(data);
    }
    return path;
}

static void expect_line(tfenc_stream *stream, size_t i, char **line, size_t *capacity)
{
    size_t length = 0;
    CU_ASSERT_FATAL(tfenc_stream_getline(stream, line, capacity, &length) == TFENC_OK);
    size_t want = line_starts[i + 1] - line_starts[i]; /* with its "\n", if any */
    CU_ASSERT(length == want);
    CU_ASSERT(length == want && memcmp(*line, payload + line_starts[i], want < length ? want
                                                                                      : length) == 0);
}

static void test_lines_come_back(void)
{
    make_payload(3000);
    for (size_t c = 0; c < N_CODECS; c++) {
        tfenc_context ctx;
        tfenc_context_init(&ctx);
        tfenc_stream *stream = NULL;
        CU_ASSERT_FATAL(tfenc_stream_open(&ctx, "test", write_codec(c, NULL, NULL), &stream)
                        == TFENC_OK);
        CU_ASSERT(tfenc_stream_compression(stream) == codecs[c].codec);
        char *line = NULL;
        size_t capacity = 0, length = 0;
        for (size_t i = 0; i < n_lines; i++)
            expect_line(stream, i, &line, &capacity);
        CU_ASSERT(tfenc_stream_getline(stream, &line, &capacity, &length) == TFENC_ERR_NOT_FOUND);
        CU_ASSERT(tfenc_stream_offset(stream) == (int64_t)payload_size);
        CU_ASSERT(tfenc_stream_line(stream) == (int64_t)n_lines);
        /* Seeks by line, backward (from the start again) and forward. */
        const size_t targets[] = {2999, 10, 1500, 1501, 0, 2000, 1499};
        for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++) {
            CU_ASSERT_FATAL(tfenc_stream_seek_line(stream, (int64_t)targets[t]) == TFENC_OK);
            expect_line(stream, targets[t], &line, &capacity);
        }
        CU_ASSERT(tfenc_stream_seek_line(stream, (int64_t)n_lines + 1) == TFENC_ERR_NOT_FOUND);
        /* And by byte offset. */
        CU_ASSERT_FATAL(tfenc_stream_seek(stream, (int64_t)line_starts[777]) == TFENC_OK);
        expect_line(stream, 777, &line, &capacity);
        free(line);
        tfenc_stream_close(stream);
    }
}

/* Every prefix of a compressed file, from its magic bytes on, must fail
 * when read to the end: a truncated shard is never a shorter corpus. */
static void test_every_truncation_is_an_error(void)
{
    make_payload(300);
    /* Without the 700 kB line: small enough to cut at every length. */
    payload_size = line_starts[150];
    n_lines = 150;
    for (size_t c = 1; c < N_CODECS; c++) {
        unsigned char *bytes = NULL;
        size_t size = 0;
        write_codec(c, &bytes, &size);
        char path[700];
        snprintf(path, sizeof path, "%s/cut.%s", work, codecs[c].name);
        int silent = 0;
        for (size_t cut = 6; cut <= size; cut++) {
            FILE *file = fopen(path, "wb");
            fwrite(bytes, 1, cut, file);
            fclose(file);
            tfenc_context ctx;
            tfenc_context_init(&ctx);
            tfenc_stream *stream = NULL;
            CU_ASSERT_FATAL(tfenc_stream_open(&ctx, "test", path, &stream) == TFENC_OK);
            char *line = NULL;
            size_t capacity = 0, length = 0, total = 0;
            int status;
            while ((status = tfenc_stream_getline(stream, &line, &capacity, &length)) == TFENC_OK)
                total += length;
            if (cut < size && status == TFENC_ERR_NOT_FOUND)
                silent++;
            if (cut < size && status != TFENC_ERR_NOT_FOUND)
                CU_ASSERT(status == TFENC_ERR_INPUT &&
                          (strstr(tfenc_stream_why(stream), "truncated") != NULL ||
                           strstr(tfenc_stream_why(stream), "corrupt") != NULL));
            if (cut == size)
                CU_ASSERT(status == TFENC_ERR_NOT_FOUND && total == payload_size);
            free(line);
            tfenc_stream_close(stream);
        }
        if (silent > 0)
            fprintf(stderr, "\n  %s: %d truncations read as a clean end\n", codecs[c].name, silent);
        CU_ASSERT(silent == 0);
        free(bytes);
    }
}

/* Reads the file at `path` to its end and checks it gives back the payload,
 * line by line, and that it was read as `codec`. */
static void expect_payload(const char *path, tfenc_stream_codec codec)
{
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_stream *stream = NULL;
    CU_ASSERT_FATAL(tfenc_stream_open(&ctx, "test", path, &stream) == TFENC_OK);
    CU_ASSERT(tfenc_stream_compression(stream) == codec);
    char *line = NULL;
    size_t capacity = 0, length = 0;
    for (size_t i = 0; i < n_lines && tfenc_stream_compression(stream) == codec; i++)
        expect_line(stream, i, &line, &capacity);
    CU_ASSERT(tfenc_stream_getline(stream, &line, &capacity, &length) == TFENC_ERR_NOT_FOUND);
    CU_ASSERT(tfenc_stream_offset(stream) == (int64_t)payload_size);
    free(line);
    tfenc_stream_close(stream);
}

static void write_bytes(const char *path, const unsigned char *data, size_t size)
{
    FILE *file = fopen(path, "wb");
    CU_ASSERT_FATAL(file != NULL);
    CU_ASSERT(fwrite(data, 1, size, file) == size);
    fclose(file);
}

/* Reads the file at `path` to its end: it must fail with TFENC_ERR_INPUT,
 * the reason naming `why`. */
static void expect_read_error(const char *path, const char *why)
{
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_stream *stream = NULL;
    CU_ASSERT_FATAL(tfenc_stream_open(&ctx, "test", path, &stream) == TFENC_OK);
    char *line = NULL;
    size_t capacity = 0, length = 0;
    int status;
    while ((status = tfenc_stream_getline(stream, &line, &capacity, &length)) == TFENC_OK)
        ;
    CU_ASSERT(status == TFENC_ERR_INPUT);
    CU_ASSERT(strstr(tfenc_stream_why(stream), why) != NULL);
    free(line);
    tfenc_stream_close(stream);
}

/* gzip files concatenated (as `cat a.gz b.gz` and bgzip make) are one
 * stream; a bit flipped in the compressed data is an error. */
static void test_gzip_members_and_flips(void)
{
    make_payload(400);
    payload_size = line_starts[150];
    n_lines = 150;
    size_t half = line_starts[75];
    size_t capacity = payload_size * 2 + 4096;
    unsigned char *data = malloc(capacity);
    size_t first = compress_gzip(payload, half, data, capacity);
    size_t second = compress_gzip(payload + half, payload_size - half, data + first,
                                  capacity - first);
    char path[700];
    snprintf(path, sizeof path, "%s/members.gz", work);
    write_bytes(path, data, first + second);
    expect_payload(path, TFENC_STREAM_GZIP);
    /* Zeros padding the file to a block (tape and block writers; gzip and
     * Python's gzip read past them) end the stream; a byte after them is an
     * error, not data silently dropped. */
    unsigned char *padded = calloc(first + second + 70000, 1);
    memcpy(padded, data, first + second);
    write_bytes(path, padded, first + second + 70000);
    expect_payload(path, TFENC_STREAM_GZIP);
    padded[first + second + 69000] = 0x1f;
    write_bytes(path, padded, first + second + 70000);
    expect_read_error(path, "data after the zero bytes");
    free(padded);
    /* A flipped bit in the first member's data (past its 10-byte header). */
    data[first / 2] ^= 0x04;
    write_bytes(path, data, first + second);
    expect_read_error(path, "corrupt gzip stream");
    free(data);
}

/* A zstd skippable frame (RFC 8878 3.1.2): magic 0x184D2A50 + `variant`
 * (0..15), little-endian, a 4-byte length, then that many bytes of user
 * data. */
static size_t skippable_frame(unsigned char *out, unsigned variant, size_t data_size)
{
    const uint32_t magic = 0x184D2A50u + variant;
    for (int i = 0; i < 4; i++) {
        out[i] = (unsigned char)(magic >> (8 * i));
        out[4 + i] = (unsigned char)(data_size >> (8 * i));
    }
    for (size_t i = 0; i < data_size; i++)
        out[8 + i] = (unsigned char)(i * 31 + 7); /* not zeros: a NUL is no sign of text */
    return 8 + data_size;
}

/* What the command-line tools read whole, read whole here: a zstd file that
 * starts with a skippable frame (every file pzstd writes: each frame is
 * preceded by one that holds its size), zstd frames end to end with
 * skippable frames between them, and xz streams end to end with stream
 * padding between them. */
static void test_frames_and_streams_end_to_end(void)
{
    make_payload(400);
    payload_size = line_starts[150];
    n_lines = 150;
    const size_t half = line_starts[75];
    size_t capacity = payload_size * 2 + 8192, used = 0;
    unsigned char *data = malloc(capacity);
    char path[700];
    /* zstd: skippable (variant 0), frame, skippable (variant 15), frame,
     * skippable of no data at the end. */
    used += skippable_frame(data + used, 0, 4);
    used += compress_zstd(payload, half, data + used, capacity - used);
    used += skippable_frame(data + used, 15, 100);
    used += compress_zstd(payload + half, payload_size - half, data + used, capacity - used);
    used += skippable_frame(data + used, 7, 0);
    snprintf(path, sizeof path, "%s/skippable.zst", work);
    write_bytes(path, data, used);
    expect_payload(path, TFENC_STREAM_ZSTD);
    /* ... and cut inside its last frame: truncated, not a shorter shard. */
    write_bytes(path, data, used - 8 - 3);
    expect_read_error(path, "truncated zstd stream");

    /* xz: two streams with 8 bytes of stream padding between them. */
    used = compress_xz(payload, half, data, capacity);
    memset(data + used, 0, 8);
    used += 8;
    used += compress_xz(payload + half, payload_size - half, data + used, capacity - used);
    snprintf(path, sizeof path, "%s/streams.xz", work);
    write_bytes(path, data, used);
    expect_payload(path, TFENC_STREAM_XZ);
    free(data);

    /* A file pzstd wrote, when the tool is here (Debian's zstd package has
     * it); the hand-built frames above hold the same structure. */
    if (system("command -v pzstd > /dev/null 2>&1") == 0) {
        char plain[700], command[2200];
        snprintf(plain, sizeof plain, "%s/pzstd-payload.txt", work);
        write_bytes(plain, (const unsigned char *)payload, payload_size);
        snprintf(path, sizeof path, "%s/pzstd-payload.txt.zst", work);
        snprintf(command, sizeof command, "pzstd -q -f -p 2 '%s' -o '%s'", plain, path);
        CU_ASSERT_FATAL(system(command) == 0);
        expect_payload(path, TFENC_STREAM_ZSTD);
    }
}

/* Files in a compression tfenc does not decode were read as text: a NUL
 * byte somewhere ("UTF-16 or binary?"), or garbage documents before it.
 * Their magic bytes name them. */
static void test_other_compressions_named(void)
{
    static const struct {
        const char *name;
        unsigned char bytes[12];
    } files[] = {{"bzip2", {'B', 'Z', 'h', '9', 0x31, 0x41, 0x59, 0x26, 0x53, 0x59, 'x', 'y'}},
                 {"bzip2", {'B', 'Z', 'h', '1', 0x17, 0x72, 0x45, 0x38, 0x50, 0x90, 0, 0}},
                 {"lz4", {0x04, 0x22, 0x4d, 0x18, 0x64, 0x40, 0xa7, 'h', 'e', 'l', 'l', 'o'}},
                 {"zip", {'P', 'K', 0x03, 0x04, 0x14, 0, 0, 0, 8, 0, 'a', 'b'}},
                 {"7z", {'7', 'z', 0xbc, 0xaf, 0x27, 0x1c, 0, 4, 'a', 'b', 'c', 'd'}}};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char path[700];
        snprintf(path, sizeof path, "%s/other-%zu.%s", work, f, files[f].name);
        write_bytes(path, files[f].bytes, sizeof files[f].bytes);
        tfenc_context ctx;
        tfenc_context_init(&ctx);
        tfenc_stream *stream = NULL;
        CU_ASSERT(tfenc_stream_open(&ctx, "[job] input", path, &stream) == TFENC_ERR_INPUT);
        CU_ASSERT(stream == NULL);
        char expected[64];
        snprintf(expected, sizeof expected, "is %s-compressed", files[f].name);
        CU_ASSERT(strstr(ctx.message, expected) != NULL);
        tfenc_stream_close(stream);
    }
    /* Text that merely starts with the same letters is text. */
    char path[700];
    snprintf(path, sizeof path, "%s/BZh-text.txt", work);
    write_bytes(path, (const unsigned char *)"BZh9 is not a header\nPK is a name\n", 34);
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_stream *stream = NULL;
    CU_ASSERT_FATAL(tfenc_stream_open(&ctx, "[job] input", path, &stream) == TFENC_OK);
    CU_ASSERT(tfenc_stream_compression(stream) == TFENC_STREAM_PLAIN);
    tfenc_stream_close(stream);
}

static void test_special_files_refused(void)
{
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_stream *stream = NULL;
    CU_ASSERT(tfenc_stream_open(&ctx, "[job] input", "/dev/zero", &stream) != TFENC_OK);
    CU_ASSERT(stream == NULL);
    CU_ASSERT(strstr(ctx.message, "[job] input /dev/zero") != NULL);
    CU_ASSERT(strstr(ctx.message, "not a regular file") != NULL);
}

static int suite_init(void)
{
    snprintf(work, sizeof work, "%s/tests/data/generated/test_stream", build_dir());
    char command[1200];
    snprintf(command, sizeof command, "rm -rf '%s' && mkdir -p '%s'", work, work);
    return system(command) != 0;
}

static int suite_clean(void)
{
    free(payload);
    free(line_starts);
    return 0;
}

static const test_case stream_cases[] = {
    {"lines come back through every codec", test_lines_come_back},
    {"every truncation is an error", test_every_truncation_is_an_error},
    {"gzip members and flipped bits", test_gzip_members_and_flips},
    {"frames and streams end to end", test_frames_and_streams_end_to_end},
    {"other compressions named", test_other_compressions_named},
    {"special files refused", test_special_files_refused},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"stream", suite_init, suite_clean, stream_cases},
    {NULL, NULL, NULL, NULL}};
