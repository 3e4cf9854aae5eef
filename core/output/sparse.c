/* Sparse rows: kept per microbatch, logged per writer, written as CSR in
 * document order when the job completes (sparse.h says why). */
#include "output/sparse.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Entries written to the file per HDF5 call when the CSR is assembled. */
#define WRITE_BLOCK_ENTRIES ((int64_t)1 << 20)

typedef struct sparse_entry {
    int32_t index;
    float value;
} sparse_entry;

/* -------------------------------------------------- one microbatch's rows */

int tfenc_sparse_rows_create(tfenc_context *ctx, int width, long top_k, double threshold,
                             tfenc_sparse_rows **rows_out)
{
    *rows_out = NULL;
    tfenc_sparse_rows *rows = calloc(1, sizeof *rows);
    if (rows == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    rows->width = width;
    rows->top_k = top_k;
    rows->threshold = threshold;
    rows->scratch = malloc((size_t)width * sizeof *rows->scratch);
    if (rows->scratch == NULL) {
        free(rows);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    }
    *rows_out = rows;
    return TFENC_OK;
}

int tfenc_sparse_rows_begin(tfenc_context *ctx, tfenc_sparse_rows *rows, int n_seq)
{
    if (n_seq + 1 > rows->row_capacity) {
        int64_t *grown = realloc(rows->row_start, ((size_t)n_seq + 1) * sizeof *grown);
        if (grown == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        rows->row_start = grown;
        rows->row_capacity = n_seq + 1;
    }
    rows->n_seq = n_seq;
    rows->n_rows = 0;
    rows->row_start[0] = 0;
    return TFENC_OK;
}

static int reserve_entries(tfenc_context *ctx, tfenc_sparse_rows *rows, int64_t needed)
{
    if (needed <= rows->capacity)
        return TFENC_OK;
    int64_t capacity = rows->capacity > 0 ? rows->capacity : 65536;
    while (capacity < needed)
        capacity *= 2;
    int32_t *indices = realloc(rows->indices, (size_t)capacity * sizeof *indices);
    if (indices != NULL)
        rows->indices = indices;
    float *values = realloc(rows->values, (size_t)capacity * sizeof *values);
    if (values != NULL)
        rows->values = values;
    if (indices == NULL || values == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    rows->capacity = capacity;
    return TFENC_OK;
}

/* Larger values first; among equal values the smaller index, so that the
 * k kept do not depend on anything but the row. */
static int by_value(const void *a, const void *b)
{
    const sparse_entry *x = a, *y = b;
    if (x->value != y->value)
        return x->value > y->value ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

static int by_index(const void *a, const void *b)
{
    const sparse_entry *x = a, *y = b;
    return (x->index > y->index) - (x->index < y->index);
}

int tfenc_sparse_rows_sink(void *user, tfenc_context *ctx, int sequence, int n,
                           const int32_t *indices, const float *values)
{
    tfenc_sparse_rows *rows = user;
    if (sequence != rows->n_rows || sequence >= rows->n_seq || n < 0 || n > rows->width)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "sparse row %d of %d values handed over "
                           "where row %d of %d was due", sequence, n, rows->n_rows, rows->n_seq);
    int kept = 0;
    for (int j = 0; j < n; j++) {
        if (indices[j] < 0 || indices[j] >= rows->width || (j > 0 && indices[j] <= indices[j - 1]))
            return tfenc_error(ctx, TFENC_ERR_INTERNAL, "sparse row %d: column %d at position "
                               "%d is outside 0..%d or not ascending", sequence, indices[j], j,
                               rows->width - 1);
        if (values[j] > rows->threshold)
            rows->scratch[kept++] = (sparse_entry){indices[j], values[j]};
    }
    if (rows->top_k > 0 && kept > rows->top_k) {
        qsort(rows->scratch, (size_t)kept, sizeof *rows->scratch, by_value);
        kept = (int)rows->top_k;
        qsort(rows->scratch, (size_t)kept, sizeof *rows->scratch, by_index);
    }
    const int64_t start = rows->row_start[sequence];
    int status = reserve_entries(ctx, rows, start + kept);
    if (status != TFENC_OK)
        return status;
    for (int j = 0; j < kept; j++) {
        rows->indices[start + j] = rows->scratch[j].index;
        rows->values[start + j] = rows->scratch[j].value;
    }
    rows->row_start[sequence + 1] = start + kept;
    rows->n_rows++;
    return TFENC_OK;
}

void tfenc_sparse_rows_destroy(tfenc_sparse_rows *rows)
{
    if (rows == NULL)
        return;
    free(rows->row_start);
    free(rows->indices);
    free(rows->values);
    free(rows->scratch);
    free(rows);
}

/* ------------------------------------------------------ the writer's log */

struct tfenc_sparse_log {
    char *path;
    int fd;
};

/* A log of `output_path`: its directory and the prefix of the logs' names. */
static int log_prefix(const char *output_path, char **directory, char **prefix)
{
    char *copy_dir = strdup(output_path), *copy_base = strdup(output_path);
    *directory = *prefix = NULL;
    if (copy_dir != NULL && copy_base != NULL) {
        *directory = strdup(dirname(copy_dir));
        const char *base = basename(copy_base);
        *prefix = malloc(strlen(base) + sizeof ".sparse-");
        if (*prefix != NULL)
            sprintf(*prefix, "%s.sparse-", base);
    }
    free(copy_dir);
    free(copy_base);
    if (*directory == NULL || *prefix == NULL) {
        free(*directory);
        free(*prefix);
        return -1;
    }
    return 0;
}

/* Calls visit(directory/name, user) for each log of output_path. */
static int each_log(const char *output_path, int (*visit)(const char *path, void *user),
                    void *user)
{
    char *directory, *prefix;
    if (log_prefix(output_path, &directory, &prefix) != 0)
        return -1;
    DIR *dir = opendir(directory);
    int result = dir == NULL ? -1 : 0;
    size_t prefix_length = strlen(prefix);
    for (struct dirent *e; result == 0 && dir != NULL && (e = readdir(dir)) != NULL;) {
        if (strncmp(e->d_name, prefix, prefix_length) != 0)
            continue;
        char *path = malloc(strlen(directory) + strlen(e->d_name) + 2);
        if (path == NULL) {
            result = -1;
            break;
        }
        sprintf(path, "%s/%s", directory, e->d_name);
        result = visit(path, user);
        free(path);
    }
    if (dir != NULL)
        closedir(dir);
    free(directory);
    free(prefix);
    return result;
}

static int remove_log(const char *path, void *user)
{
    (void)user;
    unlink(path);
    return 0;
}

void tfenc_sparse_remove_logs(const char *output_path)
{
    each_log(output_path, remove_log, NULL);
}

int tfenc_sparse_log_open(tfenc_context *ctx, const char *output_path, MPI_Comm writers,
                          int resumed, tfenc_sparse_log **log_out)
{
    *log_out = NULL;
    int rank = 0;
    /* The run's name for its logs: rank 0's clock, so that a resumed run
     * never appends to the logs of the run it resumes. */
    long long run_stamp[2] = {0, 0};
    if (writers != MPI_COMM_NULL)
        MPI_Comm_rank(writers, &rank);
    if (rank == 0) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        run_stamp[0] = (long long)now.tv_sec;
        run_stamp[1] = (long long)now.tv_nsec;
        if (!resumed)
            tfenc_sparse_remove_logs(output_path);
    }
    if (writers != MPI_COMM_NULL &&
        MPI_Bcast(run_stamp, 2, MPI_LONG_LONG, 0, writers) != MPI_SUCCESS)
        return tfenc_error(ctx, TFENC_ERR_MPI, "%s: cannot agree on the sparse logs' name",
                           output_path);
    tfenc_sparse_log *log = calloc(1, sizeof *log);
    size_t size = strlen(output_path) + 80;
    if (log == NULL || (log->path = malloc(size)) == NULL) {
        free(log);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    }
    snprintf(log->path, size, "%s.sparse-%lld.%09lld-%d", output_path, run_stamp[0],
             run_stamp[1], rank);
    log->fd = open(log->path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (log->fd < 0) {
        int error = errno;
        int status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot create the sparse rows' log: %s",
                                 log->path, strerror(error));
        free(log->path);
        free(log);
        return status;
    }
    *log_out = log;
    return TFENC_OK;
}

static int write_all(int fd, const void *data, size_t bytes)
{
    const char *at = data;
    while (bytes > 0) {
        ssize_t n = write(fd, at, bytes);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        at += n;
        bytes -= (size_t)n;
    }
    return 0;
}

int tfenc_sparse_log_append(tfenc_context *ctx, tfenc_sparse_log *log,
                            const tfenc_sparse_rows *rows, const int64_t *documents)
{
    if (rows->n_rows != rows->n_seq)
        return tfenc_error(ctx, TFENC_ERR_PLUGIN, "the model's sparse head handed over %d rows "
                           "for %d sequences", rows->n_rows, rows->n_seq);
    for (int j = 0; j < rows->n_seq; j++) {
        const int64_t start = rows->row_start[j];
        const int32_t n = (int32_t)(rows->row_start[j + 1] - start);
        if (write_all(log->fd, &documents[j], sizeof documents[j]) != 0 ||
            write_all(log->fd, &n, sizeof n) != 0 ||
            write_all(log->fd, rows->indices + start, (size_t)n * sizeof(int32_t)) != 0 ||
            write_all(log->fd, rows->values + start, (size_t)n * sizeof(float)) != 0) {
            int error = errno;
            return tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot write sparse rows: %s", log->path,
                               strerror(error));
        }
    }
    return TFENC_OK;
}

int tfenc_sparse_log_sync(tfenc_context *ctx, tfenc_sparse_log *log)
{
    if (fdatasync(log->fd) != 0 && errno != EINVAL && errno != ENOTSUP) {
        int error = errno;
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot flush sparse rows to disk: %s",
                           log->path, strerror(error));
    }
    return TFENC_OK;
}

