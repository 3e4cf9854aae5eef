/* The one rule for id2label (job/id2label.h), on jansson's parser. */
#include "job/id2label.h"

#include <jansson.h>
#include <stdio.h>

int tfenc_id2label_valid(const char *labels, int width, const char *width_text, char *why,
                         size_t size)
{
    json_error_t parse_error;
    json_t *object = json_loads(labels, 0, &parse_error);
    int valid = 0;
    if (object == NULL || !json_is_object(object)) {
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
