/* What a check of one file (output/output_checks.h) knows as it goes: the
 * file, the first failure, the facts its attributes give (through the
 * description's tfenc_output_facts) and the corpus's table of files; shared
 * by the attribute checks (output_attribute_checks.c) and the dataset
 * checks (output_dataset_checks.c). Not for callers outside those files. */
#ifndef TFENC_OUTPUT_CHECK_STATE_H
#define TFENC_OUTPUT_CHECK_STATE_H

#include <stddef.h>
#include <stdint.h>

#include <hdf5.h>

#include "base/context.h"
#include "output/output_description.h"

/* Rows of a pooled, scores or multi-vector output are at most [model]
 * d_model wide; only a sparse output's columns (a vocabulary) are more. */
#define WIDEST_DENSE_ROW 65536

/* The corpus's files: the documents each holds (corpus_shards). */
typedef struct tfenc_check_shard_rows {
    int64_t first, documents; /* documents -1: not recorded */
} tfenc_check_shard_rows;

typedef struct tfenc_check_shards {
    int present;
    int64_t n;
    tfenc_check_shard_rows *rows;
} tfenc_check_shards;

/* Reads a dataset in blocks of bounded size, the block that holds the
 * element asked for: sequential reads touch each block once. */
typedef struct tfenc_check_reader {
    int open;
    hid_t dataset, space, memory_type;
    size_t element_size;
    hsize_t length;      /* elements of the dataset */
    hsize_t first, held; /* the block held: elements first .. first + held - 1 */
    unsigned char *block;
} tfenc_check_reader;

/* A run's bounds for the current document, as its BY_BOUNDARY dataset gave them. */
typedef struct tfenc_check_bounds {
    int known;
    int64_t first, end;
} tfenc_check_bounds;

typedef struct tfenc_check {
    tfenc_context *ctx;
    const char *path;
    hid_t file;          /* the file's root: its documents (lengths, complete, ...) */
    hid_t group;         /* where the datasets checked are: the root, or a head's group */
    const char *prefix;  /* "" or "/outputs/NAME/": the datasets' names in messages */
    int status;          /* the first failure; every step stops once it is set */
    int complete;
    tfenc_output_kind kind;
    tfenc_output_facts facts; /* the description's view of the file, from its attributes */
    int64_t n_documents, d_model, n_tokens, n_chunks, entries, top_k;
    double threshold;
    char attribute[320]; /* the attribute being checked, as messages show it */
    int empty_zeros; /* the job's settings say `empty_documents = zeros`: length 0 is a
                      * document without tokens, not damage */
    tfenc_check_shards shards;
    /* The datasets, indexed by tfenc_output_dataset_id: the name each has
     * here (NULL where the kind has none), as messages show it. */
    const char *names[TFENC_DATASET_COUNT];
    char shown[TFENC_DATASET_COUNT][320];
    int present[TFENC_DATASET_COUNT];
    tfenc_check_reader readers[TFENC_DATASET_COUNT];
    tfenc_check_bounds bounds[TFENC_DATASET_COUNT];
    /* Found once, not per document: the datasets with per-document rules
     * in table order. */
    tfenc_output_dataset_id per_document[TFENC_DATASET_COUNT];
    size_t n_per_document;
} tfenc_check;

/* Records the first failure as "PATH: inconsistent: ..." (or, for I/O,
 * "PATH: ..."); later ones are dropped. Returns the first failure. */
int tfenc_check_fail(tfenc_check *c, int status, const char *format, ...) TFENC_PRINTF(3, 4);

/* A stored string for a one-line message: at most 60 bytes, control
 * characters as '?'. */
const char *tfenc_check_quoted(const char *value, char *text, size_t size);

/* An integer attribute of `location`, or `absent`. */
int64_t tfenc_check_integer_attribute(hid_t location, const char *name, int64_t absent);

/* What an HDF5 type is, for messages: "int8", "float32", "string", ... */
void tfenc_check_describe_type(hid_t type, char *text, size_t size);

/* The shape of a dataspace as "[3]", "[50, 16]" or "a scalar". */
void tfenc_check_describe_space(hid_t space, char *text, size_t size);

/* A compact dtype (int8, uint8, binary, ubinary). */
int tfenc_check_compact(tfenc_output_dtype dtype);

/* The table of the corpus's files (output/corpus_shards.h: the dataset, or
 * an older file's tab-separated attribute), whose reader checks each row;
 * here, that all of them are the file's n_documents. Fills table->rows
 * with each file's rows (free them); absent: table->present 0. */
int tfenc_check_read_shards(tfenc_check *c, tfenc_check_shards *table);

/* What the attributes say the file is (c->file's for the documents,
 * c->group's for the rows: its kind, dtype, width, sparse settings), into
 * c and c->facts. Files of older versions lack output_kind (their datasets
 * tell) and chunks (off). NULL kind: the group names no kind. */
void tfenc_check_read_facts(tfenc_check *c);

/* The attributes of c->group (the root, or a head's group) against their
 * domains and each other (output_attribute_checks.c): c->status. */
int tfenc_check_attributes(tfenc_check *c);

#endif
