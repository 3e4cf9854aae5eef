/* The corpus's table of files in an output: its HDF5 types, packing the
 * rows for the write, and reading them back (the dataset, or an older
 * file's tab-separated attribute), checked row by row. */
#include "output/corpus_shards.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hdf5.h>

#include "base/context.h"
#include "base/hdf5_error.h"

/* A table larger than this is no table tfenc wrote (4 million shards of
 * 250-byte paths): refused before it is read into memory. */
#define MAX_TABLE_BYTES ((hsize_t)1 << 30)

/* The packed row after the path: bytes, fingerprint, first, documents,
 * skipped. */
#define FINGERPRINT_SIZE 64
#define ROW_TAIL (8 + FINGERPRINT_SIZE + 3 * 8)

static const char *const integer_members[] = {"bytes", "first_document", "documents", "skipped"};

/* Where each member lies in a packed row with paths of path_size bytes. */
static size_t member_offset(const char *name, size_t path_size)
{
    return strcmp(name, "path") == 0          ? 0
           : strcmp(name, "bytes") == 0       ? path_size
           : strcmp(name, "fingerprint") == 0 ? path_size + 8
           : strcmp(name, "first_document") == 0 ? path_size + 8 + FINGERPRINT_SIZE
           : strcmp(name, "documents") == 0       ? path_size + 16 + FINGERPRINT_SIZE
                                                  : path_size + 24 + FINGERPRINT_SIZE;
}

static hid_t string_type(size_t size)
{
    hid_t type = H5Tcopy(H5T_C_S1);
    if (type >= 0 && (H5Tset_size(type, size) < 0 || H5Tset_strpad(type, H5T_STR_NULLPAD) < 0)) {
        H5Tclose(type);
        return -1;
    }
    return type;
}

int64_t tfenc_corpus_shards_type(size_t path_size, int in_memory)
{
    hid_t type = H5Tcreate(H5T_COMPOUND, path_size + ROW_TAIL);
    hid_t path = string_type(path_size), fingerprint = string_type(FINGERPRINT_SIZE);
    hid_t integer = in_memory ? H5T_NATIVE_INT64 : H5T_STD_I64LE;
    int ok = type >= 0 && path >= 0 && fingerprint >= 0
             && H5Tinsert(type, "path", 0, path) >= 0
             && H5Tinsert(type, "fingerprint", member_offset("fingerprint", path_size),
                          fingerprint) >= 0;
    for (size_t i = 0; ok && i < sizeof integer_members / sizeof *integer_members; i++)
        ok = H5Tinsert(type, integer_members[i], member_offset(integer_members[i], path_size),
                       integer) >= 0;
    if (path >= 0)
        H5Tclose(path);
    if (fingerprint >= 0)
        H5Tclose(fingerprint);
    if (!ok && type >= 0) {
        H5Tclose(type);
        type = -1;
    }
    return type;
}

size_t tfenc_corpus_shards_path_size(const tfenc_corpus_shards *table)
{
    size_t longest = 1;
    for (int i = 0; i < table->n; i++) {
        size_t length = strlen(table->shards[i].path);
        longest = length > longest ? length : longest;
    }
    return longest;
}

void *tfenc_corpus_shards_pack(const tfenc_corpus_shards *table, size_t path_size)
{
    const size_t row_size = path_size + ROW_TAIL;
    unsigned char *rows = calloc(table->n > 0 ? (size_t)table->n : 1, row_size);
    for (int i = 0; rows != NULL && i < table->n; i++) {
        const tfenc_corpus_shard *shard = &table->shards[i];
        unsigned char *row = rows + (size_t)i * row_size;
        size_t length = strlen(shard->path);
        memcpy(row, shard->path, length < path_size ? length : path_size);
        memcpy(row + member_offset("fingerprint", path_size), shard->fingerprint,
               FINGERPRINT_SIZE);
        const int64_t values[] = {shard->bytes, shard->first_document, shard->documents,
                                  shard->skipped};
        for (size_t k = 0; k < sizeof values / sizeof *values; k++)
            memcpy(row + member_offset(integer_members[k], path_size), &values[k],
                   sizeof values[k]);
    }
    return rows;
}

/* A row that no run of tfenc writes names what is wrong with it: a reader
 * of document_source or a resume would otherwise trust it. */
