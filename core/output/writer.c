/* Rows now, metadata after fdatasync: the last stage's writes. */
#include "output/writer.h"

#include "output/kinds.h"
#include "output/multivector.h"

#include "base/clock.h"
#include "base/context.h"
#include "base/growth.h"
#include "output/sparse.h"

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
/* Syncs per second a whole job asks of the file system at most: with more
 * writers than this each one's group lasts longer (docs/scale.md: at 1,000
 * ranks the metadata flushes are the first shared resource to fill). */
#define JOB_SYNCS_PER_SECOND 1000.0

/* A chunked document whose chunks have not all arrived: they are spread
 * over the microbatches of its window (sorted by length with the others). */
typedef struct open_document {
    int64_t index;
    int64_t first_row;  /* TFENC_CHUNKS_EACH: its first row in embeddings */
    int32_t n_chunks, seen;
    int32_t tokens;     /* all its chunks' tokens, special tokens included */
    int32_t source;     /* where it was read from */
    int64_t source_line;
    char *id;
    float *rows;        /* MEAN: [d] the sum so far; MAX: the largest so far; FIRST: the
                         * first chunk's; EACH: [n_chunks, d] by chunk */
    int32_t *starts;    /* EACH: [n_chunks] each chunk's first token */
} open_document;

struct tfenc_writer {
    tfenc_output *output;
    const tfenc_output_kind_entry *kind; /* what the rows are; its hook writes them */
    int width; /* the values of each row the kind keeps (scores, vectors) */
    tfenc_output_chunks chunks;
    int output_dim; /* > 0: rows cut to this width and renormalised */
    int unit_means; /* chunk means scaled back to unit length (the model's rows are) */
    int late_chunks; /* late chunking: a span starts at its microbatch's span_begin */
    tfenc_sparse_log *sparse_log;         /* sparse kind: where the microbatches' rows go */
    int (*before_metadata)(tfenc_context *ctx, void *user);
    void *before_metadata_user;
    tfenc_skiplist skiplist;   /* vectors: the tokens left out */
    int32_t *kept_ids;         /* vectors: [tokens] the kept rows' ids, packed */
    int32_t *kept_counts;      /* vectors: [sequences] rows each one kept */
    size_t kept_ids_capacity, kept_counts_capacity;
    int d_model;
    const char *path;
    int sync_fd;
    /* The current group's metadata, one entry per finished document. */
    int64_t *indices;
    int32_t *lengths;
    int32_t *truncated;
    int32_t *chunk_counts;
    int32_t *sources;
    int64_t *source_lines;
    char **ids;
    int64_t n_queued, capacity;
    int has_ids;
    int64_t documents, tokens, truncated_documents;
    /* What the flushes have made finished (tfenc_writer_finished). */
    int64_t finished_documents, finished_tokens;
    int (*finished_before)(void *user, int64_t document);
    void *finished_before_user;
    double last_flush;
    double group_seconds;
    /* Chunked outputs. */
    open_document *open;
    int n_open, open_capacity;
    float *finished_rows; /* rows of the documents a microbatch finished */
    size_t finished_capacity;
};

