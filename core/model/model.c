/* Model composition and the forward pass: job sections become steps, steps
 * become plugin instances, and a batch flows through them with residual
 * connections and pre- or post-norm as the block says. */
#include "model/model.h"
#include "base/aligned.h"
#include "base/context.h"
#include "job/id2label.h"
#include "job/params.h"
#include "tfenc/plugin_parallel.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

/* ABI 1.4 put key_masking where the first reserved pointer was: the
 * descriptor a 1.3 plugin compiled keeps its size and layout. */
_Static_assert(offsetof(tfenc_layer_descriptor, reserved) ==
                   offsetof(tfenc_layer_descriptor, key_masking) + sizeof(void *),
               "key_masking must take exactly one pointer's room of the descriptor");

/* Sections that configure the run rather than describe a layer. */
static int is_run_section(const char *name)
{
    return strcmp(name, "job") == 0 || strcmp(name, "model") == 0 ||
           strcmp(name, "tokenizer") == 0 || strcmp(name, "prompts") == 0;
}

static const char *section_origin(const tfenc_jobfile *job, const tfenc_job_section *section,
                                  char *buffer, size_t size)
{
    if (section->line > 0)
        snprintf(buffer, size, "%s:%d", job->path, section->line);
    else
        snprintf(buffer, size, "%s (--set)", job->path);
    return buffer;
}

/* [model] fp32_products: auto, then tfenc_fp32_products_names. */
static const char *const fp32_products_keys[] = {"auto", "openblas", "onednn", NULL};

int tfenc_model_config_read(tfenc_context *ctx, const tfenc_jobfile *job,
                            tfenc_model_config *config)
{
    memset(config, 0, sizeof *config);
    tfenc_job_section *section = tfenc_jobfile_find(job, "model");
    if (section == NULL)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: missing section [model]", job->path);
    tfenc_params params;
    tfenc_params_bind(&params, ctx, job, section);
    long d_model = 0, vocab_size = 0, max_positions = 0;
    int precision = 0;
    double min_cosine = 0.999;
    int status = tfenc_param_input_path(&params, "weights", "the weights", &config->weights_path);
    if (status == TFENC_OK)
        status = tfenc_param_int_range(&params, "d_model", 0, 1, 65536, &d_model);
    /* Token ids are int32: a larger vocabulary could not be indexed. */
    if (status == TFENC_OK)
        status = tfenc_param_int_range(&params, "vocab_size", 0, 0, INT32_MAX, &vocab_size);
    if (status == TFENC_OK)
        status = tfenc_param_int_range(&params, "max_positions", 512, 1, 1L << 24,
                                       &max_positions);
    if (status == TFENC_OK)
        status = tfenc_param_string(&params, "plugin_path", NULL, &config->plugin_path);
    if (status == TFENC_OK)
        status = tfenc_param_choice(&params, "precision", tfenc_precision_names, 0, &precision);
    if (status == TFENC_OK)
        status = tfenc_param_float(&params, "min_cosine", 0.999, &min_cosine);
    if (status == TFENC_OK)
        status = tfenc_param_input_path(&params, "calibration", "the int8 calibration",
                                        &config->calibration_path);
    if (status == TFENC_OK)
        status = tfenc_param_input_path(&params, "paths", "the path choices",
                                        &config->paths_path);
    /* Checked here; the value is read by tfenc_model_fp32_products (auto
     * is a path choice, run/path_choice.h). */
    int fp32_products = 0;
    if (status == TFENC_OK)
        status = tfenc_param_choice(&params, "fp32_products", fp32_products_keys, 0,
                                    &fp32_products);
    if (status == TFENC_OK)
        status = tfenc_params_check_all_used(&params, "not a [model] key");
    if (status != TFENC_OK) {
        tfenc_model_config_free(config);
        return status;
    }
    char origin[512];
    section_origin(job, section, origin, sizeof origin);
    if (config->weights_path == NULL || tfenc_job_section_get(section, "weights")->value[0] == '\0')
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: [model] requires key 'weights'", origin);
    if (d_model < 1 || d_model > 65536)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "%s: [model] d_model must be set to an integer in 1..65536", origin);
    if (!(min_cosine >= -1.0 && min_cosine <= 1.0))
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: [model] min_cosine must be in -1..1",
                           origin);
    if (vocab_size < 0 || max_positions < 1 || max_positions > (1L << 24))
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "%s: [model] vocab_size must be >= 0 and max_positions in 1..2^24",
                           origin);
    /* An int8 calibration makes int8 maps only: at another precision the
     * key would promise rows it does not make. */
    if (config->calibration_path != NULL && precision != TFENC_PRECISION_INT8)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "%s: [model] calibration is an int8 job's calibration, and this job "
                           "runs precision = %s (set precision = int8, or leave calibration "
                           "out)", origin, tfenc_precision_names[precision]);
    config->d_model = (int)d_model;
    config->vocab_size = (int)vocab_size;
    config->max_positions = (int)max_positions;
    config->precision = (tfenc_precision)precision;
    config->min_cosine = min_cosine;
    config->fp32_products = tfenc_model_fp32_products(job);
    return TFENC_OK;
}

tfenc_fp32_products tfenc_model_fp32_products(const tfenc_jobfile *job)
{
    const tfenc_job_section *section = tfenc_jobfile_find(job, "model");
    const tfenc_job_entry *entry =
        section != NULL ? tfenc_job_section_get(section, "fp32_products") : NULL;
    for (int i = 0; entry != NULL && i < TFENC_FP32_PRODUCTS_COUNT; i++)
        if (strcmp(entry->value, tfenc_fp32_products_names[i]) == 0)
            return (tfenc_fp32_products)i;
    return TFENC_FP32_PRODUCTS_OPENBLAS;
}

void tfenc_model_config_free(tfenc_model_config *config)
{
    free(config->weights_path);
    free(config->calibration_path);
    free(config->paths_path);
    config->weights_path = config->calibration_path = config->paths_path = NULL;
}

/* ----------------------------------------------------------------- plan */

static char *format_string(const char *format, const char *a, const char *b)
{
    size_t length = strlen(format) + strlen(a) + (b != NULL ? strlen(b) : 0) + 1;
    char *text = malloc(length);
    if (text != NULL)
        snprintf(text, length, format, a, b);
    return text;
}

/* Replaces every "{i}" of a weights template with the repeat index. */
static char *expand_template(const char *template_path, int index)
{
    char number[16];
    snprintf(number, sizeof number, "%d", index);
    size_t length = strlen(template_path) + 1;
    for (const char *p = strstr(template_path, "{i}"); p != NULL; p = strstr(p + 3, "{i}"))
        length += strlen(number);
    char *text = malloc(length);
    if (text == NULL)
        return NULL;
    char *out = text;
    for (const char *p = template_path; *p != '\0';) {
        if (strncmp(p, "{i}", 3) == 0) {
            out += sprintf(out, "%s", number);
            p += 3;
        } else {
            *out++ = *p++;
        }
    }
    *out = '\0';
    return text;
}

static tfenc_step_plan *add_step(tfenc_model_plan *plan, int *capacity)
{
    if (plan->n_steps == *capacity) {
        int grown_capacity = *capacity ? *capacity * 2 : 16;
        tfenc_step_plan *grown = realloc(plan->steps, (size_t)grown_capacity * sizeof *grown);
        if (grown == NULL)
            return NULL;
        plan->steps = grown;
        *capacity = grown_capacity;
    }
    tfenc_step_plan *step = &plan->steps[plan->n_steps++];
    memset(step, 0, sizeof *step);
    step->repeat_index = -1;
    return step;
}

/* Reads the keys every layer section has: its type (which names the
 * plugin), an optional weights group, and in a block whether the sublayer
 * has a residual connection. A layer outside blocks (weights_file not
 * NULL) may take its weights from a file of its own, resolved against the
 * job file's directory (*weights_file, NULL without the key). */
static int read_layer_keys(tfenc_context *ctx, const tfenc_jobfile *job,
                           tfenc_job_section *section, int in_block, const char **type,
                           const char **weights, int *residual, char **weights_file)
{
    tfenc_params params;
    tfenc_params_bind(&params, ctx, job, section);
    int status = tfenc_param_string(&params, "type", NULL, type);
    if (status == TFENC_OK)
        status = tfenc_param_string(&params, "weights", NULL, weights);
    if (status == TFENC_OK && in_block)
        status = tfenc_param_bool(&params, "residual", 1, residual);
    char origin[512];
    if (status == TFENC_OK && weights_file != NULL)
        status = tfenc_param_input_path(&params, "weights_file", "a layer's weights",
                                        weights_file);
    /* A block's sublayers repeat, each repeat with weights of its own: one
     * file for all of them would be a model of its own. */
    else if (status == TFENC_OK && tfenc_job_section_get(section, "weights_file") != NULL)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                             "%s: [%s] weights_file: only a layer outside blocks (a head) "
                             "takes its weights from a file of its own",
                             section_origin(job, section, origin, sizeof origin), section->name);
    if (status == TFENC_OK && *type == NULL)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                             "%s: section [%s] has no 'type' key (a layer needs a type, a block "
                             "a 'repeat' key)",
                             section_origin(job, section, origin, sizeof origin), section->name);
    return status;
}

/* A block's own keys, from its header section [BLOCK]. */
typedef struct block_header {
    long repeat;
    int norm_first;                /* pre-norm (1) or post-norm (0) */
    const char *weights_template;  /* "{i}" is the repeat index; NULL: /BLOCK/{i} */
    int extra_layers_ignored;      /* extra_layers = ignore */
} block_header;

