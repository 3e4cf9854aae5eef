/* Paths chosen by measurement (see run/path_choice.h). */
#include "run/path_choice.h"

#include "base/hdf5_attributes.h"
#include "base/files.h"
#include "matrix/matrix.h"
#include "model/weights.h"
#include "run/step_timing.h"

#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Timing rounds per candidate, alternating between them so that a slow
 * spell of a shared machine does not fall on one candidate only; each
 * round is already the faster of two passes (step_timing.c). */
#define ROUNDS 2

int tfenc_path_pick(const double *seconds, int n, int default_index, int pinned, double margin)
{
    if (pinned >= 0 && pinned < n)
        return pinned;
    if (default_index < 0 || default_index >= n || !(seconds[default_index] > 0))
        return default_index;
    int fastest = default_index;
    for (int i = 0; i < n; i++)
        if (seconds[i] > 0 && seconds[i] < seconds[fastest])
            fastest = i;
    return seconds[fastest] <= (1.0 - margin) * seconds[default_index] ? fastest : default_index;
}

int tfenc_path_pick_measured(const double *cpu_seconds, const double *wall_seconds, int n,
                             int default_index, int pinned, double margin)
{
    const int chosen = tfenc_path_pick(cpu_seconds, n, default_index, pinned, margin);
    if (chosen == default_index || chosen == pinned || default_index < 0 || default_index >= n)
        return chosen;
    return wall_seconds[chosen] > 0 && wall_seconds[chosen] < wall_seconds[default_index]
               ? chosen
               : default_index;
}

int tfenc_path_recorded(const char *recorded, const char *section, const char *key, char *value,
                        size_t size)
{
    const size_t section_length = strlen(section), key_length = strlen(key);
    for (const char *line = recorded; line != NULL && *line != '\0';) {
        const char *end = strchr(line, '\n');
        const size_t length = end != NULL ? (size_t)(end - line) : strlen(line);
        if (length > section_length + key_length + 1 &&
            strncmp(line, section, section_length) == 0 && line[section_length] == '.' &&
            strncmp(line + section_length + 1, key, key_length) == 0 &&
            line[section_length + 1 + key_length] == '=') {
            const char *start = line + section_length + key_length + 2;
            size_t n = length - section_length - key_length - 2;
            if (n >= size)
                n = size - 1;
            memcpy(value, start, n);
            value[n] = '\0';
            return 1;
        }
        line = end != NULL ? end + 1 : NULL;
    }
    return 0;
}

int tfenc_path_measuring(void)
{
    const char *paths = getenv("TFENC_PATHS");
    return paths == NULL || strcmp(paths, "default") != 0;
}

/* ------------------------------------------------------- the job's entries */

/* Sets section.key = value in the job, marked as a choice (jobfile.h). */
static int set_choice(tfenc_context *ctx, tfenc_jobfile *job, const char *section,
                      const char *key, const char *value)
{
    const tfenc_job_section *found = tfenc_jobfile_find(job, section);
    const tfenc_job_entry *before = found != NULL ? tfenc_job_section_get(found, key) : NULL;
    const int chosen = before == NULL               ? TFENC_JOB_ENTRY_CHOSEN_ADDED
                       : before->chosen != 0        ? before->chosen
                                                    : TFENC_JOB_ENTRY_CHOSEN_FOR_AUTO;
    char assignment[512];
    snprintf(assignment, sizeof assignment, "%s.%s=%s", section, key, value);
    int status = tfenc_jobfile_override(ctx, job, assignment);
    if (status != TFENC_OK)
        return status;
    tfenc_job_entry *entry = tfenc_job_section_get(tfenc_jobfile_find(job, section), key);
    entry->chosen = chosen;
    return TFENC_OK;
}

int tfenc_path_choices_apply(tfenc_context *ctx, tfenc_jobfile *job, const char *assignments)
{
    int status = TFENC_OK;
    for (const char *line = assignments; status == TFENC_OK && line != NULL && *line != '\0';) {
        const char *end = strchr(line, '\n');
        const size_t length = end != NULL ? (size_t)(end - line) : strlen(line);
        char assignment[512];
        snprintf(assignment, sizeof assignment, "%.*s", (int)length, line);
        char *equals = strchr(assignment, '='), *dot = NULL;
        for (char *p = assignment; equals != NULL && p < equals; p++)
            if (*p == '.')
                dot = p;
        if (equals == NULL || dot == NULL)
            return tfenc_error(ctx, TFENC_ERR_CONFIG,
                               "path choices: '%s' is not section.key=value", assignment);
        *dot = '\0';
        *equals = '\0';
        status = set_choice(ctx, job, assignment, dot + 1, equals + 1);
        line = end != NULL ? end + 1 : NULL;
    }
    return status;
}

