/* Reads an output file's attributes and lengths, read-only and without
 * HDF5's file lock, into a tfenc_inspection. */
#include "output/inspect.h"
#include "base/hdf5_attributes.h"
#include "base/files.h"
#include "output/ownership.h"
#include "base/hdf5_error.h"
#include "output/output_options.h"
#include "output/kinds.h"
#include "output/head_groups.h"
#include "output/output_checks.h"

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


/* ------------------------------------------------------------ attributes */

static void note_unknown(tfenc_inspection *inspection, const char *name)
{
    size_t used = strlen(inspection->unknown);
    snprintf(inspection->unknown + used, sizeof inspection->unknown - used, "%s%s",
             used > 0 ? ", " : "", name);
}

/* An integer attribute; 0 when absent (then *found = 0). */
static int64_t read_integer(hid_t file, const char *name, int *found)
{
    int64_t value = 0;
    *found = tfenc_hdf5_attribute_number(file, name, H5T_INTEGER, H5T_NATIVE_INT64, &value);
    return *found ? value : 0;
}

/* A floating-point attribute; NAN when absent. */
static double read_double(hid_t file, const char *name)
{
    double value = NAN;
    return tfenc_hdf5_attribute_number(file, name, H5T_FLOAT, H5T_NATIVE_DOUBLE, &value)
               ? value
               : NAN;
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
    char *legacy = tfenc_hdf5_attribute_string(file, "corpus_shards");
    status = legacy != NULL ? tfenc_corpus_shards_parse(ctx, path, legacy, table) : TFENC_OK;
    free(legacy);
    return status;
}

/* The root's datasets with their shapes, by name (links by index: the
 * iteration callbacks' types differ between HDF5 1.10 and 1.12). */
static int list_datasets(hid_t file, tfenc_inspection *inspection)
{
    H5G_info_t group;
    if (H5Gget_info(file, &group) < 0)
        return -1;
    inspection->datasets = calloc(group.nlinks > 0 ? group.nlinks : 1, sizeof *inspection->datasets);
    if (inspection->datasets == NULL)
        return -1;
    for (hsize_t k = 0; k < group.nlinks; k++) {
        char name[256];
        if (H5Lget_name_by_idx(file, ".", H5_INDEX_NAME, H5_ITER_INC, k, name, sizeof name,
                               H5P_DEFAULT) < 0)
            return -1;
        hid_t object = H5Oopen(file, name, H5P_DEFAULT);
        if (object < 0 || H5Iget_type(object) != H5I_DATASET) {
            if (object >= 0)
                H5Oclose(object);
            continue;
        }
        tfenc_inspected_dataset *entry = &inspection->datasets[inspection->n_datasets];
        hid_t space = H5Dget_space(object);
        hsize_t dims[TFENC_INSPECT_MAX_RANK] = {0};
        int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
        if (rank > TFENC_INSPECT_MAX_RANK)
            rank = TFENC_INSPECT_MAX_RANK;
        if (rank > 0 && H5Sget_simple_extent_dims(space, dims, NULL) >= 0) {
            entry->rank = rank;
            for (int d = 0; d < rank; d++)
                entry->shape[d] = (int64_t)dims[d];
        }
        if (space >= 0)
            H5Sclose(space);
        H5Oclose(object);
        entry->name = strdup(name);
        if (entry->name == NULL)
            return -1;
        inspection->n_datasets++;
    }
    return 0;
}

/* The kept fields the attribute keep_fields names, each with what its
 * dataset holds; a name without its dataset is an inconsistent file. */
static int read_kept(tfenc_context *ctx, const char *path, hid_t file,
                     tfenc_inspection *inspection)
{
    char *names = tfenc_hdf5_attribute_string(file, TFENC_KEPT_FIELDS_ATTRIBUTE);
    int status = TFENC_OK;
    if (names == NULL || names[0] == '\0') {
        free(names);
        return TFENC_OK;
    }
    int n = 1;
    for (const char *p = names; *p != '\0'; p++)
        n += *p == '\n';
    inspection->kept = calloc((size_t)n, sizeof *inspection->kept);
    if (inspection->kept == NULL)
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    for (char *name = names; status == TFENC_OK && name != NULL;) {
        char *end = strchr(name, '\n');
        if (end != NULL)
            *end = '\0';
        tfenc_inspected_kept *field = &inspection->kept[inspection->n_kept];
        hid_t dataset = H5Lexists(file, name, H5P_DEFAULT) > 0 ? H5Dopen2(file, name, H5P_DEFAULT)
                                                               : -1;
        hid_t type = dataset >= 0 ? H5Dget_type(dataset) : -1;
        H5T_class_t class = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
        field->type = class == H5T_STRING    ? "string"
                      : class == H5T_INTEGER ? "integer"
                      : class == H5T_FLOAT   ? "float"
                                             : NULL;
        field->bytes = class == H5T_STRING ? (int64_t)H5Tget_size(type) : 0;
        if (type >= 0)
            H5Tclose(type);
        if (dataset >= 0)
            H5Dclose(dataset);
        if (field->type == NULL)
            status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: inconsistent: attribute '%s' names "
                                 "'%s', which is no dataset of strings or numbers", path,
                                 TFENC_KEPT_FIELDS_ATTRIBUTE, name);
        else if ((field->name = strdup(name)) == NULL)
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        else
            inspection->n_kept++;
        name = end != NULL ? end + 1 : NULL;
    }
    H5Eclear2(H5E_DEFAULT);
    free(names);
    return status;
}

