/* The tokenizer files of a model folder: tokenizer.json, or vocab.txt,
 * tokenizer_config.json, special_tokens_map.json, and the limits of
 * sentence_bert_config.json. */
#include "config.h"

#include "tokenizer_files.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <utf8proc.h>

#include "files.h"

const char *const import_special_names[4] = {"cls_token", "sep_token", "unk_token", "pad_token"};
static const char *const special_defaults[4] = {"[CLS]", "[SEP]", "[UNK]", "[PAD]"};

/* The most rows a model's embedding has beyond its tokenizer's ids: the
 * padding to a multiple (64 for ModernBERT and NomicBERT, Qwen's 267 above
 * its last token). More is another model's tokenizer (ModernBERT's 50,368
 * beside mmBERT's 256,000 rows), whose ids would index the wrong rows. */
#define MAX_PADDING_ROWS 1024

/* Refuses a tokenizer of `tokens` ids, `path`, that does not fit config.json's
 * vocab_size: more ids than the model has rows, or fewer by more than the
 * padding. */
static int check_vocab_size(importer *self, const char *path, int tokens)
{
    int rows = self->config.vocab_size;
    if (tokens > rows)
        return tfenc_error(self->ctx, TFENC_ERR_CONFIG, "%s: ids up to %d, more than config.json "
                           "vocab_size %d", path, tokens - 1, rows);
    if (rows - tokens > MAX_PADDING_ROWS)
        return tfenc_error(self->ctx, TFENC_ERR_CONFIG, "%s: %d tokens, but config.json "
                           "vocab_size is %d: more than the %d rows of padding a model has "
                           "beyond its tokenizer (the tokenizer of another model?)", path, tokens,
                           rows, MAX_PADDING_ROWS);
    return TFENC_OK;
}

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
    int status = import_read_text_file(self->ctx, path, &tokenizer->vocab_text, &length);
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
    if ((status = check_vocab_size(self, path, (int)lines)))
        return status;
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

int import_read_tokenizer(importer *self)
{
    tfenc_context *ctx = self->ctx;
    tokenizer_settings *tokenizer = &self->tokenizer;
    const char *dir = self->transformer_dir;
    char *vocab_path = import_join_path(dir, "vocab.txt");
    char *json_path = import_join_path(dir, "tokenizer.json");
    char *config_path = import_join_path(dir, "tokenizer_config.json");
    char *map_path = import_join_path(dir, "special_tokens_map.json");
    char *st_path = import_join_path(self->model_dir, "sentence_bert_config.json");
    json_t *config = NULL, *map = NULL, *st = NULL;
    int status = TFENC_OK;
    if (vocab_path == NULL || json_path == NULL || config_path == NULL || map_path == NULL ||
        st_path == NULL) {
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        goto done;
    }

    /* The longest input: the position table less RoBERTa's offset, cut
     * further by the tokenizer's and sentence-transformers' limits. */
    self->max_length = self->config.max_position_embeddings - self->config.position_offset;
    if (import_file_exists(config_path)
        && (status = import_load_json(ctx, config_path, &config, NULL)))
        goto done;
    if (import_file_exists(map_path) && (status = import_load_json(ctx, map_path, &map, NULL)))
        goto done;
    if (import_file_exists(st_path) && (status = import_load_json(ctx, st_path, &st, NULL)))
        goto done;
    json_t *model_max = json_object_get(config, "model_max_length");
    if (json_is_number(model_max) && json_number_value(model_max) >= 1
        && json_number_value(model_max) < self->max_length)
        self->max_length = (int)json_number_value(model_max);
    int st_max_length;
    if ((status = import_json_int(ctx, st_path, st, "max_seq_length", 1, INT_MAX, INT_MAX,
                                  &st_max_length)))
        goto done;
    if (st_max_length < self->max_length)
        self->max_length = st_max_length;

    /* tokenizer.json first: every current model ships one, and it is the
     * whole tokenizer (normalizer, model, special tokens, template), where
     * vocab.txt leaves the special tokens to BERT's ([CLS]/[SEP], wrong for
     * MPNet's <s>/</s>). RoBERTa's byte-level BPE and XLM-R's
     * SentencePiece have only it. */
    if (import_file_exists(json_path)) {
        status = tfenc_tokenizer_create_from_json_file(ctx, json_path, NULL, &tokenizer->json);
        if (status == TFENC_OK)
            status = check_vocab_size(self, json_path,
                                      tfenc_tokenizer_vocab_size(tokenizer->json));
        tokenizer->present = status == TFENC_OK;
        goto done;
    }
    if (!import_file_exists(vocab_path)) {
        self->warning = "no tokenizer.json or vocab.txt: the weights file has no tokenizer; "
                        "feed the job HDF5 token ids (input_format = hdf5)";
        goto done;
    }
    tokenizer->present = 1;
    int st_lower;
    if ((status = import_json_bool(ctx, config_path, config, "do_lower_case", 1,
                                   &tokenizer->do_lower_case))
        || (status = import_json_bool(ctx, config_path, config, "tokenize_chinese_chars", 1,
                                      &tokenizer->tokenize_chinese_chars))
        || (status = import_json_bool(ctx, st_path, st, "do_lower_case", 0, &st_lower)))
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
        const char *token = token_string(json_object_get(config, import_special_names[i]));
        if (token == NULL)
            token = token_string(json_object_get(map, import_special_names[i]));
        if (token == NULL)
            token = special_defaults[i];
        int found = 0;
        for (int id = 0; id < tokenizer->vocab_count && !found; id++)
            found = strcmp(tokenizer->vocab[id], token) == 0;
        if (!found) {
            status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: %s '%s' is not in the vocabulary",
                                 vocab_path, import_special_names[i], token);
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
    free(json_path);
    free(config_path);
    free(map_path);
    free(st_path);
    return status;
}
