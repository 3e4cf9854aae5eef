/* The Parquet files of tfenc-export, written through Apache Arrow's C++
 * Parquet library (parquet.cc, built when configure found Arrow), behind a
 * C interface so that the rest of the program stays C. Without Arrow,
 * parquet_none.c stands in: export_parquet_library() is NULL and every
 * other call fails saying so.
 *
 * A file is made of columns described once (export_column) and written a
 * block of rows at a time, each block one row group, from the caller's
 * buffers (export_column_data), which Arrow reads during the call only.
 * Every column is non-nullable (an exported row has every value) but the
 * scalar columns of kept fields ([job] keep_fields), whose nulls are
 * Arrow's nulls.
 * Statuses are tfenc's, with one line naming the file in the context. */
#ifndef TFENC_EXPORT_PARQUET_H
#define TFENC_EXPORT_PARQUET_H

#include <stddef.h>
#include <stdint.h>

#include "tfenc/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The values a column holds. */
typedef enum export_element {
    EXPORT_FLOAT32,
    EXPORT_INT8,
    EXPORT_UINT8,
    EXPORT_INT32,
    EXPORT_INT64,
    EXPORT_FLOAT64,
    EXPORT_STRING /* UTF-8 */
} export_element;

/* How a row's values are arranged. */
typedef enum export_shape {
    EXPORT_SCALAR,      /* one value */
    EXPORT_VECTOR,      /* fixed_size_list<element, width> */
    EXPORT_LIST,        /* list<element> */
    EXPORT_VECTOR_LIST, /* list<fixed_size_list<element, width>> */
    EXPORT_SPARSE       /* list<struct<index: int32, value: float>> */
} export_shape;

typedef struct export_column {
    const char *name;
    export_shape shape;
    export_element element; /* EXPORT_SPARSE: ignored */
    int64_t width;          /* EXPORT_VECTOR, EXPORT_VECTOR_LIST: values per vector */
    int nullable;           /* EXPORT_SCALAR only: rows may be null (valid[i] = 0) */
} export_column;

/* One block's values of a column, for n rows:
 *   SCALAR       values [n] (STRING: bytes, with offsets [n+1] into them)
 *   VECTOR       values [n * width]
 *   LIST         values [offsets[n]], row i values offsets[i] .. offsets[i+1]-1
 *   VECTOR_LIST  values [offsets[n] * width], row i vectors offsets[i] .. offsets[i+1]-1
 *   SPARSE       indices and values (float) [offsets[n]], as LIST
 * offsets start at 0 and never decrease. A nullable column's valid [n]
 * says which rows have a value (1) and which are null (0, whatever the
 * values hold there). */
typedef struct export_column_data {
    const void *values;
    const int64_t *offsets;
    const int32_t *indices;
    const uint8_t *valid;
} export_column_data;

typedef struct export_parquet_file export_parquet_file;

/* The library that writes the files, for --version ("Apache Arrow
 * 18.1.0"), or NULL when this build has none. */
const char *export_parquet_library(void);

/* Creates the file at `path` (replacing any) with these columns and the
 * schema's key-value metadata (keys[i] = values[i]). */
int export_parquet_create(tfenc_context *ctx, const char *path, const export_column *columns,
                          int n_columns, const char *const *keys, const char *const *values,
                          int n_metadata, export_parquet_file **file);

/* Writes n_rows rows (n_rows > 0) as one row group; data[c] is column c's. */
int export_parquet_write(tfenc_context *ctx, export_parquet_file *file, int64_t n_rows,
                         const export_column_data *data);

/* Writes the footer and closes the file; frees `file` whatever happens. */
int export_parquet_close(tfenc_context *ctx, export_parquet_file *file);

/* Closes without a footer (an error path; the caller removes the file).
 * NULL is allowed. */
void export_parquet_abandon(export_parquet_file *file);

#ifdef __cplusplus
}
#endif

#endif
