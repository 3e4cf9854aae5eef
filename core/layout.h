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
                          * [stage_start[s], stage_start[s + 1]) */
    double *stage_cost;  /* [pipeline_stages]: predicted cost of each stage */
    double total_cost;
} tfenc_layout;

/* Where `rank` sits: its replica and its stage (the rule above). The one
 * place that rule is written; tfenc_layout_create() and tfenc-batch, which
 * needs its role before the steps are costed, both ask here. */
void tfenc_layout_place(int rank, int pipeline_stages, int *replica, int *stage);

/* Refuses layouts that cannot work, before any work: a rank count that is
 * not a multiple of the stage count, or more stages than steps (a stage
 * must hold at least one). `where` prefixes the message (the job file). */
int tfenc_layout_check(tfenc_context *ctx, const char *where, int n_ranks, int pipeline_stages,
                       int n_steps);

/* Fills `layout` for `rank`: the replica and stage, and the split of the
 * steps into contiguous stage ranges that minimises the most expensive
 * stage (a pipeline runs at the pace of its slowest stage). step_cost[i]
 * >= 0 is step i's predicted cost, e.g. FLOPs per token; steps of equal
 * cost split evenly. Runs tfenc_layout_check first. */
int tfenc_layout_create(tfenc_context *ctx, const char *where, int rank, int n_ranks,
                        int pipeline_stages, int n_steps, const double *step_cost,
                        tfenc_layout *layout);

/* The stage's first step and one past its last. */
int tfenc_layout_first_step(const tfenc_layout *layout, int stage);
int tfenc_layout_end_step(const tfenc_layout *layout, int stage);

void tfenc_layout_free(tfenc_layout *layout);

#endif
