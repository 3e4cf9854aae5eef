/* Weight stores and linear maps: tensors come from an HDF5 file (any float
 * type, converted to float32 by HDF5 itself) or from memory, are checked for
 * shape and finiteness, and live as long as the group handle they were
 * loaded through: the model releases a layer's handle after the layer's
 * destroy(), so memory holds the weights of the layers that exist, not of
 * every layer ever built from the store. */
#include "model/weights.h"
#include "base/hdf5_intact.h"
#include "base/files.h"
#include "base/aligned.h"
#include "base/context.h"
#include "matrix/matrix.h"
#include "ranks/node_arena.h"

#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A linear map's input ranges, found again by the map's first dataset. */
typedef struct calibration {
    char *key; /* "/encoder/0/ffn/in_weight:1": first weight dataset and parts */
    int in;
    float *range; /* [in] */
} calibration;

typedef struct memory_tensor {
    char *path;
    int rank;
    int64_t dims[TFENC_MAX_RANK];
    float *data;
} memory_tensor;

/* Everything a group handle hands out is owned by the handle and freed when
 * the handle is released. */
typedef struct owned {
    struct owned *next;
    void *pointer;
    void (*release)(void *pointer);
} owned;

/* A file whose datasets under `group` replace the store's own: a head's
 * weights beside its encoder's ([LAYER] weights_file). */
typedef struct attached_file {
    char *group; /* "/classifier", without a trailing slash */
    char *name;  /* the file's path, for messages */
    hid_t file;
} attached_file;

struct tfenc_weight_store {
    char *name;
    hid_t file; /* H5I_INVALID_HID for an in-memory store */
    attached_file *attached;
    int n_attached;
    memory_tensor *tensors;
    int n_tensors;
    int capacity;
    tfenc_weights *handles; /* live group handles, released at close at the latest */
    tfenc_matrix_scratch *scratch; /* shared by the linear maps and products of every handle */
    calibration *calibrations;     /* input ranges of linear maps, by their datasets */
    int n_calibrations;
    char *calibration_origin;      /* once fixed: where the table came from; else NULL */
    tfenc_node_arena *arena;       /* the node's one copy of what is loaded, or NULL */
    long products;                 /* linear maps and product plans made through its handles */
};

struct tfenc_weights {
    tfenc_weight_store *store;
    tfenc_context *ctx;
    char *group;
    hid_t file;            /* where its datasets are: the store's file or an attached one */
    const char *file_name; /* that file's path, or "(memory)" */
    owned *owned;                 /* tensors and linear maps loaded through this handle */
    tfenc_weights *previous, *next; /* the store's list of live handles */
    tfenc_weight_options options; /* the precision of its linear maps and products */
};

/* Shape of a tensor as found, before reading it. */
typedef struct tensor_shape {
    int rank;
    int64_t dims[TFENC_MAX_RANK];
} tensor_shape;

static int keep(tfenc_weights *weights, void *pointer, void (*release)(void *))
{
    owned *node = malloc(sizeof *node);
    if (node == NULL) {
        release(pointer);
        return TFENC_ERR_NO_MEMORY;
    }
    node->pointer = pointer;
    node->release = release;
    node->next = weights->owned;
    weights->owned = node;
    return TFENC_OK;
}

void tfenc_weights_release(tfenc_weights *weights)
{
    if (weights == NULL)
        return;
    while (weights->owned != NULL) {
        owned *node = weights->owned;
        weights->owned = node->next;
        node->release(node->pointer);
        free(node);
    }
    if (weights->previous != NULL)
        weights->previous->next = weights->next;
    else
        weights->store->handles = weights->next;
    if (weights->next != NULL)
        weights->next->previous = weights->previous;
    free(weights->group);
    free(weights);
}

/* Opens the HDF5 weights file that job key `setting` names, read-only. */
static int open_weights_file(tfenc_context *ctx, const char *setting, const char *path,
                             hid_t *file)
{
    /* HDF5 prints its error stack by default; ours is one line from the caller. */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    /* HDF5's open() would wait forever on a FIFO: check the kind first. */
    int checked = tfenc_file_check_regular(ctx, setting, path);
    if (checked != TFENC_OK)
        return checked;
    if (H5Fis_hdf5(path) <= 0) {
        FILE *probe = fopen(path, "rb");
        if (probe == NULL)
            return tfenc_error(ctx, TFENC_ERR_IO, "%s %s: cannot open: no such readable file",
                               setting, path);
        fclose(probe);
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s %s: not an HDF5 file (or truncated)",
                           setting, path);
    }
    *file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (*file < 0)
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s %s: HDF5 cannot open it", setting, path);
    return TFENC_OK;
}

