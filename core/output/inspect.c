/* Reads an output file's attributes and lengths, read-only and without
 * HDF5's file lock, into a tfenc_inspection. */
#include "output/inspect.h"
#include "base/files.h"
#include "output/ownership.h"
#include "base/hdf5_error.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <hdf5.h>

#include "base/context.h"
#include "job/jobfile.h"

/* Lengths are counted this many at a time: bounded memory for any corpus. */
#define LENGTHS_PER_READ ((hsize_t)1 << 20)

/* ------------------------------------------------------------ attributes */

static void note_unknown(tfenc_inspection *inspection, const char *name)
{
    size_t used = strlen(inspection->unknown);
    snprintf(inspection->unknown + used, sizeof inspection->unknown - used, "%s%s",
             used > 0 ? ", " : "", name);
}

/* A string attribute as a new string; NULL when absent or not a string. */
static char *read_string(hid_t file, const char *name)
{
    char *copy = NULL;
    if (H5Aexists(file, name) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return NULL;
    }
    hid_t attribute = H5Aopen(file, name, H5P_DEFAULT);
    hid_t stored = attribute >= 0 ? H5Aget_type(attribute) : -1;
    hid_t type = H5Tcopy(H5T_C_S1);
    if (stored >= 0 && H5Tget_class(stored) == H5T_STRING && type >= 0
        && H5Tset_cset(type, H5Tget_cset(stored)) >= 0) {
        if (H5Tis_variable_str(stored) > 0) {
            char *value = NULL;
            if (H5Tset_size(type, H5T_VARIABLE) >= 0 && H5Aread(attribute, type, &value) >= 0) {
                copy = strdup(value != NULL ? value : "");
                hid_t space = H5Screate(H5S_SCALAR);
                H5Dvlen_reclaim(type, space, H5P_DEFAULT, &value);
                H5Sclose(space);
            }
        } else {
            /* Fixed-length: what h5py writes for numpy byte strings. */
            size_t size = H5Tget_size(stored);
            copy = calloc(size + 1, 1);
            if (copy != NULL && (H5Tset_size(type, size) < 0 || H5Aread(attribute, type, copy) < 0)) {
                free(copy);
                copy = NULL;
            }
        }
    }
    if (type >= 0)
        H5Tclose(type);
    if (stored >= 0)
        H5Tclose(stored);
    if (attribute >= 0)
        H5Aclose(attribute);
    H5Eclear2(H5E_DEFAULT);
    return copy;
}

/* A scalar attribute of HDF5 class `kind` read as `memory_type` into
 * *value: 1 when read, 0 when absent or of another class. */
static int read_number(hid_t file, const char *name, H5T_class_t kind, hid_t memory_type,
                       void *value)
{
    int found = 0;
    if (H5Aexists(file, name) > 0) {
        hid_t attribute = H5Aopen(file, name, H5P_DEFAULT);
        hid_t stored = attribute >= 0 ? H5Aget_type(attribute) : -1;
        hid_t space = attribute >= 0 ? H5Aget_space(attribute) : -1;
        /* One value only: H5Aread of an array would write past *value. */
        if (stored >= 0 && H5Tget_class(stored) == kind && space >= 0
            && H5Sget_simple_extent_npoints(space) == 1
            && H5Aread(attribute, memory_type, value) >= 0)
            found = 1;
        if (space >= 0)
            H5Sclose(space);
        if (stored >= 0)
            H5Tclose(stored);
        if (attribute >= 0)
            H5Aclose(attribute);
    }
    H5Eclear2(H5E_DEFAULT);
    return found;
}

/* An integer attribute; 0 when absent (then *found = 0). */
static int64_t read_integer(hid_t file, const char *name, int *found)
{
    int64_t value = 0;
    *found = read_number(file, name, H5T_INTEGER, H5T_NATIVE_INT64, &value);
    return *found ? value : 0;
}

/* A floating-point attribute; NAN when absent. */
static double read_double(hid_t file, const char *name)
{
    double value = NAN;
    return read_number(file, name, H5T_FLOAT, H5T_NATIVE_DOUBLE, &value) ? value : NAN;
}

/* ----------------------------------------------------------- consistency */

