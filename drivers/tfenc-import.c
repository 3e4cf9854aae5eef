/* tfenc-import: turns a Hugging Face BERT-family checkpoint directory
 * (config.json, model.safetensors, vocab.txt, sentence-transformers files)
 * into a tfenc weights file (docs/weights.md) and optionally a job file
 * (docs/job-file.md) that reproduces the model's embeddings. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>
#include <jansson.h>
#include <utf8proc.h>

#include "context.h"
#include "float16.h"
#include "safetensors.h"
#include "tokenizer.h"

#define IMPORTER_VERSION "tfenc-import " PACKAGE_VERSION

typedef enum storage_dtype { STORAGE_FLOAT32, STORAGE_FLOAT16, STORAGE_BFLOAT16 } storage_dtype;
static const char *const storage_names[] = {"float32", "float16", "bfloat16"};

/* What config.json says about the architecture. */
typedef struct model_config {
    char *model_type;            /* bert, roberta or xlm-roberta */
    int d_model;                 /* hidden_size */
    int n_heads;                 /* num_attention_heads */
    int n_layers;                /* num_hidden_layers */
    int ffn_width;               /* intermediate_size */
    int vocab_size;
    int max_position_embeddings; /* rows of the position table */
    int type_vocab_size;         /* rows of the token-type table */
    int pad_token_id;
    int position_offset;         /* RoBERTa numbers positions from pad_token_id + 1 */
    double layer_norm_eps;
    const char *activation;      /* tfenc's name: gelu (erf), gelu_tanh, relu */
    char *config_text;           /* config.json as read, stored in the weights file */
} model_config;

/* The WordPiece tokenizer settings stored under /tokenizer. */
typedef struct tokenizer_settings {
    int present;                 /* vocab.txt or tokenizer.json exists */
    tfenc_tokenizer *json;       /* tokenizer.json, when there is no vocab.txt */
    int do_lower_case;
    int strip_accents;           /* 1, 0, or -1 = follow do_lower_case */
    int tokenize_chinese_chars;
    char *special[4];            /* cls, sep, unk, pad */
    char *vocab_text;            /* vocab.txt, its newlines replaced by NULs */
    const char **vocab;          /* [vocab_count] pointers into vocab_text */
    int vocab_count;
} tokenizer_settings;

static const char *const special_names[4] = {"cls_token", "sep_token", "unk_token", "pad_token"};
static const char *const special_defaults[4] = {"[CLS]", "[SEP]", "[UNK]", "[PAD]"};

/* The sentence-transformers head (modules.json), if the model has one. */
typedef struct pooling_settings {
    int present;
    const char *mode; /* mean, cls or max */
    int normalize;
} pooling_settings;

/* One source tensor and where it goes in the weights file. */
typedef struct tensor_plan {
    char source[160]; /* name in model.safetensors, prefix included */
    char target[96];  /* HDF5 dataset path */
    int rank;
    int64_t dims[2];
    const tfenc_safetensors_tensor *tensor;
} tensor_plan;

typedef struct importer {
    tfenc_context *ctx;
    char *model_dir;       /* the directory as given */
    char *transformer_dir; /* where config.json lives (modules.json may name a subfolder) */
    model_config config;
    tokenizer_settings tokenizer;
    pooling_settings pooling;
    int max_length;        /* longest input in tokens, special tokens included */
    storage_dtype dtype;
    tfenc_safetensors *weights;
    tensor_plan *plan;
    int plan_count;
    long long n_parameters;
    const char *warning;   /* printed by main() when the import still succeeds */
} importer;

/* ------------------------------------------------------------ small helpers */

static char *join_path(const char *directory, const char *name)
{
    size_t length = strlen(directory) + strlen(name) + 2;
    char *path = malloc(length);
    if (path != NULL) {
        if (directory[0] == '\0' || name[0] == '\0')
            snprintf(path, length, "%s%s", directory, name);
        else
            snprintf(path, length, "%s/%s", directory, name);
    }
    return path;
}

static int file_exists(const char *path)
{
    struct stat info;
    return stat(path, &info) == 0 && S_ISREG(info.st_mode);
}

/* Reads the whole file into a NUL-terminated buffer. */
static int read_text_file(tfenc_context *ctx, const char *path, char **text, size_t *length)
{
    *text = NULL;
    FILE *stream = fopen(path, "rb");
    if (stream == NULL)
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    size_t capacity = 4096, used = 0;
    char *buffer = malloc(capacity);
    while (buffer != NULL) {
        used += fread(buffer + used, 1, capacity - used - 1, stream);
        if (used < capacity - 1)
            break;
        capacity *= 2;
        char *grown = realloc(buffer, capacity);
        if (grown == NULL)
            free(buffer);
        buffer = grown;
    }
    int failed = ferror(stream);
    fclose(stream);
    if (buffer == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", path);
    if (failed) {
        free(buffer);
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: read error", path);
    }
    buffer[used] = '\0';
    *text = buffer;
    if (length != NULL)
        *length = used;
    return TFENC_OK;
}

/* Hugging Face JSON files hold integers as large as 1e30 (model_max_length
 * for "no limit"), which jansson refuses as integers: read numbers as reals. */
static int load_json(tfenc_context *ctx, const char *path, json_t **json, char **text)
{
    char *buffer;
    size_t length;
    int status = read_text_file(ctx, path, &buffer, &length);
    if (status != TFENC_OK)
        return status;
    json_error_t error;
    *json = json_loadb(buffer, length, JSON_DECODE_INT_AS_REAL, &error);
    if (*json == NULL) {
        free(buffer);
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s:%d:%d: invalid JSON: %s", path,
                           error.line, error.column, error.text);
    }
    if (!json_is_object(*json)) {
        free(buffer);
        json_decref(*json);
        *json = NULL;
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: expected a JSON object", path);
    }
    if (text != NULL)
        *text = buffer;
    else
        free(buffer);
    return TFENC_OK;
}

/* An integral number in [minimum, INT_MAX]; `default_value` when absent
 * (a negative default_value below minimum makes the key required). */
