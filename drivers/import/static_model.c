/* A model2vec (static-embedding) folder: config.json (model_type
 * "model2vec", normalize), model.safetensors (embeddings [rows, d], and in
 * vocabulary-quantized models mapping [vocab] and weights [vocab]) and
 * tokenizer.json. There is no encoder: model2vec's StaticModel.encode
 * (0.10) tokenizes the text's first max_length x median token length
 * characters without special tokens, keeps the first max_length tokens
 * (config.json's, 512 without), drops the unknown token, and averages
 * embeddings[mapping[id]] * weights[id], normalized when config.json says
 * so. The job this writes
 * does the same with one static_embedding layer (plugins/static_embedding.c). */
#include "config.h"

#include "static_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/safetensors.h"

#include "files.h"

/* model2vec's encode() default, when config.json has no max_length. */
#define STATIC_MAX_LENGTH 512

/* Whether model.safetensors holds model2vec's "embeddings" tensor (its
 * header only is read). */
static int holds_embeddings(importer *self, int *found)
{
    char *path = import_join_path(self->model_dir, "model.safetensors");
    tfenc_safetensors *file = NULL;
    int status = TFENC_OK;
    if (path == NULL)
        status = tfenc_error(self->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    else if (import_file_exists(path))
        status = tfenc_safetensors_open(self->ctx, path, &file);
    *found = file != NULL && tfenc_safetensors_find(file, "embeddings") != NULL;
    tfenc_safetensors_close(file);
    free(path);
    return status;
}

int import_detect_static_model(importer *self, int *found)
{
    *found = 0;
    char *path = import_join_path(self->model_dir, "config.json");
    json_t *config = NULL;
    int status = TFENC_OK;
    if (path == NULL)
        status = tfenc_error(self->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    else if (import_file_exists(path))
        status = import_load_json(self->ctx, path, &config, NULL);
    if (status == TFENC_OK && config != NULL) {
        const char *type = json_string_value(json_object_get(config, "model_type"));
        json_t *architectures = json_object_get(config, "architectures");
        size_t i;
        json_t *name;
        *found = type != NULL && strcmp(type, "model2vec") == 0;
        json_array_foreach(architectures, i, name)
            if (json_is_string(name) && strcmp(json_string_value(name), "StaticModel") == 0)
                *found = 1;
        /* StaticModel.save_pretrained writes a config.json of its settings
         * alone, embedding_dtype always among them; else the weights tell. */
        if (!*found && type == NULL && architectures == NULL)
            *found = json_object_get(config, "embedding_dtype") != NULL;
        if (!*found && type == NULL && architectures == NULL)
            status = holds_embeddings(self, found);
    }
    json_decref(config);
    free(path);
    return status;
}

/* Code points of a UTF-8 string, as Python's len() counts a str. */
static size_t code_points(const char *text)
{
    size_t count = 0;
    for (const unsigned char *c = (const unsigned char *)text; *c != '\0'; c++)
        count += (*c & 0xC0) != 0x80;
    return count;
}

static int by_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* int(np.median(token lengths)) over every id's token, as StaticModel
 * computes median_token_length. */
static int median_token_length(tfenc_context *ctx, const tfenc_tokenizer *tokenizer,
                               long *median)
{
    const char **tokens = NULL;
    int n = tfenc_tokenizer_vocab_size(tokenizer);
    int status = tfenc_tokenizer_tokens(ctx, tokenizer, &tokens);
    size_t *lengths = status == TFENC_OK ? malloc((size_t)n * sizeof *lengths + 1) : NULL;
    if (status == TFENC_OK && lengths == NULL)
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    if (status == TFENC_OK) {
        for (int i = 0; i < n; i++)
            lengths[i] = code_points(tokens[i]);
        qsort(lengths, (size_t)n, sizeof *lengths, by_size);
        /* an even count averages the two middle lengths; int() truncates */
        *median = n % 2 ? (long)lengths[n / 2]
                        : (long)((lengths[n / 2 - 1] + lengths[n / 2]) / 2);
    }
    free(lengths);
    free(tokens);
    return status;
}

/* Whether model2vec drops an unknown token: StaticModel takes the
 * model's unk_token (WordPiece, BPE, WordLevel) when it is set, else a
 * Unigram model's unk_id when that is. */
static int reads_unknown_token(tfenc_context *ctx, const char *path, int *drop)
{
    json_t *json = NULL;
    int status = import_load_json(ctx, path, &json, NULL);
    if (status == TFENC_OK) {
        json_t *model = json_object_get(json, "model");
        const char *type = json_string_value(json_object_get(model, "type"));
        *drop = type != NULL && strcmp(type, "Unigram") == 0
                    ? json_is_number(json_object_get(model, "unk_id"))
                    : json_is_string(json_object_get(model, "unk_token"));
    }
    json_decref(json);
    return status;
}

/* A value a float32 holds, or the error naming it (element `at` of the
 * tensor). */
static int check_value(tfenc_context *ctx, const tfenc_safetensors *file, const char *name,
                       double value, int64_t at)
{
    if (isfinite(value) && fabs(value) <= 3.4e38)
        return TFENC_OK;
    return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: tensor '%s' holds a value a float32 cannot "
                       "hold (%g) at element %lld", tfenc_safetensors_name(file), name, value,
                       (long long)at);
}

/* A vector of model.safetensors (the mapping, the weights) as doubles;
 * NULL *values when it is absent. Its rank and length are checked by the
 * caller. */
static int read_vector(tfenc_context *ctx, const tfenc_safetensors *file, const char *name,
                       const tfenc_safetensors_tensor **tensor, double **values)
{
    *values = NULL;
    *tensor = tfenc_safetensors_find(file, name);
    if (*tensor == NULL)
        return TFENC_OK;
    *values = malloc((size_t)(*tensor)->n_elements * sizeof **values + 1);
    if (*values == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for tensor '%s'", name);
    int status = tfenc_safetensors_read_double(ctx, file, *tensor, *values);
    for (int64_t i = 0; status == TFENC_OK && i < (*tensor)->n_elements; i++)
        status = check_value(ctx, file, name, (*values)[i], i);
    return status;
}

/* Rows of the embeddings read at once: a vocabulary-quantized table may
 * have far more rows than the vocabulary (and a plain one 500,000 of 256),
 * so it is never in memory whole, as doubles or otherwise. */
#define STATIC_BLOCK_VALUES (1 << 20)

/* A token and the row of the embeddings it takes. */
typedef struct token_row {
    int64_t row;
    int token;
} token_row;

static int by_row(const void *a, const void *b)
{
    const token_row *x = a, *y = b;
    return x->row != y->row ? (x->row > y->row) - (x->row < y->row) : x->token - y->token;
}

/* Copies the embeddings' rows into the table in blocks: row i of the
 * table is embeddings[mapping[i]], or embeddings[i] without a mapping;
 * every value is checked, those of unused rows too. */
static int fill_table(tfenc_context *ctx, const tfenc_safetensors *file,
                      const tfenc_safetensors_tensor *embeddings, const double *map, int vocab,
                      float *table)
{
    const int64_t rows = embeddings->dims[0], d = embeddings->dims[1];
    const int64_t block_rows = STATIC_BLOCK_VALUES / d > 0 ? STATIC_BLOCK_VALUES / d : 1;
    token_row *order = malloc((size_t)vocab * sizeof *order + 1);
    double *block = malloc((size_t)(block_rows * d) * sizeof *block);
    int status = TFENC_OK;
    if (order == NULL || block == NULL) {
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for tensor 'embeddings'");
        goto done;
    }
    /* The tokens by the row they take, so that one pass over the rows
     * serves them all. */
    for (int i = 0; i < vocab; i++)
        order[i] = (token_row){map != NULL ? (int64_t)map[i] : i, i};
    if (map != NULL)
        qsort(order, (size_t)vocab, sizeof *order, by_row);
    int next = 0; /* of order */
    for (int64_t first = 0; first < rows && status == TFENC_OK; first += block_rows) {
        const int64_t count = rows - first < block_rows ? rows - first : block_rows;
        status = tfenc_safetensors_read_double_range(ctx, file, embeddings, first * d, count * d,
                                                     block);
        for (int64_t k = 0; status == TFENC_OK && k < count * d; k++)
            status = check_value(ctx, file, "embeddings", block[k], first * d + k);
        for (; status == TFENC_OK && next < vocab; next++) {
            const int64_t row = order[next].row;
            const int token = order[next].token;
            if (row >= first + count)
                break;
            for (int64_t j = 0; j < d; j++)
                table[(size_t)token * (size_t)d + (size_t)j] = (float)block[(row - first) * d + j];
        }
    }
done:
    free(order);
    free(block);
    return status;
}

/* The table row by row as the job looks it up: row i is
 * embeddings[mapping[i]] (embeddings[i] without a mapping). */
static int build_table(importer *self, const tfenc_safetensors *file)
{
    tfenc_context *ctx = self->ctx;
    static_settings *s = &self->static_model;
    const char *name = tfenc_safetensors_name(file);
    const int vocab = tfenc_tokenizer_vocab_size(self->tokenizer.json);
    const tfenc_safetensors_tensor *embeddings = tfenc_safetensors_find(file, "embeddings");
    const tfenc_safetensors_tensor *mapping, *weights;
    double *map = NULL, *scale = NULL;
    int status = TFENC_OK;
    if (embeddings == NULL) {
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: tensor 'embeddings' not found (a "
                             "model2vec model.safetensors holds its embeddings)", name);
        goto done;
    }
    if ((status = read_vector(ctx, file, "mapping", &mapping, &map))
        || (status = read_vector(ctx, file, "weights", &weights, &scale)))
        goto done;
    if (embeddings->rank != 2 || embeddings->dims[1] < 1 ||
        embeddings->dims[1] > IMPORT_MAX_WIDTH || embeddings->dims[0] < 1) {
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: tensor 'embeddings' must be [rows, "
                             "dim] with dim in 1..%d", name, IMPORT_MAX_WIDTH);
        goto done;
    }
    const int64_t rows = embeddings->dims[0], d = embeddings->dims[1];
    /* Without a mapping, row i is token i's: as many rows as the
     * tokenizer has ids, as StaticModel requires. */
    if (map == NULL && rows != vocab) {
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: tensor 'embeddings' has %lld rows but "
                             "tokenizer.json has %d tokens (and there is no 'mapping')", name,
                             (long long)rows, vocab);
        goto done;
    }
    if (map != NULL && (mapping->rank != 1 || mapping->dims[0] != vocab)) {
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: tensor 'mapping' must be [%d], one "
                             "row of 'embeddings' per token of tokenizer.json", name, vocab);
        goto done;
    }
    if (scale != NULL && (weights->rank != 1 || weights->dims[0] != vocab)) {
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: tensor 'weights' must be [%d], one "
                             "weight per token of tokenizer.json", name, vocab);
        goto done;
    }
    for (int i = 0; map != NULL && i < vocab; i++) {
        const double row = map[i];
        if (row != floor(row) || row < 0 || row >= (double)rows) {
            status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: tensor 'mapping' sends token %d to "
                                 "row %g, outside the %lld rows of 'embeddings'", name, i, row,
                                 (long long)rows);
            goto done;
        }
    }
    s->table = malloc((size_t)vocab * (size_t)d * sizeof *s->table + 1);
    if (scale != NULL)
        s->weights = malloc((size_t)vocab * sizeof *s->weights + 1);
    if (s->table == NULL || (scale != NULL && s->weights == NULL)) {
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for a table of %d x %lld",
                             vocab, (long long)d);
        goto done;
    }
    if ((status = fill_table(ctx, file, embeddings, map, vocab, s->table)))
        goto done;
    for (int i = 0; scale != NULL && i < vocab; i++)
        s->weights[i] = (float)scale[i];
    self->config.d_model = (int)d;
    self->config.vocab_size = vocab;
