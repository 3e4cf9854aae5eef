/* The tensor map: checkpoint names -> weights file datasets. */
#ifndef TFENC_IMPORT_TENSOR_MAP_H
#define TFENC_IMPORT_TENSOR_MAP_H

#include "importer.h"

/* Opens the weights of transformer_dir (model.safetensors, its shards, or
 * pytorch_model.bin: import_open_checkpoint), gives their tensors the names
 * transformers loads them as, and fills self->plan with every tensor the
 * model needs, checked for presence, shape and dtype, and
 * self->n_parameters. */
int import_open_weights(importer *self);

/* Appends to self->plan the tensor `source` of `file` (a file beside the
 * model's: a Dense module's, a BGE-M3 head's .pt), written as `target` of
 * shape [rows] (rank 1) or [rows, columns]; check_tensor checks it with
 * the others. TFENC_ERR_INTERNAL past capacity. */
int import_plan_add(importer *self, int capacity, const tfenc_checkpoint *file,
                    const char *source, const char *target, int rank, int64_t rows,
                    int64_t columns, tensor_plan **added);

/* "[2, 3]": a tensor's shape as the importer's messages write it. */
void import_format_shape(char *text, size_t size, int rank, const int64_t *dims);

#endif
