/* The encoder: composes plugin layer instances from the job file (layers in
 * file order, blocks repeated with per-repeat weights, residual and pre/post
 * norm wrapping) and runs them over packed batches. A pipeline stage builds
 * only its contiguous range of steps. */
#ifndef TFENC_MODEL_H
#define TFENC_MODEL_H

#include "job/jobfile.h"
#include "plugin/plugin_loader.h"
#include "base/plugin_guard.h"
#include "base/precision.h"
#include "model/weights.h"

/* The [model] section. */
typedef struct tfenc_model_config {
    char *weights_path; /* resolved against the job file's directory */
    const char *plugin_path;
    int d_model;
    int vocab_size;
    int max_positions;
    tfenc_precision precision; /* of the matrix products */
    double min_cosine;         /* int8: the accuracy gate's bar on the corpus sample */
    /* int8: an earlier int8 job's output whose calibration the job takes
     * (output/calibration.h) instead of calibrating on its own corpus,
     * resolved against the job file's directory; NULL calibrates. */
    char *calibration_path;
    /* An earlier output whose path choices (run/path_choice.h: attention
     * kernel...) the job takes instead of measuring, resolved against the
     * job file's directory; NULL measures where the job says auto. */
    char *paths_path;
    /* The library of fp32 linear maps: [model] fp32_products, OpenBLAS for
     * auto until the path choice (run/path_choice.h) sets the key. */
    tfenc_fp32_products fp32_products;
} tfenc_model_config;

int tfenc_model_config_read(tfenc_context *ctx, const tfenc_jobfile *job,
                            tfenc_model_config *config);
/* The job's [model] fp32_products as it stands (auto: OpenBLAS, the
 * default), for the config once the path choices are applied. */
tfenc_fp32_products tfenc_model_fp32_products(const tfenc_jobfile *job);
void tfenc_model_config_free(tfenc_model_config *config);

/* One step of the forward pass: a plain layer, or a block sublayer with its
 * residual connection, optional norm and optional output norm. */
typedef struct tfenc_step_plan {
    char *name;                       /* "embeddings", "encoder.3.ffn" */
    tfenc_job_section *section;       /* the layer's section */
    const char *type;                 /* its layer type: which plugin runs it */
    tfenc_job_section *norm_section;  /* the sublayer's norm, or NULL */
    const char *norm_type;            /* the norm's layer type, or NULL */
    char *group;                      /* weights group of the layer */
    char *norm_group;                 /* weights group of the norm, or NULL */
    tfenc_job_section *output_norm_section; /* [BLOCK.NAME.output_norm]: a norm of the
                                       * sublayer's output before the residual (Gemma's
                                       * post-attention and post-feedforward norms), or NULL */
    const char *output_norm_type;     /* its layer type, or NULL */
    char *output_norm_group;          /* its weights group, or NULL */
    int in_block;
    int residual;                     /* add the step's input back */
    int norm_first;                   /* pre-norm (1) or post-norm (0) */
    int repeat_index;                 /* -1 outside a block */
    int repeat_count;                 /* repeats of the enclosing block, 0 outside */
    /* First step of a block only: the weights group one repeat past the last
     * (e.g. /encoder/6 for repeat = 6), which must not exist unless the
     * block says extra_layers = ignore; NULL when there is nothing to check. */
    char *extra_group;
    char *block_origin;               /* "job.ini:30: [encoder] repeat = 6", for that check */
    /* [LAYER] weights_file (outside blocks): the HDF5 file, resolved against
     * the job file's directory, that holds the layer's group instead of
     * [model] weights (a head beside its encoder); NULL without the key. */
    char *weights_file;
} tfenc_step_plan;

/* Several outputs in one pass (docs/job-file.md, "Several outputs"): the
 * layers outside blocks may carry `head = NAME`. The steps before the first
 * head's are the trunk, which every head reads; `steps` holds the trunk and
 * the first head (the primary output, written where a job of one output
 * writes), so that everything that knows one output sees an ordinary model;
 * each further head is a plan of its own (`extra_heads`), run on a copy of
 * the trunk's rows by the last stage. Without heads: trunk_steps = n_steps,
 * no extra heads. */
