/* config.json: the architecture of a Hugging Face checkpoint. */
#include "config.h"

#include "hf_config.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "files.h"

int import_read_config(importer *self)
{
    tfenc_context *ctx = self->ctx;
    model_config *config = &self->config;
    char *path = import_join_path(self->transformer_dir, "config.json");
    if (path == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    json_t *json = NULL;
    int status = import_load_json(ctx, path, &json, &config->config_text);
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

    if ((status = import_json_int(ctx, path, json, "hidden_size", 1, -1, &config->d_model))
        || (status = import_json_int(ctx, path, json, "num_attention_heads", 1, -1,
                                     &config->n_heads))
        || (status = import_json_int(ctx, path, json, "num_hidden_layers", 1, -1,
                                     &config->n_layers))
        || (status = import_json_int(ctx, path, json, "intermediate_size", 1, -1,
                                     &config->ffn_width))
        || (status = import_json_int(ctx, path, json, "vocab_size", 1, -1, &config->vocab_size))
        || (status = import_json_int(ctx, path, json, "max_position_embeddings", 1, 512,
                                     &config->max_position_embeddings))
        || (status = import_json_int(ctx, path, json, "type_vocab_size", 0, 2,
                                     &config->type_vocab_size))
        || (status = import_json_int(ctx, path, json, "pad_token_id", 0, is_roberta ? 1 : 0,
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
