/* Further heads over the trunk's rows (heads.h). */
#include "run/heads.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/aligned.h"
#include "base/context.h"
#include "output/kinds.h"
#include "output/sparse.h"

typedef struct head {
    const char *name;
    tfenc_model *model;
    const tfenc_output_kind_entry *kind;
    int width;     /* the values of a row the file keeps */
    int unit_rows; /* the head's rows have unit length (its probe) */
    const char *labels;
    tfenc_output *output;
    /* A sparse head: its microbatch's rows, its writer's log (named after
     * PATH.NAME) and what its CSR holds. */
    tfenc_sparse_rows *sparse_rows;
    tfenc_sparse_log *sparse_log;
    char *log_path;
    int csr_whole; /* resumed: the file holds the head's whole CSR already */
    uint8_t *logged; /* resumed: the documents with a sound row in a log (sparse.h), or NULL */
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
    if (h->kind->rows == TFENC_ROWS_PER_TOKEN)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "head %s writes %s rows, but a head after the first writes one row "
                           "per document (pooled, scores or sparse): make it the first head",
                           h->name, h->kind->name);
    h->width = h->kind->head_width ? declared.width : d_model;
    h->labels = h->kind->has_labels ? declared.labels : NULL;
    return TFENC_OK;
}

int tfenc_heads_check_job(tfenc_context *ctx, const char *job_path,
                          const tfenc_model_plan *plan, const char *long_documents)
{
    if (plan->n_extra_heads == 0)
        return TFENC_OK;
    if (long_documents != NULL)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "%s: [job] long_documents = %s pools the first head's chunks, but "
                           "head %s would get a row per chunk: not with several heads",
                           job_path, long_documents, plan->extra_head_names[0]);
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
        /* int8 jobs: the head's maps at fp32, as the accuracy gate ran
         * them (heads.h says why). */
        tfenc_precision *fp32 = NULL;
        if (options->config->precision == TFENC_PRECISION_INT8) {
            fp32 = calloc((size_t)o.plan->n_steps + 1, sizeof *fp32);
            if (fp32 == NULL) {
                status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
                break;
            }
            for (int step = 0; step < o.plan->n_steps; step++)
                fp32[step] = TFENC_PRECISION_FP32;
            o.step_precision = fp32;
        }
        status = tfenc_model_create(ctx, &o, &h->model);
        free(fp32); /* read while the model is built only */
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

/* What a sparse head's logs and CSR hold: every value above 0 (the first
 * head's [job] sparse keys are not its). */
static tfenc_sparse_settings sparse_settings(const head *h, const tfenc_output *file,
                                             int64_t n_documents)
{
    return (tfenc_sparse_settings){.path = tfenc_output_path(file), .log_path = h->log_path,
                                   .n_documents = n_documents, .width = h->width};
}

