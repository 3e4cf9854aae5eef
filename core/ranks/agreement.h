/* Whether every rank computed the same thing where each computes it alone
 * (a corpus's list of files, expanded by each rank from a glob or a
 * directory): a node whose file system shows other files than rank 0's
 * would otherwise read another corpus under the same window numbers, or
 * hang in a collective sized by its own count. */
#ifndef TFENC_RANKS_AGREEMENT_H
#define TFENC_RANKS_AGREEMENT_H

#include <mpi.h>
#include <stddef.h>

/* Collective over comm. Compares each rank's `bytes` with rank 0's (by
 * digest) and sets *first_other to the lowest rank whose bytes differ, or
 * -1 when all agree; *smallest and *largest get the least and the most of
 * `count` over the ranks (what the caller's message quotes, e.g. files). */
void tfenc_ranks_compare(MPI_Comm comm, const void *bytes, size_t length, long count,
                         int *first_other, long *smallest, long *largest);

#endif