/* One sublayer of a block: [BLOCK.NAME] and its optional [BLOCK.NAME.norm]
 * and [BLOCK.NAME.output_norm]. */
typedef struct sublayer_info {
    tfenc_job_section *section;
    tfenc_job_section *norm_section;
    tfenc_job_section *output_norm_section;
    const char *name; /* NAME */
    const char *type;
    const char *norm_type;
    const char *output_norm_type;
    const char *weights_override;
    const char *norm_weights_override;
    const char *output_norm_weights_override;
    int residual;
} sublayer_info;

/* The length of `name`'s suffix ".norm" or ".output_norm" (the sections
 * that attach to the sublayer before them), or 0. */
static size_t norm_suffix_length(const char *name)
{
    static const char *const suffixes[] = {".output_norm", ".norm"};
    size_t length = strlen(name);
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        size_t suffix = strlen(suffixes[i]);
        if (length > suffix && strcmp(name + length - suffix, suffixes[i]) == 0)
            return suffix;
    }
    return 0;
}

static int read_block_header(tfenc_context *ctx, const tfenc_jobfile *job,
                             tfenc_job_section *header, block_header *block)
{
    static const char *const positions[] = {"pre", "post", NULL};
    static const char *const extra_layer_policies[] = {"error", "ignore", NULL};
    char origin[512];
    section_origin(job, header, origin, sizeof origin);
    tfenc_params params;
    tfenc_params_bind(&params, ctx, job, header);
    int norm_position = 1;
    int status = tfenc_param_int_range(&params, "repeat", 0, 1, 100000, &block->repeat);
    if (status == TFENC_OK)
        status = tfenc_param_choice(&params, "norm_position", positions, 1, &norm_position);
    if (status == TFENC_OK)
        status = tfenc_param_string(&params, "weights", NULL, &block->weights_template);
    int extra_layers = 0;
    if (status == TFENC_OK)
        status = tfenc_param_choice(&params, "extra_layers", extra_layer_policies, 0,
                                    &extra_layers);
    if (status == TFENC_OK)
        status = tfenc_params_check_all_used(&params, "a block takes repeat, norm_position, "
                                                      "weights, extra_layers");
    if (status != TFENC_OK)
        return status;
    block->norm_first = norm_position == 0;
    block->extra_layers_ignored = extra_layers == 1;
    if (block->repeat < 1 || block->repeat > 100000)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: [%s] repeat must be in 1..100000",
                           origin, header->name);
    return TFENC_OK;
}

/* Reads the sublayer sections [first, end) of a block into `sublayers`
 * (norm sections attach to the sublayer named before them). */
static int read_sublayers(tfenc_context *ctx, const tfenc_jobfile *job, const char *block_name,
                          int first, int end, sublayer_info *sublayers, int *n_sublayers)
{
    size_t prefix_length = strlen(block_name);
    char origin[512];
    int status = TFENC_OK;
    *n_sublayers = 0;
    for (int s = first; status == TFENC_OK && s < end; s++) {
        tfenc_job_section *section = &job->sections[s];
        const char *sublayer = section->name + prefix_length + 1;
        size_t suffix_length = norm_suffix_length(sublayer);
        if (suffix_length > 0) {
            char *owner = strndup(section->name, strlen(section->name) - suffix_length);
            tfenc_job_section *owner_section = owner != NULL ? tfenc_jobfile_find(job, owner) : NULL;
            free(owner);
            if (owner_section == NULL || owner_section > section)
                status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                                     "%s: [%s] is a norm for a sublayer that is not defined before it",
                                     section_origin(job, section, origin, sizeof origin),
                                     section->name);
            continue;
        }
        if (strchr(sublayer, '.') != NULL)
            return tfenc_error(ctx, TFENC_ERR_CONFIG,
                               "%s: [%s]: sublayer names cannot contain '.' (only NAME.norm "
                               "and NAME.output_norm)",
                               section_origin(job, section, origin, sizeof origin),
                               section->name);
        sublayer_info *info = &sublayers[(*n_sublayers)++];
        info->section = section;
        info->name = sublayer;
        info->residual = 1;
        status = read_layer_keys(ctx, job, section, 1, &info->type, &info->weights_override,
                                 &info->residual, NULL);
        if (status != TFENC_OK)
            break;
        char *norm_name = format_string("%s.norm", section->name, NULL);
        info->norm_section = norm_name != NULL ? tfenc_jobfile_find(job, norm_name) : NULL;
        free(norm_name);
        if (info->norm_section != NULL) {
            int unused;
            status = read_layer_keys(ctx, job, info->norm_section, 0, &info->norm_type,
                                     &info->norm_weights_override, &unused, NULL);
        }
        char *output_norm_name = format_string("%s.output_norm", section->name, NULL);
        info->output_norm_section =
            output_norm_name != NULL ? tfenc_jobfile_find(job, output_norm_name) : NULL;
        free(output_norm_name);
        if (status == TFENC_OK && info->output_norm_section != NULL) {
            int unused;
            status = read_layer_keys(ctx, job, info->output_norm_section, 0,
                                     &info->output_norm_type,
                                     &info->output_norm_weights_override, &unused, NULL);
        }
    }
    return status;
}

/* Appends repeat `index` of the block's sublayers to the plan. */
static int emit_repeat(tfenc_context *ctx, const char *block_name, const block_header *block,
                       const char *weights_template, int index, const sublayer_info *sublayers,
                       int n_sublayers, tfenc_model_plan *plan, int *capacity)
{
    char index_text[16];
    snprintf(index_text, sizeof index_text, "%d", index);
    char *block_group = expand_template(weights_template, index);
    char *block_index = format_string("%s.%s", block_name, index_text);
    int status = block_group == NULL || block_index == NULL
                     ? tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory")
                     : TFENC_OK;
    for (int k = 0; status == TFENC_OK && k < n_sublayers; k++) {
        const sublayer_info *info = &sublayers[k];
        tfenc_step_plan *step = add_step(plan, capacity);
        if (step == NULL) {
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
            break;
        }
        step->name = format_string("%s.%s", block_index, info->name);
        step->section = info->section;
        step->type = info->type;
        step->norm_section = info->norm_section;
        step->norm_type = info->norm_type;
        step->in_block = 1;
        step->residual = info->residual;
        step->norm_first = block->norm_first;
        step->repeat_index = index;
        step->repeat_count = (int)block->repeat;
        step->group = info->weights_override != NULL
                          ? expand_template(info->weights_override, index)
                          : format_string("%s/%s", block_group, info->name);
        if (info->norm_section != NULL) {
            if (info->norm_weights_override != NULL)
                step->norm_group = expand_template(info->norm_weights_override, index);
            else if (step->group != NULL)
                step->norm_group = format_string("%s/norm", step->group, NULL);
        }
        step->output_norm_section = info->output_norm_section;
        step->output_norm_type = info->output_norm_type;
        if (info->output_norm_section != NULL) {
            if (info->output_norm_weights_override != NULL)
                step->output_norm_group =
                    expand_template(info->output_norm_weights_override, index);
            else if (step->group != NULL)
                step->output_norm_group = format_string("%s/output_norm", step->group, NULL);
        }
        if (step->name == NULL || step->group == NULL ||
            (info->norm_section != NULL && step->norm_group == NULL) ||
            (info->output_norm_section != NULL && step->output_norm_group == NULL))
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    }
    free(block_group);
    free(block_index);
    return status;
}

/* A block: its header section, the sublayer sections [BLOCK.NAME] that
 * follow it, and `repeat` copies of them in the plan, each with its own
 * weights. *next_index is the first section after the block. */
static int plan_block(tfenc_context *ctx, const tfenc_jobfile *job, int header_index,
                      tfenc_model_plan *plan, int *capacity, int *next_index)
{
    tfenc_job_section *header = &job->sections[header_index];
    char origin[512];
    section_origin(job, header, origin, sizeof origin);
    block_header block = {0};
    int status = read_block_header(ctx, job, header, &block);
    if (status != TFENC_OK)
        return status;
    size_t prefix_length = strlen(header->name);
    int first_sublayer = header_index + 1, end_sublayer = first_sublayer;
    while (end_sublayer < job->n_sections &&
           strncmp(job->sections[end_sublayer].name, header->name, prefix_length) == 0 &&
           job->sections[end_sublayer].name[prefix_length] == '.')
        end_sublayer++;
    *next_index = end_sublayer;
    if (end_sublayer == first_sublayer)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "%s: block [%s] has no sublayers (sections [%s.NAME] after it)",
                           origin, header->name, header->name);
    char *default_template = format_string("/%s/{i}", header->name, NULL);
    sublayer_info *sublayers = calloc((size_t)(end_sublayer - first_sublayer), sizeof *sublayers);
    int n_sublayers = 0;
    if (default_template == NULL || sublayers == NULL)
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    if (status == TFENC_OK)
        status = read_sublayers(ctx, job, header->name, first_sublayer, end_sublayer, sublayers,
                                &n_sublayers);
    /* A model of more steps than this is a typo (repeat = 100000 with many
     * sublayers), not a model: refuse it before building millions of steps. */
    if (status == TFENC_OK && (long)plan->n_steps + block.repeat * (long)n_sublayers > 100000)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                             "%s: [%s] repeat %ld x %d sublayers makes more than 100000 steps",
                             origin, header->name, block.repeat, n_sublayers);
    const char *weights_template =
        block.weights_template != NULL ? block.weights_template : default_template;
    int first_step = plan->n_steps;
    for (int i = 0; status == TFENC_OK && i < block.repeat; i++)
        status = emit_repeat(ctx, header->name, &block, weights_template, i, sublayers,
                             n_sublayers, plan, capacity);
    /* Weights of more layers than `repeat` would give a model silently cut
     * short: the group one repeat past the last must not exist, which is
     * checked once the weights are open (tfenc_model_create). */
    if (status == TFENC_OK && !block.extra_layers_ignored && plan->n_steps > first_step &&
        strstr(weights_template, "{i}") != NULL) {
        tfenc_step_plan *step = &plan->steps[first_step];
        char where[700];
        snprintf(where, sizeof where, "%s: [%s] repeat = %ld", origin, header->name,
                 block.repeat);
        step->extra_group = expand_template(weights_template, (int)block.repeat);
        step->block_origin = strdup(where);
        if (step->extra_group == NULL || step->block_origin == NULL)
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    }
    free(sublayers);
    free(default_template);
    plan->n_layers += (int)block.repeat;
    return status;
}

