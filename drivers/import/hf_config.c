/* config.json: the architecture of a Hugging Face checkpoint, read with the
 * defaults of the class that wrote it (transformers 4.40's configuration
 * classes, or the published modeling code of models transformers lacks),
 * and refused in one line where tfenc's layers cannot compute it exactly. */
#include "config.h"

#include "hf_config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "files.h"

#define SUPPORTED_TYPES "bert, roberta, xlm-roberta, electra, mpnet, distilbert, nomic_bert, " \
                        "modernbert, qwen2, qwen3, gemma3_text, deberta-v2, new (GTE v1.5, " \
                        "mGTE), and bert with " \
                        "position_embedding_type alibi (JinaBERT v2)"

/* What every reader starts from: a post-norm BERT-style encoder. */
static void set_bert_defaults(model_config *config)
{
    config->learned_positions = 1;
    config->embeddings_norm = 1;
    config->norm_bias = 1;
    config->qkv_bias = config->out_bias = 1;
    config->ffn_in_bias = config->ffn_out_bias = 1;
    config->position = "none";
}

/* Maps a transformers activation name (hidden_act) to tfenc's ffn name. */
static int read_activation(tfenc_context *ctx, const char *path, json_t *json, const char *key,
                           const char *default_name, const char **activation)
{
    json_t *item = json_object_get(json, key);
    const char *name = item == NULL ? default_name : json_string_value(item);
    if (name != NULL && strcmp(name, "gelu") == 0)
        *activation = "gelu";
    else if (name != NULL
             && (strcmp(name, "gelu_new") == 0 || strcmp(name, "gelu_pytorch_tanh") == 0))
        *activation = "gelu_tanh";
    else if (name != NULL && strcmp(name, "relu") == 0)
        *activation = "relu";
    else
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: %s '%s' is not supported (tfenc-import "
                           "maps gelu, gelu_new, gelu_pytorch_tanh and relu)", path, key,
                           name != NULL ? name : "(not a string)");
    return TFENC_OK;
}

/* hidden_size, num_attention_heads, num_hidden_layers, intermediate_size,
 * vocab_size: the keys every transformers encoder config has. */
static int read_dimensions(tfenc_context *ctx, const char *path, json_t *json,
                           model_config *config)
{
    int status;
    if ((status = import_json_int(ctx, path, json, "hidden_size", 1, IMPORT_MAX_WIDTH, -1, &config->d_model))
        || (status = import_json_int(ctx, path, json, "num_attention_heads", 1, IMPORT_MAX_WIDTH, -1,
                                     &config->n_heads))
        || (status = import_json_int(ctx, path, json, "num_hidden_layers", 1, IMPORT_MAX_LAYERS, -1,
                                     &config->n_layers))
        || (status = import_json_int(ctx, path, json, "intermediate_size", 1, IMPORT_MAX_FFN_WIDTH, -1,
                                     &config->ffn_width))
        || (status = import_json_int(ctx, path, json, "vocab_size", 1, IMPORT_MAX_VOCAB, -1, &config->vocab_size)))
        return status;
    config->n_kv_heads = config->n_heads;
    return TFENC_OK;
}

/* XLMRobertaFlashConfig (jinaai/xlm-roberta-flash-implementation,
 * configuration_xlm_roberta.py, whose defaults are jina-embeddings-v3's):
 * XLM-R's post-norm layers with rotary positions instead of a position
 * table (rotary_emb_base; rotary_emb_dim, default the whole head), a fused
 * Wqkv, and LoRA task adapters beside the weights (adapters.c). */
static int read_xlm_roberta_rotary(tfenc_context *ctx, const char *path, json_t *json,
                                   model_config *config)
{
    set_bert_defaults(config);
    config->architecture = ARCH_XLMR_ROTARY;
    config->learned_positions = 0;
    config->position = "rope";
    int status;
    double rotary_dims;
    if ((status = read_dimensions(ctx, path, json, config))
        || (status = read_activation(ctx, path, json, "hidden_act", "gelu", &config->activation))
        || (status = import_json_int(ctx, path, json, "max_position_embeddings", 1,
                                     IMPORT_MAX_POSITIONS, 8194,
                                     &config->max_position_embeddings))
        || (status = import_json_int(ctx, path, json, "type_vocab_size", 0, IMPORT_MAX_VOCAB, 1,
                                     &config->type_vocab_size))
        || (status = import_json_int(ctx, path, json, "pad_token_id", 0, IMPORT_MAX_VOCAB, 1,
                                     &config->pad_token_id))
        || (status = import_json_positive(ctx, path, json, "layer_norm_eps", 1e-5,
                                          &config->layer_norm_eps))
        || (status = import_json_positive(ctx, path, json, "rotary_emb_base", 10000.0,
                                          &config->rope_theta))
        || (status = import_json_bool(ctx, path, json, "rotary_emb_interleaved", 0,
                                      &config->rope_interleaved)))
        return status;
    if (config->d_model % config->n_heads != 0)
        return TFENC_OK; /* the caller names the mismatch */
    int head_dim = config->d_model / config->n_heads;
    if ((status = import_json_positive(ctx, path, json, "rotary_emb_dim", head_dim,
                                       &rotary_dims)))
        return status;
    /* rotary.py turns the halves of the rotated dims (GPT-NeoX's layout,
     * the mha's rope_style = half), or with rotary_emb_interleaved the
     * pairs 2i, 2i + 1 (GPT-J's, rope_style = interleaved); XPos's
     * scale_base changes the magnitudes, which tfenc does not compute. */
    json_t *scale_base = json_object_get(json, "rotary_emb_scale_base");
    if (scale_base != NULL && !json_is_null(scale_base))
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: rotary_emb_scale_base (XPos) is not "
                           "supported", path);
    config->rope_dims = (int)rotary_dims;
    if (config->rope_dims != rotary_dims || config->rope_dims % 2 != 0
        || config->rope_dims > head_dim)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: rotary_emb_dim %g must be an even "
                           "number of dims of a %d-wide head", path, rotary_dims, head_dim);
    return TFENC_OK;
}

