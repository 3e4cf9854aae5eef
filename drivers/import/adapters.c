/* LoRA task adapters as jinaai/xlm-roberta-flash-implementation's
 * modeling_lora.py keeps them: every nn.Linear and nn.Embedding of the
 * model is parametrized, its weight stored as
 * NAME.parametrizations.weight.original beside the stacked adapters of all
 * tasks, NAME.parametrizations.weight.0.lora_A and .lora_B. Encoding for a
 * task uses W + scale * B[t] A[t] (a linear layer: B [tasks, out, rank],
 * A [tasks, rank, in]) or W + scale * A[t] B[t] (an embedding: A [tasks,
 * rows, rank], B [tasks, rank, width]), scale = lora_alpha / lora_rank.
 * tfenc merges the chosen task's product into the weights once, at import. */
#include "config.h"

#include "adapters.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "files.h"
#include "tensor_map.h"

static const char original_suffix[] = ".parametrizations.weight.original";

/* "a, b, c": the task names, for messages. */
static void list_tasks(json_t *tasks, char *text, size_t size)
{
    size_t index, used = 0;
    json_t *name;
    text[0] = '\0';
    json_array_foreach(tasks, index, name) {
        if (used < size)
            used += (size_t)snprintf(text + used, size - used, "%s%s", index > 0 ? ", " : "",
                                     json_string_value(name));
    }
}

/* The task's instruction (task_instructions), put before each document by
 * XLMRobertaLoRA.encode, as the job's prompt: the prompt of that name,
 * which a sentence-transformers folder may already carry (then the same
 * text). An empty instruction leaves the documents as they are. */
static int task_prompt(importer *self, const char *path, json_t *json)
{
    const char *task = self->adapters.task;
    json_t *instructions = json_object_get(json, "task_instructions");
    if (instructions == NULL || json_is_null(instructions))
        return TFENC_OK;
    json_t *instruction = json_object_get(instructions, task);
    if (!json_is_object(instructions) || (instruction != NULL && !json_is_string(instruction)))
        return tfenc_error(self->ctx, TFENC_ERR_CONFIG, "%s: task_instructions must map each "
                           "task to a string ('%s' does not)", path, task);
    const char *text = json_string_value(instruction);
    if (text == NULL || text[0] == '\0') {
        self->pooling.default_prompt = NULL;
        return TFENC_OK;
    }
    if (strspn(task, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
        != strlen(task))
        return tfenc_error(self->ctx, TFENC_ERR_CONFIG, "%s: task '%s' is not made of letters, "
                           "digits, '_', '.' and '-' (it names the job's prompt)", path, task);
    if (self->pooling.prompts == NULL && (self->pooling.prompts = json_object()) == NULL)
        return tfenc_error(self->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    const char *present = json_string_value(json_object_get(self->pooling.prompts, task));
    if (present != NULL && strcmp(present, text) != 0)
        return tfenc_error(self->ctx, TFENC_ERR_CONFIG, "%s: task_instructions gives task "
                           "'%s' another text than config_sentence_transformers.json's prompt "
                           "of that name", path, task);
    if (json_object_set_new(self->pooling.prompts, task, json_string(text)) != 0)
        return tfenc_error(self->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    self->pooling.default_prompt =
        json_object_iter_key(json_object_iter_at(self->pooling.prompts, task));
    return TFENC_OK;
}

int import_read_adapters(importer *self)
{
    tfenc_context *ctx = self->ctx;
    adapter_settings *adapters = &self->adapters;
    char *path = import_join_path(self->transformer_dir, "config.json");
    json_t *json = path != NULL ? json_loads(self->config.config_text, 0, NULL) : NULL;
    int status = TFENC_OK;
    if (json == NULL) {
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    json_t *tasks = json_object_get(json, "lora_adaptations");
    if (tasks == NULL || json_is_null(tasks)) {
        if (adapters->task != NULL)
            status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: --task %s: the model has no task "
                                 "adapters (no lora_adaptations)", path, adapters->task);
        goto done;
    }
    size_t index;
    json_t *name;
    int valid = json_is_array(tasks) && json_array_size(tasks) > 0;
    json_array_foreach(tasks, index, name) valid = valid && json_is_string(name);
    if (!valid) {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: lora_adaptations must be a list of task "
                             "names", path);
        goto done;
    }
    if (self->config.architecture != ARCH_XLMR_ROTARY) {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: lora_adaptations: tfenc-import merges "
                             "the task adapters of xlm-roberta with rotary positions "
                             "(jina-embeddings-v3), not of %s", path, self->config.model_type);
        goto done;
    }
    char names[512];
    list_tasks(tasks, names, sizeof names);
    /* Without a task XLMRobertaLoRA.encode runs the bare weights, which the
     * model was not trained to be used with: the user chooses. */
    if (adapters->task == NULL) {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: the model has task adapters: choose "
                             "one with --task NAME (%s)", path, names);
        goto done;
    }
    adapters->index = -1;
    json_array_foreach(tasks, index, name) {
        if (strcmp(json_string_value(name), adapters->task) == 0 && adapters->index < 0)
            adapters->index = (int)index;
    }
    if (adapters->index < 0) {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: --task '%s' is not one of the model's "
                             "lora_adaptations (%s)", path, adapters->task, names);
        goto done;
    }
    adapters->count = (int)json_array_size(tasks);
    double alpha;
    if ((status = import_json_int(ctx, path, json, "lora_rank", 1, IMPORT_MAX_WIDTH, 4,
                                  &adapters->rank))
        || (status = import_json_positive(ctx, path, json, "lora_alpha", 1.0, &alpha))
        || (status = import_json_bool(ctx, path, json, "load_trained_adapters", 0,
                                      &adapters->trained))
        || (status = task_prompt(self, path, json)))
        goto done;
    adapters->scale = alpha / adapters->rank;
    if (self->verbose != NULL)
        fprintf(self->verbose, "tfenc-import: %s: task '%s' (adapter %d of %d, rank %d, scale "
                "%g)%s; prompt %s\n", path, adapters->task, adapters->index + 1, adapters->count,
                adapters->rank, adapters->scale,
                adapters->trained ? " merged into the weights"
                                  : ": load_trained_adapters is false, the adapters start at "
                                    "zero and the weights stay as they are",
                self->pooling.default_prompt != NULL ? self->pooling.default_prompt : "none");