/* A head's name: a group name of the output file (/outputs/NAME). */
static int valid_head_name(const char *name)
{
    if (name[0] == '\0' || strlen(name) > 64)
        return 0;
    for (const char *c = name; *c != '\0'; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '_' || *c == '-'))
            return 0;
    return 1;
}

/* Where the steps of a section go: the main plan (the trunk, then the
 * first head), or the extra head it names, which it starts when it is
 * new. Heads follow the trunk and each other, each one's layers together,
 * so that the trunk is one range every head reads. */
static int place_head_layer(tfenc_context *ctx, const tfenc_jobfile *job,
                            tfenc_job_section *section, const char *head, tfenc_model_plan *plan,
                            tfenc_model_plan **target, int **capacity, int *extra_capacity,
                            int *main_capacity)
{
    char origin[512];
    const char *current = plan->n_extra_heads > 0
                              ? plan->extra_head_names[plan->n_extra_heads - 1]
                              : plan->first_head;
    if (head == NULL) {
        if (plan->first_head != NULL)
            return tfenc_error(ctx, TFENC_ERR_CONFIG,
                               "%s: [%s] has no 'head' key but follows the layers of head %s: "
                               "the layers every head reads (the trunk) come first, then each "
                               "head's layers, each with head = NAME",
                               section_origin(job, section, origin, sizeof origin),
                               section->name, current);
        return TFENC_OK;
    }
    if (!valid_head_name(head))
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "%s: [%s] head = %s: a head's name is 1 to 64 letters, digits, '_' "
                           "or '-' (it names the output's group /outputs/NAME)",
                           section_origin(job, section, origin, sizeof origin), section->name,
                           head);
    if (current != NULL && strcmp(current, head) == 0)
        return TFENC_OK;
    int seen = plan->first_head != NULL && strcmp(plan->first_head, head) == 0;
    for (int h = 0; h < plan->n_extra_heads; h++)
        seen |= strcmp(plan->extra_head_names[h], head) == 0;
    if (seen)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "%s: [%s] head = %s, but that head's layers ended before [%s]: a "
                           "head's layers follow one another",
                           section_origin(job, section, origin, sizeof origin), section->name,
                           head, section->name);
    if (plan->first_head == NULL) {
        plan->trunk_steps = plan->n_steps;
        if ((plan->first_head = strdup(head)) == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        return TFENC_OK;
    }
    tfenc_model_plan *grown = realloc(plan->extra_heads,
                                      ((size_t)plan->n_extra_heads + 1) * sizeof *grown);
    if (grown != NULL)
        plan->extra_heads = grown;
    char **names = realloc(plan->extra_head_names,
                           ((size_t)plan->n_extra_heads + 1) * sizeof *names);
    if (names != NULL)
        plan->extra_head_names = names;
    if (grown == NULL || names == NULL || (names[plan->n_extra_heads] = strdup(head)) == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    memset(&grown[plan->n_extra_heads], 0, sizeof *grown);
    plan->n_extra_heads++;
    *target = &plan->extra_heads[plan->n_extra_heads - 1];
    *extra_capacity = 0;
    *capacity = extra_capacity;
    (void)main_capacity;
    return TFENC_OK;
}

int tfenc_model_plan_read(tfenc_context *ctx, const tfenc_jobfile *job, tfenc_model_plan *plan)
{
    memset(plan, 0, sizeof *plan);
    int main_capacity = 0, extra_capacity = 0, status = TFENC_OK;
    int *capacity = &main_capacity;
    tfenc_model_plan *target = plan;
    char origin[512];
    for (int s = 0; status == TFENC_OK && s < job->n_sections;) {
        tfenc_job_section *section = &job->sections[s];
        if (is_run_section(section->name)) {
            s++;
            continue;
        }
        if (tfenc_job_section_get(section, "repeat") != NULL) {
            if (plan->first_head != NULL) {
                status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                                     "%s: block [%s] follows the layers of head %s: the blocks "
                                     "belong to the trunk, before every head",
                                     section_origin(job, section, origin, sizeof origin),
                                     section->name, plan->first_head);
                break;
            }
            status = plan_block(ctx, job, s, plan, &main_capacity, &s);
            continue;
        }
        if (strchr(section->name, '.') != NULL) {
            status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                                 "%s: section [%s] looks like a block sublayer, but no block "
                                 "(a section with 'repeat') precedes it",
                                 section_origin(job, section, origin, sizeof origin),
                                 section->name);
            break;
        }
        const char *weights_override = NULL, *type = NULL, *head = NULL;
        char *weights_file = NULL;
        status = read_layer_keys(ctx, job, section, 0, &type, &weights_override, NULL,
                                 &weights_file);
        if (status == TFENC_OK) {
            tfenc_params params;
            tfenc_params_bind(&params, ctx, job, section);
            status = tfenc_param_string(&params, "head", NULL, &head);
        }
        if (status == TFENC_OK)
            status = place_head_layer(ctx, job, section, head, plan, &target, &capacity,
                                      &extra_capacity, &main_capacity);
        tfenc_step_plan *step = status == TFENC_OK ? add_step(target, capacity) : NULL;
        if (step == NULL) {
            free(weights_file);
            if (status == TFENC_OK)
                status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
            break;
        }
        step->weights_file = weights_file;
        step->name = strdup(section->name);
        step->section = section;
        step->type = type;
        step->group = weights_override != NULL ? strdup(weights_override)
                                               : format_string("/%s", section->name, NULL);
        if (step->name == NULL || step->group == NULL)
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        s++;
    }
    if (status == TFENC_OK && plan->n_steps == 0)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: the job describes no layers", job->path);
    if (status == TFENC_OK && plan->first_head == NULL)
        plan->trunk_steps = plan->n_steps;
    if (status == TFENC_OK && plan->first_head != NULL && plan->trunk_steps == 0)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: every layer belongs to a head (head = "
                             "NAME): the heads read a trunk of layers without the key",
                             job->path);
    if (status != TFENC_OK)
        tfenc_model_plan_free(plan);
    return status;
}

void tfenc_model_plan_free(tfenc_model_plan *plan)
{
    for (int i = 0; i < plan->n_steps; i++) {
        free(plan->steps[i].name);
        free(plan->steps[i].group);
        free(plan->steps[i].norm_group);
        free(plan->steps[i].output_norm_group);
        free(plan->steps[i].extra_group);
        free(plan->steps[i].block_origin);
        free(plan->steps[i].weights_file);
    }
    free(plan->steps);
    for (int h = 0; h < plan->n_extra_heads; h++) {
        tfenc_model_plan_free(&plan->extra_heads[h]);
        free(plan->extra_head_names[h]);
    }
    free(plan->extra_heads);
    free(plan->extra_head_names);
    free(plan->first_head);
    memset(plan, 0, sizeof *plan);
}

int tfenc_model_plan_count_every_step(const tfenc_model_plan *plan)
{
    int count = plan->n_steps;
    for (int h = 0; h < plan->n_extra_heads; h++)
        count += plan->extra_heads[h].n_steps;
    return count;
}

const tfenc_step_plan *tfenc_model_plan_every_step(const tfenc_model_plan *plan, int index)
{
    if (index < plan->n_steps)
        return &plan->steps[index];
    index -= plan->n_steps;
    for (int h = 0; h < plan->n_extra_heads; h++) {
        if (index < plan->extra_heads[h].n_steps)
            return &plan->extra_heads[h].steps[index];
        index -= plan->extra_heads[h].n_steps;
    }
    return NULL;
}

int tfenc_model_attach_weights_files(tfenc_context *ctx, const tfenc_jobfile *job,
                                     const tfenc_model_plan *plan, tfenc_weight_store *store)
{
    int status = TFENC_OK;
    const int n_steps = tfenc_model_plan_count_every_step(plan);
    for (int i = 0; status == TFENC_OK && i < n_steps; i++) {
        const tfenc_step_plan *step = tfenc_model_plan_every_step(plan, i);
        if (step->weights_file == NULL)
            continue;
        char origin[512], setting[700];
        snprintf(setting, sizeof setting, "%s: [%s] weights_file",
                 section_origin(job, step->section, origin, sizeof origin),
                 step->section->name);
        status = tfenc_weight_store_attach(ctx, store, step->group, step->weights_file, setting);
    }
    return status;
}