/* ------------------------------------------------------------- the places */

/* A place with more than one way of computing: the key that pins it (in
 * `section`), its candidates, the one taken without measuring, and how to
 * time them. */
typedef struct place {
    const char *section, *key;
    const char *const *candidates; /* N_CANDIDATES names */
    int default_index;
    const char *default_why;        /* why the default is what it is, or NULL */
    /* The steps timed: a model of options with the candidate set. */
    int first_step, end_step;
    /* The candidates differ only in what runs fp32 linear maps and
     * products: steps that make none are not timed. */
    int products_only;
} place;

enum { N_CANDIDATES = 2 };

/* The attention's paths, as plugins/attention.c names them. */
static const char *const attention_kernels[N_CANDIDATES] = {"fused", "products"};
enum { FUSED, PRODUCTS };

/* The path `kernel = auto` takes without measuring, by plugins/attention.c's
 * rule: the fused kernel where it runs at the job's precision (fp32, or
 * bf16 operands on a CPU with AVX512_BF16 when head_dim is a multiple of
 * 32), else the products. */
static int attention_default(const tfenc_job_section *section, const tfenc_model_options *options)
{
    tfenc_precision runs = TFENC_PRECISION_FP32;
    char unused[256];
    tfenc_matrix_describe(options->config->precision, &runs, unused, sizeof unused);
    if (runs == TFENC_PRECISION_FP32)
        return FUSED;
    const tfenc_job_entry *heads = tfenc_job_section_get(section, "n_heads");
    const tfenc_job_entry *dim = tfenc_job_section_get(section, "head_dim");
    long head_dim = dim != NULL ? atol(dim->value) : 0;
    if (head_dim <= 0 && heads != NULL && atol(heads->value) > 0)
        head_dim = options->config->d_model / atol(heads->value);
    const int bf16_kernel = __builtin_cpu_supports("avx512f") &&
                            __builtin_cpu_supports("avx512bw") &&
                            __builtin_cpu_supports("avx512dq") &&
                            __builtin_cpu_supports("avx512vl") &&
                            __builtin_cpu_supports("avx512bf16");
    return bf16_kernel && head_dim > 0 && head_dim % 32 == 0 ? FUSED : PRODUCTS;
}

/* The place's steps with each candidate in turn, ROUNDS times; seconds[c]
 * and cpu[c] the least of candidate c's rounds, summed over the steps, per
 * sample token. The candidate is set in the job (a layer's key, which its
 * plugin reads) and, for [model] fp32_products, in a copy of the config.
 * *untimed: 1 when the place is products_only and its steps made no linear
 * map or product (a static model's lookup): timing stops after the first
 * run, which loaded the weights once rather than once a run. */
static int time_place(tfenc_context *ctx, tfenc_jobfile *job, const place *where,
                      const tfenc_model_options *options, const tfenc_gate_sample *sample,
                      double seconds[N_CANDIDATES], double cpu[N_CANDIDATES], int *untimed)
{
    *untimed = 0;
    const int n_steps = where->end_step - where->first_step;
    double *step_seconds = calloc((size_t)n_steps * 2, sizeof *step_seconds);
    if (step_seconds == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "path choices: out of memory");
    tfenc_model_config config = *options->config;
    tfenc_model_options one = *options;
    one.first_step = where->first_step;
    one.end_step = where->end_step;
    one.config = &config;
    int status = TFENC_OK;
    for (int c = 0; c < N_CANDIDATES; c++)
        seconds[c] = cpu[c] = INFINITY;
    for (int round = 0; status == TFENC_OK && round < ROUNDS && !*untimed; round++)
        for (int c = 0; status == TFENC_OK && c < N_CANDIDATES && !*untimed; c++) {
            status = set_choice(ctx, job, where->section, where->key, where->candidates[c]);
            config.fp32_products = tfenc_model_fp32_products(job);
            const long products = tfenc_weight_store_products(options->weights);
            if (status == TFENC_OK)
                status = tfenc_step_timing_measure_cpu(ctx, &one, sample, step_seconds,
                                                       step_seconds + n_steps);
            *untimed = status == TFENC_OK && where->products_only &&
                       tfenc_weight_store_products(options->weights) == products;
            double measured = 0, measured_cpu = 0;
            for (int i = 0; i < n_steps; i++) {
                measured += step_seconds[i];
                measured_cpu += step_seconds[n_steps + i];
            }
            if (status == TFENC_OK && measured < seconds[c])
                seconds[c] = measured;
            if (status == TFENC_OK && measured_cpu < cpu[c])
                cpu[c] = measured_cpu;
        }
    free(step_seconds);
    return status;
}

