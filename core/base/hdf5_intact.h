/* Reads of an HDF5 file that another process may cut short while the job
 * reads it (a copy still being written, a file replaced or truncated in
 * place). HDF5's sec2 driver returns zeros for bytes past the end of the
 * file instead of an error, so a corpus or weights file truncated mid-run
 * would be encoded, and its windows marked finished, as zeros.
 *
 * Every byte of an HDF5 file's data and metadata lies below its end of
 * allocated space (EOA, from the superblock); HDF5 checks the file against
 * it only when it opens the file. A reader calls tfenc_hdf5_check_intact()
 * after each read: when the file is now shorter than its EOA, some of what
 * the read needed may have been past the end, and the read is refused.
 * Checked after the read, so that data taken before a truncation that the
 * check then sees is never used either. One fstat() per read: the same for
 * contiguous, chunked and compact layouts. */
#ifndef TFENC_HDF5_INTACT_H
#define TFENC_HDF5_INTACT_H

#include <hdf5.h>

#include "tfenc/plugin.h"

/* TFENC_OK while the file `file` (opened from `path`) is at least as long as
 * its EOA, else TFENC_ERR_IO with one line naming `path`, the `dataset` the
 * caller read, and both sizes. */
int tfenc_hdf5_check_intact(tfenc_context *ctx, hid_t file, const char *path,
                            const char *dataset);

#endif