int tfenc_weight_store_open(tfenc_context *ctx, const char *path, tfenc_weight_store **store_out)
{
    *store_out = NULL;
    hid_t file = H5I_INVALID_HID;
    int opened = open_weights_file(ctx, "[model] weights", path, &file);
    if (opened != TFENC_OK)
        return opened;
    tfenc_weight_store *store = calloc(1, sizeof *store);
    if (store == NULL || (store->name = strdup(path)) == NULL ||
        tfenc_matrix_scratch_create(ctx, &store->scratch) != TFENC_OK) {
        if (store != NULL)
            free(store->name);
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
    if (store == NULL || (store->name = strdup("(memory)")) == NULL ||
        tfenc_matrix_scratch_create(ctx, &store->scratch) != TFENC_OK) {
        if (store != NULL)
            free(store->name);
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
    while (store->handles != NULL)
        tfenc_weights_release(store->handles);
    tfenc_matrix_scratch_destroy(store->scratch);
    for (int i = 0; i < store->n_calibrations; i++) {
        free(store->calibrations[i].key);
        free(store->calibrations[i].range);
    }
    free(store->calibrations);
    free(store->calibration_origin);
    for (int i = 0; i < store->n_tensors; i++) {
        free(store->tensors[i].path);
        free(store->tensors[i].data);
    }
    free(store->tensors);
    for (int i = 0; i < store->n_attached; i++) {
        H5Fclose(store->attached[i].file);
        free(store->attached[i].group);
        free(store->attached[i].name);
    }
    free(store->attached);
    if (store->file != H5I_INVALID_HID)
        H5Fclose(store->file);
    free(store->name);
    free(store);
}

long tfenc_weight_store_products(const tfenc_weight_store *store)
{
    return store->products;
}

const char *tfenc_weight_store_name(const tfenc_weight_store *store)
{
    return store->name;
}

/* Group paths are absolute and without a trailing slash, however the job
 * wrote them ("head/" is "/head"). NULL when out of memory; free() it. */
static char *absolute_group(const char *group)
{
    size_t length = strlen(group);
    while (length > 0 && group[length - 1] == '/')
        length--;
    char *path = malloc(length + 2);
    if (path == NULL)
        return NULL;
    size_t skip = group[0] == '/' ? 1 : 0;
    path[0] = '/';
    memcpy(path + 1, group + skip, length - (length > 0 ? skip : 0));
    path[1 + length - (length > 0 ? skip : 0)] = '\0';
    return path;
}

/* The attached file that holds `group` ("/head" or "/head/dense": the
 * attached group or one inside it), or NULL: the store's own. */
static const attached_file *attached_for(const tfenc_weight_store *store, const char *group)
{
    for (int i = 0; i < store->n_attached; i++) {
        const attached_file *attached = &store->attached[i];
        size_t length = strlen(attached->group);
        if (strncmp(group, attached->group, length) == 0 &&
            (group[length] == '\0' || group[length] == '/'))
            return attached;
    }
    return NULL;
}

int tfenc_weight_store_attach(tfenc_context *ctx, tfenc_weight_store *store, const char *group,
                              const char *path, const char *setting)
{
    char *absolute = absolute_group(group);
    attached_file *grown =
        absolute != NULL
            ? realloc(store->attached, (size_t)(store->n_attached + 1) * sizeof *grown)
            : NULL;
    if (grown == NULL) {
        free(absolute);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "weights: out of memory");
    }
    store->attached = grown;
    attached_file *attached = &grown[store->n_attached];
    /* The whole file cannot be one layer's, and a group takes one file. */
    int status = TFENC_OK;
    if (strcmp(absolute, "/") == 0 || attached_for(store, absolute) != NULL)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                             "%s %s: weights group %s cannot take its weights from a file of "
                             "its own (the whole model's group, or one given a file already)",
                             setting, path, absolute);
    if (status == TFENC_OK)
        status = open_weights_file(ctx, setting, path, &attached->file);
    if (status == TFENC_OK && (attached->name = strdup(path)) == NULL) {
        H5Fclose(attached->file);
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "weights: out of memory");
    }
    if (status != TFENC_OK) {
        free(absolute);
        return status;
    }
    attached->group = absolute;
    store->n_attached++;
    return TFENC_OK;
}