/* ---------------------------------------------------------------- model */

typedef struct layer_instance {
    const tfenc_layer_descriptor *descriptor;
    void *instance;         /* non-NULL iff create() succeeded */
    char *scope;            /* "layer encoder.3.ffn (ffn)": prefixes its errors */
    const char *file;       /* the plugin file of its type (the registry's) */
    size_t workspace_bytes; /* what its workspace_size() asked for */
    tfenc_weights *weights; /* owns what the layer loaded; released after destroy() */
    /* its forward() that adds its input to its result (ABI 1.5), or NULL */
    const tfenc_forward_adding_input *adds_input;
} layer_instance;

/* The largest workspace the layers ask for, and which layer asks. */
typedef struct workspace_need {
    size_t bytes;
    const char *layer;
} workspace_need;

/* Marks a plugin callback as running, so that a crash inside it can be
 * reported naming the layer and the file (base/plugin_guard.h); end it
 * with tfenc_plugin_call_end(). */
static void enter_plugin(tfenc_plugin_call *call, const layer_instance *layer,
                         const char *callback)
{
    *call = (tfenc_plugin_call){.layer = layer->scope, .file = layer->file,
                                .callback = callback};
    tfenc_plugin_call_begin(call);
}

/* A callback's status as the host takes it: a failure the plugin left
 * without a message gets one naming the callback, and a success after the
 * plugin recorded an error is that error (left as it is, it would stand
 * for a later, unrelated failure). `before` is ctx->status before the call. */
static int callback_status(tfenc_context *ctx, const layer_instance *layer,
                           const char *callback, int before, int status)
{
    if (status != TFENC_OK && ctx->status == TFENC_OK)
        return tfenc_error(ctx, status, "%s: %s() failed without a message (%s)", layer->scope,
                           callback, tfenc_status_string(status));
    if (status == TFENC_OK && before == TFENC_OK && ctx->status != TFENC_OK) {
        size_t used = strlen(ctx->message);
        snprintf(ctx->message + used, sizeof ctx->message - used,
                 " (%s() returned TFENC_OK after recording it)", callback);
        return ctx->status;
    }
    return status;
}

typedef struct model_step {
    const tfenc_step_plan *plan;
    layer_instance layer;
    layer_instance norm; /* descriptor NULL when the step has no norm */
    layer_instance output_norm; /* descriptor NULL when the step has no output norm */
} model_step;

struct tfenc_model {
    model_step *steps; /* the stage's range only */
    int n_steps;
    int first_step;
    int ends_plan; /* the range holds the plan's last step, whose output the job writes */
    int d_model;
    tfenc_limits limits;
    tfenc_model_scratch own;      /* unless options->shared_scratch gave one */
    tfenc_model_scratch *scratch; /* &own, or the shared one */
    int nonfinite_sequence; /* after a non-finite failure: which sequence, else -1 */
    int input_unset;        /* options->input_unset: batch->x is not read */
    /* Late chunking (tfenc_model_prepare_spans): the step that pools (the
     * first after which a sequence is one row), and room for the spans it
     * then pools. */
    int pooling_step;
    float *span_tokens;     /* [max_tokens, d]: the token rows the spans are cut from */
    float *span_rows;       /* [max_tokens, d]: the pooled spans, as they come */
    int32_t *span_arrays;   /* seq_start [max_tokens + 1], then token_ids, token_types and
                             * positions [max_tokens] each, of a batch of spans */
    int trunk_end;          /* the plan's trunk_steps when it has heads, else -1 */
    float *trunk_tap;       /* the trunk's rows of each pass (set_trunk_tap), or NULL */
    int trunk_rows;
};

/* Replaces *buffer (of *held bytes) by one of `bytes` when it is smaller
 * or missing; its contents need not survive. */
static int grow_buffer(void **buffer, size_t *held, size_t bytes)
{
    if (*buffer != NULL && bytes <= *held)
        return 1;
    void *grown = tfenc_aligned_alloc(bytes > 0 ? bytes : 1);
    if (grown == NULL)
        return 0;
    tfenc_aligned_free(*buffer);
    *buffer = grown;
    *held = bytes;
    return 1;
}

/* Bytes of a batch's token arrays: seq_start, token_ids, token_types,
 * positions and seq_keys, end to end. */
static size_t token_array_bytes(int n_seq, int n_tokens)
{
    return ((size_t)n_seq + 1 + 3 * (size_t)n_tokens + (size_t)n_seq) * sizeof(int32_t);
}

/* Grows `scratch` to hold a model's. */
static int scratch_reserve(tfenc_context *ctx, tfenc_model_scratch *scratch,
                           const tfenc_limits *limits, size_t activation_bytes,
                           const workspace_need *workspace)
{
    const size_t token_bytes = token_array_bytes(limits->max_seqs, limits->max_tokens);
    if (tfenc_plugin_checks_enabled() &&
        tfenc_guarded_reserve(&scratch->tokens, "the batch's token arrays", token_bytes) != 0)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY,
                           "out of memory for %zu bytes of token arrays", token_bytes);
    if (!grow_buffer(&scratch->residual, &scratch->residual_bytes, activation_bytes) ||
        tfenc_guarded_reserve(&scratch->activations, "the batch's rows (batch->x)",
                              activation_bytes) != 0)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY,
                           "out of memory for 2 x %zu bytes of activations", activation_bytes);
    if (tfenc_guarded_reserve(&scratch->workspace, "the workspace", workspace->bytes) != 0)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY,
                           "out of memory for %zu bytes of workspace, which %s asks for "
                           "(workspace_size())",
                           workspace->bytes, workspace->layer != NULL ? workspace->layer : "");
    return TFENC_OK;
}

static void scratch_release(tfenc_model_scratch *scratch)
{
    tfenc_aligned_free(scratch->residual);
    tfenc_guarded_release(&scratch->activations);
    tfenc_guarded_release(&scratch->workspace);
    tfenc_guarded_release(&scratch->tokens);
    *scratch = (tfenc_model_scratch){0};
}

int tfenc_model_scratch_create(tfenc_context *ctx, tfenc_model_scratch **scratch)
{
    *scratch = calloc(1, sizeof **scratch);
    return *scratch == NULL ? tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory") : TFENC_OK;
}

void tfenc_model_scratch_destroy(tfenc_model_scratch *scratch)
{
    if (scratch == NULL)
        return;
    scratch_release(scratch);
    free(scratch);
}