/* BERT, RoBERTa, XLM-R, ELECTRA, MPNet and JinaBERT v2 share BertConfig's keys. */
static int read_bert_family(tfenc_context *ctx, const char *path, json_t *json,
                            const char *model_type, model_config *config)
{
    int is_roberta = strcmp(model_type, "roberta") == 0 || strcmp(model_type, "xlm-roberta") == 0;
    int is_mpnet = strcmp(model_type, "mpnet") == 0;
    set_bert_defaults(config);
    config->architecture = is_roberta ? ARCH_ROBERTA : is_mpnet ? ARCH_MPNET : ARCH_BERT;

    const char *position_type;
    int status = import_json_string(ctx, path, json, "position_embedding_type", "absolute",
                                    &position_type);
    if (status != TFENC_OK)
        return status;
    if (strcmp(model_type, "bert") == 0 && strcmp(position_type, "alibi") == 0) {
        /* JinaBERT v2 (jinaai/jina-bert-implementation): ALiBi instead of
         * learned positions, and a GEGLU feed-forward without input bias. */
        const char *feed_forward;
        if ((status = import_json_string(ctx, path, json, "feed_forward_type", "original",
                                         &feed_forward)))
            return status;
        if (strcmp(feed_forward, "geglu") != 0)
            return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: feed_forward_type '%s' is not "
                               "supported for JinaBERT (only 'geglu')", path, feed_forward);
        config->architecture = ARCH_JINA_BERT;
        config->learned_positions = 0;
        config->position = "alibi";
        config->activation = "geglu";
        config->ffn_in_bias = 0;
    } else if (strcmp(model_type, "xlm-roberta") == 0 && strcmp(position_type, "rotary") == 0) {
        return read_xlm_roberta_rotary(ctx, path, json, config);
    } else if (!is_mpnet && strcmp(position_type, "absolute") != 0) {
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: position_embedding_type '%s' is not "
                           "supported (only 'absolute', 'alibi' for JinaBERT and 'rotary' for "
                           "xlm-roberta)", path,
                           position_type);
    } else if ((status = read_activation(ctx, path, json, "hidden_act", "gelu",
                                         &config->activation))) {
        return status;
    }

    if ((status = read_dimensions(ctx, path, json, config))
        || (status = import_json_int(ctx, path, json, "max_position_embeddings", 1, IMPORT_MAX_POSITIONS, 512,
                                     &config->max_position_embeddings))
        || (status = import_json_int(ctx, path, json, "type_vocab_size", 0, IMPORT_MAX_VOCAB, 2,
                                     &config->type_vocab_size))
        || (status = import_json_int(ctx, path, json, "pad_token_id", 0, IMPORT_MAX_VOCAB,
                                     is_roberta || is_mpnet ? 1 : 0, &config->pad_token_id))
        || (status = import_json_positive(ctx, path, json, "layer_norm_eps", 1e-12,
                                          &config->layer_norm_eps)))
        return status;

    if (strcmp(model_type, "electra") == 0) {
        /* ELECTRA projects embeddings of another width into hidden_size
         * after their LayerNorm: tfenc's model has one width. */
        int embedding_size;
        if ((status = import_json_int(ctx, path, json, "embedding_size", 1, IMPORT_MAX_WIDTH, 128,
                                      &embedding_size)))
            return status;
        if (embedding_size != config->d_model)
            return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: embedding_size %d differs from "
                               "hidden_size %d (the embeddings_project layer is not supported)",
                               path, embedding_size, config->d_model);
    }
    if (is_roberta) {
        /* RoBERTa's position ids start after padding_idx
         * (create_position_ids_from_input_ids). */
        config->position_offset = config->pad_token_id + 1;
    } else if (is_mpnet) {
        /* MPNetEmbeddings numbers positions from its padding_idx, fixed at
         * 1, plus one; it has no token types. Its relative position bias
         * always uses 32 buckets (compute_position_bias's default), from a
         * table of relative_attention_num_buckets rows. */
        config->position_offset = 2;
        config->type_vocab_size = 0;
        config->position = "relative_buckets";
        if ((status = import_json_int(ctx, path, json, "relative_attention_num_buckets", 32, IMPORT_MAX_POSITIONS, 32,
                                      &config->num_buckets)))
            return status;
    }
    if (config->position_offset >= config->max_position_embeddings)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: pad_token_id %d leaves no position of "
                           "max_position_embeddings %d", path, config->pad_token_id,
                           config->max_position_embeddings);
    return TFENC_OK;
}

/* DistilBertConfig: dim, n_heads, n_layers, hidden_dim; LayerNorm eps fixed
 * at 1e-12 in its modeling code; no token types. */
static int read_distilbert(tfenc_context *ctx, const char *path, json_t *json,
                           model_config *config)
{
    set_bert_defaults(config);
    config->architecture = ARCH_DISTILBERT;
    config->layer_norm_eps = 1e-12;
    int status;
    if ((status = import_json_int(ctx, path, json, "dim", 1, IMPORT_MAX_WIDTH, 768, &config->d_model))
        || (status = import_json_int(ctx, path, json, "n_heads", 1, IMPORT_MAX_WIDTH, 12, &config->n_heads))
        || (status = import_json_int(ctx, path, json, "n_layers", 1, IMPORT_MAX_LAYERS, 6, &config->n_layers))
        || (status = import_json_int(ctx, path, json, "hidden_dim", 1, IMPORT_MAX_FFN_WIDTH, 3072, &config->ffn_width))
        || (status = import_json_int(ctx, path, json, "vocab_size", 1, IMPORT_MAX_VOCAB, 30522,
                                     &config->vocab_size))
        || (status = import_json_int(ctx, path, json, "max_position_embeddings", 1, IMPORT_MAX_POSITIONS, 512,
                                     &config->max_position_embeddings))
        || (status = import_json_int(ctx, path, json, "pad_token_id", 0, IMPORT_MAX_VOCAB, 0,
                                     &config->pad_token_id))
        || (status = read_activation(ctx, path, json, "activation", "gelu",
                                     &config->activation)))
        return status;
    config->n_kv_heads = config->n_heads;
    return TFENC_OK;
}

/* nomic-embed-text-v2-moe's mixture of experts (contrastors' NomicBertEncoder
 * with megablocks' dMoE, which read these keys with getattr and these
 * defaults): layer i is a moe layer when num_experts > 0, moe_every_n_layers
 * > 0 and i % moe_every_n_layers == 1; each routes to moe_top_k of
 * num_experts experts of width n_inner / ffn_div, an MLP of the model's
 * activation (plain: megablocks' GLU experts, for swiglu, are refused). */
static int read_nomic_moe(tfenc_context *ctx, const char *path, json_t *json,
                          model_config *config)
{
    int shared, expert_choice, status;
    double ffn_div;
    const char *implementation;
    if ((status = import_json_int(ctx, path, json, "num_experts", 0, IMPORT_MAX_WIDTH, 0,
                                  &config->moe_experts)))
        return status;
    if (config->moe_experts == 0)
        return TFENC_OK;
    if ((status = import_json_int(ctx, path, json, "moe_top_k", 1, IMPORT_MAX_WIDTH, -1,
                                  &config->moe_top_k))
        || (status = import_json_int(ctx, path, json, "moe_every_n_layers", 0, IMPORT_MAX_LAYERS,
                                     0, &config->moe_every))
        || (status = import_json_int(ctx, path, json, "num_shared_experts", 0, IMPORT_MAX_WIDTH,
                                     0, &shared))
        || (status = import_json_bool(ctx, path, json, "expert_choice_router", 0,
                                      &expert_choice))
        || (status = import_json_positive(ctx, path, json, "ffn_div", 1.0, &ffn_div))
        || (status = import_json_string(ctx, path, json, "moe_impl", "megablocks",
                                        &implementation)))
        return status;
    if (config->moe_top_k > config->moe_experts)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: moe_top_k %d exceeds num_experts %d",
                           path, config->moe_top_k, config->moe_experts);
    if (strcmp(implementation, "megablocks") != 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: moe_impl '%s' is not supported (tfenc "
                           "maps megablocks' dMoE)", path, implementation);
    /* Expert choice routes by expert over the whole batch: a token's
     * experts would depend on the other documents. */
    if (expert_choice)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: expert_choice_router = true is not "
                           "supported (a token's experts would depend on its batch)", path);
    if (shared > 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: num_shared_experts %d is not supported "
                           "(tfenc maps routed experts only)", path, shared);
    if (strcmp(config->activation, "gelu") != 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: activation_function '%s' with experts "
                           "is not supported (megablocks' GLU experts; tfenc maps gelu ones)",
                           path, config->activation);
    config->moe_width = (int)(config->ffn_width / ffn_div);
    if (config->moe_width < 1 || config->moe_width * ffn_div != config->ffn_width)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: ffn_div %g does not divide n_inner %d",
                           path, ffn_div, config->ffn_width);
    /* moe_normalize_expert_weights: false or null (none), or the q of a
     * q-norm (megablocks' torch.norm(p=q); true counts as 1, as Python's). */
    json_t *normalize = json_object_get(json, "moe_normalize_expert_weights");
    if (json_is_number(normalize) && json_number_value(normalize) >= 0)
        config->moe_normalize = json_number_value(normalize);
    else if (json_is_boolean(normalize))
        config->moe_normalize = json_is_true(normalize) ? 1.0 : 0.0;
    else if (normalize != NULL && !json_is_null(normalize))
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: moe_normalize_expert_weights must be "
                           "false, null or a number >= 0", path);
    return TFENC_OK;
}

/* NomicBertConfig (nomic-ai/contrastors, GPT2Config keys): the post-norm
 * encoder of nomic-embed-text with rotary positions and SwiGLU, or (v2)
 * GELU and a mixture of experts in every second layer. */
