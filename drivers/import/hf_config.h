/* Reads a Hugging Face config.json into the importer's model_config. */
#ifndef TFENC_IMPORT_HF_CONFIG_H
#define TFENC_IMPORT_HF_CONFIG_H

#include "importer.h"

/* Reads transformer_dir/config.json; refuses what tfenc cannot run, in one
 * line naming the file and the key. */
int import_read_config(importer *self);

/* Sparse output (self->sparse): the checkpoint's masked-LM head becomes the
 * job's splade head; a checkpoint without one (architectures names no
 * *ForMaskedLM of bert or distilbert) is refused in one line. Call after
 * import_read_config. */
int import_sparse_head(importer *self);

#endif