static int create_instance(tfenc_context *ctx, const tfenc_model_options *options,
                           const tfenc_step_plan *plan, tfenc_job_section *section,
                           const char *type, const char *name, const char *group,
                           layer_instance *layer, workspace_need *workspace)
{
    const tfenc_jobfile *job = options->job;
    char where[600];
    snprintf(where, sizeof where, "%s:%d: [%s]", job->path, section->line, section->name);
    const tfenc_plugin_layer *found = tfenc_plugin_registry_find(options->registry, type);
    if (found == NULL)
        return tfenc_plugin_registry_missing(ctx, options->registry, type, where);
    layer->descriptor = found->descriptor;
    layer->file = found->file;
    layer->scope = format_string("layer %s (%s)", name, type);
    if (layer->scope == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    /* A 1.3 plugin's slot is zero, which reads as undeclared. */
    if (options->masked_keys &&
        (layer->descriptor->abi_minor < 4 ||
         (layer->descriptor->key_masking != TFENC_KEY_MASKING_UNAFFECTED &&
          layer->descriptor->key_masking != TFENC_KEY_MASKING_APPLIED)))
        return tfenc_error(ctx, TFENC_ERR_PLUGIN,
                           "%s: %s: [job] attend_to_mask_tokens = false leaves a query's "
                           "[MASK] padding out of the keys of attention, and this layer's "
                           "plugin (%s, ABI %u.%u) does not declare that it honours that "
                           "(tfenc_layer_descriptor.key_masking, ABI 1.4)",
                           where, layer->scope, found->file, layer->descriptor->abi_major,
                           layer->descriptor->abi_minor);

    tfenc_params params;
    tfenc_params_bind_layer(&params, ctx, job, section, layer->descriptor);
    /* Values outside a declared range never reach create(). */
    int status = tfenc_params_check_ranges(&params);
    if (status != TFENC_OK)
        return status;
    const tfenc_weight_options weight_options = {
        .precision = options->step_precision != NULL
                         ? options->step_precision[plan - options->plan->steps]
                         : options->config->precision,
        .calibrate = options->calibrate,
        .fp32_products = options->config->fp32_products};
    status =
        tfenc_weight_store_group(ctx, options->weights, group, &weight_options, &layer->weights);
    if (status != TFENC_OK)
        return status;
    tfenc_layer_init init = {
        .struct_size = sizeof init,
        .name = name,
        .params = &params,
        .weights = layer->weights,
        .model = {.d_model = options->config->d_model,
                  .vocab_size = options->config->vocab_size,
                  .max_positions = options->config->max_positions,
                  .n_layers = plan->repeat_count > 0 ? plan->repeat_count : options->plan->n_layers,
                  .layer_index = plan->repeat_index},
        .limits = options->limits,
    };
    tfenc_context_set_scope(ctx, layer->scope);
    void *instance = NULL;
    tfenc_plugin_call call;
    const int before = ctx->status;
    enter_plugin(&call, layer, "create");
    status = layer->descriptor->create(ctx, &init, &instance);
    tfenc_plugin_call_end();
    tfenc_context_set_scope(ctx, NULL);
    /* (A failed create() frees what it made; a "success" with an error
     * recorded returned an instance to destroy.) */
    if (status == TFENC_OK)
        layer->instance = instance;
    status = callback_status(ctx, layer, "create", before, status);
    if (status != TFENC_OK)
        return status;
    if (instance == NULL)
        return tfenc_error(ctx, TFENC_ERR_PLUGIN, "%s: create returned no instance", layer->scope);
    if (layer->descriptor->abi_minor >= 5 && layer->descriptor->extension != NULL) {
        enter_plugin(&call, layer, "extension");
        const tfenc_forward_adding_input *adds_input =
            layer->descriptor->extension(TFENC_EXTENSION_ADDS_INPUT);
        tfenc_plugin_call_end();
        if (adds_input != NULL && adds_input->struct_size >= sizeof *adds_input &&
            adds_input->forward != NULL)
            layer->adds_input = adds_input;
    }
    char what[128];
    snprintf(what, sizeof what, "not a parameter of layer type %s", type);
    status = tfenc_params_check_all_used(&params, what);
    if (status != TFENC_OK)
        return status;
    if (layer->descriptor->workspace_size != NULL) {
        enter_plugin(&call, layer, "workspace_size");
        layer->workspace_bytes = layer->descriptor->workspace_size(instance, &options->limits);
        tfenc_plugin_call_end();
        /* Refused before any allocator sees it: some end the process on a
         * request that size (a sanitizer's), others succeed lazily. */
        const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        const double memory = pages > 0 && page > 0 ? (double)pages * (double)page : 0.0;
        if (memory > 0.0 && (double)layer->workspace_bytes > memory)
            return tfenc_error(ctx, TFENC_ERR_PLUGIN, "%s: workspace_size() asks for %zu bytes, "
                               "more than this node's memory (%.0f bytes)", layer->scope,
                               layer->workspace_bytes, memory);
        if (layer->workspace_bytes > workspace->bytes)
            *workspace = (workspace_need){layer->workspace_bytes, layer->scope};
    }
    return TFENC_OK;
}

int tfenc_model_create(tfenc_context *ctx, const tfenc_model_options *options,
                       tfenc_model **model_out)
{
    *model_out = NULL;
    const tfenc_model_plan *plan = options->plan;
    int first = options->first_step, end = options->end_step;
    if (first < 0 || end > plan->n_steps || first >= end)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "model: bad step range [%d, %d) of %d",
                           first, end, plan->n_steps);
    tfenc_model *model = calloc(1, sizeof *model);
    if (model == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    model->steps = calloc((size_t)(end - first), sizeof *model->steps);
    model->first_step = first;
    model->ends_plan = end == plan->n_steps;
    /* Only the plan's first step makes rows from ids: a range of later
     * steps (the accuracy gate and the dry run's timing run each step
     * alone, from the same options) reads its input rows. */
    model->input_unset = options->input_unset && first == 0;
    model->trunk_end = plan->first_head != NULL ? plan->trunk_steps : -1;
    model->d_model = options->config->d_model;
    model->limits = options->limits;
    int status = model->steps == NULL ? tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory")
                                      : TFENC_OK;
    /* Checked by the stage that starts the model, once per block. */
    for (int i = 0; status == TFENC_OK && first == 0 && i < plan->n_steps; i++)
        if (plan->steps[i].extra_group != NULL &&
            tfenc_weight_store_has_group(options->weights, plan->steps[i].extra_group))
            status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                                 "%s, but weights %s hold group %s too (a model of more layers):"
                                 " set repeat to its layer count, or extra_layers = ignore to "
                                 "use only the first %d on purpose",
                                 plan->steps[i].block_origin,
                                 tfenc_weight_store_name(options->weights),
                                 plan->steps[i].extra_group, plan->steps[i].repeat_count);
    workspace_need workspace = {0, NULL};
    for (int i = first; status == TFENC_OK && i < end; i++) {
        const tfenc_step_plan *step_plan = &plan->steps[i];
        model_step *step = &model->steps[model->n_steps++];
        step->plan = step_plan;
        status = create_instance(ctx, options, step_plan, step_plan->section, step_plan->type,
                                 step_plan->name, step_plan->group, &step->layer,
                                 &workspace);
        if (status == TFENC_OK && step_plan->norm_section != NULL) {
            char *norm_name = format_string("%s.norm", step_plan->name, NULL);
            status = norm_name == NULL
                         ? tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory")
                         : create_instance(ctx, options, step_plan, step_plan->norm_section,
                                           step_plan->norm_type, norm_name,
                                           step_plan->norm_group, &step->norm,
                                           &workspace);
            free(norm_name);
        }
        if (status == TFENC_OK && step_plan->output_norm_section != NULL) {
            char *norm_name = format_string("%s.output_norm", step_plan->name, NULL);
            status = norm_name == NULL
                         ? tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory")
                         : create_instance(ctx, options, step_plan,
                                           step_plan->output_norm_section,
                                           step_plan->output_norm_type, norm_name,
                                           step_plan->output_norm_group, &step->output_norm,
                                           &workspace);
            free(norm_name);
        }
    }
    model->scratch = options->shared_scratch != NULL ? options->shared_scratch : &model->own;
    model->nonfinite_sequence = -1;
    if (status == TFENC_OK)
        status = scratch_reserve(ctx, model->scratch, &options->limits,
                                 (size_t)options->limits.max_tokens * (size_t)model->d_model *
                                     sizeof(float),
                                 &workspace);
    if (status != TFENC_OK) {
        tfenc_model_destroy(model);
        return status;
    }
    *model_out = model;
    return TFENC_OK;
}

/* The field of the batch a forward() changed besides rows, or NULL. */
static const char *changed_field(const tfenc_batch *before, const tfenc_batch *after)
{
    return after->x != before->x                     ? "x"
           : after->d_model != before->d_model       ? "d_model"
           : after->n_seq != before->n_seq           ? "n_seq"
           : after->n_tokens != before->n_tokens     ? "n_tokens"
           : after->seq_start != before->seq_start   ? "seq_start"
           : after->token_ids != before->token_ids   ? "token_ids"
           : after->token_types != before->token_types ? "token_types"
           : after->positions != before->positions   ? "positions"
           : after->seq_keys != before->seq_keys     ? "seq_keys"
           : after->sparse_rows != before->sparse_rows ? "sparse_rows"
                                                     : NULL;
}

/* A write past the end of a guarded block (base/plugin_guard.h), as an
 * error naming the layer, its plugin file and how far it went. */
static int check_canary(tfenc_context *ctx, const layer_instance *layer,
                        const tfenc_guarded_buffer *buffer, const void *block, size_t bytes,
                        const char *what)
{
    size_t checked = 0;
    size_t overwritten = tfenc_guarded_overwritten(buffer, block, bytes, &checked);
    if (overwritten == 0)
        return TFENC_OK;
    return tfenc_error(ctx, TFENC_ERR_PLUGIN, "%s, plugin %s: forward() wrote past the end of "
                       "%s: %zu bytes after it overwritten%s", layer->scope, layer->file, what,
                       overwritten, overwritten == checked ? " (or more: the canary ends there)"
                                                           : "");
}

/* Runs the layer's forward(), or with `adding_input` the one that adds its
 * input to its result (the layer has one). */
static int run_layer_adding(tfenc_context *ctx, tfenc_model *model, layer_instance *layer,
                            tfenc_batch *batch, int adding_input)
{
    tfenc_model_scratch *scratch = model->scratch;
    void *workspace = tfenc_guarded_place(&scratch->workspace, layer->workspace_bytes);
    const size_t row_bytes = (size_t)batch->rows * (size_t)batch->d_model * sizeof(float);
    tfenc_guarded_arm(&scratch->workspace, workspace, layer->workspace_bytes);
    tfenc_guarded_arm(&scratch->activations, batch->x, row_bytes);
    const tfenc_batch before = *batch;
    tfenc_plugin_call call;
    const int error_before = ctx->status;
    tfenc_context_set_scope(ctx, layer->scope);
    enter_plugin(&call, layer, adding_input ? "forward (adding its input)" : "forward");
    int status = adding_input
                     ? layer->adds_input->forward(layer->instance, ctx, batch, workspace)
                     : layer->descriptor->forward(layer->instance, ctx, batch, workspace);
    tfenc_plugin_call_end();
    tfenc_context_set_scope(ctx, NULL);
    /* Memory errors first: they may be why the rest went wrong. */
    char what[160];
    snprintf(what, sizeof what, "its workspace (%zu bytes, workspace_size())",
             layer->workspace_bytes);
    int checked = check_canary(ctx, layer, &scratch->workspace, workspace,
                               layer->workspace_bytes, what);
    snprintf(what, sizeof what, "the batch's rows (batch->x, %d x %d values)", before.rows,
             before.d_model);
    if (checked == TFENC_OK)
        checked = check_canary(ctx, layer, &scratch->activations, before.x, row_bytes, what);
    const char *changed = changed_field(&before, batch);
    if (checked == TFENC_OK && changed != NULL)
        checked = tfenc_error(ctx, TFENC_ERR_PLUGIN, "%s, plugin %s: forward() changed batch->%s "
                              "(only batch->rows may change)", layer->scope, layer->file,
                              changed);
    *batch = (tfenc_batch){.n_seq = before.n_seq, .n_tokens = before.n_tokens,
                           .seq_start = before.seq_start, .token_ids = before.token_ids,
                           .token_types = before.token_types, .positions = before.positions,
                           .x = before.x, .rows = batch->rows, .d_model = before.d_model,
                           .seq_keys = before.seq_keys, .sparse_rows = before.sparse_rows};
    if (checked != TFENC_OK)
        return checked;
    status = callback_status(ctx, layer, "forward", error_before, status);
    if (status == TFENC_OK && (batch->rows > before.rows || batch->rows < 1 ||
                               (adding_input && batch->rows != before.rows)))
        return tfenc_error(ctx, TFENC_ERR_PLUGIN, "%s: forward set rows from %d to %d%s",
                           layer->scope, before.rows, batch->rows,
                           adding_input ? " (inside the residual connection it adds)" : "");
    return status;
}