int tfenc_weight_store_group(tfenc_context *ctx, tfenc_weight_store *store, const char *group,
                             const tfenc_weight_options *options, tfenc_weights **weights_out)
{
    tfenc_weights *weights = calloc(1, sizeof *weights);
    if (weights == NULL || (weights->group = absolute_group(group)) == NULL) {
        free(weights);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "weights: out of memory");
    }
    weights->store = store;
    weights->ctx = ctx;
    const attached_file *attached = attached_for(store, weights->group);
    weights->file = attached != NULL ? attached->file : store->file;
    weights->file_name = attached != NULL ? attached->name : store->name;
    if (options != NULL)
        weights->options = *options;
    weights->next = store->handles;
    if (store->handles != NULL)
        store->handles->previous = weights;
    store->handles = weights;
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
    const attached_file *attached = attached_for(store, group);
    if (attached != NULL || store->file != H5I_INVALID_HID) {
        int exists = hdf5_path_exists(attached != NULL ? attached->file : store->file, group);
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
    if (weights->file == H5I_INVALID_HID)
        return find_memory(weights->store, path) != NULL;
    return hdf5_path_exists(weights->file, path);
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
    if (weights->file == H5I_INVALID_HID) {
        const memory_tensor *tensor = find_memory(store, path);
        if (tensor == NULL)
            return tfenc_error(weights->ctx, TFENC_ERR_WEIGHTS,
                               "weights %s: dataset %s not found", weights->file_name, path);
        found->rank = tensor->rank;
        memcpy(found->dims, tensor->dims, sizeof found->dims);
    } else {
        if (!hdf5_path_exists(weights->file, path))
            return tfenc_error(weights->ctx, TFENC_ERR_WEIGHTS,
                               "weights %s: dataset %s not found", weights->file_name, path);
        hid_t dataset = H5Dopen2(weights->file, path, H5P_DEFAULT);
        if (dataset < 0)
            return tfenc_error(weights->ctx, TFENC_ERR_WEIGHTS,
                               "weights %s: %s is not a dataset", weights->file_name, path);
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
                               "weights %s: dataset %s is not floating point", weights->file_name, path);
        if (found_rank < 0 || found_rank > TFENC_MAX_RANK)
            return tfenc_error(weights->ctx, TFENC_ERR_WEIGHTS,
                               "weights %s: dataset %s has an unsupported rank %d", weights->file_name,
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
                           "weights %s: dataset %s: expected shape %s, found %s", weights->file_name,
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
    if (weights->file == H5I_INVALID_HID) {
        memcpy(destination, find_memory(store, path)->data, count * sizeof(float));
    } else {
        hid_t dataset = H5Dopen2(weights->file, path, H5P_DEFAULT);
        herr_t read = dataset < 0 ? -1
                                  : H5Dread(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL,
                                            H5P_DEFAULT, destination);
        if (dataset >= 0)
            H5Dclose(dataset);
        if (read < 0)
            return tfenc_error(weights->ctx, TFENC_ERR_WEIGHTS,
                               "weights %s: dataset %s cannot be read (corrupt file?)",
                               weights->file_name, path);        /* A weights file cut short while the job reads it gives zeros. */
        int status = tfenc_hdf5_check_intact(weights->ctx, weights->file, weights->file_name, path);
        if (status != TFENC_OK)
            return status;
    }
    for (size_t i = 0; i < count; i++)
        if (!isfinite(destination[i]))
            return tfenc_error(weights->ctx, TFENC_ERR_WEIGHTS,
                               "weights %s: dataset %s holds a non-finite value (%g at flat index %zu)",
                               weights->file_name, path, (double)destination[i], i);
    return TFENC_OK;
}

/* The node's block for `description` (what is kept and in which form):
 * *fill = 1 when this rank is the first of its node to ask and must fill it
 * (then finish_shared()), 0 when another rank has filled it.
 * TFENC_ERR_NOT_FOUND, without a message, when it is not shared (the arena
 * is full): the caller keeps a copy of its own. */
static int claim_shared(tfenc_weights *weights, const char *description, size_t bytes,
                        void **block, int *fill)
{
    char name[TFENC_NODE_ARENA_NAME_MAX + 1];
    size_t length = strlen(description);
    if (length <= TFENC_NODE_ARENA_NAME_MAX) {
        memcpy(name, description, length + 1);
    } else {
        /* Long descriptions (many parts, deep groups): a prefix and a hash
         * of the whole keep the name unique and short. */
        uint64_t hash = 1469598103934665603ull; /* FNV-1a */
        for (size_t i = 0; i < length; i++)
            hash = (hash ^ (unsigned char)description[i]) * 1099511628211ull;
        snprintf(name, sizeof name, "%.160s #%016llx", description, (unsigned long long)hash);
    }
    return tfenc_node_arena_claim(weights->ctx, weights->store->arena, name, bytes, block, fill);
}

/* Tells the node's other ranks whether the block this rank filled is ready. */
static void finish_shared(tfenc_weights *weights, void *block, int status)
{
    if (status == TFENC_OK)
        tfenc_node_arena_publish(weights->store->arena, block);
    else
        tfenc_node_arena_abandon(weights->store->arena, block);
}

void tfenc_weight_store_share(tfenc_weight_store *store, tfenc_node_arena *arena)
{
    store->arena = arena;
}

static herr_t add_dataset_bytes(hid_t object, const char *name, const H5O_info_t *info,
                                void *total)
{
    if (info->type != H5O_TYPE_DATASET)
        return 0;
    hid_t dataset = H5Dopen2(object, name, H5P_DEFAULT);
    hid_t space = dataset >= 0 ? H5Dget_space(dataset) : H5I_INVALID_HID;
    hssize_t count = space >= 0 ? H5Sget_simple_extent_npoints(space) : 0;
    if (count > 0)
        *(size_t *)total += (size_t)count * sizeof(float) + 64;
    if (space >= 0)
        H5Sclose(space);
    if (dataset >= 0)
        H5Dclose(dataset);
    return 0;
}

size_t tfenc_weight_store_float32_bytes(const tfenc_weight_store *store)
{
    size_t total = 0;
    /* An attached file counts with its group only: it may be another
     * model's whole file, of which the job reads the head. (The store's own
     * group of that name is counted too, though unread: an overestimate.) */
    for (int i = 0; i < store->n_attached; i++) {
        hid_t group = H5Oopen(store->attached[i].file, store->attached[i].group, H5P_DEFAULT);
        if (group < 0 || H5Ovisit2(group, H5_INDEX_NAME, H5_ITER_NATIVE, add_dataset_bytes,
                                   &total, H5O_INFO_BASIC) < 0)
            H5Eclear2(H5E_DEFAULT);
        if (group >= 0)
            H5Oclose(group);
    }
    if (store->file == H5I_INVALID_HID) {
        for (int i = 0; i < store->n_tensors; i++) {
            size_t count = 1;
            for (int d = 0; d < store->tensors[i].rank; d++)
                count *= (size_t)store->tensors[i].dims[d];
            total += count * sizeof(float) + 64;
        }
        return total;
    }
    if (H5Ovisit2(store->file, H5_INDEX_NAME, H5_ITER_NATIVE, add_dataset_bytes, &total,
                  H5O_INFO_BASIC) < 0)
        H5Eclear2(H5E_DEFAULT);
    return total;
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
    if (weights->store->arena != NULL) {
        char path[1024], description[1100];
        dataset_path(weights, name, path, sizeof path);
        snprintf(description, sizeof description, "%s float32", path);
        void *block = NULL;
        int fill = 0;
        status = claim_shared(weights, description, element_count(&shape) * sizeof(float), &block,
                              &fill);
        if (status == TFENC_OK && fill) {
            status = read_into(weights, name, &shape, block);
            finish_shared(weights, block, status);
        }
        if (status == TFENC_OK) {
            for (int i = 0; i < rank; i++)
                dims[i] = shape.dims[i];
            *data = block;
            return TFENC_OK;
        }
        if (status != TFENC_ERR_NOT_FOUND)
            return status;
    }
    float *buffer = tfenc_aligned_alloc(element_count(&shape) * sizeof(float));
    if (buffer == NULL)
        return tfenc_error(weights->ctx, TFENC_ERR_NO_MEMORY, "weights: out of memory for %s",
                           name);
    status = read_into(weights, name, &shape, buffer);
    if (status != TFENC_OK) {
        tfenc_aligned_free(buffer);
        return status;
    }
    if (keep(weights, buffer, tfenc_aligned_free) != TFENC_OK)
        return tfenc_error(weights->ctx, TFENC_ERR_NO_MEMORY, "weights: out of memory");
    for (int i = 0; i < rank; i++)
        dims[i] = shape.dims[i];
    *data = buffer;
    return TFENC_OK;
}

static calibration *find_calibration(tfenc_weight_store *store, const char *key, int in)
{
    for (int i = 0; i < store->n_calibrations; i++)
        if (strcmp(store->calibrations[i].key, key) == 0 && store->calibrations[i].in == in)
            return &store->calibrations[i];
    return NULL;
}

static calibration *add_calibration(tfenc_weight_store *store, const char *key, int in)
{
    calibration *grown =
        realloc(store->calibrations, (size_t)(store->n_calibrations + 1) * sizeof *grown);
    if (grown == NULL)
        return NULL;
    store->calibrations = grown;
    calibration *entry = &grown[store->n_calibrations];
    entry->key = strdup(key);
    entry->in = in;
    entry->range = calloc((size_t)in, sizeof *entry->range);
    if (entry->key == NULL || entry->range == NULL) {
        free(entry->key);
        free(entry->range);
        return NULL;
    }
    store->n_calibrations++;
    return entry;
}

/* The table as bytes: per entry, the key's length (int32), the key, `in`
 * (int32) and the ranges (float). Same machine, same byte order. */
int tfenc_weight_store_calibration_export(tfenc_context *ctx, const tfenc_weight_store *store,
                                          void **bytes, size_t *size)
{
    size_t total = 0;
    for (int i = 0; i < store->n_calibrations; i++)
        total += 2 * sizeof(int32_t) + strlen(store->calibrations[i].key) +
                 (size_t)store->calibrations[i].in * sizeof(float);
    char *out = malloc(total > 0 ? total : 1);
    if (out == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "weights: out of memory");
    char *at = out;
    for (int i = 0; i < store->n_calibrations; i++) {
        const calibration *c = &store->calibrations[i];
        int32_t length = (int32_t)strlen(c->key), in = c->in;
        memcpy(at, &length, sizeof length);
        at += sizeof length;
        memcpy(at, c->key, (size_t)length);
        at += length;
        memcpy(at, &in, sizeof in);
        at += sizeof in;
        memcpy(at, c->range, (size_t)in * sizeof(float));
        at += (size_t)in * sizeof(float);
    }
    *bytes = out;
    *size = total;
    return TFENC_OK;
}

int tfenc_weight_store_calibration_import(tfenc_context *ctx, tfenc_weight_store *store,
                                          const void *bytes, size_t size)
{
    const char *at = bytes, *end = at + size;
    while (at < end) {
        int32_t length, in;
        if ((size_t)(end - at) < sizeof length)
            break;
        memcpy(&length, at, sizeof length);
        at += sizeof length;
        if (length < 0 || length >= 1100 || (size_t)(end - at) < (size_t)length + sizeof in)
            break;
        char key[1100];
        memcpy(key, at, (size_t)length);
        key[length] = '\0';
        at += length;
        memcpy(&in, at, sizeof in);
        at += sizeof in;
        if (in < 1 || (size_t)(end - at) < (size_t)in * sizeof(float))
            break;
        calibration *entry = find_calibration(store, key, in);
        if (entry == NULL && (entry = add_calibration(store, key, in)) == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "weights: out of memory");
        memcpy(entry->range, at, (size_t)in * sizeof(float));
        at += (size_t)in * sizeof(float);
    }
    if (at != end)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "weights: malformed calibration table");
    return TFENC_OK;
}

