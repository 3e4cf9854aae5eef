/* Compact vectors ([job] output_dtype = int8, uint8, binary, ubinary): the
 * arithmetic of sentence-transformers' quantize_embeddings
 * (sentence_transformers/quantization.py), reproduced bit for bit so that a
 * query quantized there with the file's ranges lands in the same buckets as
 * the documents quantized here.
 *
 *   uint8:   (uint8) ((x - start) / step)          start = min, step = (max - min) / 255
 *   int8:    (int8)  ((x - start) / step - 128)    all in float32, as numpy computes them
 *   ubinary: packbits(x > 0)                        8 dimensions per byte, the first in the
 *   binary:  packbits(x > 0) - 128 as int8          most significant bit
 *
 * numpy's float32 -> (u)int8 cast on x86-64 converts to int32 (out of
 * range and NaN give INT32_MIN) and keeps the low byte: a value outside the
 * ranges wraps around rather than saturating. That is reproduced too (the
 * ranges of a sample do not hold every document of a corpus); ranges from
 * the whole corpus ([job] output_ranges) avoid it. */
#ifndef TFENC_QUANTIZE_H
#define TFENC_QUANTIZE_H

#include <stddef.h>
#include <stdint.h>

#include "output/output_types.h"
#include "tfenc/plugin.h"

/* Nonzero for int8, uint8, binary and ubinary. */
int tfenc_dtype_is_compact(tfenc_output_dtype dtype);

/* Nonzero for int8 and uint8, which need ranges. */
int tfenc_dtype_needs_ranges(tfenc_output_dtype dtype);

/* Elements of one stored row of width d: d, or d / 8 for the packed ones. */
int64_t tfenc_dtype_row_width(tfenc_output_dtype dtype, int d);

/* Bytes of one stored element (float32 4, float16/bfloat16 2, compact 1). */
size_t tfenc_dtype_element_size(tfenc_output_dtype dtype);

/* starts[j] = ranges[j] (the min row), steps[j] = (ranges[d + j] -
 * ranges[j]) / 255 in float32: ranges is [2, d], min then max. */
void tfenc_quantize_steps(const float *ranges, int d, float *starts, float *steps);

/* n rows of d floats -> n stored rows of tfenc_dtype_row_width bytes in
 * `stored`. starts and steps are only read for int8 and uint8. */
void tfenc_quantize_rows(tfenc_output_dtype dtype, const float *starts, const float *steps, int d,
                         const float *rows, int64_t n, void *stored);

/* Folds n rows of d floats into running per-dimension [min; max] (ranges
 * [2, d]); with `first` the ranges start from these rows. */
void tfenc_quantize_ranges_update(float *ranges, int d, const float *rows, int64_t n, int first);

/* Reads given ranges [2, d] (min row, then max row) into `ranges`: an
 * HDF5 file's dataset quantization_ranges (a tfenc output's) or ranges, or
 * a .npy array (float32 or float64, C order), as numpy.save writes
 * sentence-transformers' `ranges`. Errors begin with `where` (the job file
 * and key) and name the file. */
struct tfenc_context;
int tfenc_quantize_ranges_read(struct tfenc_context *ctx, const char *where, const char *path,
                               int d, float *ranges);

/* The same from two JSON lists in the job, [[min, ...], [max, ...]]. */
int tfenc_quantize_ranges_parse(struct tfenc_context *ctx, const char *where, const char *text,
                                int d, float *ranges);

#endif
