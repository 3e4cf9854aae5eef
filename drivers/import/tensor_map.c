/* Which tensor of the checkpoint becomes which dataset of the weights
 * file (docs/weights.md), per architecture; every tensor is found and its
 * shape and dtype checked before anything is written. */
#include "config.h"

#include "tensor_map.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapters.h"
#include "files.h"

/* One tensor of the map. Names are printf patterns: %d is the layer index
 * (rules of the per-layer table; a source without %d is one tensor that
 * every layer's group receives a copy of). */
typedef struct tensor_rule {
    const char *source; /* name in the checkpoint, after the prefix; "" writes zeros (a
                         * bias the model lacks where the tfenc layer has one for all
                         * its linear maps) */
    const char *target; /* dataset in the weights file */
    const char *shape;  /* one letter per dimension, see dimension() */
    const char *when;   /* conditions that must all hold, see applies(); "" always */
    char half;          /* 0: the whole tensor; '1' / '2': the first / second half of its
                         * rows (a fused gate-and-up projection) */
} tensor_rule;

/* The map of one architecture. */
typedef struct tensor_map {
    const char *const *prefixes; /* tried in order: task models wrap the bare one */
    const tensor_rule *model;    /* once per model; the first one locates the prefix */
    const tensor_rule *const *layer; /* tables applied once per layer, NULL-terminated */
    /* Tensors under the prefix that the model does not compute with and
     * that tfenc may leave out (name prefixes); any other unused float
     * tensor means the checkpoint holds a part tfenc's map does not know. */
    const char *const *unused;
    /* Tensors outside the prefix that tfenc may leave out: the pretraining
     * heads (masked LM, next sentence, replaced-token detection) that
     * sentence-transformers' AutoModel drops as well (name prefixes from the
     * top of the file). Anything else beside the encoder is a task head
     * (classifier, pre_classifier, qa_outputs, ...) whose outputs are the
     * model's: importing the bare encoder would lose them. */
    const char *const *pretraining;
} tensor_map;

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
 * is not. */
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

static const char *const no_unused[] = {NULL};
static const char *const bert_unused[] = {"pooler.", NULL};
/* BertForPreTraining / BertForMaskedLM (cls.), RoBERTa's and XLM-R's
 * lm_head, ELECTRA's generator and discriminator heads. */
static const char *const bert_pretraining[] = {"cls.", "lm_head.", "generator_predictions.",
                                               "generator_lm_head.", "discriminator_predictions.",
                                               NULL};
static const char *const mpnet_pretraining[] = {"lm_head.", NULL};
static const char *const distilbert_pretraining[] = {"vocab_transform.", "vocab_layer_norm.",
                                                     "vocab_projector.", NULL};
static const char *const modernbert_pretraining[] = {"head.", "decoder.", NULL};

/* BERT, ELECTRA, RoBERTa, XLM-R (transformers' BertModel names). */
static const char *const bert_prefixes[] = {"", "bert.", "roberta.", "electra.", NULL};
static const tensor_rule bert_model[] = {
    {"embeddings.word_embeddings.weight", "/embeddings/token_embeddings", "vd", "", 0},
    {"embeddings.position_embeddings.weight", "/embeddings/position_embeddings", "pd", "", 0},
    {"embeddings.token_type_embeddings.weight", "/embeddings/token_type_embeddings", "td", "t",
     0},
    {"embeddings.LayerNorm.weight", "/embeddings_norm/weight", "d", "", 0},
    {"embeddings.LayerNorm.bias", "/embeddings_norm/bias", "d", "", 0},
    {NULL, NULL, NULL, NULL, 0},
};
/* BERT's attention names, which JinaBERT shares. */
static const tensor_rule bert_attention[] = {
    {"encoder.layer.%d.attention.self.query.weight", "/encoder/%d/attention/q_weight", "dd", "", 0},
    {"encoder.layer.%d.attention.self.query.bias", "/encoder/%d/attention/q_bias", "d", "", 0},
    {"encoder.layer.%d.attention.self.key.weight", "/encoder/%d/attention/k_weight", "dd", "", 0},
    {"encoder.layer.%d.attention.self.key.bias", "/encoder/%d/attention/k_bias", "d", "", 0},
    {"encoder.layer.%d.attention.self.value.weight", "/encoder/%d/attention/v_weight", "dd", "", 0},
    {"encoder.layer.%d.attention.self.value.bias", "/encoder/%d/attention/v_bias", "d", "", 0},
    {"encoder.layer.%d.attention.output.dense.weight", "/encoder/%d/attention/out_weight", "dd", "",
     0},
    {"encoder.layer.%d.attention.output.dense.bias", "/encoder/%d/attention/out_bias", "d", "", 0},
    {"encoder.layer.%d.attention.output.LayerNorm.weight", "/encoder/%d/attention/norm/weight", "d",
     "", 0},
    {"encoder.layer.%d.attention.output.LayerNorm.bias", "/encoder/%d/attention/norm/bias", "d", "",
     0},
    {NULL, NULL, NULL, NULL, 0},
};
/* BERT's feed-forward names, which MPNet shares. */
static const tensor_rule bert_ffn[] = {
    {"encoder.layer.%d.intermediate.dense.weight", "/encoder/%d/ffn/in_weight", "fd", "", 0},
    {"encoder.layer.%d.intermediate.dense.bias", "/encoder/%d/ffn/in_bias", "f", "", 0},
    {"encoder.layer.%d.output.dense.weight", "/encoder/%d/ffn/out_weight", "df", "", 0},
    {"encoder.layer.%d.output.dense.bias", "/encoder/%d/ffn/out_bias", "d", "", 0},
    {"encoder.layer.%d.output.LayerNorm.weight", "/encoder/%d/ffn/norm/weight", "d", "", 0},
    {"encoder.layer.%d.output.LayerNorm.bias", "/encoder/%d/ffn/norm/bias", "d", "", 0},
    {NULL, NULL, NULL, NULL, 0},
};

/* MPNet: BERT's layout with its own attention names, no token types, and
 * one relative position bias table that every layer uses. */
