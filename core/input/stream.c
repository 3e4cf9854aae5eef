/* Shards read as lines through zlib, libzstd or liblzma, or straight from
 * the file: compression is found from the magic bytes, and a stream that
 * ends inside a frame is an error, not a shorter shard. */
#include "input/stream.h"
#include "base/files.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <lzma.h>
#include <zlib.h>
#include <zstd.h>

/* Compressed bytes read per call, and decompressed bytes kept: with the
 * decoders' own windows (gzip 32 KiB, xz and zstd up to their frames'
 * window size, 8 MiB at zstd's default levels) this is all a stream holds. */
#define IN_BYTES ((size_t)1 << 16)
#define OUT_BYTES ((size_t)1 << 18)
/* stdio buffer for plain shards: fewer read system calls on long shards. */
#define PLAIN_BUFFER_BYTES ((size_t)1 << 20)

struct tfenc_stream {
    FILE *file;
    tfenc_stream_codec compression;
    int64_t stored_size;
    int64_t offset;  /* decompressed offset of the next byte handed out */
    int64_t decoded; /* decompressed bytes produced, in all */
    int64_t line;    /* lines handed out */
    char why[256];

    /* Compressed only. */
    unsigned char *in, *out;
    size_t in_pos, in_length, out_pos, out_length;
    int in_ended;   /* the file has no more bytes */
    int frame_open; /* a gzip member or zstd frame is started and not ended */
    int gzip_padding; /* zero bytes after the last gzip member (tape and block writers) */
    int finished;   /* xz: the decoder saw the end of the last stream */
    z_stream gzip;
    int gzip_ready;
    ZSTD_DStream *zstd;
    lzma_stream xz;
    int xz_ready;
};

static const char *const compression_names[] = {"none", "gzip", "zstd", "xz"};

const char *tfenc_stream_compression_name(tfenc_stream_codec compression)
{
    return (unsigned)compression < sizeof compression_names / sizeof compression_names[0]
               ? compression_names[compression] : "unknown";
}

static int fail(tfenc_stream *s, int status, const char *format, const char *detail)
{
    snprintf(s->why, sizeof s->why, format, detail);
    return status;
}

static tfenc_stream_codec detect(const unsigned char *magic, size_t n)
{
    static const unsigned char gzip[] = {0x1f, 0x8b};
    static const unsigned char zstd[] = {0x28, 0xb5, 0x2f, 0xfd};
    static const unsigned char xz[] = {0xfd, '7', 'z', 'X', 'Z', 0x00};
    if (n >= sizeof gzip && memcmp(magic, gzip, sizeof gzip) == 0)
        return TFENC_STREAM_GZIP;
    if (n >= sizeof zstd && memcmp(magic, zstd, sizeof zstd) == 0)
        return TFENC_STREAM_ZSTD;
    /* A zstd file may begin with a skippable frame (magic 0x184D2A50 to
     * 0x184D2A5F, little-endian: RFC 8878 3.1.2): pzstd puts one before
     * every frame. libzstd's decoder skips them, as `zstd -d` does. */
    if (n >= 4 && (magic[0] & 0xf0) == 0x50 && magic[1] == 0x2a && magic[2] == 0x4d &&
        magic[3] == 0x18)
        return TFENC_STREAM_ZSTD;
    if (n >= sizeof xz && memcmp(magic, xz, sizeof xz) == 0)
        return TFENC_STREAM_XZ;
    return TFENC_STREAM_PLAIN;
}

/* The name of a compression tfenc does not decode, when the magic bytes
 * say the file is stored in one, else NULL: read as text, its bytes would
 * only ever be "a NUL byte" somewhere, or garbage documents. */
