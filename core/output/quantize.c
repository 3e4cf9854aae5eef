/* Compact vectors: numpy's float32 arithmetic and casts, element by element. */
#include "output/quantize.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>
#include <jansson.h>

#include "base/context.h"
#include "base/files.h"

int tfenc_dtype_is_compact(tfenc_output_dtype dtype)
{
    return dtype == TFENC_DTYPE_INT8 || dtype == TFENC_DTYPE_UINT8 ||
           dtype == TFENC_DTYPE_BINARY || dtype == TFENC_DTYPE_UBINARY;
}

int tfenc_dtype_needs_ranges(tfenc_output_dtype dtype)
{
    return dtype == TFENC_DTYPE_INT8 || dtype == TFENC_DTYPE_UINT8;
}

int64_t tfenc_dtype_row_width(tfenc_output_dtype dtype, int d)
{
    return dtype == TFENC_DTYPE_BINARY || dtype == TFENC_DTYPE_UBINARY ? d / 8 : d;
}

size_t tfenc_dtype_element_size(tfenc_output_dtype dtype)
{
    return dtype == TFENC_DTYPE_FLOAT32                                        ? 4
           : dtype == TFENC_DTYPE_FLOAT16 || dtype == TFENC_DTYPE_BFLOAT16 ? 2
                                                                            : 1;
}

void tfenc_quantize_steps(const float *ranges, int d, float *starts, float *steps)
{
    for (int j = 0; j < d; j++) {
        starts[j] = ranges[j];
        /* numpy: float32 array / 255 stays float32 */
        steps[j] = (ranges[d + j] - ranges[j]) / 255.0f;
    }
}

/* numpy's (npy_ubyte) / (npy_byte) cast of a float32 on x86-64: cvttss2si
 * to int32, whose "integer indefinite" INT32_MIN stands for NaN and every
 * value outside int32, then the low byte. */
static uint8_t numpy_low_byte(float value)
{
    int32_t whole = value > -2147483648.0f && value < 2147483648.0f ? (int32_t)value : INT32_MIN;
    return (uint8_t)((uint32_t)whole & 0xffu);
}

void tfenc_quantize_rows(tfenc_output_dtype dtype, const float *starts, const float *steps, int d,
                         const float *rows, int64_t n, void *stored)
{
    uint8_t *out = stored;
    if (tfenc_dtype_needs_ranges(dtype)) {
        const float offset = dtype == TFENC_DTYPE_INT8 ? 128.0f : 0.0f;
        for (int64_t i = 0; i < n; i++)
            for (int j = 0; j < d; j++) {
                /* volatile: one float32 rounding per numpy operation, never fused */
                volatile float bucket = (rows[(size_t)i * d + j] - starts[j]) / steps[j];
                volatile float shifted = bucket - offset;
                out[(size_t)i * d + j] = numpy_low_byte(shifted);
            }
        return;
    }
    /* numpy.packbits: big-endian bit order; binary then subtracts 128 in
     * uint8 (wrapping) and reinterprets the bytes as int8: the top bit flips. */
    const uint8_t flip = dtype == TFENC_DTYPE_BINARY ? 0x80u : 0x00u;
    const int width = d / 8;
    for (int64_t i = 0; i < n; i++)
        for (int b = 0; b < width; b++) {
            const float *x = rows + (size_t)i * d + (size_t)b * 8;
            uint8_t byte = 0;
            for (int bit = 0; bit < 8; bit++)
                byte |= (uint8_t)((x[bit] > 0.0f) << (7 - bit));
            out[(size_t)i * width + b] = byte ^ flip;
        }
}

void tfenc_quantize_ranges_update(float *ranges, int d, const float *rows, int64_t n, int first)
{
    for (int64_t i = 0; i < n; i++) {
        const float *row = rows + (size_t)i * d;
        for (int j = 0; j < d; j++) {
            if ((first && i == 0) || row[j] < ranges[j])
                ranges[j] = row[j];
            if ((first && i == 0) || row[j] > ranges[d + j])
                ranges[d + j] = row[j];
        }
    }
}

