/* The node arena under mpiexec -n N (one node): for every name exactly one
 * rank fills the block, the others see what it wrote at the same size; the
 * ranks ask for the names in different orders and for different subsets;
 * a request beyond the capacity is refused (the caller keeps a private
 * copy); an abandoned block fails the ranks waiting for it. Prints "ok" or
 * the first failure, and exits non-zero on failure. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/context.h"
#include "ranks/node_arena.h"

#define NAMES 40
#define FLOATS 1000

static int failures = 0;

static void check(int condition, int rank, const char *what)
{
    if (!condition && failures++ == 0)
        fprintf(stderr, "node_arena: rank %d: FAIL: %s\n", rank, what);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, n_ranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n_ranks);
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_node_arena *arena = NULL;
    const size_t block = FLOATS * sizeof(float);
    /* Room for the names and a little more, not for the big request. */
    check(tfenc_node_arena_create(&ctx, MPI_COMM_WORLD, NAMES * (block + 64) + 4096, &arena) ==
              TFENC_OK, rank, "create");
    check(tfenc_node_arena_ranks(arena) == n_ranks, rank, "every rank is on this node");
    int filled = 0;
    for (int i = 0; i < NAMES; i++) {
        /* Each rank starts at another name; rank r skips names r, r+N, ... */
        int k = (i + 7 * rank) % NAMES;
        if (n_ranks > 1 && k % n_ranks == rank % n_ranks && k % 3 == 0)
            continue;
        char name[64];
        snprintf(name, sizeof name, "/encoder/%d/weight fp32", k);
        float *data = NULL;
        int fill = 0;
        if (tfenc_node_arena_claim(&ctx, arena, name, block, (void **)&data, &fill) != TFENC_OK) {
            check(0, rank, tfenc_context_message(&ctx));
            continue;
        }
        if (fill) {
            for (int j = 0; j < FLOATS; j++)
                data[j] = (float)(1000 * k + j);
            filled++;
            tfenc_node_arena_publish(arena, data);
        }
        int wrong = 0;
        for (int j = 0; j < FLOATS; j++)
            wrong += data[j] != (float)(1000 * k + j);
        check(wrong == 0, rank, "a block's values");
    }
    int total = 0;
    MPI_Allreduce(&filled, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    check(total == NAMES, rank, "each name is filled exactly once");
    /* A size that disagrees, and a request past the capacity. */
    float *data = NULL;
    int fill = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    check(tfenc_node_arena_claim(&ctx, arena, "/encoder/0/weight fp32", block / 2, (void **)&data,
                                 &fill) == TFENC_ERR_INTERNAL,
          rank, "another size for a name is refused");
    tfenc_context_clear(&ctx);
    check(tfenc_node_arena_claim(&ctx, arena, "huge", (size_t)1 << 30, (void **)&data, &fill) ==
              TFENC_ERR_NOT_FOUND,
          rank, "a block past the capacity is refused");
    /* Rank 0 abandons a block the others wait for. */
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        check(tfenc_node_arena_claim(&ctx, arena, "abandoned", 64, (void **)&data, &fill) ==
                      TFENC_OK && fill,
              rank, "claim the block to abandon");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        tfenc_node_arena_abandon(arena, data);
    else
        check(tfenc_node_arena_claim(&ctx, arena, "abandoned", 64, (void **)&data, &fill) ==
                  TFENC_ERR_MPI,
              rank, "a waiting rank fails on an abandoned block");
    tfenc_node_arena_destroy(arena);
    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("node_arena: %s (%d ranks)\n", all == 0 ? "ok" : "FAIL", n_ranks);
    MPI_Finalize();
    return all == 0 ? 0 : 1;
}