static int json_int(tfenc_context *ctx, const char *path, json_t *object, const char *key,
                    int minimum, int default_value, int *value)
{
    json_t *item = json_object_get(object, key);
    if (item == NULL || json_is_null(item)) {
        if (default_value < minimum)
            return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: required key '%s' is missing", path,
                               key);
        *value = default_value;
        return TFENC_OK;
    }
    double number = json_number_value(item);
    if (!json_is_number(item) || number != floor(number) || number < minimum
        || number > INT_MAX)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "%s: key '%s' must be an integer >= %d", path, key, minimum);
    *value = (int)number;
    return TFENC_OK;
}

static int json_bool(tfenc_context *ctx, const char *path, json_t *object, const char *key,
                     int default_value, int *value)
{
    json_t *item = json_object_get(object, key);
    if (item == NULL || json_is_null(item)) {
        *value = default_value;
        return TFENC_OK;
    }
    if (!json_is_boolean(item))
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: key '%s' must be true or false", path,
                           key);
    *value = json_is_true(item);
    return TFENC_OK;
}

/* The part of an HDF5 error stack a user can act on ("file exists",
 * "no space left on device"), or a generic phrase. */
static herr_t hdf5_walk_innermost(unsigned n, const H5E_error2_t *error, void *data)
{
    char **reason = data;
    if (n == 0 && error->desc != NULL && *reason == NULL)
        *reason = strdup(error->desc);
    return 0;
}

static int hdf5_error(tfenc_context *ctx, const char *path, const char *what)
{
    char *reason = NULL;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, hdf5_walk_innermost, &reason);
    int status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot write %s (HDF5: %s)", path, what,
                             reason != NULL && reason[0] != '\0' ? reason : "unknown error");
    free(reason);
    return status;
}

/* ------------------------------------------------------------- config.json */

static int read_config(importer *self)
{
    tfenc_context *ctx = self->ctx;
    model_config *config = &self->config;
    char *path = join_path(self->transformer_dir, "config.json");
    if (path == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    json_t *json = NULL;
    int status = load_json(ctx, path, &json, &config->config_text);
    if (status != TFENC_OK)
        goto done;

    const char *model_type = json_string_value(json_object_get(json, "model_type"));
    if (model_type == NULL) {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: required key 'model_type' is missing "
                             "or not a string", path);
        goto done;
    }
    int is_roberta = strcmp(model_type, "roberta") == 0 || strcmp(model_type, "xlm-roberta") == 0;
    if (strcmp(model_type, "bert") != 0 && !is_roberta) {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                             "%s: model_type '%s' is not supported (tfenc-import reads bert, "
                             "roberta and xlm-roberta)", path, model_type);
        goto done;
    }
    config->model_type = strdup(model_type);

    const char *position_type = json_string_value(json_object_get(json,
                                                                  "position_embedding_type"));
    if (position_type != NULL && strcmp(position_type, "absolute") != 0) {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                             "%s: position_embedding_type '%s' is not supported (only "
                             "'absolute')", path, position_type);
        goto done;
    }

    const char *act = json_string_value(json_object_get(json, "hidden_act"));
    if (json_object_get(json, "hidden_act") == NULL)
        act = "gelu";
    if (act != NULL && strcmp(act, "gelu") == 0)
        config->activation = "gelu";
    else if (act != NULL && (strcmp(act, "gelu_new") == 0 || strcmp(act, "gelu_pytorch_tanh") == 0))
        config->activation = "gelu_tanh";
    else if (act != NULL && strcmp(act, "relu") == 0)
        config->activation = "relu";
    else {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                             "%s: hidden_act '%s' is not supported (tfenc-import maps gelu, "
                             "gelu_new, gelu_pytorch_tanh and relu)", path,
                             act != NULL ? act : "(not a string)");
        goto done;
    }

    if ((status = json_int(ctx, path, json, "hidden_size", 1, -1, &config->d_model))
        || (status = json_int(ctx, path, json, "num_attention_heads", 1, -1, &config->n_heads))
        || (status = json_int(ctx, path, json, "num_hidden_layers", 1, -1, &config->n_layers))
        || (status = json_int(ctx, path, json, "intermediate_size", 1, -1, &config->ffn_width))
        || (status = json_int(ctx, path, json, "vocab_size", 1, -1, &config->vocab_size))
        || (status = json_int(ctx, path, json, "max_position_embeddings", 1, 512,
                              &config->max_position_embeddings))
        || (status = json_int(ctx, path, json, "type_vocab_size", 0, 2,
                              &config->type_vocab_size))
        || (status = json_int(ctx, path, json, "pad_token_id", 0, is_roberta ? 1 : 0,
                              &config->pad_token_id)))
        goto done;
    if (config->d_model % config->n_heads != 0) {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: hidden_size %d is not a multiple of "
                             "num_attention_heads %d", path, config->d_model, config->n_heads);
        goto done;
    }
    json_t *eps = json_object_get(json, "layer_norm_eps");
    config->layer_norm_eps = eps == NULL ? 1e-12 : json_number_value(eps);
    if (eps != NULL && (!json_is_number(eps) || !(config->layer_norm_eps > 0))) {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: layer_norm_eps must be a positive "
                             "number", path);
        goto done;
    }
    /* RoBERTa's position ids start after padding_idx (create_position_ids_from_input_ids). */
    config->position_offset = is_roberta ? config->pad_token_id + 1 : 0;
    if (config->position_offset >= config->max_position_embeddings) {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: pad_token_id %d leaves no position "
                             "of max_position_embeddings %d", path, config->pad_token_id,
                             config->max_position_embeddings);
        goto done;
    }
done:
    json_decref(json);
    free(path);
    return status;
}

/* ----------------------------------------------------- sentence-transformers */

/* Type names look like "sentence_transformers.models.Pooling". */
static int module_is(const char *type, const char *name)
{
    size_t type_length = strlen(type), name_length = strlen(name);
    return type_length >= name_length && strcmp(type + type_length - name_length, name) == 0
           && (type_length == name_length || type[type_length - name_length - 1] == '.');
}