static int run_layer(tfenc_context *ctx, tfenc_model *model, layer_instance *layer,
                     tfenc_batch *batch)
{
    return run_layer_adding(ctx, model, layer, batch, 0);
}

/* The residual's copy and add run on the rank's threads (when the batch
 * is large enough to pay for waking them): serial, they left the second
 * thread of a 1-rank x 2-thread job idle for ~5% of a bf16 encode. */
static void copy_rows(float *to, const float *from, int rows, int width)
{
    TFENC_PARALLEL_FOR(r, rows, (double)rows * width,
                       memcpy(to + (size_t)r * width, from + (size_t)r * width,
                              (size_t)width * sizeof(float)));
}

/* x += skip, over the batch's rows. */
static int add_residual(tfenc_context *ctx, const model_step *step, const float *skip, int rows,
                        tfenc_batch *batch)
{
    if (batch->rows != rows)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "%s: a layer that changes the number of rows cannot sit inside a "
                           "residual connection (set residual = false)",
                           step->layer.scope);
    float *x = batch->x;
    const int width = batch->d_model;
    TFENC_PARALLEL_FOR(r, rows, (double)rows * width, {
        float *row = x + (size_t)r * width;
        const float *skip_row = skip + (size_t)r * width;
        for (int k = 0; k < width; k++)
            row[k] += skip_row[k];
    });
    return TFENC_OK;
}

/* One block sublayer f with its norm and residual connection:
 *   pre-norm:  x = x + f(norm(x))
 *   post-norm: x = norm(x + f(x))
 * (without a norm: x = x + f(x); with residual = false the "x +" goes).
 * An output norm applies to f's result before the residual:
 *   x = x + output_norm(f(norm(x)))  (Gemma's "sandwich" norms).
 * Where the skip is f's own input (post-norm, or no norm) and f can add it
 * in its last product (TFENC_EXTENSION_ADDS_INPUT), f does, with the same
 * bits, and the copy and the add here go. */
static int run_block_step(tfenc_context *ctx, tfenc_model *model, model_step *step,
                          tfenc_batch *batch)
{
    const int rows = batch->rows;
    const int has_norm = step->norm.descriptor != NULL;
    const int layer_adds = step->plan->residual && !(has_norm && step->plan->norm_first) &&
                           step->output_norm.descriptor == NULL &&
                           step->layer.adds_input != NULL;
    const int host_adds = step->plan->residual && !layer_adds;
    int status = TFENC_OK;
    if (host_adds)
        copy_rows(model->scratch->residual, batch->x, rows, batch->d_model);
    if (has_norm && step->plan->norm_first)
        status = run_layer(ctx, model, &step->norm, batch);
    if (status == TFENC_OK)
        status = run_layer_adding(ctx, model, &step->layer, batch, layer_adds);
    if (status == TFENC_OK && step->output_norm.descriptor != NULL)
        status = run_layer(ctx, model, &step->output_norm, batch);
    if (status == TFENC_OK && host_adds)
        status = add_residual(ctx, step, model->scratch->residual, rows, batch);
    if (status == TFENC_OK && has_norm && !step->plan->norm_first)
        status = run_layer(ctx, model, &step->norm, batch);
    return status;
}

/* The first row of x [rows, width] holding a NaN or an infinity, or -1.
 * Exponent bits all set is both; integer compares keep it one pass that
 * compilers vectorise, whatever -ffast-math would do to isfinite(). */
static int first_nonfinite_row(const float *x, int rows, int width)
{
    for (int r = 0; r < rows; r++) {
        const float *row = x + (size_t)r * (size_t)width;
        uint32_t bad = 0;
        for (int c = 0; c < width; c++) {
            uint32_t bits;
            memcpy(&bits, &row[c], sizeof bits);
            bad |= (uint32_t)((bits & 0x7f800000u) == 0x7f800000u);
        }
        if (bad)
            return r;
    }
    return -1;
}

/* The sequence a row belongs to: itself once pooled, else by seq_start. */
static int row_sequence(const tfenc_batch *batch, int row)
{
    if (batch->rows == batch->n_seq && batch->rows != batch->n_tokens)
        return row;
    int sequence = 0;
    while (sequence + 1 < batch->n_seq && batch->seq_start[sequence + 1] <= row)
        sequence++;
    return sequence;
}

/* The trunk's rows, for the further heads, before the first head's steps. */
static void tap_trunk(tfenc_model *model, int step, const tfenc_batch *batch)
{
    if (model->trunk_tap == NULL || model->first_step + step != model->trunk_end)
        return;
    memcpy(model->trunk_tap, batch->x,
           (size_t)batch->rows * (size_t)batch->d_model * sizeof *batch->x);
    model->trunk_rows = batch->rows;
}

/* Steps [first, end) of the range. */
static int run_step_range(tfenc_context *ctx, tfenc_model *model, tfenc_batch *batch,
                          int check_each, int first, int end)
{
    for (int i = first; i < end; i++) {
        model_step *step = &model->steps[i];
        tap_trunk(model, i, batch);
        int status = step->plan->in_block ? run_block_step(ctx, model, step, batch)
                                          : run_layer(ctx, model, &step->layer, batch);
        if (status != TFENC_OK)
            return status;
        int row = check_each ? first_nonfinite_row(batch->x, batch->rows, batch->d_model) : -1;
        if (row >= 0) {
            model->nonfinite_sequence = row_sequence(batch, row);
            return tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                               "%s made a non-finite value (NaN or infinity): the weights or "
                               "the input overflow float32",
                               step->layer.scope);
        }
    }
    return TFENC_OK;
}

static int run_steps(tfenc_context *ctx, tfenc_model *model, tfenc_batch *batch, int check_each)
{
    return run_step_range(ctx, model, batch, check_each, 0, model->n_steps);
}

/* TFENC_CHECK_PLUGINS: the batch's token arrays, copied into read-only
 * pages that end at a guard page, so that a plugin writing into them (or
 * reading past them) stops at once. */
static int copy_token_arrays(tfenc_guarded_buffer *tokens, tfenc_batch *batch)
{
    if (tfenc_guarded_protect(tokens, 0) != 0)
        return -1;
    int32_t *to = tfenc_guarded_place(tokens, token_array_bytes(batch->n_seq, batch->n_tokens));
    const int32_t *from[] = {batch->seq_start, batch->token_ids, batch->token_types,
                             batch->positions, batch->seq_keys};
    const int32_t **into[] = {&batch->seq_start, &batch->token_ids, &batch->token_types,
                              &batch->positions, &batch->seq_keys};
    const int counts[] = {batch->n_seq + 1, batch->n_tokens, batch->n_tokens, batch->n_tokens,
                          batch->n_seq};
    for (int i = 0; i < 5; i++) {
        if (from[i] == NULL)
            continue;
        memcpy(to, from[i], (size_t)counts[i] * sizeof *to);
        *into[i] = to;
        to += counts[i];
    }
    return tfenc_guarded_protect(tokens, 1);
}

int tfenc_model_forward(tfenc_context *ctx, tfenc_model *model, tfenc_batch *batch)
{
    if (batch->n_tokens > model->limits.max_tokens || batch->d_model != model->d_model)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL,
                           "model: batch of %d tokens x %d exceeds the limits %d x %d",
                           batch->n_tokens, batch->d_model, model->limits.max_tokens,
                           model->d_model);
    model->nonfinite_sequence = -1;
    const int rows = batch->rows;
    const size_t bytes = (size_t)rows * (size_t)batch->d_model * sizeof(float);
    /* The layers run on the scratch's guarded rows; batch->x keeps the
     * input meanwhile. */
    tfenc_batch running = *batch;
    running.x = tfenc_guarded_place(&model->scratch->activations, bytes);
    if (!model->input_unset)
        memcpy(running.x, batch->x, bytes);
    if (model->scratch->tokens.mapped > 0 &&
        copy_token_arrays(&model->scratch->tokens, &running) != 0)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "model: cannot protect the token arrays "
                           "(TFENC_CHECK_PLUGINS)");
    /* A plugin built before ABI 1.6 hands its sparse rows to the context:
     * they go where the batch says while it runs. */
    const tfenc_sparse_sink saved_sink = ctx->sparse_sink;
    void *const saved_user = ctx->sparse_sink_user;
    if (batch->sparse_rows != NULL)
        tfenc_context_set_sparse_sink(ctx, batch->sparse_rows->receive, batch->sparse_rows->user);
    int status = run_steps(ctx, model, &running, 0);
    /* Never hand on a non-finite row: run again step by step from the
     * input, to say which layer made it (only on this rare path). */
    if (status == TFENC_OK &&
        first_nonfinite_row(running.x, running.rows, running.d_model) >= 0) {
        if (!model->input_unset)
            memcpy(running.x, batch->x, bytes);
        running.rows = rows;
        status = run_steps(ctx, model, &running, 1);
        if (status == TFENC_OK)
            status = tfenc_error(ctx, TFENC_ERR_INTERNAL,
                                 "model: a non-finite value appeared, but not when the batch "
                                 "was run again step by step");
    }
    tfenc_context_set_sparse_sink(ctx, saved_sink, saved_user);
    if (status == TFENC_OK) {
        memcpy(batch->x, running.x,
               (size_t)running.rows * (size_t)running.d_model * sizeof(float));
        batch->rows = running.rows;
    }
    return status;
}

