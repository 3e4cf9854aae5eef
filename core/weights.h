/* Weight stores: where layers' tensors come from (an HDF5 file, or a table
 * in memory for tests), converted to float32, shape-checked and owned here
 * until the model is destroyed. */
#ifndef TFENC_WEIGHTS_H
#define TFENC_WEIGHTS_H

#include "tfenc/plugin.h"

typedef struct tfenc_weight_store tfenc_weight_store;

/* Opens an HDF5 weights file read-only (each rank opens it independently). */
int tfenc_weight_store_open(tfenc_context *ctx, const char *path, tfenc_weight_store **store);
/* An empty in-memory store; fill it with tfenc_weight_store_add(). */
int tfenc_weight_store_create_memory(tfenc_context *ctx, tfenc_weight_store **store);
/* Copies a float32 tensor into an in-memory store under its full path,
 * e.g. "/encoder/0/attention/q_weight". */
int tfenc_weight_store_add(tfenc_context *ctx, tfenc_weight_store *store, const char *path,
                           int rank, const int64_t *dims, const float *data);
/* Frees every tensor, linear map and group handle of the store. */
void tfenc_weight_store_close(tfenc_weight_store *store);
/* The file path, or "(memory)". */
const char *tfenc_weight_store_name(const tfenc_weight_store *store);

/* 1 when the store holds group `group` ("/encoder/6"), else 0. */
int tfenc_weight_store_has_group(const tfenc_weight_store *store, const char *group);

/* A handle on one group ("/encoder/3/attention"), for a layer's init. The
 * store owns it; it carries the context in which errors are reported. */
int tfenc_weight_store_group(tfenc_context *ctx, tfenc_weight_store *store, const char *group,
                             tfenc_weights **weights);

#endif
