/* The sentence-transformers files of a model folder: modules.json and the
 * Pooling module's config.json. */
#include "config.h"

#include "sentence_transformers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "files.h"

/* Type names look like "sentence_transformers.models.Pooling". */
static int module_is(const char *type, const char *name)
{
    size_t type_length = strlen(type), name_length = strlen(name);
    return type_length >= name_length && strcmp(type + type_length - name_length, name) == 0
           && (type_length == name_length || type[type_length - name_length - 1] == '.');
}

int import_read_pooling(importer *self, const char *directory)
{
    tfenc_context *ctx = self->ctx;
    char *path = import_join_path(directory, "config.json");
    if (path == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    json_t *json = NULL;
    int status = import_load_json(ctx, path, &json, NULL);
    if (status != TFENC_OK)
        goto done;
    static const struct {
        const char *key;
        const char *mode; /* tfenc's name (plugins/pooling.c) */
    } modes[] = {
        {"pooling_mode_cls_token", "cls"},
        {"pooling_mode_mean_tokens", "mean"},
        {"pooling_mode_max_tokens", "max"},
        {"pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len"},
        {"pooling_mode_weightedmean_tokens", "weightedmean"},
        {"pooling_mode_lasttoken", "lasttoken"},
    };
    int n_enabled = 0;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        int enabled = 0;
        if ((status = import_json_bool(ctx, path, json, modes[i].key, 0, &enabled)) != TFENC_OK)
            goto done;
        if (!enabled)
            continue;
        self->pooling.mode = modes[i].mode;
        n_enabled++;
    }
    /* A mode this table lacks (a newer sentence-transformers', a typo) must
     * not leave the others to decide: refused by name unless it is off. */
    const char *key;
    json_t *value;
    json_object_foreach(json, key, value) {
        if (strncmp(key, "pooling_mode", strlen("pooling_mode")) != 0 || json_is_false(value) ||
            json_is_null(value))
            continue;
        size_t known = 0;
        while (known < sizeof modes / sizeof modes[0] && strcmp(key, modes[known].key) != 0)
            known++;
        if (known < sizeof modes / sizeof modes[0])
            continue;
        status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                             "%s: unknown pooling mode '%s' is set (tfenc knows "
                             "pooling_mode_cls_token, _mean_tokens, _max_tokens, "
                             "_mean_sqrt_len_tokens, _weightedmean_tokens, _lasttoken)",
                             path, key);
        goto done;
    }
    if (n_enabled != 1) {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: exactly one pooling mode must be true "
                             "(found %d; sentence-transformers concatenates several, tfenc does "
                             "not)", path, n_enabled);
        goto done;
    }
    /* include_prompt = false leaves the prompt's tokens out of the pooling
     * (INSTRUCTOR-style models); tfenc pools every token. */
    int include_prompt;
    if ((status = import_json_bool(ctx, path, json, "include_prompt", 1, &include_prompt)))
        goto done;
    if (!include_prompt) {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: include_prompt = false is not "
                             "supported (tfenc pools the prompt's tokens too)", path);
        goto done;
    }
    int width;
    if ((status = import_json_int(ctx, path, json, "word_embedding_dimension", 1, IMPORT_MAX_WIDTH,
                                  self->config.d_model, &width)) != TFENC_OK)
        goto done;
    if (width != self->config.d_model) {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: word_embedding_dimension %d differs "
                             "from hidden_size %d", path, width, self->config.d_model);
        goto done;
    }
    self->pooling.present = 1;
done:
    json_decref(json);
    free(path);
    return status;
}

/* SpladePooling's config.json (sentence-transformers' SparseEncoder):
 * pooling_strategy max or sum over the tokens of log(1 + activation(logits)),
 * with activation_function relu, the one SPLADE uses. */
static int read_splade_pooling(importer *self, const char *directory)
{
    tfenc_context *ctx = self->ctx;
    char *path = import_join_path(directory, "config.json");
    if (path == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    json_t *json = NULL;
    const char *strategy = NULL, *activation = NULL;
    int status = import_load_json(ctx, path, &json, NULL);
    if (status == TFENC_OK)
        status = import_json_string(ctx, path, json, "pooling_strategy", "max", &strategy);
    if (status == TFENC_OK)
        status = import_json_string(ctx, path, json, "activation_function", "relu", &activation);
    if (status == TFENC_OK && strcmp(strategy, "max") != 0 && strcmp(strategy, "sum") != 0)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: pooling_strategy '%s' is not max or "
                             "sum", path, strategy);
    if (status == TFENC_OK && strcmp(activation, "relu") != 0)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: activation_function '%s' is not "
                             "supported (splade computes log(1 + relu))", path, activation);
    if (status == TFENC_OK) {
        self->sparse = 1;
        self->config.head.sparse_pooling = strcmp(strategy, "max") == 0 ? "max" : "sum";
    }
    json_decref(json);
    free(path);
    return status;
}

