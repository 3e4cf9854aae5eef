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

/* "[2, 3]": a tensor's shape as the importer's messages write it. */
void import_format_shape(char *text, size_t size, int rank, const int64_t *dims);

#endif