/* Pools the spans [first, end) of the token rows in model->span_tokens,
 * as sequences of their own, through the steps from the pooling step on:
 * their rows go to model->span_rows from row `first`. As many spans a
 * batch as the limits allow (tokens and sequences), in order, so that
 * the batches are a function of the microbatch alone. */
static int pool_span_batch(tfenc_context *ctx, tfenc_model *model, const tfenc_batch *batch,
                           const tfenc_model_spans *spans, int first, int end)
{
    const int d = model->d_model;
    const int max_tokens = model->limits.max_tokens;
    int32_t *seq_start = model->span_arrays, *ids = seq_start + max_tokens + 1;
    int32_t *types = ids + max_tokens, *positions = types + max_tokens;
    int rows = 0;
    seq_start[0] = 0;
    for (int s = first; s < end; s++) {
        const int length = spans->end[s] - spans->begin[s];
        for (int t = 0; t < length; t++) {
            const int from = spans->begin[s] + t;
            ids[rows + t] = batch->token_ids[from];
            types[rows + t] = batch->token_types[from];
            positions[rows + t] = batch->positions[from];
        }
        rows += length;
        seq_start[s - first + 1] = rows;
    }
    const size_t bytes = (size_t)rows * (size_t)d * sizeof(float);
    tfenc_batch pooled = {.n_seq = end - first, .n_tokens = rows, .seq_start = seq_start,
                          .token_ids = ids, .token_types = types, .positions = positions,
                          .x = tfenc_guarded_place(&model->scratch->activations, bytes),
                          .rows = rows, .d_model = d};
    for (int s = first; s < end; s++)
        memcpy(pooled.x + (size_t)seq_start[s - first] * (size_t)d,
               model->span_tokens + (size_t)spans->begin[s] * (size_t)d,
               (size_t)(spans->end[s] - spans->begin[s]) * (size_t)d * sizeof(float));
    int status = run_step_range(ctx, model, &pooled, 0, model->pooling_step, model->n_steps);
    if (status == TFENC_OK && pooled.rows != pooled.n_seq)
        return tfenc_error(ctx, TFENC_ERR_PLUGIN, "model: the steps from %s on left %d rows for "
                           "%d spans (late chunking pools each span to one row)",
                           model->steps[model->pooling_step].layer.scope, pooled.rows,
                           pooled.n_seq);
    if (status == TFENC_OK)
        memcpy(model->span_rows + (size_t)first * (size_t)d, pooled.x,
               (size_t)pooled.rows * (size_t)d * sizeof(float));
    return status;
}

int tfenc_model_forward_spans(tfenc_context *ctx, tfenc_model *model, tfenc_batch *batch,
                              const tfenc_model_spans *spans)
{
    if (model->span_tokens == NULL || batch->n_tokens > model->limits.max_tokens ||
        batch->d_model != model->d_model || spans->n_spans > batch->n_tokens)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "model: late chunking of a batch of %d "
                           "tokens and %d spans, beyond the model's limits", batch->n_tokens,
                           spans->n_spans);
    model->nonfinite_sequence = -1;
    const int d = model->d_model;
    const size_t bytes = (size_t)batch->rows * (size_t)d * sizeof(float);
    tfenc_batch running = *batch;
    running.x = tfenc_guarded_place(&model->scratch->activations, bytes);
    if (!model->input_unset)
        memcpy(running.x, batch->x, bytes);
    /* The token rows, checked as the whole forward checks its output: a
     * non-finite value is traced to its layer step by step. */
    int status = run_step_range(ctx, model, &running, 0, 0, model->pooling_step);
    if (status == TFENC_OK && first_nonfinite_row(running.x, running.rows, d) >= 0) {
        if (!model->input_unset)
            memcpy(running.x, batch->x, bytes);
        running.rows = batch->rows;
        status = run_step_range(ctx, model, &running, 1, 0, model->pooling_step);
        if (status == TFENC_OK)
            status = tfenc_error(ctx, TFENC_ERR_INTERNAL,
                                 "model: a non-finite value appeared, but not when the batch "
                                 "was run again step by step");
    }
    if (status == TFENC_OK && running.rows != running.n_tokens)
        status = tfenc_error(ctx, TFENC_ERR_INTERNAL, "model: rows pooled before the pooling "
                             "step");
    if (status != TFENC_OK)
        return status;
    memcpy(model->span_tokens, running.x, (size_t)running.rows * (size_t)d * sizeof(float));
    for (int first = 0; status == TFENC_OK && first < spans->n_spans;) {
        int end = first, rows = 0;
        while (end < spans->n_spans && end - first < model->limits.max_seqs &&
               rows + spans->end[end] - spans->begin[end] <= model->limits.max_tokens) {
            rows += spans->end[end] - spans->begin[end];
            end++;
        }
        status = pool_span_batch(ctx, model, batch, spans, first, end);
        first = end;
    }
    /* Never hand on a non-finite row: the token rows were finite, so the
     * steps from the pooling step on made it. */
    const int row = status == TFENC_OK ? first_nonfinite_row(model->span_rows, spans->n_spans, d)
                                       : -1;
    if (row >= 0) {
        running.rows = running.n_tokens;
        model->nonfinite_sequence = row_sequence(&running, spans->begin[row]);
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s or a layer after it made a non-finite "
                             "value (NaN or infinity) of a span: the weights or the input "
                             "overflow float32", model->steps[model->pooling_step].layer.scope);
    }
    if (status == TFENC_OK) {
        memcpy(batch->x, model->span_rows, (size_t)spans->n_spans * (size_t)d * sizeof(float));
        batch->rows = spans->n_spans;
    }
    return status;
}

int tfenc_model_set_trunk_tap(tfenc_context *ctx, tfenc_model *model, float *rows)
{
    /* The first head has a step at least, so the trunk's end is a step of
     * the range that holds it. */
    if (model->trunk_end < model->first_step ||
        model->trunk_end >= model->first_step + model->n_steps)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "the trunk's last layer (step %d) runs on another pipeline stage "
                           "than the heads (steps %d to %d here): every head reads the "
                           "trunk's rows on the last stage; use fewer pipeline_stages",
                           model->trunk_end - 1, model->first_step,
                           model->first_step + model->n_steps - 1);
    model->trunk_tap = rows;
    return TFENC_OK;
}

int tfenc_model_trunk_rows(const tfenc_model *model)
{
    return model->trunk_rows;
}

int tfenc_model_nonfinite_sequence(const tfenc_model *model)
{
    return model->nonfinite_sequence;
}

/* The probe: one sequence of two tokens of id 0 (every vocabulary has it). */
typedef struct probe {
    int32_t seq_start[2], token_ids[2], token_types[2], positions[2];
    float *x;
    tfenc_batch batch;
} probe;