int tfenc_weight_store_calibration_entry(const tfenc_weight_store *store, int i,
                                         const char **key, int *in, const float **range)
{
    if (i < 0 || i >= store->n_calibrations)
        return 0;
    *key = store->calibrations[i].key;
    *in = store->calibrations[i].in;
    *range = store->calibrations[i].range;
    return 1;
}

int tfenc_weight_store_calibration_set(tfenc_context *ctx, tfenc_weight_store *store,
                                       const char *key, int in, const float *range)
{
    calibration *entry = find_calibration(store, key, in);
    if (entry == NULL && (entry = add_calibration(store, key, in)) == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "weights: out of memory");
    memcpy(entry->range, range, (size_t)in * sizeof *range);
    return TFENC_OK;
}

int tfenc_weight_store_calibration_fix(tfenc_context *ctx, tfenc_weight_store *store,
                                       const char *origin)
{
    free(store->calibration_origin);
    store->calibration_origin = strdup(origin);
    return store->calibration_origin != NULL
               ? TFENC_OK
               : tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "weights: out of memory");
}

/* An int8 map of a fixed calibration that holds no ranges for it: the
 * calibration is of another model or plan. */
static int no_ranges(const tfenc_weights *weights, const char *key, int in_features)
{
    const tfenc_weight_store *store = weights->store;
    for (int i = 0; i < store->n_calibrations; i++)
        if (strcmp(store->calibrations[i].key, key) == 0)
            return tfenc_error(weights->ctx, TFENC_ERR_CONFIG,
                               "%s: holds ranges of %d inputs for the linear map %s, which "
                               "takes %d here (a calibration of another model or plan)",
                               store->calibration_origin, store->calibrations[i].in, key,
                               in_features);
    return tfenc_error(weights->ctx, TFENC_ERR_CONFIG,
                       "%s: holds no input ranges for the linear map %s (%d inputs) of this "
                       "model (a calibration of another model or plan)",
                       store->calibration_origin, key, in_features);
}

