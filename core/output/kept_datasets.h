/* The output's datasets of kept fields ([job] keep_fields, docs/output.md):
 * for each field NAME, beside `ids` at the root,
 *   NAME        [N]  its values: fixed-length NUL-padded UTF-8 strings as
 *                    long as the longest (as ids), int64, or float64
 *   NAME_valid  [N]  uint8: 1 where the record had a value, 0 where the
 *                    value was null or the record had no such field (and
 *                    for a document not written yet); NAME holds "", 0
 *                    or NaN there.
 * and the root attribute keep_fields names them, one a line, in the
 * job's order.
 * A mask rather than a sentinel value: strings have no null, and pandas
 * turns the pair into a nullable column with Series.where(valid).
 *
 * The values reach the writer in the string each document carries instead
 * of its bare id (base/kept_values.h: the id, then each field's value), and
 * are written with the document's metadata, before its length marks it
 * finished. The datasets are contiguous, allocated when created, so each
 * write goes to the disk in call order like the other metadata. Creating
 * and opening are collective over the file's writers; writing is
 * independent. Nothing here prints. */
#ifndef TFENC_KEPT_DATASETS_H
#define TFENC_KEPT_DATASETS_H

#include <stdint.h>

#include <hdf5.h>

#include "base/kept_values.h"
#include "tfenc/plugin.h"

#define TFENC_KEPT_FIELDS_ATTRIBUTE "keep_fields"

typedef struct tfenc_kept_datasets tfenc_kept_datasets;

/* Creates the datasets of `fields` (n > 0) for n_documents documents in
 * `file` (`path` names it in messages). */
int tfenc_kept_datasets_create(tfenc_context *ctx, hid_t file, const char *path,
                               const tfenc_kept_field *fields, int n, int64_t n_documents,
                               tfenc_kept_datasets **kept);

/* Opens them in a file being resumed: TFENC_ERR_CONFIG naming the dataset
 * when one is missing, of another type or shape, or holds strings shorter
 * than this run's longest. */
int tfenc_kept_datasets_open(tfenc_context *ctx, hid_t file, const char *path,
                             const tfenc_kept_field *fields, int n, int64_t n_documents,
                             tfenc_kept_datasets **kept);

/* Writes the values `carried[j]` holds (the text the feeder wrote) at
 * documents global_indices[j], and points ids[j] at each document's id
 * (NULL when it has none), valid until the next call. */
int tfenc_kept_datasets_write(tfenc_context *ctx, tfenc_kept_datasets *kept, hid_t transfer,
                              int64_t n_documents, const int64_t *global_indices,
                              const char *const *carried, const char **ids);

/* Closes the datasets; nonzero if HDF5 failed to. NULL is allowed. */
int tfenc_kept_datasets_close(tfenc_kept_datasets *kept);

#endif
