/* The values of a record's kept fields ([job] keep_fields: metadata such as
 * a url or a language carried from the corpus into the output beside the
 * ids), as one text without NUL bytes. Documents travel from the reader to
 * the writer as their id does (the feeder, the microbatches between
 * pipeline stages, the writer's queue: each a NUL-terminated string), so
 * the kept values ride in the same string, the id first, and nothing on
 * the way needs to know about them.
 *
 * Each value is a tag and its text: "a" a field the record does not have,
 * "n" null, "s<length>:<bytes>" a string (no NUL byte: the readers refuse
 * them), "i<decimal>;" an integer, "f<%.17g>;" a float (17 significant
 * digits read back by strtod give the same double, bit for bit). Both
 * ends of the path are tfenc's, so the text is never stored. */
#ifndef TFENC_KEPT_VALUES_H
#define TFENC_KEPT_VALUES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Most fields a job keeps: each is a dataset of the output file, and its
 * values travel with every document. */
#define TFENC_MAX_KEEP_FIELDS 16

/* A kept field NAME is the output's dataset NAME, and its null mask the
 * dataset NAME_valid (docs/output.md). */
#define TFENC_KEPT_MASK_SUFFIX "_valid"

typedef enum tfenc_kept_type {
    TFENC_KEPT_ABSENT,  /* the record has no such field (JSON Lines) */
    TFENC_KEPT_NULL,
    TFENC_KEPT_STRING,
    TFENC_KEPT_INTEGER,
    TFENC_KEPT_FLOAT,
    TFENC_KEPT_TYPES
} tfenc_kept_type;

/* "absent", "null", "string", "integer", "float", indexed by type. */
extern const char *const tfenc_kept_type_names[];

typedef struct tfenc_kept_value {
    tfenc_kept_type type;
    const char *string; /* STRING: its bytes (not NUL-terminated when decoded) */
    size_t length;      /* STRING: bytes */
    int64_t integer;    /* INTEGER */
    double real;        /* FLOAT */
} tfenc_kept_value;

/* A kept field as the output stores it: its name, the type of its dataset
 * (STRING, INTEGER or FLOAT) and, for strings, the longest in bytes. */
typedef struct tfenc_kept_field {
    const char *name;
    tfenc_kept_type type;
    size_t longest;
} tfenc_kept_field;

/* A growing text of values; zero-initialised is empty. */
typedef struct tfenc_kept_text {
    char *text; /* NUL-terminated once anything was appended */
    size_t length;
    size_t capacity;
} tfenc_kept_text;

/* Appends `value`; -1 when out of memory, else 0. */
int tfenc_kept_append(tfenc_kept_text *text, const tfenc_kept_value *value);
/* Appends `length` bytes of values already written as text. */
int tfenc_kept_append_text(tfenc_kept_text *text, const char *values, size_t length);
/* Empties the text, keeping its memory. */
void tfenc_kept_text_clear(tfenc_kept_text *text);
void tfenc_kept_text_free(tfenc_kept_text *text);

/* The bytes of the longest string a document carries to the writer,
 * NUL included: its id (max_id_length bytes), or with kept fields
 * (carries_kept) the id written as a value and then the kept values'
 * text (max_kept_length bytes). */
size_t tfenc_kept_carried_bound(size_t max_id_length, size_t max_kept_length, int carries_kept);

/* Reads the value at *cursor into *value and moves the cursor past it; -1
 * when the text ends or is malformed there, else 0. */
int tfenc_kept_next(const char **cursor, tfenc_kept_value *value);

#ifdef __cplusplus
}
#endif

#endif
