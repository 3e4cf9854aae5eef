/* One line of a JSON Lines corpus as a document: the object's text field
 * (and a pair's second text field) and, when configured, its id field (a
 * string, or an integer printed as text). The JSON Lines reader
 * (jsonl_corpus.c) finds the lines; this module only reads one.
 *
 * A refused line is TFENC_ERR_INPUT with the reason in `why`, written to
 * follow "FILE: line N" (it starts with ": " or ", column C: "), so that the
 * caller, who knows the file and the line, makes the one-line message. */
#ifndef TFENC_JSONL_RECORD_H
#define TFENC_JSONL_RECORD_H

#include <stddef.h>
#include <jansson.h>

#include "input/corpus_types.h"

/* What to read from each object. */
typedef struct tfenc_jsonl_fields {
    const char *text_field;
    const char *pair_field;   /* a cross-encoder's second text (text_pair_field); NULL: none */
    const char *id_field;     /* NULL: no ids */
    size_t max_id_bytes;      /* longer ids are refused (0: no limit) */
    const char *const *keep_fields; /* [n_keep_fields] fields whose values are kept */
    int n_keep_fields;
    size_t max_field_bytes;   /* longer kept strings are refused (0: no limit) */
    tfenc_null_text null_text;
} tfenc_jsonl_fields;

/* A record left out (null_text = skip): no document, and no error. */
#define TFENC_JSONL_SKIPPED 1

/* A parsed line and what its document points into: valid until the next
 * tfenc_jsonl_record_read() or tfenc_jsonl_record_clear(). */
typedef struct tfenc_jsonl_record {
    json_t *object;
    char id_text[32]; /* an integer id printed as text */
    tfenc_kept_text kept; /* the kept fields' values (document->kept) */
} tfenc_jsonl_record;

/* Parses `line` (`length` bytes, NUL-terminated) into record and fills
 * document's text, id and kept values (a field the object lacks is kept
 * as absent). TFENC_OK, TFENC_JSONL_SKIPPED, or
 * TFENC_ERR_INPUT with `why` filled. */
int tfenc_jsonl_record_read(const tfenc_jsonl_fields *fields, const char *line, size_t length,
                            tfenc_jsonl_record *record, tfenc_document *document, char *why,
                            size_t why_size);

/* Releases the parsed object (the record itself stays usable). */
void tfenc_jsonl_record_clear(tfenc_jsonl_record *record);
/* Releases everything, the kept values' memory too. */
void tfenc_jsonl_record_free(tfenc_jsonl_record *record);

#endif
