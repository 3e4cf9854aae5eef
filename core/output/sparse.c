/* Sparse rows: kept per microbatch, logged per writer, written as CSR in
 * document order when the job completes (sparse.h says why). */
#include "output/sparse.h"

#include "base/files.h"
#include "base/growth.h"
#include "base/hdf5_attributes.h"
#include "base/hdf5_error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

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
    rows->nonfinite_sequence = -1;
    rows->destination = (tfenc_sparse_destination){.receive = tfenc_sparse_rows_sink,
                                                   .user = rows};
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
    rows->nonfinite_sequence = -1;
    rows->row_start[0] = 0;
    return TFENC_OK;
}

static int reserve_entries(tfenc_context *ctx, tfenc_sparse_rows *rows, int64_t needed)
{
    if (needed <= rows->capacity)
        return TFENC_OK;
    const int64_t capacity = tfenc_grown_capacity(rows->capacity, needed, 65536, INT64_MAX);
    int grew = 1; /* a capacity of -1 (too many) fails each growth */
    TFENC_GROW_ARRAY(rows->indices, capacity, grew);
    TFENC_GROW_ARRAY(rows->values, capacity, grew);
    if (!grew)
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
        /* As the host checks dense rows (model.c): a NaN would pass no
         * threshold and vanish, an infinity would be written. */
        if (!isfinite(values[j])) {
            /* Worded as the dense check words it ("LAYER made ..."), so
             * the layer's name leads instead of the context's prefix. */
            const char *scope = ctx->scope;
            tfenc_context_set_scope(ctx, NULL);
            int status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s made a non-finite sparse value "
                                     "(%s at column %d): the weights or the input overflow "
                                     "float32", scope != NULL ? scope : "the sparse head",
                                     isnan(values[j]) ? "NaN" : "infinity", indices[j]);
            tfenc_context_set_scope(ctx, scope);
            rows->nonfinite_sequence = sequence;
            return status;
        }
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

