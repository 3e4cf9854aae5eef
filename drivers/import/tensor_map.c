/* Which tensor of the checkpoint becomes which dataset of the weights
 * file (docs/weights.md): the architecture's canonical tensors, each under
 * its Hugging Face name (tensor_names.c), and the head's; every tensor is
 * found and its shape and dtype checked before anything is written. */
#include "config.h"

#include "tensor_map.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapters.h"
#include "bge_m3.h"
#include "files.h"
#include "tensor_names.h"

/* Sizes by letter: d d_model, f ffn width, g 2 f, v vocabulary, p positions,
 * t token types, e head_dim, a query width (heads x head_dim, d unless
 * config.json gives head_dim), k key/value width, q a + 2 k (fused Q, K,
 * V), b relative position buckets, h heads, c labels of a classification
 * head, r DeBERTa's relative embeddings (twice the span), m the width of a
 * multi-vector projection. */
static int64_t dimension(const model_config *c, char letter)
{
    int64_t head_dim = c->head_dim > 0 ? c->head_dim : c->d_model / c->n_heads;
    int64_t kv = (int64_t)c->n_kv_heads * head_dim, query = (int64_t)c->n_heads * head_dim;
    switch (letter) {
    case 'd': return c->d_model;
    case 'e': return head_dim;
    case 'a': return query;
    case 'f': return c->ffn_width;
    case 'g': return 2 * (int64_t)c->ffn_width;
    case 'v': return c->vocab_size;
    case 'p': return c->max_position_embeddings;
    case 't': return c->type_vocab_size;
    case 'k': return kv;
    case 'q': return query + 2 * kv;
    case 'b': return c->num_buckets;
    case 'c': return c->head.n_labels;
    case 'r': return 2 * (int64_t)c->relative_span;
    case 'm': return c->multivector.width;
    default: return c->n_heads; /* 'h' */
    }
}

/* Conditions by letter: t token types, q Q/K/V biases, o output projection
 * bias, i first FFN linear bias, u second FFN linear bias, n norm biases,
 * l a layer after the first (ModernBERT's layer 0 has no attention norm);
 * DeBERTa's: a absolute positions, r disentangled attention, e the LayerNorm
 * of its relative embeddings, k and y maps of their own for the relative
 * embeddings (not share_att_key) for c2p (keys) and p2c (queries);
 * c the head's dense map has a bias (ModernBERT's classifier_bias), b its
 * masked-LM decoder has one (ModernBERT's decoder_bias);
 * I and U: only the second (I) or only the first (U) FFN linear has a bias,
 * so that the ffn layer, whose `bias` key covers both, needs zeros for the
 * other; F the layer's feed-forward block is dense (not a mixture of
 * experts: NomicBERT v2's odd layers), g it is gated (swiglu, geglu), p it
 * is not; m the multi-vector projection has a bias (PyLate's). */
static int applies(const model_config *c, const char *when, int layer)
{
    for (; *when != '\0'; when++) {
        int holds = *when == 't' ? c->type_vocab_size > 0 : *when == 'q' ? c->qkv_bias
                    : *when == 'o' ? c->out_bias : *when == 'i' ? c->ffn_in_bias
                    : *when == 'u' ? c->ffn_out_bias : *when == 'n' ? c->norm_bias
                    : *when == 'I' ? !c->ffn_in_bias && c->ffn_out_bias
                    : *when == 'U' ? c->ffn_in_bias && !c->ffn_out_bias
                    : *when == 'a' ? c->learned_positions
                    : *when == 'r' ? strcmp(c->position, "disentangled") == 0
                    : *when == 'e' ? c->relative_norm
                    : *when == 'k' ? !c->share_att_key && strcmp(c->relative_terms, "p2c") != 0
                    : *when == 'y' ? !c->share_att_key && strcmp(c->relative_terms, "c2p") != 0
                    : *when == 'c' ? c->head.dense_bias
                    : *when == 'b' ? c->head.decoder_bias
                    : *when == 'm' ? c->multivector.projection_bias
                    : *when == 'F' ? !import_is_moe_layer(c, layer)
                    : *when == 'g' ? strcmp(c->activation, "swiglu") == 0
                                     || strcmp(c->activation, "geglu") == 0
                    : *when == 'p' ? strcmp(c->activation, "swiglu") != 0
                                     && strcmp(c->activation, "geglu") != 0
                    : layer > 0; /* 'l' */
        if (!holds)
            return 0;
    }
    return 1;
}

