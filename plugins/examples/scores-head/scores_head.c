/* Example plugin `scores_head`: k scores per document from its first
 * token's vector, sigmoid(W x_0 + b), weights `weight` [k, d] and `bias`
 * [k]. Its `output` callback declares the kind scores, so the job writes
 * `scores [N, k]`. docs/plugins.md walks through it. */
#include <tfenc/plugin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct head { int d, k; tfenc_linear *map; /* the host's */ } head;

static int create(tfenc_context *ctx, const tfenc_layer_init *init, void **instance)
{
    static const char *const weight[] = {"weight"}, *const bias[] = {"bias"};
    head *h = calloc(1, sizeof *h);
    if (h == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "scores_head: out of memory");
    h->d = init->model.d_model;
    int status = tfenc_linear_load(init->weights, 1, weight, bias, h->d, &h->k, &h->map);
    if (status == TFENC_OK && h->k > h->d) /* scores travel in d-wide rows */
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "scores_head: %d scores > d_model", h->k);
    if (status != TFENC_OK)
        free(h);
    *instance = status == TFENC_OK ? h : NULL;
    return status;
}

static int forward(void *instance, tfenc_context *ctx, tfenc_batch *batch, void *workspace)
{
    const head *h = instance;
    const int n = batch->n_seq, d = h->d, k = h->k;
    float *first = workspace, *logits = first + (size_t)n * d;
    for (int s = 0; s < n; s++) /* all first tokens before row s is overwritten */
        memcpy(first + (size_t)s * d, batch->x + (size_t)batch->seq_start[s] * d, d * sizeof(float));
    int status = tfenc_linear_forward(ctx, h->map, first, n, logits);
    for (int s = 0; status == TFENC_OK && s < n; s++) { /* document s's scores: row s */
        memset(batch->x + (size_t)s * d, 0, d * sizeof(float));
        for (int j = 0; j < k; j++)
            batch->x[(size_t)s * d + j] = 1.0f / (1.0f + expf(-logits[(size_t)s * k + j]));
    }
    batch->rows = n;
    return status;
}

static size_t workspace_size(const void *instance, const tfenc_limits *limits)
{
    const head *h = instance;
    return (size_t)limits->max_seqs * (size_t)(h->d + h->k) * sizeof(float);
}

static int output(const void *instance, tfenc_layer_output *out)
{
    out->kind = TFENC_LAYER_OUTPUT_SCORES;
    out->width = ((const head *)instance)->k;
    return TFENC_OK;
}

static void destroy(void *instance) { free(instance); }

TFENC_PLUGIN_TYPES("scores_head");
static const tfenc_layer_descriptor descriptor = {
    TFENC_DESCRIPTOR_INIT, .type = "scores_head", .create = create, .forward = forward,
    .destroy = destroy, .workspace_size = workspace_size, .output = output,
    .description = "k sigmoid scores from the first token (example plugin)",
    .key_masking = TFENC_KEY_MASKING_UNAFFECTED}; /* reads one token's row */

TFENC_EXPORT const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index);
TFENC_EXPORT const tfenc_layer_descriptor *tfenc_plugin_descriptor(unsigned index)
{
    return index == 0 ? &descriptor : NULL;
}
