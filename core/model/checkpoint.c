/* A checkpoint's tensors from one or several files: safetensors files, the
 * shards of an index (checked against it with jansson), torch.save's zip. */
#include "model/checkpoint.h"
#include "model/torch_checkpoint.h"
#include "base/files.h"
#include "base/growth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* An index lists one line per tensor: real ones stay below a few MB. */
#define MAX_INDEX_BYTES ((size_t)64 << 20)

/* One file of the checkpoint, read by the reader of its format. */
typedef struct source {
    tfenc_safetensors *safetensors;
    tfenc_torch_file *torch;
} source;

struct tfenc_checkpoint {
    char *name;
    source *sources;
    int n_sources;
    tfenc_checkpoint_tensor *tensors;
    int *source_of;   /* [n_tensors]: which source holds it */
    int *index_in_source;
    char **new_names; /* [n_tensors]: the name after a rename (owned), or NULL */
    int n_tensors, capacity;
};

static int out_of_memory(tfenc_context *ctx, const char *name)
{
    return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", name);
}

static int reserve_tensors(tfenc_context *ctx, tfenc_checkpoint *checkpoint, int more)
{
    int needed = checkpoint->n_tensors + more;
    if (needed <= checkpoint->capacity)
        return TFENC_OK;
    const int64_t capacity = tfenc_grown_capacity(checkpoint->capacity, needed, 64, INT32_MAX);
    int grew = 1; /* a capacity of -1 (too many) fails each growth */
    TFENC_GROW_ARRAY(checkpoint->tensors, capacity, grew);
    TFENC_GROW_ARRAY(checkpoint->source_of, capacity, grew);
    TFENC_GROW_ARRAY(checkpoint->index_in_source, capacity, grew);
    TFENC_GROW_ARRAY(checkpoint->new_names, capacity, grew);
    if (!grew)
        return out_of_memory(ctx, checkpoint->name);
    checkpoint->capacity = (int)capacity;
    return TFENC_OK;
}

static void add_tensor(tfenc_checkpoint *checkpoint, int source_index, int index,
                       tfenc_checkpoint_tensor tensor)
{
    int i = checkpoint->n_tensors++;
    checkpoint->tensors[i] = tensor;
    checkpoint->source_of[i] = source_index;
    checkpoint->index_in_source[i] = index;
    checkpoint->new_names[i] = NULL;
}

/* torch.save's files by their first bytes, or a .bin that is not one (for
 * the torch reader to refuse it as such); anything else is safetensors. */
static int is_torch_file(const char *path)
{
    size_t length = strlen(path);
    return tfenc_torch_recognize(path) || (length > 4 && strcmp(path + length - 4, ".bin") == 0);
}

/* Opens one file and appends its tensors; *source_index is its number. */
static int add_file(tfenc_context *ctx, tfenc_checkpoint *checkpoint, const char *path,
                    int *source_index)
{
    source *sources = realloc(checkpoint->sources,
                              ((size_t)checkpoint->n_sources + 1) * sizeof *sources);
    if (sources == NULL)
        return out_of_memory(ctx, path);
    checkpoint->sources = sources;
    source *file = &sources[checkpoint->n_sources];
    *file = (source){0};
    int status = is_torch_file(path) ? tfenc_torch_open(ctx, path, &file->torch)
                                     : tfenc_safetensors_open(ctx, path, &file->safetensors);
    if (status != TFENC_OK)
        return status;
    *source_index = checkpoint->n_sources++;
    int count = file->torch != NULL ? tfenc_torch_count(file->torch)
                                    : tfenc_safetensors_count(file->safetensors);
    if ((status = reserve_tensors(ctx, checkpoint, count)) != TFENC_OK)
        return status;
    for (int i = 0; i < count; i++) {
        tfenc_checkpoint_tensor tensor = {0};
        if (file->torch != NULL) {
            const tfenc_torch_tensor *t = tfenc_torch_tensor_at(file->torch, i);
            tensor = (tfenc_checkpoint_tensor){t->name, t->name, t->dtype, t->element_size,
                                               t->rank, {0}, t->n_elements, NULL};
            memcpy(tensor.dims, t->dims, sizeof tensor.dims);
        } else {
            const tfenc_safetensors_tensor *t = tfenc_safetensors_tensor_at(file->safetensors, i);
            tensor = (tfenc_checkpoint_tensor){t->name, t->name, t->dtype, t->element_size,
                                               t->rank, {0}, t->n_elements, NULL};
            memcpy(tensor.dims, t->dims, sizeof tensor.dims);
        }
        tensor.file = file->torch != NULL ? tfenc_torch_name(file->torch)
                                          : tfenc_safetensors_name(file->safetensors);
        add_tensor(checkpoint, *source_index, i, tensor);
    }
    return TFENC_OK;
}

