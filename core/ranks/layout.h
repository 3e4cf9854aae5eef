/* How the ranks of a job divide the work: `data_parallel` replicas, each a
 * chain of `pipeline_stages` ranks that hold contiguous ranges of the
 * model's steps, balanced by predicted cost.
 *
 * Rank r is stage r % stages of replica r / stages: a replica's stages are
 * neighbouring ranks, so under the usual block mapping (mpirun fills a node
 * before the next) activations travel between stages inside a node, and only
 * the corpus shares and the output file cross nodes. */
#ifndef TFENC_LAYOUT_H
#define TFENC_LAYOUT_H

#include "tfenc/plugin.h"

typedef struct tfenc_layout {
    int n_ranks;
    int data_parallel;
    int pipeline_stages;
    int rank;
    int replica; /* 0 .. data_parallel - 1: which share of the corpus */
    int stage;   /* 0 .. pipeline_stages - 1 */
    int n_steps;
    int *stage_start;    /* [pipeline_stages + 1]: stage s runs steps
                          * [stage_start[s], stage_start[s + 1]); NULL until split */
    double *stage_cost;  /* [pipeline_stages]: predicted cost of each stage */
    double total_cost;
} tfenc_layout;

/* Refuses layouts that cannot work, before any work: a rank count that is
 * not a multiple of the stage count, or more stages than steps (a stage
 * must hold at least one). `where` prefixes the message (the job file). */
int tfenc_layout_check(tfenc_context *ctx, const char *where, int n_ranks, int pipeline_stages,
                       int n_steps);

/* Fills in `rank`'s place: its replica and stage, by the rule above (the
 * one place it is written). Runs tfenc_layout_check first. The step split
 * is not known yet (stage_start is NULL): tfenc_layout_split() adds it. */
int tfenc_layout_place(tfenc_context *ctx, const char *where, int rank, int n_ranks,
                       int pipeline_stages, int n_steps, tfenc_layout *layout);

/* Splits the steps into contiguous stage ranges that minimise the most
 * expensive stage (a pipeline runs at the pace of its slowest stage).
 * step_cost[i] >= 0 is step i's predicted cost, e.g. FLOPs per token;
 * steps of equal cost split evenly. */
int tfenc_layout_split(tfenc_context *ctx, tfenc_layout *layout, const double *step_cost);

/* tfenc_layout_place() and tfenc_layout_split() in one call. */
int tfenc_layout_create(tfenc_context *ctx, const char *where, int rank, int n_ranks,
                        int pipeline_stages, int n_steps, const double *step_cost,
                        tfenc_layout *layout);

/* The rank that is `stage` of `replica`. */
int tfenc_layout_rank(const tfenc_layout *layout, int replica, int stage);
/* Whether this rank reads the corpus (first stage) or writes the output
 * (last stage); with one stage, both. */
int tfenc_layout_is_first_stage(const tfenc_layout *layout);
int tfenc_layout_is_last_stage(const tfenc_layout *layout);

/* The stage's first step and one past its last. */
int tfenc_layout_first_step(const tfenc_layout *layout, int stage);
int tfenc_layout_end_step(const tfenc_layout *layout, int stage);

void tfenc_layout_free(tfenc_layout *layout);

#endif