int tfenc_sparse_rows_nonfinite_sequence(const tfenc_sparse_rows *rows)
{
    return rows->nonfinite_sequence;
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

/* A log's header: the magic string, the format's version (uint32), the
 * width (int32), the corpus's documents (int64), then the CRC-32 of those
 * 32 bytes. A record's header: document (int64), count (int32), the
 * payload's CRC-32, then the CRC-32 of those 16 bytes. Native byte order:
 * a log lives only as long as the job that writes it. */
#define LOG_MAGIC "tfenc sparse log"
#define LOG_MAGIC_SIZE 16
#define LOG_VERSION 1u
#define LOG_HEADER_SIZE 36
#define RECORD_HEADER_SIZE 20

struct tfenc_sparse_log {
    char *path;
    int fd;
};

static uint32_t checksum(uint32_t crc, const void *data, size_t bytes)
{
    /* zlib's crc32 of no bytes from a NULL buffer is 0, not `crc` */
    return bytes > 0 ? (uint32_t)crc32_z(crc, data, bytes) : crc;
}

/* The header every log of this job begins with. */
static void make_log_header(unsigned char header[LOG_HEADER_SIZE],
                            const tfenc_sparse_settings *settings)
{
    const uint32_t version = LOG_VERSION;
    const int32_t width = settings->width;
    const int64_t n_documents = settings->n_documents;
    memcpy(header, LOG_MAGIC, LOG_MAGIC_SIZE);
    memcpy(header + 16, &version, 4);
    memcpy(header + 20, &width, 4);
    memcpy(header + 24, &n_documents, 8);
    const uint32_t crc = checksum(0, header, 32);
    memcpy(header + 32, &crc, 4);
}

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

int tfenc_sparse_each_log(const char *output_path, int (*visit)(const char *path, void *user),
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

int tfenc_sparse_is_log(const char *path)
{
    struct stat file;
    char magic[LOG_MAGIC_SIZE];
    /* O_NONBLOCK: a FIFO named as the output must not hang the check */
    int fd = stat(path, &file) == 0 && S_ISREG(file.st_mode)
                 ? open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
                 : -1;
    int is_log = fd >= 0 && pread(fd, magic, sizeof magic, 0) == (ssize_t)sizeof magic &&
                 memcmp(magic, LOG_MAGIC, LOG_MAGIC_SIZE) == 0;
    if (fd >= 0)
        close(fd);
    return is_log;
}

static int remove_log(const char *path, void *user)
{
    (void)user;
    unlink(path);
    return 0;
}

void tfenc_sparse_remove_logs(const char *output_path)
{
    tfenc_sparse_each_log(output_path, remove_log, NULL);
}

/* Where an output's logs are named from. */
static const char *logs_of(const tfenc_sparse_settings *settings)
{
    return settings->log_path != NULL ? settings->log_path : settings->path;
}

int tfenc_sparse_log_open(tfenc_context *ctx, const tfenc_sparse_settings *settings,
                          MPI_Comm writers, int resumed, tfenc_sparse_log **log_out)
{
    *log_out = NULL;
    const char *output_path = logs_of(settings);
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
    unsigned char header[LOG_HEADER_SIZE];
    make_log_header(header, settings);
    log->fd = open(log->path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    int error = log->fd < 0 ? errno : tfenc_file_write_all(log->fd, header, sizeof header);
    if (error != 0) {
        int status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot create the sparse rows' log: %s",
                                 log->path, strerror(error));
        tfenc_sparse_log_close(log);
        return status;
    }
    *log_out = log;
    return TFENC_OK;
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
        const size_t bytes = (size_t)n * 4;
        const int32_t *indices = n > 0 ? rows->indices + start : NULL;
        const float *values = n > 0 ? rows->values + start : NULL;
        unsigned char head[RECORD_HEADER_SIZE];
        const uint32_t payload = checksum(checksum(0, indices, bytes), values, bytes);
        memcpy(head, &documents[j], 8);
        memcpy(head + 8, &n, 4);
        memcpy(head + 12, &payload, 4);
        const uint32_t crc = checksum(0, head, 16);
        memcpy(head + 16, &crc, 4);
        int error = tfenc_file_write_all(log->fd, head, sizeof head);
        if (error == 0)
            error = tfenc_file_write_all(log->fd, indices, bytes);
        if (error == 0)
            error = tfenc_file_write_all(log->fd, values, bytes);
        if (error != 0) {
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

/* ------------------------------------------------------- reading the logs */

/* Where each document's row is: which log, at which byte, how many. */
typedef struct row_place {
    int32_t log;   /* -1: not found yet */
    int32_t count;
    int64_t offset; /* of the indices */
} row_place;

typedef struct log_scan {
    tfenc_context *ctx;
    const tfenc_sparse_settings *settings;
    row_place *places; /* [n_documents] */
    char **paths;
    int n_logs;
    int64_t n_records; /* sound ones */
    int32_t *indices;  /* [width] a record's payload */
    float *values;
    int status;
    /* The first damage, for the message; how many records in all. */
    char *damaged_log;
    long long damaged_at;
    const char *damage;
    int64_t n_damaged;
} log_scan;

static void note_damage(log_scan *scan, const char *path, off_t at, const char *what)
{
    if (scan->n_damaged++ == 0) {
        scan->damaged_log = strdup(path);
        scan->damaged_at = (long long)at;
        scan->damage = what;
    }
}

/* The sentence naming the first damage ("" for none). */
static void describe_damage(const log_scan *scan, char *text, size_t size)
{
    if (scan->n_damaged == 0 || size == 0) {
        if (size > 0)
            text[0] = '\0';
        return;
    }
    char more[64] = "";
    if (scan->n_damaged > 1)
        snprintf(more, sizeof more, ", and %lld more damaged record%s",
                 (long long)scan->n_damaged - 1, scan->n_damaged > 2 ? "s" : "");
    snprintf(text, size, "%s: damaged at byte %lld (%s)%s",
             scan->damaged_log != NULL ? scan->damaged_log : "a sparse log", scan->damaged_at,
             scan->damage, more);
}

/* Why a record's payload (in scan->indices and values) is no row, or NULL. */
static const char *check_payload(const log_scan *scan, int32_t count, uint32_t crc)
{
    const size_t bytes = (size_t)count * 4;
    if (checksum(checksum(0, scan->indices, bytes), scan->values, bytes) != crc)
        return "a row's checksum does not match";
    const tfenc_sparse_settings *s = scan->settings;
    for (int32_t j = 0; j < count; j++) {
        if (scan->indices[j] < 0 || scan->indices[j] >= s->width ||
            (j > 0 && scan->indices[j] <= scan->indices[j - 1]))
            return "a row's column is outside the vocabulary or out of order";
        if (!isfinite(scan->values[j]) || !(scan->values[j] > s->threshold))
            return "a row's value is not finite or not above sparse_threshold";
    }
    return NULL;
}

/* Records every sound record of one log. A record cut short at the end is
 * the one a killed writer was writing: its document's length was never
 * written, so the document was encoded again and logged elsewhere. A
 * damaged record is noted and skipped; a damaged record header, which
 * leaves nothing to find the next record by, ends the log there. */
static int scan_log(const char *path, void *user)
{
    log_scan *scan = user;
    const tfenc_sparse_settings *s = scan->settings;
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
    unsigned char header[LOG_HEADER_SIZE], expected[LOG_HEADER_SIZE];
    make_log_header(expected, s);
    const size_t got = fread(header, 1, sizeof header, file);
    /* Shorter: cut short by a kill as it was made (empty, if it is so far). */
    if (memcmp(header, expected, got) != 0)
        note_damage(scan, path, 0, "not a sparse log of this job: damaged, or another format "
                                   "or corpus");
    off_t at = LOG_HEADER_SIZE;
    while (got == sizeof header && memcmp(header, expected, got) == 0) {
        unsigned char head[RECORD_HEADER_SIZE];
        int64_t document;
        int32_t count;
        uint32_t payload, crc;
        if (fread(head, 1, sizeof head, file) != sizeof head)
            break;
        memcpy(&document, head, 8);
        memcpy(&count, head + 8, 4);
        memcpy(&payload, head + 12, 4);
        memcpy(&crc, head + 16, 4);
        if (checksum(0, head, 16) != crc) {
            note_damage(scan, path, at, "a record's header checksum does not match; the rest "
                                        "of the log is dropped");
            break;
        }
        if (document < 0 || document >= s->n_documents || count < 0 || count > s->width ||
            (s->top_k > 0 && count > s->top_k)) {
            note_damage(scan, path, at, "a record's document or count is out of range; the "
                                        "rest of the log is dropped");
            break;
        }
        if (fread(scan->indices, 4, (size_t)count, file) != (size_t)count ||
            fread(scan->values, 4, (size_t)count, file) != (size_t)count)
            break;
        const char *problem = check_payload(scan, count, payload);
        if (problem != NULL) {
            note_damage(scan, path, at, problem);
        } else {
            scan->n_records++;
            /* A document written twice (its length lost to a kill) has
             * the same row both times: the first found is kept. */
            if (scan->places[document].log < 0)
                scan->places[document] = (row_place){
                    .log = log, .count = count, .offset = at + RECORD_HEADER_SIZE};
        }
        at += RECORD_HEADER_SIZE + (off_t)count * 8;
    }
    fclose(file);
    return 0;
}

/* Rank 0 of the writers: every log of the path read and checked into
 * scan->places. */
static int scan_logs(tfenc_context *ctx, const tfenc_sparse_settings *settings, log_scan *scan)
{
    const int64_t n = settings->n_documents;
    *scan = (log_scan){.ctx = ctx, .settings = settings};
    scan->places = malloc((size_t)(n > 0 ? n : 1) * sizeof *scan->places);
    scan->indices = malloc((size_t)settings->width * sizeof *scan->indices);
    scan->values = malloc((size_t)settings->width * sizeof *scan->values);
    if (scan->places == NULL || scan->indices == NULL || scan->values == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    for (int64_t i = 0; i < n; i++)
        scan->places[i].log = -1;
    if (tfenc_sparse_each_log(logs_of(settings), scan_log, scan) != 0)
        return scan->status != TFENC_OK
                   ? scan->status
                   : tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot list the sparse rows' logs "
                                 "beside it", settings->path);
    return TFENC_OK;
}

static void free_scan(log_scan *scan)
{
    for (int k = 0; k < scan->n_logs; k++)
        free(scan->paths[k]);
    free(scan->paths);
    free(scan->places);
    free(scan->indices);
    free(scan->values);
    free(scan->damaged_log);
}

/* ----------------------------------------------------------- a resume */

int tfenc_sparse_has_row(const uint8_t *logged, int64_t document)
{
    return (logged[document / 8] >> (document % 8)) & 1;
}

int tfenc_sparse_logged(tfenc_context *ctx, tfenc_output *output,
                        const tfenc_sparse_settings *settings, int was_complete,
                        uint8_t **logged, char *report, size_t report_size)
{
    MPI_Comm writers = tfenc_output_writers(output);
    int rank = 0;
    if (writers != MPI_COMM_NULL)
        MPI_Comm_rank(writers, &rank);
    *logged = NULL;
    if (report_size > 0)
        report[0] = '\0';
    const int64_t n = settings->n_documents;
    const size_t bytes = (size_t)(n + 7) / 8;
    uint8_t *bits = calloc(bytes > 0 ? bytes : 1, 1);
    int status = bits == NULL ? tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory") : TFENC_OK;
    int whole = 0;
    if (rank == 0 && status == TFENC_OK) {
        log_scan scan;
        status = scan_logs(ctx, settings, &scan);
        hid_t file = (hid_t)tfenc_output_hdf5_file(output);
        /* complete = 1 is written after the CSR: with no row left in any
         * log (they are removed after it), the CSR in the file is whole. */
        whole = status == TFENC_OK && was_complete && scan.n_records == 0 &&
                scan.n_damaged == 0 && H5Lexists(file, "sparse_indptr", H5P_DEFAULT) > 0;
        H5Eclear2(H5E_DEFAULT);
        for (int64_t i = 0; status == TFENC_OK && i < n; i++)
            if (scan.places[i].log >= 0)
                bits[i / 8] |= (uint8_t)(1u << (i % 8));
        describe_damage(&scan, report, report_size);
        free_scan(&scan);
    }
    long long shared[2] = {status, whole};
    if (writers != MPI_COMM_NULL) {
        MPI_Bcast(shared, 2, MPI_LONG_LONG, 0, writers);
        if (shared[0] == TFENC_OK)
            MPI_Bcast(bits, (int)(bytes > 0 ? bytes : 1), MPI_UINT8_T, 0, writers);
    }
    if (shared[0] != TFENC_OK && rank != 0)
        status = tfenc_error(ctx, TFENC_ERR_MPI, "%s: the first writer could not read the "
                             "sparse rows' logs", settings->path);
    if (status != TFENC_OK || shared[1]) {
        free(bits);
        return status;
    }
    *logged = bits;
    return TFENC_OK;
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

static int write_failed(tfenc_context *ctx, const char *path)
{
    char detail[256] = "";
    return tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot write sparse rows: %s", path,
                       tfenc_hdf5_error_detail(detail, sizeof detail));
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
    for (int64_t i = 0; status == TFENC_OK && i < scan->settings->n_documents; i++) {
        const row_place *p = &scan->places[i];
        if (held + p->count > WRITE_BLOCK_ENTRIES) {
            if (write_range(indices, H5T_NATIVE_INT32, transfer, written, held, block_indices) ||
                write_range(values, H5T_NATIVE_FLOAT, transfer, written, held, block_values)) {
                status = write_failed(ctx, path);
                break;
            }
            written += held;
            held = 0;
        }
        if (p->count > 0 &&
            (tfenc_file_read_at(fds[p->log], block_indices + held, (size_t)p->count * 4,
                                p->offset) ||
             tfenc_file_read_at(fds[p->log], block_values + held, (size_t)p->count * 4,
                                p->offset + (uint64_t)p->count * 4)))
            status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot read document %lld's row",
                                 scan->paths[p->log], (long long)i);
        held += p->count;
    }
    if (status == TFENC_OK &&
        (write_range(indices, H5T_NATIVE_INT32, transfer, written, held, block_indices) ||
         write_range(values, H5T_NATIVE_FLOAT, transfer, written, held, block_values)))
        status = write_failed(ctx, path);
    for (int k = 0; k < n_open; k++)
        if (fds[k] >= 0)
            close(fds[k]);
    free(fds);
    free(block_indices);
    free(block_values);
    return status;
}

/* The longest token's bytes (at least 1): the vocabulary's string size. */
static size_t longest_token(const char *const *vocabulary, int width)
{
    size_t longest = 1;
    for (int i = 0; vocabulary != NULL && i < width; i++) {
        size_t length = strlen(vocabulary[i]);
        longest = length > longest ? length : longest;
    }
    return longest;
}

/* The vocabulary as fixed-length strings, written by rank 0. */
static int write_vocabulary(tfenc_context *ctx, hid_t file, hid_t transfer, int writes,
                            const tfenc_sparse_settings *settings, const char *const *vocabulary)
{
    const size_t longest = longest_token(vocabulary, settings->width);
    hid_t type = H5Tcopy(H5T_C_S1);
    if (type < 0 || H5Tset_size(type, longest) < 0 || H5Tset_strpad(type, H5T_STR_NULLPAD) < 0 ||
        H5Tset_cset(type, H5T_CSET_UTF8) < 0) {
        if (type >= 0)
            H5Tclose(type);
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot make the vocabulary's string type",
                           settings->path);
    }
    hid_t dataset = create_1d(file, "vocabulary", type, settings->width);
    char *text = writes ? calloc((size_t)settings->width, longest) : NULL;
    int status = dataset < 0 ? tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot create vocabulary",
                                           settings->path)
                 : writes && text == NULL ? tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory")
                                          : TFENC_OK;
    if (status == TFENC_OK && writes) {
        for (int i = 0; i < settings->width; i++)
            strncpy(text + (size_t)i * longest, vocabulary[i], longest);
        if (write_range(dataset, type, transfer, 0, settings->width, text) != 0)
            status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot write vocabulary", settings->path);
    }
    free(text);
    if (dataset >= 0)
        H5Dclose(dataset);
    H5Tclose(type);
    return status;
}

/* Rank 0 of the writers: where every row is, and the CSR's row pointers.
 * TFENC_ERR_NOT_FOUND (no message) when the file's CSR is whole and no log
 * holds a row: a finished job run again. */
static int plan_rows(tfenc_context *ctx, const tfenc_sparse_settings *settings, int csr_whole,
                     log_scan *scan, int64_t *indptr)
{
    int status = scan_logs(ctx, settings, scan);
    if (status != TFENC_OK)
        return status;
    if (csr_whole && scan->n_records == 0)
        return TFENC_ERR_NOT_FOUND;
    char damage[TFENC_MESSAGE_MAX / 2];
    describe_damage(scan, damage, sizeof damage);
    indptr[0] = 0;
    for (int64_t i = 0; i < settings->n_documents; i++) {
        if (scan->places[i].log < 0 && scan->n_damaged > 0)
            return tfenc_error(ctx, TFENC_ERR_IO, "%s; document %lld has no sound sparse row "
                               "left, so %s is left incomplete: run the job again, which "
                               "resumes and encodes the documents without a row again",
                               damage, (long long)i, settings->path);
        if (scan->places[i].log < 0)
            return tfenc_error(ctx, TFENC_ERR_IO, "%s: document %lld has no sparse row in the "
                               "logs beside the file (PATH.sparse-*): were they removed? The "
                               "file is left incomplete: run the job again, which resumes and "
                               "encodes the documents without a row again", settings->path,
                               (long long)i);
        indptr[i + 1] = indptr[i] + scan->places[i].count;
    }
    return TFENC_OK;
}

/* The bytes HDF5 may need beyond the CSR's data: the datasets' headers,
 * the attributes, the metadata flushed at the close. */
#define METADATA_MARGIN ((off_t)256 << 10)

/* Rank 0, before the CSR touches the file: its bytes are allocated to the
 * file at once (past its end, its size unchanged). A disk that cannot hold
 * them fails here, with the file as it was; one that fills up during
 * HDF5's writes instead would leave a file HDF5 can no longer open, and a
 * process HDF5 cannot shut down. A file system without fallocate gets the
 * free-space check instead. */
static int reserve_space(tfenc_context *ctx, const char *path, off_t bytes)
{
    bytes += METADATA_MARGIN;
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    struct stat file;
    if (fd < 0 || fstat(fd, &file) != 0) {
        int error = errno;
        if (fd >= 0)
            close(fd);
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot open it to write the sparse rows: %s",
                           path, strerror(error));
    }
    int error = fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, file.st_size + bytes) == 0 ? 0 : errno;
    close(fd);
    double available = -1;
    /* EINVAL: a file system that knows fallocate but not KEEP_SIZE */
    if (error == EOPNOTSUPP || error == ENOSYS || error == EINVAL) {
        int status = tfenc_file_free_space(ctx, "[job] output", path, &available);
        if (status != TFENC_OK)
            return status;
        error = available >= 0 && available < (double)bytes ? ENOSPC : 0;
    }
    if (error == ENOSPC || error == EDQUOT)
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: the sparse rows need %.1f MiB more, which its "
                           "file system does not have (%s); the file is left incomplete: free "
                           "some space and run the job again, which resumes and writes them",
                           path, (double)bytes / 1048576.0, strerror(error));
    if (error != 0)
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot allocate %.1f MiB for the sparse rows: "
                           "%s", path, (double)bytes / 1048576.0, strerror(error));
    return TFENC_OK;
}

