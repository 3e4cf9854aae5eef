/* The corpus formats' table: one entry per format, naming its reader
 * (reader.h), the file names it is known by, and what sets it apart from
 * the others. The corpus opens its reader through it, the job detects a
 * format by extension through it, --dry-run and --list-formats describe
 * it, and docs/job-file.md's table of formats is checked against it
 * (tests/formats_doc.py). Nothing else in tfenc decides by the format. */
#ifndef TFENC_FORMATS_H
#define TFENC_FORMATS_H

#include <stddef.h>

#include "input/corpus_types.h"
#include "input/reader.h"

typedef struct tfenc_corpus_format_info {
    const char *title;                  /* in messages and listings: "JSON Lines" */
    const char *document;               /* what one document is, for listings */
    const char *const *extensions;      /* the names it is known by (".jsonl"),
                                         * NULL-terminated; NULL: none */
    const char *const *inner_extensions; /* known by only before a compression's
                                          * (".json" in "c4-0001.json.gz"); NULL: none */
    /* The presence flag: NULL when configure did not find what the reader
     * needs, and `missing` then says what and how to get it. */
    const tfenc_corpus_reader *reader;
    const char *missing;
    int token_ids;                      /* documents are token ids: no tokenizer, no prompt,
                                         * no chunks */
    int pairs;                          /* reads pairs of texts (text_pair_field) */
} tfenc_corpus_format_info;

/* The formats' names, indexed by value ("auto" last), NULL-terminated: the
 * table's first column, the values of [job] input_format. */
extern const char *const tfenc_corpus_format_names[];

/* The format's entry; NULL for AUTO or a value outside the table. */
const tfenc_corpus_format_info *tfenc_corpus_format_info_of(tfenc_corpus_format format);

/* The entry's token_ids and pairs; 0 for AUTO or a value outside the table. */
int tfenc_corpus_format_token_ids(tfenc_corpus_format format);
int tfenc_corpus_format_pairs(tfenc_corpus_format format);

/* The titles of the formats that read pairs, for messages: "JSON Lines or
 * Parquet". */
void tfenc_corpus_format_pair_titles(char *line, size_t size);

/* "text", "jsonl", "hdf5" or "parquet" -> the format; TFENC_ERR_NOT_FOUND for any other
 * name (the caller reports it with the key it came from). */
int tfenc_corpus_format_from_name(const char *name, tfenc_corpus_format *format);
/* The format a path's extension implies, as the entries' extensions say
 * (.jsonl/.ndjson -> JSON Lines, .h5/.hdf5 -> HDF5, .parquet/.pq ->
 * Parquet), text for a name no entry claims; behind a compression extension
 * (.gz, .zst, .zstd, .xz) the one before counts, and an entry's
 * inner_extensions count there too (".json.gz" is JSON Lines). */
tfenc_corpus_format tfenc_corpus_format_from_path(const char *path);
/* "text", "jsonl", "hdf5", "parquet". */
const char *tfenc_corpus_format_name(tfenc_corpus_format format);

/* The compression extensions tfenc_corpus_format_from_path() looks behind,
 * NULL-terminated. */
extern const char *const tfenc_corpus_compression_extensions[];

/* One line for --dry-run: the format's title and what its reader reads
 * with these options ("JSON Lines: the text in field 'text'"). */
void tfenc_corpus_format_describe(const tfenc_corpus_options *options, char *line, size_t size);

#endif
