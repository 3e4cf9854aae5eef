/* An int8 job's calibration between the model and the file: what the
 * model was calibrated with (the weight store's input ranges and the
 * steps' precisions), collected for the output to record; and a recorded
 * calibration ([model] calibration = FILE, or the file a resume continues)
 * put back into a model, after checking it is of this model. The format
 * in the file is output/calibration.h's. */
#ifndef TFENC_RUN_CALIBRATION_H
#define TFENC_RUN_CALIBRATION_H

#include "base/precision.h"
#include "model/model.h"
#include "model/weights.h"
#include "output/calibration.h"

/* The maps of the store's table and each step's precision into a zeroed
 * `calibration` (maps and precision_steps; the caller sets the rest, then
 * takes its digest). */
int tfenc_calibration_from_model(tfenc_context *ctx, const tfenc_weight_store *store,
                                 const tfenc_model_plan *plan,
                                 const tfenc_precision *step_precision,
                                 tfenc_int8_calibration *calibration);

/* Puts `calibration`, read from `path`, into this job's model: refused in
 * one line naming the path and what differs when it is of other weights
 * (weights_sha256 against the job's: [model] weights' SHA-256, or with
 * layers' weights_files a digest of theirs too), of another plan (its steps, by
 * name and order), or, for a job of several heads, when its gate did not
 * judge each of the plan's further heads (calibration->heads). Fills step_precision[plan->n_steps] with its steps'
 * precisions, a step it keeps in bf16 in this CPU's fallback
 * (tfenc_matrix_int8_fallback: fp32 where bf16 does not run; *changed
 * counts those), and sets the store's input ranges. The store is not
 * fixed yet (tfenc_weight_store_calibration_fix). */
int tfenc_calibration_to_model(tfenc_context *ctx, const tfenc_int8_calibration *calibration,
                               const char *path, const char *weights_sha256,
                               const tfenc_model_plan *plan, tfenc_weight_store *store,
                               tfenc_precision *step_precision, int *changed);

#endif
