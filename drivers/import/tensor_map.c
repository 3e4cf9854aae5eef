/* Which tensor of model.safetensors becomes which dataset of the weights
 * file (docs/weights.md), per architecture; every tensor is found and its
 * shape and dtype checked before anything is written. */
#include "config.h"

#include "tensor_map.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"

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

int import_open_weights(importer *self)
{
    tfenc_context *ctx = self->ctx;
    const char *dir = self->transformer_dir;
    char *path = import_join_path(dir, "model.safetensors");
    char *bin_path = import_join_path(dir, "pytorch_model.bin");
    char *index_path = import_join_path(dir, "model.safetensors.index.json");
    int status;
    if (path == NULL || bin_path == NULL || index_path == NULL) {
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    } else if (import_file_exists(path)) {
        status = tfenc_safetensors_open(ctx, path, &self->weights);
        if (status == TFENC_OK)
            status = plan_tensors(self, path);
    } else if (import_file_exists(index_path)) {
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: sharded checkpoints are not "
                             "supported; save the model as one model.safetensors", index_path);
    } else if (import_file_exists(bin_path)) {
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
