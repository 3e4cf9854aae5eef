/* Reading the files of a model folder: paths, whole files, and the JSON
 * files of Hugging Face and sentence-transformers with typed getters whose
 * errors name the file and the key. */
#ifndef TFENC_IMPORT_FILES_H
#define TFENC_IMPORT_FILES_H

#include <stddef.h>

#include <jansson.h>

#include "base/context.h"

/* "directory/name" (or the one that is not empty), malloc'ed; NULL when out
 * of memory. */
char *import_join_path(const char *directory, const char *name);

/* 1 if something is at `path` (core/base/files.h, tfenc_file_present): an
 * optional file is absent only when nothing is there; a FIFO, directory or
 * device in its place is then refused by the reader, never skipped. */
int import_file_exists(const char *path);

/* The cap on a model folder's text files (JSON configurations, vocab.txt,
 * tokenizer.json, which reaches ~20 MB for 250k pieces). */
#define IMPORT_MAX_FILE_BYTES ((size_t)1 << 28)

/* Reads the whole regular file into a malloc'ed NUL-terminated *text
 * (*length bytes before the NUL when length is not NULL); a FIFO, directory
 * or device, or a file above IMPORT_MAX_FILE_BYTES, is refused naming it. */
int import_read_text_file(tfenc_context *ctx, const char *path, char **text, size_t *length);

/* Parses a JSON object file into *json (numbers as reals: Hugging Face files
 * hold integers as large as 1e30). When text is not NULL, *text receives the
 * file as read (malloc'ed). */
int import_load_json(tfenc_context *ctx, const char *path, json_t **json, char **text);

/* An integral number in [minimum, INT_MAX]; `default_value` when absent
 * (a default_value below minimum makes the key required). `path` names the
 * file in messages; `object` may be NULL (every key absent). */
int import_json_int(tfenc_context *ctx, const char *path, json_t *object, const char *key,
                    int minimum, int default_value, int *value);

/* true or false; `default_value` when absent. */
int import_json_bool(tfenc_context *ctx, const char *path, json_t *object, const char *key,
                     int default_value, int *value);

/* A finite number > 0; `default_value` when absent. */
int import_json_positive(tfenc_context *ctx, const char *path, json_t *object, const char *key,
                         double default_value, double *value);

/* A string (owned by `object`); `default_value` when absent or null. */
int import_json_string(tfenc_context *ctx, const char *path, json_t *object, const char *key,
                       const char *default_value, const char **value);

#endif
