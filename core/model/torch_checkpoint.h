/* Reader for the pytorch_model.bin files torch.save writes: a zip archive
 * holding ARCHIVE/data.pkl, a pickle of the state dict, and one entry
 * ARCHIVE/data/KEY per tensor storage (PyTorch 1.6 and later); or, in the
 * legacy format, five pickles in a row (the last two the state dict and its
 * storage keys) followed by the storages.
 *
 * Python's pickle runs whatever code a file names; this reader runs none.
 * It interprets only what a state dict needs, the subset that
 * torch.load(weights_only=True) accepts: the opcodes that build strings,
 * numbers, tuples, lists and dicts, the memo, the storages' persistent ids,
 * and four kinds of global: collections.OrderedDict,
 * torch._utils._rebuild_tensor_v2, torch._utils._rebuild_parameter and the
 * torch.*Storage types. Any other opcode or global is refused in one line
 * naming the file, the opcode and its byte. The pickle is untrusted input (a
 * fuzzer targets tfenc_torch_parse_pickle): every count, offset and shape
 * is checked before a byte of a storage is read, and tensors are read one at
 * a time from their storage entries, never the archive whole. */
#ifndef TFENC_TORCH_CHECKPOINT_H
#define TFENC_TORCH_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "tfenc/plugin.h"
#include "model/safetensors.h"

/* A data.pkl above this is refused before it is read: a state dict's
 * pickle takes ~100 bytes per tensor, so real ones stay below a few MB. */
#define TFENC_TORCH_MAX_PICKLE (256u * 1024u * 1024u)

typedef struct tfenc_torch_file tfenc_torch_file;

typedef struct tfenc_torch_tensor {
    const char *name;         /* the state dict's key */
    const char *dtype;        /* in safetensors' spelling: F32, F16, BF16, I64, ... */
    int element_size;         /* bytes per element */
    int rank;
    int64_t dims[TFENC_SAFETENSORS_MAX_RANK];
    int64_t n_elements;       /* product of dims (1 for rank 0) */
    const char *storage;      /* the storage's key: its bytes are ARCHIVE/data/KEY */
    int64_t storage_elements; /* the storage's size, as the pickle declares it */
    int64_t offset;           /* elements of the storage before the tensor's first */
} tfenc_torch_tensor;

/* Opens `path`, finds data.pkl in the archive (or the pickles of the
 * legacy format), interprets it and checks every tensor against its
 * storage. The file stays open for tfenc_torch_read_float32(). */
int tfenc_torch_open(tfenc_context *ctx, const char *path, tfenc_torch_file **file);

/* 1 when the file at `path` begins as torch.save's files do (a zip
 * archive, or the legacy format's pickled magic number). */
int tfenc_torch_recognize(const char *path);

/* Interprets a pickle already in memory (`length` bytes; `name` is used in
 * messages). The result has no archive to read from; it serves tests and
 * fuzzing. */
int tfenc_torch_parse_pickle(tfenc_context *ctx, const char *name, const unsigned char *pickle,
                             size_t length, tfenc_torch_file **file);

/* Number of tensors, and tensor `index` (0 <= index < count) in the state
 * dict's order. */
int tfenc_torch_count(const tfenc_torch_file *file);
const tfenc_torch_tensor *tfenc_torch_tensor_at(const tfenc_torch_file *file, int index);

/* The path the file was opened with (or the name a pickle was parsed as). */
const char *tfenc_torch_name(const tfenc_torch_file *file);

/* Reads `tensor` (F32, F16 or BF16) into `out` as float32: n_elements
 * values, row-major. Other dtypes fail with TFENC_ERR_WEIGHTS naming it. */
int tfenc_torch_read_float32(tfenc_context *ctx, const tfenc_torch_file *file,
                             const tfenc_torch_tensor *tensor, float *out);

void tfenc_torch_close(tfenc_torch_file *file);

#endif
