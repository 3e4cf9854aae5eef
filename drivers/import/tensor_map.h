/* The tensor map: model.safetensors names -> weights file datasets. */
#ifndef TFENC_IMPORT_TENSOR_MAP_H
#define TFENC_IMPORT_TENSOR_MAP_H

#include "importer.h"

/* Opens transformer_dir/model.safetensors and fills self->plan with every
 * tensor the model needs, checked for presence, shape and dtype, and
 * self->n_parameters. A folder with only pytorch_model.bin or a sharded
 * checkpoint is refused with what to do instead. */
int import_open_weights(importer *self);

#endif
