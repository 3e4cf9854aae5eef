/* A shard's bytes as one stream of lines, whatever compression it is stored
 * in: plain, gzip (zlib), zstd (libzstd) or xz (liblzma), told apart by the
 * magic bytes at its start, never by the name (a zstd file may start with a
 * skippable frame, as pzstd's do). Members, frames and streams end to end
 * are one stream, as gzip -d, zstd -d and xz -d read them. A compressed
 * stream is decoded as it is read, through buffers of a fixed size, so no
 * reader ever holds a decompressed shard in memory or on disk.
 *
 * Offsets are in the decompressed bytes. A plain stream seeks; a compressed
 * one reaches an offset by decoding from the shard's start (or from where it
 * is, when the offset lies ahead), which is why tfenc_stream_decoded() counts
 * what was decoded: the caller keeps the total bounded.
 *
 * Errors never shorten the corpus: a stream that ends inside a compressed
 * frame (a truncated file), a corrupt frame or a wrong checksum is an error,
 * and the caller names the shard and line; the reason is in
 * tfenc_stream_why(). */
#ifndef TFENC_STREAM_H
#define TFENC_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "tfenc/plugin.h"

typedef enum tfenc_stream_codec {
    TFENC_STREAM_PLAIN,
    TFENC_STREAM_GZIP,
    TFENC_STREAM_ZSTD,
    TFENC_STREAM_XZ
} tfenc_stream_codec;

/* "none", "gzip", "zstd", "xz". */
const char *tfenc_stream_compression_name(tfenc_stream_codec compression);

typedef struct tfenc_stream tfenc_stream;

/* Opens a regular file (FIFOs, devices and directories are refused with
 * `what` and the path in the message) and detects its compression. */
int tfenc_stream_open(tfenc_context *ctx, const char *what, const char *path,
                      tfenc_stream **stream);

tfenc_stream_codec tfenc_stream_compression(const tfenc_stream *stream);
/* The file's size as stored (compressed or not). */
int64_t tfenc_stream_stored_size(const tfenc_stream *stream);
/* Offset of the next decompressed byte. */
int64_t tfenc_stream_offset(const tfenc_stream *stream);
/* Decompressed bytes produced since the stream was opened, seeks included. */
int64_t tfenc_stream_decoded(const tfenc_stream *stream);

/* Continues at decompressed byte `offset`. TFENC_ERR_NOT_FOUND when the
 * stream ends before it; TFENC_ERR_INPUT or TFENC_ERR_IO on a bad stream. */
int tfenc_stream_seek(tfenc_stream *stream, int64_t offset);

/* Lines read so far: each tfenc_stream_getline() that returns a line counts
 * one (a compressed source is reached by line, see corpus.c). */
int64_t tfenc_stream_line(const tfenc_stream *stream);

/* Continues at line `line` (0-based): from where the stream is when the line
 * lies ahead, else from the start. TFENC_ERR_NOT_FOUND when the stream has
 * fewer lines; the other errors as for tfenc_stream_getline(). */
int tfenc_stream_seek_line(tfenc_stream *stream, int64_t line);

/* Reads the next line, its "\n" included when there is one, into *line
 * (grown as needed, NUL-terminated after `*length` bytes, which may contain
 * NULs). TFENC_ERR_NOT_FOUND at the stream's clean end; TFENC_ERR_INPUT for
 * a truncated or corrupt stream, TFENC_ERR_IO for a read error,
 * TFENC_ERR_NO_MEMORY. */
int tfenc_stream_getline(tfenc_stream *stream, char **line, size_t *capacity, size_t *length);

/* Why the last call failed: one phrase, no file name. */
const char *tfenc_stream_why(const tfenc_stream *stream);

/* NULL is allowed. */
void tfenc_stream_close(tfenc_stream *stream);

#endif