static int read_nomic_bert(tfenc_context *ctx, const char *path, json_t *json,
                           model_config *config)
{
    set_bert_defaults(config);
    config->architecture = ARCH_NOMIC_BERT;
    config->learned_positions = 0;
    config->position = "rope";
    const char *activation;
    double fraction;
    int prenorm, rms, parallel, causal, multiple;
    int status;
    if ((status = import_json_int(ctx, path, json, "n_embd", 1, IMPORT_MAX_WIDTH, 768, &config->d_model))
        || (status = import_json_int(ctx, path, json, "n_head", 1, IMPORT_MAX_WIDTH, 12, &config->n_heads))
        || (status = import_json_int(ctx, path, json, "n_layer", 1, IMPORT_MAX_LAYERS, 12, &config->n_layers))
        || (status = import_json_int(ctx, path, json, "n_inner", 1, IMPORT_MAX_FFN_WIDTH, -1, &config->ffn_width))
        || (status = import_json_int(ctx, path, json, "vocab_size", 1, IMPORT_MAX_VOCAB, -1, &config->vocab_size))
        || (status = import_json_int(ctx, path, json, "pad_vocab_size_multiple", 1, IMPORT_MAX_VOCAB, 1,
                                     &multiple))
        || (status = import_json_int(ctx, path, json, "max_trained_positions", 1, IMPORT_MAX_POSITIONS, 2048,
                                     &config->max_position_embeddings))
        || (status = import_json_int(ctx, path, json, "type_vocab_size", 0, IMPORT_MAX_VOCAB, 2,
                                     &config->type_vocab_size))
        || (status = import_json_positive(ctx, path, json, "layer_norm_epsilon", 1e-5,
                                          &config->layer_norm_eps))
        || (status = import_json_string(ctx, path, json, "activation_function", "gelu",
                                        &activation))
        || (status = import_json_positive(ctx, path, json, "rotary_emb_fraction", 0.0,
                                          &fraction))
        || (status = import_json_positive(ctx, path, json, "rotary_emb_base", 10000.0,
                                          &config->rope_theta))
        || (status = import_json_bool(ctx, path, json, "rotary_emb_interleaved", 0,
                                      &config->rope_interleaved))
        || (status = import_json_bool(ctx, path, json, "qkv_proj_bias", 1, &config->qkv_bias))
        || (status = import_json_bool(ctx, path, json, "mlp_fc1_bias", 1, &config->ffn_in_bias))
        || (status = import_json_bool(ctx, path, json, "mlp_fc2_bias", 1,
                                      &config->ffn_out_bias))
        || (status = import_json_bool(ctx, path, json, "prenorm", 0, &prenorm))
        || (status = import_json_bool(ctx, path, json, "use_rms_norm", 0, &rms))
        || (status = import_json_bool(ctx, path, json, "parallel_block", 0, &parallel))
        || (status = import_json_bool(ctx, path, json, "causal", 0, &causal)))
        return status;
    config->n_kv_heads = config->n_heads;
    config->out_bias = config->qkv_bias;
    /* NomicBertModel pads the vocabulary to a multiple of this. */
    config->vocab_size = (config->vocab_size + multiple - 1) / multiple * multiple;
    const char *refused = prenorm ? "prenorm" : rms ? "use_rms_norm" : parallel ? "parallel_block"
                          : causal ? "causal" : NULL;
    if (refused != NULL)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: %s = true is not supported for "
                           "nomic_bert", path, refused);
    if (json_object_get(json, "rotary_emb_scale_base") != NULL
        && !json_is_null(json_object_get(json, "rotary_emb_scale_base")))
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: rotary_emb_scale_base (XPos) is not "
                           "supported", path);
    if (strcmp(activation, "swiglu") == 0)
        config->activation = "swiglu";
    else if (strcmp(activation, "geglu") == 0)
        config->activation = "geglu";
    else if (strcmp(activation, "gelu") == 0) /* v2: fc1, exact GELU, fc2 */
        config->activation = "gelu";
    else
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: activation_function '%s' is not "
                           "supported for nomic_bert (swiglu, geglu or gelu)", path, activation);
    if ((status = read_nomic_moe(ctx, path, json, config)))
        return status;
    if (config->d_model % config->n_heads != 0)
        return TFENC_OK; /* the caller names the mismatch */
    int head_dim = config->d_model / config->n_heads;
    config->rope_dims = (int)(head_dim * fraction);
    if (!(fraction > 0) || config->rope_dims % 2 != 0 || config->rope_dims > head_dim)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: rotary_emb_fraction %g gives %d rotary "
                           "dims of a %d-wide head (need an even number, at least 2)", path,
                           fraction, config->rope_dims, head_dim);
    /* Beyond max_trained_positions a rotary_scaling_factor would change the
     * frequencies (dynamic NTK): the job's inputs stop before, where they
     * are exactly the plain rotary ones. */
    return TFENC_OK;
}

/* GTE's rope_scaling (Alibaba-NLP new-impl, NewEmbeddings._init_rope):
 * null, or {"type": "ntk", "factor": F} with an optional "mixed_b", which
 * NTKScalingRotaryEmbedding applies at every length when F >= 1 (below 1
 * it would apply only past max_position_embeddings: refused). */
static int read_gte_rope_scaling(tfenc_context *ctx, const char *path, json_t *json,
                                 model_config *config)
{
    json_t *scaling = json_object_get(json, "rope_scaling");
    if (scaling == NULL || json_is_null(scaling))
        return TFENC_OK;
    if (!json_is_object(scaling))
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: rope_scaling must be null or an object",
                           path);
    const char *type = json_string_value(json_object_get(scaling, "type"));
    if (type == NULL || strcmp(type, "ntk") != 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: rope_scaling type '%s' is not supported "
                           "(the GTE code's ntk only)", path,
                           type != NULL ? type : "(not a string)");
    json_t *factor = json_object_get(scaling, "factor");
    if (!json_is_number(factor) || !(json_number_value(factor) >= 1.0)
        || !isfinite(json_number_value(factor)))
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: rope_scaling factor must be a number of at "
                           "least 1 (below 1 the GTE code scales only past "
                           "max_position_embeddings)", path);
    config->rope_scaling = "ntk";
    config->rope_factor = json_number_value(factor);
    json_t *mixed_b = json_object_get(scaling, "mixed_b");
    if (mixed_b != NULL && !json_is_null(mixed_b)) {
        if (!json_is_number(mixed_b) || !(json_number_value(mixed_b) > 0)
            || !isfinite(json_number_value(mixed_b)))
            return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: rope_scaling mixed_b must be a "
                               "positive number or null", path);
        config->rope_mixed_b = json_number_value(mixed_b);
    }
    return TFENC_OK;
}

/* NewConfig (Alibaba-NLP new-impl configuration.py and modeling.py: GTE
 * v1.5, gte-multilingual-base): BERT's post-norm layout with rotary
 * positions (NTK-scaled), a packed qkv_proj, and a GLU whose up_gate_proj
 * holds the up rows, then the gate rows, without a bias; token types only
 * when type_vocab_size > 0. */
