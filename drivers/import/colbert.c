/* A ColBERT checkpoint as colbert-ai saves it (stanford-futuredata/
 * colbertv2.0): a BERT whose tensors are `bert.*`, the projection
 * `linear.weight [dim, d_model]` beside it, config.json naming HF_ColBERT,
 * and artifact.metadata (colbert-ai's ColBERTConfig as JSON) with the
 * marker tokens, the query and document lengths and mask_punctuation. */
#include "config.h"

#include "colbert.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"

/* colbert-ai's ColBERTConfig defaults, for keys a metadata file leaves out. */
#define COLBERT_QUERY_MAXLEN 32
#define COLBERT_DOC_MAXLEN 220

/* A string key of a JSON object (or its default), copied into *value. */
static int copy_json_string(importer *self, const char *path, json_t *object, const char *key,
                            const char *default_value, char **value)
{
    const char *text = NULL;
    int status = import_json_string(self->ctx, path, object, key, default_value, &text);
    if (status == TFENC_OK && (*value = strdup(text)) == NULL)
        status = tfenc_error(self->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    return status;
}

/* From config.json as import_read_config read it (checked like every file
 * of the folder), not read again. */
static int names_colbert(const importer *self)
{
    json_t *config = self->config.config_text != NULL
                         ? json_loads(self->config.config_text, 0, NULL)
                         : NULL;
    const char *name =
        json_string_value(json_array_get(json_object_get(config, "architectures"), 0));
    int found = name != NULL && strcmp(name, "HF_ColBERT") == 0;
    json_decref(config);
    return found;
}

int import_read_colbert(importer *self)
{
    tfenc_context *ctx = self->ctx;
    multivector_settings *m = &self->config.multivector;
    char *path = import_join_path(self->transformer_dir, "artifact.metadata");
    if (path == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    int has_metadata = import_file_exists(path);
    if (!has_metadata && !names_colbert(self)) {
        free(path);
        return TFENC_OK;
    }
    json_t *metadata = NULL;
    int status = has_metadata ? import_load_json(ctx, path, &metadata, NULL) : TFENC_OK;
    const char *similarity = "cosine";
    if (status == TFENC_OK)
        status = import_json_string(ctx, path, metadata, "similarity", "cosine", &similarity);
    /* l2 ranks by the distance of unnormalised vectors' sums: another
     * recipe than the MaxSim of unit vectors the output documents. */
    if (status == TFENC_OK && strcmp(similarity, "cosine") != 0)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: similarity '%s': tfenc writes the unit "
                             "vectors of similarity cosine", path, similarity);
    if (status == TFENC_OK)
        status = copy_json_string(self, path, metadata, "query_token_id", "[unused0]",
                                  &m->query_marker);
    if (status == TFENC_OK)
        status = copy_json_string(self, path, metadata, "doc_token_id", "[unused1]",
                                  &m->document_marker);
    if (status == TFENC_OK)
        status = import_json_int(ctx, path, metadata, "query_maxlen", 2, IMPORT_MAX_POSITIONS,
                                 COLBERT_QUERY_MAXLEN, &m->query_length);
    if (status == TFENC_OK)
        status = import_json_int(ctx, path, metadata, "doc_maxlen", 2, IMPORT_MAX_POSITIONS,
                                 COLBERT_DOC_MAXLEN, &m->document_length);
    if (status == TFENC_OK)
        status = import_json_bool(ctx, path, metadata, "mask_punctuation", 1,
                                  &m->skip_punctuation);
    if (status == TFENC_OK)
        status = import_json_bool(ctx, path, metadata, "attend_to_mask_tokens", 0,
                                  &m->attend_to_mask_tokens);
    /* 0: the rows of linear.weight (tensor_map.c). */
    if (status == TFENC_OK)
        status = import_json_int(ctx, path, metadata, "dim", 1, IMPORT_MAX_WIDTH, 0, &m->width);
    json_decref(metadata);
    if (status == TFENC_OK) {
        m->present = 1;
        m->source = has_metadata ? "artifact.metadata" : "colbert-ai's defaults";
        m->query_marker_key = "query_token_id";
        m->document_marker_key = "doc_token_id";
        if (has_metadata) {
            m->markers_file = path;
            path = NULL;
        }
    }
    free(path);
    return status;
}

/* ------------------------------------------------------------- PyLate */

/* PyLate's defaults (pylate.models.ColBERT), for keys a folder leaves out. */
#define PYLATE_QUERY_LENGTH 32
#define PYLATE_DOCUMENT_LENGTH 180

/* Python's string.punctuation: PyLate's default skiplist_words. */
static const char punctuation[] = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";

/* A prefix as the token PyLate inserts: "[Q] " names the added token [Q]. */
static int copy_marker(importer *self, const char *path, json_t *config, const char *key,
                       const char *default_value, char **marker)
{
    int status = copy_json_string(self, path, config, key, default_value, marker);
    if (status != TFENC_OK)
        return status;
    char *start = *marker, *end = start + strlen(start);
    while (*start != '\0' && isspace((unsigned char)*start))
        start++;
    while (end > start && isspace((unsigned char)end[-1]))
        end--;
    memmove(*marker, start, (size_t)(end - start));
    (*marker)[end - start] = '\0';
    if ((*marker)[0] == '\0')
        return tfenc_error(self->ctx, TFENC_ERR_CONFIG, "%s: %s is empty: tfenc puts a marker "
                           "token after [CLS]", path, key);
    return TFENC_OK;
}

/* skiplist_words: none, or string.punctuation's characters (PyLate's
 * default), which is the skiplist tfenc computes. */
static int read_skiplist(importer *self, const char *path, json_t *config, int *skip)
{
    json_t *words = json_object_get(config, "skiplist_words");
    *skip = 1;
    if (words == NULL || json_is_null(words))
        return TFENC_OK;
    size_t n = json_is_array(words) ? json_array_size(words) : 0;
    int same = json_is_array(words) && n == strlen(punctuation);
    for (size_t i = 0; same && i < n; i++) {
        const char *word = json_string_value(json_array_get(words, i));
        same = word != NULL && strlen(word) == 1 && strchr(punctuation, word[0]) != NULL;
        for (size_t k = 0; same && k < i; k++)
            same = strcmp(word, json_string_value(json_array_get(words, k))) != 0;
    }
    *skip = n > 0;
    if (n > 0 && !same)
        return tfenc_error(self->ctx, TFENC_ERR_CONFIG, "%s: skiplist_words is not Python's "
                           "string.punctuation, the only skiplist tfenc computes", path);
    return TFENC_OK;
}

static int read_dense(importer *self)
{
    tfenc_context *ctx = self->ctx;
    multivector_settings *m = &self->config.multivector;
    char *path = import_join_path(self->dense_dir, "config.json");
    json_t *config = NULL;
    int status = path == NULL
                     ? tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory")
                     : import_load_json(ctx, path, &config, NULL);
    int in_features = 0, bias = 0;
    const char *activation = NULL;
    if (status == TFENC_OK)
        status = import_json_int(ctx, path, config, "in_features", 1, IMPORT_MAX_WIDTH, 0,
                                 &in_features);
    if (status == TFENC_OK)
        status = import_json_int(ctx, path, config, "out_features", 1, IMPORT_MAX_WIDTH, 0,
                                 &m->width);
    if (status == TFENC_OK)
        status = import_json_bool(ctx, path, config, "bias", 1, &bias);
    if (status == TFENC_OK)
        status = import_json_string(ctx, path, config, "activation_function",
                                    "torch.nn.modules.linear.Identity", &activation);
    if (status == TFENC_OK && in_features != self->config.d_model)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: in_features %d, but the encoder's "
                             "hidden_size is %d", path, in_features, self->config.d_model);
    if (status == TFENC_OK && m->width > self->config.d_model)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: out_features %d is wider than the "
                             "encoder's hidden_size %d (tfenc's vectors travel in d_model-wide "
                             "rows)", path, m->width, self->config.d_model);
    if (status == TFENC_OK && strcmp(activation, "torch.nn.modules.linear.Identity") != 0)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: activation_function %s: tfenc's "
                             "multivector head is linear (Identity)", path, activation);
    if (status == TFENC_OK)
        status = import_open_checkpoint(ctx, self->dense_dir, &self->dense_weights);
    if (status == TFENC_OK && self->dense_weights == NULL)
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: no model.safetensors nor "
                             "pytorch_model.bin: a PyLate model without its projection",
                             self->dense_dir);
    m->projection_bias = bias;
    json_decref(config);
    free(path);
    return status;
}

