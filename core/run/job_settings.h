/* The [job] section of a job file (docs/job-file.md): what to encode, where
 * to write it and how the run is shaped, read once and checked key by key;
 * and the job's tokenizer ([tokenizer], or the one tfenc-import stored with
 * the weights). */
#ifndef TFENC_JOB_SETTINGS_H
#define TFENC_JOB_SETTINGS_H

#include "input/corpus.h"
#include "input/sources.h"
#include "job/jobfile.h"
#include "model/model.h"
#include "output/output.h"
#include "tokenizer/tokenizer.h"

typedef struct tfenc_job_settings {
    char *input;  /* resolved against the job file's directory (a list file without its "@") */
    tfenc_sources sources; /* the files input names, sorted (input/sources.h) */
    char *output;
    char *vocabulary; /* [tokenizer] vocab or json, resolved; NULL when the weights hold it */
    tfenc_corpus_options corpus;
    char **keep_fields;    /* [corpus.n_keep_fields] [job] keep_fields, which corpus points to */
    tfenc_output_kind output_kind; /* TFENC_OUTPUT_AUTO: what the model gives */
    tfenc_output_dtype dtype;
    char *output_ranges;   /* int8 / uint8: given ranges, a file (.npy or .h5) resolved,
                            * or two JSON lists; NULL: calibrated on a sample of the corpus */
    int output_ranges_inline; /* output_ranges holds the JSON text, not a path */
    tfenc_output_compression compression;
    long batch_tokens;
    long max_seq_len;
    long window_documents; /* documents per window of work (windows.h) */
    char *prompt;          /* text put before every document, or NULL ([job] prompt) */
    long output_dim;       /* pooled rows cut to this width and renormalised; 0 keeps d_model */
    tfenc_output_chunks chunks; /* long_documents = chunk: with chunk_pooling mean or none,
                                 * or chunk_scores mean, max, first or all */
    const char *chunk_key; /* "chunk_scores" or "chunk_pooling" when the job sets it, else
                            * NULL: the kind refuses the one that is not its own */
    long chunk_overlap;    /* tokens shared by consecutive chunks */
    int late_chunk;        /* long_documents = late_chunk (run/late_chunks.h) */
    long chunk_tokens;     /* late chunking: pieces of a span */
    int chunk_sentences;   /* late chunking: chunk_spans = sentences (run/late_chunks.h) */
    int truncation;
    int empty_zeros;       /* empty_documents = zeros: a document without tokens
                            * is a sequence of none (static models pool it to zeros) */
    int document_order;    /* batch_order = document: microbatches in the window's order,
                            * not sorted by length */
    int invalid_utf8_error;
    long pipeline_stages;
    long threads;
    double progress_interval;
    int resume;
    int share_weights;     /* the ranks of a node map one copy of the weights */
    int output_ids;        /* per-token output: write each row's token id too */
    long sparse_top_k;     /* sparse output: keep a row's k largest values; 0 keeps all */
    double sparse_threshold; /* sparse output: keep values above it */
    /* Multi-vector models (a `multivector` head, docs/output.md): */
    int multivector_query; /* multivector_mode = query: encode queries, else documents */
    char *query_marker;    /* the token put after [CLS] of a query ([unused0]), or NULL */
    char *document_marker; /* ... of a document ([unused1]), or NULL */
    long query_length;     /* a query's tokens, [MASK]-padded: max_seq_len in query mode */
    int skip_punctuation;  /* documents write no vector for string.punctuation's tokens */
    int skip_first_token;  /* no vector for each sequence's first token (BGE-M3's [:, 1:]) */
    int attend_to_mask_tokens; /* a query's [MASK] tokens are keys of attention too */
    const char *multivector_key; /* the first of the keys above the job sets, or NULL:
                                  * they apply to a model ending in a multivector head */
} tfenc_job_settings;

/* The names of multivector_mode's values, by multivector_query. */
extern const char *const tfenc_multivector_mode_names[];

int tfenc_job_settings_read(tfenc_context *ctx, const tfenc_jobfile *job,
                            const tfenc_model_config *config, tfenc_job_settings *settings);
void tfenc_job_settings_free(tfenc_job_settings *settings);

/* Refuses [job] KEY as the readers above do, "FILE:LINE: [job] KEY:
 * MESSAGE" (or without the line for a --set), for the rules that need the
 * model first (run.c). Returns TFENC_ERR_CONFIG. */
int tfenc_job_settings_key_error(tfenc_context *ctx, const tfenc_jobfile *job, const char *key,
                                 const char *message);

/* Only [job] output, resolved against the job file's directory (free()
 * it): for tools that ask about a job's output without running it. */
int tfenc_job_settings_output_path(tfenc_context *ctx, const tfenc_jobfile *job, char **path);

/* Makes the job's tokenizer; *tokenizer stays NULL for token-id corpora. */
int tfenc_job_settings_tokenizer(tfenc_context *ctx, const tfenc_jobfile *job,
                                 const tfenc_model_config *config,
                                 const tfenc_job_settings *settings, tfenc_tokenizer **tokenizer);

/* The job's settings that shape the result, one "section.key = value" line
 * each, in file order with --set overrides applied, then the values in
 * effect of the keys whose defaults shape it: what a resumed run must share
 * with the run that began the file. Leaves out where and how the job runs:
 * pipeline_stages, threads, progress_interval, resume, output.
 * NULL when out of memory; free() it. */
char *tfenc_job_settings_identity(const tfenc_jobfile *job, const tfenc_job_settings *settings);

/* The job file's text followed by the --set overrides, as the output's
 * provenance. NULL when out of memory; free() it. */
char *tfenc_job_settings_provenance(const tfenc_jobfile *job, const char *const *overrides,
                                    int n_overrides);

#endif