void import_format_shape(char *text, size_t size, int rank, const int64_t *dims)
{
    size_t used = (size_t)snprintf(text, size, "[");
    for (int i = 0; i < rank && used < size; i++)
        used += (size_t)snprintf(text + used, size - used, "%s%lld", i ? ", " : "",
                                 (long long)dims[i]);
    if (used < size)
        snprintf(text + used, size - used, "]");
}

/* Appends the plan entry of `tensor` under `name` for `layer` (-1 for a
 * tensor once per model). */
static int add_plan(importer *self, int capacity, const char *prefix,
                    const canonical_tensor *tensor, const tensor_name *name, int layer)
{
    if (self->plan_count >= capacity)
        return tfenc_error(self->ctx, TFENC_ERR_INTERNAL, "tensor plan overflow");
    tensor_plan *item = &self->plan[self->plan_count++];
    char source[128];
    snprintf(source, sizeof source, name->pattern, layer);
    snprintf(item->source, sizeof item->source, "%s%s", name->beside ? "" : prefix, source);
    snprintf(item->target, sizeof item->target, tensor->target, layer);
    item->rank = (int)strlen(tensor->shape);
    item->dims[0] = item->source_rows = dimension(&self->config, tensor->shape[0]);
    item->dims[1] = item->rank > 1 ? dimension(&self->config, tensor->shape[1]) : 0;
    item->zeros = name->pattern[0] == '\0';
    if (name->half != 0) {
        item->source_rows = 2 * item->dims[0];
        item->first_row = name->half == '2' ? item->dims[0] : 0;
    }
    return TFENC_OK;
}

/* The name `reader` gives `tensor` in this model and layer, or NULL when
 * it has none here (a bias the model lacks); two that apply at once would
 * write one dataset twice. */
static int name_of(importer *self, const canonical_tensor *tensor, unsigned reader, int layer,
                   const tensor_name **found)
{
    *found = NULL;
    for (const tensor_name *name = tensor->names; name->pattern != NULL; name++) {
        if (!(name->readers & reader) || !applies(&self->config, name->when, layer))
            continue;
        if (*found != NULL)
            return tfenc_error(self->ctx, TFENC_ERR_INTERNAL, "%s: both '%s' and '%s' apply",
                               tensor->target, (*found)->pattern, name->pattern);
        *found = name;
    }
    return TFENC_OK;
}

static int is_per_layer(const canonical_tensor *tensor)
{
    return strstr(tensor->target, "%d") != NULL;
}

/* Plans the tensors of `ids` that `reader` has: those once per model when
 * layer is -1, else those of that layer. */
static int plan_list(importer *self, int capacity, const char *prefix, unsigned reader,
                     const tensor_id *ids, int layer)
{
    for (int i = 0; ids[i] != TENSOR_END; i++) {
        const canonical_tensor *tensor = &import_canonical_tensors[ids[i]];
        const tensor_name *name;
        int status;
        if (is_per_layer(tensor) != (layer >= 0))
            continue;
        if ((status = name_of(self, tensor, reader, layer < 0 ? 0 : layer, &name)) != TFENC_OK
            || (name != NULL
                && (status = add_plan(self, capacity, prefix, tensor, name, layer)) != TFENC_OK))
            return status;
    }
    return TFENC_OK;
}

static int count_tensors(const tensor_id *ids, int per_layer)
{
    int n = 0;
    for (int i = 0; ids[i] != TENSOR_END; i++)
        n += is_per_layer(&import_canonical_tensors[ids[i]]) == per_layer;
    return n;
}

/* The first tensor once per model of the architecture: the one whose name
 * tells the prefix the checkpoint wraps the encoder in. */