done:
    free(map);
    free(scale);
    return status;
}

/* The weights file's two datasets, from the table and weights in memory. */
static int plan_static_datasets(importer *self)
{
    const static_settings *s = &self->static_model;
    const int vocab = self->config.vocab_size;
    self->plan = calloc(2, sizeof *self->plan);
    if (self->plan == NULL)
        return tfenc_error(self->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    self->plan[0] = (tensor_plan){.source = "embeddings", .target = "static/token_embeddings",
                                  .rank = 2, .dims = {vocab, self->config.d_model},
                                  .source_rows = vocab, .values = s->table};
    self->plan_count = 1;
    if (s->weights != NULL)
        self->plan[self->plan_count++] =
            (tensor_plan){.source = "weights", .target = "static/token_weights", .rank = 1,
                          .dims = {vocab, 1}, .source_rows = vocab, .values = s->weights};
    self->n_parameters = (long long)vocab * self->config.d_model +
                         (s->weights != NULL ? vocab : 0);
    return TFENC_OK;
}

int import_read_static_model(importer *self)
{
    tfenc_context *ctx = self->ctx;
    static_settings *s = &self->static_model;
    model_config *c = &self->config;
    char *config_path = import_join_path(self->model_dir, "config.json");
    char *json_path = import_join_path(self->model_dir, "tokenizer.json");
    char *weights_path = import_join_path(self->model_dir, "model.safetensors");
    json_t *config = NULL;
    tfenc_safetensors *file = NULL;
    int status = TFENC_OK;
    if (config_path == NULL || json_path == NULL || weights_path == NULL) {
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    s->present = 1;
    c->architecture = ARCH_STATIC;
    if ((status = import_load_json(ctx, config_path, &config, &c->config_text)) ||
        (status = import_json_bool(ctx, config_path, config, "normalize", 0, &s->normalize)))
        goto done;
    /* null turns model2vec's truncation off; a job's sequences need a bound */
    if (json_is_null(json_object_get(config, "max_length"))) {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: key 'max_length' is null (no "
                             "truncation); tfenc needs a number of tokens", config_path);
        goto done;
    }
    if ((status = import_json_int(ctx, config_path, config, "max_length", 1, 1 << 20,
                                  STATIC_MAX_LENGTH, &self->max_length)))
        goto done;
    if ((c->model_type = strdup("model2vec")) == NULL) {
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    if (!import_file_exists(json_path)) {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: not found (a model2vec folder holds "
                             "its tokenizer)", json_path);
        goto done;
    }
    if ((status = tfenc_tokenizer_create_from_json_file(ctx, json_path, NULL,
                                                         &self->tokenizer.json)) ||
        (status = reads_unknown_token(ctx, json_path, &s->drop_unknown)))
        goto done;
    self->tokenizer.present = 1;
    long median = 0;
    if ((status = median_token_length(ctx, self->tokenizer.json, &median)))
        goto done;
    s->max_chars = (long)self->max_length * median;
    if (!import_file_exists(weights_path)) {
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: not found (a model2vec folder holds "
                             "its embeddings there)", weights_path);
        goto done;
    }
    if ((status = tfenc_safetensors_open(ctx, weights_path, &file)) ||
        (status = build_table(self, file)))
        goto done;
    status = plan_static_datasets(self);
    if (status == TFENC_OK && self->verbose != NULL)
        fprintf(self->verbose, "tfenc-import: %s: a model2vec model: %d tokens of %d, %s, %s, "
                "text cut at %ld characters%s\n", self->model_dir, c->vocab_size, c->d_model,
                s->weights != NULL ? "weighted" : "unweighted",
                s->normalize ? "normalized" : "not normalized", s->max_chars,
                s->drop_unknown ? ", unknown tokens dropped" : "");
done:
    tfenc_safetensors_close(file);
    json_decref(config);
    free(config_path);
    free(json_path);
    free(weights_path);
    return status;
}

void import_write_static_job(const importer *self, FILE *out, const char *weights_relative)
{
    const static_settings *s = &self->static_model;
    const model_config *c = &self->config;
    fprintf(out, "[job]\ninput = corpus.txt\noutput = embeddings.h5\n"
                 "; model2vec's encode(): the first %d tokens of the text's first\n"
                 "; %ld characters (%d x the vocabulary's median token length).\n"
                 "max_seq_len = %d\n"
                 "; A text that keeps no token is a row of zeros, as model2vec gives it.\n"
                 "empty_documents = zeros\n"
                 "; A static model costs little per token: large microbatches of texts in\n"
                 "; the corpus's order keep the work around them small beside the\n"
                 "; tokenizer's (rows written as one block each).\n"
                 "batch_tokens = %d\nbatch_order = document\n\n",
            self->max_length, s->max_chars, self->max_length, self->max_length,
            self->max_length > STATIC_BATCH_TOKENS ? self->max_length : STATIC_BATCH_TOKENS);
    fprintf(out, "[model]\nweights = %s\nd_model = %d\nvocab_size = %d\n"
                 "; A static model has no positions.\nmax_positions = %d\n\n",
            weights_relative, c->d_model, c->vocab_size, IMPORT_MAX_POSITIONS);
    fprintf(out, "; The tokenizer is read from the weights file (/tokenizer); model2vec\n"
                 "; tokenizes without special tokens%s.\n"
                 "[tokenizer]\nspecial_tokens = false\ndrop_unknown = %s\nmax_chars = %ld\n\n",
            s->drop_unknown ? " and drops the unknown token" : "",
            s->drop_unknown ? "true" : "false", s->max_chars);
    fprintf(out, "; No encoder: the mean of the tokens' rows%s%s.\n"
                 "[static]\ntype = static_embedding\ntoken_weights = %s\nnormalize = %s\n",
            s->weights != NULL ? ", each scaled by its token's weight" : "",
            s->normalize ? ", normalized" : "", s->weights != NULL ? "true" : "false",
            s->normalize ? "true" : "false");
}