static const char *const mpnet_prefixes[] = {"", "mpnet.", NULL};
static const tensor_rule mpnet_model[] = {
    {"embeddings.word_embeddings.weight", "/embeddings/token_embeddings", "vd", "", 0},
    {"embeddings.position_embeddings.weight", "/embeddings/position_embeddings", "pd", "", 0},
    {"embeddings.LayerNorm.weight", "/embeddings_norm/weight", "d", "", 0},
    {"embeddings.LayerNorm.bias", "/embeddings_norm/bias", "d", "", 0},
    {NULL, NULL, NULL, NULL, 0},
};
static const tensor_rule mpnet_attention[] = {
    {"encoder.layer.%d.attention.attn.q.weight", "/encoder/%d/attention/q_weight", "dd", "", 0},
    {"encoder.layer.%d.attention.attn.q.bias", "/encoder/%d/attention/q_bias", "d", "", 0},
    {"encoder.layer.%d.attention.attn.k.weight", "/encoder/%d/attention/k_weight", "dd", "", 0},
    {"encoder.layer.%d.attention.attn.k.bias", "/encoder/%d/attention/k_bias", "d", "", 0},
    {"encoder.layer.%d.attention.attn.v.weight", "/encoder/%d/attention/v_weight", "dd", "", 0},
    {"encoder.layer.%d.attention.attn.v.bias", "/encoder/%d/attention/v_bias", "d", "", 0},
    {"encoder.layer.%d.attention.attn.o.weight", "/encoder/%d/attention/out_weight", "dd", "", 0},
    {"encoder.layer.%d.attention.attn.o.bias", "/encoder/%d/attention/out_bias", "d", "", 0},
    {"encoder.relative_attention_bias.weight", "/encoder/%d/attention/relative_attention_bias",
     "bh", "", 0},
    {"encoder.layer.%d.attention.LayerNorm.weight", "/encoder/%d/attention/norm/weight", "d", "", 0},
    {"encoder.layer.%d.attention.LayerNorm.bias", "/encoder/%d/attention/norm/bias", "d", "", 0},
    {NULL, NULL, NULL, NULL, 0},
};

/* DistilBERT (transformers' DistilBertModel names). */
static const char *const distilbert_prefixes[] = {"", "distilbert.", NULL};
static const tensor_rule distilbert_layer[] = {
    {"transformer.layer.%d.attention.q_lin.weight", "/encoder/%d/attention/q_weight", "dd", "", 0},
    {"transformer.layer.%d.attention.q_lin.bias", "/encoder/%d/attention/q_bias", "d", "", 0},
    {"transformer.layer.%d.attention.k_lin.weight", "/encoder/%d/attention/k_weight", "dd", "", 0},
    {"transformer.layer.%d.attention.k_lin.bias", "/encoder/%d/attention/k_bias", "d", "", 0},
    {"transformer.layer.%d.attention.v_lin.weight", "/encoder/%d/attention/v_weight", "dd", "", 0},
    {"transformer.layer.%d.attention.v_lin.bias", "/encoder/%d/attention/v_bias", "d", "", 0},
    {"transformer.layer.%d.attention.out_lin.weight", "/encoder/%d/attention/out_weight", "dd", "",
     0},
    {"transformer.layer.%d.attention.out_lin.bias", "/encoder/%d/attention/out_bias", "d", "", 0},
    {"transformer.layer.%d.sa_layer_norm.weight", "/encoder/%d/attention/norm/weight", "d", "", 0},
    {"transformer.layer.%d.sa_layer_norm.bias", "/encoder/%d/attention/norm/bias", "d", "", 0},
    {"transformer.layer.%d.ffn.lin1.weight", "/encoder/%d/ffn/in_weight", "fd", "", 0},
    {"transformer.layer.%d.ffn.lin1.bias", "/encoder/%d/ffn/in_bias", "f", "", 0},
    {"transformer.layer.%d.ffn.lin2.weight", "/encoder/%d/ffn/out_weight", "df", "", 0},
    {"transformer.layer.%d.ffn.lin2.bias", "/encoder/%d/ffn/out_bias", "d", "", 0},
    {"transformer.layer.%d.output_layer_norm.weight", "/encoder/%d/ffn/norm/weight", "d", "", 0},
    {"transformer.layer.%d.output_layer_norm.bias", "/encoder/%d/ffn/norm/bias", "d", "", 0},
    {NULL, NULL, NULL, NULL, 0},
};

/* JinaBERT v2 (jinaai/jina-bert-implementation): BERT attention, no position
 * table, a GEGLU whose gated_layers hold the activated rows first. */
static const char *const jina_prefixes[] = {"", "bert.", NULL};
static const tensor_rule jina_model[] = {
    {"embeddings.word_embeddings.weight", "/embeddings/token_embeddings", "vd", "", 0},
    {"embeddings.token_type_embeddings.weight", "/embeddings/token_type_embeddings", "td", "t",
     0},
    {"embeddings.LayerNorm.weight", "/embeddings_norm/weight", "d", "", 0},
    {"embeddings.LayerNorm.bias", "/embeddings_norm/bias", "d", "", 0},
    {NULL, NULL, NULL, NULL, 0},
};
static const tensor_rule jina_ffn[] = {
    {"encoder.layer.%d.mlp.gated_layers.weight", "/encoder/%d/ffn/gate_weight", "gd", "", '1'},
    {"encoder.layer.%d.mlp.gated_layers.weight", "/encoder/%d/ffn/in_weight", "gd", "", '2'},
    {"", "/encoder/%d/ffn/gate_bias", "f", "I", 0},
    {"", "/encoder/%d/ffn/in_bias", "f", "I", 0},
    {"encoder.layer.%d.mlp.wo.weight", "/encoder/%d/ffn/out_weight", "df", "", 0},
    {"encoder.layer.%d.mlp.wo.bias", "/encoder/%d/ffn/out_bias", "d", "", 0},
    {"encoder.layer.%d.mlp.layernorm.weight", "/encoder/%d/ffn/norm/weight", "d", "", 0},
    {"encoder.layer.%d.mlp.layernorm.bias", "/encoder/%d/ffn/norm/bias", "d", "", 0},
    {NULL, NULL, NULL, NULL, 0},
};

/* NomicBERT (nomic-ai/contrastors' NomicBertModel names). Its SwiGLU is
 * fc11(x) * act(fc12(x)): fc12 is the gate; v2's GELU MLP is fc1, fc2, and
 * its mixture-of-experts layers are planned by plan_moe(). */