/* What a shared map holds, in words: its datasets, shape, precision and
 * (int8) a digest of the input ranges its smoothing came from, so that
 * only identical maps share a block. */
static void describe_linear(const tfenc_weights *weights, int n_parts,
                            const char *const *weight_names, const char *const *bias_names,
                            int in_features, const tfenc_matrix_linear_options *options,
                            char *text, size_t size)
{
    char path[1024];
    size_t used = 0;
    for (int p = 0; p < n_parts && used < size; p++) {
        dataset_path(weights, weight_names[p], path, sizeof path);
        used += (size_t)snprintf(text + used, size - used, "%s%s", p ? "+" : "", path);
        if (bias_names != NULL && used < size)
            used += (size_t)snprintf(text + used, size - used, "&%s", bias_names[p]);
    }
    uint64_t ranges = 0;
    if (options->input_range != NULL) {
        ranges = 1469598103934665603ull; /* FNV-1a over the ranges' bytes */
        const unsigned char *bytes = (const unsigned char *)options->input_range;
        for (size_t i = 0; i < (size_t)in_features * sizeof(float); i++)
            ranges = (ranges ^ bytes[i]) * 1099511628211ull;
    }
    if (used < size)
        snprintf(text + used, size - used, " in %d %s%s%s smoothing %016llx", in_features,
                 tfenc_precision_names[options->precision],
                 options->precision == TFENC_PRECISION_FP32 ? " on " : "",
                 options->precision == TFENC_PRECISION_FP32
                     ? tfenc_fp32_products_names[options->fp32_products]
                     : "",
                 (unsigned long long)ranges);
}