static const char *first_model_name(const architecture_tensors *map, unsigned reader)
{
    for (int i = 0; map->tensors[i] != TENSOR_END; i++) {
        const canonical_tensor *tensor = &import_canonical_tensors[map->tensors[i]];
        if (is_per_layer(tensor))
            continue;
        for (const tensor_name *name = tensor->names; name->pattern != NULL; name++)
            if (name->readers & reader)
                return name->pattern;
    }
    return "";
}

/* The Dense modules' pair as the [dense] ffn layer: the first module's
 * linear map is in_weight [width, d], the second's out_weight [d, width];
 * when only one has a bias the other gets zeros (the ffn's `bias` key
 * covers both). */
static int plan_dense(importer *self, int capacity)
{
    const dense_settings *dense = &self->pooling.dense;
    if (dense->count == 0)
        return TFENC_OK;
    const int64_t d = self->config.d_model, width = dense->width;
    const struct {
        int module;
        const char *source, *target;
        int rank;
        int64_t rows, columns;
    } parts[4] = {{0, "linear.weight", "/dense/in_weight", 2, width, d},
                  {1, "linear.weight", "/dense/out_weight", 2, d, width},
                  {0, "linear.bias", "/dense/in_bias", 1, width, 0},
                  {1, "linear.bias", "/dense/out_bias", 1, d, 0}};
    int any_bias = dense->bias[0] || dense->bias[1];
    for (int i = 0; i < (any_bias ? 4 : 2); i++) {
        tensor_plan *item = NULL;
        int status = import_plan_add(self, capacity, dense->weights[parts[i].module],
                                     parts[i].source, parts[i].target, parts[i].rank,
                                     parts[i].rows, parts[i].columns, &item);
        if (status != TFENC_OK)
            return status;
        item->zeros = i >= 2 && !dense->bias[parts[i].module];
    }
    return TFENC_OK;
}

int import_plan_add(importer *self, int capacity, const tfenc_checkpoint *file,
                    const char *source, const char *target, int rank, int64_t rows,
                    int64_t columns, tensor_plan **added)
{
    if (self->plan_count >= capacity)
        return tfenc_error(self->ctx, TFENC_ERR_INTERNAL, "tensor plan overflow");
    tensor_plan *item = &self->plan[self->plan_count++];
    snprintf(item->source, sizeof item->source, "%s", source);
    snprintf(item->target, sizeof item->target, "%s", target);
    item->rank = rank;
    item->dims[0] = item->source_rows = rows;
    item->dims[1] = columns;
    item->file = file;
    if (added != NULL)
        *added = item;
    return TFENC_OK;
}

/* The moe layers of NomicBERT v2 (megablocks' dMoE names): the router
 * [E, d]; w1 and w2, each [E f, d] with expert e's rows at e f, as each
 * expert's in_weight [f, d] and its out_weight [d, f] (w2's block
 * transposed: megablocks multiplies by it untransposed); the bias shared
 * by the experts. A checkpoint of another expert count is refused by its
 * router's or w1's rows against config.json's num_experts. */
static int moe_plan_count(const model_config *c)
{
    int layers = 0;
    for (int layer = 0; layer < c->n_layers; layer++)
        layers += import_is_moe_layer(c, layer);
    return layers * (2 + 2 * c->moe_experts);
}

