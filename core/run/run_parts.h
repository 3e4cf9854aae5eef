/* What a job run holds, in three parts by when they are written (llama2.c's
 * Config / TransformerWeights / RunState): the settings, read once from the
 * request and the job file; the plan, computed once from them by the setup
 * steps that every rank takes together; and the state, which the encoding
 * changes window by window. Each member's comment names the step of the run
 * that writes it: a function of run.c, or of the file of core/run that
 * holds that step (read_job: tfenc_run_read_job in job_reading.c). Also
 * what every step uses: notices, agreement on a failure, the model's
 * options. Internal to core/run: the driver sees run.h alone. */
#ifndef TFENC_RUN_PARTS_H
#define TFENC_RUN_PARTS_H

#include "run/run_request.h"

#include "base/context.h"
#include "input/corpus.h"
#include "input/windows.h"
#include "job/jobfile.h"
#include "model/model.h"
#include "model/weights.h"
#include "output/calibration.h"
#include "output/kinds.h"
#include "output/output.h"
#include "output/ownership.h"
#include "output/sparse.h"
#include "output/writer.h"
#include "plugin/plugin_loader.h"
#include "ranks/layout.h"
#include "ranks/node_arena.h"
#include "ranks/pipeline.h"
#include "ranks/tally.h"
#include "ranks/work_queue.h"
#include "run/feeder.h"
#include "run/job_settings.h"
#include "run/multivector_tokens.h"
#include "run/path_choice.h"
#include "tokenizer/tokenizer.h"

#include <mpi.h>
#include <stdint.h>
#include <sys/stat.h>

/* A file the job reads, and its state when the job began reading it. */
typedef struct tfenc_watched_file {
    char *what; /* "the corpus ([job] input)" */
    char *path;
    struct stat state;
} tfenc_watched_file;

/* Read once: what the driver asked and what the job file says. Written by
 * tfenc_run_job (request) and read_job (the rest, job_reading.c); read-only
 * after but for the [model] fields and the checksums noted. */
typedef struct tfenc_run_settings {
    const tfenc_run_request *request; /* tfenc_run_job: the driver's request */
    tfenc_jobfile *job_file;          /* read_job: the job file, overrides applied */
    tfenc_job_settings job;           /* read_job: its [job] keys */
    tfenc_model_config model;         /* read_job: its [model] keys; precision as this CPU
                                       * runs it (read_job), fp32_products (choose_paths) */
    tfenc_model_plan steps;           /* read_job: the layer sections, each a step, with
                                       * their weights_files attached */
    tfenc_plugin_registry *registry;  /* read_job: the plugin files the job names */
    char weights_sha256[65];          /* read_job, rank 0: of the weights file as the job
                                       * opened it (a dry run: gate_precision, when it
                                       * takes a file's calibration) */
    /* read_job allocates, rank 0 fills it; every rank once open_output has
     * broadcast it: the SHA-256 of each step's weights_file, "" for a step
     * without one, every head's steps numbered as
     * tfenc_model_plan_every_step() numbers them. */
    char (*weights_file_sha256)[65];
} tfenc_run_settings;

/* Computed once, before the first window, by the setup steps (every rank
 * agrees on each); read-only while encoding. */