static int read_pooling_config(importer *self, const char *directory)
{
    tfenc_context *ctx = self->ctx;
    char *path = join_path(directory, "config.json");
    if (path == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    json_t *json = NULL;
    int status = load_json(ctx, path, &json, NULL);
    if (status != TFENC_OK)
        goto done;
    static const struct {
        const char *key;
        const char *mode; /* NULL: tfenc has no such pooling */
    } modes[] = {
        {"pooling_mode_cls_token", "cls"},
        {"pooling_mode_mean_tokens", "mean"},
        {"pooling_mode_max_tokens", "max"},
        {"pooling_mode_mean_sqrt_len_tokens", NULL},
        {"pooling_mode_weightedmean_tokens", NULL},
        {"pooling_mode_lasttoken", NULL},
    };
    int n_enabled = 0;
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        int enabled = 0;
        if ((status = json_bool(ctx, path, json, modes[i].key, 0, &enabled)) != TFENC_OK)
            goto done;
        if (!enabled)
            continue;
        if (modes[i].mode == NULL) {
            status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: %s is not supported by tfenc's "
                                 "pooling (cls, mean or max)", path, modes[i].key);
            goto done;
        }
        self->pooling.mode = modes[i].mode;
        n_enabled++;
    }
    if (n_enabled != 1) {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: exactly one pooling mode must be true "
                             "(found %d; sentence-transformers concatenates several, tfenc does "
                             "not)", path, n_enabled);
        goto done;
    }
    int width;
    if ((status = json_int(ctx, path, json, "word_embedding_dimension", 1, self->config.d_model,
                           &width)) != TFENC_OK)
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

/* modules.json lists the sentence-transformers pipeline: Transformer,
 * Pooling, optional Normalize. Anything else (Dense, ...) would change the
 * embeddings in ways the job cannot express, so it is refused. The Pooling
 * folder is returned in *pooling_dir (NULL when there is none). */
