/* Plugins that write where they must not (issue 46 item 13), each a plugin
 * bug that no sanitizer of tfenc's build sees (the plugin is not built with
 * it, or the bytes lie inside a larger allocation):
 *   workspace_overrun: asks for 64 bytes of workspace and writes `bytes`
 *                      (default 8 KiB) into it;
 *   rows_overrun:      writes `bytes` (default 256) past the batch's rows
 *                      of x, from `offset` bytes after their end (default 0);
 *   crash_forward:     writes to address 64 (SIGSEGV);
 *   moves_x:           points batch->x elsewhere, which the host would then
 *                      read as the layer's result;
 *   writes_token_ids:  writes into batch->token_ids, which it may only read. */
#include <stdint.h>
#include <stdlib.h>

#include "common.h"

TFENC_PLUGIN_TYPES("workspace_overrun rows_overrun crash_forward moves_x writes_token_ids");

/* What to write: `bytes` from `offset` bytes after the end. */
typedef struct overrun {
    long bytes, offset;
} overrun;

static int read_overrun(tfenc_context *ctx, const tfenc_layer_init *init, void **instance,
                        long default_bytes)
{
    overrun wanted = {0, 0};
    int status = tfenc_param_int(init->params, "bytes", default_bytes, &wanted.bytes);
    if (status == TFENC_OK)
        status = tfenc_param_int(init->params, "offset", 0, &wanted.offset);
    if (status != TFENC_OK)
        return status;
    overrun *held = malloc(sizeof *held);
    if (held == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    *held = wanted;
    *instance = held;
    return TFENC_OK;
}

static int create_workspace_overrun(tfenc_context *ctx, const tfenc_layer_init *init,
                                    void **instance)
{
    return read_overrun(ctx, init, instance, 8192);
}

static int create_rows_overrun(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    return read_overrun(ctx, init, instance, 256);
}

/* A plugin's own loop, as its bugs write: memset() would go through a
 * sanitizer's interceptor in the sanitizer build, which sees some of these
 * writes before the host's guards do. */
static void fill(unsigned char *to, long bytes)
{
    volatile unsigned char *p = to;
    for (long i = 0; i < bytes; i++)
        p[i] = 0x5a;
}

static void free_bytes(void *instance)
{
    free(instance);
}

static size_t sixty_four(const void *instance, const tfenc_limits *limits)
{
    (void)instance, (void)limits;
    return 64;
}

static int overrun_workspace(void *instance, tfenc_context *ctx, tfenc_batch *batch,
                             void *workspace)
{
    (void)ctx, (void)batch;
    const overrun *wanted = instance;
    fill(workspace, wanted->bytes);
    return TFENC_OK;
}

static int overrun_rows(void *instance, tfenc_context *ctx, tfenc_batch *batch, void *workspace)
{
    (void)ctx, (void)workspace;
    const overrun *wanted = instance;
    unsigned char *end = (unsigned char *)(batch->x + (size_t)batch->rows * batch->d_model);
    fill(end + wanted->offset, wanted->bytes);
    return TFENC_OK;
}

static int write_to_address_64(void *instance, tfenc_context *ctx, tfenc_batch *batch,
                              void *workspace)
{
    (void)instance, (void)ctx, (void)workspace, (void)batch;
    /* An address the compiler cannot see (a store through a null pointer
     * it may drop), in the unmapped first page. */
    volatile uintptr_t address = 64;
    *(volatile float *)address = 1.0f;
    return TFENC_OK;
}

static int move_x(void *instance, tfenc_context *ctx, tfenc_batch *batch, void *workspace)
{
    (void)instance, (void)ctx;
    batch->x = workspace;
    return TFENC_OK;
}

static int write_token_ids(void *instance, tfenc_context *ctx, tfenc_batch *batch,
                           void *workspace)
{
    (void)instance, (void)ctx, (void)workspace;
    ((int32_t *)batch->token_ids)[0] = 7;
    return TFENC_OK;
}

static const tfenc_layer_descriptor workspace_overrun = {
    TFENC_DESCRIPTOR_INIT,
    .type = "workspace_overrun",
    .description = "writes `bytes` into its 64-byte workspace (test)",
    .create = create_workspace_overrun,
    .forward = overrun_workspace,
    .destroy = free_bytes,
    .workspace_size = sixty_four,
};

static const tfenc_layer_descriptor rows_overrun = {
    TFENC_DESCRIPTOR_INIT,
    .type = "rows_overrun",
    .description = "writes `bytes` past the batch's rows of x (test)",
    .create = create_rows_overrun,
    .forward = overrun_rows,
    .destroy = free_bytes,
};

static const tfenc_layer_descriptor crash_forward = {
    TFENC_DESCRIPTOR_INIT,
    .type = "crash_forward",
    .description = "writes to address 64 in forward() (test)",
    .create = identity_create,
    .forward = write_to_address_64,
    .destroy = identity_destroy,
};

static const tfenc_layer_descriptor moves_x = {
    TFENC_DESCRIPTOR_INIT,
    .type = "moves_x",
    .description = "points batch->x at its workspace (test)",
    .create = identity_create,
    .forward = move_x,
    .destroy = identity_destroy,
    .workspace_size = sixty_four,
};

static const tfenc_layer_descriptor writes_token_ids = {
    TFENC_DESCRIPTOR_INIT,
    .type = "writes_token_ids",
    .description = "writes into batch->token_ids (test)",
    .create = identity_create,
    .forward = write_token_ids,
    .destroy = identity_destroy,
};

TFENC_EXPORT const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index);
TFENC_EXPORT const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index)
{
    static const tfenc_layer_descriptor *const all[] = {&workspace_overrun, &rows_overrun,
                                                        &crash_forward, &moves_x,
                                                        &writes_token_ids};
    return index < sizeof all / sizeof all[0] ? all[index] : NULL;
}
