/* Plugins whose declared parameter tables disagree with their create():
 * `reads_undeclared` reads a key its table lacks, `ignores_declared` never
 * reads a key its table lists, `ignores_status` reads a key its table lacks
 * and carries on as if the getter had succeeded. The host must refuse all
 * three as plugin bugs.
 * `undeclared_type` is described but missing from TFENC_PLUGIN_TYPES: it
 * must not be offered (a job cannot find it without loading the file). */
#include "common.h"

TFENC_PLUGIN_TYPES("reads_undeclared ignores_declared ignores_status");

static int read_alpha(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    double alpha;
    int status = tfenc_param_float(init->params, "alpha", 1.0, &alpha);
    if (status != TFENC_OK)
        return status;
    return identity_create(ctx, init, instance);
}

/* Drops the getter's status: a plugin that forgot to check it. */
static int read_alpha_blindly(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    double alpha, beta;
    tfenc_param_float(init->params, "alpha", 1.0, &alpha);
    int status = tfenc_param_float(init->params, "beta", 1.0, &beta);
    if (status != TFENC_OK)
        return status;
    return identity_create(ctx, init, instance);
}

static const tfenc_param_info beta_only[] = {
    {"beta", TFENC_PARAM_FLOAT, "1", "declared, while create() reads alpha", TFENC_PARAM_NO_RANGE},
    {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE},
};

static const tfenc_param_info alpha_and_gamma[] = {
    {"alpha", TFENC_PARAM_FLOAT, "1", "read by create()", TFENC_PARAM_NO_RANGE},
    {"gamma", TFENC_PARAM_INT, "0", "declared but never read", TFENC_PARAM_NO_RANGE},
    {NULL, 0, NULL, NULL, TFENC_PARAM_NO_RANGE},
};

static const tfenc_layer_descriptor layers[] = {
    {TFENC_DESCRIPTOR_INIT, .type = "reads_undeclared", .description = "test",
     .params = beta_only, .create = read_alpha, .forward = identity_forward,
     .destroy = identity_destroy},
    {TFENC_DESCRIPTOR_INIT, .type = "ignores_declared", .description = "test",
     .params = alpha_and_gamma, .create = read_alpha, .forward = identity_forward,
     .destroy = identity_destroy},
    {TFENC_DESCRIPTOR_INIT, .type = "ignores_status", .description = "test",
     .params = beta_only, .create = read_alpha_blindly, .forward = identity_forward,
     .destroy = identity_destroy},
    {TFENC_DESCRIPTOR_INIT, .type = "undeclared_type", .description = "test",
     .create = identity_create, .forward = identity_forward, .destroy = identity_destroy},
};

TFENC_EXPORT const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index);

TFENC_EXPORT const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index)
{
    return index < sizeof layers / sizeof *layers ? &layers[index] : NULL;
}