static int read_modules(importer *self, char **pooling_dir)
{
    tfenc_context *ctx = self->ctx;
    *pooling_dir = NULL;
    char *path = join_path(self->model_dir, "modules.json");
    if (path == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    int status = TFENC_OK;
    json_t *json = NULL;
    char *text = NULL;
    if (!file_exists(path))
        goto done;
    if ((status = read_text_file(ctx, path, &text, NULL)) != TFENC_OK)
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
        if (module_is(type, "Transformer") && index == 0)
            slot = &self->transformer_dir;
        else if (module_is(type, "Pooling") && index == 1)
            slot = pooling_dir;
        else if (module_is(type, "Normalize") && index == 2 && *pooling_dir != NULL)
            self->pooling.normalize = 1;
        else {
            status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: module %zu of type '%s' is not "
                                 "supported here (tfenc-import reads Transformer, Pooling, "
                                 "Normalize in that order)", path, index, type);
            goto done;
        }
        if (slot != NULL) {
            free(*slot);
            if ((*slot = join_path(self->model_dir, module_path)) == NULL) {
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

/* ---------------------------------------------------------------- tokenizer */

/* A special token in tokenizer_config.json is a string or, in newer files,
 * an object {"content": "[CLS]", ...}. */
static const char *token_string(json_t *item)
{
    if (json_is_object(item))
        item = json_object_get(item, "content");
    return json_string_value(item);
}

static int read_vocab(importer *self, const char *path)
{
    tokenizer_settings *tokenizer = &self->tokenizer;
    size_t length;
    int status = read_text_file(self->ctx, path, &tokenizer->vocab_text, &length);
    if (status != TFENC_OK)
        return status;
    /* One token per line, id = line number; only "\n" ends a line, as in
     * transformers' load_vocab (token.rstrip("\n")). */
    size_t lines = 0;
    for (size_t i = 0; i < length; i++)
        lines += tokenizer->vocab_text[i] == '\n';
    if (length > 0 && tokenizer->vocab_text[length - 1] != '\n')
        lines++;
    if (lines == 0)
        return tfenc_error(self->ctx, TFENC_ERR_CONFIG, "%s: the vocabulary is empty", path);
    if (lines > (size_t)self->config.vocab_size)
        return tfenc_error(self->ctx, TFENC_ERR_CONFIG, "%s: %zu tokens, more than config.json "
                           "vocab_size %d", path, lines, self->config.vocab_size);
    tokenizer->vocab = malloc(lines * sizeof *tokenizer->vocab);
    if (tokenizer->vocab == NULL)
        return tfenc_error(self->ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", path);
    char *line = tokenizer->vocab_text;
    for (size_t i = 0; i < lines; i++) {
        char *newline = strchr(line, '\n');
        if (newline != NULL)
            *newline = '\0';
        if (strlen(line) != (size_t)((newline != NULL ? newline : tokenizer->vocab_text + length)
                                     - line))
            return tfenc_error(self->ctx, TFENC_ERR_CONFIG, "%s:%zu: NUL byte in token", path,
                               i + 1);
        /* HDF5 stores the tokens as UTF-8 strings: they must be valid. */
        const utf8proc_uint8_t *bytes = (const utf8proc_uint8_t *)line;
        utf8proc_int32_t codepoint;
        for (utf8proc_ssize_t n; *bytes != '\0'; bytes += n) {
            n = utf8proc_iterate(bytes, -1, &codepoint);
            if (n < 0)
                return tfenc_error(self->ctx, TFENC_ERR_CONFIG, "%s:%zu: token is not valid "
                                   "UTF-8", path, i + 1);
        }
        tokenizer->vocab[i] = line;
        line = newline != NULL ? newline + 1 : line + strlen(line);
    }
    tokenizer->vocab_count = (int)lines;
    return TFENC_OK;
}

static int read_tokenizer(importer *self)
{
    tfenc_context *ctx = self->ctx;
    tokenizer_settings *tokenizer = &self->tokenizer;
    const char *dir = self->transformer_dir;
    char *vocab_path = join_path(dir, "vocab.txt");
    char *config_path = join_path(dir, "tokenizer_config.json");
    char *map_path = join_path(dir, "special_tokens_map.json");
    char *st_path = join_path(self->model_dir, "sentence_bert_config.json");
    json_t *config = NULL, *map = NULL, *st = NULL;
    int status = TFENC_OK;
    if (vocab_path == NULL || config_path == NULL || map_path == NULL || st_path == NULL) {
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        goto done;
    }

    /* The longest input: the position table less RoBERTa's offset, cut
     * further by the tokenizer's and sentence-transformers' limits. */
    self->max_length = self->config.max_position_embeddings - self->config.position_offset;
    if (file_exists(config_path) && (status = load_json(ctx, config_path, &config, NULL)))
        goto done;
    if (file_exists(map_path) && (status = load_json(ctx, map_path, &map, NULL)))
        goto done;
    if (file_exists(st_path) && (status = load_json(ctx, st_path, &st, NULL)))
        goto done;
    json_t *model_max = json_object_get(config, "model_max_length");
    if (json_is_number(model_max) && json_number_value(model_max) >= 1
        && json_number_value(model_max) < self->max_length)
        self->max_length = (int)json_number_value(model_max);
    int st_max_length;
    if ((status = json_int(ctx, st_path, st, "max_seq_length", 1, INT_MAX, &st_max_length)))
        goto done;
    if (st_max_length < self->max_length)
        self->max_length = st_max_length;

    if (!file_exists(vocab_path)) {
        /* RoBERTa's byte-level BPE and XLM-R's SentencePiece come as a
         * tokenizer.json, stored whole in the weights file. */
        char *json_path = join_path(dir, "tokenizer.json");
        if (json_path == NULL) {
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
            goto done;
        }
        if (file_exists(json_path)) {
            status = tfenc_tokenizer_create_from_json_file(ctx, json_path, NULL, &tokenizer->json);
            if (status == TFENC_OK && tfenc_tokenizer_vocab_size(tokenizer->json) > self->config.vocab_size)
                status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: ids up to %d, more than config.json "
                                     "vocab_size %d", json_path,
                                     tfenc_tokenizer_vocab_size(tokenizer->json) - 1,
                                     self->config.vocab_size);
            tokenizer->present = status == TFENC_OK;
        } else {
            self->warning = "no vocab.txt or tokenizer.json: the weights file has no tokenizer; "
                            "feed the job HDF5 token ids (input_format = hdf5)";
        }
        free(json_path);
        goto done;
    }
    tokenizer->present = 1;
    int st_lower;
    if ((status = json_bool(ctx, config_path, config, "do_lower_case", 1,
                            &tokenizer->do_lower_case))
        || (status = json_bool(ctx, config_path, config, "tokenize_chinese_chars", 1,
                               &tokenizer->tokenize_chinese_chars))
        || (status = json_bool(ctx, st_path, st, "do_lower_case", 0, &st_lower)))
        goto done;
    /* sentence-transformers lowercases the text itself when asked to. */
    if (st_lower)
        tokenizer->do_lower_case = 1;
    json_t *strip = json_object_get(config, "strip_accents");
    if (strip == NULL || json_is_null(strip))
        tokenizer->strip_accents = -1;
    else if (json_is_boolean(strip))
        tokenizer->strip_accents = json_is_true(strip);
    else {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: key 'strip_accents' must be true, "
                             "false or null", config_path);
        goto done;
    }

    if ((status = read_vocab(self, vocab_path)) != TFENC_OK)
        goto done;
    for (int i = 0; i < 4; i++) {
        const char *token = token_string(json_object_get(config, special_names[i]));
        if (token == NULL)
            token = token_string(json_object_get(map, special_names[i]));
        if (token == NULL)
            token = special_defaults[i];
        int found = 0;
        for (int id = 0; id < tokenizer->vocab_count && !found; id++)
            found = strcmp(tokenizer->vocab[id], token) == 0;
        if (!found) {
            status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: %s '%s' is not in the vocabulary",
                                 vocab_path, special_names[i], token);
            goto done;
        }
        if ((tokenizer->special[i] = strdup(token)) == NULL) {
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
            goto done;
        }
    }
done:
    json_decref(config);
    json_decref(map);
    json_decref(st);
    free(vocab_path);
    free(config_path);
    free(map_path);
    free(st_path);
    return status;
}

/* ------------------------------------------------------------------ tensors */

static int add_plan(importer *self, int capacity, const char *prefix, const char *source,
                    const char *target, int rank, int64_t dim0, int64_t dim1)
{
    if (self->plan_count >= capacity)
        return tfenc_error(self->ctx, TFENC_ERR_INTERNAL, "tensor plan overflow");
    tensor_plan *item = &self->plan[self->plan_count++];
    snprintf(item->source, sizeof item->source, "%s%s", prefix, source);
    snprintf(item->target, sizeof item->target, "%s", target);
    item->rank = rank;
    item->dims[0] = dim0;
    item->dims[1] = dim1;
    return TFENC_OK;
}

static void format_shape(char *text, size_t size, int rank, const int64_t *dims)
{
    size_t used = (size_t)snprintf(text, size, "[");
    for (int i = 0; i < rank && used < size; i++)
        used += (size_t)snprintf(text + used, size - used, "%s%lld", i ? ", " : "",
                                 (long long)dims[i]);
    if (used < size)
        snprintf(text + used, size - used, "]");
}

/* Finds every tensor the model needs and checks its shape and dtype before
 * anything is written, so a bad checkpoint leaves no output behind. */
static int plan_tensors(importer *self, const char *safetensors_path)
{
    tfenc_context *ctx = self->ctx;
    const model_config *c = &self->config;
    /* sentence-transformers saves the bare BertModel; HF task heads prefix it. */
    static const char *const prefixes[] = {"", "bert.", "roberta."};
    const char *prefix = NULL;
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0] && prefix == NULL; i++) {
        char name[64];
        snprintf(name, sizeof name, "%sembeddings.word_embeddings.weight", prefixes[i]);
        if (tfenc_safetensors_find(self->weights, name) != NULL)
            prefix = prefixes[i];
    }
    if (prefix == NULL)
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: tensor "
                           "'embeddings.word_embeddings.weight' not found (nor with the prefix "
                           "'bert.' or 'roberta.')", safetensors_path);

    int capacity = 5 + 16 * c->n_layers;
    self->plan = calloc((size_t)capacity, sizeof *self->plan);
    if (self->plan == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    int64_t d = c->d_model, f = c->ffn_width;
    int status;
    if ((status = add_plan(self, capacity, prefix, "embeddings.word_embeddings.weight",
                           "/embeddings/token_embeddings", 2, c->vocab_size, d))
        || (status = add_plan(self, capacity, prefix, "embeddings.position_embeddings.weight",
                              "/embeddings/position_embeddings", 2,
                              c->max_position_embeddings, d))
        || (c->type_vocab_size > 0
            && (status = add_plan(self, capacity, prefix,
                                  "embeddings.token_type_embeddings.weight",
                                  "/embeddings/token_type_embeddings", 2, c->type_vocab_size, d)))
        || (status = add_plan(self, capacity, prefix, "embeddings.LayerNorm.weight",
                              "/embeddings_norm/weight", 1, d, 0))
        || (status = add_plan(self, capacity, prefix, "embeddings.LayerNorm.bias",
                              "/embeddings_norm/bias", 1, d, 0)))
        return status;

    static const struct {
        const char *source;     /* after "encoder.layer.{i}." */
        const char *target;     /* after "/encoder/{i}/" */
        char rows, columns;     /* 'd' d_model, 'f' ffn width, 0 none */
    } layer_tensors[] = {
        {"attention.self.query.weight", "attention/q_weight", 'd', 'd'},
        {"attention.self.query.bias", "attention/q_bias", 'd', 0},
        {"attention.self.key.weight", "attention/k_weight", 'd', 'd'},
        {"attention.self.key.bias", "attention/k_bias", 'd', 0},
        {"attention.self.value.weight", "attention/v_weight", 'd', 'd'},
        {"attention.self.value.bias", "attention/v_bias", 'd', 0},
        {"attention.output.dense.weight", "attention/out_weight", 'd', 'd'},
        {"attention.output.dense.bias", "attention/out_bias", 'd', 0},
        {"attention.output.LayerNorm.weight", "attention/norm/weight", 'd', 0},
        {"attention.output.LayerNorm.bias", "attention/norm/bias", 'd', 0},
        {"intermediate.dense.weight", "ffn/in_weight", 'f', 'd'},
        {"intermediate.dense.bias", "ffn/in_bias", 'f', 0},
        {"output.dense.weight", "ffn/out_weight", 'd', 'f'},
        {"output.dense.bias", "ffn/out_bias", 'd', 0},
        {"output.LayerNorm.weight", "ffn/norm/weight", 'd', 0},
        {"output.LayerNorm.bias", "ffn/norm/bias", 'd', 0},
    };
    for (int layer = 0; layer < c->n_layers; layer++) {
        for (size_t i = 0; i < sizeof layer_tensors / sizeof layer_tensors[0]; i++) {
            char source[128], target[96];
            snprintf(source, sizeof source, "encoder.layer.%d.%s", layer,
                     layer_tensors[i].source);
            snprintf(target, sizeof target, "/encoder/%d/%s", layer, layer_tensors[i].target);
            int64_t rows = layer_tensors[i].rows == 'f' ? f : d;
            int64_t columns = layer_tensors[i].columns == 'f' ? f : d;
            if ((status = add_plan(self, capacity, prefix, source, target,
                                   layer_tensors[i].columns ? 2 : 1, rows, columns)))
                return status;
        }
    }

    for (int i = 0; i < self->plan_count; i++) {
        tensor_plan *item = &self->plan[i];
        item->tensor = tfenc_safetensors_find(self->weights, item->source);
        if (item->tensor == NULL)
            return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: tensor '%s' not found (needed for "
                               "%s)", safetensors_path, item->source, item->target);
        int same = item->tensor->rank == item->rank;
        for (int k = 0; same && k < item->rank; k++)
            same = item->tensor->dims[k] == item->dims[k];
        if (!same) {
            char expected[64], found[64];
            format_shape(expected, sizeof expected, item->rank, item->dims);
            format_shape(found, sizeof found, item->tensor->rank, item->tensor->dims);
            return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: tensor '%s' has shape %s, "
                               "config.json implies %s", safetensors_path, item->source, found,
                               expected);
        }
        const char *dtype = item->tensor->dtype;
        if (strcmp(dtype, "F32") != 0 && strcmp(dtype, "F16") != 0 && strcmp(dtype, "BF16") != 0)
            return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: tensor '%s' has dtype %s (expected "
                               "F32, F16 or BF16)", safetensors_path, item->source, dtype);
        self->n_parameters += item->tensor->n_elements;
    }
    return TFENC_OK;
}

