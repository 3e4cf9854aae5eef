/* Asking an output file what it is (tfenc-batch --status): whether the job
 * finished, how many documents are done, which model and settings wrote it,
 * and, when unfinished, the command that resumes it.
 *
 * The file is only read: it is opened read-only with HDF5's file locking
 * off, so a job that is writing it right now (which holds HDF5's exclusive
 * lock when it writes alone) is neither blocked nor disturbed. A running
 * job flushes the file's structure and attributes when it creates it and
 * writes each document's length after its rows (core/output/output.h), so the
 * count of finished documents read while it runs is a safe lower bound.
 * HDF5's SWMR mode is not used: a job writing an uncompressed output
 * changes no metadata between creation and its last flush (chunks are
 * allocated at creation, rows and lengths are raw data), which is what
 * makes a plain read-only open consistent (a gzip output allocates chunks
 * as it goes, so while its job runs the count may lag, or the read fail
 * with HDF5's reason);
 * SWMR would also need the 1.10 file format, which older h5py and h5dump
 * builds cannot read, and HDF5 1.10 offers it to one writer only. A read
 * at the very moment a job finishes may still say unfinished.
 *
 * Files of older tfenc versions lack some attributes: each missing one is
 * left NULL (or -1) and named in `unknown`, so the caller can say what the
 * file cannot tell. Nothing here prints. */
#ifndef TFENC_INSPECT_H
#define TFENC_INSPECT_H

#include <stdint.h>
#include "tfenc/plugin.h"
#include "output/corpus_shards.h"

/* A dataset of the file and its shape. */
#define TFENC_INSPECT_MAX_RANK 4
typedef struct tfenc_inspected_dataset {
    char *name;
    int rank;                             /* dimensions; 0 for a scalar */
    int64_t shape[TFENC_INSPECT_MAX_RANK]; /* the first `rank` (larger ranks are cut) */
} tfenc_inspected_dataset;

/* A kept field ([job] keep_fields, output/output.h): its dataset's
 * name (its mask is NAME_valid), "string", "integer" or "float" as the
 * dataset holds, and a string's stored bytes (0 otherwise). */
typedef struct tfenc_inspected_kept {
    char *name;
    const char *type;
    int64_t bytes;
} tfenc_inspected_kept;

/* A further head's output (group /outputs/NAME, output.h): its
 * attributes and its rows dataset's shape. */
typedef struct tfenc_inspected_head {
    char *name;
    char *output_kind;
    char *dtype;
    char *id2label;
    int64_t d_model;   /* -1 unknown */
    int unit_norm;     /* -1 unknown */
    int64_t rows;      /* rows of its rows dataset (sparse: documents of its CSR, -1
                        * until the job completes) */
    int64_t sparse_values; /* sparse: the CSR's entries, -1 until the job completes */
} tfenc_inspected_head;