static tfenc_checkpoint *new_checkpoint(tfenc_context *ctx, const char *name)
{
    tfenc_checkpoint *checkpoint = calloc(1, sizeof *checkpoint);
    if (checkpoint == NULL || (checkpoint->name = strdup(name)) == NULL) {
        free(checkpoint);
        out_of_memory(ctx, name);
        return NULL;
    }
    return checkpoint;
}

int tfenc_checkpoint_open(tfenc_context *ctx, const char *path, tfenc_checkpoint **checkpoint)
{
    *checkpoint = new_checkpoint(ctx, path);
    if (*checkpoint == NULL)
        return TFENC_ERR_NO_MEMORY;
    int source_index;
    int status = add_file(ctx, *checkpoint, path, &source_index);
    if (status != TFENC_OK) {
        tfenc_checkpoint_close(*checkpoint);
        *checkpoint = NULL;
    }
    return status;
}

/* A shard's name from the index: a file beside it, nothing that leads
 * elsewhere (the index is as untrusted as the shards). */
static int plain_file_name(const char *name)
{
    return name[0] != '\0' && strchr(name, '/') == NULL && strcmp(name, ".") != 0
           && strcmp(name, "..") != 0;
}

static char *shard_path_of(const char *index_path, const char *shard);

/* Every tensor of the shard `shard` (just opened, its tensors from `first`
 * on) must be one the index assigns to it. */
static int check_shard(tfenc_context *ctx, tfenc_checkpoint *checkpoint, const char *index_path,
                       json_t *weight_map, const char *shard, const char *shard_path, int first)
{
    for (int i = first; i < checkpoint->n_tensors; i++) {
        const char *name = checkpoint->tensors[i].stored_name;
        const char *assigned = json_string_value(json_object_get(weight_map, name));
        if (assigned == NULL)
            return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: holds tensor '%s', which %s does "
                               "not list (shards and index disagree)", shard_path, name,
                               index_path);
        if (strcmp(assigned, shard) != 0)
            return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: holds tensor '%s', which %s assigns "
                               "to %s (shards and index disagree)", shard_path, name,
                               index_path, assigned);
    }
    return TFENC_OK;
}

/* Once every shard holds only what the index assigns to it: every tensor
 * the index lists must be in its shard. */
static int check_index_complete(tfenc_context *ctx, const tfenc_checkpoint *checkpoint,
                                const char *index_path, json_t *weight_map)
{
    if ((size_t)checkpoint->n_tensors == json_object_size(weight_map))
        return TFENC_OK;
    const char *name;
    json_t *value;
    json_object_foreach(weight_map, name, value) {
        int found = 0;
        for (int i = 0; i < checkpoint->n_tensors && !found; i++)
            found = strcmp(checkpoint->tensors[i].stored_name, name) == 0;
        if (!found) {
            char *shard_path = shard_path_of(index_path, json_string_value(value));
            int status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: tensor '%s' is not in it, "
                                     "though %s lists it there (incomplete or mismatched "
                                     "shard?)", shard_path != NULL ? shard_path
                                     : json_string_value(value), name, index_path);
            free(shard_path);
            return status;
        }
    }
    return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: shards and index disagree", index_path);
}

/* The folder of the index, where its shards are. */
static char *shard_path_of(const char *index_path, const char *shard)
{
    const char *slash = strrchr(index_path, '/');
    int folder = slash != NULL ? (int)(slash - index_path + 1) : 0;
    char *path = NULL;
    if (asprintf(&path, "%.*s%s", folder, index_path, shard) < 0)
        return NULL;
    return path;
}

static int read_index(tfenc_context *ctx, const char *index_path, json_t **weight_map,
                      json_t **index)
{
    char *text = NULL;
    size_t size = 0;
    int status = tfenc_file_read_all(ctx, "checkpoint index", index_path, MAX_INDEX_BYTES, &text,
                                     &size);
    if (status != TFENC_OK)
        return status;
    json_error_t error;
    *index = json_loadb(text, size, JSON_REJECT_DUPLICATES, &error);
    free(text);
    if (*index == NULL)
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: not valid JSON: %s at line %d",
                           index_path, error.text, error.line);
    *weight_map = json_object_get(*index, "weight_map");
    if (!json_is_object(*weight_map) || json_object_size(*weight_map) == 0)
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: \"weight_map\" must be an object of "
                           "tensor names and shard file names", index_path);
    const char *name;
    json_t *value;
    json_object_foreach(*weight_map, name, value) {
        if (!json_is_string(value) || !plain_file_name(json_string_value(value)))
            return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: \"weight_map\": tensor '%s' must "
                               "name a shard file beside the index", index_path, name);
    }
    return TFENC_OK;
}