/* One head of /outputs: its attributes and rows, for the report (the
 * checks held its group to the description before). */
static int read_head(void *user, hid_t group, const char *name)
{
    tfenc_inspection *inspection = user;
    tfenc_inspected_head *heads
        = realloc(inspection->heads, ((size_t)inspection->n_heads + 1) * sizeof *heads);
    if (heads == NULL)
        return TFENC_ERR_NO_MEMORY;
    inspection->heads = heads;
    tfenc_inspected_head *head = &heads[inspection->n_heads++];
    memset(head, 0, sizeof *head);
    head->d_model = head->unit_norm = head->rows = head->sparse_values = -1;
    if ((head->name = strdup(name)) == NULL)
        return TFENC_ERR_NO_MEMORY;
    int found = 0;
    head->output_kind = tfenc_hdf5_attribute_string(group, "output_kind");
    head->dtype = tfenc_hdf5_attribute_string(group, "dtype");
    head->id2label = tfenc_hdf5_attribute_string(group, "id2label");
    head->d_model = read_integer(group, "d_model", &found);
    if (!found)
        head->d_model = -1;
    head->unit_norm = (int)read_integer(group, "unit_norm", &found);
    if (!found)
        head->unit_norm = -1;
    const tfenc_output_kind_entry *kind = tfenc_output_kind_named(head->output_kind);
    const int sparse = kind != NULL && kind->rows == TFENC_ROWS_SPARSE;
    /* A sparse head's CSR is written when the job completes. */
    const char *rows_name = sparse ? "sparse_indptr" : kind != NULL ? kind->rows_dataset : NULL;
    hid_t rows = rows_name != NULL && H5Lexists(group, rows_name, H5P_DEFAULT) > 0
                     ? H5Dopen2(group, rows_name, H5P_DEFAULT)
                     : -1;
    hid_t space = rows >= 0 ? H5Dget_space(rows) : -1;
    hsize_t dims[2] = {0, 0};
    int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    if (rank >= 1 && rank <= 2 && H5Sget_simple_extent_dims(space, dims, NULL) >= 0)
        head->rows = (int64_t)dims[0] - sparse;
    if (sparse && rank == 1 && dims[0] > 0) {
        hsize_t last = dims[0] - 1, one = 1;
        hid_t memory = H5Screate_simple(1, &one, NULL);
        int64_t entries = -1;
        if (H5Sselect_hyperslab(space, H5S_SELECT_SET, &last, NULL, &one, NULL) >= 0 &&
            H5Dread(rows, H5T_NATIVE_INT64, memory, space, H5P_DEFAULT, &entries) >= 0)
            head->sparse_values = entries;
        H5Sclose(memory);
    }
    if (space >= 0)
        H5Sclose(space);
    if (rows >= 0)
        H5Dclose(rows);
    H5Eclear2(H5E_DEFAULT);
    return TFENC_OK;
}

