/* Weight stores and linear maps: tensors come from an HDF5 file (any float
 * type, converted to float32 by HDF5 itself) or from memory, are checked for
 * shape and finiteness, and live until the store is closed. */
#include "weights.h"
#include "files.h"
#include "aligned.h"
#include "context.h"
#include "gemm.h"

#include <cblas.h>
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct memory_tensor {
    char *path;
    int rank;
    int64_t dims[TFENC_MAX_RANK];
    float *data;
} memory_tensor;

/* Everything the store hands out is owned here and freed at close. */
typedef struct owned {
    struct owned *next;
    void *pointer;
    void (*release)(void *pointer);
} owned;

struct tfenc_weight_store {
    char *name;
    hid_t file; /* H5I_INVALID_HID for an in-memory store */
    memory_tensor *tensors;
    int n_tensors;
    int capacity;
    owned *owned;
};

struct tfenc_weights {
    tfenc_weight_store *store;
    tfenc_context *ctx;
    char *group;
};

struct tfenc_linear {
    int in_features;
    int out_features;
    float *weight; /* [out_features, in_features] */
    float *bias;   /* [out_features] or NULL */
    tfenc_gemm_weights *bf16; /* the bf16 backend's copy, NULL in fp32 */
};

/* Shape of a tensor as found, before reading it. */
typedef struct tensor_shape {
    int rank;
    int64_t dims[TFENC_MAX_RANK];
} tensor_shape;

static int keep(tfenc_weight_store *store, void *pointer, void (*release)(void *))
{
    owned *node = malloc(sizeof *node);
    if (node == NULL) {
        release(pointer);
        return TFENC_ERR_NO_MEMORY;
    }
    node->pointer = pointer;
    node->release = release;
    node->next = store->owned;
    store->owned = node;
    return TFENC_OK;
}

static void release_weights(void *pointer)
{
    tfenc_weights *weights = pointer;
    free(weights->group);
    free(weights);
}

int tfenc_weight_store_open(tfenc_context *ctx, const char *path, tfenc_weight_store **store_out)
{
    *store_out = NULL;
    /* HDF5 prints its error stack by default; ours is one line from the caller. */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    /* HDF5's open() would wait forever on a FIFO: check the kind first. */
    int checked = tfenc_file_check_regular(ctx, "[model] weights", path);
    if (checked != TFENC_OK)
        return checked;
    if (H5Fis_hdf5(path) <= 0) {
        FILE *probe = fopen(path, "rb");
        if (probe == NULL)
            return tfenc_error(ctx, TFENC_ERR_IO, "weights %s: cannot open: no such readable file",
                               path);
        fclose(probe);
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "weights %s: not an HDF5 file (or truncated)",
                           path);
    }
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0)
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "weights %s: HDF5 cannot open it", path);
    tfenc_weight_store *store = calloc(1, sizeof *store);
    if (store == NULL || (store->name = strdup(path)) == NULL) {
        free(store);
        H5Fclose(file);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "weights %s: out of memory", path);
    }
    store->file = file;
    *store_out = store;
    return TFENC_OK;
}

int tfenc_weight_store_create_memory(tfenc_context *ctx, tfenc_weight_store **store_out)
{
    tfenc_weight_store *store = calloc(1, sizeof *store);
    if (store == NULL || (store->name = strdup("(memory)")) == NULL) {
        free(store);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "weights: out of memory");
    }
    store->file = H5I_INVALID_HID;
    *store_out = store;
    return TFENC_OK;
}

int tfenc_weight_store_add(tfenc_context *ctx, tfenc_weight_store *store, const char *path,
                           int rank, const int64_t *dims, const float *data)
{
    if (store->file != H5I_INVALID_HID || rank < 1 || rank > TFENC_MAX_RANK)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "weights: cannot add %s to this store", path);
    if (store->n_tensors == store->capacity) {
        int capacity = store->capacity ? store->capacity * 2 : 32;
        memory_tensor *grown = realloc(store->tensors, (size_t)capacity * sizeof *grown);
        if (grown == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "weights: out of memory");
        store->tensors = grown;
        store->capacity = capacity;
    }
    size_t count = 1;
    memory_tensor *tensor = &store->tensors[store->n_tensors];
    tensor->rank = rank;
    for (int i = 0; i < rank; i++) {
        tensor->dims[i] = dims[i];
        count *= (size_t)dims[i];
    }
    tensor->path = strdup(path);
    tensor->data = malloc(count * sizeof(float) + 1);
    if (tensor->path == NULL || tensor->data == NULL) {
        free(tensor->path);
        free(tensor->data);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "weights: out of memory");
    }
    memcpy(tensor->data, data, count * sizeof(float));
    store->n_tensors++;
    return TFENC_OK;
}