/* modules.json lists the sentence-transformers pipeline: Transformer,
 * Pooling, optionally Dense modules (import_read_dense() checks that there
 * are two it can run), optional Normalize; or PyLate's Transformer, Dense (a
 * ColBERT model: the Dense folder goes to self->dense_dir); or a
 * SparseEncoder's MLMTransformer, SpladePooling. Anything else would change the
 * embeddings in ways the job cannot express, so it is refused. The Pooling
 * folder is returned in *pooling_dir (NULL when there is none). */
int import_read_modules(importer *self, char **pooling_dir)
{
    tfenc_context *ctx = self->ctx;
    *pooling_dir = NULL;
    char *path = import_join_path(self->model_dir, "modules.json");
    if (path == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    int status = TFENC_OK;
    json_t *json = NULL;
    char *text = NULL;
    if (!import_file_exists(path))
        goto done;
    if ((status = import_read_text_file(ctx, path, &text, NULL)) != TFENC_OK)
        goto done;
    json_error_t error;
    json = json_loads(text, 0, &error);
    if (json == NULL || !json_is_array(json)) {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s:%d: expected a JSON array of modules%s%s",
                             path, json == NULL ? error.line : 1, json == NULL ? ": " : "",
                             json == NULL ? error.text : "");
        goto done;
    }
    size_t index;
    json_t *module;
    json_array_foreach(json, index, module) {
        const char *type = json_string_value(json_object_get(module, "type"));
        const char *module_path = json_string_value(json_object_get(module, "path"));
        if (type == NULL || module_path == NULL || module_path[0] == '/'
            || strstr(module_path, "..") != NULL) {
            status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: module %zu needs string 'type' "
                                 "and 'path' keys (a path inside the model directory)", path,
                                 index);
            goto done;
        }
        char **slot = NULL;
        dense_settings *dense = &self->pooling.dense;
        /* A SparseEncoder: MLMTransformer (the masked-LM model) and
         * SpladePooling, which make sparse output (docs/output.md). */
        if ((module_is(type, "Transformer") || module_is(type, "MLMTransformer")) && index == 0)
            slot = &self->transformer_dir;
        else if (module_is(type, "SpladePooling") && index == 1) {
            char *splade_dir = import_join_path(self->model_dir, module_path);
            status = splade_dir == NULL ? tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory")
                                        : read_splade_pooling(self, splade_dir);
            free(splade_dir);
            if (status != TFENC_OK)
                goto done;
        }
        else if (module_is(type, "Pooling") && index == 1)
            slot = pooling_dir;
        else if (module_is(type, "Dense") && index == 2 + (size_t)dense->count &&
                 *pooling_dir != NULL && dense->count < 2)
            slot = &dense->dir[dense->count++];
        else if (module_is(type, "Normalize") && index == 2 + (size_t)dense->count &&
                 *pooling_dir != NULL)
            self->pooling.normalize = 1;
        /* A PyLate (ColBERT) model: a per-token Dense after the Transformer,
         * no pooling (drivers/import/colbert.c). */
        else if (module_is(type, "Dense") && index == 1)
            slot = &self->dense_dir;
        else {
            status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: module %zu of type '%s' is not "
                                 "supported here (tfenc-import reads Transformer, Pooling, up "
                                 "to two Dense, Normalize in that order, MLMTransformer, "
                                 "SpladePooling, or PyLate's Transformer, Dense)",
                                 path, index, type);
            goto done;
        }
        if (slot != NULL) {
            free(*slot);
            if ((*slot = import_join_path(self->model_dir, module_path)) == NULL) {
                status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
                goto done;
            }
        }
    }
done:
    if (status != TFENC_OK) {
        free(*pooling_dir);
        *pooling_dir = NULL;
    }
    free(text);
    json_decref(json);
    free(path);
    return status;
}

/* One Dense module's config.json: in_features, out_features, bias and the
 * Identity activation (the only one whose pair is a plain linear map). */
static int read_dense_config(importer *self, int number, int *in, int *out)
{
    tfenc_context *ctx = self->ctx;
    dense_settings *dense = &self->pooling.dense;
    char *path = import_join_path(dense->dir[number], "config.json");
    if (path == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    json_t *json = NULL;
    const char *activation;
    int status = import_load_json(ctx, path, &json, NULL);
    if (status == TFENC_OK
        && !((status = import_json_int(ctx, path, json, "in_features", 1, IMPORT_MAX_FFN_WIDTH,
                                       -1, in))
             || (status = import_json_int(ctx, path, json, "out_features", 1,
                                          IMPORT_MAX_FFN_WIDTH, -1, out))
             || (status = import_json_bool(ctx, path, json, "bias", 1, &dense->bias[number]))
             || (status = import_json_string(ctx, path, json, "activation_function",
                                             "torch.nn.modules.activation.Tanh", &activation)))
        && !module_is(activation, "Identity"))
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: activation_function '%s' is not "
                             "supported (tfenc runs Dense modules with Identity)", path,
                             activation);
    json_decref(json);
    free(path);
    return status;
}