/* What an HDF5 type is, for messages: "int8", "float32", "string", ... */
static void describe_type(hid_t type, char *text, size_t size)
{
    H5T_class_t kind = H5Tget_class(type);
    size_t bytes = H5Tget_size(type);
    if (kind == H5T_INTEGER)
        snprintf(text, size, "%sint%zu", H5Tget_sign(type) == H5T_SGN_NONE ? "u" : "",
                 8 * bytes);
    else if (kind == H5T_FLOAT)
        snprintf(text, size, "float%zu", 8 * bytes);
    else if (kind == H5T_STRING)
        snprintf(text, size, "string");
    else if (kind == H5T_COMPOUND)
        snprintf(text, size, "compound");
    else
        snprintf(text, size, "class-%d", (int)kind);
}

/* The shape of a dataspace as "[3]", "[50, 16]" or "a scalar". */
static void describe_space(hid_t space, char *text, size_t size)
{
    hsize_t dims[H5S_MAX_RANK];
    int rank = H5Sget_simple_extent_ndims(space);
    if (rank <= 0) {
        snprintf(text, size, "a scalar");
        return;
    }
    H5Sget_simple_extent_dims(space, dims, NULL);
    size_t used = (size_t)snprintf(text, size, "[");
    for (int i = 0; i < rank && used < size; i++)
        used += (size_t)snprintf(text + used, size - used, "%s%llu", i > 0 ? ", " : "",
                                 (unsigned long long)dims[i]);
    if (used < size)
        snprintf(text + used, size - used, "]");
}

/* An integer attribute that a tfenc output holds as one value: refused
 * when present in another form (an array, a float, a string), which the
 * reader would otherwise take for absent or misread. */
static int check_integer_attribute(tfenc_context *ctx, const char *path, hid_t file,
                                   const char *name)
{
    if (H5Aexists(file, name) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return TFENC_OK;
    }
    hid_t attribute = H5Aopen(file, name, H5P_DEFAULT);
    hid_t type = attribute >= 0 ? H5Aget_type(attribute) : -1;
    hid_t space = attribute >= 0 ? H5Aget_space(attribute) : -1;
    int status = TFENC_OK;
    if (type >= 0 && space >= 0
        && (H5Tget_class(type) != H5T_INTEGER || H5Sget_simple_extent_npoints(space) != 1)) {
        char type_text[32], shape[96];
        describe_type(type, type_text, sizeof type_text);
        describe_space(space, shape, sizeof shape);
        status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                             "%s: inconsistent: attribute '%s' is %s of %s, expected one "
                             "integer", path, name, shape, type_text);
    }
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    if (attribute >= 0)
        H5Aclose(attribute);
    H5Eclear2(H5E_DEFAULT);
    return status;
}

/* A dataset of the given type class and rank whose dimensions agree with
 * `expected` (a negative entry: any). The message says what is there. */
static int check_dataset(tfenc_context *ctx, const char *path, hid_t file, const char *name,
                         H5T_class_t kind, const char *kind_text, int rank,
                         const int64_t *expected, const char *expected_text)
{
    hid_t dataset = H5Dopen2(file, name, H5P_DEFAULT);
    hid_t type = dataset >= 0 ? H5Dget_type(dataset) : -1;
    hid_t space = dataset >= 0 ? H5Dget_space(dataset) : -1;
    int status = TFENC_OK;
    if (dataset < 0 || type < 0 || space < 0) {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: inconsistent: '%s' is not a readable "
                             "dataset", path, name);
    } else {
        hsize_t dims[H5S_MAX_RANK];
        int found_rank = H5Sget_simple_extent_ndims(space);
        int agrees = H5Tget_class(type) == kind && found_rank == rank;
        if (agrees && H5Sget_simple_extent_dims(space, dims, NULL) == rank)
            for (int i = 0; i < rank; i++)
                if (expected[i] >= 0 && dims[i] != (hsize_t)expected[i])
                    agrees = 0;
        if (!agrees) {
            char type_text[32], shape[96];
            describe_type(type, type_text, sizeof type_text);
            describe_space(space, shape, sizeof shape);
            status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                                 "%s: inconsistent: dataset '%s' holds %s %s values, expected "
                                 "%s %s", path, name, shape, type_text, expected_text, kind_text);
        }
    }
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    if (dataset >= 0)
        H5Dclose(dataset);
    H5Eclear2(H5E_DEFAULT);
    return status;
}

