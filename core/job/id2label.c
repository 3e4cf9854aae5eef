/* The one rule for id2label (job/id2label.h), on jansson's parser. */
#include "job/id2label.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

int tfenc_id2label_valid(const char *labels, int width, const char *width_text, char *why,
                         size_t size)
{
    json_error_t parse_error;
    /* A name given twice would be stored as given while jansson keeps the
     * last: the labels would say two things. */
    json_t *object = json_loads(labels, JSON_REJECT_DUPLICATES, &parse_error);
    int valid = 0;
    if (object == NULL && json_error_code(&parse_error) == json_error_duplicate_key) {
        /* jansson's text: "duplicate object key near '\"0\"'" */
        const char *near = strstr(parse_error.text, "near '");
        if (near != NULL)
            snprintf(why, size, "names label %.*s twice", (int)strcspn(near + 6, "'"), near + 6);
        else
            snprintf(why, size, "names a label twice");
    } else if (object == NULL || !json_is_object(object)) {
        snprintf(why, size, "is not a JSON object of label names: %s",
                 object == NULL ? parse_error.text : "another JSON value");
    } else if ((int)json_object_size(object) != width) {
        snprintf(why, size, "names %d labels, but %s", (int)json_object_size(object), width_text);
    } else {
        valid = 1;
        for (int i = 0; i < width && valid; i++) {
            char key[16];
            snprintf(key, sizeof key, "%d", i);
            valid = json_is_string(json_object_get(object, key));
            if (!valid)
                snprintf(why, size, "has no name for label \"%s\" of %d", key, width);
        }
    }
    json_decref(object);
    return valid;
}