static int read_gte(tfenc_context *ctx, const char *path, json_t *json, model_config *config)
{
    set_bert_defaults(config);
    config->architecture = ARCH_GTE;
    config->learned_positions = 0;
    config->position = "rope";
    config->ffn_in_bias = 0;
    const char *activation, *position_type, *norm_type;
    int pack_qkv, logn_scale, status;
    if ((status = read_dimensions(ctx, path, json, config))
        || (status = import_json_int(ctx, path, json, "max_position_embeddings", 1,
                                     IMPORT_MAX_POSITIONS, 2048,
                                     &config->max_position_embeddings))
        || (status = import_json_int(ctx, path, json, "type_vocab_size", 0, IMPORT_MAX_VOCAB, 1,
                                     &config->type_vocab_size))
        || (status = import_json_int(ctx, path, json, "pad_token_id", 0, IMPORT_MAX_VOCAB, 0,
                                     &config->pad_token_id))
        || (status = import_json_positive(ctx, path, json, "layer_norm_eps", 1e-12,
                                          &config->layer_norm_eps))
        || (status = import_json_positive(ctx, path, json, "rope_theta", 10000.0,
                                          &config->rope_theta))
        || (status = import_json_string(ctx, path, json, "hidden_act", "gelu", &activation))
        || (status = import_json_string(ctx, path, json, "position_embedding_type", "rope",
                                        &position_type))
        || (status = import_json_string(ctx, path, json, "layer_norm_type", "layer_norm",
                                        &norm_type))
        || (status = import_json_bool(ctx, path, json, "pack_qkv", 1, &pack_qkv))
        || (status = import_json_bool(ctx, path, json, "logn_attention_scale", 0, &logn_scale))
        || (status = read_gte_rope_scaling(ctx, path, json, config)))
        return status;
    /* Variants the published checkpoints do not use, refused rather than
     * guessed at. */
    if (strcmp(position_type, "rope") != 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: position_embedding_type '%s' is not "
                           "supported for new (only 'rope')", path, position_type);
    if (strcmp(norm_type, "layer_norm") != 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: layer_norm_type '%s' is not supported "
                           "for new (only 'layer_norm')", path, norm_type);
    if (!pack_qkv)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: pack_qkv = false is not supported for "
                           "new (tfenc maps the packed qkv_proj)", path);
    if (logn_scale)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: logn_attention_scale = true is not "
                           "supported for new", path);
    /* NewGatedMLP: act(gate) * up */
    if (strcmp(activation, "gelu") == 0)
        config->activation = "geglu";
    else if (strcmp(activation, "gelu_new") == 0 || strcmp(activation, "gelu_pytorch_tanh") == 0)
        config->activation = "geglu_tanh";
    else if (strcmp(activation, "silu") == 0)
        config->activation = "swiglu";
    else
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: hidden_act '%s' is not supported for new "
                           "(gelu, gelu_new, gelu_pytorch_tanh or silu, gating the GLU)", path,
                           activation);
    config->rope_dims = config->d_model / config->n_heads;
    return TFENC_OK;
}

/* (Defined with the decoders' readers below, which share them.) */
static int refuse_rope_scaling(tfenc_context *ctx, const char *path, json_t *json);
static int read_rope_parameters(tfenc_context *ctx, const char *path, json_t *json,
                                const char *layer_type, double *theta);
static int read_layer_types(tfenc_context *ctx, const char *path, json_t *json,
                            const char *pattern_key, int pattern_default, int count_from,
                            model_config *config);

/* ModernBertConfig (transformers 4.48, and 5's keys): pre-norm, GEGLU, RoPE
 * with a global and a local base, sliding-window attention on all but every
 * n-th layer. */
static int read_modernbert(tfenc_context *ctx, const char *path, json_t *json,
                           model_config *config)
{
    set_bert_defaults(config);
    config->architecture = ARCH_MODERNBERT;
    config->learned_positions = 0;
    config->pre_norm = config->final_norm = 1;
    config->type_vocab_size = 0;
    config->position = "rope";
    const char *activation;
    int attention_bias, mlp_bias, local_attention, status;
    if ((status = read_dimensions(ctx, path, json, config))
        || (status = import_json_int(ctx, path, json, "max_position_embeddings", 1, IMPORT_MAX_POSITIONS, 8192,
                                     &config->max_position_embeddings))
        || (status = import_json_int(ctx, path, json, "pad_token_id", 0, IMPORT_MAX_VOCAB, 50283,
                                     &config->pad_token_id))
        || (status = import_json_positive(ctx, path, json, "norm_eps", 1e-5,
                                          &config->layer_norm_eps))
        || (status = import_json_bool(ctx, path, json, "norm_bias", 0, &config->norm_bias))
        || (status = import_json_bool(ctx, path, json, "attention_bias", 0, &attention_bias))
        || (status = import_json_bool(ctx, path, json, "mlp_bias", 0, &mlp_bias))
        || (status = import_json_positive(ctx, path, json, "global_rope_theta", 160000.0,
                                          &config->rope_theta))
        || (status = import_json_positive(ctx, path, json, "local_rope_theta", 10000.0,
                                          &config->local_rope_theta))
        || (status = import_json_int(ctx, path, json, "local_attention", 2, IMPORT_MAX_POSITIONS, 128,
                                     &local_attention))
        || (status = import_json_string(ctx, path, json, "hidden_activation", "gelu",
                                        &activation))
        /* transformers 5 writes the bases per layer type and the layers'
         * types, which then win over the older keys read above (2025's
         * checkpoints re-saved by it, mmBERT's and Ettin's among them); a
         * YaRN-scaled one (mmBERT's 32k) has rope_scaling. */
        || (status = refuse_rope_scaling(ctx, path, json))
        || (status = read_rope_parameters(ctx, path, json, "full_attention",
                                          &config->rope_theta))
        || (status = read_rope_parameters(ctx, path, json, "sliding_attention",
                                          &config->local_rope_theta))
        || (status = read_layer_types(ctx, path, json, "global_attn_every_n_layers", 3, 0,
                                      config)))
        return status;
    /* A local layer sees |i - j| <= local_attention / 2 (sliding_window). */
    config->local_reach = local_attention / 2;
    config->qkv_bias = config->out_bias = attention_bias;
    config->ffn_in_bias = config->ffn_out_bias = mlp_bias;
    if (strcmp(activation, "gelu") != 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: hidden_activation '%s' is not supported "
                           "for modernbert (only 'gelu', as GEGLU)", path, activation);
    config->activation = "geglu";
    config->rope_dims = config->d_model / config->n_heads;
    return TFENC_OK;
}

/* DeBERTa's pos_att_type: a list or a '|'-separated string of c2p and p2c
 * (DebertaV2Config splits a string), as the mha key relative_terms (both, c2p,
 * p2c). */
static int read_relative_terms(tfenc_context *ctx, const char *path, json_t *json,
                               const char **terms)
{
    json_t *item = json_object_get(json, "pos_att_type");
    int c2p = 0, p2c = 0, unknown = 0;
    char text[64] = "";
    if (json_is_string(item)) {
        snprintf(text, sizeof text, "%s", json_string_value(item));
    } else if (json_is_array(item)) {
        size_t index;
        json_t *value;
        json_array_foreach(item, index, value) {
            const char *name = json_string_value(value);
            snprintf(text + strlen(text), sizeof text - strlen(text), "%s%s",
                     index > 0 ? "|" : "", name != NULL ? name : "?");
        }
    } else if (item != NULL && !json_is_null(item)) {
        unknown = 1;
    }
    for (char *save = NULL, *name = strtok_r(text, "|", &save); name != NULL;
         name = strtok_r(NULL, "|", &save)) {
        name += strspn(name, " ");
        name[strcspn(name, " ")] = '\0';
        if (strcmp(name, "c2p") == 0)
            c2p = 1;
        else if (strcmp(name, "p2c") == 0)
            p2c = 1;
        else
            unknown = 1;
    }
    if (unknown || (!c2p && !p2c))
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: pos_att_type must name c2p, p2c or both "
                           "(tfenc computes relative attention with at least one of them)", path);
    *terms = c2p && p2c ? "both" : c2p ? "c2p" : "p2c";
    return TFENC_OK;
}

/* DebertaV2Config (transformers 4.40), DeBERTa-v3's too: BERT's post-norm
 * layout; disentangled relative attention (relative_attention) over
 * log-bucketed distances, absolute positions only when position_biased_input. */
