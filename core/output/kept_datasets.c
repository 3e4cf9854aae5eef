/* The kept fields' datasets (kept_datasets.h). */
#include "output/kept_datasets.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/context.h"
#include "base/hdf5_error.h"

typedef struct kept_dataset {
    char *name;          /* the field's; the mask is name + TFENC_KEPT_MASK_SUFFIX */
    tfenc_kept_type type;
    size_t width;        /* strings: bytes per value in the file */
    hid_t values, valid; /* the datasets */
    hid_t file_type;     /* strings: the fixed-length type; else a copy of the native one */
} kept_dataset;

struct tfenc_kept_datasets {
    int n;
    kept_dataset fields[TFENC_MAX_KEEP_FIELDS];
    const char *path;
    /* One write's buffers, kept between writes. */
    char *strings;       /* [documents * width] of the field being written */
    void *numbers;       /* [documents] int64 or double */
    uint8_t *flags;      /* [documents] */
    hsize_t *points;     /* [documents] */
    char *ids;           /* [documents] NUL-terminated ids, end to end */
    size_t capacity, ids_capacity;
};

static int h5_fail(tfenc_context *ctx, int status, const char *path, const char *format, ...)
    TFENC_PRINTF(4, 5);
static int h5_fail(tfenc_context *ctx, int status, const char *path, const char *format, ...)
{
    char what[512], detail[256] = "";
    va_list args;
    va_start(args, format);
    vsnprintf(what, sizeof what, format, args);
    va_end(args);
    return tfenc_error(ctx, status, "%s: %s: %s", path, what,
                       tfenc_hdf5_error_detail(detail, sizeof detail));
}

static hid_t native_type(tfenc_kept_type type)
{
    return type == TFENC_KEPT_INTEGER ? H5T_NATIVE_INT64 : H5T_NATIVE_DOUBLE;
}

static hid_t stored_type(tfenc_kept_type type)
{
    return type == TFENC_KEPT_INTEGER ? H5T_STD_I64LE : H5T_IEEE_F64LE;
}

/* The file's type of a field: strings as ids are (fixed length, UTF-8). */
static hid_t make_file_type(const kept_dataset *field)
{
    if (field->type != TFENC_KEPT_STRING)
        return H5Tcopy(stored_type(field->type));
    hid_t type = H5Tcopy(H5T_C_S1);
    if (type >= 0 && (H5Tset_size(type, field->width) < 0 || H5Tset_strpad(type, H5T_STR_NULLPAD) < 0
                      || H5Tset_cset(type, H5T_CSET_UTF8) < 0)) {
        H5Tclose(type);
        return -1;
    }
    return type;
}

static void mask_name(const kept_dataset *field, char *name, size_t size)
{
    snprintf(name, size, "%s%s", field->name, TFENC_KEPT_MASK_SUFFIX);
}

