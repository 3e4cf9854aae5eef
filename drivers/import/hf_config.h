/* Reads a Hugging Face config.json into the importer's model_config. */
#ifndef TFENC_IMPORT_HF_CONFIG_H
#define TFENC_IMPORT_HF_CONFIG_H

#include "importer.h"

/* Reads transformer_dir/config.json; refuses what tfenc cannot run, in one
 * line naming the file and the key. */
int import_read_config(importer *self);

#endif