static int read_deberta_v2(tfenc_context *ctx, const char *path, json_t *json,
                           model_config *config)
{
    set_bert_defaults(config);
    config->architecture = ARCH_DEBERTA_V2;
    int relative, biased_input, conv_kernel, embedding_size, pooler_size, head_size, status;
    const char *norm_rel_ebd;
    if ((status = read_dimensions(ctx, path, json, config))
        || (status = read_activation(ctx, path, json, "hidden_act", "gelu", &config->activation))
        || (status = import_json_int(ctx, path, json, "max_position_embeddings", 1,
                                     IMPORT_MAX_POSITIONS, 512, &config->max_position_embeddings))
        || (status = import_json_int(ctx, path, json, "type_vocab_size", 0, IMPORT_MAX_VOCAB, 0,
                                     &config->type_vocab_size))
        || (status = import_json_int(ctx, path, json, "pad_token_id", 0, IMPORT_MAX_VOCAB, 0,
                                     &config->pad_token_id))
        || (status = import_json_positive(ctx, path, json, "layer_norm_eps", 1e-7,
                                          &config->layer_norm_eps))
        || (status = import_json_bool(ctx, path, json, "relative_attention", 0, &relative))
        || (status = import_json_bool(ctx, path, json, "position_biased_input", 1,
                                      &biased_input))
        || (status = import_json_int(ctx, path, json, "max_relative_positions", -1,
                                     IMPORT_MAX_POSITIONS, -1, &config->max_relative_positions))
        || (status = import_json_int(ctx, path, json, "position_buckets", -1,
                                     IMPORT_MAX_POSITIONS, -1, &config->position_buckets))
        || (status = import_json_bool(ctx, path, json, "share_att_key", 0,
                                      &config->share_att_key))
        || (status = import_json_string(ctx, path, json, "norm_rel_ebd", "none", &norm_rel_ebd))
        || (status = import_json_int(ctx, path, json, "conv_kernel_size", 0, 1024, 0,
                                     &conv_kernel))
        || (status = import_json_int(ctx, path, json, "embedding_size", 1, IMPORT_MAX_WIDTH,
                                     config->d_model, &embedding_size))
        || (status = import_json_int(ctx, path, json, "pooler_hidden_size", 1, IMPORT_MAX_WIDTH,
                                     config->d_model, &pooler_size))
        || (status = import_json_int(ctx, path, json, "attention_head_size", 1, IMPORT_MAX_WIDTH,
                                     config->d_model / config->n_heads, &head_size)))
        return status;
    /* Parts tfenc's layers do not compute: refused rather than dropped. */
    if (conv_kernel > 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: conv_kernel_size %d: the convolution "
                           "beside the first layer (DeBERTa-v2 xlarge) is not supported", path,
                           conv_kernel);
    if (embedding_size != config->d_model || pooler_size != config->d_model)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: %s %d differs from hidden_size %d (not "
                           "supported)", path, embedding_size != config->d_model
                           ? "embedding_size" : "pooler_hidden_size", embedding_size !=
                           config->d_model ? embedding_size : pooler_size, config->d_model);
    if (head_size * config->n_heads != config->d_model)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: attention_head_size %d times "
                           "num_attention_heads %d is not hidden_size %d (not supported)", path,
                           head_size, config->n_heads, config->d_model);
    config->learned_positions = biased_input;
    if (!relative)
        return TFENC_OK;
    if ((status = read_relative_terms(ctx, path, json, &config->relative_terms)))
        return status;
    /* DisentangledSelfAttention's defaults: no max_relative_positions means
     * max_position_embeddings; no position_buckets means exact distances. */
    if (config->max_relative_positions < 1)
        config->max_relative_positions = config->max_position_embeddings;
    if (config->position_buckets < 0)
        config->position_buckets = 0;
    if (config->position_buckets > 0
        && config->max_relative_positions - 1 <= config->position_buckets / 2)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: max_relative_positions %d must exceed "
                           "position_buckets / 2 + 1 = %d", path, config->max_relative_positions,
                           config->position_buckets / 2 + 1);
    config->relative_span = config->position_buckets > 0 ? config->position_buckets
                                                         : config->max_relative_positions;
    config->relative_norm = strstr(norm_rel_ebd, "layer_norm") != NULL;
    config->position = "disentangled";
    return TFENC_OK;
}

/* Qwen2Config (transformers 4.40): the decoder of GTE-Qwen2 and similar
 * embedders. */
static int read_qwen2(tfenc_context *ctx, const char *path, json_t *json, model_config *config)
{
    config->architecture = ARCH_QWEN2;
    config->position = "rope";
    config->rms_norm = 1;
    config->pre_norm = config->final_norm = config->causal = 1;
    config->qkv_bias = 1; /* q_proj, k_proj, v_proj have biases; o_proj and the MLP none */
    const char *activation;
    int sliding, status;
    if ((status = read_dimensions(ctx, path, json, config))
        || (status = import_json_int(ctx, path, json, "num_key_value_heads", 1, IMPORT_MAX_WIDTH, config->n_heads,
                                     &config->n_kv_heads))
        || (status = import_json_int(ctx, path, json, "max_position_embeddings", 1, IMPORT_MAX_POSITIONS, 32768,
                                     &config->max_position_embeddings))
        || (status = import_json_positive(ctx, path, json, "rms_norm_eps", 1e-6,
                                          &config->layer_norm_eps))
        || (status = import_json_positive(ctx, path, json, "rope_theta", 10000.0,
                                          &config->rope_theta))
        || (status = import_json_bool(ctx, path, json, "use_sliding_window", 0, &sliding))
        || (status = import_json_string(ctx, path, json, "hidden_act", "silu", &activation))
        /* transformers 5 moves rope_theta into rope_parameters. */
        || (status = refuse_rope_scaling(ctx, path, json))
        || (status = read_rope_parameters(ctx, path, json, NULL, &config->rope_theta)))
        return status;
    if (strcmp(activation, "silu") != 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: hidden_act '%s' is not supported for "
                           "qwen2 (only 'silu', as SwiGLU)", path, activation);
    config->activation = "swiglu";
    if (sliding)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: use_sliding_window = true is not "
                           "supported", path);
    if (config->n_heads % config->n_kv_heads != 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: num_key_value_heads %d does not divide "
                           "num_attention_heads %d", path, config->n_kv_heads, config->n_heads);
    config->rope_dims = config->d_model / config->n_heads;
    return TFENC_OK;
}

/* head_dim of Qwen3Config and Gemma3TextConfig: its own key, which may make
 * Q wider or narrower than hidden_size. */
static int read_head_dim(tfenc_context *ctx, const char *path, json_t *json, int default_dim,
                         model_config *config)
{
    int status = import_json_int(ctx, path, json, "head_dim", 2, IMPORT_MAX_WIDTH, default_dim,
                                 &config->head_dim);
    if (status != TFENC_OK)
        return status;
    if (config->head_dim % 2 != 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: head_dim %d is odd (RoPE turns pairs)",
                           path, config->head_dim);
    config->rope_dims = config->head_dim;
    return TFENC_OK;
}

/* rope_scaling, which tfenc does not apply: absent or null only. */
static int refuse_rope_scaling(tfenc_context *ctx, const char *path, json_t *json)
{
    json_t *scaling = json_object_get(json, "rope_scaling");
    if (scaling != NULL && !json_is_null(scaling))
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: rope_scaling is not supported", path);
    return TFENC_OK;
}

/* transformers 5 writes the RoPE settings as rope_parameters: {"rope_type",
 * "rope_theta"}, or per layer type {"full_attention": {...},
 * "sliding_attention": {...}} (`layer_type`, NULL for the flat form). When
 * present it replaces rope_theta (*theta); only the default type, plain
 * RoPE, is read: the others rescale frequencies. */
static int read_rope_parameters(tfenc_context *ctx, const char *path, json_t *json,
                                const char *layer_type, double *theta)
{
    json_t *parameters = json_object_get(json, "rope_parameters");
    if (parameters == NULL || json_is_null(parameters))
        return TFENC_OK;
    if (layer_type != NULL)
        parameters = json_object_get(parameters, layer_type);
    if (!json_is_object(parameters))
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: rope_parameters%s%s is not an object",
                           path, layer_type != NULL ? "." : "",
                           layer_type != NULL ? layer_type : "");
    const char *type;
    int status = import_json_string(ctx, path, parameters, "rope_type", "default", &type);
    if (status != TFENC_OK)
        return status;
    if (strcmp(type, "default") != 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: rope_parameters rope_type '%s' is not "
                           "supported (only 'default')", path, type);
    return import_json_positive(ctx, path, parameters, "rope_theta", *theta, theta);
}