void tfenc_sparse_log_close(tfenc_sparse_log *log)
{
    if (log == NULL)
        return;
    if (log->fd >= 0)
        close(log->fd);
    free(log->path);
    free(log);
}

/* ---------------------------------------------------------------- the end */

/* Where each document's row is: which log, at which byte, how many. */
typedef struct row_place {
    int32_t log;   /* -1: not found yet */
    int32_t count;
    int64_t offset; /* of the indices */
} row_place;

typedef struct log_scan {
    tfenc_context *ctx;
    int64_t n_documents;
    row_place *places;
    char **paths;
    int n_logs;
    int status;
} log_scan;

/* Records every whole record of one log. A record cut short at the end is
 * the one a killed writer was writing: its document's length was never
 * written, so the document was encoded again and logged elsewhere. */
static int scan_log(const char *path, void *user)
{
    log_scan *scan = user;
    char **grown = realloc(scan->paths, ((size_t)scan->n_logs + 1) * sizeof *grown);
    if (grown == NULL || (grown[scan->n_logs] = strdup(path)) == NULL) {
        if (grown != NULL)
            scan->paths = grown;
        scan->status = tfenc_error(scan->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        return -1;
    }
    scan->paths = grown;
    const int log = scan->n_logs++;
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        scan->status = tfenc_error(scan->ctx, TFENC_ERR_IO, "%s: cannot read: %s", path,
                                   strerror(errno));
        return -1;
    }
    fseeko(file, 0, SEEK_END);
    const off_t size = ftello(file);
    off_t at = 0;
    for (;;) {
        int64_t document;
        int32_t count;
        if (fseeko(file, at, SEEK_SET) != 0 || fread(&document, sizeof document, 1, file) != 1 ||
            fread(&count, sizeof count, 1, file) != 1)
            break;
        const off_t payload = at + (off_t)(sizeof document + sizeof count);
        const off_t end = payload + (off_t)count * 8;
        if (count < 0 || end > size)
            break;
        if (document < 0 || document >= scan->n_documents) {
            fclose(file);
            scan->status = tfenc_error(scan->ctx, TFENC_ERR_IO, "%s: holds a row of document "
                                       "%lld but the corpus has %lld: a log of another job; "
                                       "remove it", path, (long long)document,
                                       (long long)scan->n_documents);
            return -1;
        }
        /* A document written twice (its length lost to a kill) has the
         * same row both times: the first found is kept. */
        if (scan->places[document].log < 0)
            scan->places[document] = (row_place){.log = log, .count = count, .offset = payload};
        at = end;
    }
    fclose(file);
    return 0;
}

