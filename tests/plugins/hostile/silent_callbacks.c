/* Plugins whose optional callbacks fail, or answer nonsense, without a word
 * (issue 46 item 12): the host must still say which layer, in one line.
 *   silent_output:  its output() returns an error (output() takes no
 *                   context, so it cannot say why);
 *   nan_flops:      flops_per_token() returns NaN, which the pipeline would
 *                   balance its stages by;
 *   huge_workspace: workspace_size() asks for 2^62 bytes;
 *   quiet_success:  forward() records an error and returns TFENC_OK. */
#include <math.h>

#include "common.h"

TFENC_PLUGIN_TYPES("silent_output nan_flops huge_workspace quiet_success");

static int fail_silently(const void *instance, tfenc_layer_output *output)
{
    (void)instance, (void)output;
    return TFENC_ERR_PLUGIN;
}

static double not_a_number(const void *instance, double mean_seq_len)
{
    (void)instance, (void)mean_seq_len;
    return NAN;
}

static size_t too_much(const void *instance, const tfenc_limits *limits)
{
    (void)instance, (void)limits;
    return (size_t)1 << 62;
}

static int record_and_succeed(void *instance, tfenc_context *ctx, tfenc_batch *batch,
                              void *workspace)
{
    (void)instance, (void)batch, (void)workspace;
    tfenc_error(ctx, TFENC_ERR_PLUGIN, "recorded, then forgotten");
    return TFENC_OK;
}

static const tfenc_layer_descriptor silent_output = {
    TFENC_DESCRIPTOR_INIT,
    .type = "silent_output",
    .description = "its output() fails without a message (test)",
    .create = identity_create,
    .forward = identity_forward,
    .destroy = identity_destroy,
    .output = fail_silently,
};

static const tfenc_layer_descriptor nan_flops = {
    TFENC_DESCRIPTOR_INIT,
    .type = "nan_flops",
    .description = "its flops_per_token() returns NaN (test)",
    .create = identity_create,
    .forward = identity_forward,
    .destroy = identity_destroy,
    .flops_per_token = not_a_number,
};

static const tfenc_layer_descriptor huge_workspace = {
    TFENC_DESCRIPTOR_INIT,
    .type = "huge_workspace",
    .description = "its workspace_size() asks for 2^62 bytes (test)",
    .create = identity_create,
    .forward = identity_forward,
    .destroy = identity_destroy,
    .workspace_size = too_much,
};

static const tfenc_layer_descriptor quiet_success = {
    TFENC_DESCRIPTOR_INIT,
    .type = "quiet_success",
    .description = "its forward() records an error and returns TFENC_OK (test)",
    .create = identity_create,
    .forward = record_and_succeed,
    .destroy = identity_destroy,
};

TFENC_EXPORT const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index);
TFENC_EXPORT const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index)
{
    static const tfenc_layer_descriptor *const all[] = {&silent_output, &nan_flops,
                                                        &huge_workspace, &quiet_success};
    return index < sizeof all / sizeof all[0] ? all[index] : NULL;
}
