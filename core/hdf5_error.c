/* Reads the cause of an HDF5 failure from its error stack. */
#include "hdf5_error.h"

#include <hdf5.h>
#include <stdio.h>

typedef struct detail {
    char *buffer;
    size_t size;
} detail;

/* Walking downward, the last description seen is the innermost one. */
static herr_t keep_description(unsigned n, const H5E_error2_t *error, void *data)
{
    detail *target = data;
    if (error->desc != NULL)
        snprintf(target->buffer, target->size, "%s", error->desc);
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