/* The datasets' types and shapes against the attributes: a file whose
 * names are right but whose contents are not what tfenc writes is not
 * reported as complete. */
static int check_shapes(tfenc_context *ctx, const char *path, hid_t file,
                        const tfenc_inspection *inspection);

/* Sparse output (output/sparse.h): lengths, and once the job completed the
 * CSR, whose entry count the inspection learns. */
static int check_sparse_shapes(tfenc_context *ctx, const char *path, hid_t file,
                               tfenc_inspection *inspection)
{
    const int64_t n_documents = inspection->n_documents;
    int64_t documents[1] = {n_documents}, entries[1] = {n_documents >= 0 ? n_documents + 1 : -1};
    char expected[96];
    snprintf(expected, sizeof expected, "[n_documents %lld]", (long long)n_documents);
    int status = check_dataset(ctx, path, file, "lengths", H5T_INTEGER, "integer", 1, documents,
                               expected);
    inspection->sparse_values = -1;
    int written = H5Lexists(file, "sparse_indptr", H5P_DEFAULT) > 0;
    inspection->has_vocabulary = H5Lexists(file, "vocabulary", H5P_DEFAULT) > 0;
    H5Eclear2(H5E_DEFAULT);
    if (status != TFENC_OK || !written) {
        if (status == TFENC_OK && inspection->complete)
            status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: inconsistent: complete = 1 but no "
                                 "dataset 'sparse_indptr'", path);
        return status;
    }
    snprintf(expected, sizeof expected, "[n_documents + 1 = %lld]", (long long)entries[0]);
    status = check_dataset(ctx, path, file, "sparse_indptr", H5T_INTEGER, "integer", 1, entries,
                           expected);
    hid_t dataset = status == TFENC_OK ? H5Dopen2(file, "sparse_values", H5P_DEFAULT) : -1;
    hid_t space = dataset >= 0 ? H5Dget_space(dataset) : -1;
    hsize_t values = 0;
    if (space >= 0 && H5Sget_simple_extent_ndims(space) == 1)
        H5Sget_simple_extent_dims(space, &values, NULL);
    if (space >= 0)
        H5Sclose(space);
    if (dataset >= 0)
        H5Dclose(dataset);
    H5Eclear2(H5E_DEFAULT);
    int64_t count[1] = {(int64_t)values};
    snprintf(expected, sizeof expected, "[%lld, as sparse_values]", (long long)values);
    if (status == TFENC_OK)
        status = check_dataset(ctx, path, file, "sparse_values", H5T_FLOAT, "floating-point", 1,
                               count, "[entries]");
    if (status == TFENC_OK)
        status = check_dataset(ctx, path, file, "sparse_indices", H5T_INTEGER, "integer", 1,
                               count, expected);
    int found = 0;
    inspection->sparse_values = (int64_t)values;
    inspection->sparse_top_k = read_integer(file, "sparse_top_k", &found);
    inspection->sparse_threshold = read_double(file, "sparse_threshold");
    return status;
}

