/* The datasets of a tfenc output file, described once: one entry per
 * dataset (output_description.c's table) giving when a file has it, its
 * element type, its shape, its fill, where the handle keeps it open, and
 * the rule its contents keep. Three readers walk the same table, so that
 * what a run writes, what a resume accepts and what --status checks cannot
 * drift apart:
 *   - tfenc_output_create makes the datasets a job writes as it goes
 *     (output_layout.c), presence decided from the job's options;
 *   - tfenc_output_reopen holds an existing file to them before it appends
 *     (output_layout.c);
 *   - the checks (output_checks.h) hold every file, and each further head's
 *     group /outputs/NAME, to the whole table, presence decided from the
 *     file's attributes, and its contents to each entry's rule.
 * What differs between output kinds is asked of the kind's entry
 * (output_kind.h): the table never names a kind. The root attributes'
 * domains are output_attribute_checks.c's; a kept field's two datasets
 * ([job] keep_fields) are output_layout.c's, as they vary with the job. */
#ifndef TFENC_OUTPUT_DESCRIPTION_H
#define TFENC_OUTPUT_DESCRIPTION_H

#include <stddef.h>
#include <stdint.h>

#include "output/output_kind.h"
#include "output/output_types.h"

/* Every dataset, indexed into the table, in the order create makes them and
 * the checks check their shapes (the contents go document by document: a
 * document's own entries, then its runs' bounds, then the runs). */
typedef enum tfenc_output_dataset_id {
    TFENC_DATASET_ROWS,            /* the kind's rows dataset: embeddings, hidden, ... */
    TFENC_DATASET_ROW_RUNS,        /* where each document's rows are: offsets, chunk_offsets */
    TFENC_DATASET_CHUNK_STARTS,
    TFENC_DATASET_TOKEN_IDS,
    TFENC_DATASET_CHUNKS,
    TFENC_DATASET_LENGTHS,
    TFENC_DATASET_TRUNCATED,
    TFENC_DATASET_IDS,
    TFENC_DATASET_DOCUMENT_SOURCE,
    TFENC_DATASET_SPARSE_INDPTR,
    TFENC_DATASET_SPARSE_VALUES,
    TFENC_DATASET_SPARSE_INDICES,
    TFENC_DATASET_VOCABULARY,
    TFENC_DATASET_QUANTIZATION_RANGES,
    TFENC_DATASET_QUANTIZATION_SAMPLE,
    TFENC_DATASET_COUNT
} tfenc_output_dataset_id;

/* When a file has the dataset. */
typedef enum tfenc_output_presence_rule {
    TFENC_WHEN_ROWS,         /* the kind writes rows as it goes (its rows_dataset) */
    TFENC_WHEN_ROW_RUNS,     /* documents own runs of rows: per-token kinds, chunks = each */
    TFENC_WHEN_CHUNK_EACH,   /* a row per chunk */
    TFENC_WHEN_TOKEN_IDS,    /* a per-token kind with [job] output_ids */
    TFENC_WHEN_CHUNKS,       /* chunks = mean or each */
    TFENC_WHEN_ALWAYS,
    TFENC_WHEN_IDS,          /* the corpus has ids */
    TFENC_WHEN_SOURCE,       /* the job records document_source */
    TFENC_WHEN_COMPLETE_CSR, /* the sparse rows: written when the job completes, all at once */
    TFENC_WHEN_VOCABULARY,   /* the sparse rows' columns named, when the job has a vocabulary */
    TFENC_WHEN_RANGES,       /* dtype int8 or uint8 */
    TFENC_WHEN_CALIBRATED    /* dtype int8 or uint8 whose ranges came from the corpus (a file
                              * does not say which: optional) */
} tfenc_output_presence_rule;

/* Who writes it. */
typedef enum tfenc_output_maker {
    TFENC_MADE_BY_LAYOUT,     /* created with the file, kept open in the handle (output_layout.c) */
    TFENC_MADE_AT_CREATION,   /* written whole when the file is created (output_attributes.c) */
    TFENC_MADE_AT_COMPLETION  /* written when the job completes (sparse.c) */
} tfenc_output_maker;

typedef enum tfenc_output_element {
    TFENC_ELEMENT_ROW,    /* the dtype's: floating-point, or integer for the compact dtypes */
    TFENC_ELEMENT_INT32,
    TFENC_ELEMENT_INT64,
    TFENC_ELEMENT_FLOAT32,
    TFENC_ELEMENT_STRING, /* fixed-length strings (ids: as long as the longest id) */
    TFENC_ELEMENT_SOURCE  /* document_source's compound {shard, line} */
} tfenc_output_element;

/* A dimension, as a job's options or a file's attributes give it. */
typedef enum tfenc_output_dimension {
    TFENC_DIM_NONE,       /* (rank 1: no second dimension) */
    TFENC_DIM_ANY,        /* any length */
    TFENC_DIM_DOCUMENTS,  /* n_documents */
    TFENC_DIM_BOUNDARIES, /* n_documents + 1 */
    TFENC_DIM_ROWS,       /* the kind's rows: n_tokens (per token), n_chunks (chunks = each),
                           * else n_documents */
    TFENC_DIM_WIDTH,      /* a stored row's values: d_model, or d_model / 8 packed signs */
    TFENC_DIM_D_MODEL,    /* d_model (the ranges' width, a sparse output's vocabulary) */
    TFENC_DIM_ENTRIES,    /* a sparse output's entries: the rows of sparse_values */
    TFENC_DIM_TWO         /* 2: minimum and maximum */
} tfenc_output_dimension;

