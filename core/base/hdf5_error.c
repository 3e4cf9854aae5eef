/* Reads the cause of an HDF5 failure from its error stack. */
#include "base/hdf5_error.h"

#include <hdf5.h>
#include <stdio.h>
#include <string.h>

typedef struct detail {
    char *buffer;
    size_t size;
} detail;

/* Walking downward, the last description seen is the innermost one. */
static herr_t keep_description(unsigned n, const H5E_error2_t *error, void *data)
{
    detail *target = data;
    if (error->desc == NULL)
        return 0;
    /* A failed system call reads "file write failed: time = ..., filename =
     * ..., errno = 28, error message = 'No space left on device', buf = ...":
     * the system's reason is what a user needs, the rest is noise. */
    const char *reason = strstr(error->desc, "error message = '");
    const char *call_end = strchr(error->desc, ':');
    if (reason != NULL && call_end != NULL) {
        reason += strlen("error message = '");
        size_t length = strcspn(reason, "'");
        snprintf(target->buffer, target->size, "%.*s: %.*s", (int)(call_end - error->desc),
                 error->desc, (int)length, reason);
    } else {
        snprintf(target->buffer, target->size, "%s", error->desc);
    }
    return 0;
}

const char *tfenc_hdf5_error_detail(char *buffer, size_t size)
{
    detail target = {buffer, size};
    buffer[0] = '\0';
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, keep_description, &target);
    H5Eclear2(H5E_DEFAULT);
    return buffer[0] != '\0' ? buffer : "unknown HDF5 error";
}