typedef struct tfenc_run_computed_plan {
    tfenc_layout layout;     /* read_job places the rank; run_job_steps splits the steps
                              * into stages by cost_steps' costs */
    MPI_Comm replica_comm;   /* join_communicators: the replica's stages; MPI_COMM_NULL
                              * with one stage */
    MPI_Comm writers_comm;   /* join_communicators: every last stage; MPI_COMM_NULL on
                              * the others */
    tfenc_weight_store *weights; /* read_job opens; the gate calibrates; share_weights
                                  * moves it to the node's arena */
    tfenc_node_arena *arena; /* share_weights: the node's one copy of the weights; NULL:
                              * not shared */
    tfenc_tokenizer *tokenizer; /* open_tokenizer: the first stages' */
    tfenc_multivector_tokens multivector; /* find_multivector_tokens: marker, mask and
                                           * skiplist ids */
    tfenc_feeder_options feeding; /* open_input: how the first stage feeds */
    tfenc_windows windows;   /* cut_windows: the corpus cut into windows; count_rows their
                              * rows; learn_progress what is finished */
    tfenc_kept_field kept_fields[TFENC_MAX_KEEP_FIELDS]; /* cut_windows: [job] keep_fields
                                                          * as the output stores them */
    int64_t n_documents;     /* cut_windows: the whole corpus */
    int64_t n_tokens;        /* count_rows: what the job encodes, every chunk of a long
                              * document included */
    int64_t n_sequences;     /* count_rows: the sequences encoded (documents, or chunks) */
    int64_t n_rows;          /* count_rows: output rows of a per-token or every-chunk output */
    tfenc_path_choices paths; /* choose_paths: the ways of computing auto chose, for the file */
    tfenc_precision *step_precision; /* gate_precision, int8: the calibration's precision
                                      * per step */
    double sample_cosine;    /* gate_precision, int8: the gate's min cosine to fp32 on its
                              * sample */
    tfenc_int8_calibration calibration; /* gate_precision, int8: what the int8 model is made
                                         * with, for the file */
    float *ranges;           /* quantization_ranges, output_dtype int8 / uint8: [2, d]
                              * min, max */
    char ranges_source[512]; /* quantization_ranges: where the ranges came from, for the file */
    int64_t *sample_indices; /* quantization_ranges, calibrated: the sample's documents */
    int n_sample;
    tfenc_model *model;      /* whole_model (one stage) or stage_model: this rank's steps */
    int model_unit_rows;     /* whole_model or cost_steps: the model's last rows have unit
                              * length (its probe) */
    const tfenc_output_kind_entry *kind; /* decide_output_kind: what the job writes
                                          * (output/kinds.h) */
    int kind_width;          /* decide_output_kind: a head's width (scores, sparse columns,
                              * vectors), else 0 */
    char *labels;            /* decide_output_kind, scores: the head's id2label (JSON), or NULL */
    double *step_flops;      /* cost_steps: [n_steps] FLOPs per token at the corpus's mean
                              * length */
    double *step_seconds;    /* time_steps, --dry-run, rank 0: [n_steps] measured seconds
                              * per token */
    char *step_notes;        /* time_steps, --dry-run, rank 0: [n_steps] notes
                              * (run/step_timing.h) */
    int64_t timed_tokens;    /* time_steps: the sample they were measured on */
    int busiest_node[3];     /* find_busiest_node, --dry-run: ranks, threads, cores of the
                              * most oversubscribed node */
    int64_t already_done;    /* learn_progress: documents an earlier run finished */
    int64_t *todo;           /* learn_progress: the windows this run encodes, in order */
    int64_t n_todo, todo_documents;
    int64_t *runs;           /* learn_progress: [n_runs + 1] first todo index of each run
                              * of windows, then n_todo */
    int64_t n_runs;
} tfenc_run_computed_plan;

/* What changes while the job encodes, window by window: the open corpus,
 * file and communication, the cursors and tallies, the sparse buffers, and
 * the watched inputs checked at the end. */
typedef struct tfenc_run_state {
    tfenc_corpus *corpus;    /* open_input, first stages: read window by window */
    tfenc_feeder *feeder;    /* open_input, first stages: cuts the windows into microbatches */
    tfenc_output_lock *lock; /* open_output, rank 0: this job owns the output */
    tfenc_output *output;    /* open_output, last stages: created or reopened; the end
                              * closes it */
    tfenc_writer *writer;    /* open_output, last stages: writes each microbatch's rows */
    tfenc_work_queue *queue; /* learn_progress: hands out runs of windows */
    int64_t run_next, run_end; /* next_microbatch: the todo indices left of the run in hand */
    tfenc_tally *tally;      /* encode: the writers' finished documents and tokens, for
                              * rank 0 */
    tfenc_pipeline *pipeline; /* encode: the microbatches in flight between stages */
    tfenc_sparse_rows *sparse_rows; /* open_output, sparse, last stage: the microbatch's rows */
    tfenc_sparse_log *sparse_log;   /* open_output, sparse, last stage: this writer's log */
    struct tfenc_heads *heads; /* open_output, last stage: the heads after the first
                                * (model.h, run/heads.h), or NULL */
    uint8_t *sparse_logged;  /* open_output, sparse, resumed: the documents with a sound
                              * logged row */
    int sparse_csr_whole;    /* open_output, sparse, resumed: the file holds its whole CSR
                              * already */
    tfenc_watched_file *watched; /* read_job, rank 0: every file a path key names, as it
                                  * was; checked by open_output and at the end */
    int n_watched;
} tfenc_run_state;

/* Everything a run holds, released in one place (release_run). */
typedef struct tfenc_run {
    tfenc_context *ctx;
    int rank, n_ranks;         /* in MPI_COMM_WORLD */
    tfenc_run_result *result;  /* the driver's; the steps set its outcome */
    tfenc_run_settings settings;
    tfenc_run_computed_plan plan;
    tfenc_run_state state;
} tfenc_run;

/* Rank 0: a line for the driver's notice observer. */
void tfenc_run_notice(tfenc_run *r, const char *format, ...) TFENC_PRINTF(2, 3);

/* The lowest rank that failed reports; every rank learns whether any did:
 * 1 when one did (the run is refused), else 0. Collective. */
int tfenc_run_agree_on_failure(tfenc_run *r, int status);

/* A failure in the middle of encoding, which only the driver can end:
 * returns 1. */
int tfenc_run_broken(tfenc_run *r);

/* The options that build the model's steps [first_step, end_step). */
tfenc_model_options tfenc_run_model_options(tfenc_run *r, int first_step, int end_step);

/* MiB of weights this rank's node holds once for its ranks. */
double tfenc_run_shared_mib(const tfenc_run *r);

#endif