static const char *const nomic_prefixes[] = {"", "bert.", NULL};
static const tensor_rule nomic_model[] = {
    {"embeddings.word_embeddings.weight", "/embeddings/token_embeddings", "vd", "", 0},
    {"embeddings.token_type_embeddings.weight", "/embeddings/token_type_embeddings", "td", "t",
     0},
    {"emb_ln.weight", "/embeddings_norm/weight", "d", "", 0},
    {"emb_ln.bias", "/embeddings_norm/bias", "d", "", 0},
    {NULL, NULL, NULL, NULL, 0},
};
static const tensor_rule nomic_layer[] = {
    {"encoder.layers.%d.attn.Wqkv.weight", "/encoder/%d/attention/qkv_weight", "qd", "", 0},
    {"encoder.layers.%d.attn.Wqkv.bias", "/encoder/%d/attention/qkv_bias", "q", "q", 0},
    {"encoder.layers.%d.attn.out_proj.weight", "/encoder/%d/attention/out_weight", "dd", "", 0},
    {"encoder.layers.%d.attn.out_proj.bias", "/encoder/%d/attention/out_bias", "d", "o", 0},
    {"encoder.layers.%d.norm1.weight", "/encoder/%d/attention/norm/weight", "d", "", 0},
    {"encoder.layers.%d.norm1.bias", "/encoder/%d/attention/norm/bias", "d", "", 0},
    {"encoder.layers.%d.mlp.fc11.weight", "/encoder/%d/ffn/in_weight", "fd", "Fg", 0},
    {"encoder.layers.%d.mlp.fc11.bias", "/encoder/%d/ffn/in_bias", "f", "Fgi", 0},
    {"encoder.layers.%d.mlp.fc12.weight", "/encoder/%d/ffn/gate_weight", "fd", "Fg", 0},
    {"encoder.layers.%d.mlp.fc12.bias", "/encoder/%d/ffn/gate_bias", "f", "Fgi", 0},
    {"encoder.layers.%d.mlp.fc1.weight", "/encoder/%d/ffn/in_weight", "fd", "Fp", 0},
    {"encoder.layers.%d.mlp.fc1.bias", "/encoder/%d/ffn/in_bias", "f", "Fpi", 0},
    {"encoder.layers.%d.mlp.fc2.weight", "/encoder/%d/ffn/out_weight", "df", "F", 0},
    {"encoder.layers.%d.mlp.fc2.bias", "/encoder/%d/ffn/out_bias", "d", "Fu", 0},
    {"", "/encoder/%d/ffn/in_bias", "f", "FI", 0},
    {"", "/encoder/%d/ffn/gate_bias", "f", "FgI", 0},
    {"", "/encoder/%d/ffn/out_bias", "d", "FU", 0},
    {"encoder.layers.%d.norm2.weight", "/encoder/%d/ffn/norm/weight", "d", "", 0},
    {"encoder.layers.%d.norm2.bias", "/encoder/%d/ffn/norm/bias", "d", "", 0},
    {NULL, NULL, NULL, NULL, 0},
};

/* XLM-R with rotary positions (jinaai/xlm-roberta-flash-implementation's
 * XLMRobertaModel names, flash-attention's BERT): no position table, emb_ln,
 * a fused Wqkv, norm1 and norm2 after each sublayer; the embeddings under
 * NomicBERT's names (both come from flash-attention's BERT). A LoRA-parametrized
 * weight is stored as parametrizations.weight.original, which adapters.c
 * gives these names. */
static const char *const xlmr_rotary_prefixes[] = {"", "roberta.", NULL};
static const tensor_rule xlmr_rotary_layer[] = {
    {"encoder.layers.%d.mixer.Wqkv.weight", "/encoder/%d/attention/qkv_weight", "qd", "", 0},
    {"encoder.layers.%d.mixer.Wqkv.bias", "/encoder/%d/attention/qkv_bias", "q", "", 0},
    {"encoder.layers.%d.mixer.out_proj.weight", "/encoder/%d/attention/out_weight", "dd", "", 0},
    {"encoder.layers.%d.mixer.out_proj.bias", "/encoder/%d/attention/out_bias", "d", "", 0},
    {"encoder.layers.%d.norm1.weight", "/encoder/%d/attention/norm/weight", "d", "", 0},
    {"encoder.layers.%d.norm1.bias", "/encoder/%d/attention/norm/bias", "d", "", 0},
    {"encoder.layers.%d.mlp.fc1.weight", "/encoder/%d/ffn/in_weight", "fd", "", 0},
    {"encoder.layers.%d.mlp.fc1.bias", "/encoder/%d/ffn/in_bias", "f", "", 0},
    {"encoder.layers.%d.mlp.fc2.weight", "/encoder/%d/ffn/out_weight", "df", "", 0},
    {"encoder.layers.%d.mlp.fc2.bias", "/encoder/%d/ffn/out_bias", "d", "", 0},
    {"encoder.layers.%d.norm2.weight", "/encoder/%d/ffn/norm/weight", "d", "", 0},
    {"encoder.layers.%d.norm2.bias", "/encoder/%d/ffn/norm/bias", "d", "", 0},
    {NULL, NULL, NULL, NULL, 0},
};

/* ModernBERT (transformers' ModernBertModel names). Its Wi holds the
 * activated rows first, then the gate rows. */