void tfenc_weight_store_close(tfenc_weight_store *store)
{
    if (store == NULL)
        return;
    while (store->owned != NULL) {
        owned *node = store->owned;
        store->owned = node->next;
        node->release(node->pointer);
        free(node);
    }
    for (int i = 0; i < store->n_tensors; i++) {
        free(store->tensors[i].path);
        free(store->tensors[i].data);
    }
    free(store->tensors);
    if (store->file != H5I_INVALID_HID)
        H5Fclose(store->file);
    free(store->name);
    free(store);
}

const char *tfenc_weight_store_name(const tfenc_weight_store *store)
{
    return store->name;
}

int tfenc_weight_store_group(tfenc_context *ctx, tfenc_weight_store *store, const char *group,
                             tfenc_weights **weights_out)
{
    tfenc_weights *weights = calloc(1, sizeof *weights);
    if (weights == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "weights: out of memory");
    /* Paths are absolute and without a trailing slash, however the job wrote them. */
    size_t length = strlen(group);
    while (length > 0 && group[length - 1] == '/')
        length--;
    weights->group = malloc(length + 2);
    if (weights->group == NULL) {
        free(weights);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "weights: out of memory");
    }
    size_t skip = group[0] == '/' ? 1 : 0;
    weights->group[0] = '/';
    memcpy(weights->group + 1, group + skip, length - (length > 0 ? skip : 0));
    weights->group[1 + length - (length > 0 ? skip : 0)] = '\0';
    weights->store = store;
    weights->ctx = ctx;
    if (keep(store, weights, release_weights) != TFENC_OK)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "weights: out of memory");
    *weights_out = weights;
    return TFENC_OK;
}

static void dataset_path(const tfenc_weights *weights, const char *name, char *path, size_t size)
{
    snprintf(path, size, "%s/%s", strcmp(weights->group, "/") == 0 ? "" : weights->group, name);
}

/* H5Lexists fails on a missing intermediate group, so walk the path. */
static int hdf5_path_exists(hid_t file, const char *path)
{
    char prefix[1024];
    size_t length = strlen(path);
    if (length >= sizeof prefix)
        return 0;
    for (size_t i = 1; i <= length; i++) {
        if (path[i] != '/' && path[i] != '\0')
            continue;
        memcpy(prefix, path, i);
        prefix[i] = '\0';
        if (H5Lexists(file, prefix, H5P_DEFAULT) <= 0)
            return 0;
    }
    return 1;
}

static const memory_tensor *find_memory(const tfenc_weight_store *store, const char *path)
{
    for (int i = 0; i < store->n_tensors; i++)
        if (strcmp(store->tensors[i].path, path) == 0)
            return &store->tensors[i];
    return NULL;
}

int tfenc_weight_store_has_group(const tfenc_weight_store *store, const char *group)
{
    if (store->file != H5I_INVALID_HID) {
        int exists = hdf5_path_exists(store->file, group);
        H5Eclear2(H5E_DEFAULT);
        return exists;
    }
    size_t length = strlen(group);
    for (int i = 0; i < store->n_tensors; i++)
        if (strncmp(store->tensors[i].path, group, length) == 0 &&
            store->tensors[i].path[length] == '/')
            return 1;
    return 0;
}

int tfenc_weight_exists(tfenc_weights *weights, const char *name)
{
    char path[1024];
    dataset_path(weights, name, path, sizeof path);
    if (weights->store->file == H5I_INVALID_HID)
        return find_memory(weights->store, path) != NULL;
    return hdf5_path_exists(weights->store->file, path);
}

static void format_shape(char *text, size_t size, int rank, const int64_t *dims)
{
    size_t used = (size_t)snprintf(text, size, "[");
    for (int i = 0; i < rank && used < size; i++) {
        if (dims[i] < 0)
            used += (size_t)snprintf(text + used, size - used, "%s?", i ? ", " : "");
        else
            used += (size_t)snprintf(text + used, size - used, "%s%lld", i ? ", " : "",
                                     (long long)dims[i]);
    }
    if (used < size)
        snprintf(text + used, size - used, "]");
}

/* Finds dataset `name` and checks it against rank/dims (negative dims are
 * wildcards). On success `found` holds the real shape. */