static int plan_moe(importer *self, int capacity, const char *prefix, const char *weights_path)
{
    const model_config *c = &self->config;
    const int64_t experts = c->moe_experts, f = c->moe_width, d = c->d_model;
    for (int layer = 0; layer < c->n_layers; layer++) {
        if (!import_is_moe_layer(c, layer))
            continue;
        char source[160];
        snprintf(source, sizeof source, "%sencoder.layers.%d.mlp.router.layer.weight", prefix,
                 layer);
        const tfenc_checkpoint_tensor *router = tfenc_checkpoint_find(self->weights, source);
        if (router != NULL && router->rank == 2 && router->dims[0] != experts)
            return tfenc_error(self->ctx, TFENC_ERR_WEIGHTS, "%s: tensor '%s' has %lld rows "
                               "(experts), config.json's num_experts is %lld", weights_path,
                               source, (long long)router->dims[0], (long long)experts);
        for (int part = 0; part < 2; part++) {
            snprintf(source, sizeof source, "%sencoder.layers.%d.mlp.experts.mlp.w%d", prefix,
                     layer, part + 1);
            const tfenc_checkpoint_tensor *w = tfenc_checkpoint_find(self->weights, source);
            if (w != NULL && w->rank == 2 && w->dims[0] != experts * f)
                return tfenc_error(self->ctx, TFENC_ERR_WEIGHTS, "%s: tensor '%s' has %lld rows, "
                                   "config.json's num_experts %lld x expert width %lld implies "
                                   "%lld", weights_path, source, (long long)w->dims[0],
                                   (long long)experts, (long long)f, (long long)(experts * f));
        }
        if (self->plan_count + 2 + 2 * experts > capacity)
            return tfenc_error(self->ctx, TFENC_ERR_INTERNAL, "tensor plan overflow");
        tensor_plan *item = &self->plan[self->plan_count++];
        snprintf(item->source, sizeof item->source, "%sencoder.layers.%d.mlp.router.layer.weight",
                 prefix, layer);
        snprintf(item->target, sizeof item->target, "/encoder/%d/ffn/router_weight", layer);
        item->rank = 2;
        item->dims[0] = item->source_rows = experts;
        item->dims[1] = d;
        item = &self->plan[self->plan_count++];
        snprintf(item->source, sizeof item->source, "%sencoder.layers.%d.mlp.experts.bias", prefix,
                 layer);
        snprintf(item->target, sizeof item->target, "/encoder/%d/ffn/out_bias", layer);
        item->rank = 1;
        item->dims[0] = item->source_rows = d;
        /* Every expert's block of w1, then of w2: the writer reads each
         * tensor once for its consecutive blocks. */
        for (int part = 0; part < 2; part++)
            for (int e = 0; e < experts; e++) {
                item = &self->plan[self->plan_count++];
                snprintf(item->source, sizeof item->source, "%sencoder.layers.%d.mlp.experts.mlp.w%d",
                         prefix, layer, part + 1);
                snprintf(item->target, sizeof item->target, "/encoder/%d/ffn/experts/%d/%s", layer,
                         e, part == 0 ? "in_weight" : "out_weight");
                item->rank = 2;
                item->source_rows = experts * f;
                item->first_row = e * f;
                item->transposed = part == 1;
                item->dims[0] = part == 0 ? f : d;
                item->dims[1] = part == 0 ? d : f;
            }
    }
    return TFENC_OK;
}

/* Checks the tensor of a plan entry: present, of the planned shape, a float. */
static int check_tensor(importer *self, const char *weights_path, tensor_plan *item)
{
    tfenc_context *ctx = self->ctx;
    if (item->zeros)
        return TFENC_OK;
    if (item->file == NULL)
        item->file = self->weights;
    else
        weights_path = tfenc_checkpoint_name(item->file);
    item->tensor = tfenc_checkpoint_find(item->file, item->source);
    if (item->tensor == NULL)
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: tensor '%s' not found (needed for %s)",
                           weights_path, item->source, item->target);
    int64_t expected[2] = {item->source_rows, item->transposed ? item->dims[0] : item->dims[1]};
    int same = item->tensor->rank == item->rank;
    for (int k = 0; same && k < item->rank; k++)
        same = item->tensor->dims[k] == expected[k];
    if (!same) {
        char wanted[64], found[64];
        import_format_shape(wanted, sizeof wanted, item->rank, expected);
        import_format_shape(found, sizeof found, item->tensor->rank, item->tensor->dims);
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: tensor '%s' has shape %s, config.json "
                           "implies %s", weights_path, item->source, found, wanted);
    }
    const char *dtype = item->tensor->dtype;
    if (strcmp(dtype, "F32") != 0 && strcmp(dtype, "F16") != 0 && strcmp(dtype, "BF16") != 0)
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: tensor '%s' has dtype %s (expected F32, "
                           "F16 or BF16)", weights_path, item->source, dtype);
    return TFENC_OK;
}

static int starts_with_any(const char *name, const char *const *prefixes)
{
    for (; *prefixes != NULL; prefixes++)
        if (strncmp(name, *prefixes, strlen(*prefixes)) == 0)
            return 1;
    return 0;
}

