/* What an output kind is, as one entry of the kinds' table (output/kinds.h
 * holds the table, the decision and the lookups). This header holds only
 * the entry's type, so that output.h can carry a kind in its options
 * without including the table, whose writer hooks call output.c: the table
 * depends on the file, never the other way round.
 *
 * Everything that differs between kinds is a field here; the code around
 * asks the entry (its rows dataset, whether documents own runs of rows,
 * which [job] keys apply) and never compares the kind itself. */
#ifndef TFENC_OUTPUT_KIND_H
#define TFENC_OUTPUT_KIND_H

#include <stddef.h>

#include "output/output_types.h"
#include "tfenc/plugin.h"

/* How many rows a document owns. */
typedef enum tfenc_output_rows {
    TFENC_ROWS_PER_DOCUMENT, /* one row (per chunk with long_documents = chunk, each) */
    TFENC_ROWS_PER_TOKEN,    /* a run of rows, one per (kept) token, found through offsets */
    TFENC_ROWS_SPARSE        /* one CSR row over the vocabulary, written when the job completes */
} tfenc_output_rows;

/* A condition under which a kind refuses a job: the [job] keys set, the
 * dtype, the model's rows, against what the kind writes. */
typedef enum tfenc_output_kind_condition {
    TFENC_REFUSE_SPARSE_KEYS,       /* sparse_top_k or sparse_threshold set */
    TFENC_REFUSE_TOP_K_PAST_WIDTH,  /* sparse_top_k larger than the head's columns */
    TFENC_REFUSE_MULTIVECTOR_KEYS,  /* a multi-vector key set (named at its line) */
    TFENC_REFUSE_DTYPE_NOT_FLOAT32, /* output_dtype other than float32 */
    TFENC_REFUSE_DTYPE_COMPACT,     /* a compact output_dtype (int8, ..., ubinary) */
    TFENC_REFUSE_POOLED_ROWS,       /* the model leaves one row per sequence */
    TFENC_REFUSE_TOKEN_ROWS,        /* the model leaves one row per token */
    TFENC_REFUSE_OTHER_KIND,        /* output_kind names another kind */
    TFENC_REFUSE_CHUNKS,            /* long_documents = chunk */
    TFENC_REFUSE_CHUNK_KEY,         /* the rule's key (chunk_pooling, chunk_scores) set */
    TFENC_REFUSE_LATE_CHUNK,        /* long_documents = late_chunk */
    TFENC_REFUSE_OUTPUT_DIM,        /* output_dim set */
    TFENC_REFUSE_OUTPUT_IDS,        /* output_ids set */
    TFENC_REFUSE_END
} tfenc_output_kind_condition;

/* One refusal, in the order the kind checks them: the status, the [job]
 * key the message is given at (its line in the job file; NULL: the job
 * file's path leads the message) and the message, a format whose one
 * argument is the condition's (the key, the dtype, the kind wanted; the
 * top_k and width for TOP_K_PAST_WIDTH). `head` marks the refusals that
 * the model's last layer alone decides, checked before the corpus is read. */
typedef struct tfenc_output_kind_rule {
    tfenc_output_kind_condition condition;
    int status;
    const char *key;
    const char *message;
    int head;
} tfenc_output_kind_rule;

/* A string root attribute the kind adds to the file, with where its value
 * is among tfenc_output_options (offsetof a `const char *` member; NULL
 * stores ""). */
typedef struct tfenc_output_kind_attribute {
    const char *name;
    size_t option;
} tfenc_output_kind_attribute;

struct tfenc_output_kind_write;
struct tfenc_output_summary;

typedef struct tfenc_output_kind_entry {
    tfenc_output_kind id;
    const char *name;                  /* output_kind in the job file and the file */
    tfenc_layer_output_kind layer;     /* the last layer's declared output it takes */
    int pools;                         /* the model's rows: one per sequence (1) or per token */
    tfenc_output_rows rows;            /* rows per document */
    const char *rows_dataset;          /* "embeddings", "hidden", ...; NULL: the rows are
                                        * the CSR (sparse.h), created when the job completes */
    const char *offsets_dataset;       /* per-token kinds: "offsets"; else NULL */
    /* The dataset whose presence tells the kind of a file older than the
     * output_kind attribute. */
    const char *telling_dataset;
    const char *model_says;            /* "pools its output", ...: the model, as errors say it */
    /* The [job] choices it takes: compact dtypes (int8 ... ubinary, as
     * encodings of pooled rows), long_documents = chunk (pooled vectors'
     * chunk_pooling, or a scores head's chunk_scores), output_dim,
     * output_ids (a token id beside each per-token row). */
    int compact_dtypes, chunks, output_dim, token_ids;
    int dense;                         /* rows of at most 65,536 values (not the vocabulary's) */
    int unit_rows;                     /* its rows may be vectors of unit length */
    int token_rows;                    /* a document's rows are its tokens, every one (its
                                        * length tells where its rows end) */
    int head_width;                    /* the width is the head's (the layer's declared width),
                                        * not the model's */
    int projects_vocabulary;           /* the head maps each sequence onto the vocabulary */
    int has_labels;                    /* it keeps the head's id2label (attribute id2label) */
    int gated_by_scores;               /* the accuracy gate compares its scores, not cosines */
    const tfenc_output_kind_rule *refusals;       /* ending in TFENC_REFUSE_END */
    const tfenc_output_kind_attribute *attributes; /* ending in a NULL name */
    /* The writer hook: a finished microbatch's rows to the file. */
    int (*write)(tfenc_context *ctx, const struct tfenc_output_kind_write *call);
    /* What follows "output: " on tfenc-batch --dry-run's plan and on
     * --status, as a string the caller frees (NULL: out of memory). */
    char *(*describe_plan)(const struct tfenc_output_summary *summary);
    char *(*describe_status)(const struct tfenc_output_summary *summary);
} tfenc_output_kind_entry;

#endif
