/* Safetensors reader: validates the untrusted JSON header (with jansson)
 * before trusting any offset, then reads tensors by offset with pread. */
#include "model/safetensors.h"
#include "base/files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

struct tfenc_safetensors {
    char *name;
    int fd;              /* -1 for a header parsed from memory */
    uint64_t data_start; /* file offset of the first data byte: 8 + header length */
    uint64_t data_size;  /* bytes after the header */
    json_t *header;      /* owns the name and dtype strings the tensors point to */
    tfenc_safetensors_tensor *tensors;
    int n_tensors;
};

/* Every dtype of the format, so that a checkpoint holding tensors we never
 * read (integer position ids, say) still validates. */
static const struct {
    const char *name;
    int size;
} dtype_sizes[] = {
    {"BOOL", 1}, {"U8", 1}, {"I8", 1}, {"F8_E5M2", 1}, {"F8_E4M3", 1},
    {"I16", 2}, {"U16", 2}, {"F16", 2}, {"BF16", 2},
    {"I32", 4}, {"U32", 4}, {"F32", 4},
    {"I64", 8}, {"U64", 8}, {"F64", 8},
};

static int dtype_size(const char *dtype)
{
    for (size_t i = 0; i < sizeof dtype_sizes / sizeof dtype_sizes[0]; i++)
        if (strcmp(dtype, dtype_sizes[i].name) == 0)
            return dtype_sizes[i].size;
    return 0;
}

static int compare_begin(const void *a, const void *b)
{
    const tfenc_safetensors_tensor *x = *(const tfenc_safetensors_tensor *const *)a;
    const tfenc_safetensors_tensor *y = *(const tfenc_safetensors_tensor *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Reads one tensor entry {"dtype": ..., "shape": [...], "data_offsets": [b, e]}. */
static int parse_tensor(tfenc_context *ctx, const char *file_name, const char *key,
                        json_t *entry, uint64_t data_size, tfenc_safetensors_tensor *tensor)
{
    if (!json_is_object(entry))
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                           "%s: safetensors header: tensor '%s' is not a JSON object",
                           file_name, key);
    json_t *dtype = json_object_get(entry, "dtype");
    json_t *shape = json_object_get(entry, "shape");
    json_t *offsets = json_object_get(entry, "data_offsets");
    if (!json_is_string(dtype) || !json_is_array(shape) || !json_is_array(offsets))
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                           "%s: safetensors header: tensor '%s' needs a string \"dtype\", "
                           "an array \"shape\" and an array \"data_offsets\"",
                           file_name, key);
    tensor->name = key;
    tensor->dtype = json_string_value(dtype);
    tensor->element_size = dtype_size(tensor->dtype);
    if (tensor->element_size == 0)
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                           "%s: safetensors header: tensor '%s' has unknown dtype '%s'",
                           file_name, key, tensor->dtype);

    size_t rank = json_array_size(shape);
    if (rank > TFENC_SAFETENSORS_MAX_RANK)
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                           "%s: safetensors header: tensor '%s' has rank %zu, more than %d",
                           file_name, key, rank, TFENC_SAFETENSORS_MAX_RANK);
    tensor->rank = (int)rank;
    int64_t n_elements = 1;
    for (size_t i = 0; i < rank; i++) {
        json_t *dim = json_array_get(shape, i);
        if (!json_is_integer(dim) || json_integer_value(dim) < 0)
            return tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                               "%s: safetensors header: tensor '%s' shape entry %zu is not a "
                               "non-negative integer", file_name, key, i);
        int64_t size = (int64_t)json_integer_value(dim);
        /* The product must fit, or a hostile shape could wrap to a small size. */
        if (size != 0 && n_elements > INT64_MAX / size)
            return tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                               "%s: safetensors header: tensor '%s' shape is too large",
                               file_name, key);
        n_elements *= size;
        tensor->dims[i] = size;
    }
    tensor->n_elements = n_elements;

    json_t *begin = json_array_get(offsets, 0);
    json_t *end = json_array_get(offsets, 1);
    if (json_array_size(offsets) != 2 || !json_is_integer(begin) || !json_is_integer(end)
        || json_integer_value(begin) < 0 || json_integer_value(end) < json_integer_value(begin))
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                           "%s: safetensors header: tensor '%s' data_offsets must be two "
                           "integers 0 <= begin <= end", file_name, key);
    tensor->begin = (uint64_t)json_integer_value(begin);
    tensor->end = (uint64_t)json_integer_value(end);
    if (tensor->end > data_size)
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                           "%s: tensor '%s' ends at data byte %llu but the file holds only "
                           "%llu data bytes (truncated file?)",
                           file_name, key, (unsigned long long)tensor->end,
                           (unsigned long long)data_size);
    uint64_t expected = (uint64_t)n_elements;
    if (expected > UINT64_MAX / (uint64_t)tensor->element_size
        || expected * (uint64_t)tensor->element_size != tensor->end - tensor->begin)
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                           "%s: safetensors header: tensor '%s' spans %llu bytes but its "
                           "shape and dtype %s need %lld elements of %d bytes",
                           file_name, key, (unsigned long long)(tensor->end - tensor->begin),
                           tensor->dtype, (long long)n_elements, tensor->element_size);
    return TFENC_OK;
}

