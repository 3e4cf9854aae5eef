/* The table of a corpus's files that an output keeps (output.h), so that a
 * resume can tell whether the corpus is the one the file was begun with,
 * and a row can be traced to its file (document_source) by anyone reading
 * the file later.
 *
 * Stored as the dataset `corpus_shards [n]`, one row per file in corpus
 * order, a compound of
 *   path            fixed-length string, NUL-padded: the file's located
 *                   path (base/files.h: absolute, directory resolved), any
 *                   bytes a file name may hold (a tab, a newline)
 *   bytes           int64, its size (-1: it could not be looked at)
 *   fingerprint     64 hex digits (output/fingerprint.h)
 *   first_document  int64, the global index of its first document
 *   documents       int64, its documents (-1: not counted)
 *   skipped         int64, records it left out ([job] null_text = skip)
 * In h5py: f["corpus_shards"]["path"][f["document_source"]["shard"][i]].
 *
 * Files written before this version keep the table as the string
 * attribute `corpus_shards`, one line per file, tab-separated in the same
 * order (without `skipped` before null_text), paths as the job spelled
 * them: tfenc_corpus_shards_parse() reads it, so that --status lists such
 * files and a resume compares them like the dataset. */
#ifndef TFENC_CORPUS_SHARDS_H
#define TFENC_CORPUS_SHARDS_H

#include <stddef.h>
#include <stdint.h>

#include "tfenc/plugin.h"

typedef struct tfenc_corpus_shard {
    char *path;
    int64_t bytes;
    char fingerprint[65];
    int64_t first_document;
    int64_t documents;
    int64_t skipped;
} tfenc_corpus_shard;

typedef struct tfenc_corpus_shards {
    tfenc_corpus_shard *shards; /* [n] */
    int n;
    int from_attribute; /* read from an older file's tab-separated attribute */
} tfenc_corpus_shards;

/* The dataset's HDF5 types: packed, with paths of `path_size` bytes; the
 * file's little-endian, or (in_memory) the native integers of the rows
 * tfenc_corpus_shards_pack() makes. -1 on failure. */
int64_t tfenc_corpus_shards_type(size_t path_size, int in_memory);

/* The longest path's length in bytes, at least 1 (an HDF5 string type has
 * one byte at least). */
size_t tfenc_corpus_shards_path_size(const tfenc_corpus_shards *table);

/* The rows as the in-memory type above lays them out (malloc'ed), or NULL
 * when out of memory. */
void *tfenc_corpus_shards_pack(const tfenc_corpus_shards *table, size_t path_size);

/* Reads the dataset `corpus_shards` of `file` (an hid_t) into *table.
 * TFENC_ERR_NOT_FOUND, without a message, when the file has no such
 * dataset (an older file: see tfenc_corpus_shards_parse); TFENC_ERR_CONFIG
 * naming `path` and the dataset when it is not such a table (its type, or
 * a row: a fingerprint that is not 64 hex digits, a negative count,
 * documents that do not follow each other). */
int tfenc_corpus_shards_read(tfenc_context *ctx, const char *path, int64_t file,
                             tfenc_corpus_shards *table);

/* Reads an older file's tab-separated attribute text into *table, checked
 * as tfenc_corpus_shards_read() checks the dataset. */
int tfenc_corpus_shards_parse(tfenc_context *ctx, const char *path, const char *text,
                              tfenc_corpus_shards *table);

void tfenc_corpus_shards_free(tfenc_corpus_shards *table);

/* The last component of a shard's path: what identifies it beside its
 * content wherever the corpus is reached from (output.c's resume check). */
const char *tfenc_corpus_shard_name(const char *path);

#endif
