/* The tfenc_param_* getters of the plugin SDK: strict parsing of one job
 * section's values, with every read key marked as known. */
#include "job/params.h"
#include "base/context.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <limits.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void tfenc_params_bind(tfenc_params *params, tfenc_context *ctx, const tfenc_jobfile *job,
                       tfenc_job_section *section)
{
    memset(params, 0, sizeof *params);
    params->ctx = ctx;
    params->job = job;
    params->section = section;
}

const tfenc_param_info *tfenc_params_declared(const tfenc_layer_descriptor *descriptor)
{
    /* An ABI 1.0 descriptor may be shorter than the slot, or leave garbage
     * where 1.1 put it: only a 1.1 descriptor long enough has a table. */
    if (descriptor->abi_minor < 1 ||
        descriptor->struct_size < offsetof(tfenc_layer_descriptor, params) + sizeof(void *))
        return NULL;
    return descriptor->params;
}

void tfenc_params_bind_layer(tfenc_params *params, tfenc_context *ctx, const tfenc_jobfile *job,
                             tfenc_job_section *section, const tfenc_layer_descriptor *descriptor)
{
    tfenc_params_bind(params, ctx, job, section);
    params->declared = tfenc_params_declared(descriptor);
    params->layer_type = descriptor->type;
}

const char *tfenc_param_type_name(tfenc_param_type type)
{
    switch (type) {
    case TFENC_PARAM_INT: return "int";
    case TFENC_PARAM_FLOAT: return "float";
    case TFENC_PARAM_BOOL: return "bool";
    case TFENC_PARAM_STRING: return "string";
    case TFENC_PARAM_CHOICE: return "choice";
    }
    return "unknown";
}

const char *tfenc_params_check_table(const tfenc_param_info *table, char *why, size_t size)
{
    int count = 0;
    for (const tfenc_param_info *info = table; info != NULL && info->name != NULL; info++) {
        if (++count > TFENC_MAX_DECLARED_PARAMS) {
            snprintf(why, size, "declares more than %d parameters", TFENC_MAX_DECLARED_PARAMS);
            return why;
        }
        int valid = info->name[0] != '\0';
        for (const char *c = info->name; *c != '\0'; c++)
            valid &= (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_';
        if (!valid) {
            snprintf(why, size, "declares parameter '%s', not a key name [a-z0-9_]+", info->name);
            return why;
        }
        if (strcmp(tfenc_param_type_name(info->type), "unknown") == 0) {
            snprintf(why, size, "declares parameter '%s' of unknown type %d", info->name,
                     (int)info->type);
            return why;
        }
        if ((info->help != NULL && strpbrk(info->help, "\n\r") != NULL) ||
            (info->default_value != NULL && strpbrk(info->default_value, "\n\r") != NULL)) {
            snprintf(why, size, "parameter '%s': help and default must be one line", info->name);
            return why;
        }
        for (const tfenc_param_info *earlier = table; earlier < info; earlier++)
            if (strcmp(earlier->name, info->name) == 0) {
                snprintf(why, size, "declares parameter '%s' twice", info->name);
                return why;
            }
    }
    return NULL;
}

/* Holds a read to the declared table (when there is one), then finds `key`
 * and marks it read; *entry is NULL when the section lacks it. */
static int lookup(tfenc_params *params, const char *key, tfenc_param_type type,
                  tfenc_job_entry **entry)
{
    *entry = NULL;
    if (params->declared != NULL) {
        int index = 0;
        while (params->declared[index].name != NULL &&
               strcmp(params->declared[index].name, key) != 0)
            index++;
        if (params->declared[index].name == NULL)
            return tfenc_error(params->ctx, TFENC_ERR_PLUGIN,
                               "layer type %s reads key '%s', which its declared parameter "
                               "table lacks (a bug of the plugin: the table and create() "
                               "disagree)",
                               params->layer_type, key);
        if (params->declared[index].type != type)
            return tfenc_error(params->ctx, TFENC_ERR_PLUGIN,
                               "layer type %s declares key '%s' as %s but reads it as %s (a bug "
                               "of the plugin)",
                               params->layer_type, key, tfenc_param_type_name(params->declared[index].type),
                               tfenc_param_type_name(type));
        params->asked |= (uint64_t)1 << index;
    }
    *entry = tfenc_job_section_get(params->section, key);
    if (*entry != NULL)
        (*entry)->used = 1;
    return TFENC_OK;
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

/* The whole value as a long: no sign or digit left over, no overflow. */
static int parse_long(const char *text, long *value)
{
    char *end = NULL;
    errno = 0;
    long parsed = strtol(text, &end, 10);
    if (end == text || *end != '\0' || errno == ERANGE)
        return -1;
    *value = parsed;
    return 0;
}

int tfenc_param_int(tfenc_params *params, const char *key, long default_value, long *value)
{
    return tfenc_param_int_range(params, key, default_value, LONG_MIN, LONG_MAX, value);
}

int tfenc_param_int_range(tfenc_params *params, const char *key, long default_value,
                          long minimum, long maximum, long *value)
{
    tfenc_job_entry *entry;
    *value = default_value;
    int status = lookup(params, key, TFENC_PARAM_INT, &entry);
    if (status != TFENC_OK || entry == NULL)
        return status;
    long parsed;
    if (parse_long(entry->value, &parsed) == 0 && parsed >= minimum && parsed <= maximum) {
        *value = parsed;
        return TFENC_OK;
    }
    if (minimum == LONG_MIN && maximum == LONG_MAX)
        return bad_value(params, entry, "an integer");
    char expected[96];
    snprintf(expected, sizeof expected, "an integer in %ld..%ld", minimum, maximum);
    return bad_value(params, entry, expected);
}

int tfenc_param_float(tfenc_params *params, const char *key, double default_value, double *value)
{
    tfenc_job_entry *entry;
    *value = default_value;
    int status = lookup(params, key, TFENC_PARAM_FLOAT, &entry);
    if (status != TFENC_OK || entry == NULL)
        return status;
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
    tfenc_job_entry *entry;
    *value = default_value;
    int status = lookup(params, key, TFENC_PARAM_BOOL, &entry);
    if (status != TFENC_OK || entry == NULL)
        return status;
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
    tfenc_job_entry *entry;
    *value = default_value;
    int status = lookup(params, key, TFENC_PARAM_STRING, &entry);
    if (status == TFENC_OK && entry != NULL)
        *value = entry->value;
    return status;
}

int tfenc_param_input_path(tfenc_params *params, const char *key, const char *what, char **path)
{
    tfenc_job_entry *entry;
    *path = NULL;
    int status = lookup(params, key, TFENC_PARAM_STRING, &entry);
    if (status != TFENC_OK || entry == NULL)
        return status;
    entry->input = what;
    if ((*path = tfenc_jobfile_resolve_path(params->job, entry->value)) == NULL)
        return tfenc_error(params->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    return TFENC_OK;
}

int tfenc_param_choice(tfenc_params *params, const char *key, const char *const *choices,
                       int default_index, int *index)
{
    tfenc_job_entry *entry;
    *index = default_index;
    int status = lookup(params, key, TFENC_PARAM_CHOICE, &entry);
    if (status != TFENC_OK || entry == NULL)
        return status;
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
    for (int i = 0; params->declared != NULL && params->declared[i].name != NULL; i++)
        if ((params->asked & ((uint64_t)1 << i)) == 0)
            return tfenc_error(params->ctx, TFENC_ERR_PLUGIN,
                               "layer type %s declares key '%s' but its create() never reads it "
                               "(a bug of the plugin: the table and create() disagree)",
                               params->layer_type, params->declared[i].name);
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