static int check_shapes(tfenc_context *ctx, const char *path, hid_t file,
                        const tfenc_inspection *inspection)
{
    const int64_t n_documents = inspection->n_documents, d_model = inspection->d_model;
    /* Per-token rows: hidden states, or a multi-vector head's vectors. */
    int vectors = H5Lexists(file, "vectors", H5P_DEFAULT) > 0;
    int tokens = vectors || H5Lexists(file, "hidden", H5P_DEFAULT) > 0;
    int row_runs = tokens || H5Lexists(file, "chunk_offsets", H5P_DEFAULT) > 0;
    H5Eclear2(H5E_DEFAULT);
    /* Rows: one per document, or per token (hidden) or chunk (chunk_offsets). */
    int64_t rows[2] = {row_runs ? inspection->n_tokens : n_documents, d_model};
    char expected[128];
    snprintf(expected, sizeof expected, "[%s %lld, d_model %lld]",
             row_runs ? (tokens ? "n_tokens" : "chunks") : "n_documents", (long long)rows[0],
             (long long)rows[1]);
    /* Compact dtypes (output/quantize.h) are integers, binary ones 8
     * dimensions a byte; a head's scores have their own name. */
    const char *dtype = inspection->dtype != NULL ? inspection->dtype : "";
    const int packed = strcmp(dtype, "binary") == 0 || strcmp(dtype, "ubinary") == 0;
    const int integer = packed || strcmp(dtype, "int8") == 0 || strcmp(dtype, "uint8") == 0;
    const char *rows_name = vectors                                      ? "vectors"
                            : tokens                                     ? "hidden"
                            : H5Lexists(file, "scores", H5P_DEFAULT) > 0 ? "scores"
                                                                         : "embeddings";
    H5Eclear2(H5E_DEFAULT);
    if (packed) {
        rows[1] = d_model >= 0 ? d_model / 8 : d_model;
        snprintf(expected, sizeof expected, "[n_documents %lld, d_model / 8 = %lld]",
                 (long long)rows[0], (long long)rows[1]);
    }
    int status = check_dataset(ctx, path, file, rows_name, integer ? H5T_INTEGER : H5T_FLOAT,
                               integer ? "integer" : "floating-point", 2, rows, expected);
    int64_t documents[1] = {n_documents};
    snprintf(expected, sizeof expected, "[n_documents %lld]", (long long)n_documents);
    if (status == TFENC_OK)
        status = check_dataset(ctx, path, file, "lengths", H5T_INTEGER, "integer", 1, documents,
                               expected);
    /* Only corpora of several files, or that leave records out, have it. */
    if (status == TFENC_OK && H5Lexists(file, "document_source", H5P_DEFAULT) > 0)
        status = check_dataset(ctx, path, file, "document_source", H5T_COMPOUND,
                               "compound {shard, line}", 1, documents, expected);
    H5Eclear2(H5E_DEFAULT);
    if (status == TFENC_OK && row_runs) {
        const char *offsets = tokens ? "offsets" : "chunk_offsets";
        int64_t entries[1] = {n_documents >= 0 ? n_documents + 1 : -1};
        snprintf(expected, sizeof expected, "[n_documents + 1 = %lld]", (long long)entries[0]);
        status = check_dataset(ctx, path, file, offsets, H5T_INTEGER, "integer", 1, entries,
                               expected);
    }
    return status;
}

/* ----------------------------------------------------------------- lengths */

/* Counts finished (length >= 0) and truncated documents among the first
 * n_documents of `lengths` and `truncated`, a block at a time. */