/* Qwen3Config (transformers 4.51 modeling_qwen3.py, Qwen3-Embedding): Qwen2
 * with q_norm and k_norm (RMSNorm over head_dim, before RoPE), head_dim its
 * own key, and attention_bias (default false) for all four projections. */
static int read_qwen3(tfenc_context *ctx, const char *path, json_t *json, model_config *config)
{
    config->architecture = ARCH_QWEN3;
    config->position = "rope";
    config->rms_norm = 1;
    config->pre_norm = config->final_norm = config->causal = 1;
    config->qk_norm = 1;
    const char *activation;
    int sliding, attention_bias, status;
    if ((status = read_dimensions(ctx, path, json, config))
        || (status = import_json_int(ctx, path, json, "num_key_value_heads", 1, IMPORT_MAX_WIDTH, config->n_heads,
                                     &config->n_kv_heads))
        || (status = read_head_dim(ctx, path, json, 128, config))
        || (status = import_json_int(ctx, path, json, "max_position_embeddings", 1, IMPORT_MAX_POSITIONS, 32768,
                                     &config->max_position_embeddings))
        || (status = import_json_positive(ctx, path, json, "rms_norm_eps", 1e-6,
                                          &config->layer_norm_eps))
        || (status = import_json_positive(ctx, path, json, "rope_theta", 10000.0,
                                          &config->rope_theta))
        || (status = import_json_bool(ctx, path, json, "use_sliding_window", 0, &sliding))
        || (status = import_json_bool(ctx, path, json, "attention_bias", 0, &attention_bias))
        || (status = import_json_string(ctx, path, json, "hidden_act", "silu", &activation))
        || (status = refuse_rope_scaling(ctx, path, json))
        || (status = read_rope_parameters(ctx, path, json, NULL, &config->rope_theta)))
        return status;
    config->qkv_bias = config->out_bias = attention_bias;
    if (strcmp(activation, "silu") != 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: hidden_act '%s' is not supported for "
                           "qwen3 (only 'silu', as SwiGLU)", path, activation);
    config->activation = "swiglu";
    if (sliding)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: use_sliding_window = true is not "
                           "supported", path);
    if (config->n_heads % config->n_kv_heads != 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: num_key_value_heads %d does not divide "
                           "num_attention_heads %d", path, config->n_kv_heads, config->n_heads);
    return TFENC_OK;
}

/* Which layers slide: layer_types ("sliding_attention" or "full_attention"
 * per layer) when given, as transformers 5 writes it for both, else every
 * `pattern_key`-th layer is global, counted from `count_from`: Gemma3's
 * sliding_window_pattern counts from 1 (layer pattern - 1 is the first
 * global one), ModernBERT's global_attn_every_n_layers from 0 (layer 0),
 * as their configuration classes derive layer_types. */
static int read_layer_types(tfenc_context *ctx, const char *path, json_t *json,
                            const char *pattern_key, int pattern_default, int count_from,
                            model_config *config)
{
    config->local_layers = calloc((size_t)config->n_layers, 1);
    if (config->local_layers == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    json_t *types = json_object_get(json, "layer_types");
    if (types == NULL || json_is_null(types)) {
        int pattern, status;
        if ((status = import_json_int(ctx, path, json, pattern_key, 1, IMPORT_MAX_LAYERS,
                                      pattern_default, &pattern)))
            return status;
        for (int i = 0; i < config->n_layers; i++)
            config->local_layers[i] = (i + count_from) % pattern != 0;
        return TFENC_OK;
    }
    if (!json_is_array(types) || (int)json_array_size(types) != config->n_layers)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: layer_types must list one type for each "
                           "of the %d layers", path, config->n_layers);
    for (int i = 0; i < config->n_layers; i++) {
        const char *type = json_string_value(json_array_get(types, (size_t)i));
        if (type != NULL && strcmp(type, "sliding_attention") == 0)
            config->local_layers[i] = 1;
        else if (type == NULL || strcmp(type, "full_attention") != 0)
            return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: layer_types[%d] '%s' is not "
                               "sliding_attention or full_attention", path, i,
                               type != NULL ? type : "(not a string)");
    }
    return TFENC_OK;
}

/* Gemma3TextConfig (transformers 4.56 modeling_gemma3.py, Gemma3TextModel)
 * as EmbeddingGemma uses it: use_bidirectional_attention must be true,
 * since tfenc encodes (a causal Gemma3 is a generator, not an embedder).
 * Then a sliding layer sees |i - j| < sliding_window, in both directions
 * (the model's bidirectional window overlay), with rope_local_base_freq;
 * a full one sees everything, with rope_theta. Scores are scaled by
 * query_pre_attn_scalar^-0.5, the norms are (1 + weight) RMSNorms, four
 * per layer, and the MLP is GeGLU with gelu_pytorch_tanh. */
static int read_gemma3(tfenc_context *ctx, const char *path, json_t *json, model_config *config)
{
    config->architecture = ARCH_GEMMA3;
    config->position = "rope";
    config->rms_norm = 1;
    config->pre_norm = config->final_norm = 1;
    config->qk_norm = config->output_norms = config->embedding_scale = 1;
    config->norm_weight_offset = 1.0;
    const char *activation;
    int bidirectional, attention_bias, sliding_window, status;
    double query_pre_attn_scalar;
    if ((status = read_dimensions(ctx, path, json, config))
        || (status = import_json_int(ctx, path, json, "num_key_value_heads", 1, IMPORT_MAX_WIDTH, config->n_heads,
                                     &config->n_kv_heads))
        || (status = read_head_dim(ctx, path, json, 256, config))
        || (status = import_json_int(ctx, path, json, "max_position_embeddings", 1, IMPORT_MAX_POSITIONS, 131072,
                                     &config->max_position_embeddings))
        || (status = import_json_positive(ctx, path, json, "rms_norm_eps", 1e-6,
                                          &config->layer_norm_eps))
        || (status = import_json_positive(ctx, path, json, "rope_theta", 1000000.0,
                                          &config->rope_theta))
        || (status = import_json_positive(ctx, path, json, "rope_local_base_freq", 10000.0,
                                          &config->local_rope_theta))
        || (status = import_json_positive(ctx, path, json, "query_pre_attn_scalar", 256.0,
                                          &query_pre_attn_scalar))
        /* (a window of 1, a token alone, would be tfenc's window = 0: none) */
        || (status = import_json_int(ctx, path, json, "sliding_window", 2, IMPORT_MAX_POSITIONS,
                                     4096, &sliding_window))
        || (status = import_json_bool(ctx, path, json, "attention_bias", 0, &attention_bias))
        || (status = import_json_bool(ctx, path, json, "use_bidirectional_attention", 0,
                                      &bidirectional))
        || (status = import_json_string(ctx, path, json, "hidden_activation",
                                        "gelu_pytorch_tanh", &activation))
        || (status = refuse_rope_scaling(ctx, path, json))
        || (status = read_rope_parameters(ctx, path, json, "full_attention",
                                          &config->rope_theta))
        || (status = read_rope_parameters(ctx, path, json, "sliding_attention",
                                          &config->local_rope_theta))
        || (status = read_layer_types(ctx, path, json, "sliding_window_pattern", 6, 1,
                                     config)))
        return status;
    if (!bidirectional)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: use_bidirectional_attention must be true "
                           "(tfenc reads Gemma3 as EmbeddingGemma runs it)", path);
    /* (final_logit_softcapping acts on the language-model logits only.) */
    json_t *softcap = json_object_get(json, "attn_logit_softcapping");
    if (softcap != NULL && !json_is_null(softcap))
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: attn_logit_softcapping is not supported",
                           path);
    if (strcmp(activation, "gelu_pytorch_tanh") != 0 && strcmp(activation, "gelu_new") != 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: hidden_activation '%s' is not supported "
                           "for gemma3_text (only 'gelu_pytorch_tanh', as GeGLU)", path,
                           activation);
    config->activation = "geglu_tanh";
    config->qkv_bias = config->out_bias = attention_bias;
    config->attention_scale = 1.0 / sqrt(query_pre_attn_scalar);
    config->local_reach = sliding_window - 1;
    if (config->n_heads % config->n_kv_heads != 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: num_key_value_heads %d does not divide "
                           "num_attention_heads %d", path, config->n_kv_heads, config->n_heads);
    return TFENC_OK;
}