int tfenc_writer_create(tfenc_context *ctx, tfenc_output *output,
                        const tfenc_output_kind_entry *kind, int width, tfenc_output_chunks chunks, int output_dim, int d_model, int n_writers,
                        const char *path, tfenc_writer **writer_out)
{
    *writer_out = NULL;
    tfenc_writer *w = calloc(1, sizeof *w);
    if (w == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    w->output = output;
    w->kind = kind;
    w->width = width;
    w->chunks = kind->chunks ? chunks : TFENC_CHUNKS_OFF;
    w->output_dim = output_dim;
    w->d_model = d_model;
    w->path = path;
    w->last_flush = tfenc_clock_seconds();
    w->group_seconds = n_writers / JOB_SYNCS_PER_SECOND > GROUP_SECONDS
                           ? n_writers / JOB_SYNCS_PER_SECOND
                           : GROUP_SECONDS;
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

/* Room for n more finished documents in the group. */
static int reserve_queue(tfenc_context *ctx, tfenc_writer *w, int64_t n)
{
    if (w->n_queued + n <= w->capacity)
        return TFENC_OK;
    const int64_t capacity = tfenc_grown_capacity(w->capacity, w->n_queued + n, 1024, INT64_MAX);
    int grew = 1; /* a capacity of -1 (too many) fails each growth */
    TFENC_GROW_ARRAY(w->indices, capacity, grew);
    TFENC_GROW_ARRAY(w->lengths, capacity, grew);
    TFENC_GROW_ARRAY(w->truncated, capacity, grew);
    TFENC_GROW_ARRAY(w->chunk_counts, capacity, grew);
    TFENC_GROW_ARRAY(w->sources, capacity, grew);
    TFENC_GROW_ARRAY(w->source_lines, capacity, grew);
    TFENC_GROW_ARRAY(w->ids, capacity, grew);
    if (!grew)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    w->capacity = capacity;
    return TFENC_OK;
}

/* A finished document's metadata joins the group; `id` is copied. */
static int queue(tfenc_context *ctx, tfenc_writer *w, int64_t index, int32_t length,
                 int32_t truncated, int32_t chunks, int32_t source, int64_t source_line,
                 const char *id)
{
    int status = reserve_queue(ctx, w, 1);
    if (status != TFENC_OK)
        return status;
    int64_t k = w->n_queued;
    w->indices[k] = index;
    w->lengths[k] = length;
    w->truncated[k] = truncated;
    w->chunk_counts[k] = chunks;
    w->sources[k] = source;
    w->source_lines[k] = source_line;
    w->ids[k] = NULL;
    if (id != NULL) {
        if ((w->ids[k] = strdup(id)) == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        w->has_ids = 1;
    }
    w->n_queued++;
    w->documents++;
    w->truncated_documents += truncated > 0;
    return TFENC_OK;
}

/* Rows [n, d] -> their first `width` values, at unit length, packed as
 * [n, width] in the same buffer (sentence-transformers' truncate_dim with
 * normalize_embeddings). Sums in double: the norm of 1024 floats. */
static void truncate_rows(float *x, int64_t n, int d, int width)
{
    for (int64_t j = 0; j < n; j++) {
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

void tfenc_writer_truncate_rows(float *x, int64_t n, int d, int width)
{
    truncate_rows(x, n, d, width);
}

void tfenc_writer_chunk_mean(float *row, int n_chunks, int d, int output_dim, int unit_means)
{
    if (n_chunks > 1)
        for (int c = 0; c < d; c++)
            row[c] /= (float)n_chunks;
    /* The mean of unit vectors is shorter than they are: the row keeps the
     * model's promise of unit length, as cutting to output_dim does. */
    if (output_dim > 0)
        truncate_rows(row, 1, d, output_dim);
    else if (n_chunks > 1 && unit_means)
        truncate_rows(row, 1, d, d);
}

/* The ids of a microbatch, one NUL-terminated string after another. */
static const char *next_id(const char **cursor)
{
    const char *id = *cursor;
    if (id != NULL)
        *cursor += strlen(id) + 1;
    return id;
}

/* ------------------------------------------------------------- chunks */

static open_document *find_open(tfenc_writer *w, int64_t index)
{
    for (int i = 0; i < w->n_open; i++)
        if (w->open[i].index == index)
            return &w->open[i];
    return NULL;
}

static open_document *add_open(tfenc_context *ctx, tfenc_writer *w, const tfenc_microbatch *m,
                               int j, const char *id)
{
    if (w->n_open == w->open_capacity) {
        int capacity = w->open_capacity > 0 ? 2 * w->open_capacity : 16;
        open_document *grown = realloc(w->open, (size_t)capacity * sizeof *grown);
        if (grown == NULL)
            return NULL;
        w->open = grown;
        w->open_capacity = capacity;
    }
    open_document *o = &w->open[w->n_open];
    memset(o, 0, sizeof *o);
    o->index = m->indices[j];
    o->first_row = m->token_offsets[j];
    o->n_chunks = m->n_chunks[j];
    o->source = m->sources[j];
    o->source_line = m->source_lines[j];
    size_t rows = w->chunks == TFENC_CHUNKS_EACH ? (size_t)o->n_chunks : 1;
    o->rows = calloc(rows * (size_t)w->d_model, sizeof *o->rows);
    o->starts = w->chunks == TFENC_CHUNKS_EACH ? calloc((size_t)o->n_chunks, sizeof *o->starts)
                                                : NULL;
    o->id = id != NULL ? strdup(id) : NULL;
    if (o->rows == NULL || (w->chunks == TFENC_CHUNKS_EACH && o->starts == NULL) ||
        (id != NULL && o->id == NULL)) {
        free(o->rows);
        free(o->starts);
        free(o->id);
        tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for a document of %d chunks",
                    m->n_chunks[j]);
        return NULL;
    }
    w->n_open++;
    return o;
}

static void close_open(tfenc_writer *w, open_document *o)
{
    free(o->rows);
    free(o->starts);
    free(o->id);
    *o = w->open[--w->n_open];
}

/* Room for `rows` finished rows of d floats. */
static int reserve_finished(tfenc_context *ctx, tfenc_writer *w, size_t rows)
{
    size_t needed = rows * (size_t)w->d_model;
    if (needed <= w->finished_capacity)
        return TFENC_OK;
    float *grown = realloc(w->finished_rows, needed * sizeof *grown);
    if (grown == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    w->finished_rows = grown;
    w->finished_capacity = needed;
    return TFENC_OK;
}

/* The values of a row the file keeps: a head's scores are the first
 * `width` of the model's d_model. */
static int row_values(const tfenc_writer *w)
{
    return w->kind->head_width ? w->width : w->d_model;
}

/* A chunk's row into its document's: summed (MEAN), kept if larger (MAX;
 * the first to arrive is copied), kept if it is the first chunk (FIRST),
 * or put at its place (EACH). Chunks arrive in their window's order, which
 * the job alone decides, so a sum is the same bits on every layout. */
static void gather_chunk(const tfenc_writer *w, open_document *o, int chunk, int32_t start,
                         const float *row)
{
    const int d = row_values(w);
    float *into = o->rows;
    switch (w->chunks) {
    case TFENC_CHUNKS_EACH:
        memcpy(into + (size_t)chunk * (size_t)d, row, (size_t)d * sizeof *row);
        o->starts[chunk] = start;
        break;
    case TFENC_CHUNKS_MAX:
        for (int c = 0; c < d; c++)
            into[c] = o->seen == 0 || row[c] > into[c] ? row[c] : into[c];
        break;
    case TFENC_CHUNKS_FIRST:
        if (chunk == 0)
            memcpy(into, row, (size_t)d * sizeof *row);
        break;
    default: /* MEAN */
        for (int c = 0; c < d; c++)
            into[c] += row[c];
        break;
    }
}

/* Writes a finished document's rows: its chunks' mean (MEAN), largest
 * (MAX) or first (FIRST), or every chunk (EACH), then queues its
 * metadata. */
static int finish_open(tfenc_context *ctx, tfenc_writer *w, open_document *o)
{
    const int d = row_values(w);
    const int64_t rows = w->chunks == TFENC_CHUNKS_EACH ? o->n_chunks : 1;
    if (w->chunks == TFENC_CHUNKS_MEAN)
        tfenc_writer_chunk_mean(o->rows, o->n_chunks, d, w->output_dim, w->unit_means);
    else if (w->output_dim > 0)
        truncate_rows(o->rows, rows, d, w->output_dim);
    int status = w->chunks == TFENC_CHUNKS_EACH
                     ? tfenc_output_write_chunks(ctx, w->output, 1, &o->index, &o->first_row,
                                                 &o->n_chunks, o->starts, o->rows)
                     : tfenc_output_write_pooled(ctx, w->output, 1, &o->index, o->rows);
    if (status == TFENC_OK)
        status = queue(ctx, w, o->index, o->tokens, 0, o->n_chunks, o->source, o->source_line,
                       o->id);
    close_open(w, o);
    return status;
}

/* A microbatch of a chunked output: documents of one chunk are written at
 * once; the chunks of longer ones gather until their document is whole. */
static int write_chunked(tfenc_context *ctx, tfenc_writer *w, const tfenc_microbatch *m)
{
    const tfenc_batch *b = &m->batch;
    const int d = row_values(w);
    int status = reserve_finished(ctx, w, (size_t)b->n_seq);
    int64_t n_whole = 0;
    int64_t *whole_index = status == TFENC_OK ? malloc((size_t)b->n_seq * sizeof *whole_index)
                                              : NULL;
    int64_t *whole_row = status == TFENC_OK ? malloc((size_t)b->n_seq * sizeof *whole_row) : NULL;
    int32_t *ones = status == TFENC_OK ? malloc((size_t)b->n_seq * sizeof *ones) : NULL;
    int32_t *zeros = status == TFENC_OK ? calloc((size_t)b->n_seq, sizeof *zeros) : NULL;
    if (status == TFENC_OK && (whole_index == NULL || whole_row == NULL || ones == NULL ||
                               zeros == NULL))
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    const char *id_cursor = m->ids;
    /* With late chunking a sequence has a row per span (its spans[j]). */
    int64_t first_row = 0;
    for (int j = 0; status == TFENC_OK && j < b->n_seq; first_row += m->spans[j++]) {
        const char *id = next_id(&id_cursor);
        const float *row = b->x + (size_t)first_row * (size_t)b->d_model;
        if (m->n_chunks[j] == 1) {
            memcpy(w->finished_rows + (size_t)n_whole * (size_t)d, row, (size_t)d * sizeof *row);
            whole_index[n_whole] = m->indices[j];
            whole_row[n_whole] = m->token_offsets[j];
            ones[n_whole] = 1;
            n_whole++;
            status = queue(ctx, w, m->indices[j], m->lengths[j], m->truncated[j], 1,
                           m->sources[j], m->source_lines[j], id);
            continue;
        }
        open_document *o = find_open(w, m->indices[j]);
        if (o == NULL && (o = add_open(ctx, w, m, j, id)) == NULL) {
            if (ctx->status == TFENC_OK)
                tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
            status = ctx->status;
            break;
        }
        o->tokens += m->lengths[j];
        for (int s = 0; status == TFENC_OK && s < m->spans[j]; s++) {
            const int chunk = m->chunk[j] + s;
            /* A span starts at its piece of the document (late_chunks.h). */
            const int32_t start = w->late_chunks ? m->span_begin[first_row + s]
                                                 : m->chunk_start[j];
            gather_chunk(w, o, chunk, start, row + (size_t)s * (size_t)b->d_model);
            if (++o->seen == o->n_chunks)
                status = finish_open(ctx, w, o);
        }
    }
    if (status == TFENC_OK && n_whole > 0) {
        if (w->output_dim > 0)
            truncate_rows(w->finished_rows, n_whole, d, w->output_dim);
        status = w->chunks == TFENC_CHUNKS_EACH
                     ? tfenc_output_write_chunks(ctx, w->output, n_whole, whole_index, whole_row,
                                                 ones, zeros, w->finished_rows)
                     : tfenc_output_write_pooled(ctx, w->output, n_whole, whole_index,
                                                 w->finished_rows);
    }
    free(whole_index);
    free(whole_row);
    free(ones);
    free(zeros);
    return status;
}

void tfenc_writer_set_unit_means(tfenc_writer *w)
{
    w->unit_means = 1;
}

void tfenc_writer_set_late_chunks(tfenc_writer *w)
{
    w->late_chunks = 1;
}

void tfenc_writer_set_sparse(tfenc_writer *w, tfenc_sparse_log *log)
{
    w->sparse_log = log;
}

void tfenc_writer_set_before_metadata(tfenc_writer *w, int (*sync)(tfenc_context *ctx, void *user),
                                      void *user)
{
    w->before_metadata = sync;
    w->before_metadata_user = user;
}

int tfenc_writer_set_skiplist(tfenc_context *ctx, tfenc_writer *w, const tfenc_skiplist *skip)
{
    w->skiplist.n_ids = 0;
    w->skiplist.flags = NULL;
    w->skiplist.skip_first = skip->skip_first;
    if (skip->flags == NULL)
        return TFENC_OK;
    uint8_t *flags = malloc((size_t)skip->n_ids);
    if (flags == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    memcpy(flags, skip->flags, (size_t)skip->n_ids);
    w->skiplist.flags = flags;
    w->skiplist.n_ids = skip->n_ids;
    return TFENC_OK;
}

/* ------------------------------------------------------------- writing */

int tfenc_writer_write(tfenc_context *ctx, tfenc_writer *w, const tfenc_microbatch *m)
{
    const tfenc_batch *b = &m->batch;
    int64_t spans = 0;
    for (int j = 0; j < b->n_seq; j++)
        spans += m->spans[j];
    if (w->kind->pools && b->rows != spans)
        return tfenc_error(ctx, TFENC_ERR_PLUGIN,
                           "the model's output has %d rows for %d documents; with "
                           "output_kind = pooled the model must end in pooling",
                           b->rows, (int)spans);
    if (!w->kind->pools && b->rows != b->n_tokens)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "the model pools its output (%d rows for %d tokens): set [job] "
                           "output_kind = pooled or auto",
                           b->rows, b->n_tokens);
    int status = TFENC_OK;
    if (w->chunks != TFENC_CHUNKS_OFF) {
        status = write_chunked(ctx, w, m);
    } else {
        /* output_dim, which only pooled rows take: cut and scaled back. */
        if (w->output_dim > 0)
            truncate_rows(b->x, b->n_seq, b->d_model, w->output_dim);
        const tfenc_output_kind_write call = {
            .output = w->output, .microbatch = m, .width = w->width,
            .sparse_rows = m->sparse_rows, .sparse_log = w->sparse_log,
            .skiplist = &w->skiplist, .kept_ids = &w->kept_ids, .kept_counts = &w->kept_counts,
            .kept_ids_capacity = &w->kept_ids_capacity,
            .kept_counts_capacity = &w->kept_counts_capacity};
        status = w->kind->write(ctx, &call);
        const char *id_cursor = m->ids;
        for (int j = 0; status == TFENC_OK && j < b->n_seq; j++)
            status = queue(ctx, w, m->indices[j], m->lengths[j], m->truncated[j], 1,
                           m->sources[j], m->source_lines[j], next_id(&id_cursor));
    }
    if (status != TFENC_OK)
        return status;
    w->tokens += b->n_tokens;
    if (w->n_queued >= GROUP_DOCUMENTS ||
        tfenc_clock_seconds() - w->last_flush >= w->group_seconds)
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
    int status = TFENC_OK;
    if (w->sparse_log != NULL)
        status = tfenc_sparse_log_sync(ctx, w->sparse_log);
    if (status == TFENC_OK && w->before_metadata != NULL)
        status = w->before_metadata(ctx, w->before_metadata_user);
    if (status == TFENC_OK && w->chunks != TFENC_CHUNKS_OFF)
        status = tfenc_output_write_chunk_counts(ctx, w->output, w->n_queued, w->indices,
                                                 w->chunk_counts);
    if (status == TFENC_OK)
        status = tfenc_output_write_metadata(ctx, w->output, w->n_queued, w->indices, w->lengths,
                                             w->truncated,
                                             w->has_ids ? (const char *const *)w->ids : NULL,
                                             w->sources, w->source_lines);
    for (int64_t k = 0; status == TFENC_OK && k < w->n_queued; k++) {
        w->finished_tokens += w->lengths[k];
        w->finished_documents +=
            w->finished_before == NULL ||
            !w->finished_before(w->finished_before_user, w->indices[k]);
    }
    for (int64_t k = 0; k < w->n_queued; k++) {
        free(w->ids[k]);
        w->ids[k] = NULL;
    }
    w->n_queued = 0;
    return status;
}

void tfenc_writer_set_finished_before(tfenc_writer *w,
                                      int (*finished_before)(void *user, int64_t document),
                                      void *user)
{
    w->finished_before = finished_before;
    w->finished_before_user = user;
}

void tfenc_writer_finished(const tfenc_writer *w, int64_t *documents, int64_t *tokens)
{
    *documents = w->finished_documents;
    *tokens = w->finished_tokens;
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
    while (w->n_open > 0)
        close_open(w, &w->open[0]);
    if (w->sync_fd >= 0)
        close(w->sync_fd);
    free(w->indices);
    free(w->lengths);
    free(w->truncated);
    free(w->chunk_counts);
    free(w->sources);
    free(w->source_lines);
    free(w->ids);
    free(w->open);
    free(w->finished_rows);
    free((void *)w->skiplist.flags);
    free(w->kept_ids);
    free(w->kept_counts);
    free(w);
}