int import_read_pylate(importer *self)
{
    if (self->dense_dir == NULL)
        return TFENC_OK;
    tfenc_context *ctx = self->ctx;
    multivector_settings *m = &self->config.multivector;
    int status = read_dense(self);
    char *path = import_join_path(self->model_dir, "config_sentence_transformers.json");
    json_t *config = NULL;
    if (status == TFENC_OK && path == NULL)
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    if (status == TFENC_OK && import_file_exists(path))
        status = import_load_json(ctx, path, &config, NULL);
    if (status == TFENC_OK)
        status = copy_marker(self, path, config, "query_prefix", "[Q] ", &m->query_marker);
    if (status == TFENC_OK)
        status = copy_marker(self, path, config, "document_prefix", "[D] ",
                             &m->document_marker);
    if (status == TFENC_OK)
        status = import_json_int(ctx, path, config, "query_length", 2, IMPORT_MAX_POSITIONS,
                                 PYLATE_QUERY_LENGTH, &m->query_length);
    if (status == TFENC_OK)
        status = import_json_int(ctx, path, config, "document_length", 2,
                                 IMPORT_MAX_POSITIONS, PYLATE_DOCUMENT_LENGTH,
                                 &m->document_length);
    if (status == TFENC_OK)
        status = import_json_bool(ctx, path, config, "attend_to_expansion_tokens", 0,
                                  &m->attend_to_mask_tokens);
    if (status == TFENC_OK)
        status = read_skiplist(self, path, config, &m->skip_punctuation);
    json_decref(config);
    if (status == TFENC_OK) {
        m->present = 1;
        m->source = "PyLate's config_sentence_transformers.json";
        m->query_marker_key = "query_prefix";
        m->document_marker_key = "document_prefix";
        if (import_file_exists(path)) {
            m->markers_file = path;
            path = NULL;
        }
    }
    free(path);
    return status;
}