static int count_finished(tfenc_context *ctx, const char *path, hid_t file, int64_t n_documents,
                          tfenc_inspection *inspection, int64_t *first_empty)
{
    *first_empty = -1;
    hid_t lengths = H5Dopen2(file, "lengths", H5P_DEFAULT);
    hid_t truncated = H5Lexists(file, "truncated", H5P_DEFAULT) > 0
                          ? H5Dopen2(file, "truncated", H5P_DEFAULT)
                          : -1;
    H5Eclear2(H5E_DEFAULT);
    if (lengths < 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: cannot open dataset 'lengths'", path);
    /* Only a -1 fill value makes an unwritten length recognisable. */
    int32_t fill = 0;
    H5D_fill_value_t defined = H5D_FILL_VALUE_UNDEFINED;
    hid_t create = H5Dget_create_plist(lengths);
    int marked = create >= 0 && H5Pfill_value_defined(create, &defined) >= 0
                 && defined == H5D_FILL_VALUE_USER_DEFINED
                 && H5Pget_fill_value(create, H5T_NATIVE_INT32, &fill) >= 0 && fill == -1;
    if (create >= 0)
        H5Pclose(create);
    hid_t file_space = H5Dget_space(lengths);
    hsize_t rows = 0;
    int ok = file_space >= 0 && H5Sget_simple_extent_ndims(file_space) == 1
             && H5Sget_simple_extent_dims(file_space, &rows, NULL) == 1;
    if (ok && (int64_t)rows < n_documents)
        n_documents = (int64_t)rows;
    int32_t *length_block = malloc(LENGTHS_PER_READ * sizeof *length_block);
    int32_t *truncated_block = malloc(LENGTHS_PER_READ * sizeof *truncated_block);
    if (length_block == NULL || truncated_block == NULL)
        ok = 0;
    int64_t finished = 0, cut = 0;
    int truncation_known = truncated >= 0;
    for (hsize_t first = 0; ok && first < (hsize_t)n_documents; first += LENGTHS_PER_READ) {
        hsize_t count = (hsize_t)n_documents - first < LENGTHS_PER_READ
                            ? (hsize_t)n_documents - first
                            : LENGTHS_PER_READ;
        hid_t memory_space = H5Screate_simple(1, &count, NULL);
        ok = memory_space >= 0
             && H5Sselect_hyperslab(file_space, H5S_SELECT_SET, &first, NULL, &count, NULL) >= 0
             && H5Dread(lengths, H5T_NATIVE_INT32, memory_space, file_space, H5P_DEFAULT,
                        length_block) >= 0;
        if (ok && truncation_known) {
            hid_t truncated_space = H5Dget_space(truncated);
            truncation_known =
                truncated_space >= 0
                && H5Sselect_hyperslab(truncated_space, H5S_SELECT_SET, &first, NULL, &count, NULL)
                       >= 0
                && H5Dread(truncated, H5T_NATIVE_INT32, memory_space, truncated_space,
                           H5P_DEFAULT, truncated_block) >= 0;
            if (truncated_space >= 0)
                H5Sclose(truncated_space);
        }
        for (hsize_t i = 0; ok && i < count; i++)
            if (length_block[i] == 0 && *first_empty < 0)
                *first_empty = (int64_t)(first + i); /* every finished document has a token */
        for (hsize_t i = 0; ok && i < count; i++)
            if (length_block[i] >= 0) {
                finished++;
                cut += truncation_known && truncated_block[i] > 0;
            }
        if (memory_space >= 0)
            H5Sclose(memory_space);
    }
    char detail[256] = "";
    int status = ok ? TFENC_OK
                    : tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot read dataset 'lengths': %s", path,
                                  tfenc_hdf5_error_detail(detail, sizeof detail));
    free(length_block);
    free(truncated_block);
    if (file_space >= 0)
        H5Sclose(file_space);
    if (truncated >= 0)
        H5Dclose(truncated);
    H5Dclose(lengths);
    if (status != TFENC_OK)
        return status;
    if (marked || inspection->complete) {
        inspection->n_finished = inspection->complete && !marked ? n_documents : finished;
        inspection->n_truncated = truncation_known ? cut : -1;
    } else {
        note_unknown(inspection, "which documents are finished");
    }
    return TFENC_OK;
}

/* ------------------------------------------------------------- in use */

/* HDF5 takes an exclusive flock() on a file it opens for writing with one
 * process; asking for a shared one without waiting tells whether some
 * process holds it. The probe's own lock is released at once. */
static int held_by_another_process(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int held = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd);
    return held;
}

/* ---------------------------------------------------------- precision */

/* Older files: [model] precision from the job settings, else the default. */
static char *precision_from_settings(const char *settings)
{
    static const char key[] = "model.precision = ";
    for (const char *line = settings; line != NULL && *line != '\0';) {
        size_t length = strcspn(line, "\n");
        if (length > sizeof key - 1 && strncmp(line, key, sizeof key - 1) == 0)
            return strndup(line + sizeof key - 1, length - (sizeof key - 1));
        line += length + (line[length] == '\n');
    }
    return strdup("fp32");
}

/* ------------------------------------------------------ resume command */

typedef struct text {
    char *data;
    size_t length, capacity;
    int failed;
} text;

static void append(text *t, const char *piece, size_t n)
{
    if (t->failed)
        return;
    if (t->length + n + 1 > t->capacity) {
        size_t capacity = t->capacity > 0 ? t->capacity * 2 : 256;
        while (capacity < t->length + n + 1)
            capacity *= 2;
        char *grown = realloc(t->data, capacity);
        if (grown == NULL) {
            t->failed = 1;
            return;
        }
        t->data = grown;
        t->capacity = capacity;
    }
    memcpy(t->data + t->length, piece, n);
    t->length += n;
    t->data[t->length] = '\0';
}

/* Appends " WORD", single-quoted unless it is made of safe characters only. */
static void append_word(text *t, const char *word, size_t n)
{
    static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                               "0123456789_-./=:,+@%";
    int plain = n > 0;
    for (size_t i = 0; i < n; i++)
        plain &= strchr(safe, word[i]) != NULL && word[i] != '\0';
    append(t, " ", 1);
    if (plain) {
        append(t, word, n);
        return;
    }
    append(t, "'", 1);
    for (size_t i = 0; i < n; i++)
        if (word[i] == '\'')
            append(t, "'\\''", 4);
        else
            append(t, word + i, 1);
    append(t, "'", 1);
}