static int read_at(int fd, void *data, size_t bytes, off_t offset)
{
    char *at = data;
    while (bytes > 0) {
        ssize_t n = pread(fd, at, bytes, offset);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        at += n;
        bytes -= (size_t)n;
        offset += n;
    }
    return 0;
}

static hid_t create_1d(hid_t file, const char *name, hid_t type, int64_t size)
{
    if (H5Lexists(file, name, H5P_DEFAULT) > 0)
        H5Ldelete(file, name, H5P_DEFAULT); /* from a finish a kill cut short */
    hsize_t dims[1] = {(hsize_t)size};
    hid_t space = H5Screate_simple(1, dims, NULL);
    hid_t dataset = space < 0 ? -1
                              : H5Dcreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT,
                                           H5P_DEFAULT);
    if (space >= 0)
        H5Sclose(space);
    return dataset;
}

static int write_range(hid_t dataset, hid_t memory_type, hid_t transfer, int64_t first,
                       int64_t count, const void *data)
{
    if (count == 0)
        return 0;
    hsize_t start[1] = {(hsize_t)first}, size[1] = {(hsize_t)count};
    hid_t file_space = H5Dget_space(dataset);
    hid_t memory_space = H5Screate_simple(1, size, NULL);
    int failed = file_space < 0 || memory_space < 0 ||
                 H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start, NULL, size, NULL) < 0 ||
                 H5Dwrite(dataset, memory_type, memory_space, file_space, transfer, data) < 0;
    if (file_space >= 0)
        H5Sclose(file_space);
    if (memory_space >= 0)
        H5Sclose(memory_space);
    return failed ? -1 : 0;
}

