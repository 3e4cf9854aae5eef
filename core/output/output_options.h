/* What a job asks of its output file (output/output.h): its kind, shape,
 * dtype and the provenance stored beside the rows. A header of its own so
 * that the files of the writer below output.h (output_internal.h) can read
 * it. */
#ifndef TFENC_OUTPUT_OPTIONS_H
#define TFENC_OUTPUT_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "base/kept_values.h"
#include "output/calibration.h"
#include "output/corpus_shards.h"
#include "output/output_kind.h"
#include "output/output_types.h"

/* The root attribute that names a file's kept fields, one a line. */
#define TFENC_KEPT_FIELDS_ATTRIBUTE "keep_fields"

typedef struct tfenc_output_options {
    const char *path;
    const tfenc_output_kind_entry *kind; /* output/kinds.h's entry */
    tfenc_output_chunks chunks;  /* pooled only */
    tfenc_output_dtype dtype;
    tfenc_output_compression compression;
    /* 1 when every row the file holds has unit L2 norm, to the dtype's
     * rounding (the model normalises its rows, or output_dim scales them
     * back; never for compact codes, scores or sparse rows). Stored as the
     * attribute `unit_norm`, which a resume must find the same. */
    int unit_norm;
    /* 1 when chunk means are scaled back to unit length, which a tfenc
     * before `unit_norm` was recorded did not do: a file without the
     * attribute is then not resumed (its means are shorter). */
    int unit_chunk_means;
    /* The values of a row, stored as the attribute d_model: the model's
     * width (or output_dim) for pooled rows and hidden states, the head's
     * labels for scores, the vocabulary for sparse rows, the projection's
     * width for vectors. */
    int width;
    int64_t n_documents;
    /* Where documents own runs of rows, the rows of the rows dataset: T,
     * every (kept) token's, for the per-token kinds; C, every chunk's,
     * with TFENC_CHUNKS_EACH. Ignored otherwise (a row per document). */
    int64_t n_rows;
    int has_ids;             /* write an `ids` dataset */
    int has_token_ids;       /* tokens kind: write `token_ids` beside `hidden` */
    int has_document_source; /* write `document_source` */
    /* [job] keep_fields as stored, or NULL and 0: each a dataset NAME and
     * its mask NAME_valid (output.h). With them, the ids given to
     * tfenc_output_write_metadata are the texts each document carries
     * (base/kept_values.h): its id, then the fields' values. */
    const tfenc_kept_field *kept_fields;
    int n_kept_fields;
    size_t max_id_length;    /* this rank's longest id in bytes; the file uses the
                              * maximum over all writers */
    /* Provenance, stored as attributes; NULL stores "". In parallel every
     * writer MUST pass the same strings (attributes are collective). */
    const char *job_text;
    /* What makes two runs the same job for resuming: the job's settings
     * that shape the result (tfenc-batch leaves out the rank layout,
     * threads and progress keys). Stored as `job_settings`; a file whose
     * job_settings differ is never appended to. */
    const char *job_settings;
    const char *weights_sha256;
    /* The inputs' fingerprints (fingerprint.h): a resume is refused when
     * either changed, naming the file. vocabulary_* are NULL when the
     * weights hold the tokenizer. */
    const char *corpus_path;
    const char *corpus_fingerprint;
    const char *vocabulary_path;
    const char *vocabulary_fingerprint;
    /* The plugin files the job loaded and the SHA-256 of each, as for the
     * weights: stored as `plugins_sha256`, one "NAME SHA256" line per file
     * (NAME its file name, lines sorted); a resume whose plugin code
     * changed is refused naming the file. */
    const char *const *plugin_paths;
    const char *const *plugin_sha256;
    int n_plugins;
    /* The corpus's files in order (output/corpus_shards.h), which
     * document_source traces each row to. Stored as the dataset
     * `corpus_shards`, the first writer's (the others' may reach the files
     * through other directories); a resume is refused naming the first
     * file added, removed or changed, each file known by its name, size and
     * fingerprint wherever its directory is reached from. NULL stores none. */
    const tfenc_corpus_shards *corpus_shards;
    const char *layout;      /* e.g. "ranks=4 data_parallel=2 pipeline_stages=2" */
    /* How this run was started, so that tfenc-batch --status can print the
     * command that resumes an unfinished file (core/output/inspect.h): the job file
     * as given (stored absolute, with the working directory), the --set
     * overrides (stored one per line) and the matrix precision. NULL (or no
     * overrides) stores "". Rewritten by every run, like layout. */
    const char *job_path;
    const char *const *overrides;
    int n_overrides;
    const char *precision;
    /* What ran the products (tfenc_matrix_describe_kernels): libraries,
     * versions, kernel families; a file's bits follow them. */
    const char *kernels;
    /* The path choices ("section.key=value" lines), or NULL; a file's bits
     * follow them as they follow the kernels. */
    const char *path_choices;
    /* int8: what the accuracy gate measured and chose (a calibration taken
     * from a file: what that file's gate did): the min cosine to fp32 on
     * its sample, and each step's precision ("encoder.0.attention
     * bf16\n..."). precision_steps NULL (other precisions, which are not
     * gated) stores 1.0 and "". */
    double sample_min_cosine;
    const char *precision_steps;
    /* int8: the calibration the rows were encoded with, stored as the group
     * int8_calibration (output/calibration.h); NULL at other precisions. A
     * resume must run the precision the file was begun at and, at int8,
     * the calibration it records (its digest): refused otherwise. */
    const tfenc_int8_calibration *calibration;
    /* int8 / uint8 dtypes: [2, d] per-dimension minimum then maximum, the
     * same on every writer, and a line saying where they came from. A
     * resumed file keeps the ranges it was begun with. */
    const float *ranges;
    const char *ranges_source;
    /* Calibrated ranges: the global indices of the documents they came
     * from (stored as quantization_sample), else NULL and 0. */
    const int64_t *sample_indices;
    int n_sample;
    /* Scores kind: the head's id2label (JSON object text) stored as the
     * attribute id2label; NULL stores "". */
    const char *labels;
    /* Vectors kind: stored as the attributes multivector_mode ("document" or
     * "query"), multivector_marker (the marker token, "" for none),
     * multivector_skiplist (the token ids left out, space-separated) and
     * multivector_query_padding (a query's [MASK] padding: "attended" or
     * "masked", keys of attention or not; "" for documents) and
     * multivector_first_token ("kept", or "skipped": [job] skip_first_token,
     * BGE-M3's vectors); NULL stores "". */
    const char *multivector_mode;
    const char *multivector_marker;
    const char *multivector_skiplist;
    const char *multivector_query_padding;
    const char *multivector_first_token;
} tfenc_output_options;

#endif
