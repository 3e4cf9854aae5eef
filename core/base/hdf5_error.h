/* HDF5's error stack, folded into tfenc's one-line messages: HDF5's own
 * printing is switched off, and its innermost message (the cause) is read
 * here instead. */
#ifndef TFENC_HDF5_ERROR_H
#define TFENC_HDF5_ERROR_H

#include <stddef.h>

/* Copies the innermost message of HDF5's current error stack (e.g. "unable
 * to open file: ... No such file or directory") into buffer, clears the
 * stack, and returns buffer, or "unknown HDF5 error" when the stack is empty. */
const char *tfenc_hdf5_error_detail(char *buffer, size_t size);

#endif