static const char *const modernbert_prefixes[] = {"", "model.", NULL};
static const char *const modernbert_unused[] = {"head.", NULL};
static const tensor_rule modernbert_model[] = {
    {"embeddings.tok_embeddings.weight", "/embeddings/token_embeddings", "vd", "", 0},
    {"embeddings.norm.weight", "/embeddings_norm/weight", "d", "", 0},
    {"embeddings.norm.bias", "/embeddings_norm/bias", "d", "n", 0},
    {"final_norm.weight", "/final_norm/weight", "d", "", 0},
    {"final_norm.bias", "/final_norm/bias", "d", "n", 0},
    {NULL, NULL, NULL, NULL, 0},
};
static const tensor_rule modernbert_layer[] = {
    {"layers.%d.attn_norm.weight", "/encoder/%d/attention/norm/weight", "d", "l", 0},
    {"layers.%d.attn_norm.bias", "/encoder/%d/attention/norm/bias", "d", "ln", 0},
    {"layers.%d.attn.Wqkv.weight", "/encoder/%d/attention/qkv_weight", "qd", "", 0},
    {"layers.%d.attn.Wqkv.bias", "/encoder/%d/attention/qkv_bias", "q", "q", 0},
    {"layers.%d.attn.Wo.weight", "/encoder/%d/attention/out_weight", "dd", "", 0},
    {"layers.%d.attn.Wo.bias", "/encoder/%d/attention/out_bias", "d", "o", 0},
    {"layers.%d.mlp_norm.weight", "/encoder/%d/ffn/norm/weight", "d", "", 0},
    {"layers.%d.mlp_norm.bias", "/encoder/%d/ffn/norm/bias", "d", "n", 0},
    {"layers.%d.mlp.Wi.weight", "/encoder/%d/ffn/gate_weight", "gd", "", '1'},
    {"layers.%d.mlp.Wi.weight", "/encoder/%d/ffn/in_weight", "gd", "", '2'},
    {"layers.%d.mlp.Wi.bias", "/encoder/%d/ffn/gate_bias", "g", "i", '1'},
    {"layers.%d.mlp.Wi.bias", "/encoder/%d/ffn/in_bias", "g", "i", '2'},
    {"layers.%d.mlp.Wo.weight", "/encoder/%d/ffn/out_weight", "df", "", 0},
    {"layers.%d.mlp.Wo.bias", "/encoder/%d/ffn/out_bias", "d", "u", 0},
    {NULL, NULL, NULL, NULL, 0},
};

/* Qwen2 (transformers' Qwen2Model names). */
static const char *const qwen2_prefixes[] = {"", "model.", NULL};
static const tensor_rule qwen2_model[] = {
    {"embed_tokens.weight", "/embeddings/token_embeddings", "vd", "", 0},
    {"norm.weight", "/final_norm/weight", "d", "", 0},
    {NULL, NULL, NULL, NULL, 0},
};
static const tensor_rule qwen2_layer[] = {
    {"layers.%d.input_layernorm.weight", "/encoder/%d/attention/norm/weight", "d", "", 0},
    {"layers.%d.self_attn.q_proj.weight", "/encoder/%d/attention/q_weight", "dd", "", 0},
    {"layers.%d.self_attn.q_proj.bias", "/encoder/%d/attention/q_bias", "d", "", 0},
    {"layers.%d.self_attn.k_proj.weight", "/encoder/%d/attention/k_weight", "kd", "", 0},
    {"layers.%d.self_attn.k_proj.bias", "/encoder/%d/attention/k_bias", "k", "", 0},
    {"layers.%d.self_attn.v_proj.weight", "/encoder/%d/attention/v_weight", "kd", "", 0},
    {"layers.%d.self_attn.v_proj.bias", "/encoder/%d/attention/v_bias", "k", "", 0},
    {"layers.%d.self_attn.o_proj.weight", "/encoder/%d/attention/out_weight", "dd", "", 0},
    {"layers.%d.post_attention_layernorm.weight", "/encoder/%d/ffn/norm/weight", "d", "", 0},
    {"layers.%d.mlp.gate_proj.weight", "/encoder/%d/ffn/gate_weight", "fd", "", 0},
    {"layers.%d.mlp.up_proj.weight", "/encoder/%d/ffn/in_weight", "fd", "", 0},
    {"layers.%d.mlp.down_proj.weight", "/encoder/%d/ffn/out_weight", "df", "", 0},
    {NULL, NULL, NULL, NULL, 0},
};

/* DeBERTa-v2/v3 (transformers' DebertaV2Model names): BERT's layout with
 * *_proj attention maps, and one table of relative embeddings (with its
 * LayerNorm) that every layer's attention reads. */
static const char *const deberta_prefixes[] = {"", "deberta.", NULL};
/* DebertaV2ForMaskedLM's head, and the replaced-token detection heads of
 * DeBERTa-v3's pretraining checkpoints. */
static const char *const deberta_pretraining[] = {"cls.", "lm_predictions.", "mask_predictions.",
                                                  NULL};
static const tensor_rule deberta_model[] = {
    {"embeddings.word_embeddings.weight", "/embeddings/token_embeddings", "vd", "", 0},
    {"embeddings.position_embeddings.weight", "/embeddings/position_embeddings", "pd", "a", 0},
    {"embeddings.token_type_embeddings.weight", "/embeddings/token_type_embeddings", "td", "t",
     0},
    {"embeddings.LayerNorm.weight", "/embeddings_norm/weight", "d", "", 0},
    {"embeddings.LayerNorm.bias", "/embeddings_norm/bias", "d", "", 0},
    {NULL, NULL, NULL, NULL, 0},
};
static const tensor_rule deberta_attention[] = {
    {"encoder.layer.%d.attention.self.query_proj.weight", "/encoder/%d/attention/q_weight", "dd",
     "", 0},
    {"encoder.layer.%d.attention.self.query_proj.bias", "/encoder/%d/attention/q_bias", "d", "",
     0},
    {"encoder.layer.%d.attention.self.key_proj.weight", "/encoder/%d/attention/k_weight", "dd", "",
     0},
    {"encoder.layer.%d.attention.self.key_proj.bias", "/encoder/%d/attention/k_bias", "d", "", 0},
    {"encoder.layer.%d.attention.self.value_proj.weight", "/encoder/%d/attention/v_weight", "dd",
     "", 0},
    {"encoder.layer.%d.attention.self.value_proj.bias", "/encoder/%d/attention/v_bias", "d", "",
     0},
    {"encoder.layer.%d.attention.self.pos_key_proj.weight",
     "/encoder/%d/attention/position_key_weight", "dd", "rk", 0},
    {"encoder.layer.%d.attention.self.pos_key_proj.bias", "/encoder/%d/attention/position_key_bias",
     "d", "rk", 0},
    {"encoder.layer.%d.attention.self.pos_query_proj.weight",
     "/encoder/%d/attention/position_query_weight", "dd", "ry", 0},
    {"encoder.layer.%d.attention.self.pos_query_proj.bias",
     "/encoder/%d/attention/position_query_bias", "d", "ry", 0},
    {"encoder.rel_embeddings.weight", "/encoder/%d/attention/relative_embeddings", "rd", "r", 0},
    {"encoder.LayerNorm.weight", "/encoder/%d/attention/relative_norm_weight", "d", "re", 0},
    {"encoder.LayerNorm.bias", "/encoder/%d/attention/relative_norm_bias", "d", "re", 0},
    {"encoder.layer.%d.attention.output.dense.weight", "/encoder/%d/attention/out_weight", "dd", "",
     0},
    {"encoder.layer.%d.attention.output.dense.bias", "/encoder/%d/attention/out_bias", "d", "", 0},
    {"encoder.layer.%d.attention.output.LayerNorm.weight", "/encoder/%d/attention/norm/weight", "d",
     "", 0},
    {"encoder.layer.%d.attention.output.LayerNorm.bias", "/encoder/%d/attention/norm/bias", "d", "",
     0},
    {NULL, NULL, NULL, NULL, 0},
};

