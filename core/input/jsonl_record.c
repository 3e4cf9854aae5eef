/* A JSON Lines line -> a document, with jansson; refusals say what is
 * wrong with the line, for the caller to name its file and number. */
#include "input/jsonl_record.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *json_type_name(const json_t *value)
{
    switch (json_typeof(value)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "an unknown value";
}

static int refuse(char *why, size_t why_size, const char *format, ...) TFENC_PRINTF(3, 4);

static int refuse(char *why, size_t why_size, const char *format, ...)
{
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(why, why_size, format, arguments);
    va_end(arguments);
    return TFENC_ERR_INPUT;
}

/* A text field (`role` names it in messages: "text field",
 * "text_pair_field"): a string, or a null as null_text says. */
static int read_text(const tfenc_jsonl_fields *fields, json_t *object, const char *name,
                     const char *role, const char **out, size_t *out_length, char *why,
                     size_t why_size)
{
    json_t *text = json_object_get(object, name);
    if (json_is_null(text)) {
        if (fields->null_text == TFENC_NULL_TEXT_SKIP)
            return TFENC_JSONL_SKIPPED;
        if (fields->null_text == TFENC_NULL_TEXT_ERROR)
            return refuse(why, why_size, ": %s '%s' is null (set [job] null_text = empty "
                          "to read it as an empty document, or skip to leave it out)", role,
                          name);
        *out = "";
        *out_length = 0;
        return TFENC_OK;
    }
    if (text == NULL || !json_is_string(text))
        return refuse(why, why_size, ": %s '%s' %s%s%s", role, name,
                      text == NULL ? "is missing" : "is ", text == NULL ? "" : json_type_name(text),
                      text == NULL ? "" : ", expected a string");
    *out = json_string_value(text);
    *out_length = json_string_length(text);
    return TFENC_OK;
}

/* The id field: a string, or an integer printed into the record. */
static int read_id(const tfenc_jsonl_fields *fields, json_t *object, tfenc_jsonl_record *record,
                   tfenc_document *document, char *why, size_t why_size)
{
    json_t *id = json_object_get(object, fields->id_field);
    if (id != NULL && json_is_string(id)) {
        document->id = json_string_value(id);
        document->id_length = json_string_length(id);
    } else if (id != NULL && json_is_integer(id)) {
        int n = snprintf(record->id_text, sizeof record->id_text, "%" JSON_INTEGER_FORMAT,
                         json_integer_value(id));
        document->id = record->id_text;
        document->id_length = (size_t)n;
    } else {
        return refuse(why, why_size, ": id field '%s' %s%s%s", fields->id_field,
                      id == NULL ? "is missing" : "is ", id == NULL ? "" : json_type_name(id),
                      id == NULL ? "" : ", expected a string or an integer");
    }
    /* Ids are stored at the longest id's length in every row, and travel
     * with each microbatch: one huge id would cost gigabytes. */
    if (fields->max_id_bytes > 0 && document->id_length > fields->max_id_bytes)
        return refuse(why, why_size, ": id field '%s' is %zu bytes long, more than [job] "
                      "max_id_bytes = %zu", fields->id_field, document->id_length,
                      fields->max_id_bytes);
    return TFENC_OK;
}

/* The kept fields' values, in order, into record->kept. Only what a
 * column of the output holds is kept: strings, integers, numbers, null. */
static int read_kept(const tfenc_jsonl_fields *fields, json_t *object, tfenc_jsonl_record *record,
                     tfenc_document *document, char *why, size_t why_size)
{
    tfenc_kept_text_clear(&record->kept);
    for (int k = 0; k < fields->n_keep_fields; k++) {
        const char *name = fields->keep_fields[k];
        json_t *field = json_object_get(object, name);
        tfenc_kept_value value = {.type = TFENC_KEPT_ABSENT};
        if (field == NULL)
            value.type = TFENC_KEPT_ABSENT;
        else if (json_is_null(field))
            value.type = TFENC_KEPT_NULL;
        else if (json_is_string(field))
            value = (tfenc_kept_value){.type = TFENC_KEPT_STRING,
                                       .string = json_string_value(field),
                                       .length = json_string_length(field)};
        else if (json_is_integer(field))
            value = (tfenc_kept_value){.type = TFENC_KEPT_INTEGER,
                                       .integer = json_integer_value(field)};
        else if (json_is_real(field))
            value = (tfenc_kept_value){.type = TFENC_KEPT_FLOAT, .real = json_real_value(field)};
        else
            return refuse(why, why_size, ": keep_fields '%s' is %s; a kept field holds "
                          "strings, integers, numbers or null", name, json_type_name(field));
        /* Kept strings are stored at the longest one's length in every row,
         * as ids are, and travel with each microbatch. */
        if (value.type == TFENC_KEPT_STRING && fields->max_field_bytes > 0
            && value.length > fields->max_field_bytes)
            return refuse(why, why_size, ": keep_fields '%s' is %zu bytes long, more than "
                          "[job] max_field_bytes = %zu", name, value.length,
                          fields->max_field_bytes);
        if (tfenc_kept_append(&record->kept, &value) != 0)
            return refuse(why, why_size, ": out of memory for keep_fields '%s'", name);
    }
    document->kept = record->kept.text != NULL ? record->kept.text : "";
    document->kept_length = record->kept.length;
    return TFENC_OK;
}

int tfenc_jsonl_record_read(const tfenc_jsonl_fields *fields, const char *line, size_t length,
                            tfenc_jsonl_record *record, tfenc_document *document, char *why,
                            size_t why_size)
{
    tfenc_jsonl_record_clear(record);
    /* A silently skipped blank line would shift every later document's
     * index: every line must be an object. */
    if (strspn(line, " \t") == length)
        return refuse(why, why_size, ": blank line (each line of a JSON Lines corpus must be "
                      "one object)");
    json_error_t error;
    record->object = json_loadb(line, length, JSON_REJECT_DUPLICATES, &error);
    if (record->object == NULL)
        return refuse(why, why_size, ", column %d: invalid JSON: %s", error.column, error.text);
    if (!json_is_object(record->object))
        return refuse(why, why_size, ": expected a JSON object, found %s",
                      json_type_name(record->object));
    int status = read_text(fields, record->object, fields->text_field, "text field",
                           &document->text, &document->text_length, why, why_size);
    if (status == TFENC_OK && fields->pair_field != NULL)
        status = read_text(fields, record->object, fields->pair_field, "text_pair_field",
                           &document->text_pair, &document->text_pair_length, why, why_size);
    if (status == TFENC_OK && fields->id_field != NULL)
        status = read_id(fields, record->object, record, document, why, why_size);
    if (status == TFENC_OK && fields->n_keep_fields > 0)
        status = read_kept(fields, record->object, record, document, why, why_size);
    return status;
}

void tfenc_jsonl_record_clear(tfenc_jsonl_record *record)
{
    if (record->object != NULL)
        json_decref(record->object);
    record->object = NULL;
}

void tfenc_jsonl_record_free(tfenc_jsonl_record *record)
{
    tfenc_jsonl_record_clear(record);
    tfenc_kept_text_free(&record->kept);
}