static int probe_start(tfenc_context *ctx, probe *p, int d_model)
{
    memset(p, 0, sizeof *p);
    p->seq_start[1] = 2;
    p->positions[1] = 1;
    p->x = tfenc_aligned_alloc(2 * (size_t)d_model * sizeof(float));
    if (p->x == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    memset(p->x, 0, 2 * (size_t)d_model * sizeof(float));
    p->batch = (tfenc_batch){.n_seq = 1, .n_tokens = 2, .seq_start = p->seq_start,
                             .token_ids = p->token_ids, .token_types = p->token_types,
                             .positions = p->positions, .x = p->x, .rows = 2,
                             .d_model = d_model};
    return TFENC_OK;
}

/* Whether every row the probe left has unit L2 norm: a model that ends by
 * normalising (pooling's normalize, a multivector head, a plugin of its
 * own) makes it 1 to within float rounding, and any other model misses it
 * by far more than the tolerance. Sums in double, as the writer's. */
static int probe_rows_unit(const probe *p)
{
    const tfenc_batch *b = &p->batch;
    for (int r = 0; r < b->rows; r++) {
        double sum = 0;
        for (int c = 0; c < b->d_model; c++) {
            const double value = b->x[(size_t)r * (size_t)b->d_model + (size_t)c];
            sum += value * value;
        }
        if (!(fabs(sqrt(sum) - 1.0) <= 1e-4))
            return 0;
    }
    return b->rows > 0;
}

int tfenc_model_prepare_spans(tfenc_context *ctx, tfenc_model *model)
{
    const size_t rows = (size_t)model->limits.max_tokens * (size_t)model->d_model;
    model->span_tokens = tfenc_aligned_alloc(rows * sizeof(float));
    model->span_rows = tfenc_aligned_alloc(rows * sizeof(float));
    model->span_arrays = malloc((4 * (size_t)model->limits.max_tokens + 1) * sizeof(int32_t));
    if (model->span_tokens == NULL || model->span_rows == NULL || model->span_arrays == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for late chunking's spans");
    probe p;
    int status = probe_start(ctx, &p, model->d_model);
    tfenc_batch running = p.batch;
    running.x = tfenc_guarded_place(&model->scratch->activations,
                                    2 * (size_t)model->d_model * sizeof(float));
    if (status == TFENC_OK)
        memset(running.x, 0, 2 * (size_t)model->d_model * sizeof(float));
    model->pooling_step = -1;
    for (int i = 0; status == TFENC_OK && model->pooling_step < 0 && i < model->n_steps; i++) {
        status = run_step_range(ctx, model, &running, 0, i, i + 1);
        if (running.rows == 1)
            model->pooling_step = i;
    }
    tfenc_aligned_free(p.x);
    if (status == TFENC_OK && model->pooling_step < 0)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "late chunking pools spans with the model's "
                             "pooling, but no layer of the model pools its sequences");
    return status;
}

int tfenc_model_probe_pools(tfenc_context *ctx, tfenc_model *model, int *pools, int *unit_rows)
{
    probe p;
    int status = probe_start(ctx, &p, model->d_model);
    /* A model that reads rows (a head): rows that are not zero, so that a
     * head that normalises them leaves rows of unit length. */
    for (int i = 0; status == TFENC_OK && !model->input_unset && i < 2 * model->d_model; i++)
        p.x[i] = 1.0f / (float)(1 + i % 7);
    if (status == TFENC_OK)
        status = tfenc_model_forward(ctx, model, &p.batch);
    *pools = p.batch.rows == 1;
    if (unit_rows != NULL)
        *unit_rows = status == TFENC_OK && probe_rows_unit(&p);
    tfenc_aligned_free(p.x);
    return status;
}

/* A head's id2label must name each of its `width` scores once, or the
 * file's labels would not match its columns (job/id2label.h). */
static int check_labels(tfenc_context *ctx, const char *scope, const char *labels, int width)
{
    char why[256], computes[64];
    snprintf(computes, sizeof computes, "the head computes %d scores", width);
    if (!tfenc_id2label_valid(labels, width, computes, why, sizeof why))
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: labels (id2label) %s", scope, why);
    return TFENC_OK;
}

int tfenc_model_output(tfenc_context *ctx, const tfenc_model *model, tfenc_layer_output *output)
{
    *output = (tfenc_layer_output){.struct_size = sizeof *output,
                                   .kind = TFENC_LAYER_OUTPUT_HIDDEN};
    if (!model->ends_plan)
        return TFENC_OK;
    const model_step *last = &model->steps[model->n_steps - 1];
    const tfenc_layer_descriptor *d = last->layer.descriptor;
    /* Only a 1.2 descriptor long enough has the slot; older ones may hold
     * anything there. */
    if (d->abi_minor < 2 ||
        d->struct_size < offsetof(tfenc_layer_descriptor, output) + sizeof(void *) ||
        d->output == NULL)
        return TFENC_OK;
    tfenc_plugin_call call;
    enter_plugin(&call, &last->layer, "output");
    int status = d->output(last->layer.instance, output);
    tfenc_plugin_call_end();
    /* output() takes no context: the reason is never the plugin's. */
    if (status != TFENC_OK)
        return tfenc_error(ctx, status, "%s: output() failed without a message (%s)",
                           last->layer.scope, tfenc_status_string(status));
    /* SPARSE and VECTORS are ABI 1.3: a 1.2 plugin cannot mean them. */
    const int sparse = output->kind == TFENC_LAYER_OUTPUT_SPARSE && d->abi_minor >= 3;
    const int narrowed = output->kind == TFENC_LAYER_OUTPUT_SCORES ||
                         (output->kind == TFENC_LAYER_OUTPUT_VECTORS && d->abi_minor >= 3);
    if (narrowed && (output->width < 1 || output->width > model->d_model))
        return tfenc_error(ctx, TFENC_ERR_PLUGIN, "%s declares %d %s (1 to d_model %d)",
                           last->layer.scope, output->width,
                           output->kind == TFENC_LAYER_OUTPUT_SCORES ? "scores per sequence"
                                                                     : "values per token",
                           model->d_model);
    if (narrowed && last->norm.descriptor != NULL)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s writes %s, which a norm after it "
                           "would change: give it no norm", last->layer.scope,
                           output->kind == TFENC_LAYER_OUTPUT_SCORES ? "scores" : "vectors");
    if (output->kind != TFENC_LAYER_OUTPUT_HIDDEN && !narrowed && !sparse)
        return tfenc_error(ctx, TFENC_ERR_PLUGIN, "%s declares an unknown output kind %d",
                           last->layer.scope, (int)output->kind);
    if (sparse && output->width < 1)
        return tfenc_error(ctx, TFENC_ERR_PLUGIN, "%s declares sparse rows of %d columns",
                           last->layer.scope, output->width);
    if (sparse && last->norm.descriptor != NULL)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s writes sparse rows, which a norm after "
                           "it would not see: give it no norm", last->layer.scope);
    if (output->kind == TFENC_LAYER_OUTPUT_SCORES && output->labels != NULL)
        return check_labels(ctx, last->layer.scope, output->labels, output->width);
    return TFENC_OK;
}

int tfenc_model_survey(tfenc_context *ctx, const tfenc_model_options *options,
                       double mean_seq_len, double *step_flops, int *pools, int *unit_rows)
{
    probe p;
    int status = probe_start(ctx, &p, options->config->d_model);
    for (int i = 0; status == TFENC_OK && i < options->plan->n_steps; i++) {
        tfenc_model_options one = *options;
        one.first_step = i;
        one.end_step = i + 1;
        tfenc_model *step = NULL;
        status = tfenc_model_create(ctx, &one, &step);
        if (status == TFENC_OK)
            status = tfenc_model_forward(ctx, step, &p.batch);
        if (status == TFENC_OK)
            status = tfenc_model_step_flops(ctx, step, i, mean_seq_len, &step_flops[i]);
        tfenc_model_destroy(step);
    }
    *pools = p.batch.rows == 1;
    if (unit_rows != NULL)
        *unit_rows = status == TFENC_OK && probe_rows_unit(&p);
    tfenc_aligned_free(p.x);
    return status;
}

/* One layer's FLOPs per token, added to *flops: a count the stages are
 * balanced by, so it must be one. */
static int add_layer_flops(tfenc_context *ctx, const layer_instance *layer,
                           double mean_seq_len, double *flops)
{
    if (layer->descriptor == NULL || layer->descriptor->flops_per_token == NULL)
        return TFENC_OK;
    tfenc_plugin_call call;
    enter_plugin(&call, layer, "flops_per_token");
    double count = layer->descriptor->flops_per_token(layer->instance, mean_seq_len);
    tfenc_plugin_call_end();
    if (!(isfinite(count) && count >= 0.0))
        return tfenc_error(ctx, TFENC_ERR_PLUGIN, "%s: flops_per_token() returned %g for "
                           "sequences of mean length %g (expected a finite count >= 0)",
                           layer->scope, count, mean_seq_len);
    *flops += count;
    return TFENC_OK;
}

int tfenc_model_step_flops(tfenc_context *ctx, const tfenc_model *model, int step,
                           double mean_seq_len, double *flops)
{
    const model_step *s = &model->steps[step - model->first_step];
    *flops = 0.0;
    int status = add_layer_flops(ctx, &s->layer, mean_seq_len, flops);
    if (status == TFENC_OK)
        status = add_layer_flops(ctx, &s->norm, mean_seq_len, flops);
    if (status == TFENC_OK)
        status = add_layer_flops(ctx, &s->output_norm, mean_seq_len, flops);
    return status;
}

static void destroy_instance(layer_instance *layer)
{
    if (layer->instance != NULL) {
        tfenc_plugin_call call;
        enter_plugin(&call, layer, "destroy");
        layer->descriptor->destroy(layer->instance);
        tfenc_plugin_call_end();
    }
    /* The layer's weights go with it: a survey that builds step after step
     * holds one step's weights at a time. */
    tfenc_weights_release(layer->weights);
    free(layer->scope);
}

int tfenc_model_step_counters(const tfenc_model *model, int step, const char **label, int *n,
                              const long long **values)
{
    if (step < model->first_step || step >= model->first_step + model->n_steps)
        return TFENC_ERR_NOT_FOUND;
    const layer_instance *layer = &model->steps[step - model->first_step].layer;
    const tfenc_counters_extension *counters =
        layer->descriptor->extension != NULL
            ? layer->descriptor->extension(TFENC_COUNTERS_URI)
            : NULL;
    if (counters == NULL || counters->struct_size < sizeof *counters ||
        counters->counters == NULL ||
        counters->counters(layer->instance, label, n, values) != TFENC_OK || *n < 1)
        return TFENC_ERR_NOT_FOUND;
    return TFENC_OK;
}

void tfenc_model_destroy(tfenc_model *model)
{
    if (model == NULL)
        return;
    for (int i = 0; i < model->n_steps; i++) {
        destroy_instance(&model->steps[i].layer);
        destroy_instance(&model->steps[i].norm);
        destroy_instance(&model->steps[i].output_norm);
    }
    free(model->steps);
    scratch_release(&model->own);
    tfenc_aligned_free(model->span_tokens);
    tfenc_aligned_free(model->span_rows);
    free(model->span_arrays);
    free(model);
}