/* Qwen3 (transformers' Qwen3Model names): Qwen2's, Q/K/V/O biases only
 * with attention_bias, and the per-head q_norm and k_norm. */
static const tensor_rule qwen3_layer[] = {
    {"layers.%d.input_layernorm.weight", "/encoder/%d/attention/norm/weight", "d", "", 0},
    {"layers.%d.self_attn.q_proj.weight", "/encoder/%d/attention/q_weight", "ad", "", 0},
    {"layers.%d.self_attn.q_proj.bias", "/encoder/%d/attention/q_bias", "a", "q", 0},
    {"layers.%d.self_attn.k_proj.weight", "/encoder/%d/attention/k_weight", "kd", "", 0},
    {"layers.%d.self_attn.k_proj.bias", "/encoder/%d/attention/k_bias", "k", "q", 0},
    {"layers.%d.self_attn.v_proj.weight", "/encoder/%d/attention/v_weight", "kd", "", 0},
    {"layers.%d.self_attn.v_proj.bias", "/encoder/%d/attention/v_bias", "k", "q", 0},
    {"layers.%d.self_attn.o_proj.weight", "/encoder/%d/attention/out_weight", "da", "", 0},
    {"layers.%d.self_attn.o_proj.bias", "/encoder/%d/attention/out_bias", "d", "o", 0},
    {"layers.%d.self_attn.q_norm.weight", "/encoder/%d/attention/q_norm_weight", "e", "", 0},
    {"layers.%d.self_attn.k_norm.weight", "/encoder/%d/attention/k_norm_weight", "e", "", 0},
    {"layers.%d.post_attention_layernorm.weight", "/encoder/%d/ffn/norm/weight", "d", "", 0},
    {"layers.%d.mlp.gate_proj.weight", "/encoder/%d/ffn/gate_weight", "fd", "", 0},
    {"layers.%d.mlp.up_proj.weight", "/encoder/%d/ffn/in_weight", "fd", "", 0},
    {"layers.%d.mlp.down_proj.weight", "/encoder/%d/ffn/out_weight", "df", "", 0},
    {NULL, NULL, NULL, NULL, 0},
};

/* Gemma3 (transformers' Gemma3TextModel names): Qwen3's attention, and a
 * norm before and after each sublayer: input_layernorm and
 * post_attention_layernorm around the attention, pre_ and
 * post_feedforward_layernorm around the MLP (the job's output_norm). */
static const tensor_rule gemma3_layer[] = {
    {"layers.%d.input_layernorm.weight", "/encoder/%d/attention/norm/weight", "d", "", 0},
    {"layers.%d.self_attn.q_proj.weight", "/encoder/%d/attention/q_weight", "ad", "", 0},
    {"layers.%d.self_attn.q_proj.bias", "/encoder/%d/attention/q_bias", "a", "q", 0},
    {"layers.%d.self_attn.k_proj.weight", "/encoder/%d/attention/k_weight", "kd", "", 0},
    {"layers.%d.self_attn.k_proj.bias", "/encoder/%d/attention/k_bias", "k", "q", 0},
    {"layers.%d.self_attn.v_proj.weight", "/encoder/%d/attention/v_weight", "kd", "", 0},
    {"layers.%d.self_attn.v_proj.bias", "/encoder/%d/attention/v_bias", "k", "q", 0},
    {"layers.%d.self_attn.o_proj.weight", "/encoder/%d/attention/out_weight", "da", "", 0},
    {"layers.%d.self_attn.o_proj.bias", "/encoder/%d/attention/out_bias", "d", "o", 0},
    {"layers.%d.self_attn.q_norm.weight", "/encoder/%d/attention/q_norm_weight", "e", "", 0},
    {"layers.%d.self_attn.k_norm.weight", "/encoder/%d/attention/k_norm_weight", "e", "", 0},
    {"layers.%d.post_attention_layernorm.weight", "/encoder/%d/attention/output_norm/weight",
     "d", "", 0},
    {"layers.%d.pre_feedforward_layernorm.weight", "/encoder/%d/ffn/norm/weight", "d", "", 0},
    {"layers.%d.post_feedforward_layernorm.weight", "/encoder/%d/ffn/output_norm/weight", "d",
     "", 0},
    {"layers.%d.mlp.gate_proj.weight", "/encoder/%d/ffn/gate_weight", "fd", "", 0},
    {"layers.%d.mlp.up_proj.weight", "/encoder/%d/ffn/in_weight", "fd", "", 0},
    {"layers.%d.mlp.down_proj.weight", "/encoder/%d/ffn/out_weight", "df", "", 0},
    {NULL, NULL, NULL, NULL, 0},
};

/* GTE v1.5 and mGTE (Alibaba-NLP new-impl's NewModel names; NewForMaskedLM
 * and the task models wrap it as new.): JinaBERT's embeddings, no position
 * table, token types only with type_vocab_size > 0. qkv_proj holds Q, K, V rows in that
 * order; NewGatedMLP's up_gate_proj holds the up rows first, then the gate
 * rows, and has no bias (down_proj has one). */
static const char *const gte_prefixes[] = {"", "new.", NULL};
/* NewForMaskedLM's lm_head, and the one-label token classifier beside the
 * encoder of gte-multilingual-base (a NewForTokenClassification: its
 * per-token weights are the model's sparse output), which
 * sentence-transformers' AutoModel leaves out as well; a classifier of more
 * labels is a task head (check_gte_classifier). */
