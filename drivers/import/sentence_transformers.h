/* Reads the sentence-transformers modules of a model folder (modules.json,
 * the Pooling config) into the importer. */
#ifndef TFENC_IMPORT_SENTENCE_TRANSFORMERS_H
#define TFENC_IMPORT_SENTENCE_TRANSFORMERS_H

#include "importer.h"

/* modules.json lists the sentence-transformers pipeline: Transformer,
 * Pooling, optionally two Dense modules, optional Normalize. Anything else
 * is refused. Sets
 * transformer_dir and pooling.normalize; the Pooling folder is returned in
 * *pooling_dir (malloc'ed; NULL when there is none). A folder without
 * modules.json is a plain Hugging Face model: nothing is set. */
int import_read_modules(importer *self, char **pooling_dir);

/* Reads `directory`/config.json of the Pooling module into self->pooling
 * (needs the model's config read first, for its width). */
int import_read_pooling(importer *self, const char *directory);

/* Reads the Dense modules' config.json and opens their model.safetensors
 * (needs the model's config read first, for its width); nothing when
 * modules.json named none. */
int import_read_dense(importer *self);

/* Reads the prompts of config_sentence_transformers.json (when the folder
 * has one) into self->pooling.prompts and default_prompt. */
int import_read_prompts(importer *self);

#endif
