/* The int8 accuracy gate: before a job, it runs the model step by step on
 * a sample of the corpus at fp32 and at the job's precision, and keeps in
 * bf16 (or fp32) the steps that would take the output below min_cosine. It
 * builds and runs trial models, so it sits above the model it drives. */
#ifndef TFENC_ACCURACY_GATE_H
#define TFENC_ACCURACY_GATE_H

#include "base/precision.h"
#include "tfenc/plugin.h"

struct tfenc_model_options;
struct tfenc_batch;

/* What the accuracy gate found and chose. */
typedef struct tfenc_precision_report {
    tfenc_precision *step_precision; /* [n_steps], the caller's: each step's precision to run */
    double *step_cosine;             /* [n_steps] or NULL: each step alone at the requested
                                        precision against fp32, on fp32 inputs (1 = exact) */
    double sample_cosine;            /* the whole model with step_precision, against fp32:
                                        the smallest cosine over the sample's output rows */
    int n_fallbacks;                 /* int8 steps kept in bf16 (fp32 where bf16 does not run) */
    int worst_step;                  /* the least accurate step, -1 when all are exact */
} tfenc_precision_report;

/* The accuracy gate, run before a job on a sample of its corpus. The plan of
 * `options` (the whole model; first_step and end_step are ignored) runs
 * step by step, each step built alone as the pipeline survey does, so
 * memory holds one step's weights at a time:
 * 1. each step at fp32 and at the requested precision (options->config)
 *    on the same fp32 inputs gives the step's cosine;
 * 2. the whole model at the chosen precisions gives the sample's cosine to
 *    fp32: the smallest over every output row (token, or pooled document)
 *    of the sample batches;
 * 3. for int8, while that is below the bar, the least accurate int8
 *    steps are kept in bf16, or fp32 where bf16 does not run (as few as a
 *    bisection finds).
 * The bar is min_cosine with half its error to spare, 1 - (1 - min_cosine)
 * / 2: a corpus holds documents less accurate than its sample's worst.
 * The sample batches are read only: their token ids, positions and row
 * counts (within options->limits); their x is not used. Returns TFENC_OK
 * with the report filled in; TFENC_ERR_CONFIG and one line naming the
 * least accurate layer when min_cosine cannot be met (int8 with every step
 * out of int8, or bf16 itself); other errors as model creation
 * and forward report them. fp32 jobs are exact: cosine 1 without a run. */
int tfenc_precision_gate(tfenc_context *ctx, const struct tfenc_model_options *options,
                         const struct tfenc_batch *samples, int n_samples, double min_cosine,
                         tfenc_precision_report *report);

#endif