static int open_weights(importer *self)
{
    tfenc_context *ctx = self->ctx;
    const char *dir = self->transformer_dir;
    char *path = join_path(dir, "model.safetensors");
    char *bin_path = join_path(dir, "pytorch_model.bin");
    char *index_path = join_path(dir, "model.safetensors.index.json");
    int status;
    if (path == NULL || bin_path == NULL || index_path == NULL) {
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    } else if (file_exists(path)) {
        status = tfenc_safetensors_open(ctx, path, &self->weights);
        if (status == TFENC_OK)
            status = plan_tensors(self, path);
    } else if (file_exists(index_path)) {
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: sharded checkpoints are not "
                             "supported; save the model as one model.safetensors", index_path);
    } else if (file_exists(bin_path)) {
        /* Reading a pickle would mean running Python code: ask for a conversion. */
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS,
                             "%s: only pytorch_model.bin is present and tfenc-import reads "
                             "model.safetensors; convert it once with: python3 -c \"import "
                             "torch, safetensors.torch as s; d = torch.load('%s', "
                             "map_location='cpu'); s.save_file({k: v.clone().contiguous() for "
                             "k, v in d.items()}, '%s')\"", dir, bin_path, path);
    } else {
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: not found (a Hugging Face model "
                             "directory holds config.json and model.safetensors)", path);
    }
    free(path);
    free(bin_path);
    free(index_path);
    return status;
}

/* -------------------------------------------------------------- HDF5 output */

static int write_string_attribute(tfenc_context *ctx, const char *path, hid_t location,
                                  const char *name, const char *value)
{
    hid_t type = H5Tcopy(H5T_C_S1);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t attribute = -1;
    int ok = type >= 0 && space >= 0 && H5Tset_size(type, H5T_VARIABLE) >= 0
             && H5Tset_cset(type, H5T_CSET_UTF8) >= 0
             && (attribute = H5Acreate2(location, name, type, space, H5P_DEFAULT,
                                        H5P_DEFAULT)) >= 0
             && H5Awrite(attribute, type, &value) >= 0;
    if (attribute >= 0)
        H5Aclose(attribute);
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    return ok ? TFENC_OK : hdf5_error(ctx, path, name);
}

static int write_int_attribute(tfenc_context *ctx, const char *path, hid_t location,
                               const char *name, int value)
{
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t attribute = -1;
    int ok = space >= 0
             && (attribute = H5Acreate2(location, name, H5T_STD_I32LE, space, H5P_DEFAULT,
                                        H5P_DEFAULT)) >= 0
             && H5Awrite(attribute, H5T_NATIVE_INT, &value) >= 0;
    if (attribute >= 0)
        H5Aclose(attribute);
    if (space >= 0)
        H5Sclose(space);
    return ok ? TFENC_OK : hdf5_error(ctx, path, name);
}