static int inspect(tfenc_weights *weights, const char *name, int rank, const int64_t *dims,
                   tensor_shape *found)
{
    tfenc_weight_store *store = weights->store;
    char path[1024];
    dataset_path(weights, name, path, sizeof path);
    memset(found, 0, sizeof *found);
    if (store->file == H5I_INVALID_HID) {
        const memory_tensor *tensor = find_memory(store, path);
        if (tensor == NULL)
            return tfenc_error(weights->ctx, TFENC_ERR_WEIGHTS,
                               "weights %s: dataset %s not found", store->name, path);
        found->rank = tensor->rank;
        memcpy(found->dims, tensor->dims, sizeof found->dims);
    } else {
        if (!hdf5_path_exists(store->file, path))
            return tfenc_error(weights->ctx, TFENC_ERR_WEIGHTS,
                               "weights %s: dataset %s not found", store->name, path);
        hid_t dataset = H5Dopen2(store->file, path, H5P_DEFAULT);
        if (dataset < 0)
            return tfenc_error(weights->ctx, TFENC_ERR_WEIGHTS,
                               "weights %s: %s is not a dataset", store->name, path);
        hid_t type = H5Dget_type(dataset);
        hid_t space = H5Dget_space(dataset);
        int is_float = type >= 0 && H5Tget_class(type) == H5T_FLOAT;
        int found_rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
        hsize_t extent[TFENC_MAX_RANK] = {0};
        if (found_rank >= 0 && found_rank <= TFENC_MAX_RANK)
            H5Sget_simple_extent_dims(space, extent, NULL);
        if (space >= 0)
            H5Sclose(space);
        if (type >= 0)
            H5Tclose(type);
        H5Dclose(dataset);
        if (!is_float)
            return tfenc_error(weights->ctx, TFENC_ERR_WEIGHTS,
                               "weights %s: dataset %s is not floating point", store->name, path);
        if (found_rank < 0 || found_rank > TFENC_MAX_RANK)
            return tfenc_error(weights->ctx, TFENC_ERR_WEIGHTS,
                               "weights %s: dataset %s has an unsupported rank %d", store->name,
                               path, found_rank);
        found->rank = found_rank;
        for (int i = 0; i < found_rank; i++)
            found->dims[i] = (int64_t)extent[i];
    }
    int matches = found->rank == rank;
    for (int i = 0; matches && i < rank; i++)
        matches = dims[i] < 0 || dims[i] == found->dims[i];
    if (!matches) {
        char expected[128], actual[128];
        format_shape(expected, sizeof expected, rank, dims);
        format_shape(actual, sizeof actual, found->rank, found->dims);
        return tfenc_error(weights->ctx, TFENC_ERR_WEIGHTS,
                           "weights %s: dataset %s: expected shape %s, found %s", store->name,
                           path, expected, actual);
    }
    return TFENC_OK;
}

static size_t element_count(const tensor_shape *shape)
{
    size_t count = 1;
    for (int i = 0; i < shape->rank; i++)
        count *= (size_t)shape->dims[i];
    return count;
}

/* Reads an inspected dataset into `destination` as float32 and refuses
 * non-finite values, which would silently poison every encoding. */
static int read_into(tfenc_weights *weights, const char *name, const tensor_shape *shape,
                     float *destination)
{
    tfenc_weight_store *store = weights->store;
    char path[1024];
    dataset_path(weights, name, path, sizeof path);
    size_t count = element_count(shape);
    if (store->file == H5I_INVALID_HID) {
        memcpy(destination, find_memory(store, path)->data, count * sizeof(float));
    } else {
        hid_t dataset = H5Dopen2(store->file, path, H5P_DEFAULT);
        herr_t read = dataset < 0 ? -1
                                  : H5Dread(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL,
                                            H5P_DEFAULT, destination);
        if (dataset >= 0)
            H5Dclose(dataset);
        if (read < 0)
            return tfenc_error(weights->ctx, TFENC_ERR_WEIGHTS,
                               "weights %s: dataset %s cannot be read (corrupt file?)",
                               store->name, path);
    }
    for (size_t i = 0; i < count; i++)
        if (!isfinite(destination[i]))
            return tfenc_error(weights->ctx, TFENC_ERR_WEIGHTS,
                               "weights %s: dataset %s holds a non-finite value (%g at flat index %zu)",
                               store->name, path, (double)destination[i], i);
    return TFENC_OK;
}

int tfenc_weight_load(tfenc_weights *weights, const char *name, int rank, int64_t *dims,
                      const float **data)
{
    *data = NULL;
    tensor_shape shape;
    if (rank < 1 || rank > TFENC_MAX_RANK)
        return tfenc_error(weights->ctx, TFENC_ERR_INTERNAL,
                           "weights: rank %d requested for %s", rank, name);
    int status = inspect(weights, name, rank, dims, &shape);
    if (status != TFENC_OK)
        return status;
    float *buffer = tfenc_aligned_alloc(element_count(&shape) * sizeof(float));
    if (buffer == NULL)
        return tfenc_error(weights->ctx, TFENC_ERR_NO_MEMORY, "weights: out of memory for %s",
                           name);
    status = read_into(weights, name, &shape, buffer);
    if (status != TFENC_OK) {
        tfenc_aligned_free(buffer);
        return status;
    }
    if (keep(weights->store, buffer, tfenc_aligned_free) != TFENC_OK)
        return tfenc_error(weights->ctx, TFENC_ERR_NO_MEMORY, "weights: out of memory");
    for (int i = 0; i < rank; i++)
        dims[i] = shape.dims[i];
    *data = buffer;
    return TFENC_OK;
}

