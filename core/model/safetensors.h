/* Reader for Hugging Face .safetensors files: an 8-byte little-endian header
 * length, a JSON header naming each tensor's dtype, shape and byte range, then
 * the raw tensor bytes. The header is untrusted input (files come from the
 * internet, and a fuzzer targets tfenc_safetensors_parse_header), so every
 * offset, size and shape is validated before any byte is read. */
#ifndef TFENC_SAFETENSORS_H
#define TFENC_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "tfenc/plugin.h"

/* Tensors of higher rank are refused; transformer checkpoints use rank <= 4. */
#define TFENC_SAFETENSORS_MAX_RANK 8

/* Headers longer than this are refused before allocating: real headers of
 * models with thousands of tensors stay below a megabyte. */
#define TFENC_SAFETENSORS_MAX_HEADER (100u * 1024u * 1024u)

typedef struct tfenc_safetensors tfenc_safetensors;

typedef struct tfenc_safetensors_tensor {
    const char *name;   /* key in the header, e.g. "encoder.layer.0.output.dense.weight" */
    const char *dtype;  /* as written in the header: "F32", "F16", "BF16", "I64", ... */
    int element_size;   /* bytes per element of dtype */
    int rank;
    int64_t dims[TFENC_SAFETENSORS_MAX_RANK];
    int64_t n_elements; /* product of dims (1 for rank 0) */
    uint64_t begin;     /* byte range [begin, end) relative to the start of the data */
    uint64_t end;
} tfenc_safetensors_tensor;

/* Opens `path`, reads and validates its header against the file size. The
 * file stays open for tfenc_safetensors_read_float32(). */
int tfenc_safetensors_open(tfenc_context *ctx, const char *path, tfenc_safetensors **file);

/* Validates a header already in memory: `header` is the JSON text of
 * `header_length` bytes (not NUL-terminated), `data_size` the number of data
 * bytes that follow it in the file. `name` is used in messages. The result
 * has no file to read from; it serves inspection and fuzzing. */
int tfenc_safetensors_parse_header(tfenc_context *ctx, const char *name, const char *header,
                                   size_t header_length, uint64_t data_size,
                                   tfenc_safetensors **file);

/* Number of tensors, and tensor `index` (0 <= index < count) in header order. */
int tfenc_safetensors_count(const tfenc_safetensors *file);
const tfenc_safetensors_tensor *tfenc_safetensors_tensor_at(const tfenc_safetensors *file,
                                                            int index);

/* The tensor called `name`, or NULL. */
const tfenc_safetensors_tensor *tfenc_safetensors_find(const tfenc_safetensors *file,
                                                       const char *name);

/* The value of key `key` in the header's "__metadata__", or NULL. */
const char *tfenc_safetensors_metadata(const tfenc_safetensors *file, const char *key);

/* The path or name the file was opened with. */
const char *tfenc_safetensors_name(const tfenc_safetensors *file);

/* Reads `tensor` (F32, F16 or BF16) into `out` as float32: n_elements values,
 * row-major. Other dtypes fail with TFENC_ERR_WEIGHTS naming the tensor. */
int tfenc_safetensors_read_float32(tfenc_context *ctx, const tfenc_safetensors *file,
                                   const tfenc_safetensors_tensor *tensor, float *out);

/* Reads `tensor` of any numeric dtype (F64, F32, F16, BF16, I64, I32, I16,
 * I8, U8) into `out` as doubles: n_elements values, row-major. What a
 * static-embedding model ships besides floats: model2vec's token mapping
 * (integers) and weights (often F64), int8 tables. Other dtypes (BOOL, the
 * F8 kinds, unsigned above 8 bits) fail with TFENC_ERR_WEIGHTS naming the
 * file and tensor. */
int tfenc_safetensors_read_double(tfenc_context *ctx, const tfenc_safetensors *file,
                                  const tfenc_safetensors_tensor *tensor, double *out);
/* The same for `count` values from value `first` (row-major), so that a
 * table larger than memory is read in blocks of rows. */
int tfenc_safetensors_read_double_range(tfenc_context *ctx, const tfenc_safetensors *file,
                                        const tfenc_safetensors_tensor *tensor, int64_t first,
                                        int64_t count, double *out);

void tfenc_safetensors_close(tfenc_safetensors *file);

/* The float dtypes tensors are read as float32 from, in the spelling of
 * the safetensors header: 4 for F32, 2 for F16 and BF16, 0 for any other.
 * The torch.save reader (torch_checkpoint.h) stores the same bytes. */
int tfenc_float_dtype_size(const char *dtype);
/* TFENC_OK for those, else TFENC_ERR_WEIGHTS naming the file and tensor. */
int tfenc_float_dtype_check(tfenc_context *ctx, const char *file, const char *tensor,
                            const char *dtype);

/* Reading n values of a float dtype into float out[n] in place: their raw
 * little-endian bytes go to tfenc_float_bytes_destination(out, dtype, n)
 * (the start of out for F32, its upper half for the 16-bit ones), then
 * tfenc_float_bytes_widen(out, dtype, n) turns them into float32. */
unsigned char *tfenc_float_bytes_destination(float *out, const char *dtype, size_t n);
void tfenc_float_bytes_widen(float *out, const char *dtype, size_t n);

#endif