typedef struct tfenc_inspection {
    char *path;              /* as given */
    int complete;            /* the `complete` attribute is 1 */
    int64_t n_documents;     /* rows the job must write (attribute n_documents) */
    /* Documents whose length is stored, i.e. finished; -1 when the file
     * cannot tell (a tfenc before resuming existed wrote lengths without the
     * -1 "not written" fill, so an unfinished file's lengths mean nothing). */
    int64_t n_finished;
    int64_t n_truncated;     /* finished documents cut by max_seq_len; -1 unknown */
    int64_t n_tokens;        /* tokens kind: rows of `hidden`; -1 for pooled or unknown */
    int64_t d_model;         /* -1 unknown */
    /* Attributes as stored; NULL when the file has none (older tfenc). */
    char *tfenc_version;
    char *created;           /* ISO-8601 UTC, when the file was first created */
    char *output_kind;       /* pooled, tokens, scores, sparse or vectors */
    char *id2label;          /* scores: the head's label names (JSON); NULL otherwise */
    /* sparse: the CSR's entries (-1 until the job completes and writes
     * them, output/sparse.h), its sparse_top_k and sparse_threshold, and
     * whether the file names the columns (vocabulary) */
    int64_t sparse_values;
    int64_t sparse_top_k;
    double sparse_threshold;
    int has_vocabulary;
    char *multivector_mode;  /* vectors: document or query; NULL otherwise */
    char *multivector_marker;   /* vectors: the marker token, "" for none */
    char *multivector_skiplist; /* vectors: the ids left out, space-separated, "" for none */
    char *multivector_query_padding; /* vectors: "attended" or "masked" for queries, "" for
                                      * documents; NULL in files written before it */
    char *multivector_first_token; /* vectors: "skipped" or "kept"; NULL in files written
                                    * before it (kept) */
    int unit_norm;           /* attribute unit_norm: 1 every row has unit L2 norm, 0 not,
                              * -1 not recorded (older tfenc) */
    char *dtype;             /* float32, float16, bfloat16, or compact: int8, uint8,
                              * binary, ubinary (output/quantize.h) */
    char *quantization_source; /* int8 / uint8: where the ranges came from (attribute
                                * quantization_ranges_source); else NULL */
    char *compression;       /* none or gzip */
    char *weights_sha256;    /* the model: SHA-256 of its weights file */
    char *layout;            /* of the last run: "ranks=R data_parallel=D pipeline_stages=S" */
    char *job_settings;      /* the settings that shape the result, one "section.key = value" per line */
    char *job_text;          /* the job file's text and the --set overrides */
    char *job_path;          /* absolute path of the job file of the last run */
    char *working_directory; /* where the last run ran (relative plugin paths) */
    char *job_overrides;     /* its --set overrides, one per line ("" for none) */
    /* The matrix precision (fp32, bf16, ...): the `precision` attribute;
     * for older files, [model] precision from job_settings or its default,
     * with precision_recorded = 0. NULL when job_settings is missing too. */
    char *precision;
    int precision_recorded;
    /* int8: what the accuracy gate measured and chose (the attributes
     * precision_sample_min_cosine and precision_steps, "step precision"
     * per line); NAN and NULL where the file does not record them. */
    double precision_sample_min_cosine;
    char *precision_steps;
    /* What ran the last run's products (attribute kernels), or NULL. */
    char *kernels;
    /* The path choices of the file (attribute path_choices), or NULL. */
    char *path_choices;
    /* Each run's summary (attribute run_summaries: a JSON array, one
     * object per run that reached its end, output/output.h), or NULL for
     * files written before it was recorded. */
    char *run_summaries;
    /* The root's datasets, in the order HDF5 lists them (by name), each
     * with its shape; for the --status --json report. */
    tfenc_inspected_dataset *datasets;
    int n_datasets;
    /* The kept fields, in the job's order (attribute keep_fields); none
     * without them. */
    tfenc_inspected_kept *kept;
    int n_kept;
    /* A job of several heads: the first head's name (attribute `head`: its
     * rows are the root's), or NULL; and the further heads, in the order
     * HDF5 lists /outputs (by name). */
    char *head;
    tfenc_inspected_head *heads;
    int n_heads;
    /* The corpus's files (output/corpus_shards.h: the dataset, or an older
     * file's attribute); none (n = 0) for files written before it was
     * recorded. */
    tfenc_corpus_shards corpus_shards;
    int has_document_source; /* each row's file and line (dataset document_source) */
    /* 1 when a job is writing the file now: it holds the output's lock
     * file (ownership.h, taken at any rank count), or, for files written
     * alone, HDF5's own lock on the file. */
    int in_use;
    /* Unfinished files that record their last run: the shell command that
     * resumes them, run from anywhere (it changes to the working directory
     * first; several ranks run under mpirun -n R). NULL otherwise. */
    char *resume_command;
    /* Comma-separated names of the attributes this file lacks (older tfenc
     * versions), or "" when it has them all. */
    char unknown[256];
} tfenc_inspection;

/* Reads `path` into *inspection (each head of /outputs checked: its
 * attributes there, and its rows dataset of one row per document and
 * d_model columns; TFENC_ERR_CONFIG naming the head otherwise) (zeroed first; release it with
 * tfenc_inspection_free whatever this returns). Errors, one line each:
 * TFENC_ERR_IO when the file is missing, unreadable or not HDF5;
 * TFENC_ERR_CONFIG when it is HDF5 but not a tfenc output (naming what it
 * lacks). */
int tfenc_inspect_output(tfenc_context *ctx, const char *path, tfenc_inspection *inspection);

void tfenc_inspection_free(tfenc_inspection *inspection);

#endif
