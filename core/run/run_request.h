/* What a driver asks of a run (run/run.h) and what it gets back: the
 * request with its observer, what the observer is told (the progress, the
 * plan of a dry run), and the result. Apart from run.h so that the files
 * of the run (run/run_parts.h) share the types without including the
 * header of run.c, which includes theirs. */
#ifndef TFENC_RUN_REQUEST_H
#define TFENC_RUN_REQUEST_H

#include <signal.h>
#include <stdint.h>

#include "ranks/layout.h"
#include "model/model.h"
#include "output/output.h"
#include "run/run_report.h"

/* Progress of the encoding, as rank 0 sees it: finished documents are
 * those whose rows and metadata every replica's writer has flushed into the
 * file (what --status counts as finished), never more. */
typedef struct tfenc_run_progress {
    int64_t documents_done;   /* finished in the file, an earlier run's included */
    int64_t documents_total;  /* the corpus's */
    int64_t documents_before; /* of those, finished by an earlier run (resume) */
    int64_t tokens_done;      /* tokens of the documents this run finished */
    double elapsed_seconds;   /* of this run's encoding */
    int final;                /* the last report of the run: every writer is done */
    int files_read;           /* a corpus of several files: those whose documents have all */
    int files_total;          /* been read by the first stages (0 of 0 for one file) */
} tfenc_run_progress;

/* What a dry run found: everything the driver prints as the plan. */
typedef struct tfenc_run_plan {
    const char *job_path;
    const tfenc_layout *layout;
    const tfenc_model_plan *model;
    const double *step_flops;     /* [model->n_steps] FLOPs per token */
    const double *step_seconds;   /* [model->n_steps] wall seconds per token, each step timed
                                   * on timed_tokens sampled from the corpus; NULL when no
                                   * document was there to time */
    int64_t timed_tokens;
    const char *step_notes;       /* [model->n_steps] notes of TFENC_STEP_NOTE_BYTES each: what a
                                   * step's layer counted over the timed sample (tokens per
                                   * expert), "" for none; NULL with step_seconds */
    int d_model;
    const char *kernels;          /* what runs the products (tfenc_matrix_describe_kernels) */
    const char *paths;            /* the path choices, one line (run/path_choice.h) */
    const char *weights_path;
    const char *input_path;
    const char *output_path;
    /* A job of several heads: the first head's name (its output is the one
     * described), and the further heads' (groups /outputs/NAME); NULL and 0
     * otherwise. */
    const char *first_head;
    const char *const *extra_heads;
    int n_extra_heads;
    const tfenc_output_kind_entry *kind; /* what the job writes (output/kinds.h) */
    int width;                     /* the values of a row (the file's d_model) */
    int unit_norm;                 /* the rows will have unit L2 norm (attribute unit_norm) */
    const char *labels;            /* scores: its id2label (JSON), or NULL */
    long sparse_top_k;             /* sparse: [job] sparse_top_k (0: every value) */
    double sparse_threshold;       /* sparse: [job] sparse_threshold */
    int64_t n_rows;                /* per-token kinds: the rows (a skiplist's tokens left out) */
    tfenc_output_dtype dtype;
    int64_t n_documents;
    int64_t n_tokens;              /* what the job encodes: each document after truncation,
                                    * or with long_documents = chunk every chunk of a long one
                                    * (its overlap and special tokens included) */
    int64_t n_sequences;           /* the sequences they make: documents, or chunks */
    int chunked;                   /* long_documents = chunk or late_chunk */
    int late_chunked;              /* long_documents = late_chunk: sequences are whole
                                    * documents, or windows of spans past max_seq_len */
    const char *input_format;      /* "text", "jsonl", "hdf5", "parquet" */
    char input_description[256];   /* what the format's reader reads, from the formats'
                                    * table ("JSON Lines: the text in field 'text'") */
    const char *text_field;        /* pairs: the fields (Parquet: columns) of their */
    const char *text_pair_field;   /* two texts; NULL for single texts */
    int n_sources;                 /* the corpus's files (input/sources.h) */
    const char *const *source_paths;        /* [n_sources] in order */
    const int64_t *source_documents;        /* [n_sources] */
    const int64_t *source_skipped;          /* [n_sources] null texts left out */
    const char *const *source_compressions; /* [n_sources] "none", "gzip", "zstd", "xz";
                                             * NULL when rank 0 reads no corpus */
    double last_flop_rate;         /* per rank, from the last job here; 0 if none */
    double weights_float32_mib;    /* every dataset of the weights file as float32 */
    int node_ranks;                /* ranks on rank 0's node, which share one copy */
    double shared_weights_mib;     /* that copy, in the form the layers run it (0: the
                                    * model is not built in this dry run, or one rank) */
    double rank_memory_mib;        /* rank 0's proportional set size with its model built
                                    * (0: not built) */
    int weights_per_rank;          /* 1: every rank keeps its own copy ([job] share_weights =
                                    * false, or the node could not make the window) */
    int busiest_node_ranks;        /* the node whose ranks' threads most exceed the cores */
    int busiest_node_threads;      /* they may run on: its ranks, their threads in all, */
    int busiest_node_cores;        /* and those cores (the union of their affinities) */
} tfenc_run_plan;

/* Callbacks through which a run tells its driver what happens. Each may be
 * NULL. They are called on rank 0 only, from the calling thread. */
typedef struct tfenc_run_observer {
    void *user;
    /* An informational line: resuming, a layout warning. */
    void (*notice)(void *user, const char *line);
    /* At most every progress_interval seconds while encoding, and once at
     * the end (final = 1). */
    void (*progress)(void *user, const tfenc_run_progress *progress);
    /* The dry run's result. */
    void (*plan)(void *user, const tfenc_run_plan *plan);
    /* The finished job's figures. */
    void (*summary)(void *user, const tfenc_run_summary *summary);
} tfenc_run_observer;

typedef struct tfenc_run_request {
    const char *job_path;
    const char *const *overrides; /* "section.key=value" (--set), applied in order */
    int n_overrides;
    int dry_run;                  /* plan and count, encode nothing */
    /* Nonzero (set by a signal handler) asks the run to stop after the
     * microbatch in hand, keeping every finished row. May be NULL. */
    const volatile sig_atomic_t *stop;
    tfenc_run_observer observer;
} tfenc_run_request;

typedef enum tfenc_run_outcome {
    TFENC_RUN_FINISHED, /* the output is complete */
    TFENC_RUN_PLANNED,  /* the dry run is done */
    TFENC_RUN_STOPPED,  /* stopped on request: finished rows are kept, run again to resume */
    TFENC_RUN_REFUSED,  /* failed where every rank knows it: each returns this */
    TFENC_RUN_BROKEN    /* failed on this rank while others may be waiting on it: the
                         * driver must end the whole job (MPI_Abort) */
} tfenc_run_outcome;

typedef struct tfenc_run_result {
    tfenc_run_outcome outcome;
    /* REFUSED and BROKEN: this rank holds the message (the context's) to
     * print; exactly one rank does for REFUSED. */
    int report;
    /* A failed write left HDF5 unable to shut down: leave without
     * MPI_Finalize (and without closing the output again). */
    int skip_finalize;
    /* STOPPED: documents finished in the file, of how many, and where. */
    int64_t documents_finished;
    int64_t n_documents;
    char output_path[4096];
} tfenc_run_result;

#endif
