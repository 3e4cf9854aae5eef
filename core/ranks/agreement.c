/* Digests, not the bytes: a list of a million shard names is compared by
 * broadcasting 32 bytes. */
#include "ranks/agreement.h"
#include "base/sha256.h"

#include <string.h>

void tfenc_ranks_compare(MPI_Comm comm, const void *bytes, size_t length, long count,
                         int *first_other, long *smallest, long *largest)
{
    int rank = 0, n_ranks = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n_ranks);
    unsigned char mine[32], first[32];
    tfenc_sha256_digest(bytes, length, mine);
    memcpy(first, mine, sizeof first);
    MPI_Bcast(first, (int)sizeof first, MPI_UNSIGNED_CHAR, 0, comm);
    int differs = memcmp(first, mine, sizeof mine) != 0 ? rank : n_ranks;
    MPI_Allreduce(&differs, first_other, 1, MPI_INT, MPI_MIN, comm);
    if (*first_other == n_ranks)
        *first_other = -1;
    MPI_Allreduce(&count, smallest, 1, MPI_LONG, MPI_MIN, comm);
    MPI_Allreduce(&count, largest, 1, MPI_LONG, MPI_MAX, comm);
}