/* A Dense module's weights (model.safetensors, or pytorch_model.bin as
 * sentence-transformers 2 saved them) hold linear.weight [out, in] and,
 * with bias, linear.bias [out]; nothing else. */
static int open_dense_weights(importer *self, int number, int in, int out)
{
    tfenc_context *ctx = self->ctx;
    dense_settings *dense = &self->pooling.dense;
    int status = import_open_checkpoint(ctx, dense->dir[number], &dense->weights[number]);
    if (status == TFENC_OK && dense->weights[number] == NULL)
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: no model.safetensors nor "
                             "pytorch_model.bin: a Dense module without its weights",
                             dense->dir[number]);
    for (int i = 0; status == TFENC_OK && i < tfenc_checkpoint_count(dense->weights[number]);
         i++) {
        const tfenc_checkpoint_tensor *tensor =
            tfenc_checkpoint_tensor_at(dense->weights[number], i);
        const char *path = tensor->file;
        int is_weight = strcmp(tensor->name, "linear.weight") == 0;
        int is_bias = strcmp(tensor->name, "linear.bias") == 0 && dense->bias[number];
        int64_t rows = is_weight || is_bias ? out : 0, columns = is_weight ? in : 0;
        if (!is_weight && !is_bias)
            status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: tensor '%s' is not part of a "
                                 "Dense module (linear.weight%s)", path, tensor->name,
                                 dense->bias[number] ? ", linear.bias" : "");
        else if (tensor->rank != (is_weight ? 2 : 1) || tensor->dims[0] != rows ||
                 (is_weight && tensor->dims[1] != columns)) {
            char shape[48];
            if (is_weight)
                snprintf(shape, sizeof shape, "[%lld, %lld]", (long long)rows,
                         (long long)columns);
            else
                snprintf(shape, sizeof shape, "[%lld]", (long long)rows);
            status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: tensor '%s' does not have the "
                                 "shape %s that config.json implies", path, tensor->name, shape);
        }
    }
    return status;
}

int import_read_dense(importer *self)
{
    tfenc_context *ctx = self->ctx;
    dense_settings *dense = &self->pooling.dense;
    if (dense->count == 0)
        return TFENC_OK;
    int in[2] = {0, 0}, out[2] = {0, 0}, status = TFENC_OK;
    for (int i = 0; status == TFENC_OK && i < dense->count; i++)
        status = read_dense_config(self, i, &in[i], &out[i]);
    if (status != TFENC_OK)
        return status;
    const int d = self->config.d_model;
    if (dense->count != 2 || in[0] != d || out[1] != d || out[0] != in[1])
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: tfenc-import runs two Dense modules "
                           "d_model -> width -> d_model (EmbeddingGemma's), not %d of "
                           "%d -> %d%s on d_model %d", dense->dir[0], dense->count, in[0],
                           out[0], dense->count == 2 ? " and back" : "", d);
    dense->width = out[0];
    for (int i = 0; status == TFENC_OK && i < 2; i++)
        status = open_dense_weights(self, i, in[i], out[i]);
    return status;
}

int import_read_prompts(importer *self)
{
    tfenc_context *ctx = self->ctx;
    char *path = import_join_path(self->model_dir, "config_sentence_transformers.json");
    if (path == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    json_t *json = NULL;
    int status = TFENC_OK;
    if (!import_file_exists(path) || (status = import_load_json(ctx, path, &json, NULL)))
        goto done;
    json_t *prompts = json_object_get(json, "prompts");
    if (prompts == NULL || json_is_null(prompts))
        goto done;
    if (!json_is_object(prompts)) {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: 'prompts' must be an object of "
                             "name: text", path);
        goto done;
    }
    const char *name;
    json_t *text;
    json_object_foreach(prompts, name, text) {
        /* Names become keys of the job's [prompts] section. */
        size_t length = strlen(name);
        if (length == 0 || strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789_.-") != length) {
            status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: prompt name '%s' is not made of "
                                 "letters, digits, '_', '.' and '-'", path, name);
            goto done;
        }
        if (!json_is_string(text)) {
            status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: prompt '%s' is not a string",
                                 path, name);
            goto done;
        }
    }
    const char *default_name;
    if ((status = import_json_string(ctx, path, json, "default_prompt_name", NULL,
                                     &default_name)))
        goto done;
    if (default_name != NULL && json_object_get(prompts, default_name) == NULL) {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: default_prompt_name '%s' is not one "
                             "of the prompts", path, default_name);
        goto done;
    }
    self->pooling.prompts = json_incref(prompts);
    /* The name as a key of `prompts`, which outlives `json`. */
    if (default_name != NULL)
        self->pooling.default_prompt = json_object_iter_key(json_object_iter_at(prompts,
                                                                                default_name));
done:
    json_decref(json);
    free(path);
    return status;
}