done:
    json_decref(json);
    free(path);
    return status;
}

int import_rename_adapted_weights(importer *self)
{
    if (self->adapters.count == 0 || !self->adapters.trained)
        return TFENC_OK;
    size_t suffix_length = strlen(original_suffix);
    int renamed_count = 0, status = TFENC_OK;
    for (int i = 0; i < tfenc_checkpoint_count(self->weights) && status == TFENC_OK; i++) {
        const char *name = tfenc_checkpoint_tensor_at(self->weights, i)->name;
        size_t length = strlen(name);
        char renamed[sizeof self->plan->source];
        if (length < suffix_length || strcmp(name + length - suffix_length, original_suffix) != 0
            || length - suffix_length + sizeof ".weight" > sizeof renamed)
            continue;
        snprintf(renamed, sizeof renamed, "%.*s.weight", (int)(length - suffix_length), name);
        status = tfenc_checkpoint_rename(self->ctx, self->weights, i, renamed);
        renamed_count++;
    }
    if (status == TFENC_OK && self->verbose != NULL)
        fprintf(self->verbose, "tfenc-import: %s: %d LoRA-parametrized weights (NAME%s) load as "
                "NAME.weight\n", tfenc_checkpoint_name(self->weights), renamed_count,
                original_suffix);
    return status;
}

/* The adapter tensor `base` + `part` (lora_A or lora_B) of shape
 * `expected`, into *tensor. */
