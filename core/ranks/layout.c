/* Rank layout: replicas x stages, and the cost-balanced split of the steps. */
#include "ranks/layout.h"

#include <stdlib.h>
#include <string.h>

int tfenc_layout_rank(const tfenc_layout *layout, int replica, int stage)
{
    return replica * layout->pipeline_stages + stage;
}

int tfenc_layout_is_first_stage(const tfenc_layout *layout)
{
    return layout->stage == 0;
}

int tfenc_layout_is_last_stage(const tfenc_layout *layout)
{
    return layout->stage == layout->pipeline_stages - 1;
}

int tfenc_layout_check(tfenc_context *ctx, const char *where, int n_ranks, int pipeline_stages,
                       int n_steps)
{
    if (pipeline_stages < 1)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: pipeline_stages = %d: must be >= 1", where,
                           pipeline_stages);
    if (n_ranks % pipeline_stages != 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "%s: %d ranks cannot form pipelines of pipeline_stages = %d (the rank "
                           "count must be a multiple of the stage count: ranks = data_parallel "
                           "x pipeline_stages)",
                           where, n_ranks, pipeline_stages);
    if (pipeline_stages > n_steps)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "%s: pipeline_stages = %d but the model has only %d step%s (each "
                           "stage needs at least one layer)",
                           where, pipeline_stages, n_steps, n_steps == 1 ? "" : "s");
    return TFENC_OK;
}

/* Minimises the largest stage sum over contiguous splits (the classic linear
 * partition; n_steps and stages are small, so O(stages x steps^2) is fine). */
static int split_steps(const double *cost, int n_steps, int stages, int *start)
{
    double *prefix = malloc((size_t)(n_steps + 1) * sizeof *prefix);
    double *best = malloc((size_t)(stages + 1) * (size_t)(n_steps + 1) * sizeof *best);
    int *cut = malloc((size_t)(stages + 1) * (size_t)(n_steps + 1) * sizeof *cut);
    if (prefix == NULL || best == NULL || cut == NULL) {
        free(prefix);
        free(best);
        free(cut);
        return 0;
    }
    prefix[0] = 0;
    for (int i = 0; i < n_steps; i++)
        prefix[i + 1] = prefix[i] + cost[i];
#define AT(table, s, i) table[(size_t)(s) * (size_t)(n_steps + 1) + (size_t)(i)]
    for (int i = 1; i <= n_steps; i++) {
        AT(best, 1, i) = prefix[i];
        AT(cut, 1, i) = 0;
    }
    for (int s = 2; s <= stages; s++)
        for (int i = s; i <= n_steps; i++) {
            double chosen = -1;
            int chosen_cut = s - 1;
            /* Strict < keeps the earliest cut among equals: deterministic. */
            for (int j = s - 1; j < i; j++) {
                double last = prefix[i] - prefix[j];
                double worst = AT(best, s - 1, j) > last ? AT(best, s - 1, j) : last;
                if (chosen < 0 || worst < chosen) {
                    chosen = worst;
                    chosen_cut = j;
                }
            }
            AT(best, s, i) = chosen;
            AT(cut, s, i) = chosen_cut;
        }
    start[stages] = n_steps;
    for (int s = stages, i = n_steps; s >= 1; s--) {
        start[s - 1] = AT(cut, s, i);
        i = start[s - 1];
    }
#undef AT
    free(prefix);
    free(best);
    free(cut);
    return 1;
}

int tfenc_layout_place(tfenc_context *ctx, const char *where, int rank, int n_ranks,
                       int pipeline_stages, int n_steps, tfenc_layout *layout)
{
    memset(layout, 0, sizeof *layout);
    int status = tfenc_layout_check(ctx, where, n_ranks, pipeline_stages, n_steps);
    if (status != TFENC_OK)
        return status;
    layout->n_ranks = n_ranks;
    layout->pipeline_stages = pipeline_stages;
    layout->data_parallel = n_ranks / pipeline_stages;
    layout->rank = rank;
    /* The placement rule: a replica's stages are neighbouring ranks. */
    layout->replica = rank / pipeline_stages;
    layout->stage = rank % pipeline_stages;
    layout->n_steps = n_steps;
    return TFENC_OK;
}

int tfenc_layout_split(tfenc_context *ctx, tfenc_layout *layout, const double *step_cost)
{
    const int n_steps = layout->n_steps, pipeline_stages = layout->pipeline_stages;
    free(layout->stage_start);
    free(layout->stage_cost);
    layout->total_cost = 0;
    layout->stage_start = malloc((size_t)(pipeline_stages + 1) * sizeof *layout->stage_start);
    layout->stage_cost = calloc((size_t)pipeline_stages, sizeof *layout->stage_cost);
    /* A step a plugin cannot cost still weighs a little, so that steps of
     * unknown cost spread evenly instead of piling onto one stage. */
    double mean = 0;
    for (int i = 0; i < n_steps; i++)
        mean += step_cost[i] > 0 ? step_cost[i] : 0;
    mean = n_steps > 0 ? mean / n_steps : 0;
    const double floor_cost = mean > 0 ? 1e-6 * mean : 1.0;
    double *cost = malloc((size_t)n_steps * sizeof *cost);
    if (layout->stage_start == NULL || layout->stage_cost == NULL || cost == NULL) {
        free(cost);
        tfenc_layout_free(layout);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    }
    for (int i = 0; i < n_steps; i++)
        cost[i] = (step_cost[i] > 0 ? step_cost[i] : 0) + floor_cost;
    if (!split_steps(cost, n_steps, pipeline_stages, layout->stage_start)) {
        free(cost);
        tfenc_layout_free(layout);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    }
    for (int s = 0; s < pipeline_stages; s++)
        for (int i = layout->stage_start[s]; i < layout->stage_start[s + 1]; i++) {
            double c = step_cost[i] > 0 ? step_cost[i] : 0;
            layout->stage_cost[s] += c;
            layout->total_cost += c;
        }
    free(cost);
    return TFENC_OK;
}

int tfenc_layout_create(tfenc_context *ctx, const char *where, int rank, int n_ranks,
                        int pipeline_stages, int n_steps, const double *step_cost,
                        tfenc_layout *layout)
{
    int status = tfenc_layout_place(ctx, where, rank, n_ranks, pipeline_stages, n_steps, layout);
    return status == TFENC_OK ? tfenc_layout_split(ctx, layout, step_cost) : status;
}

int tfenc_layout_first_step(const tfenc_layout *layout, int stage)
{
    return layout->stage_start[stage];
}

int tfenc_layout_end_step(const tfenc_layout *layout, int stage)
{
    return layout->stage_start[stage + 1];
}

void tfenc_layout_free(tfenc_layout *layout)
{
    free(layout->stage_start);
    free(layout->stage_cost);
    layout->stage_start = NULL;
    layout->stage_cost = NULL;
}