static const char *undecoded_compression(const unsigned char *magic, size_t n)
{
    static const struct {
        const char *name;
        unsigned char bytes[10];
        size_t length;
    } known[] = {
        /* "BZh", the block size, then a block's or the end's magic */
        {"bzip2", {'B', 'Z', 'h', 0, 0x31, 0x41, 0x59, 0x26, 0x53, 0x59}, 10},
        {"bzip2", {'B', 'Z', 'h', 0, 0x17, 0x72, 0x45, 0x38, 0x50, 0x90}, 10},
        {"lz4", {0x04, 0x22, 0x4d, 0x18}, 4},
        {"lz4 (legacy)", {0x02, 0x21, 0x4c, 0x18}, 4},
        {"zip", {'P', 'K', 0x03, 0x04}, 4},
        {"7z", {'7', 'z', 0xbc, 0xaf, 0x27, 0x1c}, 6},
    };
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++) {
        int same = n >= known[k].length;
        for (size_t i = 0; same && i < known[k].length; i++)
            same = known[k].bytes[i] == magic[i] ||
                   (known[k].bytes[i] == 0 && i == 3 && magic[i] >= '1' && magic[i] <= '9');
        if (same)
            return known[k].name;
    }
    return NULL;
}

/* Back to the shard's first byte, with a fresh decoder. */
static int restart(tfenc_stream *s)
{
    if (fseeko(s->file, 0, SEEK_SET) != 0)
        return fail(s, TFENC_ERR_IO, "cannot seek: %s", strerror(errno));
    s->offset = 0;
    s->line = 0;
    s->in_pos = s->in_length = s->out_pos = s->out_length = 0;
    s->in_ended = s->frame_open = s->finished = s->gzip_padding = 0;
    switch (s->compression) {
    case TFENC_STREAM_GZIP:
        if (!s->gzip_ready) {
            /* 15 + 16: gzip wrapping only, with its CRC and length checked. */
            if (inflateInit2(&s->gzip, 15 + 16) != Z_OK)
                return fail(s, TFENC_ERR_NO_MEMORY, "%s", "out of memory for zlib");
            s->gzip_ready = 1;
        }
        break;
    case TFENC_STREAM_ZSTD:
        if (s->zstd == NULL && (s->zstd = ZSTD_createDStream()) == NULL)
            return fail(s, TFENC_ERR_NO_MEMORY, "%s", "out of memory for libzstd");
        ZSTD_initDStream(s->zstd);
        break;
    case TFENC_STREAM_XZ:
        if (s->xz_ready)
            lzma_end(&s->xz);
        s->xz = (lzma_stream)LZMA_STREAM_INIT;
        /* CONCATENATED: like xz(1), read every stream of the file. */
        if (lzma_stream_decoder(&s->xz, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK)
            return fail(s, TFENC_ERR_NO_MEMORY, "%s", "out of memory for liblzma");
        s->xz_ready = 1;
        break;
    case TFENC_STREAM_PLAIN:
        break;
    }
    return TFENC_OK;
}

int tfenc_stream_open(tfenc_context *ctx, const char *what, const char *path,
                      tfenc_stream **stream)
{
    *stream = NULL;
    tfenc_stream *s = calloc(1, sizeof *s);
    if (s == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s %s: out of memory", what, path);
    int status = tfenc_file_open_regular(ctx, what, path, &s->file);
    if (status != TFENC_OK) {
        free(s);
        return status;
    }
    struct stat info;
    unsigned char magic[10];
    size_t n = 0;
    if (fstat(fileno(s->file), &info) != 0)
        status = tfenc_error(ctx, TFENC_ERR_IO, "%s %s: cannot examine: %s", what, path,
                             strerror(errno));
    else if ((n = fread(magic, 1, sizeof magic, s->file)) < sizeof magic && ferror(s->file))
        status = tfenc_error(ctx, TFENC_ERR_IO, "%s %s: cannot read: %s", what, path,
                             strerror(errno));
    const char *undecoded = status == TFENC_OK ? undecoded_compression(magic, n) : NULL;
    if (undecoded != NULL)
        status = tfenc_error(ctx, TFENC_ERR_INPUT, "%s %s: is %s-compressed, which tfenc does "
                             "not read (it reads plain, gzip, zstd and xz files): decompress it, "
                             "or recompress it with one of those", what, path, undecoded);
    if (status == TFENC_OK) {
        s->stored_size = (int64_t)info.st_size;
        s->compression = detect(magic, n);
        if (s->compression == TFENC_STREAM_PLAIN) {
            setvbuf(s->file, NULL, _IOFBF, PLAIN_BUFFER_BYTES);
        } else {
            s->in = malloc(IN_BYTES);
            s->out = malloc(OUT_BYTES);
            if (s->in == NULL || s->out == NULL)
                status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s %s: out of memory", what,
                                     path);
        }
    }
    if (status == TFENC_OK && restart(s) != TFENC_OK)
        status = tfenc_error(ctx, TFENC_ERR_IO, "%s %s: %s", what, path, s->why);
    if (status != TFENC_OK) {
        tfenc_stream_close(s);
        return status;
    }
    *stream = s;
    return TFENC_OK;
}

tfenc_stream_codec tfenc_stream_compression(const tfenc_stream *s) { return s->compression; }
int64_t tfenc_stream_stored_size(const tfenc_stream *s) { return s->stored_size; }
int64_t tfenc_stream_offset(const tfenc_stream *s) { return s->offset; }
int64_t tfenc_stream_decoded(const tfenc_stream *s) { return s->decoded; }
int64_t tfenc_stream_line(const tfenc_stream *s) { return s->line; }
const char *tfenc_stream_why(const tfenc_stream *s) { return s->why; }

/* One decoder call from s->in into s->out (which is empty); *produced gets
 * the decompressed bytes. */
static int decode_step(tfenc_stream *s, size_t *produced)
{
    *produced = 0;
    switch (s->compression) {
    case TFENC_STREAM_GZIP: {
        if (!s->frame_open && (s->gzip_padding || s->in[s->in_pos] == 0)) {
            /* gzip, zcat and Python's gzip read a file padded with zeros to a
             * block as the members before the zeros; anything after them is
             * no gzip member and would otherwise be lost unread. */
            s->gzip_padding = 1;
            while (s->in_pos < s->in_length && s->in[s->in_pos] == 0)
                s->in_pos++;
            if (s->in_pos < s->in_length)
                return fail(s, TFENC_ERR_INPUT, "%s", "data after the zero bytes that pad the "
                            "end of the gzip stream");
            return TFENC_OK;
        }
        if (!s->frame_open) {
            inflateReset(&s->gzip);
            s->frame_open = 1;
        }
        s->gzip.next_in = s->in + s->in_pos;
        s->gzip.avail_in = (uInt)(s->in_length - s->in_pos);
        s->gzip.next_out = s->out;
        s->gzip.avail_out = (uInt)OUT_BYTES;
        int ret = inflate(&s->gzip, Z_NO_FLUSH);
        s->in_pos = s->in_length - s->gzip.avail_in;
        *produced = OUT_BYTES - s->gzip.avail_out;
        if (ret == Z_STREAM_END)
            s->frame_open = 0; /* another member may follow (concatenated .gz) */
        else if (ret == Z_MEM_ERROR)
            return fail(s, TFENC_ERR_NO_MEMORY, "%s", "out of memory in zlib");
        else if (ret != Z_OK && ret != Z_BUF_ERROR)
            return fail(s, TFENC_ERR_INPUT, "corrupt gzip stream (%s)",
                        s->gzip.msg != NULL ? s->gzip.msg : "zlib error");
        return TFENC_OK;
    }
    case TFENC_STREAM_ZSTD: {
        ZSTD_inBuffer in = {s->in, s->in_length, s->in_pos};
        ZSTD_outBuffer out = {s->out, OUT_BYTES, 0};
        size_t ret = ZSTD_decompressStream(s->zstd, &out, &in);
        s->in_pos = in.pos;
        *produced = out.pos;
        if (ZSTD_isError(ret))
            return fail(s, TFENC_ERR_INPUT, "corrupt zstd stream (%s)", ZSTD_getErrorName(ret));
        /* 0: a frame ended and was flushed whole; anything else: mid-frame. */
        s->frame_open = ret != 0;
        return TFENC_OK;
    }
    case TFENC_STREAM_XZ: {
        s->xz.next_in = s->in + s->in_pos;
        s->xz.avail_in = s->in_length - s->in_pos;
        s->xz.next_out = s->out;
        s->xz.avail_out = OUT_BYTES;
        lzma_ret ret = lzma_code(&s->xz, s->in_ended ? LZMA_FINISH : LZMA_RUN);
        s->in_pos = s->in_length - s->xz.avail_in;
        *produced = OUT_BYTES - s->xz.avail_out;
        if (ret == LZMA_STREAM_END)
            s->finished = 1;
        else if (ret == LZMA_BUF_ERROR && s->in_ended)
            return fail(s, TFENC_ERR_INPUT, "%s", "truncated xz stream (the file ends inside it)");
        else if (ret == LZMA_MEM_ERROR)
            return fail(s, TFENC_ERR_NO_MEMORY, "%s", "out of memory in liblzma");
        else if (ret != LZMA_OK && ret != LZMA_BUF_ERROR)
            return fail(s, TFENC_ERR_INPUT, "corrupt xz stream (liblzma error %s)",
                        ret == LZMA_DATA_ERROR ? "DATA_ERROR" : ret == LZMA_FORMAT_ERROR
                        ? "FORMAT_ERROR" : "OPTIONS_ERROR");
        return TFENC_OK;
    }
    case TFENC_STREAM_PLAIN:
        break;
    }
    return fail(s, TFENC_ERR_INTERNAL, "%s", "not a compressed stream");
}

/* Fills s->out with the next decompressed bytes: TFENC_OK with at least
 * one byte, TFENC_ERR_NOT_FOUND at the clean end, or an error. */
static int refill(tfenc_stream *s)
{
    s->out_pos = s->out_length = 0;
    for (;;) {
        if (s->finished)
            return TFENC_ERR_NOT_FOUND;
        if (s->in_pos == s->in_length && !s->in_ended) {
            s->in_pos = 0;
            s->in_length = fread(s->in, 1, IN_BYTES, s->file);
            if (s->in_length == 0) {
                if (ferror(s->file))
                    return fail(s, TFENC_ERR_IO, "read error: %s", strerror(errno));
                s->in_ended = 1;
            }
        }
        if (s->in_pos == s->in_length && s->in_ended
            && s->compression != TFENC_STREAM_XZ) {
            if (s->frame_open)
                return fail(s, TFENC_ERR_INPUT, "truncated %s stream (the file ends inside it)",
                            tfenc_stream_compression_name(s->compression));
            s->finished = 1;
            return TFENC_ERR_NOT_FOUND;
        }
        size_t produced;
        int status = decode_step(s, &produced);
        if (status != TFENC_OK)
            return status;
        if (produced > 0) {
            s->out_length = produced;
            s->decoded += (int64_t)produced;
            return TFENC_OK;
        }
    }
}

int tfenc_stream_seek(tfenc_stream *s, int64_t offset)
{
    if (s->compression == TFENC_STREAM_PLAIN) {
        if (fseeko(s->file, (off_t)offset, SEEK_SET) != 0)
            return fail(s, TFENC_ERR_IO, "cannot seek: %s", strerror(errno));
        s->offset = offset;
        s->line = -1; /* unknown after a seek by bytes */
        return TFENC_OK;
    }
    if (offset < s->offset) {
        int status = restart(s);
        if (status != TFENC_OK)
            return status;
    }
    while (s->offset < offset) {
        if (s->out_pos == s->out_length) {
            int status = refill(s);
            if (status == TFENC_ERR_NOT_FOUND)
                return fail(s, TFENC_ERR_NOT_FOUND, "%s", "the stream ends before the offset");
            if (status != TFENC_OK)
                return status;
        }
        size_t available = s->out_length - s->out_pos;
        size_t skip = (int64_t)available < offset - s->offset ? available
                                                              : (size_t)(offset - s->offset);
        s->out_pos += skip;
        s->offset += (int64_t)skip;
    }
    return TFENC_OK;
}

static int reserve(char **line, size_t *capacity, size_t needed)
{
    if (needed <= *capacity && *line != NULL)
        return TFENC_OK;
    size_t grown = *capacity > 0 ? *capacity : 256;
    while (grown < needed)
        grown *= 2;
    char *bigger = realloc(*line, grown);
    if (bigger == NULL)
        return TFENC_ERR_NO_MEMORY;
    *line = bigger;
    *capacity = grown;
    return TFENC_OK;
}

int tfenc_stream_getline(tfenc_stream *s, char **line, size_t *capacity, size_t *length)
{
    *length = 0;
    if (s->compression == TFENC_STREAM_PLAIN) {
        errno = 0;
        ssize_t got = getline(line, capacity, s->file);
        if (got < 0) {
            if (ferror(s->file))
                return fail(s, errno == ENOMEM ? TFENC_ERR_NO_MEMORY : TFENC_ERR_IO,
                            "read error: %s", errno == ENOMEM ? "line too long for memory"
                                                             : strerror(errno));
            return TFENC_ERR_NOT_FOUND;
        }
        *length = (size_t)got;
        s->line++;
        s->offset += got;
        s->decoded += got;
        return TFENC_OK;
    }
    for (;;) {
        if (s->out_pos == s->out_length) {
            int status = refill(s);
            if (status == TFENC_ERR_NOT_FOUND && *length > 0) {
                s->line++;
                return TFENC_OK; /* a last line without "\n" */
            }
            if (status != TFENC_OK)
                return status;
        }
        const unsigned char *start = s->out + s->out_pos;
        size_t available = s->out_length - s->out_pos;
        const unsigned char *newline = memchr(start, '\n', available);
        size_t take = newline != NULL ? (size_t)(newline - start) + 1 : available;
        if (reserve(line, capacity, *length + take + 1) != TFENC_OK)
            return fail(s, TFENC_ERR_NO_MEMORY, "%s", "line too long for memory");
        memcpy(*line + *length, start, take);
        *length += take;
        (*line)[*length] = '\0';
        s->out_pos += take;
        s->offset += (int64_t)take;
        if (newline != NULL) {
            s->line++;
            return TFENC_OK;
        }
    }
}

int tfenc_stream_seek_line(tfenc_stream *s, int64_t line)
{
    if (line < s->line || s->line < 0) {
        int status = restart(s);
        if (status != TFENC_OK)
            return status;
    }
    /* Lines are skipped a buffer at a time, never copied. */
    while (s->line < line) {
        if (s->compression == TFENC_STREAM_PLAIN) {
            int c;
            while ((c = getc(s->file)) != EOF) {
                s->offset++;
                s->decoded++;
                if (c == '\n')
                    break;
            }
            if (c == EOF) {
                if (ferror(s->file))
                    return fail(s, TFENC_ERR_IO, "read error: %s", strerror(errno));
                return fail(s, TFENC_ERR_NOT_FOUND, "%s", "the stream ends before the line");
            }
            s->line++;
            continue;
        }
        if (s->out_pos == s->out_length) {
            int status = refill(s);
            if (status == TFENC_ERR_NOT_FOUND)
                return fail(s, TFENC_ERR_NOT_FOUND, "%s", "the stream ends before the line");
            if (status != TFENC_OK)
                return status;
        }
        const unsigned char *start = s->out + s->out_pos;
        size_t available = s->out_length - s->out_pos;
        const unsigned char *newline = memchr(start, '\n', available);
        size_t take = newline != NULL ? (size_t)(newline - start) + 1 : available;
        s->out_pos += take;
        s->offset += (int64_t)take;
        if (newline != NULL)
            s->line++;
    }
    return TFENC_OK;
}

void tfenc_stream_close(tfenc_stream *s)
{
    if (s == NULL)
        return;
    if (s->gzip_ready)
        inflateEnd(&s->gzip);
    if (s->zstd != NULL)
        ZSTD_freeDStream(s->zstd);
    if (s->xz_ready)
        lzma_end(&s->xz);
    if (s->file != NULL)
        fclose(s->file);
    free(s->in);
    free(s->out);
    free(s);
}
