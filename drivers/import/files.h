/* Reading the files of a model folder: paths, whole files, and the JSON
 * files of Hugging Face and sentence-transformers with typed getters whose
 * errors name the file and the key. */
#ifndef TFENC_IMPORT_FILES_H
#define TFENC_IMPORT_FILES_H

#include <stddef.h>

#include <jansson.h>

#include "base/context.h"
#include "model/checkpoint.h"

/* "directory/name" (or the one that is not empty), malloc'ed; NULL when out
 * of memory. */
char *import_join_path(const char *directory, const char *name);

/* 1 if something is at `path` (core/base/files.h, tfenc_file_present): an
 * optional file is absent only when nothing is there; a FIFO, directory or
 * device in its place is then refused by the reader, never skipped. */
int import_file_exists(const char *path);

/* Opens the weights of `directory` as transformers finds them:
 * model.safetensors, else model.safetensors.index.json and its shards,
 * else pytorch_model.bin, else pytorch_model.bin.index.json and its
 * shards. *checkpoint stays NULL (and TFENC_OK is returned) when none is
 * there, for the caller to say what it needed. */
int import_open_checkpoint(tfenc_context *ctx, const char *directory,
                           tfenc_checkpoint **checkpoint);

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

/* The bounds of the sizes a config.json gives, checked as each is read and
 * before any sizes a thing: a value past them is a broken or hostile file
 * (num_hidden_layers = 1e7 asked for 50 GB of tensor plans, 1e9 overflowed
 * an int). Each is far above any real model's and keeps products such as
 * layers x tensors or vocab_size + padding inside an int. */
#define IMPORT_MAX_WIDTH 65536             /* hidden sizes, heads: [model] d_model's range */
#define IMPORT_MAX_LAYERS 4096             /* layers (real encoders: 2 to ~100) */
#define IMPORT_MAX_FFN_WIDTH (1 << 20)     /* feed-forward widths */
#define IMPORT_MAX_VOCAB (1 << 24)         /* vocabularies and ids (real: up to ~260k) */
#define IMPORT_MAX_POSITIONS (1 << 24)     /* positions: [model] max_positions' range */

/* An integral number in [minimum, maximum]; `default_value` when absent
 * (a default_value below minimum makes the key required). A value outside
 * is refused naming the file, the key, the range and the value. `path`
 * names the file in messages; `object` may be NULL (every key absent). */
int import_json_int(tfenc_context *ctx, const char *path, json_t *object, const char *key,
                    int minimum, int maximum, int default_value, int *value);

/* true or false; `default_value` when absent. */
int import_json_bool(tfenc_context *ctx, const char *path, json_t *object, const char *key,
                     int default_value, int *value);

/* A finite number > 0; `default_value` when absent. */
int import_json_positive(tfenc_context *ctx, const char *path, json_t *object, const char *key,
                         double default_value, double *value);

/* A string (owned by `object`); `default_value` when absent or null. */
int import_json_string(tfenc_context *ctx, const char *path, json_t *object, const char *key,
                       const char *default_value, const char **value);

/* `value` as JSON that an INI value carries unchanged (a job file's labels,
 * prompts): ASCII, with ';' and '#', which inih may take for a comment,
 * escaped as JSON allows; a string is quoted, so the spaces inih strips
 * around a value are kept. `flags` are json_dumps'. A new string (free
 * it), NULL when out of memory. */
char *import_ini_json(const json_t *value, size_t flags);

#endif
