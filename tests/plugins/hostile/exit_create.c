/* A plugin whose create() calls exit(0): tfenc-batch must not end with
 * status 0 and an unfinished output (drivers/tfenc-batch.c, its exit guard). */
#include <stdlib.h>

#include "common.h"

static int create_and_leave(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    (void)ctx, (void)init, (void)instance;
    exit(0);
}

static const tfenc_layer_descriptor exit_create = {
    TFENC_DESCRIPTOR_INIT,
    .type = "exit_create",
    .description = "its create() calls exit(0) (test)",
    .create = create_and_leave,
    .forward = identity_forward,
    .destroy = identity_destroy,
};

TFENC_EXPORT const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index);

TFENC_EXPORT const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index)
{
    return index == 0 ? &exit_create : NULL;
}
