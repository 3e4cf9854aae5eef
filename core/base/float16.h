/* 16-bit floats: IEEE half (float16) and bfloat16 conversions, and the HDF5
 * types that store them (docs/weights.md), shared by the weight loader and
 * the output writer. Values travel as uint16_t bit patterns. */
#ifndef TFENC_FLOAT16_H
#define TFENC_FLOAT16_H

#include <stddef.h>
#include <stdint.h>
#include <hdf5.h>

/* Exact: every float16 is a float32. */
float tfenc_float16_to_float32(uint16_t bits);
/* Round to nearest, ties to even; subnormal results are rounded, not
 * flushed; magnitudes >= 65520 become +-inf; NaN stays a quiet NaN with the
 * sign and the top payload bits kept. */
uint16_t tfenc_float32_to_float16(float value);

/* Exact: bfloat16 is the top half of a float32. */
float tfenc_bfloat16_to_float32(uint16_t bits);
/* Round to nearest, ties to even (overflow gives +-inf); NaN stays a quiet
 * NaN. */
uint16_t tfenc_float32_to_bfloat16(float value);

/* Array forms: out[i] = convert(in[i]) for i < count. */
void tfenc_float32_to_float16_array(uint16_t *out, const float *in, size_t count);
void tfenc_float32_to_bfloat16_array(uint16_t *out, const float *in, size_t count);
void tfenc_float16_to_float32_array(float *out, const uint16_t *in, size_t count);
void tfenc_bfloat16_to_float32_array(float *out, const uint16_t *in, size_t count);

/* New HDF5 datatypes (little-endian; close them with H5Tclose), or a
 * negative id if HDF5 refused. float16 is the IEEE half layout that h5py
 * reads as numpy.float16; bfloat16 is 1 sign, 8 exponent and 7 mantissa
 * bits with bias 127. HDF5 1.10 predefines neither. */
hid_t tfenc_h5_float16_type(void);
hid_t tfenc_h5_bfloat16_type(void);

typedef enum tfenc_h5_float_kind {
    TFENC_H5_FLOAT_OTHER = 0, /* not a float, or a layout tfenc does not read */
    TFENC_H5_FLOAT32,         /* IEEE single: read with H5T_NATIVE_FLOAT */
    TFENC_H5_FLOAT64,         /* IEEE double: read with H5T_NATIVE_FLOAT (HDF5 rounds) */
    TFENC_H5_FLOAT16,         /* IEEE half: read with tfenc_h5_float16_type() into uint16_t */
    TFENC_H5_BFLOAT16         /* bfloat16: read with tfenc_h5_bfloat16_type() into uint16_t */
} tfenc_h5_float_kind;

/* Classifies a dataset's (file) datatype by its bit layout, whatever its
 * byte order, so that a reader knows which memory type to read it with. */
tfenc_h5_float_kind tfenc_h5_float_classify(hid_t type);

#endif