static const char *const gte_pretraining[] = {"lm_head.", "classifier.", NULL};
static const tensor_rule gte_layer[] = {
    {"encoder.layer.%d.attention.qkv_proj.weight", "/encoder/%d/attention/qkv_weight", "qd", "",
     0},
    {"encoder.layer.%d.attention.qkv_proj.bias", "/encoder/%d/attention/qkv_bias", "q", "", 0},
    {"encoder.layer.%d.attention.o_proj.weight", "/encoder/%d/attention/out_weight", "dd", "", 0},
    {"encoder.layer.%d.attention.o_proj.bias", "/encoder/%d/attention/out_bias", "d", "", 0},
    {"encoder.layer.%d.attn_ln.weight", "/encoder/%d/attention/norm/weight", "d", "", 0},
    {"encoder.layer.%d.attn_ln.bias", "/encoder/%d/attention/norm/bias", "d", "", 0},
    {"encoder.layer.%d.mlp.up_gate_proj.weight", "/encoder/%d/ffn/in_weight", "gd", "", '1'},
    {"encoder.layer.%d.mlp.up_gate_proj.weight", "/encoder/%d/ffn/gate_weight", "gd", "", '2'},
    {"", "/encoder/%d/ffn/in_bias", "f", "I", 0},
    {"", "/encoder/%d/ffn/gate_bias", "f", "I", 0},
    {"encoder.layer.%d.mlp.down_proj.weight", "/encoder/%d/ffn/out_weight", "df", "", 0},
    {"encoder.layer.%d.mlp.down_proj.bias", "/encoder/%d/ffn/out_bias", "d", "", 0},
    {"encoder.layer.%d.mlp_ln.weight", "/encoder/%d/ffn/norm/weight", "d", "", 0},
    {"encoder.layer.%d.mlp_ln.bias", "/encoder/%d/ffn/norm/bias", "d", "", 0},
    {NULL, NULL, NULL, NULL, 0},
};

/* Sequence-classification heads (transformers' *ForSequenceClassification)
 * into the job's [head] section (plugins/classifier.c). BERT's pooler sits
 * under the encoder's prefix (bert.pooler), the rest beside the encoder. */
static const tensor_rule bert_head_in_encoder[] = {
    {"pooler.dense.weight", "/head/dense_weight", "dd", "", 0},
    {"pooler.dense.bias", "/head/dense_bias", "d", "", 0},
    {NULL, NULL, NULL, NULL, 0},
};
static const tensor_rule bert_head[] = {
    {"classifier.weight", "/head/out_weight", "cd", "", 0},
    {"classifier.bias", "/head/out_bias", "c", "", 0},
    {NULL, NULL, NULL, NULL, 0},
};
/* RobertaClassificationHead, and ELECTRA's of the same names. */
static const tensor_rule roberta_head[] = {
    {"classifier.dense.weight", "/head/dense_weight", "dd", "", 0},
    {"classifier.dense.bias", "/head/dense_bias", "d", "", 0},
    {"classifier.out_proj.weight", "/head/out_weight", "cd", "", 0},
    {"classifier.out_proj.bias", "/head/out_bias", "c", "", 0},
    {NULL, NULL, NULL, NULL, 0},
};
static const tensor_rule distilbert_head[] = {
    {"pre_classifier.weight", "/head/dense_weight", "dd", "", 0},
    {"pre_classifier.bias", "/head/dense_bias", "d", "", 0},
    {"classifier.weight", "/head/out_weight", "cd", "", 0},
    {"classifier.bias", "/head/out_bias", "c", "", 0},
    {NULL, NULL, NULL, NULL, 0},
};
/* DebertaV2ForSequenceClassification: the ContextPooler and classifier
 * beside the encoder. */
static const tensor_rule deberta_head[] = {
    {"pooler.dense.weight", "/head/dense_weight", "dd", "", 0},
    {"pooler.dense.bias", "/head/dense_bias", "d", "", 0},
    {"classifier.weight", "/head/out_weight", "cd", "", 0},
    {"classifier.bias", "/head/out_bias", "c", "", 0},
    {NULL, NULL, NULL, NULL, 0},
};
/* ModernBertForSequenceClassification: ModernBertPredictionHead (head.dense,
 * with a bias only when classifier_bias; head.norm, with one only when
 * norm_bias) and classifier beside the encoder (model.). */
static const tensor_rule modernbert_head[] = {
    {"head.dense.weight", "/head/dense_weight", "dd", "", 0},
    {"head.dense.bias", "/head/dense_bias", "d", "c", 0},
    {"head.norm.weight", "/head/norm_weight", "d", "", 0},
    {"head.norm.bias", "/head/norm_bias", "d", "n", 0},
    {"classifier.weight", "/head/out_weight", "cd", "", 0},
    {"classifier.bias", "/head/out_bias", "c", "", 0},
    {NULL, NULL, NULL, NULL, 0},
};
/* Masked-LM heads (splade): the decoder is tied to the word embeddings,
 * which save_pretrained stores once, under the encoder. */
static const tensor_rule mlm_head_in_encoder[] = {
    {"embeddings.word_embeddings.weight", "/head/decoder_weight", "vd", "", 0},
    {NULL, NULL, NULL, NULL, 0},
};
static const tensor_rule bert_mlm_head[] = {
    {"cls.predictions.transform.dense.weight", "/head/transform_weight", "dd", "", 0},
    {"cls.predictions.transform.dense.bias", "/head/transform_bias", "d", "", 0},
    {"cls.predictions.transform.LayerNorm.weight", "/head/norm_weight", "d", "", 0},
    {"cls.predictions.transform.LayerNorm.bias", "/head/norm_bias", "d", "", 0},
    {"cls.predictions.bias", "/head/decoder_bias", "v", "", 0},
    {NULL, NULL, NULL, NULL, 0},
};
static const tensor_rule distilbert_mlm_head[] = {
    {"vocab_transform.weight", "/head/transform_weight", "dd", "", 0},
    {"vocab_transform.bias", "/head/transform_bias", "d", "", 0},
    {"vocab_layer_norm.weight", "/head/norm_weight", "d", "", 0},
    {"vocab_layer_norm.bias", "/head/norm_bias", "d", "", 0},
    {"vocab_projector.bias", "/head/decoder_bias", "v", "", 0},
    {NULL, NULL, NULL, NULL, 0},
};
/* RobertaLMHead, XLM-R's and MPNetLMHead: save_pretrained keeps lm_head.bias
 * and drops the decoder's weight and bias, which are tied to the word
 * embeddings and to it. */
