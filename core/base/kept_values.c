/* Kept values to and from their text (kept_values.h). */
#include "base/kept_values.h"
#include "base/growth.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const tfenc_kept_type_names[] = {"absent", "null", "string", "integer", "float",
                                             NULL};

static const char tags[TFENC_KEPT_TYPES] = {'a', 'n', 's', 'i', 'f'};

static int reserve(tfenc_kept_text *text, size_t more)
{
    if (text->length + more + 1 <= text->capacity)
        return 0;
    int64_t capacity = tfenc_grown_capacity((int64_t)text->capacity,
                                            (int64_t)(text->length + more + 1), 64, INT64_MAX);
    int ok = 1;
    TFENC_GROW_ARRAY(text->text, capacity, ok);
    if (!ok)
        return -1;
    text->capacity = (size_t)capacity;
    return 0;
}

int tfenc_kept_append(tfenc_kept_text *text, const tfenc_kept_value *value)
{
    char head[48];
    int n = 0;
    switch (value->type) {
    case TFENC_KEPT_STRING:
        n = snprintf(head, sizeof head, "s%zu:", value->length);
        break;
    case TFENC_KEPT_INTEGER:
        n = snprintf(head, sizeof head, "i%" PRId64 ";", value->integer);
        break;
    case TFENC_KEPT_FLOAT:
        n = snprintf(head, sizeof head, "f%.17g;", value->real);
        break;
    default:
        n = snprintf(head, sizeof head, "%c", tags[value->type == TFENC_KEPT_NULL]);
        break;
    }
    size_t body = value->type == TFENC_KEPT_STRING ? value->length : 0;
    if (reserve(text, (size_t)n + body) != 0)
        return -1;
    memcpy(text->text + text->length, head, (size_t)n);
    text->length += (size_t)n;
    if (body > 0)
        memcpy(text->text + text->length, value->string, body);
    text->length += body;
    text->text[text->length] = '\0';
    return 0;
}

int tfenc_kept_append_text(tfenc_kept_text *text, const char *values, size_t length)
{
    if (reserve(text, length) != 0)
        return -1;
    if (length > 0)
        memcpy(text->text + text->length, values, length);
    text->length += length;
    text->text[text->length] = '\0';
    return 0;
}

void tfenc_kept_text_clear(tfenc_kept_text *text)
{
    text->length = 0;
    if (text->text != NULL)
        text->text[0] = '\0';
}

void tfenc_kept_text_free(tfenc_kept_text *text)
{
    free(text->text);
    memset(text, 0, sizeof *text);
}

int tfenc_kept_next(const char **cursor, tfenc_kept_value *value)
{
    const char *p = *cursor;
    char *end = NULL;
    memset(value, 0, sizeof *value);
    switch (*p) {
    case 'a':
    case 'n':
        value->type = *p == 'a' ? TFENC_KEPT_ABSENT : TFENC_KEPT_NULL;
        *cursor = p + 1;
        return 0;
    case 's': {
        unsigned long long length = strtoull(p + 1, &end, 10);
        if (end == p + 1 || *end != ':' || strnlen(end + 1, length) < length)
            return -1;
        value->type = TFENC_KEPT_STRING;
        value->string = end + 1;
        value->length = (size_t)length;
        *cursor = end + 1 + length;
        return 0;
    }
    case 'i':
        value->type = TFENC_KEPT_INTEGER;
        value->integer = strtoll(p + 1, &end, 10);
        break;
    case 'f':
        value->type = TFENC_KEPT_FLOAT;
        value->real = strtod(p + 1, &end);
        break;
    default:
        return -1;
    }
    if (end == p + 1 || *end != ';')
        return -1;
    *cursor = end + 1;
    return 0;
}

size_t tfenc_kept_carried_bound(size_t max_id_length, size_t max_kept_length, int carries_kept)
{
    /* A string value's head: its tag, up to 20 digits of length and ':'. */
    return carries_kept ? 22 + max_id_length + max_kept_length + 1 : max_id_length + 1;
}