/* A sparse head's rows and log, as the run opens the first head's. */
static int open_sparse(tfenc_context *ctx, head *h, tfenc_output *file, int resumed,
                       int was_complete)
{
    /* PATH.head-NAME.sparse-*: no name (no '.' in it) makes these begin as
     * the first head's PATH.sparse-* or another head's. */
    const char *path = tfenc_output_path(file);
    size_t size = strlen(path) + strlen(h->name) + sizeof ".head-";
    if ((h->log_path = malloc(size)) == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    snprintf(h->log_path, size, "%s.head-%s", path, h->name);
    const tfenc_sparse_settings settings =
        sparse_settings(h, file, tfenc_output_documents(file));
    int status = TFENC_OK;
    if (resumed) {
        char damage[TFENC_MESSAGE_MAX / 2] = "";
        status = tfenc_sparse_logged(ctx, h->output, &settings, was_complete, &h->logged,
                                     damage, sizeof damage);
        h->csr_whole = status == TFENC_OK && h->logged == NULL;
    }
    if (status == TFENC_OK)
        status = tfenc_sparse_rows_create(ctx, h->width, 0, 0.0, &h->sparse_rows);
    if (status == TFENC_OK)
        status = tfenc_sparse_log_open(ctx, &settings, tfenc_output_writers(file), resumed,
                                       &h->sparse_log);
    return status;
}

int tfenc_heads_open_outputs(tfenc_context *ctx, tfenc_heads *heads, tfenc_output *file,
                             const char *first, int resumed, int was_complete)
{
    int status = tfenc_output_name_first_head(ctx, file, first);
    for (int i = 0; status == TFENC_OK && i < heads->n; i++) {
        head *h = &heads->heads[i];
        const tfenc_output_options options = {.kind = h->kind, .width = h->width,
                                              .unit_norm = h->kind->unit_rows && h->unit_rows,
                                              .labels = h->labels};
        status = tfenc_output_open_head(ctx, file, h->name, &options, &h->output);
        if (status == TFENC_OK && h->kind->rows == TFENC_ROWS_SPARSE)
            status = open_sparse(ctx, h, file, resumed, was_complete);
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
        /* A sparse head's rows travel with its own batch. */
        own.sparse_rows = h->sparse_rows;
        own.batch.sparse_rows = h->sparse_rows != NULL ? &h->sparse_rows->destination : NULL;
        if (h->sparse_rows != NULL)
            status = tfenc_sparse_rows_begin(ctx, h->sparse_rows, own.batch.n_seq);
        memcpy(heads->rows, heads->tap, bytes);
        if (status == TFENC_OK)
            status = tfenc_model_forward(ctx, h->model, &own.batch);
        if (status == TFENC_OK && own.batch.rows != own.batch.n_seq)
            status = tfenc_error(ctx, TFENC_ERR_PLUGIN, "head %s left %d rows for %d documents",
                                 h->name, own.batch.rows, own.batch.n_seq);
        const tfenc_output_kind_write call = {.output = h->output, .microbatch = &own,
                                              .width = h->width, .sparse_rows = h->sparse_rows,
                                              .sparse_log = h->sparse_log};
        if (status == TFENC_OK)
            status = h->kind->write(ctx, &call);
    }
    return status;
}

int tfenc_heads_rows_logged(const tfenc_heads *heads, int64_t document)
{
    for (int i = 0; heads != NULL && i < heads->n; i++)
        if (heads->heads[i].logged != NULL &&
            !tfenc_sparse_has_row(heads->heads[i].logged, document))
            return 0;
    return 1;
}

int tfenc_heads_sync(tfenc_context *ctx, void *user)
{
    const tfenc_heads *heads = user;
    int status = TFENC_OK;
    for (int i = 0; status == TFENC_OK && i < heads->n; i++)
        if (heads->heads[i].sparse_log != NULL)
            status = tfenc_sparse_log_sync(ctx, heads->heads[i].sparse_log);
    return status;
}

int tfenc_heads_finish(tfenc_context *ctx, tfenc_heads *heads, tfenc_output *file)
{
    int status = TFENC_OK;
    for (int i = 0; status == TFENC_OK && heads != NULL && i < heads->n; i++) {
        const head *h = &heads->heads[i];
        if (h->sparse_log == NULL)
            continue;
        const tfenc_sparse_settings settings =
            sparse_settings(h, file, tfenc_output_documents(file));
        status = tfenc_sparse_finish(ctx, h->output, &settings, NULL, h->csr_whole);
    }
    return status;
}

void tfenc_heads_remove_logs(const tfenc_heads *heads, const char *path)
{
    int sparse = 0;
    for (int i = 0; heads != NULL && i < heads->n; i++)
        if (heads->heads[i].log_path != NULL) {
            tfenc_sparse_remove_logs(heads->heads[i].log_path);
            sparse = 1;
        }
    if (sparse)
        tfenc_sparse_release_space(path);
}

void tfenc_heads_destroy(tfenc_heads *heads)
{
    if (heads == NULL)
        return;
    for (int i = 0; i < heads->n; i++) {
        tfenc_model_destroy(heads->heads[i].model);
        tfenc_sparse_rows_destroy(heads->heads[i].sparse_rows);
        tfenc_sparse_log_close(heads->heads[i].sparse_log);
        free(heads->heads[i].log_path);
        free(heads->heads[i].logged);
    }
    tfenc_model_scratch_destroy(heads->scratch);
    tfenc_aligned_free(heads->tap);
    tfenc_aligned_free(heads->rows);
    free(heads->heads);
    free(heads);
}