/* ------------------------------------------------------- given ranges */

static int ranges_error(tfenc_context *ctx, const char *where, const char *path, int d,
                        const char *what)
{
    return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: %s: %s (ranges are an array [2, %d]: the "
                       "minimum, then the maximum of each dimension)", where, path, what, d);
}

static int read_h5_ranges(tfenc_context *ctx, const char *where, const char *path, int d,
                          float *ranges)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    /* HDF5's open() would wait forever on a FIFO: check the kind first. */
    int checked = tfenc_file_check_regular(ctx, where, path);
    if (checked != TFENC_OK)
        return checked;
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) {
        H5Eclear2(H5E_DEFAULT);
        return ranges_error(ctx, where, path, d, "cannot open it as HDF5");
    }
    const char *name = H5Lexists(file, "quantization_ranges", H5P_DEFAULT) > 0
                           ? "quantization_ranges"
                       : H5Lexists(file, "ranges", H5P_DEFAULT) > 0 ? "ranges"
                                                                   : NULL;
    hid_t dataset = name != NULL ? H5Dopen2(file, name, H5P_DEFAULT) : -1;
    hid_t space = dataset >= 0 ? H5Dget_space(dataset) : -1;
    hsize_t dims[2] = {0, 0};
    int shaped = space >= 0 && H5Sget_simple_extent_ndims(space) == 2
                 && H5Sget_simple_extent_dims(space, dims, NULL) == 2;
    int read = shaped && dims[0] == 2 && dims[1] == (hsize_t)d
               && H5Dread(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, ranges) >= 0;
    if (space >= 0)
        H5Sclose(space);
    if (dataset >= 0)
        H5Dclose(dataset);
    H5Fclose(file);
    H5Eclear2(H5E_DEFAULT);
    char what[160];
    if (name == NULL)
        return ranges_error(ctx, where, path, d, "has no dataset 'quantization_ranges' or "
                                                 "'ranges'");
    if (!shaped || dims[0] != 2 || dims[1] != (hsize_t)d) {
        snprintf(what, sizeof what, "dataset '%s' has shape [%llu, %llu]", name,
                 (unsigned long long)dims[0], (unsigned long long)dims[1]);
        return ranges_error(ctx, where, path, d, what);
    }
    if (!read) {
        snprintf(what, sizeof what, "cannot read dataset '%s' as floats", name);
        return ranges_error(ctx, where, path, d, what);
    }
    return TFENC_OK;
}

/* The .npy format (numpy/lib/format.py): magic, version, a little-endian
 * header length, a Python dict literal of descr, fortran_order and shape
 * padded with spaces, then the data. */