/* Rank 0: every document's row into indices and values, in document order. */
static int copy_rows(tfenc_context *ctx, const log_scan *scan, hid_t indices, hid_t values,
                     hid_t transfer, const char *path)
{
    int *fds = malloc((size_t)(scan->n_logs > 0 ? scan->n_logs : 1) * sizeof *fds);
    int32_t *block_indices = malloc((size_t)WRITE_BLOCK_ENTRIES * sizeof *block_indices);
    float *block_values = malloc((size_t)WRITE_BLOCK_ENTRIES * sizeof *block_values);
    int status = fds == NULL || block_indices == NULL || block_values == NULL
                     ? tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory")
                     : TFENC_OK;
    int n_open = 0;
    for (; status == TFENC_OK && n_open < scan->n_logs; n_open++)
        if ((fds[n_open] = open(scan->paths[n_open], O_RDONLY | O_CLOEXEC)) < 0)
            status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot read: %s", scan->paths[n_open],
                                 strerror(errno));
    int64_t written = 0, held = 0;
    for (int64_t i = 0; status == TFENC_OK && i < scan->n_documents; i++) {
        const row_place *p = &scan->places[i];
        if (held + p->count > WRITE_BLOCK_ENTRIES) {
            if (write_range(indices, H5T_NATIVE_INT32, transfer, written, held, block_indices) ||
                write_range(values, H5T_NATIVE_FLOAT, transfer, written, held, block_values)) {
                status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot write sparse rows", path);
                break;
            }
            written += held;
            held = 0;
        }
        if (p->count > 0 &&
            (read_at(fds[p->log], block_indices + held, (size_t)p->count * 4, p->offset) ||
             read_at(fds[p->log], block_values + held, (size_t)p->count * 4,
                     p->offset + (off_t)p->count * 4)))
            status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot read document %lld's row",
                                 scan->paths[p->log], (long long)i);
        held += p->count;
    }
    if (status == TFENC_OK &&
        (write_range(indices, H5T_NATIVE_INT32, transfer, written, held, block_indices) ||
         write_range(values, H5T_NATIVE_FLOAT, transfer, written, held, block_values)))
        status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot write sparse rows", path);
    for (int k = 0; k < n_open; k++)
        if (fds[k] >= 0)
            close(fds[k]);
    free(fds);
    free(block_indices);
    free(block_values);
    return status;
}

