/* A plugin whose create() calls exit(0): tfenc-batch must not end with
 * status 0 and an unfinished output (drivers/tfenc-batch.c, its exit guard).
 * Under Open MPI only rank 1 leaves, as a plugin failing on one node would
 * (and so that one rank, not all, reports it). */
#include <stdlib.h>
#include <string.h>

#include "common.h"

static int create_and_leave(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    const char *rank = getenv("OMPI_COMM_WORLD_RANK");
    if (rank == NULL || strcmp(rank, "1") == 0)
        exit(0);
    return identity_create(ctx, init, instance);
}

static const tfenc_layer_descriptor exit_create = {
    TFENC_DESCRIPTOR_INIT,
    .type = "exit_create",
    .description = "its create() calls exit(0) (test)",
    .create = create_and_leave,
    .forward = identity_forward,
    .destroy = identity_destroy,
};

ONE_TYPE_PLUGIN(exit_create)