void tfenc_sparse_release_space(const char *output_path)
{
    int fd = open(output_path, O_WRONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat file;
    /* Truncating to its own size frees the blocks reserve_space allocated
     * past the end and HDF5 did not use. */
    if (fd >= 0 && fstat(fd, &file) == 0 && S_ISREG(file.st_mode) &&
        ftruncate(fd, file.st_size) != 0) {
        /* best effort: at worst the margin stays allocated */
    }
    if (fd >= 0)
        close(fd);
}

int tfenc_sparse_finish(tfenc_context *ctx, tfenc_output *output,
                        const tfenc_sparse_settings *settings, const char *const *vocabulary,
                        int csr_whole)
{
    MPI_Comm writers = tfenc_output_writers(output);
    int rank = 0;
    if (writers != MPI_COMM_NULL)
        MPI_Comm_rank(writers, &rank);
    const int64_t n = settings->n_documents;
    log_scan scan = {0};
    int64_t *indptr = NULL;
    int status = TFENC_OK;
    if (rank == 0) {
        indptr = malloc(((size_t)n + 1) * sizeof *indptr);
        status = indptr == NULL ? tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory")
                                : plan_rows(ctx, settings, csr_whole, &scan, indptr);
        if (status == TFENC_OK)
            status = reserve_space(ctx, settings->path,
                                   (off_t)(n + 1) * 8 + (off_t)indptr[n] * 8 +
                                       (off_t)settings->width *
                                           (off_t)longest_token(vocabulary, settings->width));
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
                                 settings->path);
        if (status == TFENC_OK && rank == 0 &&
            write_range(datasets[0], H5T_NATIVE_INT64, transfer, 0, n + 1, indptr) != 0)
            status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot write sparse_indptr",
                                 settings->path);
        if (status == TFENC_OK && rank == 0)
            status = copy_rows(ctx, &scan, datasets[1], datasets[2], transfer, settings->path);
        int vocabulary_status = vocabulary != NULL
                                    ? write_vocabulary(ctx, file, transfer, rank == 0, settings,
                                                       vocabulary)
                                    : TFENC_OK;
        status = status != TFENC_OK ? status : vocabulary_status;
        const int64_t top_k = settings->top_k;
        if ((tfenc_hdf5_write_attribute(file, "sparse_top_k", H5T_NATIVE_INT64, H5T_NATIVE_INT64,
                                        &top_k) != 0 ||
             tfenc_hdf5_write_attribute(file, "sparse_threshold", H5T_NATIVE_DOUBLE,
                                        H5T_NATIVE_DOUBLE, &settings->threshold) != 0) &&
            status == TFENC_OK)
            status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot write the sparse attributes",
                                 settings->path);
    } else if (agreed == TFENC_ERR_NOT_FOUND) {
        status = TFENC_OK; /* the rows are already in the file */
    } else if (rank != 0) {
        status = tfenc_error(ctx, TFENC_ERR_MPI, "%s: the first writer could not gather the "
                             "sparse rows", settings->path);
    }
    for (int k = 0; k < 3; k++)
        if (datasets[k] >= 0)
            H5Dclose(datasets[k]);
    free_scan(&scan);
    free(indptr);
    return status;
}
