/* The do-nothing layer the hostile test plugins wrap their one misdeed in. */
#ifndef TFENC_TEST_HOSTILE_COMMON_H
#define TFENC_TEST_HOSTILE_COMMON_H

#include "tfenc/plugin.h"

static inline int identity_create(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    (void)ctx;
    *instance = (void *)init->name; /* any non-NULL pointer: nothing to free */
    return TFENC_OK;
}

static inline int identity_forward(void *instance, tfenc_context *ctx, tfenc_batch *batch,
                            void *workspace)
{
    (void)instance, (void)ctx, (void)batch, (void)workspace;
    return TFENC_OK;
}

static inline void identity_destroy(void *instance)
{
    (void)instance;
}

/* The entry symbol of a plugin of one layer type. */
#define ONE_TYPE_PLUGIN(descriptor)                                                            \
    TFENC_EXPORT const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index);        \
    TFENC_EXPORT const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index)         \
    {                                                                                          \
        return index == 0 ? &(descriptor) : (const tfenc_layer_descriptor *)0;                 \
    }

#endif