/* The ranks of a layout attribute "ranks=R ...", or 1. */
static long ranks_of(const char *layout)
{
    const char *found = layout != NULL ? strstr(layout, "ranks=") : NULL;
    long ranks = found != NULL ? strtol(found + strlen("ranks="), NULL, 10) : 1;
    return ranks > 0 ? ranks : 1;
}

/* Whether the last run, with its overrides, had [job] resume = false: then
 * running the same command again would overwrite the file, so the resume
 * command adds --set job.resume=true. */
static int resume_was_off(const tfenc_inspection *inspection)
{
    tfenc_context scratch;
    tfenc_context_init(&scratch);
    tfenc_jobfile *job = NULL;
    int off = 0;
    if (inspection->job_text != NULL
        && tfenc_jobfile_parse_string(&scratch, "job", inspection->job_text, &job) == TFENC_OK) {
        for (const char *line = inspection->job_overrides; line != NULL && *line != '\0';) {
            size_t length = strcspn(line, "\n");
            char *assignment = strndup(line, length);
            if (assignment != NULL)
                tfenc_jobfile_override(&scratch, job, assignment);
            free(assignment);
            line += length + (line[length] == '\n');
        }
        const tfenc_job_section *section = tfenc_jobfile_find(job, "job");
        const tfenc_job_entry *entry = section != NULL ? tfenc_job_section_get(section, "resume")
                                                       : NULL;
        off = entry != NULL && (strcmp(entry->value, "false") == 0
                                || strcmp(entry->value, "0") == 0
                                || strcmp(entry->value, "no") == 0);
    }
    tfenc_jobfile_destroy(job);
    return off;
}

/* cd WORKING_DIRECTORY && [mpirun -n R] tfenc-batch [--set X]... JOB */
static char *resume_command(const tfenc_inspection *inspection)
{
    text t = {0};
    append(&t, "cd", 2);
    append_word(&t, inspection->working_directory, strlen(inspection->working_directory));
    append(&t, " &&", 3);
    long ranks = ranks_of(inspection->layout);
    if (ranks > 1) {
        char launcher[64];
        snprintf(launcher, sizeof launcher, " mpirun -n %ld", ranks);
        append(&t, launcher, strlen(launcher));
    }
    append(&t, " tfenc-batch", strlen(" tfenc-batch"));
    for (const char *line = inspection->job_overrides; *line != '\0';) {
        size_t length = strcspn(line, "\n");
        if (length > 0) {
            append(&t, " --set", 6);
            append_word(&t, line, length);
        }
        line += length + (line[length] == '\n');
    }
    if (resume_was_off(inspection))
        append(&t, " --set job.resume=true", strlen(" --set job.resume=true"));
    append_word(&t, inspection->job_path, strlen(inspection->job_path));
    if (t.failed) {
        free(t.data);
        return NULL;
    }
    return t.data;
}

/* The corpus's files: the dataset, or the attribute older files keep;
 * nothing for files from before either. */
static int read_corpus_shards(tfenc_context *ctx, const char *path, hid_t file,
                              tfenc_corpus_shards *table)
{
    int status = tfenc_corpus_shards_read(ctx, path, file, table);
    if (status != TFENC_ERR_NOT_FOUND)
        return status;
    char *legacy = read_string(file, "corpus_shards");
    status = legacy != NULL ? tfenc_corpus_shards_parse(ctx, path, legacy, table) : TFENC_OK;
    free(legacy);
    return status;
}

/* ----------------------------------------------------------------- public */

