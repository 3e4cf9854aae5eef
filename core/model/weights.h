/* Weight stores: where layers' tensors come from (an HDF5 file, or a table
 * in memory for tests), converted to float32 and shape-checked. What a layer
 * loads belongs to the group handle it loaded through, and lives until that
 * handle is released (the model does so after the layer's destroy()). */
#ifndef TFENC_WEIGHTS_H
#define TFENC_WEIGHTS_H

#include "base/precision.h"
#include "tfenc/plugin.h"

typedef struct tfenc_weight_store tfenc_weight_store;

/* How what a layer loads is kept: the precision its linear maps and
 * activation products run in (a job's [model] precision, or the accuracy
 * gate's choice for the layer). */
typedef struct tfenc_weight_options {
    tfenc_precision precision;
    /* fp32 linear maps record the range of each input channel in the
     * store's calibration table (the int8 accuracy gate's reference pass);
     * int8 maps read it back to smooth their inputs (core/matrix/matrix.h). */
    int calibrate;
    /* The library of the fp32 linear maps ([model] fp32_products). */
    tfenc_fp32_products fp32_products;
} tfenc_weight_options;

/* Opens an HDF5 weights file read-only (each rank opens it independently). */
int tfenc_weight_store_open(tfenc_context *ctx, const char *path, tfenc_weight_store **store);
/* An empty in-memory store; fill it with tfenc_weight_store_add(). */
int tfenc_weight_store_create_memory(tfenc_context *ctx, tfenc_weight_store **store);
/* Copies a float32 tensor into an in-memory store under its full path,
 * e.g. "/encoder/0/attention/q_weight". */
int tfenc_weight_store_add(tfenc_context *ctx, tfenc_weight_store *store, const char *path,
                           int rank, const int64_t *dims, const float *data);
/* Closes the file and frees the in-memory tensors; releases any group handle
 * still open (with what was loaded through it). */
void tfenc_weight_store_close(tfenc_weight_store *store);
/* From now on the datasets of group `group` ("/head") and of the groups
 * inside it are read from the HDF5 file at `path`, where they lie under the
 * same group, and no longer from the store's own: a head beside its
 * encoder ([LAYER] weights_file), swapped without copying the encoder's
 * file. `setting` names the job key in errors ("[head] weights_file"):
 * a file that is missing or not HDF5 fails here; a dataset missing from it,
 * or of another shape than the layer's, when the layer loads it, naming the
 * file and the dataset. Before any group handle of `group` is taken. */
int tfenc_weight_store_attach(tfenc_context *ctx, tfenc_weight_store *store, const char *group,
                              const char *path, const char *setting);
/* The file path, or "(memory)". */
const char *tfenc_weight_store_name(const tfenc_weight_store *store);
/* Linear maps and product plans made through the store's handles so far
 * (a model with none, such as a static embedding's lookup, runs the same
 * whichever library would run its fp32 products). */
long tfenc_weight_store_products(const tfenc_weight_store *store);

/* From now on, what is loaded through the store is kept once per node in
 * `arena` (core/ranks/node_arena.h), in the form the layers use it (float32
 * tensors; linear maps as the matrix backend packs them): the first rank
 * of the node to load a tensor reads and converts it, the others map its
 * copy. NULL: every rank keeps its own. The arena must outlive the
 * store's handles. */
typedef struct tfenc_node_arena tfenc_node_arena;
void tfenc_weight_store_share(tfenc_weight_store *store, tfenc_node_arena *arena);
/* Bytes of every dataset of the store as float32 (plus alignment): what an
 * arena needs to hold the whole model in its largest form. */
size_t tfenc_weight_store_float32_bytes(const tfenc_weight_store *store);

/* 1 when the store holds group `group` ("/encoder/6"), else 0. */
int tfenc_weight_store_has_group(const tfenc_weight_store *store, const char *group);

/* The calibration table (input ranges per linear map, for int8) as bytes,
 * so that the rank that calibrated can give it to the others: export
 * allocates *bytes (free() it); import replaces the table. */
int tfenc_weight_store_calibration_export(tfenc_context *ctx, const tfenc_weight_store *store,
                                          void **bytes, size_t *size);
int tfenc_weight_store_calibration_import(tfenc_context *ctx, tfenc_weight_store *store,
                                          const void *bytes, size_t size);
/* The table's entry i, for a file to record it: the map's key (its first
 * weight dataset and number of parts, "/encoder/0/ffn/in_weight:1"), its
 * input channels and their ranges. 0 past the last entry. */
int tfenc_weight_store_calibration_entry(const tfenc_weight_store *store, int i,
                                         const char **key, int *in, const float **range);
/* Sets a map's input ranges, as a recorded calibration gives them. */
int tfenc_weight_store_calibration_set(tfenc_context *ctx, tfenc_weight_store *store,
                                       const char *key, int in, const float *range);
/* From now on the table is the model's calibration: an int8 map it holds
 * no ranges for (or ranges of another width) is refused in one line naming
 * `origin` (where the table came from, "[model] calibration FILE") and the
 * map, rather than made without smoothing. Before, such a map is made
 * without (no calibration exists yet: the gate's trial runs). */
int tfenc_weight_store_calibration_fix(tfenc_context *ctx, tfenc_weight_store *store,
                                       const char *origin);

/* A handle on one group ("/encoder/3/attention"), for a layer's init; it
 * carries the context in which errors are reported and the options (NULL:
 * fp32) of what is loaded through it. The caller releases it with
 * tfenc_weights_release() once nothing loaded through it is used. */
int tfenc_weight_store_group(tfenc_context *ctx, tfenc_weight_store *store, const char *group,
                             const tfenc_weight_options *options, tfenc_weights **weights);
/* Frees the handle and every tensor and linear map loaded through it. */
void tfenc_weights_release(tfenc_weights *weights);

#endif
