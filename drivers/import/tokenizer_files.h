/* Reads the tokenizer of a model folder into the importer. */
#ifndef TFENC_IMPORT_TOKENIZER_FILES_H
#define TFENC_IMPORT_TOKENIZER_FILES_H

#include "importer.h"

/* Sets self->max_length (the position table, cut by tokenizer_config.json's
 * model_max_length and sentence_bert_config.json's max_seq_length) and, when
 * the folder has a vocab.txt, self->tokenizer; without one, self->warning.
 * Needs the model's config read first. */
int import_read_tokenizer(importer *self);

#endif