/* A head activation named by transformers' ACT2FN key `key` (default gelu)
 * as the classifier layer's name; what it does not compute is refused. */
static int read_head_activation(tfenc_context *ctx, const char *path, json_t *json,
                                const char *key, const char **activation)
{
    const char *name;
    int status = import_json_string(ctx, path, json, key, "gelu", &name);
    if (status != TFENC_OK)
        return status;
    static const char *const names[][2] = {{"gelu", "gelu"}, {"tanh", "tanh"},
                                           {"relu", "relu"}, {"gelu_new", "gelu_tanh"},
                                           {"gelu_pytorch_tanh", "gelu_tanh"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i][0]) == 0) {
            *activation = names[i][1];
            return TFENC_OK;
        }
    return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: %s '%s' is not supported (gelu, tanh, "
                       "relu, gelu_new, gelu_pytorch_tanh)", path, key, name);
}

/* ModernBertForSequenceClassification (transformers 4.48): the final_norm'ed
 * last hidden state pooled by classifier_pooling (the [CLS] row, or the mean
 * over the sequence's tokens), then ModernBertPredictionHead
 * norm(act(dense(x))): dense with a bias only when classifier_bias (the
 * tensor map's business), classifier_activation, a LayerNorm with the
 * encoder's norm_eps and norm_bias (read_modernbert read both); dropout
 * (none at inference); classifier, with its bias. */
static int read_modernbert_head(tfenc_context *ctx, const char *path, json_t *json,
                                model_config *config)
{
    head_settings *head = &config->head;
    head->kind = HEAD_MODERNBERT;
    head->norm = 1;
    const char *pooling;
    int status;
    if ((status = import_json_string(ctx, path, json, "classifier_pooling", "cls", &pooling))
        || (status = import_json_bool(ctx, path, json, "classifier_bias", 0,
                                      &head->dense_bias))
        || (status = read_head_activation(ctx, path, json, "classifier_activation",
                                          &head->activation)))
        return status;
    /* ModernBertConfig itself raises on any other pooling. */
    if (strcmp(pooling, "cls") == 0)
        head->pooling = "cls";
    else if (strcmp(pooling, "mean") == 0)
        head->pooling = "mean";
    else
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: classifier_pooling '%s' is not "
                           "supported (cls or mean, as ModernBertConfig allows)", path, pooling);
    return TFENC_OK;
}

/* What a sentence-transformers CrossEncoder folder's scores are: the
 * activation CrossEncoder.predict applies, which version 4 keeps in
 * config.json's "sentence_transformers": {"activation_fn"} and earlier
 * versions in "sbert_ce_default_activation_function" (version 4 reads the
 * first, then the second). A folder that has the "sentence_transformers"
 * object but names none gets CrossEncoder's default: Sigmoid for one label,
 * Identity for more. Without either key the folder is a plain
 * *ForSequenceClassification and head->scores stays as it is. */
static int cross_encoder_scores(tfenc_context *ctx, const char *path, json_t *json,
                                head_settings *head)
{
    json_t *settings = json_object_get(json, "sentence_transformers");
    const char *key = "sentence_transformers.activation_fn";
    json_t *activation = json_is_object(settings) ? json_object_get(settings, "activation_fn")
                                                  : NULL;
    if (activation == NULL || json_is_null(activation)) {
        key = "sbert_ce_default_activation_function";
        activation = json_object_get(json, key);
    }
    if (activation == NULL || json_is_null(activation)) {
        if (json_is_object(settings))
            head->scores = head->n_labels == 1 ? "sigmoid" : "logits";
        return TFENC_OK;
    }
    const char *text = json_string_value(activation);
    if (text != NULL && strcmp(text, "torch.nn.modules.activation.Sigmoid") == 0)
        head->scores = "sigmoid";
    else if (text != NULL && strcmp(text, "torch.nn.modules.linear.Identity") == 0)
        head->scores = "logits";
    else
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: %s '%s' is not supported "
                           "(torch.nn.modules.activation.Sigmoid or "
                           "torch.nn.modules.linear.Identity)", path, key,
                           text != NULL ? text : "(not a string)");
    return TFENC_OK;
}

/* A *ForSequenceClassification (architectures[0]): its head, as transformers
 * 4.40 defines it per model_type (4.48 for modernbert); the label count from
 * id2label (which save_pretrained always writes), checked against num_labels
 * when given; problem_type one of transformers' three. A sentence-transformers
 * CrossEncoder folder names the activation CrossEncoder.predict applies
 * (cross_encoder_scores). */