typedef struct tfenc_model_plan {
    tfenc_step_plan *steps;
    int n_steps;
    int n_layers; /* encoder block repeats in total */
    int trunk_steps;        /* the steps every head reads; n_steps without heads */
    char *first_head;       /* the primary head's name, NULL without heads */
    struct tfenc_model_plan *extra_heads; /* [n_extra_heads] further heads, in file order */
    char **extra_head_names;
    int n_extra_heads;
} tfenc_model_plan;

/* Every step of the job under one numbering, for what concerns each layer
 * alike whichever head it belongs to (a weights_file to hash, attach and
 * record in the job's identity): the plan's own steps (trunk and first
 * head), then each further head's in file order. */
int tfenc_model_plan_count_every_step(const tfenc_model_plan *plan);
const tfenc_step_plan *tfenc_model_plan_every_step(const tfenc_model_plan *plan, int index);

/* Reads the composition from the job (no plugin is loaded). Rejects unknown
 * sections and block keys with file:line. */
int tfenc_model_plan_read(tfenc_context *ctx, const tfenc_jobfile *job, tfenc_model_plan *plan);
void tfenc_model_plan_free(tfenc_model_plan *plan);
/* Attaches each step's weights_file (further heads' too) to the store
 * (weights.h), for its group: errors name the job file, line and layer. */
int tfenc_model_attach_weights_files(tfenc_context *ctx, const tfenc_jobfile *job,
                                     const tfenc_model_plan *plan, tfenc_weight_store *store);

typedef struct tfenc_model tfenc_model;

/* A model's scratch (the residual copy of a batch, the batch's rows as the
 * layers run them, the layers' workspace), shared by models that never run
 * at the same time: the accuracy gate keeps its trial steps built, and one
 * scratch serves them all. Each model built with it makes it large enough
 * for itself. What the plugins write, the rows and the workspace, each has
 * a canary after it, and with TFENC_CHECK_PLUGINS a guard page
 * (base/plugin_guard.h); the caller's batch->x keeps the batch's input
 * meanwhile, for the step-by-step rerun after a non-finite value. With
 * TFENC_CHECK_PLUGINS the token arrays (seq_start, token_ids, ...) are
 * copied too, into pages that are read-only while the plugins run. */
typedef struct tfenc_model_scratch {
    void *residual;
    size_t residual_bytes;
    tfenc_guarded_buffer activations, workspace, tokens;
} tfenc_model_scratch;
int tfenc_model_scratch_create(tfenc_context *ctx, tfenc_model_scratch **scratch);
/* After every model built with it. */
void tfenc_model_scratch_destroy(tfenc_model_scratch *scratch);

typedef struct tfenc_model_options {
    const tfenc_jobfile *job;
    const tfenc_model_config *config;
    const tfenc_model_plan *plan;
    tfenc_plugin_registry *registry;
    tfenc_weight_store *weights;
    tfenc_limits limits;
    int first_step; /* this stage's range [first_step, end_step) */
    int end_step;
    /* Precision of each step of the plan (the int8 accuracy gate's
     * choices), or NULL for config->precision everywhere. */
    const tfenc_precision *step_precision;
    /* fp32 steps record their linear maps' input ranges for int8 (the
     * accuracy gate's reference pass; weights.h). */
    int calibrate;
    /* The job's batches carry seq_keys (a ColBERT query whose [MASK]
     * padding is not attended to): a layer that does not declare what it
     * does with them (tfenc_layer_descriptor.key_masking) is refused. */
    int masked_keys;
    /* The batches' x holds no input when the range starts at the plan's
     * first step (a job's first stage: the feeder gives token ids, and the
     * first layer makes the rows): then the rows are not copied into the
     * layers' scratch before the steps run, a copy as large as the tokens
     * times d_model that a static-embedding model's microbatch would
     * otherwise spend more on than on its lookup. A range of later steps
     * reads its input whatever this says. */
    int input_unset;
    /* NULL: the model allocates its own scratch. Else it uses this one,
     * which models that run at the same time MUST NOT share. */
    tfenc_model_scratch *shared_scratch;
} tfenc_model_options;

/* Creates the instances of the step range, loading their weights, and
 * allocates all scratch once. */
int tfenc_model_create(tfenc_context *ctx, const tfenc_model_options *options,
                       tfenc_model **model);