static int check_rows(tfenc_context *ctx, const char *path, const char *where,
                      const tfenc_corpus_shards *table)
{
    for (int i = 0; i < table->n; i++) {
        const tfenc_corpus_shard *shard = &table->shards[i];
        const tfenc_corpus_shard *before = i > 0 ? &table->shards[i - 1] : NULL;
        const char *wrong = NULL;
        size_t hex = strspn(shard->fingerprint, "0123456789abcdef");
        if (shard->path[0] == '\0')
            wrong = "has an empty path";
        else if (hex != FINGERPRINT_SIZE || shard->fingerprint[hex] != '\0')
            wrong = "has a fingerprint that is not 64 hex digits";
        else if (shard->bytes < -1 || shard->documents < -1 || shard->skipped < 0
                 || shard->first_document < 0)
            wrong = "has a negative size or count";
        else if (before != NULL && before->documents >= 0
                 && shard->first_document != before->first_document + before->documents)
            wrong = "does not begin where the file before it ends";
        if (wrong != NULL)
            return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: inconsistent: %s, row %d %s: not a "
                               "table of the corpus's files as tfenc writes it", path, where, i,
                               wrong);
    }
    return TFENC_OK;
}

/* Whether the file's type has the member with the class the table needs. */
static int has_member(hid_t type, const char *name, H5T_class_t wanted, size_t *size)
{
    int index = H5Tget_member_index(type, name);
    hid_t member = index >= 0 ? H5Tget_member_type(type, (unsigned)index) : -1;
    int ok = member >= 0 && H5Tget_class(member) == wanted
             && (wanted != H5T_STRING || H5Tis_variable_str(member) == 0);
    if (ok && size != NULL)
        *size = H5Tget_size(member);
    if (member >= 0)
        H5Tclose(member);
    return ok;
}

int tfenc_corpus_shards_read(tfenc_context *ctx, const char *path, int64_t file,
                             tfenc_corpus_shards *table)
{
    memset(table, 0, sizeof *table);
    if (H5Lexists(file, "corpus_shards", H5P_DEFAULT) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return TFENC_ERR_NOT_FOUND;
    }
    hid_t dataset = H5Dopen2(file, "corpus_shards", H5P_DEFAULT);
    hid_t stored = dataset >= 0 ? H5Dget_type(dataset) : -1;
    hid_t space = dataset >= 0 ? H5Dget_space(dataset) : -1;
    hid_t memory = -1;
    hsize_t n = 0;
    size_t path_size = 0, fingerprint_size = 0;
    unsigned char *rows = NULL;
    const char *wrong = NULL;
    char detail[256] = "";
    int status = TFENC_OK;
    if (dataset < 0 || stored < 0 || space < 0)
        wrong = "cannot be opened";
    else if (H5Tget_class(stored) != H5T_COMPOUND || !has_member(stored, "path", H5T_STRING,
                                                                 &path_size)
             || !has_member(stored, "fingerprint", H5T_STRING, &fingerprint_size)
             || fingerprint_size != FINGERPRINT_SIZE)
        wrong = "is not a table of fixed-length path and fingerprint strings";
    else if (H5Sget_simple_extent_ndims(space) != 1
             || H5Sget_simple_extent_dims(space, &n, NULL) != 1)
        wrong = "is not a list of rows";
    for (size_t i = 0; wrong == NULL && i < sizeof integer_members / sizeof *integer_members; i++)
        if (!has_member(stored, integer_members[i], H5T_INTEGER, NULL))
            wrong = "lacks an integer column (bytes, first_document, documents, skipped)";
    if (wrong == NULL && (n > INT32_MAX || n * (path_size + ROW_TAIL) > MAX_TABLE_BYTES))
        wrong = "is larger than any corpus tfenc reads";
    if (wrong == NULL) {
        memory = tfenc_corpus_shards_type(path_size, 1);
        rows = malloc(n > 0 ? n * (path_size + ROW_TAIL) : 1);
        table->shards = calloc(n > 0 ? n : 1, sizeof *table->shards);
        if (memory < 0 || rows == NULL || table->shards == NULL)
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory to read "
                                 "'corpus_shards'", path);
        else if (n > 0 && H5Dread(dataset, memory, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows) < 0)
            status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot read dataset 'corpus_shards': %s",
                                 path, tfenc_hdf5_error_detail(detail, sizeof detail));
    } else {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                             "%s: inconsistent: dataset 'corpus_shards' %s: not the table of "
                             "the corpus's files tfenc writes", path, wrong);
    }
    for (hsize_t i = 0; status == TFENC_OK && i < n; i++) {
        const unsigned char *row = rows + i * (path_size + ROW_TAIL);
        tfenc_corpus_shard *shard = &table->shards[i];
        shard->path = strndup((const char *)row, path_size);
        if (shard->path == NULL) {
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", path);
            break;
        }
        table->n++;
        memcpy(shard->fingerprint, row + member_offset("fingerprint", path_size),
               FINGERPRINT_SIZE);
        int64_t *values[] = {&shard->bytes, &shard->first_document, &shard->documents,
                             &shard->skipped};
        for (size_t k = 0; k < sizeof values / sizeof *values; k++)
            memcpy(values[k], row + member_offset(integer_members[k], path_size),
                   sizeof *values[k]);
    }
    if (status == TFENC_OK)
        status = check_rows(ctx, path, "dataset 'corpus_shards'", table);
    free(rows);
    if (memory >= 0)
        H5Tclose(memory);
    if (space >= 0)
        H5Sclose(space);
    if (stored >= 0)
        H5Tclose(stored);
    if (dataset >= 0)
        H5Dclose(dataset);
    H5Eclear2(H5E_DEFAULT);
    if (status != TFENC_OK)
        tfenc_corpus_shards_free(table);
    return status;
}