int tfenc_checkpoint_open_index(tfenc_context *ctx, const char *index_path,
                                tfenc_checkpoint **checkpoint)
{
    json_t *index = NULL, *weight_map = NULL;
    json_t *opened = json_object(); /* shard names already read */
    char *shard_path = NULL;
    *checkpoint = new_checkpoint(ctx, index_path);
    int status = *checkpoint == NULL ? TFENC_ERR_NO_MEMORY
                 : opened == NULL    ? out_of_memory(ctx, index_path)
                                     : read_index(ctx, index_path, &weight_map, &index);
    const char *name;
    json_t *value;
    if (status == TFENC_OK) {
        json_object_foreach(weight_map, name, value) {
            const char *shard = json_string_value(value);
            if (json_object_get(opened, shard) != NULL)
                continue;
            if ((shard_path = shard_path_of(index_path, shard)) == NULL) {
                status = out_of_memory(ctx, index_path);
                break;
            }
            if (!tfenc_file_present(shard_path)) {
                status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: shard %s, which holds tensor "
                                     "'%s', is missing (%s not found)", index_path, shard, name,
                                     shard_path);
                break;
            }
            int first = (*checkpoint)->n_tensors, source_index;
            if ((status = add_file(ctx, *checkpoint, shard_path, &source_index)) != TFENC_OK
                || (status = check_shard(ctx, *checkpoint, index_path, weight_map, shard,
                                         shard_path, first)) != TFENC_OK)
                break;
            if (json_object_set_new(opened, shard, json_true()) != 0) {
                status = out_of_memory(ctx, index_path);
                break;
            }
            free(shard_path);
            shard_path = NULL;
        }
    }
    if (status == TFENC_OK)
        status = check_index_complete(ctx, *checkpoint, index_path, weight_map);
    free(shard_path);
    json_decref(opened);
    json_decref(index);
    if (status != TFENC_OK) {
        tfenc_checkpoint_close(*checkpoint);
        *checkpoint = NULL;
    }
    return status;
}

const char *tfenc_checkpoint_name(const tfenc_checkpoint *checkpoint)
{
    return checkpoint->name;
}

int tfenc_checkpoint_file_count(const tfenc_checkpoint *checkpoint)
{
    return checkpoint->n_sources;
}

int tfenc_checkpoint_count(const tfenc_checkpoint *checkpoint)
{
    return checkpoint->n_tensors;
}

const tfenc_checkpoint_tensor *tfenc_checkpoint_tensor_at(const tfenc_checkpoint *checkpoint,
                                                          int index)
{
    if (index < 0 || index >= checkpoint->n_tensors)
        return NULL;
    return &checkpoint->tensors[index];
}

const tfenc_checkpoint_tensor *tfenc_checkpoint_find(const tfenc_checkpoint *checkpoint,
                                                     const char *name)
{
    for (int i = 0; i < checkpoint->n_tensors; i++)
        if (strcmp(checkpoint->tensors[i].name, name) == 0)
            return &checkpoint->tensors[i];
    return NULL;
}

int tfenc_checkpoint_rename(tfenc_context *ctx, tfenc_checkpoint *checkpoint, int index,
                            const char *name)
{
    if (index < 0 || index >= checkpoint->n_tensors)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: no tensor %d to rename",
                           checkpoint->name, index);
    tfenc_checkpoint_tensor *tensor = &checkpoint->tensors[index];
    const tfenc_checkpoint_tensor *other = tfenc_checkpoint_find(checkpoint, name);
    if (other != NULL && other != tensor)
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: tensors '%s' and '%s' both load as "
                           "'%s'", tensor->file, other->stored_name, tensor->stored_name, name);
    char *copy = strdup(name);
    if (copy == NULL)
        return out_of_memory(ctx, checkpoint->name);
    free(checkpoint->new_names[index]);
    checkpoint->new_names[index] = copy;
    tensor->name = copy;
    return TFENC_OK;
}

int tfenc_checkpoint_read_float32(tfenc_context *ctx, const tfenc_checkpoint *checkpoint,
                                  const tfenc_checkpoint_tensor *tensor, float *out)
{
    int i = (int)(tensor - checkpoint->tensors);
    const source *file = &checkpoint->sources[checkpoint->source_of[i]];
    int index = checkpoint->index_in_source[i];
    if (file->torch != NULL)
        return tfenc_torch_read_float32(ctx, file->torch, tfenc_torch_tensor_at(file->torch, index),
                                        out);
    return tfenc_safetensors_read_float32(ctx, file->safetensors,
                                          tfenc_safetensors_tensor_at(file->safetensors, index),
                                          out);
}

void tfenc_checkpoint_close(tfenc_checkpoint *checkpoint)
{
    if (checkpoint == NULL)
        return;
    for (int i = 0; i < checkpoint->n_sources; i++) {
        tfenc_safetensors_close(checkpoint->sources[i].safetensors);
        tfenc_torch_close(checkpoint->sources[i].torch);
    }
    for (int i = 0; i < checkpoint->n_tensors; i++)
        free(checkpoint->new_names[i]);
    free(checkpoint->sources);
    free(checkpoint->tensors);
    free(checkpoint->source_of);
    free(checkpoint->index_in_source);
    free(checkpoint->new_names);
    free(checkpoint->name);
    free(checkpoint);
}