/* Which of a dataset's elements belong to document i. */
typedef enum tfenc_output_indexing {
    TFENC_UNREAD,      /* rows and strings: only the shape is checked */
    TFENC_BY_DOCUMENT, /* element i */
    TFENC_BY_BOUNDARY, /* elements i and i + 1 bound the document's run of rows or entries */
    TFENC_BY_RUN,      /* the document's run, as the entry named in `bounds` gives it */
    TFENC_WHOLE        /* a small dataset held to its rule as a whole */
} tfenc_output_indexing;

typedef enum tfenc_output_content_rule {
    TFENC_RULE_NONE,
    TFENC_RULE_LENGTH,          /* -1 (not written yet) or a token count >= 1; 0 too where the
                                 * job encodes documents without tokens (empty_zeros) */
    TFENC_RULE_NOT_NEGATIVE,    /* >= 0 */
    TFENC_RULE_POSITIVE,        /* >= 1 */
    TFENC_RULE_BOUNDARIES,      /* from 0, never decreasing, ends at `ends_at`; runs agree */
    TFENC_RULE_SOURCE,          /* a file of corpus_shards whose rows hold the document */
    TFENC_RULE_COLUMN,          /* a column of the vocabulary (0..d_model-1), ascending in a row */
    TFENC_RULE_ABOVE_THRESHOLD, /* finite and above sparse_threshold */
    TFENC_RULE_RANGES,          /* finite, each dimension's minimum <= maximum */
    TFENC_RULE_DOCUMENT_INDEX   /* a document: 0..n_documents-1 */
} tfenc_output_content_rule;

/* What a document's run (TFENC_RULE_BOUNDARIES) must agree with. */
typedef enum tfenc_output_run_agreement {
    TFENC_RUN_ANY,
    TFENC_RUN_IS_LENGTH,      /* a row per token: the kind's token_rows */
    TFENC_RUN_AT_MOST_LENGTH, /* a row per token kept (skiplist tokens left out) */
    TFENC_RUN_IS_CHUNKS,      /* a row per chunk: the document's entry of `chunks` */
    TFENC_RUN_AT_MOST_TOP_K,  /* CSR entries: at most sparse_top_k (when set) and the columns */
    TFENC_RUN_OF_THE_ROWS     /* the row runs': per token (as the kind says), or per chunk */
} tfenc_output_run_agreement;

typedef struct tfenc_output_dataset {
    const char *name;            /* NULL, or the row runs' of a kind without offsets_dataset:
                                  * the kind's (tfenc_output_dataset_name) */
    tfenc_output_presence_rule presence;
    int older_files_lack;        /* a file of an older tfenc may lack it: checked if present */
    int every_head;              /* each further head's group has it too, not only the root */
    tfenc_output_maker maker;
    tfenc_output_element element;
    tfenc_output_dimension dims[2];
    int fill_unwritten;          /* filled with -1, "not written yet" (lengths) */
    size_t handle;               /* TFENC_MADE_BY_LAYOUT: offsetof the tfenc_output member */
    tfenc_output_indexing indexing;
    tfenc_output_content_rule rule;
    tfenc_output_dimension ends_at;  /* TFENC_RULE_BOUNDARIES: the last element's value */
    tfenc_output_run_agreement run;  /* TFENC_RULE_BOUNDARIES */
    tfenc_output_dataset_id bounds;  /* TFENC_BY_RUN: the BY_BOUNDARY entry of its runs */
} tfenc_output_dataset;

extern const tfenc_output_dataset tfenc_output_datasets[TFENC_DATASET_COUNT];

/* What decides which datasets a file (or a head's group) has and their
 * dimensions: from the job's options when a file is created or reopened,
 * from its attributes when it is checked. Unknown numbers are -1. */
typedef struct tfenc_output_facts {
    const tfenc_output_kind_entry *kind;
    tfenc_output_chunks chunks;
    tfenc_output_dtype dtype;
    int further_head;  /* a group /outputs/NAME: only the every_head datasets */
    /* 1: a job's options, which say whether ids, document_source and
     * token ids are written, and that the file is current; 0: a file, where
     * they may be either and an older tfenc may have left some out. */
    int job_known;
    int ids, document_source, token_ids; /* job_known: [job] says they are written */
    int csr_due;                         /* a file: complete, or its CSR written */
    int64_t n_documents, rows, width, d_model, entries;
} tfenc_output_facts;

typedef enum tfenc_output_presence {
    TFENC_ABSENT,   /* not the file's: a job refuses to append to it, the checks pass it by */
    TFENC_OPTIONAL, /* checked when present */
    TFENC_REQUIRED
} tfenc_output_presence;

tfenc_output_presence tfenc_output_dataset_presence(tfenc_output_dataset_id id,
                                                    const tfenc_output_facts *facts);

/* Its name in this file (NULL where the kind has none: a sparse kind's
 * rows are the CSR). */
const char *tfenc_output_dataset_name(tfenc_output_dataset_id id,
                                      const tfenc_output_facts *facts);

/* A dimension's value, -1 when the facts do not know it. */
int64_t tfenc_output_dimension_value(const tfenc_output_facts *facts,
                                     tfenc_output_dimension dimension);

/* The rank the entry has: 2 with a second dimension, else 1. */
int tfenc_output_dataset_rank(tfenc_output_dataset_id id);

/* What a document's run of a TFENC_RULE_BOUNDARIES entry agrees with in
 * this file (TFENC_RUN_OF_THE_ROWS resolved through the kind). */
tfenc_output_run_agreement tfenc_output_run_agreement_of(tfenc_output_dataset_id id,
                                                         const tfenc_output_facts *facts);

#endif
