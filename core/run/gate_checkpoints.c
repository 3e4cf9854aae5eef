/* The accuracy gate's checkpoints (see run/gate_checkpoints.h): a list of
 * copies of the sample's activations, each with the precisions of the
 * steps before it, evicted least recently used first. */
#include "run/gate_checkpoints.h"

#include <stdlib.h>
#include <string.h>

typedef struct checkpoint {
    int boundary;              /* the input of this step */
    tfenc_precision *prefix;   /* [boundary] the steps before it, as canonical_prefix writes */
    float **x;                 /* [n_batches] rows x d_model each */
    int *rows;                 /* [n_batches] */
    size_t bytes;
    unsigned long last_used;
} checkpoint;

struct tfenc_gate_checkpoints {
    int n_steps, n_batches, stride;
    unsigned char *identical;  /* [n_steps] */
    tfenc_precision *canonical; /* [n_steps] scratch */
    checkpoint *entries;
    int n_entries, capacity;
    size_t bytes, budget;
    unsigned long clock;
};

int tfenc_gate_checkpoints_create(tfenc_context *ctx, int n_steps, int n_batches,
                                  size_t bytes_per_boundary, size_t budget,
                                  tfenc_gate_checkpoints **out)
{
    *out = NULL;
    tfenc_gate_checkpoints *c = calloc(1, sizeof *c);
    if (c == NULL || (c->identical = calloc((size_t)n_steps + 1, 1)) == NULL ||
        (c->canonical = calloc((size_t)n_steps + 1, sizeof *c->canonical)) == NULL) {
        tfenc_gate_checkpoints_destroy(c);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "accuracy gate: out of memory");
    }
    c->n_steps = n_steps;
    c->n_batches = n_batches;
    c->budget = budget;
    /* One run's boundaries (1 .. n_steps - 1) in a quarter of the budget:
     * room for the reference's and those of the last few trials. */
    const size_t per_run = budget / 4;
    const size_t boundaries = n_steps > 1 ? (size_t)n_steps - 1 : 1;
    size_t stride = per_run > 0 && bytes_per_boundary > 0
                        ? (boundaries * bytes_per_boundary + per_run - 1) / per_run
                        : boundaries;
    c->stride = stride < 1 ? 1 : stride > boundaries ? (int)boundaries : (int)stride;
    *out = c;
    return TFENC_OK;
}

static void drop(tfenc_gate_checkpoints *c, int index)
{
    checkpoint *entry = &c->entries[index];
    for (int b = 0; entry->x != NULL && b < c->n_batches; b++)
        free(entry->x[b]);
    free(entry->x);
    free(entry->rows);
    free(entry->prefix);
    c->bytes -= entry->bytes;
    c->entries[index] = c->entries[--c->n_entries];
}

void tfenc_gate_checkpoints_destroy(tfenc_gate_checkpoints *c)
{
    if (c == NULL)
        return;
    while (c->n_entries > 0)
        drop(c, c->n_entries - 1);
    free(c->entries);
    free(c->identical);
    free(c->canonical);
    free(c);
}

void tfenc_gate_checkpoints_set_identical(tfenc_gate_checkpoints *c, int step, int identical)
{
    if (step >= 0 && step < c->n_steps)
        c->identical[step] = identical != 0;
}

/* The precisions of steps [0, boundary) as the values they produce tell
 * them apart: while the run is on the reference's values, an int8 step
 * that gives bitwise fp32's output there counts as fp32. */
static const tfenc_precision *canonical_prefix(tfenc_gate_checkpoints *c,
                                               const tfenc_precision *precision, int boundary)
{
    int on_reference = 1;
    for (int i = 0; i < boundary; i++) {
        tfenc_precision p = precision[i];
        if (on_reference && p == TFENC_PRECISION_INT8 && c->identical[i])
            p = TFENC_PRECISION_FP32;
        on_reference = on_reference && p == TFENC_PRECISION_FP32;
        c->canonical[i] = p;
    }
    return c->canonical;
}

