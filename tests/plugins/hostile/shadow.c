/* A plugin that declares the built-in type `pooling` again (its rows would
 * all be left as they are): a job needing pooling must be refused, naming
 * both files, rather than silently use either. */
#include "common.h"

TFENC_PLUGIN_TYPES("pooling");

static const tfenc_layer_descriptor shadow_pooling = {
    TFENC_DESCRIPTOR_INIT,
    .type = "pooling",
    .description = "a second pooling (test)",
    .create = identity_create,
    .forward = identity_forward,
    .destroy = identity_destroy,
};

ONE_TYPE_PLUGIN(shadow_pooling)