/* A float tensor the map does not use is a part of the model tfenc would
 * silently leave out: under the prefix a variant of the architecture (e.g.
 * JinaBERT's query/key norms), beside it a task head (a
 * *ForSequenceClassification's classifier). Refuse it by name, unless the
 * map lists it as not part of what the model outputs. */
static int check_all_used(importer *self, const char *weights_path, const char *prefix,
                          const architecture_tensors *map)
{
    size_t prefix_length = strlen(prefix);
    for (int i = 0; i < tfenc_checkpoint_count(self->weights); i++) {
        const tfenc_checkpoint_tensor *tensor = tfenc_checkpoint_tensor_at(self->weights, i);
        if (tensor->dtype[0] == 'I' || tensor->dtype[0] == 'U'
            || strcmp(tensor->dtype, "BOOL") == 0)
            continue;
        int used = 0;
        for (int k = 0; k < self->plan_count && !used; k++)
            used = self->plan[k].tensor == tensor || self->plan[k].lora_a == tensor
                   || self->plan[k].lora_b == tensor;
        if (used)
            continue;
        int in_encoder = strncmp(tensor->name, prefix, prefix_length) == 0;
        if (in_encoder && starts_with_any(tensor->name + prefix_length, map->unused))
            continue;
        /* With no prefix the encoder's names and the heads' share the top. */
        if ((!in_encoder || prefix_length == 0)
            && starts_with_any(tensor->name, map->pretraining))
            continue;
        if (in_encoder && prefix_length > 0)
            return tfenc_error(self->ctx, TFENC_ERR_WEIGHTS, "%s: tensor '%s' is not part of "
                               "tfenc's map of %s (a variant of the architecture that tfenc "
                               "does not compute)", weights_path, tensor->name,
                               self->config.model_type);
        return tfenc_error(self->ctx, TFENC_ERR_WEIGHTS, "%s: tensor '%s' is not part of "
                           "tfenc's map of %s (a task head or a variant of the architecture "
                           "that tfenc does not compute; importing the encoder alone would "
                           "drop it)", weights_path, tensor->name, self->config.model_type);
    }
    return TFENC_OK;
}

/* A ColBERT folder's projection: without it the vectors would be the
 * encoder's hidden states, not the model's; its rows give the width when
 * artifact.metadata does not. */
static int plan_colbert(importer *self, const char *weights_path)
{
    multivector_settings *m = &self->config.multivector;
    const tfenc_checkpoint_tensor *linear = tfenc_checkpoint_find(self->weights,
                                                                  "linear.weight");
    if (linear == NULL)
        return tfenc_error(self->ctx, TFENC_ERR_WEIGHTS, "%s: a ColBERT checkpoint (%s) without "
                           "its projection: tensor 'linear.weight' [dim, %d] not found",
                           weights_path, m->source, self->config.d_model);
    if (m->width == 0 && linear->rank == 2 && linear->dims[0] > 0 &&
        linear->dims[0] <= IMPORT_MAX_WIDTH)
        m->width = (int)linear->dims[0];
    if (m->width > self->config.d_model)
        return tfenc_error(self->ctx, TFENC_ERR_WEIGHTS, "%s: ColBERT dim %d is wider than the "
                           "encoder's hidden_size %d (tfenc's vectors travel in d_model-wide "
                           "rows)", weights_path, m->width, self->config.d_model);
    return TFENC_OK;
}

/* GTE's classifier beside the encoder, when no head of the job reads it
 * (NewForSequenceClassification's does), is left out only when it has one
 * label (gte-multilingual-base's sparse weights): a token classifier of more
 * labels computes what such a model outputs. */
static int check_gte_classifier(importer *self, const char *weights_path)
{
    const tfenc_checkpoint_tensor *classifier = tfenc_checkpoint_find(self->weights,
                                                                      "classifier.weight");
    if (self->config.architecture != ARCH_GTE || self->config.head.kind != HEAD_NONE
        || classifier == NULL)
        return TFENC_OK;
    if (classifier->rank == 2 && classifier->dims[0] == 1)
        return TFENC_OK;
    return tfenc_error(self->ctx, TFENC_ERR_WEIGHTS, "%s: tensor 'classifier.weight' is a task "
                       "head of more than one label (tfenc-import leaves out only the one-label "
                       "token classifier of gte-multilingual-base, as sentence-transformers "
                       "does)", weights_path);
}