int tfenc_inspect_output(tfenc_context *ctx, const char *path, tfenc_inspection *inspection)
{
    memset(inspection, 0, sizeof *inspection);
    inspection->n_documents = inspection->n_finished = inspection->n_truncated = -1;
    inspection->n_tokens = inspection->d_model = -1;
    inspection->path = strdup(path);
    if (inspection->path == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    /* HDF5's open() would wait forever on a FIFO (core/base/files.h); a missing
     * file is reported below. */
    if (access(path, F_OK) == 0) {
        int checked = tfenc_file_check_regular(ctx, "--status", path);
        if (checked != TFENC_OK)
            return checked;
    }
    if (access(path, R_OK) != 0)
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: %s", path, strerror(errno));
    if (H5Fis_hdf5(path) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: not an HDF5 file", path);
    }
    /* A tfenc job holds the output's lock file and a lock on the file
     * itself (any rank count); another program writing it with HDF5 holds
     * HDF5's flock(). */
    inspection->in_use = tfenc_output_lock_held(path, NULL, 0) || held_by_another_process(path);
    /* Read-only and without HDF5's lock, which the writing job holds. */
    hid_t access_properties = H5Pcreate(H5P_FILE_ACCESS);
    hid_t file = -1;
    if (access_properties >= 0 && H5Pset_file_locking(access_properties, 0, 1) >= 0)
        file = H5Fopen(path, H5F_ACC_RDONLY, access_properties);
    char detail[256] = "";
    int status = file < 0 ? tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot open it read-only: %s",
                                        path, tfenc_hdf5_error_detail(detail, sizeof detail))
                          : TFENC_OK;
    if (access_properties >= 0)
        H5Pclose(access_properties);
    if (status != TFENC_OK)
        return status;

    /* A tfenc output: the version and completion attributes, the rows and
     * the lengths. */
    int has_complete = 0, found = 0;
    int64_t complete = read_integer(file, "complete", &has_complete);
    inspection->tfenc_version = read_string(file, "tfenc_version");
    /* Sparse rows reach the file only when the job completes. */
    char *kind = read_string(file, "output_kind");
    const int sparse = kind != NULL && strcmp(kind, "sparse") == 0;
    free(kind);
    int has_rows = H5Lexists(file, "embeddings", H5P_DEFAULT) > 0
                   || H5Lexists(file, "hidden", H5P_DEFAULT) > 0
                   || H5Lexists(file, "vectors", H5P_DEFAULT) > 0
                   || H5Lexists(file, "scores", H5P_DEFAULT) > 0 || sparse;
    int has_lengths = H5Lexists(file, "lengths", H5P_DEFAULT) > 0;
    H5Eclear2(H5E_DEFAULT);
    /* An attribute in another form than tfenc's would read as absent. */
    static const char *const integers[] = {"complete", "n_documents", "d_model", "n_tokens"};
    for (size_t i = 0; status == TFENC_OK && i < sizeof integers / sizeof *integers; i++)
        status = check_integer_attribute(ctx, path, file, integers[i]);
    if (status == TFENC_OK && has_complete && complete != 0 && complete != 1)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: inconsistent: attribute 'complete' is "
                             "%lld, expected 0 or 1", path, (long long)complete);
    if (status != TFENC_OK) {
        H5Fclose(file);
        return status;
    }
    const char *lacking = inspection->tfenc_version == NULL ? "attribute 'tfenc_version'"
                          : !has_complete                  ? "attribute 'complete'"
                          : !has_rows                      ? "dataset 'embeddings', 'hidden', 'vectors' or 'scores'"
                          : !has_lengths                   ? "dataset 'lengths'"
                                                           : NULL;
    if (lacking != NULL) {
        H5Fclose(file);
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: not a tfenc output: it has no %s", path,
                           lacking);
    }
    inspection->complete = complete == 1;
    inspection->n_documents = read_integer(file, "n_documents", &found);
    if (!found) {
        inspection->n_documents = -1;
        note_unknown(inspection, "n_documents");
    }
    inspection->d_model = read_integer(file, "d_model", &found);
    if (!found)
        inspection->d_model = -1;
    inspection->n_tokens = read_integer(file, "n_tokens", &found);
    if (!found)
        inspection->n_tokens = -1;
    inspection->unit_norm = (int)read_integer(file, "unit_norm", &found);
    if (!found) {
        inspection->unit_norm = -1;
        note_unknown(inspection, "unit_norm");
    }

    struct { const char *name; char **value; } strings[] = {
        {"created", &inspection->created},
        {"output_kind", &inspection->output_kind},
        {"dtype", &inspection->dtype},
        {"compression", &inspection->compression},
        {"weights_sha256", &inspection->weights_sha256},
        {"layout", &inspection->layout},
        {"job_settings", &inspection->job_settings},
        {"job", &inspection->job_text},
        {"job_path", &inspection->job_path},
        {"working_directory", &inspection->working_directory},
        {"job_overrides", &inspection->job_overrides},
        {"precision", &inspection->precision}};
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) {
        *strings[i].value = read_string(file, strings[i].name);
        if (*strings[i].value == NULL)
            note_unknown(inspection, strings[i].name);
    }
    inspection->precision_recorded = inspection->precision != NULL;
    /* Optional detail (recorded since the int8 gate): not listed as unknown. */
    inspection->precision_steps = read_string(file, "precision_steps");
    inspection->quantization_source = read_string(file, "quantization_ranges_source");
    inspection->id2label = read_string(file, "id2label");
    inspection->multivector_mode = read_string(file, "multivector_mode");
    inspection->multivector_marker = read_string(file, "multivector_marker");
    inspection->multivector_skiplist = read_string(file, "multivector_skiplist");
    inspection->multivector_query_padding = read_string(file, "multivector_query_padding");
    inspection->precision_sample_min_cosine = read_double(file, "precision_sample_min_cosine");
    if (inspection->precision == NULL && inspection->job_settings != NULL)
        inspection->precision = precision_from_settings(inspection->job_settings);

    int64_t rows = inspection->n_documents;
    if (rows < 0) {
        /* Older files still say it through the length of `lengths`. */
        hid_t lengths = H5Dopen2(file, "lengths", H5P_DEFAULT);
        hid_t space = lengths >= 0 ? H5Dget_space(lengths) : -1;
        hsize_t dims = 0;
        if (space >= 0 && H5Sget_simple_extent_ndims(space) == 1
            && H5Sget_simple_extent_dims(space, &dims, NULL) == 1)
            rows = inspection->n_documents = (int64_t)dims;
        if (space >= 0)
            H5Sclose(space);
        if (lengths >= 0)
            H5Dclose(lengths);
        H5Eclear2(H5E_DEFAULT);
    }
    status = sparse ? check_sparse_shapes(ctx, path, file, inspection)
                    : check_shapes(ctx, path, file, inspection);
    inspection->has_document_source = H5Lexists(file, "document_source", H5P_DEFAULT) > 0;
    H5Eclear2(H5E_DEFAULT);
    if (status == TFENC_OK)
        status = read_corpus_shards(ctx, path, file, &inspection->corpus_shards);
    int64_t first_empty = -1;
    if (status == TFENC_OK)
        status = count_finished(ctx, path, file, rows < 0 ? 0 : rows, inspection, &first_empty);
    H5Fclose(file);
    if (status != TFENC_OK)
        return status;
    /* A complete file has every document written, each with a token at least. */
    if (first_empty >= 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "%s: inconsistent: document %lld has length 0 in 'lengths' (a "
                           "document written by tfenc has at least one token)",
                           path, (long long)first_empty);
    if (inspection->complete && inspection->n_finished >= 0
        && inspection->n_finished != inspection->n_documents)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "%s: inconsistent: complete = 1 but %lld of %lld documents are not "
                           "written", path,
                           (long long)(inspection->n_documents - inspection->n_finished),
                           (long long)inspection->n_documents);
    if (!inspection->complete && inspection->job_path != NULL
        && inspection->working_directory != NULL && inspection->job_overrides != NULL) {
        inspection->resume_command = resume_command(inspection);
        if (inspection->resume_command == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    }
    return TFENC_OK;
}

void tfenc_inspection_free(tfenc_inspection *inspection)
{
    char **strings[] = {&inspection->path, &inspection->tfenc_version, &inspection->created,
                        &inspection->output_kind, &inspection->dtype, &inspection->compression,
                        &inspection->weights_sha256, &inspection->layout,
                        &inspection->job_settings, &inspection->job_text, &inspection->job_path,
                        &inspection->working_directory, &inspection->job_overrides,
                        &inspection->precision, &inspection->precision_steps,
                        &inspection->quantization_source, &inspection->id2label,
                        &inspection->multivector_mode, &inspection->multivector_marker,
                        &inspection->multivector_skiplist,
                        &inspection->multivector_query_padding,
                        &inspection->resume_command};
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) {
        free(*strings[i]);
        *strings[i] = NULL;
    }
    tfenc_corpus_shards_free(&inspection->corpus_shards);
}
