/* tfenc-export's Parquet interface in a build without Apache Arrow
 * (configure did not find it): the program still exists, and says in one
 * line what it lacks instead of writing anything. */
#include "export/parquet.h"

#define WITHOUT_ARROW                                                                            \
    "this tfenc was built without Apache Arrow's C++ Parquet library, which Parquet export "    \
    "needs (configure --with-parquet: README.md, Building and installing)"

const char *export_parquet_library(void)
{
    return NULL;
}

int export_parquet_create(tfenc_context *ctx, const char *path, const export_column *columns,
                          int n_columns, const char *const *keys, const char *const *values,
                          int n_metadata, export_parquet_file **file)
{
    (void)columns, (void)n_columns, (void)keys, (void)values, (void)n_metadata;
    *file = NULL;
    return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: %s", path, WITHOUT_ARROW);
}

int export_parquet_write(tfenc_context *ctx, export_parquet_file *file, int64_t n_rows,
                         const export_column_data *data)
{
    (void)file, (void)n_rows, (void)data;
    return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s", WITHOUT_ARROW);
}

int export_parquet_close(tfenc_context *ctx, export_parquet_file *file)
{
    (void)file;
    return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s", WITHOUT_ARROW);
}

void export_parquet_abandon(export_parquet_file *file)
{
    (void)file;
}
