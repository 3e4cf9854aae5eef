/* Rows now, metadata after fdatasync: the last stage's writes. */
#include "writer.h"

#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A group ends after this many documents or this many seconds, whichever
 * comes first: one fdatasync per group keeps the sync cost small next to
 * encoding, and a killed job loses at most a second of work. */
#define GROUP_DOCUMENTS 4096
#define GROUP_SECONDS 1.0

struct tfenc_writer {
    tfenc_output *output;
    int pooled;
    int output_dim; /* > 0: rows cut to this width and renormalised */
    const char *path;
    int sync_fd;
    /* The current group's metadata. */
    int64_t *indices;
    int32_t *lengths;
    int32_t *truncated;
    char **ids;
    int64_t n_queued, capacity;
    int has_ids;
    int64_t documents, tokens, truncated_documents;
    double last_flush;
};


int tfenc_writer_create(tfenc_context *ctx, tfenc_output *output, int pooled, int output_dim,
                        const char *path, tfenc_writer **writer_out)
{
    *writer_out = NULL;
    tfenc_writer *w = calloc(1, sizeof *w);
    if (w == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    w->output = output;
    w->pooled = pooled;
    w->output_dim = output_dim;
    w->path = path;
    w->last_flush = tfenc_clock_seconds();
    /* fdatasync through any descriptor flushes the file's data. */
    w->sync_fd = open(path, O_RDONLY | O_CLOEXEC);
    if (w->sync_fd < 0) {
        int error = errno;
        free(w);
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot open for syncing: %s", path,
                           strerror(error));
    }
    *writer_out = w;
    return TFENC_OK;
}

static int queue(tfenc_context *ctx, tfenc_writer *w, const tfenc_microbatch *m)
{
    const int n = m->batch.n_seq;
    if (w->n_queued + n > w->capacity) {
        int64_t capacity = w->capacity > 0 ? w->capacity : 1024;
        while (capacity < w->n_queued + n)
            capacity *= 2;
        int64_t *indices = realloc(w->indices, (size_t)capacity * sizeof *indices);
        if (indices != NULL)
            w->indices = indices;
        int32_t *lengths = realloc(w->lengths, (size_t)capacity * sizeof *lengths);
        if (lengths != NULL)
            w->lengths = lengths;
        int32_t *truncated = realloc(w->truncated, (size_t)capacity * sizeof *truncated);
        if (truncated != NULL)
            w->truncated = truncated;
        char **ids = realloc(w->ids, (size_t)capacity * sizeof *ids);
        if (ids != NULL)
            w->ids = ids;
        if (indices == NULL || lengths == NULL || truncated == NULL || ids == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        w->capacity = capacity;
    }
    const char *id = m->ids;
    for (int j = 0; j < n; j++) {
        int64_t k = w->n_queued + j;
        w->indices[k] = m->indices[j];
        w->lengths[k] = m->lengths[j];
        w->truncated[k] = m->truncated[j];
        w->ids[k] = NULL;
        if (id != NULL) {
            w->ids[k] = strdup(id);
            if (w->ids[k] == NULL)
                return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
            id += strlen(id) + 1;
            w->has_ids = 1;
        }
        w->truncated_documents += m->truncated[j] > 0;
    }
    w->n_queued += n;
    return TFENC_OK;
}

/* Rows [n, d] -> their first `width` values, at unit length, packed as
 * [n, width] in the same buffer (sentence-transformers' truncate_dim with
 * normalize_embeddings). Sums in double: the norm of 1024 floats. */
static void truncate_rows(float *x, int n, int d, int width)
{
    for (int j = 0; j < n; j++) {
        const float *row = x + (size_t)j * (size_t)d;
        double sum = 0;
        for (int c = 0; c < width; c++)
            sum += (double)row[c] * (double)row[c];
        float scale = sum > 0 ? (float)(1.0 / sqrt(sum)) : 0.0f;
        float *packed = x + (size_t)j * (size_t)width;
        for (int c = 0; c < width; c++)
            packed[c] = row[c] * scale;
    }
}

int tfenc_writer_write(tfenc_context *ctx, tfenc_writer *w, const tfenc_microbatch *m)
{
    const tfenc_batch *b = &m->batch;
    if (w->pooled && b->rows != b->n_seq)
        return tfenc_error(ctx, TFENC_ERR_PLUGIN,
                           "the model's output has %d rows for %d documents; with "
                           "output_kind = pooled the model must end in pooling",
                           b->rows, b->n_seq);
    if (!w->pooled && b->rows != b->n_tokens)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "the model pools its output (%d rows for %d tokens): set [job] "
                           "output_kind = pooled or auto",
                           b->rows, b->n_tokens);
    if (w->pooled && w->output_dim > 0)
        truncate_rows(b->x, b->n_seq, b->d_model, w->output_dim);
    int status = w->pooled ? tfenc_output_write_pooled(ctx, w->output, b->n_seq, m->indices, b->x)
                           : tfenc_output_write_tokens(ctx, w->output, b->n_seq, m->indices,
                                                       m->token_offsets, m->lengths, b->x);
    if (status == TFENC_OK)
        status = queue(ctx, w, m);
    if (status != TFENC_OK)
        return status;
    w->documents += b->n_seq;
    w->tokens += b->n_tokens;
    if (w->n_queued >= GROUP_DOCUMENTS || tfenc_clock_seconds() - w->last_flush >= GROUP_SECONDS)
        return tfenc_writer_flush(ctx, w);
    return TFENC_OK;
}

int tfenc_writer_flush(tfenc_context *ctx, tfenc_writer *w)
{
    w->last_flush = tfenc_clock_seconds();
    if (w->n_queued == 0)
        return TFENC_OK;
    if (fdatasync(w->sync_fd) != 0) {
        int error = errno;
        /* Filesystems without fdatasync (some FUSE mounts) still have the
         * data in the page cache, which a killed process does not lose. */
        if (error != EINVAL && error != ENOTSUP)
            return tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot flush rows to disk: %s", w->path,
                               strerror(error));
    }
    int status = tfenc_output_write_metadata(ctx, w->output, w->n_queued, w->indices, w->lengths,
                                             w->truncated,
                                             w->has_ids ? (const char *const *)w->ids : NULL);
    for (int64_t k = 0; k < w->n_queued; k++) {
        free(w->ids[k]);
        w->ids[k] = NULL;
    }
    w->n_queued = 0;
    return status;
}

int64_t tfenc_writer_documents(const tfenc_writer *w)
{
    return w->documents;
}

int64_t tfenc_writer_tokens(const tfenc_writer *w)
{
    return w->tokens;
}

int64_t tfenc_writer_truncated_documents(const tfenc_writer *w)
{
    return w->truncated_documents;
}

void tfenc_writer_destroy(tfenc_writer *w)
{
    if (w == NULL)
        return;
    for (int64_t k = 0; k < w->n_queued; k++)
        free(w->ids[k]);
    if (w->sync_fd >= 0)
        close(w->sync_fd);
    free(w->indices);
    free(w->lengths);
    free(w->truncated);
    free(w->ids);
    free(w);
}
