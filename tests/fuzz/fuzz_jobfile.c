/* libFuzzer target: arbitrary text as a job file, validated the way
 * tfenc-batch validates a job before it loads any plugin: INI parsing,
 * --set overrides, the [model] configuration, the typed getters over [job]
 * and [tokenizer], and the layer composition plan. Every integer key is
 * read with its range, and a value accepted must lie inside it. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/context.h"
#include "job/jobfile.h"
#include "model/model.h"
#include "job/params.h"

/* A broken invariant is a finding: say which, then stop the fuzzer with a
 * stack trace and the input saved. */
#define require(condition) ((condition) ? (void)0 : broken(__LINE__, #condition))

static void broken(int line, const char *condition)
{
    fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, line, condition);
    abort();
}

/* An integer key read with its range: a value the getter accepts must lie
 * in the range, whatever the text (no wrap, no overflow). */
static int read_int_range(tfenc_params *params, const char *key, long minimum, long maximum)
{
    long value = minimum;
    int status = tfenc_param_int_range(params, key, minimum, minimum, maximum, &value);
    require(status != TFENC_OK || (value >= minimum && value <= maximum));
    return status;
}

/* The [job] keys with the getter type tfenc-batch reads them with (the
 * driver's own checks on the values are not library code). */
static int read_job_section(tfenc_context *ctx, const tfenc_jobfile *job)
{
    static const char *const kinds[] = {"auto", "pooled", "tokens", NULL};
    static const char *const dtypes[] = {"float32", "float16", "bfloat16", NULL};
    static const char *const formats[] = {"auto", "text", "jsonl", "hdf5", NULL};
    static const char *const strings[] = {"input", "text_field", "id_field", "tokens_dataset",
                                          "offsets_dataset", "ids_dataset", "lengths_dataset",
                                          "output"};
    tfenc_params params;
    tfenc_params_bind(&params, ctx, job, tfenc_jobfile_find(job, "job"));
    const char *text;
    double real;
    int index, flag;
    int status = TFENC_OK;
    for (size_t i = 0; status == TFENC_OK && i < sizeof strings / sizeof *strings; i++)
        status = tfenc_param_string(&params, strings[i], NULL, &text);
    if (status == TFENC_OK)
        status = tfenc_param_choice(&params, "input_format", formats, 0, &index);
    if (status == TFENC_OK)
        status = tfenc_param_choice(&params, "output_kind", kinds, 0, &index);
    if (status == TFENC_OK)
        status = tfenc_param_choice(&params, "output_dtype", dtypes, 0, &index);
    /* The integer keys with core/run/job_settings.c's ranges. */
    if (status == TFENC_OK)
        status = read_int_range(&params, "batch_tokens", 1, 1L << 24);
    if (status == TFENC_OK)
        status = read_int_range(&params, "max_seq_len", 2, 1L << 24);
    if (status == TFENC_OK)
        status = read_int_range(&params, "window_documents", 1, 1L << 20);
    if (status == TFENC_OK)
        status = read_int_range(&params, "max_id_bytes", 1, 1L << 20);
    if (status == TFENC_OK)
        status = read_int_range(&params, "chunk_overlap", 0, 1L << 24);
    if (status == TFENC_OK)
        status = read_int_range(&params, "output_dim", 0, 65536);
    if (status == TFENC_OK)
        status = read_int_range(&params, "pipeline_stages", 1, INT_MAX);
    if (status == TFENC_OK)
        status = read_int_range(&params, "threads", 0, 4096);
    if (status == TFENC_OK)
        status = tfenc_param_bool(&params, "truncation", 1, &flag);
    if (status == TFENC_OK)
        status = tfenc_param_float(&params, "progress_interval", 10.0, &real);
    if (status == TFENC_OK)
        status = tfenc_params_check_all_used(&params, "not a [job] key");
    return status;
}

/* Everything a step's sections hold must be readable through the getters
 * a plugin would use, whatever the values. */
static int read_step_keys(tfenc_context *ctx, const tfenc_jobfile *job, tfenc_job_section *section)
{
    static const char *const choices[] = {"relu", "gelu", NULL};
    tfenc_params params;
    tfenc_params_bind(&params, ctx, job, section);
    long number;
    double real;
    int index, flag;
    const char *text;
    int status = tfenc_param_string(&params, "type", NULL, &text);
    if (status == TFENC_OK)
        status = read_int_range(&params, "n_heads", 1, 65536);
    if (status == TFENC_OK)
        status = read_int_range(&params, "rope_dims", 0, 65536);
    if (status == TFENC_OK)
        status = tfenc_param_int(&params, "position_offset", 0, &number);
    if (status == TFENC_OK)
        status = tfenc_param_float(&params, "eps", 1e-5, &real);
    if (status == TFENC_OK)
        status = tfenc_param_bool(&params, "bias", 1, &flag);
    if (status == TFENC_OK)
        status = tfenc_param_choice(&params, "activation", choices, 0, &index);
    if (status == TFENC_OK)
        status = tfenc_params_check_all_used(&params, "fuzzed layer");
    return status;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A job file cannot hold a NUL byte, so NULs separate the job text from
     * --set assignments: "TEXT\0section.key=value\0...". */
    char *text = malloc(size + 1);
    require(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';

    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_jobfile *job = NULL;
    int status = tfenc_jobfile_parse_string(&ctx, "fuzz/job.ini", text, &job);
    for (size_t at = strlen(text) + 1; status == TFENC_OK && at <= size; at += strlen(text + at) + 1)
        status = tfenc_jobfile_override(&ctx, job, text + at);

    tfenc_model_config config;
    memset(&config, 0, sizeof config);
    tfenc_model_plan plan;
    memset(&plan, 0, sizeof plan);
    if (status == TFENC_OK)
        status = tfenc_model_config_read(&ctx, job, &config);
    if (status == TFENC_OK)
        status = read_job_section(&ctx, job);
    if (status == TFENC_OK)
        status = tfenc_model_plan_read(&ctx, job, &plan);
    if (status == TFENC_OK) {
        require(plan.n_steps > 0);
        for (int i = 0; i < plan.n_steps && status == TFENC_OK; i++) {
            const tfenc_step_plan *step = &plan.steps[i];
            require(step->name != NULL && step->group != NULL && step->section != NULL);
            require((step->norm_section == NULL) == (step->norm_group == NULL));
            require(step->in_block ? step->repeat_index >= 0
                                         && step->repeat_index < step->repeat_count
                                   : step->repeat_index == -1);
            /* Blocks repeat a section: read its keys once, at its first step. */
            if (step->repeat_index <= 0)
                status = read_step_keys(&ctx, job, step->section);
        }
    }
    if (status == TFENC_OK) {
        /* [model]'s integers, read with their ranges (core/model/model.c). */
        require(config.weights_path != NULL && config.d_model >= 1 && config.d_model <= 65536);
        require(config.vocab_size >= 0 && config.max_positions >= 1 &&
                config.max_positions <= (1 << 24));
        for (int i = 0; i < plan.n_steps; i++)
            require(plan.steps[i].repeat_count >= 0 && plan.steps[i].repeat_count <= 100000);
        char *resolved = tfenc_jobfile_resolve_path(job, "relative/path");
        require(resolved != NULL);
        free(resolved);
    } else {
        /* Every refusal says why, on one line. */
        const char *message = tfenc_context_message(&ctx);
        require(message[0] != '\0' && strchr(message, '\n') == NULL);
    }
    tfenc_model_plan_free(&plan);
    tfenc_model_config_free(&config);
    tfenc_jobfile_destroy(job);
    free(text);
    return 0;
}