static void release_linear(void *pointer)
{
    tfenc_matrix_linear_destroy(pointer);
}

static void release_plan(void *pointer)
{
    tfenc_matrix_matmul_destroy(pointer);
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
    /* How the map is made: precision, and for int8 the inputs' ranges the
     * fp32 calibration pass recorded (the same table on every rank). */
    tfenc_matrix_linear_options linear_options = {
        .precision = weights->options.precision,
        .fp32_products = weights->options.fp32_products};
    char key[1100];
    snprintf(key, sizeof key, "%s/%s:%d", strcmp(weights->group, "/") == 0 ? "" : weights->group,
             weight_names[0], n_parts);
    calibration *found = find_calibration(weights->store, key, in_features);
    if (weights->options.calibrate && linear_options.precision == TFENC_PRECISION_FP32) {
        if (found == NULL && (found = add_calibration(weights->store, key, in_features)) == NULL)
            return tfenc_error(weights->ctx, TFENC_ERR_NO_MEMORY, "weights: out of memory");
        linear_options.record_input_range = found->range;
    } else if (found != NULL && linear_options.precision == TFENC_PRECISION_INT8) {
        linear_options.input_range = found->range;
    } else if (linear_options.precision == TFENC_PRECISION_INT8 &&
               weights->store->calibration_origin != NULL) {
        return no_ranges(weights, key, in_features);
    }
    /* Shared by the node's ranks: one of them reads the file and converts;
     * the others find the map's memory filled. */
    tfenc_matrix_block block = {.has_bias = bias_names != NULL};
    int status = TFENC_OK;
    if (weights->store->arena != NULL) {
        char description[4096];
        describe_linear(weights, n_parts, weight_names, bias_names, in_features,
                        &linear_options, description, sizeof description);
        status = tfenc_matrix_linear_block_bytes(weights->ctx, &linear_options, total_out,
                                                 in_features, block.has_bias, &block.bytes);
        if (status == TFENC_OK)
            status = claim_shared(weights, description, block.bytes, &block.memory, &block.fill);
        if (status == TFENC_ERR_NOT_FOUND)
            block.memory = NULL; /* not shared: a copy of its own */
        else if (status != TFENC_OK)
            return status;
        status = TFENC_OK;
        if (block.memory != NULL)
            linear_options.block = &block;
    }
    const int read_file = block.memory == NULL || block.fill;
    float *weight = NULL, *bias = NULL;
    if (read_file) {
        weight = tfenc_aligned_alloc((size_t)total_out * (size_t)in_features * sizeof(float));
        bias = bias_names != NULL ? tfenc_aligned_alloc((size_t)total_out * sizeof(float)) : NULL;
        if (weight == NULL || (bias_names != NULL && bias == NULL))
            status = tfenc_error(weights->ctx, TFENC_ERR_NO_MEMORY, "weights: out of memory");
    }
    size_t row = 0;
    for (int p = 0; read_file && status == TFENC_OK && p < n_parts; p++) {
        status = read_into(weights, weight_names[p], &weight_shapes[p],
                           weight + row * (size_t)in_features);
        if (status == TFENC_OK && bias_names != NULL)
            status = read_into(weights, bias_names[p], &bias_shapes[p], bias + row);
        row += (size_t)weight_shapes[p].dims[0];
    }
    tfenc_linear *linear = NULL;
    if (status == TFENC_OK) {
        /* The backend takes the weight over (and frees it on failure). */
        status = tfenc_matrix_linear_create(weights->ctx, &linear_options, weight, bias, total_out,
                                            in_features, weights->store->scratch, &linear);
        weight = NULL;
    }
    if (block.memory != NULL && block.fill)
        finish_shared(weights, block.memory, status);
    tfenc_aligned_free(weight);
    tfenc_aligned_free(bias);
    if (status != TFENC_OK)
        return status;
    if (keep(weights, linear, release_linear) != TFENC_OK)
        return tfenc_error(weights->ctx, TFENC_ERR_NO_MEMORY, "weights: out of memory");
    if (out_features != NULL)
        *out_features = total_out;
    weights->store->products++;
    *linear_out = linear;
    return TFENC_OK;
}

int tfenc_matmul_plan_create(tfenc_weights *weights, const tfenc_matmul_shape *largest,
                             tfenc_matmul_plan **plan_out)
{
    *plan_out = NULL;
    tfenc_matmul_plan *plan = NULL;
    int status = tfenc_matrix_matmul_create(weights->ctx, weights->options.precision, largest,
                                            weights->store->scratch, &plan);
    if (status != TFENC_OK)
        return status;
    if (keep(weights, plan, release_plan) != TFENC_OK)
        return tfenc_error(weights->ctx, TFENC_ERR_NO_MEMORY, "weights: out of memory");
    weights->store->products++;
    *plan_out = plan;
    return TFENC_OK;
}
