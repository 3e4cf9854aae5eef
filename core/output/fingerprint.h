/* Fingerprints of input files, so that a resumed job can tell whether its
 * corpus or vocabulary changed since the run that began the output: the
 * size or the line count alone miss an edited line or a swapped file of the
 * same length.
 *
 * The fingerprint is SHA-256 over the file's size and the SHA-256 of each
 * 4 MiB block in order: every byte counts, and the ranks hash the blocks
 * side by side (block b on rank b mod n), so that a large corpus costs each
 * rank only its part. It does not depend on the number of ranks. */
#ifndef TFENC_FINGERPRINT_H
#define TFENC_FINGERPRINT_H

#include <mpi.h>

#include "tfenc/plugin.h"

/* Collective over `comm`: *hex gets the fingerprint of `path` (64 hex
 * digits) on every rank. A read error on any rank fails every rank; the
 * rank that could not read says why, the others that another rank failed. */
int tfenc_fingerprint_file(tfenc_context *ctx, MPI_Comm comm, const char *path, char hex[65]);

/* Collective over `comm`: the fingerprint of a corpus of several files
 * (sources): each file's fingerprint as above, hashed whole by one rank
 * (file i on rank i mod n, so many small shards cost one open each), and
 * *hex over the files' names (without their directories) and fingerprints
 * in order, so a renamed, added, removed or edited file changes it, but not
 * the directory the corpus is reached through (from another working
 * directory, through a link, or moved whole). each[i] gets file i's (64 hex
 * digits). One file alone: *hex is tfenc_fingerprint_file()'s, so outputs
 * of single-file jobs resume as before. */
int tfenc_fingerprint_sources(tfenc_context *ctx, MPI_Comm comm, const char *const *paths, int n,
                              char hex[65], char (*each)[65]);

#endif