/* TFENC_PATH_FAVOUR names "section.key=value": that candidate's times are
 * divided by 1000 (path_choice.h). */
static void favour(const place *where, double seconds[N_CANDIDATES], double cpu[N_CANDIDATES])
{
    const char *favoured = getenv("TFENC_PATH_FAVOUR");
    char value[64];
    if (favoured == NULL ||
        !tfenc_path_recorded(favoured, where->section, where->key, value, sizeof value))
        return;
    for (int c = 0; c < N_CANDIDATES; c++)
        if (strcmp(value, where->candidates[c]) == 0) {
            seconds[c] /= 1000;
            cpu[c] /= 1000;
        }
}

static int candidate_index(const place *where, const char *name)
{
    for (int c = 0; c < N_CANDIDATES; c++)
        if (strcmp(name, where->candidates[c]) == 0)
            return c;
    return -1;
}

/* Appends to the choices' assignments and line. */
static int note_choice(tfenc_context *ctx, tfenc_path_choices *choices, const place *where,
                       const char *value, const char *why)
{
    const size_t old = choices->assignments != NULL ? strlen(choices->assignments) : 0;
    const size_t more = strlen(where->section) + strlen(where->key) + strlen(value) + 4;
    char *grown = realloc(choices->assignments, old + more);
    if (grown == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "path choices: out of memory");
    choices->assignments = grown;
    snprintf(grown + old, more, "%s.%s=%s\n", where->section, where->key, value);
    const size_t used = strlen(choices->line);
    snprintf(choices->line + used, sizeof choices->line - used, "%s%s.%s=%s (%s)",
             used > strlen("paths: ") ? "; " : "", where->section, where->key, value, why);
    return TFENC_OK;
}

/* One place: its key, else the record, else a measurement. */
static int choose(tfenc_context *ctx, tfenc_jobfile *job, const place *where,
                  const tfenc_model_options *options, const tfenc_gate_sample *sample,
                  const tfenc_path_record *record, tfenc_path_choices *choices)
{
    const char *section = where->section, *name = where->key;
    const tfenc_job_entry *entry =
        tfenc_job_section_get(tfenc_jobfile_find(job, section), name);
    const char *key = entry != NULL && entry->chosen == 0 ? entry->value : "auto";
    char recorded[64] = "";
    const int has_record = record->assignments != NULL &&
                           tfenc_path_recorded(record->assignments, section, name, recorded,
                                               sizeof recorded);
    if (has_record && candidate_index(where, recorded) < 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "%s: records %s.%s=%s, which is not a path of this tfenc "
                           "(%s or %s)", record->origin, section, name, recorded,
                           where->candidates[0], where->candidates[1]);
    if (strcmp(key, "auto") != 0) {
        if (has_record && strcmp(recorded, key) != 0)
            return tfenc_error(ctx, TFENC_ERR_CONFIG,
                               "[%s] %s = %s contradicts %s, which records %s.%s=%s "
                               "(its rows were computed that way): drop the key, or set it "
                               "to %s", section, name, key, record->origin, section, name,
                               recorded, recorded);
        return note_choice(ctx, choices, where, key, "the job's key");
    }
    char why[256];
    int chosen;
    if (has_record) {
        chosen = candidate_index(where, recorded);
        snprintf(why, sizeof why, "as recorded in %s", record->origin);
    } else if (record->origin != NULL || !tfenc_path_measuring() || sample == NULL ||
               sample->n_batches < 1) {
        chosen = where->default_index;
        snprintf(why, sizeof why, "the default: %s",
                 record->origin != NULL    ? "the file records no choice"
                 : !tfenc_path_measuring() ? "TFENC_PATHS=default"
                                           : "no sample to time");
    } else {
        double seconds[N_CANDIDATES], cpu[N_CANDIDATES];
        int untimed = 0;
        int status = time_place(ctx, job, where, options, sample, seconds, cpu, &untimed);
        if (status != TFENC_OK)
            return status;
        favour(where, seconds, cpu);
        chosen = untimed ? where->default_index
                         : tfenc_path_pick_measured(cpu, seconds, N_CANDIDATES,
                                                    where->default_index, -1, TFENC_PATH_MARGIN);
        if (untimed)
            snprintf(why, sizeof why, "the default: its steps make no fp32 linear map or "
                     "product to time");
        else
            snprintf(why, sizeof why,
                     "measured on %ld sample tokens: %s %.3g us CPU (%.3g wall), %s "
                     "%.3g us CPU (%.3g wall) per token; default %s%s, another path only when "
                     "%.0f%% less CPU and less wall time",
                     (long)sample->n_tokens, where->candidates[0], cpu[0] * 1e6, seconds[0] * 1e6,
                     where->candidates[1], cpu[1] * 1e6, seconds[1] * 1e6,
                     where->candidates[where->default_index],
                     where->default_why != NULL ? where->default_why : "",
                     TFENC_PATH_MARGIN * 100);
    }
    int status = set_choice(ctx, job, section, name, where->candidates[chosen]);
    if (status == TFENC_OK)
        status = note_choice(ctx, choices, where, where->candidates[chosen], why);
    return status;
}