/* Finds every tensor the model needs and checks its shape and dtype before
 * anything is written, so a bad checkpoint leaves no output behind. */
static int plan_tensors(importer *self, const char *weights_path)
{
    tfenc_context *ctx = self->ctx;
    const model_config *c = &self->config;
    const architecture_tensors *map = import_architecture_tensors(c->architecture);
    const unsigned encoder = NAMES_OF_ARCHITECTURE(c->architecture),
                   head = NAMES_OF_HEAD(c->head.kind);
    const char *located_by = first_model_name(map, encoder), *prefix = NULL;
    for (const char *const *p = map->prefixes; *p != NULL && prefix == NULL; p++) {
        char name[160];
        snprintf(name, sizeof name, "%s%s", *p, located_by);
        if (tfenc_checkpoint_find(self->weights, name) != NULL)
            prefix = *p;
    }
    if (prefix == NULL) {
        char tried[128] = "";
        for (const char *const *p = map->prefixes + 1; *p != NULL; p++)
            snprintf(tried + strlen(tried), sizeof tried - strlen(tried), "%s'%s'",
                     tried[0] != '\0' ? " or " : "", *p);
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: tensor '%s' not found (nor with the "
                           "prefix %s)", weights_path, located_by, tried);
    }

    int status;
    const tensor_id *head_tensors = import_head_tensors(c->head.kind);
    if (c->multivector.present && self->dense_weights == NULL
        && (status = plan_colbert(self, weights_path)) != TFENC_OK)
        return status;
    int capacity = count_tensors(map->tensors, 0) + count_tensors(map->tensors, 1) * c->n_layers
                   + count_tensors(head_tensors, 0) + count_tensors(import_projection_tensors, 0)
                   + 4 /* plan_dense() */ + IMPORT_BGE_M3_TENSORS + moe_plan_count(c);
    self->plan = calloc((size_t)capacity, sizeof *self->plan);
    if (self->plan == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    if ((status = plan_list(self, capacity, prefix, encoder, map->tensors, -1)))
        return status;
    for (int layer = 0; layer < c->n_layers; layer++)
        if ((status = plan_list(self, capacity, prefix, encoder, map->tensors, layer)))
            return status;
    if ((status = plan_moe(self, capacity, prefix, weights_path))
        || (status = plan_list(self, capacity, prefix, head, head_tensors, -1)))
        return status;
    /* The multi-vector projection: ColBERT's beside the encoder, PyLate's
     * in its Dense folder's file. */
    int before = self->plan_count;
    if (c->multivector.present
        && (status = plan_list(self, capacity, prefix, NAMES_OF_PROJECTION,
                               import_projection_tensors, -1)))
        return status;
    for (int i = before; i < self->plan_count; i++)
        self->plan[i].file = self->dense_weights;
    if ((status = plan_dense(self, capacity)) || (status = import_plan_bge_m3(self, capacity)))
        return status;

    for (int i = 0; i < self->plan_count; i++) {
        tensor_plan *item = &self->plan[i];
        if ((status = check_tensor(self, weights_path, item)) != TFENC_OK)
            return status;
        /* A tensor copied into every layer, or split in halves, counts once;
         * zeros do not count. */
        int counted = item->zeros;
        for (int k = 0; k < i && !counted; k++)
            counted = self->plan[k].tensor == item->tensor;
        if (!counted)
            self->n_parameters += item->tensor->n_elements;
    }
    if ((status = import_plan_adapters(self, weights_path)) != TFENC_OK)
        return status;
    if ((status = check_gte_classifier(self, weights_path)) != TFENC_OK)
        return status;
    return check_all_used(self, weights_path, prefix, map);
}

/* The names transformers gives a checkpoint's tensors as it loads them,
 * so that checkpoints saved under older names load as they are:
 * transformers 4.40 (modeling_utils.py: _fix_key, and
 * _load_state_dict_into_model) replaces every "beta" of a name that holds
 * one by "bias", else every "gamma" by "weight" (the LayerNorm names of
 * BERT checkpoints converted from TensorFlow); transformers 5
 * (conversion_mapping.py, "legacy") keeps that for "LayerNorm.gamma" and
 * "LayerNorm.beta" and renames the weight norm of PyTorch before 2.1,
 * "weight_g" and "weight_v" at the end of a name, to
 * "parametrizations.weight.original0" and "original1". No architecture of
 * tfenc's has a weight-normed layer: such a tensor is then refused as not
 * part of the map, by its new name. */
static const struct {
    const char *from, *to;
    int at_end; /* only as the end of the name (transformers 5's weight norm) */
} legacy_renamings[] = {
    {"beta", "bias", 0},
    {"gamma", "weight", 0},
    {"weight_g", "parametrizations.weight.original0", 1},
    {"weight_v", "parametrizations.weight.original1", 1},
};

/* `name` with the first renaming that applies, into `renamed`; 0 when none
 * applies (or the result would not fit a plan's source name). */
static int legacy_name(const char *name, char *renamed, size_t size, int *rule)
{
    for (int r = 0; r < (int)(sizeof legacy_renamings / sizeof legacy_renamings[0]); r++) {
        const char *from = legacy_renamings[r].from, *to = legacy_renamings[r].to;
        size_t from_length = strlen(from), name_length = strlen(name);
        if (legacy_renamings[r].at_end
                ? name_length < from_length || strcmp(name + name_length - from_length, from) != 0
                : strstr(name, from) == NULL)
            continue;
        size_t used = 0;
        for (const char *at = name; *at != '\0' && used < size;) {
            const char *next = legacy_renamings[r].at_end ? name + name_length - from_length
                                                          : strstr(at, from);
            if (next == NULL)
                next = at + strlen(at);
            used += (size_t)snprintf(renamed + used, size - used, "%.*s%s", (int)(next - at), at,
                                     *next != '\0' ? to : "");
            at = *next != '\0' ? next + from_length : next;
        }
        *rule = r;
        return used < size;
    }
    return 0;
}

/* Renames the model's tensors as transformers does on load, and says so
 * under --verbose. */
static int rename_legacy_tensors(importer *self)
{
    int status = TFENC_OK;
    for (int i = 0; i < tfenc_checkpoint_count(self->weights) && status == TFENC_OK; i++) {
        const tfenc_checkpoint_tensor *tensor = tfenc_checkpoint_tensor_at(self->weights, i);
        char renamed[sizeof self->plan->source];
        int rule;
        if (!legacy_name(tensor->stored_name, renamed, sizeof renamed, &rule))
            continue;
        status = tfenc_checkpoint_rename(self->ctx, self->weights, i, renamed);
        if (status == TFENC_OK && self->verbose != NULL)
            fprintf(self->verbose, "tfenc-import: %s: tensor '%s' loads as '%s' (transformers "
                    "renames %s to %s on load)\n", tensor->file, tensor->stored_name, renamed,
                    legacy_renamings[rule].from, legacy_renamings[rule].to);
    }
    return status;
}

int import_open_weights(importer *self)
{
    tfenc_context *ctx = self->ctx;
    int status = import_open_checkpoint(ctx, self->transformer_dir, &self->weights);
    if (status == TFENC_OK && self->weights == NULL)
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: no model.safetensors, "
                             "model.safetensors.index.json, pytorch_model.bin nor "
                             "pytorch_model.bin.index.json (a Hugging Face model directory "
                             "holds config.json and the weights)", self->transformer_dir);
    if (status != TFENC_OK)
        return status;
    const char *path = tfenc_checkpoint_name(self->weights);
    if (self->verbose != NULL)
        fprintf(self->verbose, "tfenc-import: %s: %d tensors in %d file%s\n", path,
                tfenc_checkpoint_count(self->weights), tfenc_checkpoint_file_count(self->weights),
                tfenc_checkpoint_file_count(self->weights) == 1 ? "" : "s");
    if ((status = rename_legacy_tensors(self)) == TFENC_OK
        && (status = import_rename_adapted_weights(self)) == TFENC_OK)
        status = plan_tensors(self, path);
    return status;
}