/* Runs the stage's steps over the batch, in place. Never allocates. A
 * layer whose forward() writes past its workspace or the batch's rows, or
 * changes a field of the batch other than rows, fails naming the layer and
 * its plugin file; while a plugin runs, tfenc_plugin_call_current() names
 * it (base/plugin_guard.h). Never
 * returns a non-finite value: when the output holds a NaN or an infinity
 * (weights that are finite but huge overflow float32), it fails with
 * TFENC_ERR_WEIGHTS naming the layer that made it, and
 * tfenc_model_nonfinite_sequence() tells which sequence of the batch. */
int tfenc_model_forward(tfenc_context *ctx, tfenc_model *model, tfenc_batch *batch);
/* Late chunking: spans of the batch's token rows, rows [begin[s], end[s])
 * each (inside one sequence; empty ones pool as an empty sequence does). */
typedef struct tfenc_model_spans {
    int n_spans; /* at most the batch's tokens */
    const int32_t *begin, *end;
} tfenc_model_spans;
/* Late chunking (run/late_chunks.h), on a model of the whole plan: room
 * for the spans, and the step that pools (the first after which the
 * probe's sequence is one row); no such step is an error. Once, before
 * tfenc_model_forward_spans. */
int tfenc_model_prepare_spans(tfenc_context *ctx, tfenc_model *model);
/* tfenc_model_forward, once tfenc_model_prepare_spans has run: the steps
 * before the pooling step run on the batch, then the pooling step and the
 * steps after it (normalisation, Dense) on the spans as sequences of their
 * own, so that each span's row is the model's pooling of its token
 * vectors, which saw the whole sequence. batch->rows becomes n_spans. */
int tfenc_model_forward_spans(tfenc_context *ctx, tfenc_model *model, tfenc_batch *batch,
                              const tfenc_model_spans *spans);
/* After such a failure: the index of the sequence in the batch; else -1. */
int tfenc_model_nonfinite_sequence(const tfenc_model *model);
/* Estimated floating-point operations per token of step i (in range) for
 * sequences of mean length `mean_seq_len`, into *flops; a plugin that
 * answers with a negative or non-finite count is an error naming it. */
int tfenc_model_step_flops(tfenc_context *ctx, const tfenc_model *model, int step,
                           double mean_seq_len, double *flops);
/* Step i's (in range) layer counters (tfenc/plugin.h's
 * TFENC_COUNTERS_URI): TFENC_ERR_NOT_FOUND when its layer keeps none. */
int tfenc_model_step_counters(const tfenc_model *model, int step, const char **label, int *n,
                              const long long **values);
/* Runs one 2-token sequence through the model to learn whether it pools
 * (its rows drop to one per sequence) and, when unit_rows is not NULL,
 * whether the rows it ends with have unit L2 norm (it normalises them):
 * works for custom pooling plugins too, and shows that the model runs
 * before any I/O. */
int tfenc_model_probe_pools(tfenc_context *ctx, tfenc_model *model, int *pools, int *unit_rows);
/* For pipelines, before any stage loads its range: builds each step of the
 * plan alone (one at a time, so memory holds one step's weights), runs the
 * probe sequence through the steps in order, and destroys them again.
 * step_flops[n_steps] gets each step's FLOPs per token at mean_seq_len;
 * *pools whether the whole model pools, *unit_rows (when not NULL) whether
 * its rows have unit length, as tfenc_model_probe_pools says. */
int tfenc_model_survey(tfenc_context *ctx, const tfenc_model_options *options,
                       double mean_seq_len, double *step_flops, int *pools, int *unit_rows);
/* What the job writes, as the plan's last layer declares it (plugin.h's
 * tfenc_layer_output): HIDDEN when this model's range does not end the plan
 * or the layer declares nothing. A SCORES width outside 1..d_model, or a
 * norm after a SCORES layer, is an error naming the layer. */
int tfenc_model_output(tfenc_context *ctx, const tfenc_model *model, tfenc_layer_output *output);
/* A model whose range holds the plan's trunk end (plan->trunk_steps, of a
 * plan with heads): each forward pass copies the rows the trunk leaves,
 * before the first head's steps run, into `rows` ([limits.max_tokens,
 * d_model]), which the further heads then read. TFENC_ERR_CONFIG when the
 * range does not hold the trunk's end (a pipeline stage past it). */
int tfenc_model_set_trunk_tap(tfenc_context *ctx, tfenc_model *model, float *rows);
/* The rows the last pass left in the tap. */
int tfenc_model_trunk_rows(const tfenc_model *model);
void tfenc_model_destroy(tfenc_model *model);

#endif