static int check_metadata(tfenc_context *ctx, const char *file_name, json_t *metadata)
{
    if (!json_is_object(metadata))
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                           "%s: safetensors header: \"__metadata__\" is not a JSON object",
                           file_name);
    const char *key;
    json_t *value;
    json_object_foreach(metadata, key, value) {
        if (!json_is_string(value))
            return tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                               "%s: safetensors header: \"__metadata__\" value '%s' is not "
                               "a string", file_name, key);
    }
    return TFENC_OK;
}

int tfenc_safetensors_parse_header(tfenc_context *ctx, const char *name, const char *header,
                                   size_t header_length, uint64_t data_size,
                                   tfenc_safetensors **file)
{
    *file = NULL;
    if (header_length < 2 || header[0] != '{')
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                           "%s: safetensors header does not start with a JSON object", name);

    tfenc_safetensors *result = calloc(1, sizeof *result);
    if (result == NULL || (result->name = strdup(name)) == NULL) {
        free(result);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", name);
    }
    result->fd = -1;
    result->data_size = data_size;
    int status = TFENC_OK;
    tfenc_safetensors_tensor **by_offset = NULL;

    json_error_t json_error;
    /* Duplicate keys would let two entries disagree about one tensor. */
    result->header = json_loadb(header, header_length, JSON_REJECT_DUPLICATES, &json_error);
    if (result->header == NULL) {
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                             "%s: safetensors header is not valid JSON: %s at byte %d", name,
                             json_error.text, json_error.position);
        goto fail;
    }
    if (!json_is_object(result->header)) {
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                             "%s: safetensors header is not a JSON object", name);
        goto fail;
    }

    size_t n_entries = json_object_size(result->header);
    if (n_entries > INT_MAX / 2) {
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: safetensors header lists too many "
                             "tensors", name);
        goto fail;
    }
    result->tensors = calloc(n_entries + 1, sizeof *result->tensors);
    by_offset = calloc(n_entries + 1, sizeof *by_offset);
    if (result->tensors == NULL || by_offset == NULL) {
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", name);
        goto fail;
    }

    const char *key;
    json_t *value;
    json_object_foreach(result->header, key, value) {
        if (strcmp(key, "__metadata__") == 0) {
            status = check_metadata(ctx, name, value);
        } else {
            tfenc_safetensors_tensor *tensor = &result->tensors[result->n_tensors];
            status = parse_tensor(ctx, name, key, value, data_size, tensor);
            by_offset[result->n_tensors++] = tensor;
        }
        if (status != TFENC_OK)
            goto fail;
    }

    /* Overlapping ranges would make one tensor's bytes another's. */
    qsort(by_offset, (size_t)result->n_tensors, sizeof *by_offset, compare_begin);
    for (int i = 1; i < result->n_tensors; i++) {
        if (by_offset[i]->begin < by_offset[i - 1]->end) {
            status = tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                                 "%s: safetensors header: tensors '%s' and '%s' overlap "
                                 "(data bytes %llu..%llu and %llu..%llu)",
                                 name, by_offset[i - 1]->name, by_offset[i]->name,
                                 (unsigned long long)by_offset[i - 1]->begin,
                                 (unsigned long long)by_offset[i - 1]->end,
                                 (unsigned long long)by_offset[i]->begin,
                                 (unsigned long long)by_offset[i]->end);
            goto fail;
        }
    }
    free(by_offset);
    *file = result;
    return TFENC_OK;

fail:
    free(by_offset);
    tfenc_safetensors_close(result);
    return status;
}

