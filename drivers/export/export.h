/* tfenc-export's work: a tfenc output file (drivers/export/output_reader.h)
 * written as Parquet files in a new directory, one row per finished
 * document, a block of documents per row group, at most rows_per_file rows
 * per file (docs/output.md, "Parquet"). All or nothing: the files are
 * written under hidden names and given theirs once every one is whole; on
 * an error what was written (and the directory, when this made it) is
 * removed. */
#ifndef TFENC_EXPORT_EXPORT_H
#define TFENC_EXPORT_EXPORT_H

#include <stdint.h>

#include "tfenc/plugin.h"

typedef struct export_options {
    const char *input;      /* the tfenc output file */
    const char *directory;  /* where the Parquet files go: new, or empty */
    int64_t rows_per_file;  /* > 0 */
    const char *output;     /* a file of several heads: the one to write (NULL: the first) */
} export_options;

typedef struct export_summary {
    int64_t rows;        /* documents written */
    int files;
    int64_t n_documents; /* the file's */
    int complete;        /* the file's `complete` */
    int64_t left_out;    /* finished documents whose rows' end the file does not record */
    char kind[16];       /* output kind */
} export_summary;

int export_to_parquet(tfenc_context *ctx, const export_options *options,
                      export_summary *summary);

#endif