/* Writes `data` (count values) as dataset `name` with `rank`/`dims`. The
 * 16-bit storage types are filled by tfenc's own rounding (nearest, ties to
 * even, as PyTorch's .half()/.bfloat16()), not by HDF5's conversion, which
 * rounds some ties differently. */
static int write_dataset(importer *self, const char *path, hid_t file, hid_t create_groups,
                         const char *name, int rank, const int64_t *dims, const float *data)
{
    tfenc_context *ctx = self->ctx;
    hsize_t shape[2];
    size_t count = 1;
    for (int i = 0; i < rank; i++) {
        shape[i] = (hsize_t)dims[i];
        count *= (size_t)dims[i];
    }
    hid_t type = self->dtype == STORAGE_FLOAT16 ? tfenc_h5_float16_type()
                 : self->dtype == STORAGE_BFLOAT16 ? tfenc_h5_bfloat16_type()
                 : H5Tcopy(H5T_IEEE_F32LE);
    hid_t space = H5Screate_simple(rank, shape, NULL);
    hid_t dataset = -1;
    int status = TFENC_OK;
    uint16_t *narrow = NULL;
    if (type < 0 || space < 0) {
        status = hdf5_error(ctx, path, name);
        goto done;
    }
    const void *buffer = data;
    hid_t memory_type = H5T_NATIVE_FLOAT;
    if (self->dtype != STORAGE_FLOAT32) {
        narrow = malloc(count * sizeof *narrow + 1);
        if (narrow == NULL) {
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for %s", name);
            goto done;
        }
        if (self->dtype == STORAGE_FLOAT16)
            tfenc_float32_to_float16_array(narrow, data, count);
        else
            tfenc_float32_to_bfloat16_array(narrow, data, count);
        for (size_t i = 0; i < count; i++) {
            if ((narrow[i] & 0x7fffu) >= (self->dtype == STORAGE_FLOAT16 ? 0x7c00u : 0x7f80u)) {
                status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: value %g of %s overflows "
                                     "%s; use --dtype bfloat16 or float32", path,
                                     (double)data[i], name, storage_names[self->dtype]);
                goto done;
            }
        }
        buffer = narrow;
        memory_type = type;
    }
    dataset = H5Dcreate2(file, name, type, space, create_groups, H5P_DEFAULT, H5P_DEFAULT);
    if (dataset < 0 || H5Dwrite(dataset, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer) < 0)
        status = hdf5_error(ctx, path, name);
done:
    free(narrow);
    if (dataset >= 0)
        H5Dclose(dataset);
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    return status;
}

/* The tokenizer goes through core's tfenc_tokenizer_store (the layout
 * tfenc-batch's tfenc_tokenizer_load reads); max_length is the importer's. */
static int write_tokenizer(importer *self, const char *path, hid_t file)
{
    tfenc_context *ctx = self->ctx;
    const tokenizer_settings *settings = &self->tokenizer;
    tfenc_tokenizer *wordpiece = NULL;
    int status = TFENC_OK;
    if (settings->json == NULL) {
        tfenc_tokenizer_options options;
        tfenc_tokenizer_options_default(&options);
        options.lowercase = settings->do_lower_case;
        options.strip_accents = settings->strip_accents;
        options.chinese_chars = settings->tokenize_chinese_chars;
        status = tfenc_tokenizer_create_from_tokens(ctx, settings->vocab, settings->vocab_count,
                                                    &options, &wordpiece);
    }
    if (status == TFENC_OK)
        status = tfenc_tokenizer_store(ctx, settings->json != NULL ? settings->json : wordpiece,
                                       file, path);
    tfenc_tokenizer_destroy(wordpiece);
    hid_t group = status == TFENC_OK ? H5Gopen2(file, "/tokenizer", H5P_DEFAULT) : -1;
    if (status == TFENC_OK && group < 0)
        status = hdf5_error(ctx, path, "/tokenizer");
    if (status == TFENC_OK)
        status = write_int_attribute(ctx, path, group, "max_length", self->max_length);
    if (group >= 0)
        H5Gclose(group);
    return status;
}

static int write_weights(importer *self, const char *path)
{
    tfenc_context *ctx = self->ctx;
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0)
        return hdf5_error(ctx, path, "the file");
    hid_t create_groups = H5Pcreate(H5P_LINK_CREATE);
    int status = TFENC_OK;
    float *data = NULL;
    if (create_groups < 0 || H5Pset_create_intermediate_group(create_groups, 1) < 0) {
        status = hdf5_error(ctx, path, "the file");
        goto done;
    }
    for (int i = 0; i < self->plan_count; i++) {
        const tensor_plan *item = &self->plan[i];
        /* +1: a zero-size tensor still gets a pointer to pass around. */
        data = malloc((size_t)item->tensor->n_elements * sizeof *data + 1);
        if (data == NULL) {
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for tensor '%s'",
                                 item->source);
            goto done;
        }
        status = tfenc_safetensors_read_float32(ctx, self->weights, item->tensor, data);
        if (status != TFENC_OK)
            goto done;
        /* tfenc refuses non-finite weights at load time: say so now, by name. */
        for (int64_t k = 0; k < item->tensor->n_elements; k++) {
            if (!isfinite(data[k])) {
                status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: tensor '%s' holds a "
                                     "non-finite value at element %lld",
                                     tfenc_safetensors_name(self->weights), item->source,
                                     (long long)k);
                goto done;
            }
        }
        status = write_dataset(self, path, file, create_groups, item->target, item->rank,
                               item->dims, data);
        if (status != TFENC_OK)
            goto done;
        free(data);
        data = NULL;
    }
    if (self->tokenizer.present
        && (status = write_tokenizer(self, path, file)) != TFENC_OK)
        goto done;

    char *source = realpath(self->model_dir, NULL);
    status = write_string_attribute(ctx, path, file, "source",
                                    source != NULL ? source : self->model_dir);
    free(source);
    if (status == TFENC_OK)
        status = write_string_attribute(ctx, path, file, "config_json",
                                        self->config.config_text);
    if (status == TFENC_OK)
        status = write_string_attribute(ctx, path, file, "importer_version", IMPORTER_VERSION);
    if (status == TFENC_OK)
        status = write_string_attribute(ctx, path, file, "model_type", self->config.model_type);