/* One field of a tab-separated line as a number; -1 when absent. */
static int64_t number_field(const char *field, size_t length)
{
    char digits[32];
    if (length == 0 || length >= sizeof digits)
        return -1;
    memcpy(digits, field, length);
    digits[length] = '\0';
    char *end = NULL;
    long long value = strtoll(digits, &end, 10);
    return *end == '\0' ? (int64_t)value : -1;
}

int tfenc_corpus_shards_parse(tfenc_context *ctx, const char *path, const char *text,
                              tfenc_corpus_shards *table)
{
    memset(table, 0, sizeof *table);
    table->from_attribute = 1;
    int lines = text[0] != '\0' && text[strlen(text) - 1] != '\n';
    for (const char *p = text; (p = strchr(p, '\n')) != NULL; p++)
        lines++;
    table->shards = calloc(lines > 0 ? (size_t)lines : 1, sizeof *table->shards);
    if (table->shards == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", path);
    for (const char *line = text; *line != '\0' && table->n < lines;) {
        size_t length = strcspn(line, "\n");
        /* path \t bytes \t fingerprint \t first \t documents [\t skipped] */
        const char *field[6] = {NULL};
        size_t field_length[6] = {0};
        const char *p = line, *end = line + length;
        for (int f = 0; f < 6 && p <= end; f++) {
            const char *tab = memchr(p, '\t', (size_t)(end - p));
            field[f] = p;
            field_length[f] = (size_t)((tab != NULL ? tab : end) - p);
            p = (tab != NULL ? tab : end) + 1;
        }
        tfenc_corpus_shard *shard = &table->shards[table->n];
        shard->path = strndup(line, field_length[0]);
        if (shard->path == NULL) {
            tfenc_corpus_shards_free(table);
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", path);
        }
        table->n++;
        if (field[2] != NULL && field_length[2] == FINGERPRINT_SIZE)
            memcpy(shard->fingerprint, field[2], FINGERPRINT_SIZE);
        shard->bytes = number_field(field[1], field_length[1]);
        shard->first_document = number_field(field[3], field_length[3]);
        shard->documents = number_field(field[4], field_length[4]);
        shard->skipped = field[5] != NULL ? number_field(field[5], field_length[5]) : 0;
        line += length + (line[length] == '\n');
    }
    int status = check_rows(ctx, path, "attribute 'corpus_shards'", table);
    if (status != TFENC_OK)
        tfenc_corpus_shards_free(table);
    return status;
}

void tfenc_corpus_shards_free(tfenc_corpus_shards *table)
{
    for (int i = 0; table->shards != NULL && i < table->n; i++)
        free(table->shards[i].path);
    free(table->shards);
    table->shards = NULL;
    table->n = 0;
}

const char *tfenc_corpus_shard_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash != NULL ? slash + 1 : path;
}