static int find_adapter_tensor(importer *self, const char *weights_path, const char *base,
                               const char *part, const int64_t expected[3],
                               const tfenc_checkpoint_tensor **tensor)
{
    char name[sizeof self->plan->source + 48];
    snprintf(name, sizeof name, "%s.parametrizations.weight.0.%s", base, part);
    *tensor = tfenc_checkpoint_find(self->weights, name);
    if (*tensor == NULL)
        return tfenc_error(self->ctx, TFENC_ERR_WEIGHTS, "%s: tensor '%s' not found (the task "
                           "adapters of '%s.weight', which config.json's lora_adaptations "
                           "imply)", weights_path, name, base);
    const tfenc_checkpoint_tensor *found = *tensor;
    int same = found->rank == 3;
    for (int k = 0; same && k < 3; k++)
        same = found->dims[k] == expected[k];
    if (!same) {
        char wanted[64], shape[64];
        import_format_shape(wanted, sizeof wanted, 3, expected);
        import_format_shape(shape, sizeof shape, found->rank, found->dims);
        return tfenc_error(self->ctx, TFENC_ERR_WEIGHTS, "%s: tensor '%s' has shape %s, "
                           "config.json's %d lora_adaptations and lora_rank %d imply %s",
                           found->file, found->stored_name, shape, self->adapters.count,
                           self->adapters.rank, wanted);
    }
    if (strcmp(found->dtype, "F32") != 0 && strcmp(found->dtype, "F16") != 0
        && strcmp(found->dtype, "BF16") != 0)
        return tfenc_error(self->ctx, TFENC_ERR_WEIGHTS, "%s: tensor '%s' has dtype %s "
                           "(expected F32, F16 or BF16)", found->file, found->stored_name,
                           found->dtype);
    return TFENC_OK;
}

int import_plan_adapters(importer *self, const char *weights_path)
{
    const adapter_settings *adapters = &self->adapters;
    if (adapters->count == 0 || !adapters->trained)
        return TFENC_OK;
    for (int i = 0; i < self->plan_count; i++) {
        tensor_plan *item = &self->plan[i];
        if (item->zeros || item->rank != 2 || item->file != self->weights)
            continue;
        size_t length = strlen(item->source);
        if (length < sizeof ".weight" || strcmp(item->source + length - 7, ".weight") != 0)
            continue;
        char base[sizeof item->source];
        snprintf(base, sizeof base, "%.*s", (int)(length - 7), item->source);
        /* The whole tensor's shape, a block of its rows planned or not. */
        const int64_t rows = item->source_rows, columns = item->dims[1];
        const int64_t tasks = adapters->count, rank = adapters->rank;
        item->lora_embedding = strncmp(item->target, "/embeddings/", 12) == 0;
        const int64_t linear_a[3] = {tasks, rank, columns}, linear_b[3] = {tasks, rows, rank};
        const int64_t table_a[3] = {tasks, rows, rank}, table_b[3] = {tasks, rank, columns};
        int status = find_adapter_tensor(self, weights_path, base, "lora_A",
                                         item->lora_embedding ? table_a : linear_a,
                                         &item->lora_a);
        if (status == TFENC_OK)
            status = find_adapter_tensor(self, weights_path, base, "lora_B",
                                         item->lora_embedding ? table_b : linear_b,
                                         &item->lora_b);
        if (status != TFENC_OK)
            return status;
    }
    return TFENC_OK;
}

int import_merge_adapter(importer *self, const tensor_plan *item, float *weights)
{
    tfenc_context *ctx = self->ctx;
    if (item->lora_a == NULL)
        return TFENC_OK;
    float *a = malloc((size_t)item->lora_a->n_elements * sizeof *a + 1);
    float *b = malloc((size_t)item->lora_b->n_elements * sizeof *b + 1);
    int status = TFENC_OK;
    if (a == NULL || b == NULL) {
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for the adapters of '%s'",
                             item->source);
        goto done;
    }
    if ((status = tfenc_checkpoint_read_float32(ctx, self->weights, item->lora_a, a))
        || (status = tfenc_checkpoint_read_float32(ctx, self->weights, item->lora_b, b)))
        goto done;
    const size_t rows = (size_t)item->source_rows, columns = (size_t)item->dims[1];
    const size_t rank = (size_t)self->adapters.rank, task = (size_t)self->adapters.index;
    /* The task's slices: left [rows, rank] times right [rank, columns]. */
    const float *left, *right;
    if (item->lora_embedding) {
        left = a + task * rows * rank;
        right = b + task * rank * columns;
    } else {
        left = b + task * rows * rank;
        right = a + task * rank * columns;
    }
    /* The product in float32 as PyTorch's matmul gives it, then scaled and
     * added, as lora_forward does. */
    const float scale = (float)self->adapters.scale;
    for (size_t row = 0; row < rows; row++)
        for (size_t column = 0; column < columns; column++) {
            double product = 0.0;
            for (size_t r = 0; r < rank; r++)
                product += (double)left[row * rank + r] * right[r * columns + column];
            weights[row * columns + column] += (float)product * scale;
        }
done:
    free(a);
    free(b);
    return status;
}
