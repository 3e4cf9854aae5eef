/* Writes the tfenc weights file of an import. */
#ifndef TFENC_IMPORT_WEIGHTS_WRITER_H
#define TFENC_IMPORT_WEIGHTS_WRITER_H

#include "importer.h"

/* Writes every tensor of self->plan (converted to self->dtype), the
 * tokenizer when present, and the attributes source, config_json,
 * importer_version and model_type into a new HDF5 file at `path`. */
int import_write_weights(importer *self, const char *path);

#endif