static int start(tfenc_context *ctx, const char *path, const tfenc_kept_field *fields, int n,
                 tfenc_kept_datasets **out)
{
    tfenc_kept_datasets *kept = calloc(1, sizeof *kept);
    *out = kept;
    if (kept == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", path);
    kept->path = path;
    for (int k = 0; k < TFENC_MAX_KEEP_FIELDS; k++)
        kept->fields[k].values = kept->fields[k].valid = kept->fields[k].file_type = -1;
    if (n < 1 || n > TFENC_MAX_KEEP_FIELDS)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: %d kept fields", path, n);
    kept->n = n;
    for (int k = 0; k < n; k++) {
        kept_dataset *field = &kept->fields[k];
        field->type = fields[k].type;
        field->width = fields[k].longest > 0 ? fields[k].longest : 1;
        if ((field->name = strdup(fields[k].name)) == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", path);
    }
    return TFENC_OK;
}

/* A [n_documents] dataset, contiguous and allocated now, filled with `fill`. */
static hid_t create_one(hid_t file, const char *name, hid_t type, int64_t n_documents,
                        const void *fill)
{
    hsize_t dims[1] = {(hsize_t)n_documents};
    hid_t space = H5Screate_simple(1, dims, NULL);
    hid_t create = H5Pcreate(H5P_DATASET_CREATE);
    hid_t dataset = -1;
    if (space >= 0 && create >= 0 && H5Pset_layout(create, H5D_CONTIGUOUS) >= 0
        && H5Pset_alloc_time(create, H5D_ALLOC_TIME_EARLY) >= 0
        && H5Pset_fill_value(create, type, fill) >= 0
        && H5Pset_fill_time(create, H5D_FILL_TIME_ALLOC) >= 0)
        dataset = H5Dcreate2(file, name, type, space, H5P_DEFAULT, create, H5P_DEFAULT);
    if (space >= 0)
        H5Sclose(space);
    if (create >= 0)
        H5Pclose(create);
    return dataset;
}

/* The root attribute keep_fields: the kept fields' names, one a line, for
 * the readers of the file (--status, tfenc-export) to find their datasets. */
static int write_names(tfenc_context *ctx, hid_t file, const char *path,
                       const tfenc_kept_field *fields, int n)
{
    size_t bytes = 1;
    for (int k = 0; k < n; k++)
        bytes += strlen(fields[k].name) + 1;
    char *names = calloc(1, bytes);
    if (names == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", path);
    for (int k = 0; k < n; k++) {
        strcat(names, fields[k].name);
        strcat(names, k + 1 < n ? "\n" : "");
    }
    hid_t type = H5Tcopy(H5T_C_S1);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t attribute = -1;
    const char *value = names;
    int ok = type >= 0 && space >= 0 && H5Tset_size(type, H5T_VARIABLE) >= 0
             && H5Tset_cset(type, H5T_CSET_UTF8) >= 0
             && (attribute = H5Acreate2(file, TFENC_KEPT_FIELDS_ATTRIBUTE, type, space,
                                        H5P_DEFAULT, H5P_DEFAULT)) >= 0
             && H5Awrite(attribute, type, &value) >= 0;
    if (attribute >= 0)
        H5Aclose(attribute);
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    free(names);
    return ok ? TFENC_OK
              : h5_fail(ctx, TFENC_ERR_IO, path, "cannot write attribute '%s'",
                        TFENC_KEPT_FIELDS_ATTRIBUTE);
}

int tfenc_kept_datasets_create(tfenc_context *ctx, hid_t file, const char *path,
                               const tfenc_kept_field *fields, int n, int64_t n_documents,
                               tfenc_kept_datasets **out)
{
    tfenc_kept_datasets *kept = NULL;
    int status = start(ctx, path, fields, n, &kept);
    if (status == TFENC_OK)
        status = write_names(ctx, file, path, fields, n);
    for (int k = 0; status == TFENC_OK && k < n; k++) {
        kept_dataset *field = &kept->fields[k];
        char mask[512];
        mask_name(field, mask, sizeof mask);
        const int64_t zero = 0;
        const double not_a_number = NAN;
        char *empty = calloc(1, field->width);
        field->file_type = make_file_type(field);
        const void *fill = field->type == TFENC_KEPT_STRING    ? (const void *)empty
                           : field->type == TFENC_KEPT_INTEGER ? (const void *)&zero
                                                               : (const void *)&not_a_number;
        const uint8_t no = 0;
        if (empty != NULL && field->file_type >= 0)
            field->values = create_one(file, field->name, field->file_type, n_documents, fill);
        if (field->values >= 0)
            field->valid = create_one(file, mask, H5T_STD_U8LE, n_documents, &no);
        free(empty);
        if (field->valid < 0)
            status = h5_fail(ctx, TFENC_ERR_IO, path, "cannot create dataset '%s' (keep_fields)",
                             field->values < 0 ? field->name : mask);
    }
    if (status != TFENC_OK) {
        tfenc_kept_datasets_close(kept);
        kept = NULL;
    }
    *out = kept;
    return status;
}

/* A dataset of the resumed file: [n_documents], of the class this job
 * writes; a string's stored width is kept when it is long enough. */
static int open_one(tfenc_context *ctx, hid_t file, const char *path, const char *name,
                    H5T_class_t class, int64_t n_documents, hid_t *dataset, size_t *width)
{
    if (H5Lexists(file, name, H5P_DEFAULT) > 0)
        *dataset = H5Dopen2(file, name, H5P_DEFAULT);
    H5Eclear2(H5E_DEFAULT);
    if (*dataset < 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: has no dataset '%s' (keep_fields): not a "
                           "tfenc output of this job; refusing to append to it", path, name);
    hid_t space = H5Dget_space(*dataset), type = H5Dget_type(*dataset);
    hsize_t dims[1] = {0};
    int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    if (rank == 1)
        H5Sget_simple_extent_dims(space, dims, NULL);
    H5T_class_t stored = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
    size_t stored_width = type >= 0 ? H5Tget_size(type) : 0;
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    if (rank != 1 || dims[0] != (hsize_t)n_documents || stored != class)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: dataset '%s' (keep_fields) is not the "
                           "[%lld] dataset of this job's values; refusing to append to it", path,
                           name, (long long)n_documents);
    if (width != NULL && stored_width < *width)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: dataset '%s' (keep_fields) holds strings "
                           "of %zu bytes, this job's longest is %zu; refusing to append to it",
                           path, name, stored_width, *width);
    if (width != NULL)
        *width = stored_width;
    return TFENC_OK;
}

int tfenc_kept_datasets_open(tfenc_context *ctx, hid_t file, const char *path,
                             const tfenc_kept_field *fields, int n, int64_t n_documents,
                             tfenc_kept_datasets **out)
{
    tfenc_kept_datasets *kept = NULL;
    int status = start(ctx, path, fields, n, &kept);
    for (int k = 0; status == TFENC_OK && k < n; k++) {
        kept_dataset *field = &kept->fields[k];
        char mask[512];
        mask_name(field, mask, sizeof mask);
        H5T_class_t class = field->type == TFENC_KEPT_STRING    ? H5T_STRING
                            : field->type == TFENC_KEPT_INTEGER ? H5T_INTEGER
                                                                : H5T_FLOAT;
        status = open_one(ctx, file, path, field->name, class, n_documents, &field->values,
                          field->type == TFENC_KEPT_STRING ? &field->width : NULL);
        if (status == TFENC_OK)
            status = open_one(ctx, file, path, mask, H5T_INTEGER, n_documents, &field->valid,
                              NULL);
        if (status == TFENC_OK && (field->file_type = make_file_type(field)) < 0)
            status = h5_fail(ctx, TFENC_ERR_IO, path, "cannot make the type of '%s'",
                             field->name);
    }
    if (status != TFENC_OK) {
        tfenc_kept_datasets_close(kept);
        kept = NULL;
    }
    *out = kept;
    return status;
}

static int reserve(tfenc_context *ctx, tfenc_kept_datasets *kept, size_t n, size_t ids_bytes)
{
    size_t widest = sizeof(double);
    for (int k = 0; k < kept->n; k++)
        if (kept->fields[k].width > widest)
            widest = kept->fields[k].width;
    if (n > kept->capacity) {
        free(kept->strings);
        free(kept->numbers);
        free(kept->flags);
        free(kept->points);
        kept->strings = malloc(n * widest);
        kept->numbers = malloc(n * sizeof(double));
        kept->flags = malloc(n);
        kept->points = malloc(n * sizeof *kept->points);
        kept->capacity = kept->strings != NULL && kept->numbers != NULL && kept->flags != NULL
                                 && kept->points != NULL ? n : 0;
    }
    if (ids_bytes > kept->ids_capacity) {
        free(kept->ids);
        kept->ids = malloc(ids_bytes);
        kept->ids_capacity = kept->ids != NULL ? ids_bytes : 0;
    }
    if (kept->capacity < n || kept->ids_capacity < ids_bytes)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", kept->path);
    return TFENC_OK;
}

/* Writes `n` elements at kept->points of one dataset, from `data`. */
static int write_points(tfenc_context *ctx, tfenc_kept_datasets *kept, hid_t dataset,
                        const char *name, hid_t transfer, size_t n, hid_t memory_type,
                        const void *data)
{
    hsize_t count[1] = {(hsize_t)n};
    hid_t file_space = H5Dget_space(dataset);
    hid_t memory_space = H5Screate_simple(1, count, NULL);
    int ok = file_space >= 0 && memory_space >= 0
             && H5Sselect_elements(file_space, H5S_SELECT_SET, n, kept->points) >= 0
             && H5Dwrite(dataset, memory_type, memory_space, file_space, transfer, data) >= 0;
    if (file_space >= 0)
        H5Sclose(file_space);
    if (memory_space >= 0)
        H5Sclose(memory_space);
    return ok ? TFENC_OK : h5_fail(ctx, TFENC_ERR_IO, kept->path, "cannot write '%s'", name);
}

/* Moves `cursor` past the values before field `k`: each field is read in
 * its own pass, so that one buffer serves every field. */
static int value_of(const char *carried, int k, tfenc_kept_value *value)
{
    const char *cursor = carried;
    for (int i = 0; i <= k + 1; i++)
        if (tfenc_kept_next(&cursor, value) != 0)
            return -1;
    return 0;
}

int tfenc_kept_datasets_write(tfenc_context *ctx, tfenc_kept_datasets *kept, hid_t transfer,
                              int64_t n_documents, const int64_t *global_indices,
                              const char *const *carried, const char **ids)
{
    size_t n = (size_t)n_documents, ids_bytes = 0;
    for (size_t j = 0; j < n; j++)
        ids_bytes += strlen(carried[j]) + 1;
    int status = n > 0 ? reserve(ctx, kept, n, ids_bytes) : TFENC_OK;
    char *id_cursor = kept->ids;
    for (size_t j = 0; status == TFENC_OK && j < n; j++) {
        kept->points[j] = (hsize_t)global_indices[j];
        const char *cursor = carried[j];
        tfenc_kept_value id;
        if (tfenc_kept_next(&cursor, &id) != 0)
            return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: document %lld carries no kept "
                               "values", kept->path, (long long)global_indices[j]);
        ids[j] = NULL;
        if (id.type == TFENC_KEPT_STRING) {
            memcpy(id_cursor, id.string, id.length);
            id_cursor[id.length] = '\0';
            ids[j] = id_cursor;
            id_cursor += id.length + 1;
        }
    }
    for (int k = 0; status == TFENC_OK && k < kept->n; k++) {
        kept_dataset *field = &kept->fields[k];
        if (field->type == TFENC_KEPT_STRING)
            memset(kept->strings, 0, n * field->width);
        for (size_t j = 0; status == TFENC_OK && j < n; j++) {
            tfenc_kept_value value;
            if (value_of(carried[j], k, &value) != 0)
                return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: document %lld carries no "
                                   "value of '%s'", kept->path, (long long)global_indices[j],
                                   field->name);
            int has = value.type == TFENC_KEPT_STRING || value.type == TFENC_KEPT_INTEGER
                      || value.type == TFENC_KEPT_FLOAT;
            kept->flags[j] = (uint8_t)has;
            if (field->type == TFENC_KEPT_STRING) {
                if (has && (value.type != TFENC_KEPT_STRING || value.length > field->width))
                    return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: document %lld's '%s' is "
                                       "not a string of at most %zu bytes, as counted",
                                       kept->path, (long long)global_indices[j], field->name,
                                       field->width);
                if (has)
                    memcpy(kept->strings + j * field->width, value.string, value.length);
            } else if (field->type == TFENC_KEPT_INTEGER) {
                if (has && value.type != TFENC_KEPT_INTEGER)
                    return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: document %lld's '%s' is "
                                       "not an integer, as counted", kept->path,
                                       (long long)global_indices[j], field->name);
                ((int64_t *)kept->numbers)[j] = has ? value.integer : 0;
            } else {
                if (has && value.type == TFENC_KEPT_STRING)
                    return tfenc_error(ctx, TFENC_ERR_INTERNAL, "%s: document %lld's '%s' is "
                                       "a string, not a number as counted", kept->path,
                                       (long long)global_indices[j], field->name);
                /* Integers of a field that holds floats too are floats. */
                ((double *)kept->numbers)[j] = !has ? NAN
                                               : value.type == TFENC_KEPT_INTEGER
                                                   ? (double)value.integer
                                                   : value.real;
            }
        }
        if (status == TFENC_OK && n > 0)
            status = field->type == TFENC_KEPT_STRING
                         ? write_points(ctx, kept, field->values, field->name, transfer, n,
                                        field->file_type, kept->strings)
                         : write_points(ctx, kept, field->values, field->name, transfer, n,
                                        native_type(field->type), kept->numbers);
        if (status == TFENC_OK && n > 0)
            status = write_points(ctx, kept, field->valid, field->name, transfer, n,
                                  H5T_NATIVE_UINT8, kept->flags);
    }
    return status;
}

int tfenc_kept_datasets_close(tfenc_kept_datasets *kept)
{
    if (kept == NULL)
        return 0;
    int failed = 0;
    for (int k = 0; k < TFENC_MAX_KEEP_FIELDS; k++) {
        kept_dataset *field = &kept->fields[k];
        failed |= field->values >= 0 && H5Dclose(field->values) < 0;
        failed |= field->valid >= 0 && H5Dclose(field->valid) < 0;
        failed |= field->file_type >= 0 && H5Tclose(field->file_type) < 0;
        free(field->name);
    }
    free(kept->strings);
    free(kept->numbers);
    free(kept->flags);
    free(kept->points);
    free(kept->ids);
    free(kept);
    return failed;
}
