/* float16 / bfloat16 <-> float32 conversions done bit by bit, so that the
 * rounding is the IEEE one whatever the compiler or CPU offers. */
#include "base/float16.h"

#include <string.h>

static uint32_t float_bits(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

static float bits_float(uint32_t bits)
{
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

float tfenc_float16_to_float32(uint16_t bits)
{
    uint32_t sign = (uint32_t)(bits & 0x8000u) << 16;
    uint32_t exponent = (bits >> 10) & 0x1fu;
    uint32_t mantissa = bits & 0x3ffu;
    if (exponent == 0x1f) /* inf or NaN: keep the payload */
        return bits_float(sign | 0x7f800000u | (mantissa << 13));
    if (exponent == 0) {
        if (mantissa == 0)
            return bits_float(sign);
        /* Subnormal half: mantissa * 2^-24 is a normal float32. */
        float magnitude = (float)mantissa * 0x1p-24f;
        return bits_float(sign | float_bits(magnitude));
    }
    return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

/* Shifts right by `shift` (1..31) rounding to nearest, ties to even. */
static uint32_t shift_round_even(uint32_t value, unsigned shift)
{
    uint32_t result = value >> shift;
    uint32_t remainder = value & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1);
    if (remainder > half || (remainder == half && (result & 1u)))
        result++;
    return result;
}

uint16_t tfenc_float32_to_float16(float value)
{
    uint32_t bits = float_bits(value);
    uint16_t sign = (uint16_t)((bits >> 16) & 0x8000u);
    uint32_t magnitude = bits & 0x7fffffffu;
    if (magnitude > 0x7f800000u) /* NaN: quiet it so a signalling payload cannot become inf */
        return (uint16_t)(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
    /* 65520 = the midpoint between the largest half (65504) and 2^16: from
     * there on, rounding gives infinity. */
    if (magnitude >= 0x477ff000u)
        return (uint16_t)(sign | 0x7c00u);
    uint32_t exponent = magnitude >> 23;
    if (exponent < 113) {
        /* Below 2^-14: a subnormal half, in units of 2^-24. Values under
         * 2^-25 (half a unit) round to zero. */
        if (exponent < 102)
            return sign;
        uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
        /* The result can round up to 0x400, the smallest normal: the
         * encoding then carries into the exponent field correctly. */
        return (uint16_t)(sign | shift_round_even(mantissa, 126 - exponent));
    }
    /* Normal: rebias the exponent (127 -> 15) and round 23 mantissa bits to
     * 10; a carry out of the mantissa increments the exponent, as it must. */
    uint32_t rebased = ((exponent - 112u) << 23) | (magnitude & 0x7fffffu);
    return (uint16_t)(sign | shift_round_even(rebased, 13));
}

float tfenc_bfloat16_to_float32(uint16_t bits)
{
    return bits_float((uint32_t)bits << 16);
}

uint16_t tfenc_float32_to_bfloat16(float value)
{
    uint32_t bits = float_bits(value);
    if ((bits & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((bits >> 16) | 0x0040u);
    /* Adding 0x7fff plus the lowest kept bit rounds to nearest, ties to
     * even; a carry into the exponent is the correct rounding too. */
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

void tfenc_float32_to_float16_array(uint16_t *out, const float *in, size_t count)
{
    for (size_t i = 0; i < count; i++)
        out[i] = tfenc_float32_to_float16(in[i]);
}

void tfenc_float32_to_bfloat16_array(uint16_t *out, const float *in, size_t count)
{
    for (size_t i = 0; i < count; i++)
        out[i] = tfenc_float32_to_bfloat16(in[i]);
}

void tfenc_float16_to_float32_array(float *out, const uint16_t *in, size_t count)
{
    for (size_t i = 0; i < count; i++)
        out[i] = tfenc_float16_to_float32(in[i]);
}

void tfenc_bfloat16_to_float32_array(float *out, const uint16_t *in, size_t count)
{
    for (size_t i = 0; i < count; i++)
        out[i] = tfenc_bfloat16_to_float32(in[i]);
}

/* A 16-bit float type with the given field layout. The fields are set while
 * the type is still 4 bytes wide, because HDF5 refuses a size that cuts
 * through existing fields. */
static hid_t make_float_type(size_t exponent_bits, size_t mantissa_bits, size_t bias)
{
    hid_t type = H5Tcopy(H5T_IEEE_F32LE);
    if (type < 0)
        return type;
    if (H5Tset_fields(type, 15, mantissa_bits, exponent_bits, 0, mantissa_bits) < 0
        || H5Tset_size(type, 2) < 0 || H5Tset_precision(type, 16) < 0
        || H5Tset_ebias(type, bias) < 0) {
        H5Tclose(type);
        return -1;
    }
    return type;
}

hid_t tfenc_h5_float16_type(void)
{
    return make_float_type(5, 10, 15);
}

hid_t tfenc_h5_bfloat16_type(void)
{
    return make_float_type(8, 7, 127);
}

tfenc_h5_float_kind tfenc_h5_float_classify(hid_t type)
{
    if (H5Tget_class(type) != H5T_FLOAT)
        return TFENC_H5_FLOAT_OTHER;
    size_t sign_position, exponent_position, exponent_bits, mantissa_position, mantissa_bits;
    if (H5Tget_fields(type, &sign_position, &exponent_position, &exponent_bits,
                      &mantissa_position, &mantissa_bits) < 0)
        return TFENC_H5_FLOAT_OTHER;
    size_t size = H5Tget_size(type);
    size_t bias = H5Tget_ebias(type);
    if (mantissa_position != 0 || exponent_position != mantissa_bits
        || sign_position != exponent_position + exponent_bits)
        return TFENC_H5_FLOAT_OTHER;
    if (size == 4 && exponent_bits == 8 && mantissa_bits == 23 && bias == 127)
        return TFENC_H5_FLOAT32;
    if (size == 8 && exponent_bits == 11 && mantissa_bits == 52 && bias == 1023)
        return TFENC_H5_FLOAT64;
    if (size == 2 && exponent_bits == 5 && mantissa_bits == 10 && bias == 15)
        return TFENC_H5_FLOAT16;
    if (size == 2 && exponent_bits == 8 && mantissa_bits == 7 && bias == 127)
        return TFENC_H5_BFLOAT16;
    return TFENC_H5_FLOAT_OTHER;
}
