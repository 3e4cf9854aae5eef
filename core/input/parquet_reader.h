/* Parquet files read by row group through Apache Arrow's C++ Parquet
 * library (parquet_reader.cc, built only when configure finds Arrow:
 * --with-parquet). A C interface, so the rest of tfenc stays C: the reader
 * loads one row group's text (and pair and id) columns at a time, so a rank holds at
 * most one row group of one file.
 *
 * The text column must hold strings (string, large_string, or a dictionary
 * of them); the id column strings or integers. Statuses are tfenc's
 * (TFENC_OK, TFENC_ERR_INPUT for a file that is not Parquet, a missing or
 * mistyped column or a row group that cannot be decoded, TFENC_ERR_IO,
 * TFENC_ERR_NO_MEMORY), with the reason in `why` (no file name). */
#ifndef TFENC_PARQUET_READER_H
#define TFENC_PARQUET_READER_H

#include <stddef.h>
#include <stdint.h>

#include "base/kept_values.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tfenc_parquet tfenc_parquet;

/* pair_column (the second text of a pair, strings like the text) and
 * id_column may be NULL. keep_columns ([job] keep_fields, n_keep of
 * them) must each be in the schema and hold strings (or a dictionary of
 * them), signed integers, unsigned ones up to 32 bits, or floating-point
 * numbers: anything else (lists, structs, booleans, ...) is refused here. */
int tfenc_parquet_open(const char *path, const char *text_column, const char *pair_column,
                       const char *id_column, const char *const *keep_columns, int n_keep,
                       tfenc_parquet **reader, char *why, size_t why_size);
int64_t tfenc_parquet_rows(const tfenc_parquet *reader);
int tfenc_parquet_row_groups(const tfenc_parquet *reader);
int64_t tfenc_parquet_row_group_rows(const tfenc_parquet *reader, int group);
/* Loads row group `group`'s columns, replacing the one loaded before. */
int tfenc_parquet_load_row_group(tfenc_parquet *reader, int group, char *why, size_t why_size);
/* Row `row` (0-based, within the loaded group): *text is NULL for a null
 * value, else valid until the next load; *id is NULL without an id column
 * or for a null id. An integer id is given as its decimal text. */
void tfenc_parquet_row(tfenc_parquet *reader, int64_t row, const char **text, size_t *length,
                       const char **id, size_t *id_length);
/* Row `row`'s value of the pair column, as *text of tfenc_parquet_row()
 * (NULL for a null or without a pair column). */
void tfenc_parquet_pair_text(tfenc_parquet *reader, int64_t row, const char **text,
                             size_t *length);
/* Row `row`'s value of keep column k (a string's bytes valid until the
 * next load); NULL for a null. */
void tfenc_parquet_kept(tfenc_parquet *reader, int64_t row, int k, tfenc_kept_value *value);
void tfenc_parquet_close(tfenc_parquet *reader);

#ifdef __cplusplus
}
#endif

#endif