/* One attention section, timed on its own step. */
static int choose_attention(tfenc_context *ctx, tfenc_jobfile *job, const tfenc_step_plan *step,
                            int step_index, const tfenc_model_options *options,
                            const tfenc_gate_sample *sample, const tfenc_path_record *record,
                            tfenc_path_choices *choices)
{
    const place where = {.section = step->section->name,
                         .key = "kernel",
                         .candidates = attention_kernels,
                         .default_index = attention_default(step->section, options),
                         .first_step = step_index,
                         .end_step = step_index + 1};
    return choose(ctx, job, &where, options, sample, record, choices);
}

/* [model] fp32_products, in an fp32 job: OpenBLAS or oneDNN, timed on the
 * first repeat of the first block (its steps hold the maps that most of
 * the job's products run through), or on every step of a model without
 * blocks. At other precisions the job's maps are not fp32 ones: auto keeps
 * OpenBLAS (for the int8 gate's fp32 reference pass), unmeasured and
 * unrecorded, as before there was a choice. */
static int choose_fp32_products(tfenc_context *ctx, tfenc_jobfile *job,
                                const tfenc_model_plan *plan,
                                const tfenc_model_options *options,
                                const tfenc_gate_sample *sample, const tfenc_path_record *record,
                                tfenc_path_choices *choices)
{
    if (options->config->precision != TFENC_PRECISION_FP32)
        return TFENC_OK;
    int first = 0, end = plan->n_steps;
    for (int i = 0; i < plan->n_steps; i++)
        if (plan->steps[i].in_block) {
            first = i;
            end = i + 1;
            while (end < plan->n_steps && plan->steps[end].in_block &&
                   plan->steps[end].repeat_index == plan->steps[i].repeat_index)
                end++;
            break;
        }
    const place where = {.section = "model",
                         .key = "fp32_products",
                         .candidates = tfenc_fp32_products_names,
                         .default_index = TFENC_FP32_PRODUCTS_OPENBLAS,
                         .default_why = " (the reference)",
                         .first_step = first,
                         .end_step = end,
                         .products_only = 1};
    return choose(ctx, job, &where, options, sample, record, choices);
}

int tfenc_path_choices_decide(tfenc_context *ctx, tfenc_jobfile *job, const tfenc_model_plan *plan,
                              const tfenc_model_options *options,
                              const tfenc_gate_sample *sample, const tfenc_path_record *record,
                              tfenc_path_choices *choices)
{
    memset(choices, 0, sizeof *choices);
    snprintf(choices->line, sizeof choices->line, "paths: ");
    int status = TFENC_OK;
    for (int i = 0; status == TFENC_OK && i < plan->n_steps; i++) {
        const tfenc_step_plan *step = &plan->steps[i];
        if (step->type == NULL || strcmp(step->type, "mha") != 0)
            continue;
        /* A block's repeats share their section: its first step decides. */
        int seen = 0;
        for (int j = 0; j < i; j++)
            seen |= plan->steps[j].section == step->section;
        if (!seen)
            status = choose_attention(ctx, job, step, i, options, sample, record, choices);
    }
    /* After the attention's choices, so that its steps time with them. */
    if (status == TFENC_OK)
        status = choose_fp32_products(ctx, job, plan, options, sample, record, choices);
    if (status == TFENC_OK && choices->assignments == NULL) {
        choices->assignments = calloc(1, 1);
        if (choices->assignments == NULL)
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "path choices: out of memory");
        snprintf(choices->line, sizeof choices->line, "paths: one way to compute each step");
    }
    if (status != TFENC_OK)
        tfenc_path_choices_free(choices);
    return status;
}

int tfenc_path_choices_read(tfenc_context *ctx, const char *what, const char *path,
                            char **assignments)
{
    *assignments = NULL;
    int status = tfenc_file_check_regular(ctx, what, path);
    if (status != TFENC_OK)
        return status;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s %s: cannot open it as HDF5", what, path);
    if (H5Aexists(file, "path_choices") > 0 &&
        (*assignments = tfenc_hdf5_attribute_string(file, "path_choices")) == NULL)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                             "%s %s: its attribute path_choices is not a string", what, path);
    H5Fclose(file);
    return status;
}

void tfenc_path_choices_free(tfenc_path_choices *choices)
{
    free(choices->assignments);
    choices->assignments = NULL;
}
