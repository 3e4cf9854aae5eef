/* The accuracy gate's checkpoints: a trial run's activations at the
 * boundaries between the model's steps, kept within a memory budget, so
 * that a later run whose steps before a boundary run at the same
 * precisions starts there instead of at the model's input. The gate's
 * runs differ from one another in a few steps (the fp32 reference, all
 * int8, then the bisection's probes), and on CPUs where the fallback is
 * fp32 the reference holds the start of most of them. Sound
 * because a step is deterministic given its input, its precision and its
 * maps, and the maps' calibration is fixed before the first trial run
 * (run/accuracy_gate.c). */
#ifndef TFENC_GATE_CHECKPOINTS_H
#define TFENC_GATE_CHECKPOINTS_H

#include "base/context.h"
#include "base/precision.h"
#include "tfenc/plugin.h"

#include <stddef.h>

typedef struct tfenc_gate_checkpoints tfenc_gate_checkpoints;

/* For a model of n_steps steps run on a sample of n_batches batches whose
 * activations at a boundary take at most bytes_per_boundary: kept within
 * `budget` bytes, every stride-th boundary, the stride such that one
 * run's checkpoints take a quarter of the budget at most. */
int tfenc_gate_checkpoints_create(tfenc_context *ctx, int n_steps, int n_batches,
                                  size_t bytes_per_boundary, size_t budget,
                                  tfenc_gate_checkpoints **out);
void tfenc_gate_checkpoints_destroy(tfenc_gate_checkpoints *checkpoints);

/* Step `step` at int8 gave bitwise the fp32 output on the fp32 reference's
 * input (a step without products, such as an embedding lookup): a run
 * that reaches it on that input may take its int8 run for the fp32 one. */
void tfenc_gate_checkpoints_set_identical(tfenc_gate_checkpoints *checkpoints, int step,
                                          int identical);

/* Copies into the sample's batches the activations of the deepest kept boundary
 * that a run at step precisions `precision` reaches with the same values,
 * and returns that boundary: the first step to run. 0 when none is kept
 * (the batches are left as they were). With `which` (not NULL), a run on
 * n_which of the sample's batches: batches[i] gets batch which[i]'s. No
 * boundary past `deepest` is taken (a run that must see the activations
 * there: the trunk's end, which further heads read). */
int tfenc_gate_checkpoints_restore(tfenc_gate_checkpoints *checkpoints,
                                   const tfenc_precision *precision, tfenc_batch *batches,
                                   const int *which, int n_which, int deepest);

/* Keeps the sample's batches (their x and rows) as the input of step `boundary`
 * of a run at `precision`, when the boundary is one that is kept and the
 * copy fits the budget (the least recently used ones make room). A copy
 * that finds no memory is not kept: the checkpoints only save time. */
void tfenc_gate_checkpoints_keep(tfenc_gate_checkpoints *checkpoints, int boundary,
                                 const tfenc_precision *precision, const tfenc_batch *batches);

#endif
