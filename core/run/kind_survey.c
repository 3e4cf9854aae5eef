/* What the job writes (run/kind_survey.h): the model's last step asked
 * what it declares, the kinds' table asked to decide, and the rows' width
 * and length that follow. */
#include "config.h"

#include "run/kind_survey.h"

#include "output/quantize.h"

#include <stdlib.h>
#include <string.h>

/* What the model's last layer declares it writes (its kind, and the width
 * of scores and vectors), from that step built alone (rank 0, before the
 * output kind is agreed on). */
static int declared_output(tfenc_run *r, tfenc_layer_output_kind *kind, int *width)
{
    *kind = TFENC_LAYER_OUTPUT_HIDDEN;
    *width = 0;
    tfenc_model_options o =
        tfenc_run_model_options(r, r->settings.steps.n_steps - 1, r->settings.steps.n_steps);
    tfenc_model *last = NULL;
    tfenc_layer_output declared = {.struct_size = sizeof declared};
    int status = tfenc_model_create(r->ctx, &o, &last);
    if (status == TFENC_OK)
        status = tfenc_model_output(r->ctx, last, &declared);
    if (status == TFENC_OK) {
        *kind = declared.kind;
        *width = declared.width;
    }
    tfenc_model_destroy(last);
    return status;
}

/* The number of scores a document gets when the model ends in a head that
 * declares them, else 0: what the accuracy gate measures. */
int tfenc_run_declared_scores_width(tfenc_run *r, int *width)
{
    tfenc_layer_output_kind kind;
    int status = declared_output(r, &kind, width);
    const tfenc_output_kind_entry *entry = tfenc_output_kind_of_layer(kind, 1);
    if (entry == NULL || !entry->gated_by_scores)
        *width = 0;
    return status;
}

/* What the kinds' table decides from: the model's declared output and
 * whether it pools, and the [job] keys. */
static tfenc_output_kind_request kind_request(const tfenc_run *r,
                                              const tfenc_layer_output *declared, int pools)
{
    const tfenc_job_settings *s = &r->settings.job;
    return (tfenc_output_kind_request){
        .wanted = s->output_kind, .declared = declared->kind, .width = declared->width,
        .pools = pools, .dtype = s->dtype, .chunks = s->chunks, .chunk_key = s->chunk_key,
        .late_chunk = s->late_chunk, .output_dim = s->output_dim,
        .output_ids = s->output_ids, .multivector_key = s->multivector_key,
        .sparse_top_k = s->sparse_top_k, .sparse_threshold = s->sparse_threshold};
}

/* A refusal of the kinds' table, at its [job] key's line or after the
 * job file's path. */
static int raise_refusal(tfenc_run *r, const tfenc_output_kind_refusal *refusal)
{
    if (refusal->key != NULL)
        return tfenc_job_settings_key_error(r->ctx, r->settings.job_file, refusal->key,
                                            refusal->message);
    return tfenc_error(r->ctx, refusal->status, "%s: %s", r->settings.job_file->path,
                       refusal->message);
}

/* Before the corpus is read and before ranges are asked for or
 * calibrated: the keys that cannot apply to the model's head are refused
 * with the real reason (rank 0 builds the last step alone). */
int tfenc_run_check_keys_against_head(tfenc_run *r)
{
    const tfenc_job_settings *s = &r->settings.job;
    if (s->dtype == TFENC_DTYPE_FLOAT32 && s->multivector_key == NULL)
        return 0;
    int status = TFENC_OK;
    if (r->rank == 0) {
        tfenc_layer_output declared = {.struct_size = sizeof declared};
        status = declared_output(r, &declared.kind, &declared.width);
        tfenc_output_kind_request request = kind_request(r, &declared, 1);
        tfenc_output_kind_refusal refusal;
        if (status == TFENC_OK && tfenc_output_kind_refuse_for_head(&request, &refusal) != TFENC_OK)
            status = raise_refusal(r, &refusal);
    }
    return tfenc_run_agree_on_failure(r, status);
}

int tfenc_run_output_width(const tfenc_run *r)
{
    return r->settings.job.output_dim > 0 ? (int)r->settings.job.output_dim
                                          : r->settings.model.d_model;
}

/* The values of each row the file holds (its d_model): a head's width, or
 * the model's rows at output_dim. */
