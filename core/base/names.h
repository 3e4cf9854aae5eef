/* Name tables: one NULL-terminated array of names per enum, indexed by the
 * enum's values, so the job parser (tfenc_param_choice), messages and the
 * output's attributes all spell each value the same way. */
#ifndef TFENC_NAMES_H
#define TFENC_NAMES_H

#include <string.h>

/* The index of `name` in `names`, or -1. */
static inline int tfenc_name_index(const char *const *names, const char *name)
{
    for (int i = 0; name != NULL && names[i] != NULL; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -1;
}

/* names[value], or "unknown" for a value outside the table of `count`. */
static inline const char *tfenc_name_of(const char *const *names, int count, int value)
{
    return value >= 0 && value < count ? names[value] : "unknown";
}

#endif