int tfenc_safetensors_open(tfenc_context *ctx, const char *path, tfenc_safetensors **file)
{
    *file = NULL;
    /* A regular file only (core/base/files.h): open() of a FIFO would wait
     * for a writer, and /dev/zero has no size to check offsets against. */
    struct stat info;
    char why[256];
    int fd = tfenc_file_open_regular_descriptor(path, &info, why, sizeof why);
    if (fd < 0)
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: %s", path, why);
    uint64_t file_size = (uint64_t)info.st_size;
    unsigned char length_bytes[8];
    if (file_size < 8 || tfenc_file_read_at(fd, length_bytes, 8, 0) != 0) {
        close(fd);
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                           "%s: too short for a safetensors file (%llu bytes)", path,
                           (unsigned long long)file_size);
    }
    uint64_t header_length = 0;
    for (int i = 7; i >= 0; i--)
        header_length = header_length << 8 | length_bytes[i];
    if (header_length > file_size - 8 || header_length > TFENC_SAFETENSORS_MAX_HEADER) {
        close(fd);
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                           "%s: safetensors header length %llu does not fit the file of %llu "
                           "bytes (corrupt or truncated file?)", path,
                           (unsigned long long)header_length, (unsigned long long)file_size);
    }
    char *header = malloc(header_length + 1);
    if (header == NULL) {
        close(fd);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory for the header", path);
    }
    int read_errno = tfenc_file_read_at(fd, header, header_length, 8);
    if (read_errno != 0) {
        free(header);
        close(fd);
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot read the header: %s", path,
                           strerror(read_errno));
    }
    int status = tfenc_safetensors_parse_header(ctx, path, header, header_length,
                                                file_size - 8 - header_length, file);
    free(header);
    if (status != TFENC_OK) {
        close(fd);
        return status;
    }
    (*file)->fd = fd;
    (*file)->data_start = 8 + header_length;
    return TFENC_OK;
}

int tfenc_safetensors_count(const tfenc_safetensors *file)
{
    return file->n_tensors;
}

const tfenc_safetensors_tensor *tfenc_safetensors_tensor_at(const tfenc_safetensors *file,
                                                            int index)
{
    if (index < 0 || index >= file->n_tensors)
        return NULL;
    return &file->tensors[index];
}

const tfenc_safetensors_tensor *tfenc_safetensors_find(const tfenc_safetensors *file,
                                                       const char *name)
{
    for (int i = 0; i < file->n_tensors; i++)
        if (strcmp(file->tensors[i].name, name) == 0)
            return &file->tensors[i];
    return NULL;
}

const char *tfenc_safetensors_metadata(const tfenc_safetensors *file, const char *key)
{
    json_t *metadata = json_object_get(file->header, "__metadata__");
    return json_string_value(json_object_get(metadata, key));
}

const char *tfenc_safetensors_name(const tfenc_safetensors *file)
{
    return file->name;
}

static float float16_to_float32(uint16_t half)
{
    uint32_t sign = (uint32_t)(half & 0x8000u) << 16;
    uint32_t exponent = (half >> 10) & 0x1fu;
    uint32_t mantissa = half & 0x3ffu;
    uint32_t bits;
    float value;
    if (exponent == 0x1f) {
        bits = sign | 0x7f800000u | mantissa << 13; /* infinity or NaN */
    } else if (exponent != 0) {
        bits = sign | (exponent + 127 - 15) << 23 | mantissa << 13;
    } else {
        /* Zero or subnormal: mantissa * 2^-24 is exact in float32. */
        value = (float)mantissa * 0x1p-24f;
        memcpy(&bits, &value, sizeof bits);
        bits |= sign;
    }
    memcpy(&value, &bits, sizeof value);
    return value;
}

int tfenc_float_dtype_size(const char *dtype)
{
    return strcmp(dtype, "F32") == 0 ? 4
           : strcmp(dtype, "F16") == 0 || strcmp(dtype, "BF16") == 0 ? 2 : 0;
}

int tfenc_float_dtype_check(tfenc_context *ctx, const char *file, const char *tensor,
                            const char *dtype)
{
    if (tfenc_float_dtype_size(dtype) != 0)
        return TFENC_OK;
    return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: tensor '%s' has dtype %s; only F32, F16 "
                       "and BF16 can be read as floats", file, tensor, dtype);
}

unsigned char *tfenc_float_bytes_destination(float *out, const char *dtype, size_t n)
{
    /* 16-bit data goes into the upper half of `out` and is widened front to
     * back in place: element i is read before any write reaches its bytes. */
    return (unsigned char *)out + (tfenc_float_dtype_size(dtype) == 4 ? 0 : 2 * n);
}

void tfenc_float_bytes_widen(float *out, const char *dtype, size_t n)
{
    enum { F32, F16, BF16 } kind = strcmp(dtype, "F32") == 0   ? F32
                                   : strcmp(dtype, "F16") == 0 ? F16
                                                               : BF16;
    unsigned char *base = (unsigned char *)out;
    const unsigned char *raw = tfenc_float_bytes_destination(out, dtype, n);
    /* The formats are little-endian whatever the host is: assemble from bytes. */
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        float value;
        if (kind == F32) {
            const unsigned char *b = raw + 4 * i;
            bits = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16
                   | (uint32_t)b[3] << 24;
            memcpy(&value, &bits, sizeof value);
        } else {
            const unsigned char *b = raw + 2 * i;
            uint16_t half = (uint16_t)(b[0] | b[1] << 8);
            if (kind == F16) {
                value = float16_to_float32(half);
            } else {
                bits = (uint32_t)half << 16; /* bfloat16 is the upper half of a float32 */
                memcpy(&value, &bits, sizeof value);
            }
        }
        memcpy(base + 4 * i, &value, sizeof value);
    }
}