int tfenc_gate_checkpoints_restore(tfenc_gate_checkpoints *c, const tfenc_precision *precision,
                                   tfenc_batch *batches, const int *which, int n_which,
                                   int deepest)
{
    const tfenc_precision *wanted = canonical_prefix(c, precision, c->n_steps);
    int best = -1;
    for (int i = 0; i < c->n_entries; i++) {
        const checkpoint *entry = &c->entries[i];
        if (entry->boundary <= deepest &&
            (best < 0 || entry->boundary > c->entries[best].boundary) &&
            memcmp(entry->prefix, wanted, (size_t)entry->boundary * sizeof *wanted) == 0)
            best = i;
    }
    if (best < 0)
        return 0;
    checkpoint *entry = &c->entries[best];
    entry->last_used = ++c->clock;
    const int n = which != NULL ? n_which : c->n_batches;
    for (int b = 0; b < n; b++) {
        const int kept = which != NULL ? which[b] : b;
        memcpy(batches[b].x, entry->x[kept],
               (size_t)entry->rows[kept] * (size_t)batches[b].d_model * sizeof(float));
        batches[b].rows = entry->rows[kept];
    }
    return entry->boundary;
}

/* Makes room for `bytes` by dropping the least recently used entries;
 * 0 when they cannot fit at all. */
static int make_room(tfenc_gate_checkpoints *c, size_t bytes)
{
    if (bytes > c->budget)
        return 0;
    while (c->bytes + bytes > c->budget && c->n_entries > 0) {
        int oldest = 0;
        for (int i = 1; i < c->n_entries; i++)
            if (c->entries[i].last_used < c->entries[oldest].last_used)
                oldest = i;
        drop(c, oldest);
    }
    return 1;
}

void tfenc_gate_checkpoints_keep(tfenc_gate_checkpoints *c, int boundary,
                                 const tfenc_precision *precision, const tfenc_batch *batches)
{
    const int n = c->n_batches;
    if (boundary <= 0 || boundary >= c->n_steps || boundary % c->stride != 0)
        return;
    const tfenc_precision *prefix = canonical_prefix(c, precision, boundary);
    for (int i = 0; i < c->n_entries; i++)
        if (c->entries[i].boundary == boundary &&
            memcmp(c->entries[i].prefix, prefix, (size_t)boundary * sizeof *prefix) == 0)
            return; /* kept already */
    size_t bytes = 0;
    for (int b = 0; b < n; b++)
        bytes += (size_t)batches[b].rows * (size_t)batches[b].d_model * sizeof(float);
    if (!make_room(c, bytes))
        return;
    if (c->n_entries == c->capacity) {
        int capacity = c->capacity > 0 ? 2 * c->capacity : 16;
        checkpoint *grown = realloc(c->entries, (size_t)capacity * sizeof *grown);
        if (grown == NULL)
            return;
        c->entries = grown;
        c->capacity = capacity;
    }
    checkpoint entry = {.boundary = boundary, .bytes = bytes, .last_used = ++c->clock};
    entry.prefix = malloc((size_t)boundary * sizeof *entry.prefix);
    entry.x = calloc((size_t)n, sizeof *entry.x);
    entry.rows = malloc((size_t)n * sizeof *entry.rows);
    int complete = entry.prefix != NULL && entry.x != NULL && entry.rows != NULL;
    for (int b = 0; complete && b < n; b++) {
        size_t size = (size_t)batches[b].rows * (size_t)batches[b].d_model * sizeof(float);
        entry.x[b] = malloc(size > 0 ? size : 1);
        complete = entry.x[b] != NULL;
        if (complete) {
            memcpy(entry.x[b], batches[b].x, size);
            entry.rows[b] = batches[b].rows;
        }
    }
    if (complete)
        memcpy(entry.prefix, prefix, (size_t)boundary * sizeof *prefix);
    c->entries[c->n_entries++] = entry;
    c->bytes += bytes;
    if (!complete)
        drop(c, c->n_entries - 1);
}
