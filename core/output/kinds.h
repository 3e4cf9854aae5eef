/* The output kinds as components: one table (kinds.c), one entry per kind
 * (pooled, tokens, scores, sparse, vectors; the compact dtypes are
 * encodings of pooled rows, which only its entry takes), each giving the
 * layer output it accepts, its datasets, its rows per document, the [job]
 * keys it refuses, its attributes, its writer hook and the lines that
 * describe it (output_kind.h). The decision below takes the model's
 * declared output and the [job] keys; run.c, the writer, output.c, the
 * description of the file (output_description.c) and its checks,
 * tfenc-batch's plan and --status ask the entry.
 *
 * Adding a kind is one entry here (with its layer plugin declaring the
 * layer output it takes), a value in tfenc_output_kind and, for datasets
 * beyond the entry's rows and offsets, their entries in the description,
 * output_description.c's table, which create, resume and --status all walk
 * (docs/architecture.md). */
#ifndef TFENC_OUTPUT_KINDS_H
#define TFENC_OUTPUT_KINDS_H

#include <stdint.h>

#include "output/output.h"
#include "output/output_kind.h"
#include "ranks/pipeline.h"

/* Every kind, indexed by tfenc_output_kind (AUTO excluded). */
extern const tfenc_output_kind_entry tfenc_output_kinds[TFENC_OUTPUT_AUTO];

/* The names of the kinds, indexed by value, then "auto", NULL-terminated:
 * the job file's output_kind choices. */
extern const char *const tfenc_output_kind_names[];

/* Name -> value: TFENC_ERR_NOT_FOUND for an unknown name (and for "auto",
 * which no file has). */
int tfenc_output_kind_from_name(const char *name, tfenc_output_kind *kind);
const char *tfenc_output_kind_name(tfenc_output_kind kind);

/* The entry of a kind (NULL for AUTO or a value out of range), and of a
 * name (NULL when no kind has it). */
const tfenc_output_kind_entry *tfenc_output_kind_entry_of(tfenc_output_kind kind);
const tfenc_output_kind_entry *tfenc_output_kind_named(const char *name);

/* The entry the model's output makes: its last layer's declared output,
 * and for plain rows whether the model pools them (NULL for a layer
 * output no kind takes). */
const tfenc_output_kind_entry *tfenc_output_kind_of_layer(tfenc_layer_output_kind declared,
                                                          int pools);

/* The kind of a file that has no output_kind attribute (an older tfenc),
 * from the dataset only that kind has: `exists` answers whether the file
 * has a dataset of that name. Pooled when none is found. */
const tfenc_output_kind_entry *tfenc_output_kind_from_datasets(int (*exists)(void *user,
                                                                              const char *name),
                                                                void *user);

/* What decides a job's kind: the model's last layer and the [job] keys. */
typedef struct tfenc_output_kind_request {
    tfenc_output_kind wanted;         /* [job] output_kind (AUTO: whatever the model writes) */
    tfenc_layer_output_kind declared; /* what the last layer declares */
    int width;                        /* its declared width (scores, sparse, vectors) */
    int pools;                        /* the model leaves one row per sequence */
    tfenc_output_dtype dtype;
    tfenc_output_chunks chunks;
    const char *chunk_key;            /* chunk_pooling or chunk_scores when set, else NULL */
    int late_chunk;                   /* long_documents = late_chunk */
    long output_dim;
    int output_ids;
    const char *multivector_key;      /* the first multi-vector key the job sets, or NULL */
    long sparse_top_k;
    double sparse_threshold;
} tfenc_output_kind_request;

/* Why a job cannot have its kind: raise it with tfenc_job_settings_key_error
 * at `key` when key is not NULL, else as "JOB: MESSAGE" with `status`. */
typedef struct tfenc_output_kind_refusal {
    int status;
    const char *key;
    char message[384];
} tfenc_output_kind_refusal;

/* The kind the job writes: TFENC_OK with *kind, or the first refusal of
 * the kind the model's output makes (its entry's order) in *refusal. */
int tfenc_output_kind_decide(const tfenc_output_kind_request *request,
                             const tfenc_output_kind_entry **kind,
                             tfenc_output_kind_refusal *refusal);

/* Before the corpus is read: the refusals the last layer's declared output
 * alone decides (the dtype and multi-vector keys), whatever it pools. */
int tfenc_output_kind_refuse_for_head(const tfenc_output_kind_request *request,
                                      tfenc_output_kind_refusal *refusal);

/* A writer hook's call: the microbatch's rows to `output`. width: the
 * values each row keeps (the kind's width; pooled: the row width after
 * output_dim). The sparse and multi-vector state belongs to the writer. */
typedef struct tfenc_output_kind_write {
    tfenc_output *output;
    const tfenc_microbatch *microbatch;
    int width;
    const struct tfenc_sparse_rows *sparse_rows; /* sparse: the microbatch's rows */
    struct tfenc_sparse_log *sparse_log;         /* sparse: this writer's log */
    const struct tfenc_skiplist *skiplist;       /* vectors: the tokens left out */
    int32_t **kept_ids, **kept_counts;           /* vectors: buffers the hook grows */
    size_t *kept_ids_capacity, *kept_counts_capacity;
} tfenc_output_kind_write;

/* What the describe hooks say, from the plan (tfenc-batch --dry-run) or
 * from a file's attributes (--status); unknown numbers are -1, unknown
 * strings NULL. */
typedef struct tfenc_output_summary {
    const char *path;
    const char *dtype;
    int64_t n_documents;
    int64_t n_rows;           /* per-token kinds: rows of the rows dataset */
    int64_t width;            /* the attribute d_model */
    int compact;              /* a compact dtype */
    int unit_norm;            /* plan: the rows have unit length */
    const char *labels;       /* scores: id2label */
    long sparse_top_k;
    double sparse_threshold;
    int64_t sparse_values;    /* --status: entries of the CSR, -1 until complete */
    int has_vocabulary;
    const char *multivector_mode, *multivector_marker, *multivector_skiplist;
    const char *multivector_query_padding;
    const char *multivector_first_token; /* "skipped", "kept", or NULL (before it existed) */
} tfenc_output_summary;

#endif
