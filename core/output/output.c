/* The HDF5 output writer: datasets created collectively from the job's
 * description (output_layout.c), rows written independently by each rank
 * at their documents' global indices (output_rows.c), the file marked
 * complete when the job finishes. */
#include "output/output.h"

#include "base/files.h"
#include "base/hdf5_attributes.h"
#include "base/hdf5_error.h"
#include "base/names.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <hdf5.h>
#include <jansson.h>

#include "config.h"
#include "base/context.h"
#include "base/float16.h"
#include "output/calibration.h"
#include "output/corpus_shards.h"
#include "output/output_internal.h"
#include "output/output_layout.h"
#include "output/quantize.h"


/* A disk that cannot hold the whole file is refused before any work: the
 * datasets are allocated at creation but their rows are only written as
 * documents finish, so without this check the job would run until the
 * disk fills. Every writer sees the same file system, hence the same answer. */
static int check_free_space(tfenc_context *ctx, const tfenc_output *out,
                            const tfenc_output_options *options)
{
    const double rows
        = tfenc_output_has_row_runs(out) ? (double)out->n_tokens : (double)out->n_documents;
    /* sparse rows: their size is known only once they are written */
    const double row_bytes = out->kind->rows_dataset == NULL
                                 ? 0.0
                                 : (double)out->row_width * (double)out->float_size;
    const double per_document = 4 + 4 + (tfenc_output_has_row_runs(out) ? 8 : 0) +
                                (out->chunks != TFENC_CHUNKS_OFF ? 4 : 0) +
                                (options->has_ids ? (double)out->id_length : 0);
    /* token_ids: 4 bytes per row of hidden */
    const double id_bytes = tfenc_output_per_token(out->kind) && options->has_token_ids ? 4 : 0;
    const double needed = rows * (row_bytes + id_bytes) + (double)out->n_documents * per_document;
    double available = 0.0;
    int status = tfenc_file_free_space(ctx, "[job] output", out->path, &available);
    if (status != TFENC_OK || available < 0)
        return status; /* a missing directory: the create below reports it better */
    if (needed > available)
        return tfenc_error(ctx, TFENC_ERR_IO,
                           "%s: the output needs %.1f MiB but its file system has %.1f MiB "
                           "free; free some space or choose another output",
                           out->path, needed / 1048576.0, available / 1048576.0);
    return TFENC_OK;
}

/* Its HDF5 type: packed little-endian in the file (12 bytes), the C
 * struct's layout in memory. */
int tfenc_output_create(tfenc_context *ctx, MPI_Comm writers, const tfenc_output_options *options,
                        tfenc_output **out_result)
{
    tfenc_output *out = NULL;
    int status = tfenc_output_prepare(ctx, writers, options, &out);
    *out_result = NULL;
    if (status != TFENC_OK)
        return status;
    const char *path = options->path;
    if (!out->compress)
        status = check_free_space(ctx, out, options);
    if (status == TFENC_OK)
        status = tfenc_output_open_file(ctx, out, writers, out->n_writers, 1);
    /* Sparse rows are written at the end, in document order (sparse.h). */
    if (status == TFENC_OK)
        status = tfenc_output_layout_create(ctx, out, options);
    if (status == TFENC_OK)
        status = tfenc_output_write_attributes(ctx, out, options);
    if (status == TFENC_OK)
        status = tfenc_output_write_ranges(ctx, out, options);
    if (status == TFENC_OK)
        status = tfenc_output_write_calibration(ctx, out, options->calibration);
    if (status == TFENC_OK)
        status = tfenc_output_write_corpus_shards(ctx, out, options->corpus_shards);
    /* offsets[N] = T belongs to no document: the first writer stores it. */
    int rank = 0;
    if (writers != MPI_COMM_NULL)
        MPI_Comm_rank(writers, &rank);
    if (status == TFENC_OK && tfenc_output_has_row_runs(out) && rank == 0) {
        int64_t start = out->n_documents, one = 1;
        status = tfenc_output_write_elements(ctx, out, out->offsets, tfenc_output_offsets_name(out),
                                             1, &start, &one, 0, H5T_NATIVE_INT64, &out->n_tokens);
    }
    /* The file's structure reaches the disk now, so that a killed job
     * leaves a file that opens and says complete = 0. */
    if (status == TFENC_OK && H5Fflush(out->file, H5F_SCOPE_GLOBAL) < 0)
        status = tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, path, "cannot flush the new file");
    if (status != TFENC_OK) {
        tfenc_output_close(out);
        return status;
    }
    *out_result = out;
    return TFENC_OK;
}


/* ----------------------------------------------------------------- finish */

int tfenc_output_add_run_summary(tfenc_context *ctx, tfenc_output *out, const char *entry)
{
    json_t *runs = NULL, *run = json_loads(entry, 0, NULL);
    char *before = tfenc_hdf5_attribute_string(out->file, "run_summaries"), *text = NULL;
    H5Eclear2(H5E_DEFAULT);
    int status = TFENC_OK;
    if (before != NULL)
        runs = json_loads(before, 0, NULL);
    if (!json_is_array(runs)) {
        json_decref(runs);
        runs = json_array();
    }
    if (run == NULL || runs == NULL || json_array_append_new(runs, run) != 0) {
        run = NULL;
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: cannot add the run summary", out->path);
        goto done;
    }
    run = NULL;
    /* Compact and in the order built: every writer writes the same bytes. */
    text = json_dumps(runs, JSON_COMPACT | JSON_PRESERVE_ORDER);
    status = text != NULL ? tfenc_output_write_string(ctx, out, "run_summaries", text)
                          : tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
done:
    json_decref(run);
    json_decref(runs);
    free(before);
    free(text);
    return status;
}

int tfenc_output_finish(tfenc_context *ctx, tfenc_output *out)
{
    /* Data first, then the mark: a reader that sees complete = 1 must find
     * every row on disk. */
    int status = TFENC_OK;
    if (H5Fflush(out->file, H5F_SCOPE_GLOBAL) < 0)
        status = tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, out->path, "cannot flush the rows");
    int32_t complete = 1;
    if (status == TFENC_OK)
        status = tfenc_output_write_attribute(ctx, out, "complete", H5T_NATIVE_INT32, &complete);
    if (tfenc_output_close_handles(out) && status == TFENC_OK)
        status = tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, out->path, "cannot close the file");
    tfenc_output_free(out);
    return status;
}