static int read_npy_ranges(tfenc_context *ctx, const char *where, const char *path, int d,
                           float *ranges)
{
    FILE *file = NULL;
    int status = tfenc_file_open_regular(ctx, where, path, &file);
    if (status != TFENC_OK)
        return status;
    unsigned char magic[10];
    char header[4096] = "";
    size_t header_length = 0;
    int ok = fread(magic, 1, 8, file) == 8 && memcmp(magic, "\x93NUMPY", 6) == 0;
    if (ok && magic[6] == 1) {
        ok = fread(magic + 8, 1, 2, file) == 2;
        header_length = (size_t)magic[8] | (size_t)magic[9] << 8;
    } else if (ok && (magic[6] == 2 || magic[6] == 3)) {
        unsigned char length[4];
        ok = fread(length, 1, 4, file) == 4;
        header_length = (size_t)length[0] | (size_t)length[1] << 8 | (size_t)length[2] << 16 |
                        (size_t)length[3] << 24;
    } else {
        ok = 0;
    }
    ok = ok && header_length < sizeof header && fread(header, 1, header_length, file) == header_length;
    if (!ok) {
        fclose(file);
        return ranges_error(ctx, where, path, d, "not a .npy file numpy.save writes");
    }
    header[header_length] = '\0';
    int f8 = strstr(header, "'descr': '<f8'") != NULL;
    int f4 = strstr(header, "'descr': '<f4'") != NULL;
    int fortran = strstr(header, "'fortran_order': True") != NULL;
    const char *shape = strstr(header, "'shape': (");
    long rows = -1, columns = -1;
    if (shape != NULL && sscanf(shape, "'shape': (%ld, %ld)", &rows, &columns) != 2)
        rows = columns = -1;
    char what[200];
    if (!f4 && !f8) {
        fclose(file);
        return ranges_error(ctx, where, path, d, "holds no little-endian float32 or float64");
    }
    if (fortran || rows != 2 || columns != d) {
        fclose(file);
        snprintf(what, sizeof what, "has shape (%ld, %ld)%s", rows, columns,
                 fortran ? " in Fortran order" : "");
        return ranges_error(ctx, where, path, d, what);
    }
    size_t n = 2 * (size_t)d;
    if (f4) {
        ok = fread(ranges, sizeof *ranges, n, file) == n;
    } else {
        double *values = malloc(n * sizeof *values);
        ok = values != NULL && fread(values, sizeof *values, n, file) == n;
        for (size_t i = 0; ok && i < n; i++)
            ranges[i] = (float)values[i];
        free(values);
    }
    fclose(file);
    return ok ? TFENC_OK : ranges_error(ctx, where, path, d, "is shorter than its shape says");
}

static int check_ranges(tfenc_context *ctx, const char *where, const char *path, int d,
                        const float *ranges);

int tfenc_quantize_ranges_parse(tfenc_context *ctx, const char *where, const char *text, int d,
                                float *ranges)
{
    json_error_t error;
    json_t *lists = json_loads(text, 0, &error);
    int ok = json_is_array(lists) && json_array_size(lists) == 2;
    for (size_t row = 0; ok && row < 2; row++) {
        json_t *list = json_array_get(lists, row);
        ok = json_is_array(list) && json_array_size(list) == (size_t)d;
        for (int j = 0; ok && j < d; j++) {
            json_t *value = json_array_get(list, (size_t)j);
            ok = json_is_number(value);
            /* float32, as numpy holds ranges that quantize_embeddings gets */
            ranges[row * (size_t)d + (size_t)j] = (float)json_number_value(value);
        }
    }
    json_decref(lists);
    if (!ok)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: two lists of %d numbers, "
                           "[[min, ...], [max, ...]], or a .npy or .h5 file%s%s", where, d,
                           lists == NULL ? ": " : "", lists == NULL ? error.text : "");
    return check_ranges(ctx, where, "the lists", d, ranges);
}

static int check_ranges(tfenc_context *ctx, const char *where, const char *path, int d,
                        const float *ranges)
{
    int status = TFENC_OK;
    for (int j = 0; status == TFENC_OK && j < d; j++)
        if (!(ranges[j] <= ranges[d + j]) || !isfinite(ranges[j]) || !isfinite(ranges[d + j])) {
            char what[160];
            snprintf(what, sizeof what, "dimension %d has minimum %g above maximum %g (or a "
                     "value that is not finite)", j, (double)ranges[j], (double)ranges[d + j]);
            status = ranges_error(ctx, where, path, d, what);
        }
    return status;
}

int tfenc_quantize_ranges_read(tfenc_context *ctx, const char *where, const char *path, int d,
                               float *ranges)
{
    size_t length = strlen(path);
    int status = length > 4 && strcmp(path + length - 4, ".npy") == 0
                     ? read_npy_ranges(ctx, where, path, d, ranges)
                     : read_h5_ranges(ctx, where, path, d, ranges);
    return status == TFENC_OK ? check_ranges(ctx, where, path, d, ranges) : status;
}
