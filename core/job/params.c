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

/* An entry of a declared table as ABI 1.1 laid it out: the host reads
 * such tables with this stride. */
typedef struct param_info_1_1 {
    const char *name;
    tfenc_param_type type;
    const char *default_value;
    const char *help;
} param_info_1_1;

tfenc_param_table tfenc_param_table_of(const tfenc_param_info *entries)
{
    return (tfenc_param_table){(const char *)entries, sizeof(tfenc_param_info)};
}

tfenc_param_table tfenc_params_declared(const tfenc_layer_descriptor *descriptor)
{
    /* An ABI 1.0 descriptor may be shorter than the slot, or leave garbage
     * where 1.1 put it: only a 1.1 descriptor long enough has a table. */
    tfenc_param_table none = {NULL, 0};
    if (descriptor->abi_minor < 1 ||
        descriptor->struct_size < offsetof(tfenc_layer_descriptor, params) + sizeof(void *))
        return none;
    tfenc_param_table table = tfenc_param_table_of(descriptor->params);
    if (descriptor->abi_minor == 1)
        table.stride = sizeof(param_info_1_1);
    return table;
}

int tfenc_param_table_entry(tfenc_param_table table, int i, tfenc_param_info *info)
{
    memset(info, 0, sizeof *info);
    if (table.entries == NULL)
        return 0;
    /* Both layouts begin with the 1.1 fields; a 1.1 entry leaves the range
     * zero, which means unbounded. */
    size_t bytes = table.stride < sizeof *info ? table.stride : sizeof *info;
    memcpy(info, table.entries + (size_t)i * table.stride, bytes);
    return info->name != NULL;
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

const char *tfenc_param_range_text(const tfenc_param_info *info, char *text, size_t size)
{
    const unsigned bounds = info->bounds;
    const int below = (bounds & TFENC_PARAM_MINIMUM) != 0, above = (bounds & TFENC_PARAM_MAXIMUM) != 0;
    const char *lower = bounds & TFENC_PARAM_MINIMUM_EXCLUSIVE ? ">" : ">=";
    const char *upper = bounds & TFENC_PARAM_MAXIMUM_EXCLUSIVE ? "<" : "<=";
    /* %.17g prints every whole bound an int key may have (|x| <= 2^53) as digits. */
    const char *number = info->type == TFENC_PARAM_INT ? "%.17g" : "%g";
    char low[40], high[40];
    snprintf(low, sizeof low, number, info->minimum);
    snprintf(high, sizeof high, number, info->maximum);
    if (below && above && strcmp(lower, ">=") == 0 && strcmp(upper, "<=") == 0)
        snprintf(text, size, "%s..%s", low, high);
    else if (below && above)
        snprintf(text, size, "%s%s,%s%s", lower, low, upper, high);
    else if (below)
        snprintf(text, size, "%s%s", lower, low);
    else if (above)
        snprintf(text, size, "%s%s", upper, high);
    else
        snprintf(text, size, "%s", "");
    return text;
}

/* 1 when `value` satisfies the entry's bounds. */
static int within_range(const tfenc_param_info *info, double value)
{
    const unsigned bounds = info->bounds;
    if (bounds & TFENC_PARAM_MINIMUM) {
        if (bounds & TFENC_PARAM_MINIMUM_EXCLUSIVE ? !(value > info->minimum)
                                                   : !(value >= info->minimum))
            return 0;
    }
    if (bounds & TFENC_PARAM_MAXIMUM) {
        if (bounds & TFENC_PARAM_MAXIMUM_EXCLUSIVE ? !(value < info->maximum)
                                                   : !(value <= info->maximum))
            return 0;
    }
    return 1;
}

static int parse_long(const char *text, long *value);
static int parse_double(const char *text, double *value);

/* Why the range of a table entry is malformed, or NULL. */
static const char *check_range(const tfenc_param_info *info, char *why, size_t size)
{
    const unsigned known = TFENC_PARAM_MINIMUM | TFENC_PARAM_MAXIMUM |
                           TFENC_PARAM_MINIMUM_EXCLUSIVE | TFENC_PARAM_MAXIMUM_EXCLUSIVE;
    const unsigned bounds = info->bounds;
    if (bounds == 0)
        return NULL;
    if ((bounds & ~known) != 0 ||
        ((bounds & TFENC_PARAM_MINIMUM_EXCLUSIVE) && !(bounds & TFENC_PARAM_MINIMUM)) ||
        ((bounds & TFENC_PARAM_MAXIMUM_EXCLUSIVE) && !(bounds & TFENC_PARAM_MAXIMUM))) {
        snprintf(why, size, "parameter '%s': unknown range bounds 0x%x", info->name, bounds);
        return why;
    }
    if (info->type != TFENC_PARAM_INT && info->type != TFENC_PARAM_FLOAT) {
        snprintf(why, size, "parameter '%s': a range needs an int or float key, not %s",
                 info->name, tfenc_param_type_name(info->type));
        return why;
    }
    const int below = (bounds & TFENC_PARAM_MINIMUM) != 0, above = (bounds & TFENC_PARAM_MAXIMUM) != 0;
    /* Bounds of an int key are whole numbers a long holds exactly. */
    const double exact = 9007199254740992.0; /* 2^53 */
    if ((below && !isfinite(info->minimum)) || (above && !isfinite(info->maximum)) ||
        (info->type == TFENC_PARAM_INT &&
         ((below && (info->minimum != floor(info->minimum) || fabs(info->minimum) > exact)) ||
          (above && (info->maximum != floor(info->maximum) || fabs(info->maximum) > exact))))) {
        snprintf(why, size, "parameter '%s': range bounds must be finite%s", info->name,
                 info->type == TFENC_PARAM_INT ? " whole numbers within +-2^53" : "");
        return why;
    }
    if (below && above && info->minimum > info->maximum) {
        snprintf(why, size, "parameter '%s': range minimum %g above its maximum %g", info->name,
                 info->minimum, info->maximum);
        return why;
    }
    if (info->default_value == NULL)
        return NULL;
    long whole;
    double number;
    int parsed = info->type == TFENC_PARAM_INT ? parse_long(info->default_value, &whole)
                                               : parse_double(info->default_value, &number);
    if (info->type == TFENC_PARAM_INT)
        number = (double)whole;
    char range[96];
    if (parsed != 0 || !within_range(info, number)) {
        snprintf(why, size, "parameter '%s': default '%s' is not a %s in its range %s",
                 info->name, info->default_value, tfenc_param_type_name(info->type),
                 tfenc_param_range_text(info, range, sizeof range));
        return why;
    }
    return NULL;
}

const char *tfenc_params_check_table(tfenc_param_table table, char *why, size_t size)
{
    tfenc_param_info info, earlier;
    for (int count = 0; tfenc_param_table_entry(table, count, &info); count++) {
        if (count + 1 > TFENC_MAX_DECLARED_PARAMS) {
            snprintf(why, size, "declares more than %d parameters", TFENC_MAX_DECLARED_PARAMS);
            return why;
        }
        int valid = info.name[0] != '\0';
        for (const char *c = info.name; *c != '\0'; c++)
            valid &= (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_';
        if (!valid) {
            snprintf(why, size, "declares parameter '%s', not a key name [a-z0-9_]+", info.name);
            return why;
        }
        if (strcmp(tfenc_param_type_name(info.type), "unknown") == 0) {
            snprintf(why, size, "declares parameter '%s' of unknown type %d", info.name,
                     (int)info.type);
            return why;
        }
        if ((info.help != NULL && strpbrk(info.help, "\n\r") != NULL) ||
            (info.default_value != NULL && strpbrk(info.default_value, "\n\r") != NULL)) {
            snprintf(why, size, "parameter '%s': help and default must be one line", info.name);
            return why;
        }
        if (check_range(&info, why, size) != NULL)
            return why;
        for (int e = 0; e < count && tfenc_param_table_entry(table, e, &earlier); e++)
            if (strcmp(earlier.name, info.name) == 0) {
                snprintf(why, size, "declares parameter '%s' twice", info.name);
                return why;
            }
    }
    return NULL;
}

/* Records the first getter failure, so that a create() that ignores it is
 * refused all the same. */
static int getter_failed(tfenc_params *params, int status)
{
    if (status != TFENC_OK && params->failed == TFENC_OK)
        params->failed = status;
    return status;
}

/* Holds a read to the declared table (when there is one), then finds `key`
 * and marks it read; *entry is NULL when the section lacks it. *declared
 * (when not NULL) receives the key's table entry, or a zeroed one. */
static int lookup(tfenc_params *params, const char *key, tfenc_param_type type,
                  tfenc_job_entry **entry, tfenc_param_info *declared)
{
    *entry = NULL;
    tfenc_param_info info;
    memset(&info, 0, sizeof info);
    if (params->declared.entries != NULL) {
        int index = 0;
        while (tfenc_param_table_entry(params->declared, index, &info) &&
               strcmp(info.name, key) != 0)
            index++;
        if (info.name == NULL)
            return getter_failed(params, tfenc_error(
                params->ctx, TFENC_ERR_PLUGIN,
                "layer type %s reads key '%s', which its declared parameter table lacks (a bug "
                "of the plugin: the table and create() disagree)",
                params->layer_type, key));
        if (info.type != type)
            return getter_failed(params, tfenc_error(
                params->ctx, TFENC_ERR_PLUGIN,
                "layer type %s declares key '%s' as %s but reads it as %s (a bug of the plugin)",
                params->layer_type, key, tfenc_param_type_name(info.type),
                tfenc_param_type_name(type)));
        params->asked |= (uint64_t)1 << index;
    }
    if (declared != NULL)
        *declared = info;
    *entry = tfenc_job_section_get(params->section, key);
    if (*entry != NULL)
        (*entry)->used = 1;
    return TFENC_OK;
}

int tfenc_params_value_error(tfenc_context *ctx, const tfenc_jobfile *job,
                             const tfenc_job_section *section, const tfenc_job_entry *entry,
                             const char *message)
{
    if (entry->line > 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s:%d: [%s] %s = '%s': %s", job->path,
                           entry->line, section->name, entry->key, entry->value, message);
    return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: --set %s.%s=%s: %s", job->path,
                       section->name, entry->key, entry->value, message);
}

/* "job.ini:12: [encoder.ffn] activation = 'foo': " or "--set encoder.ffn.activation=foo: " */
static int bad_value(tfenc_params *params, const tfenc_job_entry *entry, const char *expected)
{
    char message[TFENC_MESSAGE_MAX];
    snprintf(message, sizeof message, "expected %s", expected);
    return getter_failed(params, tfenc_params_value_error(params->ctx, params->job,
                                                          params->section, entry, message));
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

/* The whole value as a finite double. */
static int parse_double(const char *text, double *value)
{
    char *end = NULL;
    errno = 0;
    double parsed = strtod(text, &end);
    if (end == text || *end != '\0' || errno == ERANGE || !isfinite(parsed))
        return -1;
    *value = parsed;
    return 0;
}

/* Refuses a value outside the declared range of its key, naming the range
 * and who declares it. */
static int out_of_declared_range(tfenc_params *params, const tfenc_job_entry *entry,
                                 const tfenc_param_info *info)
{
    char range[96], expected[256];
    snprintf(expected, sizeof expected, "%s in %s (the range layer type %s declares)",
             info->type == TFENC_PARAM_INT ? "an integer" : "a number",
             tfenc_param_range_text(info, range, sizeof range), params->layer_type);
    return bad_value(params, entry, expected);
}

int tfenc_params_check_ranges(tfenc_params *params)
{
    tfenc_param_info info;
    for (int i = 0; tfenc_param_table_entry(params->declared, i, &info); i++) {
        const tfenc_job_entry *entry = tfenc_job_section_get(params->section, info.name);
        if (entry == NULL || info.bounds == 0)
            continue;
        long whole;
        double number;
        if (info.type == TFENC_PARAM_INT ? parse_long(entry->value, &whole)
                                         : parse_double(entry->value, &number))
            continue; /* not a number at all: the getter says what it expected */
        if (info.type == TFENC_PARAM_INT)
            number = (double)whole;
        if (!within_range(&info, number))
            return out_of_declared_range(params, entry, &info);
    }
    return TFENC_OK;
}

int tfenc_param_int(tfenc_params *params, const char *key, long default_value, long *value)
{
    return tfenc_param_int_range(params, key, default_value, LONG_MIN, LONG_MAX, value);
}

int tfenc_param_int_range(tfenc_params *params, const char *key, long default_value,
                          long minimum, long maximum, long *value)
{
    tfenc_job_entry *entry;
    tfenc_param_info declared;
    *value = default_value;
    int status = lookup(params, key, TFENC_PARAM_INT, &entry, &declared);
    if (status != TFENC_OK || entry == NULL)
        return status;
    long parsed;
    if (parse_long(entry->value, &parsed) == 0 && parsed >= minimum && parsed <= maximum) {
        if (!within_range(&declared, (double)parsed))
            return out_of_declared_range(params, entry, &declared);
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
    tfenc_param_info declared;
    *value = default_value;
    int status = lookup(params, key, TFENC_PARAM_FLOAT, &entry, &declared);
    if (status != TFENC_OK || entry == NULL)
        return status;
    double parsed;
    if (parse_double(entry->value, &parsed) != 0)
        return bad_value(params, entry, "a finite number");
    if (!within_range(&declared, parsed))
        return out_of_declared_range(params, entry, &declared);
    *value = parsed;
    return TFENC_OK;
}

int tfenc_param_bool(tfenc_params *params, const char *key, int default_value, int *value)
{
    static const char *const truths[] = {"true", "yes", "on", "1"};
    static const char *const falsehoods[] = {"false", "no", "off", "0"};
    tfenc_job_entry *entry;
    *value = default_value;
    int status = lookup(params, key, TFENC_PARAM_BOOL, &entry, NULL);
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
    int status = lookup(params, key, TFENC_PARAM_STRING, &entry, NULL);
    if (status == TFENC_OK && entry != NULL)
        *value = entry->value;
    return status;
}

int tfenc_param_input_path(tfenc_params *params, const char *key, const char *what, char **path)
{
    tfenc_job_entry *entry;
    *path = NULL;
    int status = lookup(params, key, TFENC_PARAM_STRING, &entry, NULL);
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
    int status = lookup(params, key, TFENC_PARAM_CHOICE, &entry, NULL);
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
    /* The getter's message is in the context already (the first error wins). */
    if (params->failed != TFENC_OK)
        return params->failed;
    tfenc_param_info info;
    for (int i = 0; tfenc_param_table_entry(params->declared, i, &info); i++)
        if ((params->asked & ((uint64_t)1 << i)) == 0)
            return tfenc_error(params->ctx, TFENC_ERR_PLUGIN,
                               "layer type %s declares key '%s' but its create() never reads it "
                               "(a bug of the plugin: the table and create() disagree)",
                               params->layer_type, info.name);
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
