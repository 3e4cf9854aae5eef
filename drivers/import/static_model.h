/* model2vec (static-embedding) folders: no encoder, a table averaged. */
#ifndef TFENC_IMPORT_STATIC_MODEL_H
#define TFENC_IMPORT_STATIC_MODEL_H

#include <stdio.h>

#include "importer.h"

/* The job's microbatches: a static model's per-token cost is a lookup, so
 * large ones keep the cost per microbatch small beside the tokenizer's. */
#define STATIC_BATCH_TOKENS 16384

/* *found = 1 when the folder's config.json is model2vec's (model_type
 * "model2vec", or architectures naming StaticModel). */
int import_detect_static_model(importer *self, int *found);

/* Reads the whole folder (config.json, tokenizer.json, model.safetensors)
 * into self: the config, the tokenizer, and a plan of the weights file's
 * static/token_embeddings and static/token_weights. A missing file or
 * tensor, embeddings whose rows disagree with the tokenizer's ids, a mapping
 * or weights of another length, is refused in one line naming the file and
 * the tensor. */
int import_read_static_model(importer *self);

/* The job's sections: [job], [model], [tokenizer] and the one layer. */
void import_write_static_job(const importer *self, FILE *out, const char *weights_relative);

#endif