int tfenc_run_row_width(const tfenc_run *r)
{
    return r->plan.kind_width > 0 ? r->plan.kind_width : tfenc_run_output_width(r);
}

/* The rows the file holds have unit length: the model's rows have, and
 * the writer keeps them so (chunk means scaled back), or output_dim scales
 * each pooled row back after cutting it. Compact codes, scores and sparse
 * rows are not vectors of unit length. */
int tfenc_run_rows_unit_length(const tfenc_run *r)
{
    if (!r->plan.kind->unit_rows || tfenc_dtype_is_compact(r->settings.job.dtype))
        return 0;
    return r->plan.model_unit_rows || (r->plan.kind->output_dim && r->settings.job.output_dim > 0);
}

/* Chunk means the writer scales back to unit length (output_dim does it
 * for every row anyway): vectors only, never a head's scores (one label's
 * sigmoid near 1 passes the probe's test of unit rows). */
int tfenc_run_unit_chunk_means(const tfenc_run *r)
{
    return r->settings.job.chunks == TFENC_CHUNKS_MEAN && r->plan.model_unit_rows &&
           r->settings.job.output_dim == 0 && r->plan.kind->chunks && r->plan.kind->unit_rows;
}

/* The kind the job writes, asked of the kinds' table, and what it keeps of
 * the model's declared output (a head's width, its labels). */
int tfenc_run_decide_output_kind(tfenc_run *r, int pools, const tfenc_layer_output *declared)
{
    const tfenc_output_kind_request request = kind_request(r, declared, pools);
    const tfenc_output_kind_entry *kind = NULL;
    tfenc_output_kind_refusal refusal;
    if (tfenc_output_kind_decide(&request, &kind, &refusal) != TFENC_OK)
        return raise_refusal(r, &refusal);
    r->plan.kind = kind;
    r->plan.kind_width = kind->head_width ? declared->width : 0;
    free(r->plan.labels);
    r->plan.labels = NULL;
    if (kind->has_labels && declared->labels != NULL &&
        (r->plan.labels = strdup(declared->labels)) == NULL)
        return tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    return TFENC_OK;
}

/* Pipelines: what the model writes, from the plan's last step built alone
 * on rank 0 (a head or a pooling layer: small) and sent to every rank. */
int tfenc_run_survey_output(tfenc_run *r, tfenc_layer_output *declared, char **labels_out)
{
    *labels_out = NULL;
    *declared = (tfenc_layer_output){.struct_size = sizeof *declared};
    int status = TFENC_OK;
    long sizes[3] = {0, 0, 0}; /* kind, width, labels bytes (with NUL) */
    tfenc_model *last = NULL;
    if (r->rank == 0) {
        tfenc_model_options o =
            tfenc_run_model_options(r, r->settings.steps.n_steps - 1, r->settings.steps.n_steps);
        status = tfenc_model_create(r->ctx, &o, &last);
        if (status == TFENC_OK)
            status = tfenc_model_output(r->ctx, last, declared);
        if (status == TFENC_OK) {
            sizes[0] = declared->kind;
            sizes[1] = declared->width;
            sizes[2] = declared->labels != NULL ? (long)strlen(declared->labels) + 1 : 0;
        }
    }
    if (tfenc_run_agree_on_failure(r, status)) {
        tfenc_model_destroy(last);
        return 1;
    }
    MPI_Bcast(sizes, 3, MPI_LONG, 0, MPI_COMM_WORLD);
    char *labels = sizes[2] > 0 ? malloc((size_t)sizes[2]) : NULL;
    if (r->rank == 0 && labels != NULL)
        memcpy(labels, declared->labels, (size_t)sizes[2]);
    tfenc_model_destroy(last);
    int have = sizes[2] == 0 || labels != NULL;
    MPI_Allreduce(MPI_IN_PLACE, &have, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!have) {
        free(labels);
        return tfenc_run_agree_on_failure(
            r, tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory"));
    }
    if (labels != NULL)
        MPI_Bcast(labels, (int)sizes[2], MPI_CHAR, 0, MPI_COMM_WORLD);
    declared->kind = (tfenc_layer_output_kind)sizes[0];
    declared->width = (int)sizes[1];
    declared->labels = labels; /* the model's own copy went with it */
    *labels_out = labels;
    return 0;
}
