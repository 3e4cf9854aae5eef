/* A model's tensors as a checkpoint ships them: one .safetensors file, the
 * shards a model.safetensors.index.json (or pytorch_model.bin.index.json)
 * lists, or a pytorch_model.bin that torch.save wrote. Each file is
 * validated when opened (safetensors.h, torch_checkpoint.h), the index
 * against its shards; tensors are then read one at a time by offset, so
 * that the weights are never in memory whole. */
#ifndef TFENC_CHECKPOINT_H
#define TFENC_CHECKPOINT_H

#include <stdint.h>

#include "tfenc/plugin.h"
#include "model/safetensors.h"

typedef struct tfenc_checkpoint tfenc_checkpoint;

typedef struct tfenc_checkpoint_tensor {
    const char *name;        /* as the model loads it: stored_name, or its new name after
                              * tfenc_checkpoint_rename() */
    const char *stored_name; /* as the file names it */
    const char *dtype;       /* safetensors' spelling: F32, F16, BF16, I64, ... */
    int element_size;
    int rank;
    int64_t dims[TFENC_SAFETENSORS_MAX_RANK];
    int64_t n_elements;
    const char *file;        /* the path of the file holding its bytes */
} tfenc_checkpoint_tensor;

/* One file, by its content: a zip archive or torch.save's legacy pickle is
 * read as torch.save's (torch_checkpoint.h), anything else as safetensors. */
int tfenc_checkpoint_open(tfenc_context *ctx, const char *path, tfenc_checkpoint **checkpoint);

/* The shards an index lists ({"weight_map": {tensor: shard file name}}),
 * each file beside the index. A shard that is missing, a tensor the index
 * lists but its shard lacks, a tensor a shard holds that the index assigns
 * elsewhere or not at all, and a shard name that leaves the index's folder
 * are refused in one line naming the file and the tensor. */
int tfenc_checkpoint_open_index(tfenc_context *ctx, const char *index_path,
                                tfenc_checkpoint **checkpoint);

/* The path it was opened with (the index for a sharded checkpoint), and
 * how many files its tensors come from. */
const char *tfenc_checkpoint_name(const tfenc_checkpoint *checkpoint);
int tfenc_checkpoint_file_count(const tfenc_checkpoint *checkpoint);

/* Number of tensors, tensor `index` (0 <= index < count), and the tensor
 * a model loads as `name` (NULL when none does). */
int tfenc_checkpoint_count(const tfenc_checkpoint *checkpoint);
const tfenc_checkpoint_tensor *tfenc_checkpoint_tensor_at(const tfenc_checkpoint *checkpoint,
                                                          int index);
const tfenc_checkpoint_tensor *tfenc_checkpoint_find(const tfenc_checkpoint *checkpoint,
                                                     const char *name);

/* Gives tensor `index` the name a loader gives it (transformers renames
 * legacy names on load); refused, naming both, when another tensor already
 * loads under that name. */
int tfenc_checkpoint_rename(tfenc_context *ctx, tfenc_checkpoint *checkpoint, int index,
                            const char *name);

/* Reads `tensor` (F32, F16 or BF16) into `out` as float32: n_elements
 * values, row-major. */
int tfenc_checkpoint_read_float32(tfenc_context *ctx, const tfenc_checkpoint *checkpoint,
                                  const tfenc_checkpoint_tensor *tensor, float *out);

void tfenc_checkpoint_close(tfenc_checkpoint *checkpoint);

#endif