/* The vocabulary as fixed-length strings, written by rank 0. */
static int write_vocabulary(tfenc_context *ctx, hid_t file, hid_t transfer, int writes,
                            const tfenc_sparse_finish_options *options)
{
    size_t longest = 1;
    for (int i = 0; i < options->width; i++) {
        size_t length = strlen(options->vocabulary[i]);
        longest = length > longest ? length : longest;
    }
    hid_t type = H5Tcopy(H5T_C_S1);
    if (type < 0 || H5Tset_size(type, longest) < 0 || H5Tset_strpad(type, H5T_STR_NULLPAD) < 0 ||
        H5Tset_cset(type, H5T_CSET_UTF8) < 0) {
        if (type >= 0)
            H5Tclose(type);
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot make the vocabulary's string type",
                           options->path);
    }
    hid_t dataset = create_1d(file, "vocabulary", type, options->width);
    char *text = writes ? calloc((size_t)options->width, longest) : NULL;
    int status = dataset < 0 ? tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot create vocabulary",
                                           options->path)
                 : writes && text == NULL ? tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory")
                                          : TFENC_OK;
    if (status == TFENC_OK && writes) {
        for (int i = 0; i < options->width; i++)
            strncpy(text + (size_t)i * longest, options->vocabulary[i], longest);
        if (write_range(dataset, type, transfer, 0, options->width, text) != 0)
            status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot write vocabulary", options->path);
    }
    free(text);
    if (dataset >= 0)
        H5Dclose(dataset);
    H5Tclose(type);
    return status;
}

static int write_scalar_attribute(hid_t file, const char *name, hid_t type, const void *value)
{
    if (H5Aexists(file, name) > 0)
        H5Adelete(file, name);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t attribute = space < 0 ? -1
                                : H5Acreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    int failed = attribute < 0 || H5Awrite(attribute, type, value) < 0;
    if (attribute >= 0)
        H5Aclose(attribute);
    if (space >= 0)
        H5Sclose(space);
    return failed ? -1 : 0;
}

/* Rank 0 of the writers: where every row is, and the CSR's row pointers.
 * TFENC_ERR_NOT_FOUND (no message) when no log holds anything and the file
 * already has its rows: a finished job run again. */
static int plan_rows(tfenc_context *ctx, tfenc_output *output,
                     const tfenc_sparse_finish_options *options, log_scan *scan, int64_t *indptr)
{
    for (int64_t i = 0; i < options->n_documents; i++)
        scan->places[i].log = -1;
    if (each_log(options->path, scan_log, scan) != 0)
        return scan->status != TFENC_OK
                   ? scan->status
                   : tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot list the sparse rows' logs "
                                 "beside it", options->path);
    int found = 0;
    for (int64_t i = 0; i < options->n_documents && !found; i++)
        found = scan->places[i].log >= 0;
    hid_t file = (hid_t)tfenc_output_hdf5_file(output);
    if (!found && options->n_documents > 0 && H5Lexists(file, "sparse_indptr", H5P_DEFAULT) > 0)
        return TFENC_ERR_NOT_FOUND;
    indptr[0] = 0;
    for (int64_t i = 0; i < options->n_documents; i++) {
        if (scan->places[i].log < 0)
            return tfenc_error(ctx, TFENC_ERR_IO, "%s: document %lld has no sparse row in the "
                               "logs beside the file (PATH.sparse-*): were they removed? Run "
                               "the job again without resume", options->path, (long long)i);
        indptr[i + 1] = indptr[i] + scan->places[i].count;
    }
    return TFENC_OK;
}