static void release_linear(void *pointer)
{
    tfenc_linear *linear = pointer;
    tfenc_gemm_weights_destroy(linear->bf16);
    tfenc_aligned_free(linear->weight);
    tfenc_aligned_free(linear->bias);
    free(linear);
}

/* Gives the matrix backend its own copy of the weights when the precision
 * is not fp32 (bf16: converted once here, not per batch). */
static int linear_prepare_backend(tfenc_context *ctx, tfenc_linear *linear)
{
    tfenc_gemm_precision precision;
    int status = tfenc_gemm_get_precision(ctx, &precision);
    if (status != TFENC_OK || precision == TFENC_GEMM_FP32)
        return status;
    return tfenc_gemm_weights_create(ctx, linear->weight, linear->bias, linear->out_features,
                                     linear->in_features, &linear->bf16);
}

int tfenc_linear_load(tfenc_weights *weights, int n_parts, const char *const *weight_names,
                      const char *const *bias_names, int in_features, int *out_features,
                      tfenc_linear **linear_out)
{
    *linear_out = NULL;
    if (n_parts < 1 || n_parts > 8 || in_features < 1)
        return tfenc_error(weights->ctx, TFENC_ERR_INTERNAL,
                           "weights: bad linear request (%d parts, %d inputs)", n_parts,
                           in_features);
    /* Inspect every part first so that the stacked matrix is allocated once. */
    tensor_shape weight_shapes[8], bias_shapes[8];
    int total_out = 0;
    for (int p = 0; p < n_parts; p++) {
        int64_t dims[2] = {-1, in_features};
        int status = inspect(weights, weight_names[p], 2, dims, &weight_shapes[p]);
        if (status != TFENC_OK)
            return status;
        if (bias_names != NULL) {
            int64_t bias_dims[1] = {weight_shapes[p].dims[0]};
            status = inspect(weights, bias_names[p], 1, bias_dims, &bias_shapes[p]);
            if (status != TFENC_OK)
                return status;
        }
        total_out += (int)weight_shapes[p].dims[0];
    }
    tfenc_linear *linear = calloc(1, sizeof *linear);
    if (linear == NULL)
        return tfenc_error(weights->ctx, TFENC_ERR_NO_MEMORY, "weights: out of memory");
    linear->in_features = in_features;
    linear->out_features = total_out;
    linear->weight = tfenc_aligned_alloc((size_t)total_out * (size_t)in_features * sizeof(float));
    linear->bias = bias_names != NULL ? tfenc_aligned_alloc((size_t)total_out * sizeof(float))
                                      : NULL;
    int status = TFENC_OK;
    if (linear->weight == NULL || (bias_names != NULL && linear->bias == NULL))
        status = tfenc_error(weights->ctx, TFENC_ERR_NO_MEMORY, "weights: out of memory");
    size_t row = 0;
    for (int p = 0; status == TFENC_OK && p < n_parts; p++) {
        status = read_into(weights, weight_names[p], &weight_shapes[p],
                           linear->weight + row * (size_t)in_features);
        if (status == TFENC_OK && bias_names != NULL)
            status = read_into(weights, bias_names[p], &bias_shapes[p], linear->bias + row);
        row += (size_t)weight_shapes[p].dims[0];
    }
    if (status == TFENC_OK)
        status = linear_prepare_backend(weights->ctx, linear);
    if (status != TFENC_OK) {
        release_linear(linear);
        return status;
    }
    if (keep(weights->store, linear, release_linear) != TFENC_OK)
        return tfenc_error(weights->ctx, TFENC_ERR_NO_MEMORY, "weights: out of memory");
    if (out_features != NULL)
        *out_features = total_out;
    *linear_out = linear;
    return TFENC_OK;
}

int tfenc_linear_forward(tfenc_context *ctx, const tfenc_linear *linear, const float *x, int rows,
                         float *y)
{
    if (rows <= 0)
        return TFENC_OK;
    if (linear->bf16 != NULL)
        return tfenc_gemm_forward(ctx, linear->bf16, x, rows, y);
    const int in = linear->in_features, out = linear->out_features;
    float beta = 0.0f;
    if (linear->bias != NULL) {
        /* Start from the bias and let the GEMM accumulate onto it: one pass over y. */
        for (int r = 0; r < rows; r++)
            memcpy(y + (size_t)r * out, linear->bias, (size_t)out * sizeof(float));
        beta = 1.0f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, out, in, 1.0f, x, in,
                linear->weight, in, beta, y, out);
    (void)ctx;
    return TFENC_OK;
}
