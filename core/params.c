/* The tfenc_param_* getters of the plugin SDK: strict parsing of one job
 * section's values, with every read key marked as known. */
#include "params.h"
#include "context.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void tfenc_params_bind(tfenc_params *params, tfenc_context *ctx, const tfenc_jobfile *job,
                       tfenc_job_section *section)
{
    params->ctx = ctx;
    params->job = job;
    params->section = section;
}

/* Finds `key` and marks it read; NULL when absent. */
static tfenc_job_entry *lookup(tfenc_params *params, const char *key)
{
    tfenc_job_entry *entry = tfenc_job_section_get(params->section, key);
    if (entry != NULL)
        entry->used = 1;
    return entry;
}

/* "job.ini:12: [encoder.ffn] activation = 'foo': " or "--set encoder.ffn.activation=foo: " */
static int bad_value(tfenc_params *params, const tfenc_job_entry *entry, const char *expected)
{
    const char *section = params->section->name;
    if (entry->line > 0)
        return tfenc_error(params->ctx, TFENC_ERR_CONFIG, "%s:%d: [%s] %s = '%s': expected %s",
                           params->job->path, entry->line, section, entry->key, entry->value,
                           expected);
    return tfenc_error(params->ctx, TFENC_ERR_CONFIG, "%s: --set %s.%s=%s: expected %s",
                       params->job->path, section, entry->key, entry->value, expected);
}

int tfenc_param_int(tfenc_params *params, const char *key, long default_value, long *value)
{
    tfenc_job_entry *entry = lookup(params, key);
    *value = default_value;
    if (entry == NULL)
        return TFENC_OK;
    char *end = NULL;
    errno = 0;
    long parsed = strtol(entry->value, &end, 10);
    if (end == entry->value || *end != '\0' || errno == ERANGE)
        return bad_value(params, entry, "an integer");
    *value = parsed;
    return TFENC_OK;
}

int tfenc_param_float(tfenc_params *params, const char *key, double default_value, double *value)
{
    tfenc_job_entry *entry = lookup(params, key);
    *value = default_value;
    if (entry == NULL)
        return TFENC_OK;
    char *end = NULL;
    errno = 0;
    double parsed = strtod(entry->value, &end);
    if (end == entry->value || *end != '\0' || errno == ERANGE || !isfinite(parsed))
        return bad_value(params, entry, "a finite number");
    *value = parsed;
    return TFENC_OK;
}

int tfenc_param_bool(tfenc_params *params, const char *key, int default_value, int *value)
{
    static const char *const truths[] = {"true", "yes", "on", "1"};
    static const char *const falsehoods[] = {"false", "no", "off", "0"};
    tfenc_job_entry *entry = lookup(params, key);
    *value = default_value;
    if (entry == NULL)
        return TFENC_OK;
    for (size_t i = 0; i < sizeof truths / sizeof *truths; i++) {
        if (strcasecmp(entry->value, truths[i]) == 0) {
            *value = 1;
            return TFENC_OK;
        }
        if (strcasecmp(entry->value, falsehoods[i]) == 0) {
            *value = 0;
            return TFENC_OK;
        }
    }
    return bad_value(params, entry, "true or false");
}

int tfenc_param_string(tfenc_params *params, const char *key, const char *default_value,
                       const char **value)
{
    tfenc_job_entry *entry = lookup(params, key);
    *value = entry != NULL ? entry->value : default_value;
    return TFENC_OK;
}

int tfenc_param_choice(tfenc_params *params, const char *key, const char *const *choices,
                       int default_index, int *index)
{
    tfenc_job_entry *entry = lookup(params, key);
    *index = default_index;
    if (entry == NULL)
        return TFENC_OK;
    char expected[512] = "one of";
    for (int i = 0; choices[i] != NULL; i++) {
        if (strcmp(entry->value, choices[i]) == 0) {
            *index = i;
            return TFENC_OK;
        }
        size_t used = strlen(expected);
        snprintf(expected + used, sizeof expected - used, "%s %s", i > 0 ? "," : "", choices[i]);
    }
    return bad_value(params, entry, expected);
}

int tfenc_params_check_all_used(tfenc_params *params, const char *what)
{
    const tfenc_job_section *section = params->section;
    if (section == NULL)
        return TFENC_OK;
    for (int i = 0; i < section->n_entries; i++) {
        const tfenc_job_entry *entry = &section->entries[i];
        if (entry->used)
            continue;
        if (entry->line > 0)
            return tfenc_error(params->ctx, TFENC_ERR_CONFIG, "%s:%d: [%s] unknown key '%s' (%s)",
                               params->job->path, entry->line, section->name, entry->key, what);
        return tfenc_error(params->ctx, TFENC_ERR_CONFIG, "%s: --set %s.%s: unknown key (%s)",
                           params->job->path, section->name, entry->key, what);
    }
    return TFENC_OK;
}
