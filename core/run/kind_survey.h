/* What the job writes: the output kind decided by the kinds' table
 * (output/kinds.h) from what the model's last step declares and the [job]
 * keys, kept in r->plan (kind, kind_width, labels), and the rows that
 * follow from it: their width and whether they have unit length. */
#ifndef TFENC_KIND_SURVEY_H
#define TFENC_KIND_SURVEY_H

#include "run/run_parts.h"

/* Before the corpus is read: [job] keys that cannot apply to the model's
 * head (output_dtype, multivector) refused with the real reason (rank 0
 * builds the last step alone). Collective; 1 when refused. */
int tfenc_run_check_keys_against_head(tfenc_run *r);

/* Rank 0: the number of scores a document gets when the model ends in a
 * head that declares them, else 0 (what the accuracy gate measures). */
int tfenc_run_declared_scores_width(tfenc_run *r, int *width);

/* Pipelines: what the model's last step declares, built alone on rank 0
 * and sent to every rank; *labels_out (the caller frees it) holds the
 * labels declared->labels points to. Collective; 1 on a failure. */
int tfenc_run_survey_output(tfenc_run *r, tfenc_layer_output *declared, char **labels_out);

/* The kind the job writes, asked of the kinds' table, into r->plan with
 * what it keeps of the declared output. Returns a status. */
int tfenc_run_decide_output_kind(tfenc_run *r, int pools, const tfenc_layer_output *declared);

/* The model's rows at [job] output_dim (else d_model). */
int tfenc_run_output_width(const tfenc_run *r);

/* The values of each row the file holds: a head's width, or the model's
 * rows at output_dim. */
int tfenc_run_row_width(const tfenc_run *r);

/* Whether the rows the file holds have unit length. */
int tfenc_run_rows_unit_length(const tfenc_run *r);

/* Whether the writer scales chunk means back to unit length. */
int tfenc_run_unit_chunk_means(const tfenc_run *r);

#endif
