/* ColBERT folders: the checkpoint colbert-ai saves (HF_ColBERT) with its
 * artifact.metadata. */
#ifndef TFENC_IMPORT_COLBERT_H
#define TFENC_IMPORT_COLBERT_H

#include "importer.h"

/* When config.json's architectures names HF_ColBERT, or artifact.metadata
 * is present: the multi-vector settings from artifact.metadata (markers,
 * lengths, mask_punctuation, dim), so that the projection `linear.weight`
 * is planned beside the encoder. Else nothing. */
int import_read_colbert(importer *self);

#endif