int tfenc_sparse_finish(tfenc_context *ctx, tfenc_output *output,
                        const tfenc_sparse_finish_options *options)
{
    MPI_Comm writers = tfenc_output_writers(output);
    int rank = 0;
    if (writers != MPI_COMM_NULL)
        MPI_Comm_rank(writers, &rank);
    const int64_t n = options->n_documents;
    log_scan scan = {.ctx = ctx, .n_documents = n};
    int64_t *indptr = NULL;
    int status = TFENC_OK;
    if (rank == 0) {
        scan.places = malloc((size_t)(n > 0 ? n : 1) * sizeof *scan.places);
        indptr = malloc(((size_t)n + 1) * sizeof *indptr);
        status = scan.places == NULL || indptr == NULL
                     ? tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory")
                     : plan_rows(ctx, output, options, &scan, indptr);
    }
    /* rank 0's verdict and the entry count, for every writer */
    long long shared[2] = {status, rank == 0 && status == TFENC_OK ? indptr[n] : 0};
    if (writers != MPI_COMM_NULL)
        MPI_Bcast(shared, 2, MPI_LONG_LONG, 0, writers);
    int agreed = (int)shared[0];
    const int64_t nnz = shared[1];
    hid_t file = (hid_t)tfenc_output_hdf5_file(output);
    hid_t transfer = (hid_t)tfenc_output_hdf5_transfer(output);
    hid_t datasets[3] = {-1, -1, -1};
    if (agreed == TFENC_OK) {
        /* Created by every writer (collective), written by rank 0. */
        datasets[0] = create_1d(file, "sparse_indptr", H5T_STD_I64LE, n + 1);
        datasets[1] = create_1d(file, "sparse_indices", H5T_STD_I32LE, nnz);
        datasets[2] = create_1d(file, "sparse_values", H5T_IEEE_F32LE, nnz);
        if (datasets[0] < 0 || datasets[1] < 0 || datasets[2] < 0)
            status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot create the sparse datasets",
                                 options->path);
        if (status == TFENC_OK && rank == 0 &&
            write_range(datasets[0], H5T_NATIVE_INT64, transfer, 0, n + 1, indptr) != 0)
            status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot write sparse_indptr",
                                 options->path);
        if (status == TFENC_OK && rank == 0)
            status = copy_rows(ctx, &scan, datasets[1], datasets[2], transfer, options->path);
        int vocabulary_status = options->vocabulary != NULL
                                    ? write_vocabulary(ctx, file, transfer, rank == 0, options)
                                    : TFENC_OK;
        status = status != TFENC_OK ? status : vocabulary_status;
        const int64_t top_k = options->top_k;
        if ((write_scalar_attribute(file, "sparse_top_k", H5T_NATIVE_INT64, &top_k) != 0 ||
             write_scalar_attribute(file, "sparse_threshold", H5T_NATIVE_DOUBLE,
                                    &options->threshold) != 0) &&
            status == TFENC_OK)
            status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot write the sparse attributes",
                                 options->path);
    } else if (agreed == TFENC_ERR_NOT_FOUND) {
        status = TFENC_OK; /* the rows are already in the file */
    } else if (rank != 0) {
        status = tfenc_error(ctx, TFENC_ERR_MPI, "%s: the first writer could not gather the "
                             "sparse rows", options->path);
    }
    for (int k = 0; k < 3; k++)
        if (datasets[k] >= 0)
            H5Dclose(datasets[k]);
    for (int k = 0; k < scan.n_logs; k++)
        free(scan.paths[k]);
    free(scan.paths);
    free(scan.places);
    free(indptr);
    return status;
}