static int read_head(tfenc_context *ctx, const char *path, json_t *json, model_config *config)
{
    head_settings *head = &config->head;
    json_t *architectures = json_object_get(json, "architectures");
    const char *name = json_string_value(json_array_get(architectures, 0));
    const char *suffix = "ForSequenceClassification";
    size_t length = name != NULL ? strlen(name) : 0;
    if (length < strlen(suffix) || strcmp(name + length - strlen(suffix), suffix) != 0)
        return TFENC_OK;
    const char *type = config->model_type;
    if ((strcmp(type, "bert") == 0 && config->architecture == ARCH_BERT)
        || config->architecture == ARCH_GTE) {
        /* GTE's NewForSequenceClassification: NewPooler, a copy of BertPooler,
         * and classifier */
        head->kind = HEAD_BERT;
        head->activation = "tanh";
    } else if (strcmp(type, "roberta") == 0 || strcmp(type, "xlm-roberta") == 0) {
        head->kind = HEAD_ROBERTA;
        head->activation = "tanh";
    } else if (strcmp(type, "electra") == 0) {
        head->kind = HEAD_ROBERTA; /* its own head, in RoBERTa's names, with GELU */
        head->activation = "gelu";
    } else if (strcmp(type, "distilbert") == 0) {
        head->kind = HEAD_DISTILBERT;
        head->activation = "relu";
    } else if (strcmp(type, "deberta-v2") == 0) {
        /* ContextPooler: pooler.dense and pooler_hidden_act on [CLS] */
        head->kind = HEAD_DEBERTA;
        int status = read_head_activation(ctx, path, json, "pooler_hidden_act",
                                          &head->activation);
        if (status != TFENC_OK)
            return status;
    } else if (strcmp(type, "modernbert") == 0) {
        int status = read_modernbert_head(ctx, path, json, config);
        if (status != TFENC_OK)
            return status;
    } else {
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: architectures '%s': tfenc-import maps "
                           "the sequence-classification heads of bert, roberta, xlm-roberta, "
                           "electra, distilbert, deberta-v2, modernbert and new, not of %s", path,
                           name, type);
    }
    /* save_pretrained leaves id2label (and num_labels) out when they are
     * PretrainedConfig's defaults: 2 labels, LABEL_0 and LABEL_1. */
    json_t *id2label = json_object_get(json, "id2label");
    int status, num_labels;
    if (id2label == NULL || json_is_null(id2label)) {
        if ((status = import_json_int(ctx, path, json, "num_labels", 1, 65536, 2, &num_labels)))
            return status;
        json_t *made = json_object();
        for (int i = 0; made != NULL && i < num_labels; i++) {
            char key[16], label[32];
            snprintf(key, sizeof key, "%d", i);
            snprintf(label, sizeof label, "LABEL_%d", i);
            json_object_set_new(made, key, json_string(label));
        }
        if (made == NULL || (int)json_object_size(made) != num_labels) {
            json_decref(made);
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        }
        head->n_labels = num_labels;
        head->labels = import_ini_json(made, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(made);
        if (head->labels == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    } else {
        if (!json_is_object(id2label) || json_object_size(id2label) == 0)
            return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: id2label must be an object naming "
                               "each label", path);
        head->n_labels = (int)json_object_size(id2label);
        for (int i = 0; i < head->n_labels; i++) {
            char key[16];
            snprintf(key, sizeof key, "%d", i);
            if (!json_is_string(json_object_get(id2label, key)))
                return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: id2label has no name for label "
                                   "\"%s\" of %d", path, key, head->n_labels);
        }
        if ((status = import_json_int(ctx, path, json, "num_labels", 1, 65536, head->n_labels,
                                      &num_labels)))
            return status;
        if (num_labels != head->n_labels)
            return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: num_labels %d disagrees with "
                               "id2label's %d labels", path, num_labels, head->n_labels);
        if ((head->labels = import_ini_json(id2label, JSON_COMPACT | JSON_SORT_KEYS)) == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    }
    static const char *const problems[] = {"single_label_classification",
                                           "multi_label_classification", "regression", NULL};
    json_t *problem = json_object_get(json, "problem_type");
    head->problem_type = "auto";
    if (problem != NULL && !json_is_null(problem)) {
        const char *text = json_string_value(problem);
        for (const char *const *known = problems; text != NULL && *known != NULL; known++)
            if (strcmp(text, *known) == 0)
                head->problem_type = *known;
        if (strcmp(head->problem_type, "auto") == 0)
            return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: problem_type '%s' is not supported "
                               "(transformers knows single_label_classification, "
                               "multi_label_classification and regression)", path,
                               text != NULL ? text : "(not a string)");
    }
    head->scores = "auto";
    return cross_encoder_scores(ctx, path, json, head);
}

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
    if ((config->model_type = strdup(model_type)) == NULL) {
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    static const char *const bert_family[] = {"bert", "roberta", "xlm-roberta", "electra",
                                              "mpnet"};
    int in_bert_family = 0;
    for (size_t i = 0; i < sizeof bert_family / sizeof bert_family[0]; i++)
        in_bert_family |= strcmp(model_type, bert_family[i]) == 0;
    if (in_bert_family)
        status = read_bert_family(ctx, path, json, model_type, config);
    else if (strcmp(model_type, "distilbert") == 0)
        status = read_distilbert(ctx, path, json, config);
    else if (strcmp(model_type, "nomic_bert") == 0)
        status = read_nomic_bert(ctx, path, json, config);
    else if (strcmp(model_type, "modernbert") == 0)
        status = read_modernbert(ctx, path, json, config);
    else if (strcmp(model_type, "qwen2") == 0)
        status = read_qwen2(ctx, path, json, config);
    else if (strcmp(model_type, "deberta-v2") == 0)
        status = read_deberta_v2(ctx, path, json, config);
    else if (strcmp(model_type, "qwen3") == 0)
        status = read_qwen3(ctx, path, json, config);
    else if (strcmp(model_type, "gemma3_text") == 0)
        status = read_gemma3(ctx, path, json, config);
    else if (strcmp(model_type, "new") == 0)
        status = read_gte(ctx, path, json, config);
    else
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: model_type '%s' is not supported "
                             "(tfenc-import reads " SUPPORTED_TYPES ")", path, model_type);
    if (status != TFENC_OK)
        goto done;
    if (config->head_dim == 0 && config->d_model % config->n_heads != 0) {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: hidden_size %d is not a multiple of "
                             "num_attention_heads %d", path, config->d_model, config->n_heads);
        goto done;
    }
    status = read_head(ctx, path, json, config);
done:
    json_decref(json);
    free(path);
    return status;
}

int import_sparse_head(importer *self)
{
    model_config *config = &self->config;
    head_settings *head = &config->head;
    char *path = import_join_path(self->transformer_dir, "config.json");
    if (path == NULL)
        return tfenc_error(self->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    json_t *json = json_loads(config->config_text, 0, NULL);
    const char *name = json_string_value(
        json_array_get(json_object_get(json, "architectures"), 0));
    const char *suffix = "ForMaskedLM";
    size_t length = name != NULL ? strlen(name) : 0;
    int masked_lm = length >= strlen(suffix) && strcmp(name + length - strlen(suffix), suffix) == 0;
    int status = TFENC_OK;
    if (masked_lm && config->architecture == ARCH_BERT && strcmp(config->model_type, "bert") == 0)
        head->kind = HEAD_MLM_BERT;
    else if (masked_lm && config->architecture == ARCH_DISTILBERT)
        head->kind = HEAD_MLM_DISTILBERT;
    else if (masked_lm &&
             (config->architecture == ARCH_ROBERTA || config->architecture == ARCH_MPNET))
        head->kind = HEAD_MLM_ROBERTA;
    else if (masked_lm && config->architecture == ARCH_MODERNBERT)
        head->kind = HEAD_MLM_MODERNBERT;
    else
        status = tfenc_error(self->ctx, TFENC_ERR_CONFIG, "%s: sparse output needs a masked-LM "
                             "head, but architectures is '%s' (tfenc-import maps BertForMaskedLM, "
                             "DistilBertForMaskedLM, RobertaForMaskedLM, XLMRobertaForMaskedLM, "
                             "MPNetForMaskedLM and ModernBertForMaskedLM)", path,
                             name != NULL ? name : "unset");
    /* ModernBertForMaskedLM: ModernBertPredictionHead (dense with a bias
     * only when classifier_bias, classifier_activation, a LayerNorm with the
     * encoder's norm_eps and norm_bias), then the decoder, with a bias when
     * decoder_bias (transformers' defaults: false, gelu, true). */
    const char *modernbert_activation = NULL;
    if (status == TFENC_OK && head->kind == HEAD_MLM_MODERNBERT &&
        ((status = import_json_bool(self->ctx, path, json, "classifier_bias", 0,
                                    &head->dense_bias)) == TFENC_OK &&
         (status = import_json_bool(self->ctx, path, json, "decoder_bias", 1,
                                    &head->decoder_bias)) == TFENC_OK))
        status = read_head_activation(self->ctx, path, json, "classifier_activation",
                                      &modernbert_activation);
    /* The decoder is read as the word embeddings, which a tied model's
     * checkpoint stores once; an untied one's own decoder would be left
     * out, giving wrong rows. */
    json_t *tied = json_object_get(json, "tie_word_embeddings");
    if (status == TFENC_OK && tied != NULL && json_is_false(tied))
        status = tfenc_error(self->ctx, TFENC_ERR_CONFIG, "%s: tie_word_embeddings is false: "
                             "tfenc-import reads the masked-LM decoder as the word embeddings "
                             "(tied), not a decoder of its own", path);
    /* The transform's activation is the encoder's (hidden_act, or
     * DistilBERT's activation), which config reading turned into tfenc's;
     * RobertaLMHead and MPNetLMHead call the exact gelu whatever the
     * encoder uses (XLM-R checkpoints with hidden_act gelu_new exist). */
    const char *transform = head->kind == HEAD_MLM_ROBERTA      ? "gelu"
                            : head->kind == HEAD_MLM_MODERNBERT ? modernbert_activation
                                                                : config->activation;
    if (status == TFENC_OK && strcmp(transform, "gelu") != 0 &&
        strcmp(transform, "gelu_tanh") != 0 && strcmp(transform, "relu") != 0)
        status = tfenc_error(self->ctx, TFENC_ERR_CONFIG, "%s: the masked-LM head's activation "
                             "'%s' is not one splade runs (gelu, gelu_tanh, relu)", path,
                             transform);
    head->activation = transform;
    if (head->sparse_pooling == NULL)
        head->sparse_pooling = "max";
    json_decref(json);
    free(path);
    return status;
}
