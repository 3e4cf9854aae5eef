/* A plugin as an ABI 0.9 build would have produced it: the loader must
 * refuse it by name and version instead of calling into it. */
#include "tfenc/plugin.h"

static int create(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    *instance = (void *)init;
    return TFENC_OK;
}

static int forward(void *instance, tfenc_context *ctx, tfenc_batch *batch, void *workspace)
{
    return TFENC_OK;
}

static void destroy(void *instance)
{
}

static const tfenc_layer_descriptor old_layer = {
    .abi_major = 0,
    .abi_minor = 9,
    .struct_size = sizeof(tfenc_layer_descriptor),
    .type = "old_layer",
    .description = "built against an older ABI",
    .create = create,
    .forward = forward,
    .destroy = destroy,
};

const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index);

const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index)
{
    return index == 0 ? &old_layer : NULL;
}
