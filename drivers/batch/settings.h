/* tfenc-batch's reading of the job: the [job] section and the tokenizer
 * ([tokenizer], or the vocabulary tfenc-import stored with the weights). */
#ifndef TFENC_BATCH_SETTINGS_H
#define TFENC_BATCH_SETTINGS_H

#include "corpus.h"
#include "jobfile.h"
#include "model.h"
#include "output.h"
#include "tokenizer.h"

/* The [job] section (docs/job-file.md). */
typedef struct job_settings {
    char *input;  /* resolved against the job file's directory */
    char *output;
    tfenc_corpus_options corpus;
    const char *output_kind_name; /* auto, pooled or tokens */
    tfenc_output_dtype dtype;
    tfenc_output_compression compression;
    long batch_tokens;
    long max_seq_len;
    int truncation;
    int invalid_utf8_error;
    long pipeline_stages;
    long threads;
    double progress_interval;
    int resume;
} job_settings;

int settings_read(tfenc_context *ctx, const tfenc_jobfile *job, const tfenc_model_config *config,
                  job_settings *settings);
void settings_free(job_settings *settings);

/* Makes the job's tokenizer; *tokenizer stays NULL for token-id corpora. */
int settings_tokenizer(tfenc_context *ctx, const tfenc_jobfile *job,
                       const tfenc_model_config *config, const job_settings *settings,
                       tfenc_tokenizer **tokenizer);

/* The job's settings that shape the result, one "section.key = value" line
 * each, in file order with --set overrides applied: what a resumed run must
 * share with the run that began the file. Leaves out where and how the job
 * runs: pipeline_stages, threads, progress_interval, resume, output.
 * NULL when out of memory; free() it. */
char *settings_identity(const tfenc_jobfile *job);

/* The job file's text followed by the --set overrides, as the output's
 * provenance. NULL when out of memory; free() it. */
char *settings_provenance(const tfenc_jobfile *job, const char *const *overrides, int n_overrides);

#endif