static const tensor_rule roberta_mlm_head[] = {
    {"lm_head.dense.weight", "/head/transform_weight", "dd", "", 0},
    {"lm_head.dense.bias", "/head/transform_bias", "d", "", 0},
    {"lm_head.layer_norm.weight", "/head/norm_weight", "d", "", 0},
    {"lm_head.layer_norm.bias", "/head/norm_bias", "d", "", 0},
    {"lm_head.bias", "/head/decoder_bias", "v", "", 0},
    {NULL, NULL, NULL, NULL, 0},
};
/* ModernBertForMaskedLM: the decoder tied to the encoder's tok_embeddings,
 * ModernBertPredictionHead and the decoder's bias beside the encoder. */
static const tensor_rule modernbert_mlm_head_in_encoder[] = {
    {"embeddings.tok_embeddings.weight", "/head/decoder_weight", "vd", "", 0},
    {NULL, NULL, NULL, NULL, 0},
};
static const tensor_rule modernbert_mlm_head[] = {
    {"head.dense.weight", "/head/transform_weight", "dd", "", 0},
    {"head.dense.bias", "/head/transform_bias", "d", "c", 0},
    {"head.norm.weight", "/head/norm_weight", "d", "", 0},
    {"head.norm.bias", "/head/norm_bias", "d", "n", 0},
    {"decoder.bias", "/head/decoder_bias", "v", "b", 0},
    {NULL, NULL, NULL, NULL, 0},
};
static const tensor_rule no_head[] = {{NULL, NULL, NULL, NULL, 0}};

/* ColBERT's projection (colbert-ai's HF_ColBERT.linear, no bias) into the
 * job's [head] section (plugins/multivector.c). */
static const tensor_rule colbert_head[] = {
    {"linear.weight", "/head/weight", "md", "", 0},
    {NULL, NULL, NULL, NULL, 0}};

/* The head's rules under the encoder's prefix, and beside it. */
static void head_rules(head_kind kind, const tensor_rule **in_encoder, const tensor_rule **beside)
{
    const int masked_lm = kind == HEAD_MLM_BERT || kind == HEAD_MLM_DISTILBERT ||
                          kind == HEAD_MLM_ROBERTA;
    *in_encoder = kind == HEAD_BERT             ? bert_head_in_encoder
                  : kind == HEAD_MLM_MODERNBERT ? modernbert_mlm_head_in_encoder
                  : masked_lm                   ? mlm_head_in_encoder
                                                : no_head;
    *beside = kind == HEAD_BERT                ? bert_head
              : kind == HEAD_ROBERTA           ? roberta_head
              : kind == HEAD_DISTILBERT        ? distilbert_head
              : kind == HEAD_DEBERTA           ? deberta_head
              : kind == HEAD_MODERNBERT        ? modernbert_head
              : kind == HEAD_MLM_BERT          ? bert_mlm_head
              : kind == HEAD_MLM_DISTILBERT    ? distilbert_mlm_head
              : kind == HEAD_MLM_ROBERTA       ? roberta_mlm_head
              : kind == HEAD_MLM_MODERNBERT    ? modernbert_mlm_head
                                               : no_head;
}

static int count_rules(const tensor_rule *rules)
{
    int n = 0;
    while (rules[n].source != NULL)
        n++;
    return n;
}

