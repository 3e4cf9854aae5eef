/* ColBERT folders: the checkpoint colbert-ai saves (HF_ColBERT) with its
 * artifact.metadata, and PyLate's sentence-transformers folders. */
#ifndef TFENC_IMPORT_COLBERT_H
#define TFENC_IMPORT_COLBERT_H

#include "importer.h"

/* When config.json's architectures names HF_ColBERT, or artifact.metadata
 * is present: the multi-vector settings from artifact.metadata (markers,
 * lengths, mask_punctuation, dim), so that the projection `linear.weight`
 * is planned beside the encoder. Else nothing. */
int import_read_colbert(importer *self);

/* A PyLate folder (modules.json: Transformer, Dense): the Dense module's
 * config.json and model.safetensors (opened as self->dense_weights) and
 * config_sentence_transformers.json's prefixes, lengths and skiplist. Does
 * nothing when the folder has no Dense module. */
int import_read_pylate(importer *self);

/* The markers against the tokenizer the weights file will store (read by
 * import_read_tokenizer): every job puts one after [CLS], so a marker the
 * tokenizer lacks (PyLate's "[Q]" with a tokenizer that never had it
 * added) is refused here, naming the tokenizer's file and the marker,
 * rather than by each job. Nothing for other models. */
int import_check_markers(importer *self);

#endif