int tfenc_safetensors_read_float32(tfenc_context *ctx, const tfenc_safetensors *file,
                                   const tfenc_safetensors_tensor *tensor, float *out)
{
    int status = tfenc_float_dtype_check(ctx, file->name, tensor->name, tensor->dtype);
    if (status != TFENC_OK)
        return status;
    if (file->fd < 0)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL,
                           "%s: header parsed from memory has no data to read", file->name);

    size_t bytes = (size_t)(tensor->end - tensor->begin);
    size_t n = (size_t)tensor->n_elements;
    unsigned char *raw = tfenc_float_bytes_destination(out, tensor->dtype, n);
    int read_errno = tfenc_file_read_at(file->fd, raw, bytes, file->data_start + tensor->begin);
    if (read_errno != 0)
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot read tensor '%s': %s", file->name,
                           tensor->name, read_errno == EIO ? "file shorter than its header "
                           "says" : strerror(read_errno));
    tfenc_float_bytes_widen(out, tensor->dtype, n);
    return TFENC_OK;
}

/* One little-endian value of `size` bytes at b as unsigned bits. */
static uint64_t little_endian(const unsigned char *b, int size)
{
    uint64_t bits = 0;
    for (int k = size - 1; k >= 0; k--)
        bits = bits << 8 | b[k];
    return bits;
}

int tfenc_safetensors_read_double(tfenc_context *ctx, const tfenc_safetensors *file,
                                  const tfenc_safetensors_tensor *tensor, double *out)
{
    return tfenc_safetensors_read_double_range(ctx, file, tensor, 0, tensor->n_elements, out);
}

int tfenc_safetensors_read_double_range(tfenc_context *ctx, const tfenc_safetensors *file,
                                        const tfenc_safetensors_tensor *tensor, int64_t first,
                                        int64_t count, double *out)
{
    static const char *const kinds[] = {"F64", "F32", "F16", "BF16", "I64", "I32", "I16",
                                        "I8", "U8", NULL};
    int kind = 0;
    while (kinds[kind] != NULL && strcmp(kinds[kind], tensor->dtype) != 0)
        kind++;
    if (kinds[kind] == NULL)
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: tensor '%s' has dtype %s; only F64, "
                           "F32, F16, BF16, I64, I32, I16, I8 and U8 can be read as numbers",
                           file->name, tensor->name, tensor->dtype);
    if (file->fd < 0)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL,
                           "%s: header parsed from memory has no data to read", file->name);
    if (first < 0 || count < 0 || first > tensor->n_elements - count)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: values %lld..%lld of tensor '%s', "
                           "which has %lld", file->name, (long long)first,
                           (long long)(first + count), tensor->name,
                           (long long)tensor->n_elements);
    const size_t n = (size_t)count;
    const int size = tensor->element_size;
    /* The raw bytes go to the end of out (8 bytes a value, size <= 8) and
     * are widened front to back: value i is read before a write reaches it. */
    unsigned char *raw = (unsigned char *)out + (8 - size) * n;
    int read_errno = tfenc_file_read_at(file->fd, raw, (size_t)size * n,
                                        file->data_start + tensor->begin
                                            + (uint64_t)size * (uint64_t)first);
    if (read_errno != 0)
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot read tensor '%s': %s", file->name,
                           tensor->name, read_errno == EIO ? "file shorter than its header "
                           "says" : strerror(read_errno));
    for (size_t i = 0; i < n; i++) {
        const uint64_t bits = little_endian(raw + (size_t)size * i, size);
        double value;
        if (kind == 0) {
            memcpy(&value, &bits, sizeof value);
        } else if (kind <= 3) {
            float single;
            uint32_t word = kind == 1   ? (uint32_t)bits
                            : kind == 3 ? (uint32_t)bits << 16 /* bfloat16: a float's top */
                                        : 0;
            if (kind == 2)
                single = float16_to_float32((uint16_t)bits);
            else
                memcpy(&single, &word, sizeof single);
            value = single;
        } else if (kind == 8) {
            value = (double)bits;
        } else {
            /* sign-extend the two's complement value of `size` bytes */
            const int shift = 64 - 8 * size;
            value = (double)((int64_t)(bits << shift) >> shift);
        }
        out[i] = value;
    }
    return TFENC_OK;
}

void tfenc_safetensors_close(tfenc_safetensors *file)
{
    if (file == NULL)
        return;
    if (file->fd >= 0)
        close(file->fd);
    json_decref(file->header);
    free(file->tensors);
    free(file->name);
    free(file);
}
