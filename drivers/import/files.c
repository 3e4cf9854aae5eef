/* Paths, whole files and typed JSON getters for tfenc-import's readers. */
#include "config.h"

#include "files.h"
#include "base/files.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

char *import_join_path(const char *directory, const char *name)
{
    size_t length = strlen(directory) + strlen(name) + 2;
    char *path = malloc(length);
    if (path != NULL) {
        if (directory[0] == '\0' || name[0] == '\0')
            snprintf(path, length, "%s%s", directory, name);
        else
            snprintf(path, length, "%s/%s", directory, name);
    }
    return path;
}

int import_file_exists(const char *path)
{
    return tfenc_file_present(path);
}

/* In the order transformers' from_pretrained looks for them (and
 * sentence-transformers' modules: safetensors, else the torch file). */
static const char *const checkpoint_files[] = {"model.safetensors", "model.safetensors.index.json",
                                               "pytorch_model.bin", "pytorch_model.bin.index.json"};

int import_open_checkpoint(tfenc_context *ctx, const char *directory,
                           tfenc_checkpoint **checkpoint)
{
    *checkpoint = NULL;
    int status = TFENC_OK;
    for (int i = 0; i < 4 && *checkpoint == NULL && status == TFENC_OK; i++) {
        char *path = import_join_path(directory, checkpoint_files[i]);
        if (path == NULL)
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        else if (import_file_exists(path))
            status = i % 2 == 0 ? tfenc_checkpoint_open(ctx, path, checkpoint)
                                : tfenc_checkpoint_open_index(ctx, path, checkpoint);
        free(path);
    }
    return status;
}

int import_read_text_file(tfenc_context *ctx, const char *path, char **text, size_t *length)
{
    size_t ignored;
    return tfenc_file_read_all(ctx, "model file", path, IMPORT_MAX_FILE_BYTES, text,
                               length != NULL ? length : &ignored);
}

/* Hugging Face JSON files hold integers as large as 1e30 (model_max_length
 * for "no limit"), which jansson refuses as integers: read numbers as reals. */
int import_load_json(tfenc_context *ctx, const char *path, json_t **json, char **text)
{
    char *buffer;
    size_t length;
    int status = import_read_text_file(ctx, path, &buffer, &length);
    if (status != TFENC_OK)
        return status;
    json_error_t error;
    *json = json_loadb(buffer, length, JSON_DECODE_INT_AS_REAL, &error);
    if (*json == NULL) {
        free(buffer);
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s:%d:%d: invalid JSON: %s", path,
                           error.line, error.column, error.text);
    }
    if (!json_is_object(*json)) {
        free(buffer);
        json_decref(*json);
        *json = NULL;
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: expected a JSON object", path);
    }
    if (text != NULL)
        *text = buffer;
    else
        free(buffer);
    return TFENC_OK;
}

/* An integral number in [minimum, maximum]; `default_value` when absent
 * (a default_value below minimum makes the key required). */
int import_json_int(tfenc_context *ctx, const char *path, json_t *object, const char *key,
                    int minimum, int maximum, int default_value, int *value)
{
    json_t *item = json_object_get(object, key);
    if (item == NULL || json_is_null(item)) {
        if (default_value < minimum)
            return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: required key '%s' is missing", path,
                               key);
        *value = default_value;
        return TFENC_OK;
    }
    double number = json_number_value(item);
    if (!json_is_number(item) || number != floor(number))
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: key '%s' must be an integer in %d..%d",
                           path, key, minimum, maximum);
    /* Compared as doubles: 1e9 or 1e30 must not be converted to int first. */
    if (number < minimum || number > maximum)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "%s: key '%s' = %.15g is out of range (expected an integer in "
                           "%d..%d)", path, key, number, minimum, maximum);
    *value = (int)number;
    return TFENC_OK;
}

int import_json_bool(tfenc_context *ctx, const char *path, json_t *object, const char *key,
                     int default_value, int *value)
{
    json_t *item = json_object_get(object, key);
    if (item == NULL || json_is_null(item)) {
        *value = default_value;
        return TFENC_OK;
    }
    if (!json_is_boolean(item))
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: key '%s' must be true or false", path,
                           key);
    *value = json_is_true(item);
    return TFENC_OK;
}

int import_json_positive(tfenc_context *ctx, const char *path, json_t *object, const char *key,
                         double default_value, double *value)
{
    json_t *item = json_object_get(object, key);
    if (item == NULL || json_is_null(item)) {
        *value = default_value;
        return TFENC_OK;
    }
    double number = json_number_value(item);
    if (!json_is_number(item) || !(number > 0) || !isfinite(number))
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: key '%s' must be a positive number",
                           path, key);
    *value = number;
    return TFENC_OK;
}

int import_json_string(tfenc_context *ctx, const char *path, json_t *object, const char *key,
                       const char *default_value, const char **value)
{
    json_t *item = json_object_get(object, key);
    if (item == NULL || json_is_null(item)) {
        *value = default_value;
        return TFENC_OK;
    }
    if (!json_is_string(item))
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: key '%s' must be a string", path, key);
    *value = json_string_value(item);
    return TFENC_OK;
}

char *import_ini_json(const json_t *value, size_t flags)
{
    char *dumped = json_dumps(value, flags | JSON_ENSURE_ASCII);
    if (dumped == NULL)
        return NULL;
    char *result = malloc(strlen(dumped) * 6 + 1);
    if (result != NULL) {
        char *end = result;
        for (const char *p = dumped; *p != '\0'; p++)
            end += *p == ';' ? sprintf(end, "\\u003b") : *p == '#' ? sprintf(end, "\\u0023")
                                                                     : sprintf(end, "%c", *p);
    }
    free(dumped);
    return result;
}