/* ------------------------------------------------------------ markers */

/* Whether the tokenizer the weights file will hold has `token` as one token. */
static int tokenizer_has(const tokenizer_settings *tokenizer, const char *token)
{
    if (tokenizer->json != NULL)
        return tfenc_tokenizer_token_id(tokenizer->json, token) >= 0;
    for (int id = 0; id < tokenizer->vocab_count; id++)
        if (strcmp(tokenizer->vocab[id], token) == 0)
            return 1;
    return 0;
}

int import_check_markers(importer *self)
{
    const multivector_settings *m = &self->config.multivector;
    const tokenizer_settings *tokenizer = &self->tokenizer;
    if (!m->present)
        return TFENC_OK;
    const char *what[2] = {"query", "document"};
    const char *marker[2] = {m->query_marker, m->document_marker};
    const char *key[2] = {m->query_marker_key, m->document_marker_key};
    int status = TFENC_OK;
    for (int i = 0; i < 2 && status == TFENC_OK; i++) {
        if (marker[i] == NULL || (tokenizer->present && tokenizer_has(tokenizer, marker[i])))
            continue;
        char origin[1024];
        if (m->markers_file != NULL)
            snprintf(origin, sizeof origin, "%s of %s", key[i], m->markers_file);
        else
            snprintf(origin, sizeof origin, "the default %s", key[i]);
        if (!tokenizer->present) {
            status = tfenc_error(self->ctx, TFENC_ERR_CONFIG,
                                 "%s: the %s marker '%s' (%s) needs a tokenizer, but the folder "
                                 "has no tokenizer.json or vocab.txt", self->transformer_dir,
                                 what[i], marker[i], origin);
            break;
        }
        char *file = import_join_path(self->transformer_dir,
                                      tokenizer->json != NULL ? "tokenizer.json" : "vocab.txt");
        status = file == NULL
                     ? tfenc_error(self->ctx, TFENC_ERR_NO_MEMORY, "out of memory")
                     : tfenc_error(self->ctx, TFENC_ERR_CONFIG,
                                   "%s: the %s marker '%s' (%s) is not a token of the tokenizer: "
                                   "every job of the model puts it after the first token (add "
                                   "it to the tokenizer, as PyLate does, or name a token it has)",
                                   file, what[i], marker[i], origin);
        free(file);
    }
    return status;
}
