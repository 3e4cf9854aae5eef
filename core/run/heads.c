/* Further heads over the trunk's rows (heads.h). */
#include "run/heads.h"

#include <stdlib.h>
#include <string.h>

#include "base/aligned.h"
#include "base/context.h"
#include "output/kinds.h"

typedef struct head {
    const char *name;
    tfenc_model *model;
    const tfenc_output_kind_entry *kind;
    int width;     /* the values of a row the file keeps */
    int unit_rows; /* the head's rows have unit length (its probe) */
    const char *labels;
    tfenc_output *output;
} head;

struct tfenc_heads {
    head *heads;
    int n;
    int d_model;
    float *tap;  /* [max_tokens, d_model]: the trunk's rows of the pass */
    float *rows; /* [max_tokens, d_model]: a head's copy, which its layers change */
    tfenc_model *stage;
    tfenc_model_scratch *scratch; /* the heads run one at a time: one scratch */
};

/* What head h writes: its kind from its last layer, one row per document. */
static int decide(tfenc_context *ctx, head *h, int pools, int d_model)
{
    tfenc_layer_output declared = {.struct_size = sizeof declared};
    int status = tfenc_model_output(ctx, h->model, &declared);
    if (status != TFENC_OK)
        return status;
    const tfenc_output_kind_request request = {
        .wanted = TFENC_OUTPUT_AUTO, .declared = declared.kind, .width = declared.width,
        .pools = pools, .dtype = TFENC_DTYPE_FLOAT32, .chunks = TFENC_CHUNKS_OFF};
    tfenc_output_kind_refusal refusal;
    if (tfenc_output_kind_decide(&request, &h->kind, &refusal) != TFENC_OK)
        return tfenc_error(ctx, refusal.status, "head %s: %s", h->name, refusal.message);
    if (h->kind->rows != TFENC_ROWS_PER_DOCUMENT || h->kind->rows_dataset == NULL)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "head %s writes %s rows, but a head after the first writes one row "
                           "per document (pooled or scores): make it the first head",
                           h->name, h->kind->name);
    h->width = h->kind->head_width ? declared.width : d_model;
    h->labels = h->kind->has_labels ? declared.labels : NULL;
    return TFENC_OK;
}

int tfenc_heads_create(tfenc_context *ctx, const tfenc_model_options *options,
                       tfenc_model *stage, tfenc_heads **heads_out)
{
    *heads_out = NULL;
    const tfenc_model_plan *plan = options->plan;
    tfenc_heads *heads = calloc(1, sizeof *heads);
    if (heads == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    heads->d_model = options->config->d_model;
    heads->stage = stage;
    const size_t bytes =
        (size_t)options->limits.max_tokens * (size_t)heads->d_model * sizeof(float);
    heads->heads = calloc((size_t)plan->n_extra_heads, sizeof *heads->heads);
    heads->tap = tfenc_aligned_alloc(bytes);
    heads->rows = tfenc_aligned_alloc(bytes);
    int status = heads->heads == NULL || heads->tap == NULL || heads->rows == NULL
                     ? tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for the heads")
                     : tfenc_model_scratch_create(ctx, &heads->scratch);
    /* The int8 gate calibrates the first head's steps only. */
    if (status == TFENC_OK && options->config->precision == TFENC_PRECISION_INT8)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                             "%s: [model] precision = int8 calibrates one head, and this job "
                             "has %d: run it at fp32 or bf16",
                             options->job->path, plan->n_extra_heads + 1);
    for (int i = 0; status == TFENC_OK && i < plan->n_extra_heads; i++) {
        head *h = &heads->heads[heads->n++];
        h->name = plan->extra_head_names[i];
        tfenc_model_options o = *options;
        o.plan = &plan->extra_heads[i];
        o.first_step = 0;
        o.end_step = o.plan->n_steps;
        o.input_unset = 0;
        o.step_precision = NULL;
        o.calibrate = 0;
        o.shared_scratch = heads->scratch;
        int pools = 0;
        status = tfenc_model_create(ctx, &o, &h->model);
        if (status == TFENC_OK)
            status = tfenc_model_probe_pools(ctx, h->model, &pools, &h->unit_rows);
        if (status == TFENC_OK)
            status = decide(ctx, h, pools, heads->d_model);
    }
    if (status == TFENC_OK && heads->n > 0)
        status = tfenc_model_set_trunk_tap(ctx, stage, heads->tap);
    if (status != TFENC_OK) {
        tfenc_heads_destroy(heads);
        return status;
    }
    *heads_out = heads;
    return TFENC_OK;
}

int tfenc_heads_open_outputs(tfenc_context *ctx, tfenc_heads *heads, tfenc_output *file,
                             const char *first)
{
    int status = tfenc_output_name_first_head(ctx, file, first);
    for (int i = 0; status == TFENC_OK && i < heads->n; i++) {
        head *h = &heads->heads[i];
        const tfenc_output_options options = {.kind = h->kind, .width = h->width,
                                              .unit_norm = h->kind->unit_rows && h->unit_rows,
                                              .labels = h->labels};
        status = tfenc_output_open_head(ctx, file, h->name, &options, &h->output);
    }
    return status;
}

int tfenc_heads_write(tfenc_context *ctx, tfenc_heads *heads, const tfenc_microbatch *microbatch)
{
    const int rows = tfenc_model_trunk_rows(heads->stage);
    const size_t bytes = (size_t)rows * (size_t)heads->d_model * sizeof(float);
    int status = TFENC_OK;
    for (int i = 0; status == TFENC_OK && i < heads->n; i++) {
        head *h = &heads->heads[i];
        tfenc_microbatch own = *microbatch;
        own.batch.x = heads->rows;
        own.batch.rows = rows;
        memcpy(heads->rows, heads->tap, bytes);
        status = tfenc_model_forward(ctx, h->model, &own.batch);
        if (status == TFENC_OK && own.batch.rows != own.batch.n_seq)
            status = tfenc_error(ctx, TFENC_ERR_PLUGIN, "head %s left %d rows for %d documents",
                                 h->name, own.batch.rows, own.batch.n_seq);
        const tfenc_output_kind_write call = {.output = h->output, .microbatch = &own,
                                              .width = h->width};
        if (status == TFENC_OK)
            status = h->kind->write(ctx, &call);
    }
    return status;
}

void tfenc_heads_destroy(tfenc_heads *heads)
{
    if (heads == NULL)
        return;
    for (int i = 0; i < heads->n; i++)
        tfenc_model_destroy(heads->heads[i].model);
    tfenc_model_scratch_destroy(heads->scratch);
    tfenc_aligned_free(heads->tap);
    tfenc_aligned_free(heads->rows);
    free(heads->heads);
    free(heads);
}