static const tensor_map *map_of(architecture kind)
{
    static const tensor_rule *const bert_layer[] = {bert_attention, bert_ffn, NULL};
    static const tensor_rule *const mpnet_layer[] = {mpnet_attention, bert_ffn, NULL};
    static const tensor_rule *const jina_layer[] = {bert_attention, jina_ffn, NULL};
    static const tensor_rule *const distilbert_layers[] = {distilbert_layer, NULL};
    static const tensor_rule *const nomic_layers[] = {nomic_layer, NULL};
    static const tensor_rule *const xlmr_rotary_layers[] = {xlmr_rotary_layer, NULL};
    static const tensor_rule *const modernbert_layers[] = {modernbert_layer, NULL};
    static const tensor_rule *const qwen2_layers[] = {qwen2_layer, NULL};
    static const tensor_rule *const deberta_layer[] = {deberta_attention, bert_ffn, NULL};
    static const tensor_rule *const qwen3_layers[] = {qwen3_layer, NULL};
    static const tensor_rule *const gemma3_layers[] = {gemma3_layer, NULL};
    static const tensor_rule *const gte_layers[] = {gte_layer, NULL};
    static const tensor_map bert = {bert_prefixes, bert_model, bert_layer, bert_unused,
                                    bert_pretraining};
    static const tensor_map mpnet = {mpnet_prefixes, mpnet_model, mpnet_layer, bert_unused,
                                     mpnet_pretraining};
    static const tensor_map distilbert = {distilbert_prefixes, bert_model, distilbert_layers,
                                          no_unused, distilbert_pretraining};
    static const tensor_map jina = {jina_prefixes, jina_model, jina_layer, bert_unused,
                                    bert_pretraining};
    static const tensor_map nomic = {nomic_prefixes, nomic_model, nomic_layers, bert_unused,
                                     bert_pretraining};
    static const tensor_map xlmr_rotary = {xlmr_rotary_prefixes, nomic_model,
                                           xlmr_rotary_layers, bert_unused, bert_pretraining};
    static const tensor_map modernbert = {modernbert_prefixes, modernbert_model,
                                          modernbert_layers, modernbert_unused,
                                          modernbert_pretraining};
    static const tensor_map qwen2 = {qwen2_prefixes, qwen2_model, qwen2_layers, no_unused,
                                     mpnet_pretraining};
    static const tensor_map deberta = {deberta_prefixes, deberta_model, deberta_layer, no_unused,
                                       deberta_pretraining};
    static const tensor_map qwen3 = {qwen2_prefixes, qwen2_model, qwen3_layers, no_unused,
                                     mpnet_pretraining};
    static const tensor_map gemma3 = {qwen2_prefixes, qwen2_model, gemma3_layers, no_unused,
                                      mpnet_pretraining};
    static const tensor_map gte = {gte_prefixes, jina_model, gte_layers, bert_unused,
                                   gte_pretraining};
    switch (kind) {
    case ARCH_GTE: return &gte;
    case ARCH_DEBERTA_V2: return &deberta;
    case ARCH_MPNET: return &mpnet;
    case ARCH_DISTILBERT: return &distilbert;
    case ARCH_JINA_BERT: return &jina;
    case ARCH_NOMIC_BERT: return &nomic;
    case ARCH_XLMR_ROTARY: return &xlmr_rotary;
    case ARCH_MODERNBERT: return &modernbert;
    case ARCH_QWEN2: return &qwen2;
    case ARCH_QWEN3: return &qwen3;
    case ARCH_GEMMA3: return &gemma3;
    default: return &bert; /* ARCH_BERT, ARCH_ROBERTA */
    }
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

/* Appends the plan entry of `rule` for `layer` (-1 for a model rule). */
static int add_plan(importer *self, int capacity, const char *prefix, const tensor_rule *rule,
                    int layer)
{
    if (self->plan_count >= capacity)
        return tfenc_error(self->ctx, TFENC_ERR_INTERNAL, "tensor plan overflow");
    tensor_plan *item = &self->plan[self->plan_count++];
    char source[128];
    snprintf(source, sizeof source, rule->source, layer);
    snprintf(item->source, sizeof item->source, "%s%s", prefix, source);
    snprintf(item->target, sizeof item->target, rule->target, layer);
    item->rank = (int)strlen(rule->shape);
    item->dims[0] = dimension(&self->config, rule->shape[0]);
    item->dims[1] = item->rank > 1 ? dimension(&self->config, rule->shape[1]) : 0;
    item->source_rows = item->dims[0];
    item->zeros = rule->source[0] == '\0';
    if (rule->half != 0) {
        item->dims[0] /= 2;
        item->first_row = rule->half == '2' ? item->dims[0] : 0;
    }
    return TFENC_OK;
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
        if (self->plan_count >= capacity)
            return tfenc_error(self->ctx, TFENC_ERR_INTERNAL, "tensor plan overflow");
        tensor_plan *item = &self->plan[self->plan_count++];
        snprintf(item->source, sizeof item->source, "%s", parts[i].source);
        snprintf(item->target, sizeof item->target, "%s", parts[i].target);
        item->rank = parts[i].rank;
        item->dims[0] = item->source_rows = parts[i].rows;
        item->dims[1] = parts[i].columns;
        item->file = dense->weights[parts[i].module];
        item->zeros = i >= 2 && !dense->bias[parts[i].module];
    }
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
                          const tensor_map *map)
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

/* PyLate's projection: sentence-transformers' Dense module saves its
 * nn.Linear as `linear.*` in its own folder's model.safetensors. */
static const tensor_rule pylate_head[] = {
    {"linear.weight", "/head/weight", "md", "", 0},
    {"linear.bias", "/head/bias", "m", "", 0}};

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
    const tensor_map *map = map_of(c->architecture);
    const char *prefix = NULL;
    for (const char *const *p = map->prefixes; *p != NULL && prefix == NULL; p++) {
        char name[160];
        snprintf(name, sizeof name, "%s%s", *p, map->model[0].source);
        if (tfenc_checkpoint_find(self->weights, name) != NULL)
            prefix = *p;
    }
    if (prefix == NULL) {
        char tried[128] = "";
        for (const char *const *p = map->prefixes + 1; *p != NULL; p++)
            snprintf(tried + strlen(tried), sizeof tried - strlen(tried), "%s'%s'",
                     tried[0] != '\0' ? " or " : "", *p);
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: tensor '%s' not found (nor with the "
                           "prefix %s)", weights_path, map->model[0].source, tried);
    }

    int n_model = 0, n_layer = 0, status;
    while (map->model[n_model].source != NULL)
        n_model++;
    for (const tensor_rule *const *table = map->layer; *table != NULL; table++)
        for (const tensor_rule *rule = *table; rule->source != NULL; rule++)
            n_layer++;
    const tensor_rule *head_in_encoder, *head_beside;
    head_rules(c->head.kind, &head_in_encoder, &head_beside);
    int n_dense = 0; /* PyLate's projection, from its Dense folder's file */
    if (c->multivector.present && self->dense_weights != NULL) {
        n_dense = 1 + c->multivector.projection_bias;
    } else if (c->multivector.present) {
        head_beside = colbert_head;
        if ((status = plan_colbert(self, weights_path)) != TFENC_OK)
            return status;
    }
    int capacity = n_model + n_layer * c->n_layers + count_rules(head_in_encoder)
                   + count_rules(head_beside) + n_dense + 4 /* plan_dense() */
                   + moe_plan_count(c);
    self->plan = calloc((size_t)capacity, sizeof *self->plan);
    if (self->plan == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    for (int i = 0; i < n_model; i++)
        if (applies(c, map->model[i].when, 0)
            && (status = add_plan(self, capacity, prefix, &map->model[i], -1)))
            return status;
    for (int layer = 0; layer < c->n_layers; layer++)
        for (const tensor_rule *const *table = map->layer; *table != NULL; table++)
            for (const tensor_rule *rule = *table; rule->source != NULL; rule++)
                if (applies(c, rule->when, layer)
                    && (status = add_plan(self, capacity, prefix, rule, layer)))
                    return status;
    if ((status = plan_moe(self, capacity, prefix, weights_path)))
        return status;
    for (const tensor_rule *rule = head_in_encoder; rule->source != NULL; rule++)
        if (applies(c, rule->when, 0) && (status = add_plan(self, capacity, prefix, rule, -1)))
            return status;
    for (const tensor_rule *rule = head_beside; rule->source != NULL; rule++)
        if (applies(c, rule->when, 0) && (status = add_plan(self, capacity, "", rule, -1)))
            return status;
    for (int i = 0; i < n_dense; i++) {
        if ((status = add_plan(self, capacity, "", &pylate_head[i], -1)))
            return status;
        self->plan[self->plan_count - 1].file = self->dense_weights;
    }
    if ((status = plan_dense(self, capacity)))
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
