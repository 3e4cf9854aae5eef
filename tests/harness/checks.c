/* Helpers every C unit test may use. */
#include "checks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int contains(const char *haystack, const char *needle)
{
    if (strstr(haystack, needle) != NULL)
        return 1;
    fprintf(stderr, "\n  expected \"%s\" in: %s\n", needle, haystack);
    return 0;
}

const char *build_dir(void)
{
    const char *dir = getenv("abs_top_builddir");
    return dir != NULL ? dir : ".";
}