done:
    free(data);
    if (create_groups >= 0)
        H5Pclose(create_groups);
    if (H5Fclose(file) < 0 && status == TFENC_OK)
        status = hdf5_error(ctx, path, "the file");
    return status;
}

/* ----------------------------------------------------------------- job file */

/* `target` relative to directory `from` (both absolute and normalised by
 * realpath), so that the job keeps working when both move together. */
static char *relative_path(const char *from, const char *target)
{
    /* `common` ends the longest run of whole components both share. */
    size_t common = 0;
    for (size_t i = 0;; i++) {
        int from_end = from[i] == '/' || from[i] == '\0';
        int target_end = target[i] == '/' || target[i] == '\0';
        if (from_end && target_end)
            common = i;
        if (from[i] != target[i] || from[i] == '\0')
            break;
    }
    int ups = 0;
    for (size_t i = common; from[i] != '\0'; i++)
        ups += from[i] != '/' && (i == 0 || from[i - 1] == '/');
    const char *rest = target + common;
    while (*rest == '/')
        rest++;
    char *result = malloc((size_t)ups * 3 + strlen(rest) + 1);
    if (result == NULL)
        return NULL;
    result[0] = '\0';
    for (int i = 0; i < ups; i++)
        strcat(result, "../");
    strcat(result, rest);
    return result;
}

/* The absolute directory holding `path` (which need not exist yet). */
static char *absolute_directory(const char *path)
{
    char *copy = strdup(path);
    if (copy == NULL)
        return NULL;
    char *slash = strrchr(copy, '/');
    if (slash == copy)
        slash[1] = '\0';
    else if (slash != NULL)
        *slash = '\0';
    char *result = realpath(slash != NULL ? copy : ".", NULL);
    free(copy);
    return result;
}

/* The shortest decimal form that reads back as exactly `value` ("1e-12"). */
static void format_double(char *text, size_t size, double value)
{
    for (int precision = 1; precision <= 17; precision++) {
        snprintf(text, size, "%.*g", precision, value);
        if (strtod(text, NULL) == value)
            return;
    }
}

static int write_job(importer *self, const char *job_tmp, const char *job_path,
                     const char *weights_path)
{
    tfenc_context *ctx = self->ctx;
    const model_config *c = &self->config;
    char *job_dir = absolute_directory(job_path);
    char *weights_dir = absolute_directory(weights_path);
    const char *weights_name = strrchr(weights_path, '/');
    weights_name = weights_name != NULL ? weights_name + 1 : weights_path;
    char *weights_absolute = weights_dir != NULL ? join_path(weights_dir, weights_name) : NULL;
    char *weights_relative = job_dir != NULL && weights_absolute != NULL
                             ? relative_path(job_dir, weights_absolute) : NULL;
    int status = TFENC_OK;
    FILE *out = NULL;
    if (weights_relative == NULL) {
        status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot resolve the directories of the job "
                             "and of %s", job_path, weights_path);
        goto done;
    }
    if (strpbrk(weights_relative, "\n;#") != NULL) {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: the weights path '%s' holds a "
                             "character a job file cannot carry (newline, ';' or '#')", job_path,
                             weights_relative);
        goto done;
    }
    out = fopen(job_tmp, "w");
    if (out == NULL) {
        status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot create: %s", job_tmp,
                             strerror(errno));
        goto done;
    }
    char *source = realpath(self->model_dir, NULL);
    fprintf(out, "; Written by %s from %s\n; (%s, %d layers, d_model %d, %lld parameters).\n",
            IMPORTER_VERSION, source != NULL ? source : self->model_dir, c->model_type,
            c->n_layers, c->d_model, self->n_parameters);
    free(source);
    fprintf(out, "; `input` is a placeholder: point it at a corpus (one document per line)\n"
                 "; here or on the command line, e.g.\n"
                 ";   tfenc-batch --set job.input=corpus.txt --set job.output=out.h5 JOB\n\n");
    fprintf(out, "[job]\n");
    if (!self->tokenizer.present)
        fprintf(out, "; This model has no WordPiece vocabulary: give it HDF5 token ids.\n"
                     "input = tokens.h5\ninput_format = hdf5\n");
    else
        fprintf(out, "input = corpus.txt\n");
    fprintf(out, "output = embeddings.h5\nmax_seq_len = %d\n\n", self->max_length);
    fprintf(out, "[model]\nweights = %s\nd_model = %d\nvocab_size = %d\nmax_positions = %d\n\n",
            weights_relative, c->d_model, c->vocab_size,
            c->max_position_embeddings - c->position_offset);
    if (self->tokenizer.present)
        fprintf(out, "; No [tokenizer] section: the vocabulary and its settings are read\n"
                     "; from the weights file (/tokenizer).\n\n");
    fprintf(out, "[embeddings]\ntype = embedding\nlearned_positions = true\ntoken_types = %s\n",
            c->type_vocab_size > 0 ? "true" : "false");
    if (c->position_offset != 0)
        fprintf(out, "; RoBERTa numbers positions from padding_idx + 1.\nposition_offset = %d\n",
                c->position_offset);
    char eps[32];
    format_double(eps, sizeof eps, c->layer_norm_eps);
    fprintf(out, "\n[embeddings_norm]\ntype = layernorm\neps = %s\n\n", eps);
    fprintf(out, "[encoder]\nrepeat = %d\nnorm_position = post\n\n", c->n_layers);
    fprintf(out, "[encoder.attention]\ntype = mha\nn_heads = %d\n\n", c->n_heads);
    fprintf(out, "[encoder.attention.norm]\ntype = layernorm\neps = %s\n\n", eps);
    fprintf(out, "[encoder.ffn]\ntype = ffn\nactivation = %s\n\n", c->activation);
    fprintf(out, "[encoder.ffn.norm]\ntype = layernorm\neps = %s\n", eps);
    if (self->pooling.present)
        fprintf(out, "\n[pooling]\ntype = pooling\nmode = %s\nnormalize = %s\n",
                self->pooling.mode, self->pooling.normalize ? "true" : "false");
    else
        fprintf(out, "\n; No sentence-transformers pooling in the checkpoint: the output holds\n"
                     "; per-token hidden states. Add a [pooling] section for one vector each.\n");
    if (fclose(out) != 0) {
        out = NULL;
        status = tfenc_error(ctx, TFENC_ERR_IO, "%s: write error: %s", job_tmp, strerror(errno));
        goto done;
    }
    out = NULL;