/* The further heads of a job of several (group /outputs). */
static int read_heads(tfenc_context *ctx, const char *path, hid_t file,
                      tfenc_inspection *inspection)
{
    inspection->head = tfenc_hdf5_attribute_string(file, "head");
    int status = tfenc_head_groups_visit(ctx, path, file, read_head, inspection);
    return status == TFENC_ERR_NO_MEMORY ? tfenc_error(ctx, status, "out of memory") : status;
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
    inspection->tfenc_version = tfenc_hdf5_attribute_string(file, "tfenc_version");
    /* The rows dataset of some kind; a kind whose rows have none (sparse
     * rows reach the file only when the job completes) has them all along. */
    char *kind_name = tfenc_hdf5_attribute_string(file, "output_kind");
    const tfenc_output_kind_entry *kind = tfenc_output_kind_named(kind_name);
    free(kind_name);
    int has_rows = kind != NULL && kind->rows_dataset == NULL;
    for (int k = 0; !has_rows && k < TFENC_OUTPUT_AUTO; k++)
        has_rows = tfenc_output_kinds[k].rows_dataset != NULL &&
                   H5Lexists(file, tfenc_output_kinds[k].rows_dataset, H5P_DEFAULT) > 0;
    int has_lengths = H5Lexists(file, "lengths", H5P_DEFAULT) > 0;
    H5Eclear2(H5E_DEFAULT);
    /* Attributes first: one in another form than tfenc's would read as
     * absent, and the datasets are checked against them. */
    status = tfenc_output_check_attributes(ctx, path, file);
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
    inspection->sparse_top_k = read_integer(file, "sparse_top_k", &found);
    inspection->sparse_threshold = read_double(file, "sparse_threshold");

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
        *strings[i].value = tfenc_hdf5_attribute_string(file, strings[i].name);
        if (*strings[i].value == NULL)
            note_unknown(inspection, strings[i].name);
    }
    inspection->precision_recorded = inspection->precision != NULL;
    /* Optional detail (recorded since the int8 gate): not listed as unknown. */
    inspection->precision_steps = tfenc_hdf5_attribute_string(file, "precision_steps");
    inspection->kernels = tfenc_hdf5_attribute_string(file, "kernels");
    inspection->path_choices = tfenc_hdf5_attribute_string(file, "path_choices");
    inspection->run_summaries = tfenc_hdf5_attribute_string(file, "run_summaries");
    inspection->quantization_source = tfenc_hdf5_attribute_string(file, "quantization_ranges_source");
    inspection->id2label = tfenc_hdf5_attribute_string(file, "id2label");
    inspection->multivector_mode = tfenc_hdf5_attribute_string(file, "multivector_mode");
    inspection->multivector_marker = tfenc_hdf5_attribute_string(file, "multivector_marker");
    inspection->multivector_skiplist = tfenc_hdf5_attribute_string(file, "multivector_skiplist");
    inspection->multivector_query_padding = tfenc_hdf5_attribute_string(file, "multivector_query_padding");
    inspection->multivector_first_token = tfenc_hdf5_attribute_string(file, "multivector_first_token");
    inspection->precision_sample_min_cosine = read_double(file, "precision_sample_min_cosine");
    if (inspection->precision == NULL && inspection->job_settings != NULL)
        inspection->precision = precision_from_settings(inspection->job_settings);

    tfenc_output_census census;
    status = tfenc_output_check_datasets(ctx, path, file, &census);
    inspection->has_document_source = H5Lexists(file, "document_source", H5P_DEFAULT) > 0;
    inspection->has_vocabulary = H5Lexists(file, "vocabulary", H5P_DEFAULT) > 0;
    if (status == TFENC_OK &&
        list_datasets(file, inspection) < 0)
        status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot list its datasets", path);
    H5Eclear2(H5E_DEFAULT);
    if (status == TFENC_OK)
        status = read_corpus_shards(ctx, path, file, &inspection->corpus_shards);
    if (status == TFENC_OK)
        status = read_kept(ctx, path, file, inspection);
    if (status == TFENC_OK)
        status = read_heads(ctx, path, file, inspection);
    H5Fclose(file);
    if (status != TFENC_OK)
        return status;
    /* Older files say how many documents through the length of `lengths`. */
    inspection->n_documents = census.n_documents;
    inspection->sparse_values = census.sparse_entries;
    if (census.lengths_marked || inspection->complete) {
        inspection->n_finished = inspection->complete && !census.lengths_marked
                                     ? census.n_documents
                                     : census.finished;
        inspection->n_truncated = census.truncated;
    } else {
        note_unknown(inspection, "which documents are finished");
    }
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
                        &inspection->precision, &inspection->precision_steps, &inspection->kernels,
                        &inspection->path_choices, &inspection->run_summaries,
                        &inspection->quantization_source, &inspection->id2label,
                        &inspection->multivector_mode, &inspection->multivector_marker,
                        &inspection->multivector_skiplist,
                        &inspection->multivector_query_padding,
                        &inspection->multivector_first_token,
                        &inspection->resume_command};
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) {
        free(*strings[i]);
        *strings[i] = NULL;
    }
    tfenc_corpus_shards_free(&inspection->corpus_shards);
    for (int k = 0; k < inspection->n_heads; k++) {
        tfenc_inspected_head *head = &inspection->heads[k];
        free(head->name);
        free(head->output_kind);
        free(head->dtype);
        free(head->id2label);
    }
    free(inspection->heads);
    free(inspection->head);
    inspection->heads = NULL;
    inspection->head = NULL;
    inspection->n_heads = 0;
    for (int k = 0; k < inspection->n_datasets; k++)
        free(inspection->datasets[k].name);
    free(inspection->datasets);
    inspection->datasets = NULL;
    inspection->n_datasets = 0;
    for (int k = 0; k < inspection->n_kept; k++)
        free(inspection->kept[k].name);
    free(inspection->kept);
    inspection->kept = NULL;
    inspection->n_kept = 0;
}