done:
    if (out != NULL)
        fclose(out);
    free(job_dir);
    free(weights_dir);
    free(weights_absolute);
    free(weights_relative);
    return status;
}

/* --------------------------------------------------------------------- main */

static void importer_free(importer *self)
{
    tfenc_safetensors_close(self->weights);
    free(self->plan);
    free(self->transformer_dir);
    free(self->config.model_type);
    free(self->config.config_text);
    for (int i = 0; i < 4; i++)
        free(self->tokenizer.special[i]);
    free(self->tokenizer.vocab);
    tfenc_tokenizer_destroy(self->tokenizer.json);
    free(self->tokenizer.vocab_text);
}

static void usage(FILE *stream)
{
    fprintf(stream,
            "usage: tfenc-import HF_MODEL_DIR -o MODEL.h5 [--job JOB.ini] "
            "[--dtype float32|float16|bfloat16]\n"
            "Converts a Hugging Face BERT/RoBERTa checkpoint (config.json, model.safetensors,\n"
            "vocab.txt, sentence-transformers modules) into a tfenc weights file and,\n"
            "with --job, a job file that computes the same embeddings.\n");
}

static char *temporary_name(const char *path)
{
    char *name = malloc(strlen(path) + 5);
    if (name != NULL)
        sprintf(name, "%s.tmp", path);
    return name;
}

int main(int argc, char **argv)
{
    const char *model_dir = NULL, *output = NULL, *job = NULL;
    storage_dtype dtype = STORAGE_FLOAT32;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(arg, "--version") == 0) {
            printf("%s\n", IMPORTER_VERSION);
            return 0;
        } else if ((strcmp(arg, "-o") == 0 || strcmp(arg, "--output") == 0
                    || strcmp(arg, "--job") == 0 || strcmp(arg, "--dtype") == 0)) {
            if (i + 1 >= argc) {
                fprintf(stderr, "tfenc-import: %s needs a value\n", arg);
                return 2;
            }
            const char *value = argv[++i];
            if (strcmp(arg, "--job") == 0) {
                job = value;
            } else if (strcmp(arg, "--dtype") == 0) {
                int found = 0;
                for (int k = 0; k < 3 && !found; k++)
                    if (strcmp(value, storage_names[k]) == 0) {
                        dtype = (storage_dtype)k;
                        found = 1;
                    }
                if (!found) {
                    fprintf(stderr, "tfenc-import: --dtype '%s' is not float32, float16 or "
                            "bfloat16\n", value);
                    return 2;
                }
            } else {
                output = value;
            }
        } else if (arg[0] == '-' && arg[1] != '\0') {
            fprintf(stderr, "tfenc-import: unknown option '%s' (see --help)\n", arg);
            return 2;
        } else if (model_dir == NULL) {
            model_dir = arg;
        } else {
            fprintf(stderr, "tfenc-import: one model directory expected, got '%s' and '%s'\n",
                    model_dir, arg);
            return 2;
        }
    }
    if (model_dir == NULL || output == NULL) {
        usage(stderr);
        return 2;
    }

    /* The one-line message below says what failed; HDF5's stack dump would
     * bury it. */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    importer self = {.ctx = &ctx, .dtype = dtype};
    char *weights_tmp = temporary_name(output);
    char *job_tmp = job != NULL ? temporary_name(job) : NULL;
    int weights_written = 0, job_written = 0;
    int status = TFENC_OK;
    self.model_dir = strdup(model_dir);
    self.transformer_dir = strdup(model_dir);
    if (weights_tmp == NULL || (job != NULL && job_tmp == NULL) || self.model_dir == NULL
        || self.transformer_dir == NULL) {
        status = tfenc_error(&ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    struct stat info;
    if (stat(model_dir, &info) != 0 || !S_ISDIR(info.st_mode)) {
        status = tfenc_error(&ctx, TFENC_ERR_IO, "%s: not a directory", model_dir);
        goto done;
    }
    char *pooling_dir = NULL;
    status = read_modules(&self, &pooling_dir);
    if (status == TFENC_OK)
        status = read_config(&self);
    if (status == TFENC_OK && pooling_dir != NULL)
        status = read_pooling_config(&self, pooling_dir);
    free(pooling_dir);
    if (status != TFENC_OK || (status = read_tokenizer(&self)) != TFENC_OK
        || (status = open_weights(&self)) != TFENC_OK)
        goto done;
    weights_written = 1;
    if ((status = write_weights(&self, weights_tmp)) != TFENC_OK)
        goto done;
    if (job != NULL) {
        job_written = 1;
        if ((status = write_job(&self, job_tmp, job, output)) != TFENC_OK)
            goto done;
    }
    if (rename(weights_tmp, output) != 0) {
        status = tfenc_error(&ctx, TFENC_ERR_IO, "%s: cannot rename to %s: %s", weights_tmp,
                             output, strerror(errno));
        goto done;
    }
    weights_written = 0;
    if (job != NULL && rename(job_tmp, job) != 0) {
        status = tfenc_error(&ctx, TFENC_ERR_IO, "%s: cannot rename to %s: %s", job_tmp, job,
                             strerror(errno));
        unlink(output); /* all or nothing */
        goto done;
    }
    job_written = 0;
done:
    if (weights_written)
        unlink(weights_tmp);
    if (job_written)
        unlink(job_tmp);
    if (status == TFENC_OK) {
        if (self.warning != NULL)
            fprintf(stderr, "tfenc-import: warning: %s\n", self.warning);
        printf("tfenc-import: wrote %s (%s, %d layers, d_model %d, %lld parameters, %s)%s%s\n",
               output, self.config.model_type, self.config.n_layers, self.config.d_model,
               self.n_parameters, storage_names[dtype], job != NULL ? " and " : "",
               job != NULL ? job : "");
    } else {
        fprintf(stderr, "tfenc-import: %s\n", tfenc_context_message(&ctx));
    }
    importer_free(&self);
    free(self.model_dir);
    free(weights_tmp);
    free(job_tmp);
    return status == TFENC_OK ? 0 : 1;
}
