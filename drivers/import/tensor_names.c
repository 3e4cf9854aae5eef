/* The Hugging Face names of each canonical tensor, by architecture and
 * head, and the list of tensors each architecture and head has
 * (tensor_names.h). A name is listed once, with every architecture that
 * saves the tensor under it; the readers that use one name for different
 * tensors (Qwen's post_attention_layernorm, Gemma3's) are told apart by
 * their bits, and tests/import/test_tensor_names checks that no reader's
 * name maps to two tensors and that no entry is unreachable. */
#include "config.h"

#include "tensor_names.h"

#include <stdio.h>
#include <string.h>

_Static_assert(ARCH_STATIC < 16 && HEAD_MLM_MODERNBERT < 15,
               "the reader bits hold every architecture and head kind");

#define BY_BERT (NAMES_OF_ARCHITECTURE(ARCH_BERT) | NAMES_OF_ARCHITECTURE(ARCH_ROBERTA))
#define BY_MPNET NAMES_OF_ARCHITECTURE(ARCH_MPNET)
#define BY_DISTILBERT NAMES_OF_ARCHITECTURE(ARCH_DISTILBERT)
#define BY_JINA NAMES_OF_ARCHITECTURE(ARCH_JINA_BERT)
#define BY_NOMIC NAMES_OF_ARCHITECTURE(ARCH_NOMIC_BERT)
#define BY_XLMR_ROTARY NAMES_OF_ARCHITECTURE(ARCH_XLMR_ROTARY)
#define BY_MODERNBERT NAMES_OF_ARCHITECTURE(ARCH_MODERNBERT)
#define BY_QWEN2 NAMES_OF_ARCHITECTURE(ARCH_QWEN2)
#define BY_QWEN3 NAMES_OF_ARCHITECTURE(ARCH_QWEN3)
#define BY_GEMMA3 NAMES_OF_ARCHITECTURE(ARCH_GEMMA3)
#define BY_DEBERTA NAMES_OF_ARCHITECTURE(ARCH_DEBERTA_V2)
#define BY_GTE NAMES_OF_ARCHITECTURE(ARCH_GTE)
/* transformers' BertModel names, which RoBERTa, XLM-R, ELECTRA, DistilBERT's
 * embeddings, JinaBERT, DeBERTa and GTE share in part */
#define BY_BERT_EMBEDDINGS (BY_BERT | BY_MPNET | BY_DISTILBERT | BY_JINA | BY_DEBERTA | BY_GTE)
/* flash-attention's BERT, which NomicBERT and the rotary XLM-R come from */
#define BY_FLASH_BERT (BY_NOMIC | BY_XLMR_ROTARY)
#define BY_QWEN (BY_QWEN2 | BY_QWEN3 | BY_GEMMA3)
#define BY_HEAD(kind) NAMES_OF_HEAD(kind)
#define BY_MASKED_LM (BY_HEAD(HEAD_MLM_BERT) | BY_HEAD(HEAD_MLM_DISTILBERT) \
                      | BY_HEAD(HEAD_MLM_ROBERTA))

/* Each entry: {name, readers, conditions, half, beside}. */
const canonical_tensor import_canonical_tensors[TENSOR_COUNT] = {
    [TENSOR_TOKEN_EMBEDDINGS] = {"/embeddings/token_embeddings", "vd", {
        {"embeddings.word_embeddings.weight", BY_BERT_EMBEDDINGS | BY_FLASH_BERT, "", 0, 0},
        {"embeddings.tok_embeddings.weight", BY_MODERNBERT, "", 0, 0},
        {"embed_tokens.weight", BY_QWEN, "", 0, 0}}},
    /* JinaBERT, GTE and the rotary models have no position table. */
    [TENSOR_POSITION_EMBEDDINGS] = {"/embeddings/position_embeddings", "pd", {
        {"embeddings.position_embeddings.weight", BY_BERT | BY_MPNET | BY_DISTILBERT, "", 0, 0},
        {"embeddings.position_embeddings.weight", BY_DEBERTA, "a", 0, 0}}},
    [TENSOR_TOKEN_TYPE_EMBEDDINGS] = {"/embeddings/token_type_embeddings", "td", {
        {"embeddings.token_type_embeddings.weight",
         BY_BERT | BY_DISTILBERT | BY_JINA | BY_DEBERTA | BY_GTE | BY_FLASH_BERT, "t", 0, 0}}},
    [TENSOR_EMBEDDINGS_NORM] = {"/embeddings_norm/weight", "d", {
        {"embeddings.LayerNorm.weight", BY_BERT_EMBEDDINGS, "", 0, 0},
        {"emb_ln.weight", BY_FLASH_BERT, "", 0, 0},
        {"embeddings.norm.weight", BY_MODERNBERT, "", 0, 0}}},
    [TENSOR_EMBEDDINGS_NORM_BIAS] = {"/embeddings_norm/bias", "d", {
        {"embeddings.LayerNorm.bias", BY_BERT_EMBEDDINGS, "", 0, 0},
        {"emb_ln.bias", BY_FLASH_BERT, "", 0, 0},
        {"embeddings.norm.bias", BY_MODERNBERT, "n", 0, 0}}},
    [TENSOR_FINAL_NORM] = {"/final_norm/weight", "d", {
        {"final_norm.weight", BY_MODERNBERT, "", 0, 0},
        {"norm.weight", BY_QWEN, "", 0, 0}}},
    [TENSOR_FINAL_NORM_BIAS] = {"/final_norm/bias", "d", {
        {"final_norm.bias", BY_MODERNBERT, "n", 0, 0}}},

    /* ModernBERT's layer 0 has no attention norm. */
    [TENSOR_ATTENTION_NORM] = {"/encoder/%d/attention/norm/weight", "d", {
        {"encoder.layer.%d.attention.output.LayerNorm.weight", BY_BERT | BY_JINA | BY_DEBERTA,
         "", 0, 0},
        {"encoder.layer.%d.attention.LayerNorm.weight", BY_MPNET, "", 0, 0},
        {"transformer.layer.%d.sa_layer_norm.weight", BY_DISTILBERT, "", 0, 0},
        {"encoder.layers.%d.norm1.weight", BY_FLASH_BERT, "", 0, 0},
        {"layers.%d.attn_norm.weight", BY_MODERNBERT, "l", 0, 0},
        {"layers.%d.input_layernorm.weight", BY_QWEN, "", 0, 0},
        {"encoder.layer.%d.attn_ln.weight", BY_GTE, "", 0, 0}}},
    [TENSOR_ATTENTION_NORM_BIAS] = {"/encoder/%d/attention/norm/bias", "d", {
        {"encoder.layer.%d.attention.output.LayerNorm.bias", BY_BERT | BY_JINA | BY_DEBERTA,
         "", 0, 0},
        {"encoder.layer.%d.attention.LayerNorm.bias", BY_MPNET, "", 0, 0},
        {"transformer.layer.%d.sa_layer_norm.bias", BY_DISTILBERT, "", 0, 0},
        {"encoder.layers.%d.norm1.bias", BY_FLASH_BERT, "", 0, 0},
        {"layers.%d.attn_norm.bias", BY_MODERNBERT, "ln", 0, 0},
        {"encoder.layer.%d.attn_ln.bias", BY_GTE, "", 0, 0}}},
    [TENSOR_Q] = {"/encoder/%d/attention/q_weight", "ad", {
        {"encoder.layer.%d.attention.self.query.weight", BY_BERT | BY_JINA, "", 0, 0},
        {"encoder.layer.%d.attention.attn.q.weight", BY_MPNET, "", 0, 0},
        {"transformer.layer.%d.attention.q_lin.weight", BY_DISTILBERT, "", 0, 0},
        {"layers.%d.self_attn.q_proj.weight", BY_QWEN, "", 0, 0},
        {"encoder.layer.%d.attention.self.query_proj.weight", BY_DEBERTA, "", 0, 0}}},
    [TENSOR_Q_BIAS] = {"/encoder/%d/attention/q_bias", "a", {
        {"encoder.layer.%d.attention.self.query.bias", BY_BERT | BY_JINA, "", 0, 0},
        {"encoder.layer.%d.attention.attn.q.bias", BY_MPNET, "", 0, 0},
        {"transformer.layer.%d.attention.q_lin.bias", BY_DISTILBERT, "", 0, 0},
        {"layers.%d.self_attn.q_proj.bias", BY_QWEN2, "", 0, 0},
        {"layers.%d.self_attn.q_proj.bias", BY_QWEN3 | BY_GEMMA3, "q", 0, 0},
        {"encoder.layer.%d.attention.self.query_proj.bias", BY_DEBERTA, "", 0, 0}}},
    [TENSOR_K] = {"/encoder/%d/attention/k_weight", "kd", {
        {"encoder.layer.%d.attention.self.key.weight", BY_BERT | BY_JINA, "", 0, 0},
        {"encoder.layer.%d.attention.attn.k.weight", BY_MPNET, "", 0, 0},
        {"transformer.layer.%d.attention.k_lin.weight", BY_DISTILBERT, "", 0, 0},
        {"layers.%d.self_attn.k_proj.weight", BY_QWEN, "", 0, 0},
        {"encoder.layer.%d.attention.self.key_proj.weight", BY_DEBERTA, "", 0, 0}}},
    [TENSOR_K_BIAS] = {"/encoder/%d/attention/k_bias", "k", {
        {"encoder.layer.%d.attention.self.key.bias", BY_BERT | BY_JINA, "", 0, 0},
        {"encoder.layer.%d.attention.attn.k.bias", BY_MPNET, "", 0, 0},
        {"transformer.layer.%d.attention.k_lin.bias", BY_DISTILBERT, "", 0, 0},
        {"layers.%d.self_attn.k_proj.bias", BY_QWEN2, "", 0, 0},
        {"layers.%d.self_attn.k_proj.bias", BY_QWEN3 | BY_GEMMA3, "q", 0, 0},
        {"encoder.layer.%d.attention.self.key_proj.bias", BY_DEBERTA, "", 0, 0}}},
    [TENSOR_V] = {"/encoder/%d/attention/v_weight", "kd", {
        {"encoder.layer.%d.attention.self.value.weight", BY_BERT | BY_JINA, "", 0, 0},
        {"encoder.layer.%d.attention.attn.v.weight", BY_MPNET, "", 0, 0},
        {"transformer.layer.%d.attention.v_lin.weight", BY_DISTILBERT, "", 0, 0},
        {"layers.%d.self_attn.v_proj.weight", BY_QWEN, "", 0, 0},
        {"encoder.layer.%d.attention.self.value_proj.weight", BY_DEBERTA, "", 0, 0}}},
    [TENSOR_V_BIAS] = {"/encoder/%d/attention/v_bias", "k", {
        {"encoder.layer.%d.attention.self.value.bias", BY_BERT | BY_JINA, "", 0, 0},
        {"encoder.layer.%d.attention.attn.v.bias", BY_MPNET, "", 0, 0},
        {"transformer.layer.%d.attention.v_lin.bias", BY_DISTILBERT, "", 0, 0},
        {"layers.%d.self_attn.v_proj.bias", BY_QWEN2, "", 0, 0},
        {"layers.%d.self_attn.v_proj.bias", BY_QWEN3 | BY_GEMMA3, "q", 0, 0},
        {"encoder.layer.%d.attention.self.value_proj.bias", BY_DEBERTA, "", 0, 0}}},
    /* Q, K and V rows in that order. */
    [TENSOR_QKV] = {"/encoder/%d/attention/qkv_weight", "qd", {
        {"encoder.layers.%d.attn.Wqkv.weight", BY_NOMIC, "", 0, 0},
        {"encoder.layers.%d.mixer.Wqkv.weight", BY_XLMR_ROTARY, "", 0, 0},
        {"layers.%d.attn.Wqkv.weight", BY_MODERNBERT, "", 0, 0},
        {"encoder.layer.%d.attention.qkv_proj.weight", BY_GTE, "", 0, 0}}},
    [TENSOR_QKV_BIAS] = {"/encoder/%d/attention/qkv_bias", "q", {
        {"encoder.layers.%d.attn.Wqkv.bias", BY_NOMIC, "q", 0, 0},
        {"encoder.layers.%d.mixer.Wqkv.bias", BY_XLMR_ROTARY, "", 0, 0},
        {"layers.%d.attn.Wqkv.bias", BY_MODERNBERT, "q", 0, 0},
        {"encoder.layer.%d.attention.qkv_proj.bias", BY_GTE, "", 0, 0}}},
    /* DeBERTa's disentangled attention: maps of their own for the relative
     * embeddings unless share_att_key, and one table of relative embeddings
     * (with its LayerNorm) that every layer reads. */
    [TENSOR_POSITION_KEY] = {"/encoder/%d/attention/position_key_weight", "dd", {
        {"encoder.layer.%d.attention.self.pos_key_proj.weight", BY_DEBERTA, "rk", 0, 0}}},
    [TENSOR_POSITION_KEY_BIAS] = {"/encoder/%d/attention/position_key_bias", "d", {
        {"encoder.layer.%d.attention.self.pos_key_proj.bias", BY_DEBERTA, "rk", 0, 0}}},
    [TENSOR_POSITION_QUERY] = {"/encoder/%d/attention/position_query_weight", "dd", {
        {"encoder.layer.%d.attention.self.pos_query_proj.weight", BY_DEBERTA, "ry", 0, 0}}},
    [TENSOR_POSITION_QUERY_BIAS] = {"/encoder/%d/attention/position_query_bias", "d", {
        {"encoder.layer.%d.attention.self.pos_query_proj.bias", BY_DEBERTA, "ry", 0, 0}}},
    [TENSOR_RELATIVE_EMBEDDINGS] = {"/encoder/%d/attention/relative_embeddings", "rd", {
        {"encoder.rel_embeddings.weight", BY_DEBERTA, "r", 0, 0}}},
    [TENSOR_RELATIVE_NORM] = {"/encoder/%d/attention/relative_norm_weight", "d", {
        {"encoder.LayerNorm.weight", BY_DEBERTA, "re", 0, 0}}},
    [TENSOR_RELATIVE_NORM_BIAS] = {"/encoder/%d/attention/relative_norm_bias", "d", {
        {"encoder.LayerNorm.bias", BY_DEBERTA, "re", 0, 0}}},
    /* MPNet's one relative position bias table, which every layer uses. */
    [TENSOR_RELATIVE_ATTENTION_BIAS] = {"/encoder/%d/attention/relative_attention_bias", "bh", {
        {"encoder.relative_attention_bias.weight", BY_MPNET, "", 0, 0}}},
    [TENSOR_ATTENTION_OUT] = {"/encoder/%d/attention/out_weight", "da", {
        {"encoder.layer.%d.attention.output.dense.weight", BY_BERT | BY_JINA | BY_DEBERTA, "", 0,
         0},
        {"encoder.layer.%d.attention.attn.o.weight", BY_MPNET, "", 0, 0},
        {"transformer.layer.%d.attention.out_lin.weight", BY_DISTILBERT, "", 0, 0},
        {"encoder.layers.%d.attn.out_proj.weight", BY_NOMIC, "", 0, 0},
        {"encoder.layers.%d.mixer.out_proj.weight", BY_XLMR_ROTARY, "", 0, 0},
        {"layers.%d.attn.Wo.weight", BY_MODERNBERT, "", 0, 0},
        {"layers.%d.self_attn.o_proj.weight", BY_QWEN, "", 0, 0},
        {"encoder.layer.%d.attention.o_proj.weight", BY_GTE, "", 0, 0}}},
    /* Qwen2's o_proj has no bias. */
    [TENSOR_ATTENTION_OUT_BIAS] = {"/encoder/%d/attention/out_bias", "d", {
        {"encoder.layer.%d.attention.output.dense.bias", BY_BERT | BY_JINA | BY_DEBERTA, "", 0,
         0},
        {"encoder.layer.%d.attention.attn.o.bias", BY_MPNET, "", 0, 0},
        {"transformer.layer.%d.attention.out_lin.bias", BY_DISTILBERT, "", 0, 0},
        {"encoder.layers.%d.attn.out_proj.bias", BY_NOMIC, "o", 0, 0},
        {"encoder.layers.%d.mixer.out_proj.bias", BY_XLMR_ROTARY, "", 0, 0},
        {"layers.%d.attn.Wo.bias", BY_MODERNBERT, "o", 0, 0},
        {"layers.%d.self_attn.o_proj.bias", BY_QWEN3 | BY_GEMMA3, "o", 0, 0},
        {"encoder.layer.%d.attention.o_proj.bias", BY_GTE, "", 0, 0}}},
    /* Qwen3's and Gemma3's per-head RMSNorms of Q and K. */
    [TENSOR_Q_NORM] = {"/encoder/%d/attention/q_norm_weight", "e", {
        {"layers.%d.self_attn.q_norm.weight", BY_QWEN3 | BY_GEMMA3, "", 0, 0}}},
    [TENSOR_K_NORM] = {"/encoder/%d/attention/k_norm_weight", "e", {
        {"layers.%d.self_attn.k_norm.weight", BY_QWEN3 | BY_GEMMA3, "", 0, 0}}},
    /* Gemma3's norm after the attention, where Qwen's of the same name is
     * the one before the MLP. */
    [TENSOR_ATTENTION_OUTPUT_NORM] = {"/encoder/%d/attention/output_norm/weight", "d", {
        {"layers.%d.post_attention_layernorm.weight", BY_GEMMA3, "", 0, 0}}},

    [TENSOR_FFN_NORM] = {"/encoder/%d/ffn/norm/weight", "d", {
        {"encoder.layer.%d.output.LayerNorm.weight", BY_BERT | BY_MPNET | BY_DEBERTA, "", 0, 0},
        {"transformer.layer.%d.output_layer_norm.weight", BY_DISTILBERT, "", 0, 0},
        {"encoder.layer.%d.mlp.layernorm.weight", BY_JINA, "", 0, 0},
        {"encoder.layers.%d.norm2.weight", BY_FLASH_BERT, "", 0, 0},
        {"layers.%d.mlp_norm.weight", BY_MODERNBERT, "", 0, 0},
        {"layers.%d.post_attention_layernorm.weight", BY_QWEN2 | BY_QWEN3, "", 0, 0},
        {"layers.%d.pre_feedforward_layernorm.weight", BY_GEMMA3, "", 0, 0},
        {"encoder.layer.%d.mlp_ln.weight", BY_GTE, "", 0, 0}}},
    [TENSOR_FFN_NORM_BIAS] = {"/encoder/%d/ffn/norm/bias", "d", {
        {"encoder.layer.%d.output.LayerNorm.bias", BY_BERT | BY_MPNET | BY_DEBERTA, "", 0, 0},
        {"transformer.layer.%d.output_layer_norm.bias", BY_DISTILBERT, "", 0, 0},
        {"encoder.layer.%d.mlp.layernorm.bias", BY_JINA, "", 0, 0},
        {"encoder.layers.%d.norm2.bias", BY_FLASH_BERT, "", 0, 0},
        {"layers.%d.mlp_norm.bias", BY_MODERNBERT, "n", 0, 0},
        {"encoder.layer.%d.mlp_ln.bias", BY_GTE, "", 0, 0}}},
    /* The gated feed-forwards: NomicBERT's SwiGLU is fc11(x) * act(fc12(x))
     * (fc12 the gate); JinaBERT's gated_layers and ModernBERT's Wi hold the
     * activated (gate) rows first, GTE's up_gate_proj the up rows first.
     * Where only one linear has a bias the ffn layer, whose `bias` key
     * covers both, gets zeros for the other ('I', 'U'). NomicBERT v2's
     * mixture-of-experts layers are planned by tensor_map.c's plan_moe(). */
    [TENSOR_FFN_GATE] = {"/encoder/%d/ffn/gate_weight", "fd", {
        {"encoder.layer.%d.mlp.gated_layers.weight", BY_JINA, "", '1', 0},
        {"encoder.layers.%d.mlp.fc12.weight", BY_NOMIC, "Fg", 0, 0},
        {"layers.%d.mlp.Wi.weight", BY_MODERNBERT, "", '1', 0},
        {"layers.%d.mlp.gate_proj.weight", BY_QWEN, "", 0, 0},
        {"encoder.layer.%d.mlp.up_gate_proj.weight", BY_GTE, "", '2', 0}}},
    [TENSOR_FFN_GATE_BIAS] = {"/encoder/%d/ffn/gate_bias", "f", {
        {"", BY_JINA | BY_GTE, "I", 0, 0},
        {"encoder.layers.%d.mlp.fc12.bias", BY_NOMIC, "Fgi", 0, 0},
        {"", BY_NOMIC, "FgI", 0, 0},
        {"layers.%d.mlp.Wi.bias", BY_MODERNBERT, "i", '1', 0}}},
    [TENSOR_FFN_IN] = {"/encoder/%d/ffn/in_weight", "fd", {
        {"encoder.layer.%d.intermediate.dense.weight", BY_BERT | BY_MPNET | BY_DEBERTA, "", 0, 0},
        {"transformer.layer.%d.ffn.lin1.weight", BY_DISTILBERT, "", 0, 0},
        {"encoder.layer.%d.mlp.gated_layers.weight", BY_JINA, "", '2', 0},
        {"encoder.layers.%d.mlp.fc11.weight", BY_NOMIC, "Fg", 0, 0},
        {"encoder.layers.%d.mlp.fc1.weight", BY_NOMIC, "Fp", 0, 0},
        {"encoder.layers.%d.mlp.fc1.weight", BY_XLMR_ROTARY, "", 0, 0},
        {"layers.%d.mlp.Wi.weight", BY_MODERNBERT, "", '2', 0},
        {"layers.%d.mlp.up_proj.weight", BY_QWEN, "", 0, 0},
        {"encoder.layer.%d.mlp.up_gate_proj.weight", BY_GTE, "", '1', 0}}},
    [TENSOR_FFN_IN_BIAS] = {"/encoder/%d/ffn/in_bias", "f", {
        {"encoder.layer.%d.intermediate.dense.bias", BY_BERT | BY_MPNET | BY_DEBERTA, "", 0, 0},
        {"transformer.layer.%d.ffn.lin1.bias", BY_DISTILBERT, "", 0, 0},
        {"", BY_JINA | BY_GTE, "I", 0, 0},
        {"encoder.layers.%d.mlp.fc11.bias", BY_NOMIC, "Fgi", 0, 0},
        {"encoder.layers.%d.mlp.fc1.bias", BY_NOMIC, "Fpi", 0, 0},
        {"", BY_NOMIC, "FI", 0, 0},
        {"encoder.layers.%d.mlp.fc1.bias", BY_XLMR_ROTARY, "", 0, 0},
        {"layers.%d.mlp.Wi.bias", BY_MODERNBERT, "i", '2', 0}}},
    [TENSOR_FFN_OUT] = {"/encoder/%d/ffn/out_weight", "df", {
        {"encoder.layer.%d.output.dense.weight", BY_BERT | BY_MPNET | BY_DEBERTA, "", 0, 0},
        {"transformer.layer.%d.ffn.lin2.weight", BY_DISTILBERT, "", 0, 0},
        {"encoder.layer.%d.mlp.wo.weight", BY_JINA, "", 0, 0},
        {"encoder.layers.%d.mlp.fc2.weight", BY_NOMIC, "F", 0, 0},
        {"encoder.layers.%d.mlp.fc2.weight", BY_XLMR_ROTARY, "", 0, 0},
        {"layers.%d.mlp.Wo.weight", BY_MODERNBERT, "", 0, 0},
        {"layers.%d.mlp.down_proj.weight", BY_QWEN, "", 0, 0},
        {"encoder.layer.%d.mlp.down_proj.weight", BY_GTE, "", 0, 0}}},
    [TENSOR_FFN_OUT_BIAS] = {"/encoder/%d/ffn/out_bias", "d", {
        {"encoder.layer.%d.output.dense.bias", BY_BERT | BY_MPNET | BY_DEBERTA, "", 0, 0},
        {"transformer.layer.%d.ffn.lin2.bias", BY_DISTILBERT, "", 0, 0},
        {"encoder.layer.%d.mlp.wo.bias", BY_JINA, "", 0, 0},
        {"encoder.layers.%d.mlp.fc2.bias", BY_NOMIC, "Fu", 0, 0},
        {"", BY_NOMIC, "FU", 0, 0},
        {"encoder.layers.%d.mlp.fc2.bias", BY_XLMR_ROTARY, "", 0, 0},
        {"layers.%d.mlp.Wo.bias", BY_MODERNBERT, "u", 0, 0},
        {"encoder.layer.%d.mlp.down_proj.bias", BY_GTE, "", 0, 0}}},
    /* Gemma3's norm after the MLP. */
    [TENSOR_FFN_OUTPUT_NORM] = {"/encoder/%d/ffn/output_norm/weight", "d", {
        {"layers.%d.post_feedforward_layernorm.weight", BY_GEMMA3, "", 0, 0}}},

    /* Sequence-classification heads (transformers' *ForSequenceClassification,
     * the job's [head] of type classifier, plugins/classifier.c): BERT's
     * pooler under the encoder's prefix (bert.pooler), the rest beside it;
     * RobertaClassificationHead (and ELECTRA's of the same names);
     * DeBERTa's ContextPooler; ModernBertPredictionHead, whose dense map has
     * a bias only when classifier_bias and its norm one only when norm_bias.
     * Masked-LM heads (splade, plugins/splade.c): the decoder tied to the
     * word embeddings, which save_pretrained stores once, under the encoder;
     * RobertaLMHead's, XLM-R's and MPNetLMHead's lm_head.bias (the decoder's
     * own weight and bias, tied, are dropped on save). */
    [TENSOR_HEAD_DENSE] = {"/head/dense_weight", "dd", {
        {"pooler.dense.weight", BY_HEAD(HEAD_BERT), "", 0, 0},
        {"pooler.dense.weight", BY_HEAD(HEAD_DEBERTA), "", 0, 1},
        {"classifier.dense.weight", BY_HEAD(HEAD_ROBERTA), "", 0, 1},
        {"pre_classifier.weight", BY_HEAD(HEAD_DISTILBERT), "", 0, 1},
        {"head.dense.weight", BY_HEAD(HEAD_MODERNBERT), "", 0, 1}}},
    [TENSOR_HEAD_DENSE_BIAS] = {"/head/dense_bias", "d", {
        {"pooler.dense.bias", BY_HEAD(HEAD_BERT), "", 0, 0},
        {"pooler.dense.bias", BY_HEAD(HEAD_DEBERTA), "", 0, 1},
        {"classifier.dense.bias", BY_HEAD(HEAD_ROBERTA), "", 0, 1},
        {"pre_classifier.bias", BY_HEAD(HEAD_DISTILBERT), "", 0, 1},
        {"head.dense.bias", BY_HEAD(HEAD_MODERNBERT), "c", 0, 1}}},
    [TENSOR_HEAD_TRANSFORM] = {"/head/transform_weight", "dd", {
        {"cls.predictions.transform.dense.weight", BY_HEAD(HEAD_MLM_BERT), "", 0, 1},
        {"vocab_transform.weight", BY_HEAD(HEAD_MLM_DISTILBERT), "", 0, 1},
        {"lm_head.dense.weight", BY_HEAD(HEAD_MLM_ROBERTA), "", 0, 1},
        {"head.dense.weight", BY_HEAD(HEAD_MLM_MODERNBERT), "", 0, 1}}},
    [TENSOR_HEAD_TRANSFORM_BIAS] = {"/head/transform_bias", "d", {
        {"cls.predictions.transform.dense.bias", BY_HEAD(HEAD_MLM_BERT), "", 0, 1},
        {"vocab_transform.bias", BY_HEAD(HEAD_MLM_DISTILBERT), "", 0, 1},
        {"lm_head.dense.bias", BY_HEAD(HEAD_MLM_ROBERTA), "", 0, 1},
        {"head.dense.bias", BY_HEAD(HEAD_MLM_MODERNBERT), "c", 0, 1}}},
    [TENSOR_HEAD_NORM] = {"/head/norm_weight", "d", {
        {"head.norm.weight", BY_HEAD(HEAD_MODERNBERT) | BY_HEAD(HEAD_MLM_MODERNBERT), "", 0, 1},
        {"cls.predictions.transform.LayerNorm.weight", BY_HEAD(HEAD_MLM_BERT), "", 0, 1},
        {"vocab_layer_norm.weight", BY_HEAD(HEAD_MLM_DISTILBERT), "", 0, 1},
        {"lm_head.layer_norm.weight", BY_HEAD(HEAD_MLM_ROBERTA), "", 0, 1}}},
    [TENSOR_HEAD_NORM_BIAS] = {"/head/norm_bias", "d", {
        {"head.norm.bias", BY_HEAD(HEAD_MODERNBERT) | BY_HEAD(HEAD_MLM_MODERNBERT), "n", 0, 1},
        {"cls.predictions.transform.LayerNorm.bias", BY_HEAD(HEAD_MLM_BERT), "", 0, 1},
        {"vocab_layer_norm.bias", BY_HEAD(HEAD_MLM_DISTILBERT), "", 0, 1},
        {"lm_head.layer_norm.bias", BY_HEAD(HEAD_MLM_ROBERTA), "", 0, 1}}},
    [TENSOR_HEAD_OUT] = {"/head/out_weight", "cd", {
        {"classifier.weight", BY_HEAD(HEAD_BERT) | BY_HEAD(HEAD_DISTILBERT) | BY_HEAD(HEAD_DEBERTA)
         | BY_HEAD(HEAD_MODERNBERT), "", 0, 1},
        {"classifier.out_proj.weight", BY_HEAD(HEAD_ROBERTA), "", 0, 1}}},
    [TENSOR_HEAD_OUT_BIAS] = {"/head/out_bias", "c", {
        {"classifier.bias", BY_HEAD(HEAD_BERT) | BY_HEAD(HEAD_DISTILBERT) | BY_HEAD(HEAD_DEBERTA)
         | BY_HEAD(HEAD_MODERNBERT), "", 0, 1},
        {"classifier.out_proj.bias", BY_HEAD(HEAD_ROBERTA), "", 0, 1}}},
    [TENSOR_HEAD_DECODER] = {"/head/decoder_weight", "vd", {
        {"embeddings.word_embeddings.weight", BY_MASKED_LM, "", 0, 0},
        {"embeddings.tok_embeddings.weight", BY_HEAD(HEAD_MLM_MODERNBERT), "", 0, 0}}},
    [TENSOR_HEAD_DECODER_BIAS] = {"/head/decoder_bias", "v", {
        {"cls.predictions.bias", BY_HEAD(HEAD_MLM_BERT), "", 0, 1},
        {"vocab_projector.bias", BY_HEAD(HEAD_MLM_DISTILBERT), "", 0, 1},
        {"lm_head.bias", BY_HEAD(HEAD_MLM_ROBERTA), "", 0, 1},
        {"decoder.bias", BY_HEAD(HEAD_MLM_MODERNBERT), "b", 0, 1}}},
    /* ColBERT's projection (colbert-ai's HF_ColBERT.linear, no bias) beside
     * the encoder, and PyLate's, which sentence-transformers' Dense module
     * saves as linear.* in its own folder's file (the job's [head] of type
     * multivector, plugins/multivector.c). */
    [TENSOR_PROJECTION] = {"/head/weight", "md", {
        {"linear.weight", NAMES_OF_PROJECTION, "", 0, 1}}},
    [TENSOR_PROJECTION_BIAS] = {"/head/bias", "m", {
        {"linear.bias", NAMES_OF_PROJECTION, "m", 0, 1}}},
};

/* BertModel's tensors, in the order BERT's checkpoints hold them. */
#define BERT_EMBEDDINGS TENSOR_TOKEN_EMBEDDINGS, TENSOR_POSITION_EMBEDDINGS, \
    TENSOR_TOKEN_TYPE_EMBEDDINGS, TENSOR_EMBEDDINGS_NORM, TENSOR_EMBEDDINGS_NORM_BIAS
#define SEPARATE_QKV TENSOR_Q, TENSOR_Q_BIAS, TENSOR_K, TENSOR_K_BIAS, TENSOR_V, TENSOR_V_BIAS
#define ATTENTION_OUT TENSOR_ATTENTION_OUT, TENSOR_ATTENTION_OUT_BIAS
#define ATTENTION_NORM TENSOR_ATTENTION_NORM, TENSOR_ATTENTION_NORM_BIAS
#define FFN_NORM TENSOR_FFN_NORM, TENSOR_FFN_NORM_BIAS
#define PLAIN_FFN TENSOR_FFN_IN, TENSOR_FFN_IN_BIAS, TENSOR_FFN_OUT, TENSOR_FFN_OUT_BIAS
#define GATED_FFN TENSOR_FFN_GATE, TENSOR_FFN_IN, TENSOR_FFN_GATE_BIAS, TENSOR_FFN_IN_BIAS, \
    TENSOR_FFN_OUT, TENSOR_FFN_OUT_BIAS

static const tensor_id bert_tensors[] = {BERT_EMBEDDINGS, SEPARATE_QKV, ATTENTION_OUT,
                                         ATTENTION_NORM, PLAIN_FFN, FFN_NORM, TENSOR_END};
/* MPNet: no token types, one relative position bias table. */
static const tensor_id mpnet_tensors[] = {
    TENSOR_TOKEN_EMBEDDINGS, TENSOR_POSITION_EMBEDDINGS, TENSOR_EMBEDDINGS_NORM,
    TENSOR_EMBEDDINGS_NORM_BIAS, SEPARATE_QKV, ATTENTION_OUT, TENSOR_RELATIVE_ATTENTION_BIAS,
    ATTENTION_NORM, PLAIN_FFN, FFN_NORM, TENSOR_END};
/* JinaBERT v2: ALiBi, no position table; a GEGLU. GTE: the same
 * embeddings, a packed QKV. */
static const tensor_id jina_tensors[] = {
    TENSOR_TOKEN_EMBEDDINGS, TENSOR_TOKEN_TYPE_EMBEDDINGS, TENSOR_EMBEDDINGS_NORM,
    TENSOR_EMBEDDINGS_NORM_BIAS, SEPARATE_QKV, ATTENTION_OUT, ATTENTION_NORM, GATED_FFN,
    FFN_NORM, TENSOR_END};
static const tensor_id gte_tensors[] = {
    TENSOR_TOKEN_EMBEDDINGS, TENSOR_TOKEN_TYPE_EMBEDDINGS, TENSOR_EMBEDDINGS_NORM,
    TENSOR_EMBEDDINGS_NORM_BIAS, TENSOR_QKV, TENSOR_QKV_BIAS, ATTENTION_OUT, ATTENTION_NORM,
    TENSOR_FFN_IN, TENSOR_FFN_GATE, TENSOR_FFN_IN_BIAS, TENSOR_FFN_GATE_BIAS, TENSOR_FFN_OUT,
    TENSOR_FFN_OUT_BIAS, FFN_NORM, TENSOR_END};
/* NomicBERT (SwiGLU, or v2's GELU MLP) and the rotary XLM-R: flash-attention's
 * BERT, post-norm, a fused Wqkv. */
static const tensor_id nomic_tensors[] = {
    TENSOR_TOKEN_EMBEDDINGS, TENSOR_TOKEN_TYPE_EMBEDDINGS, TENSOR_EMBEDDINGS_NORM,
    TENSOR_EMBEDDINGS_NORM_BIAS, TENSOR_QKV, TENSOR_QKV_BIAS, ATTENTION_OUT, ATTENTION_NORM,
    TENSOR_FFN_IN, TENSOR_FFN_IN_BIAS, TENSOR_FFN_GATE, TENSOR_FFN_GATE_BIAS, TENSOR_FFN_OUT,
    TENSOR_FFN_OUT_BIAS, FFN_NORM, TENSOR_END};
static const tensor_id xlmr_rotary_tensors[] = {
    TENSOR_TOKEN_EMBEDDINGS, TENSOR_TOKEN_TYPE_EMBEDDINGS, TENSOR_EMBEDDINGS_NORM,
    TENSOR_EMBEDDINGS_NORM_BIAS, TENSOR_QKV, TENSOR_QKV_BIAS, ATTENTION_OUT, ATTENTION_NORM,
    PLAIN_FFN, FFN_NORM, TENSOR_END};
/* ModernBERT: pre-norm, a final norm, a GEGLU in one Wi. */
static const tensor_id modernbert_tensors[] = {
    TENSOR_TOKEN_EMBEDDINGS, TENSOR_EMBEDDINGS_NORM, TENSOR_EMBEDDINGS_NORM_BIAS,
    TENSOR_FINAL_NORM, TENSOR_FINAL_NORM_BIAS, ATTENTION_NORM, TENSOR_QKV, TENSOR_QKV_BIAS,
    ATTENTION_OUT, FFN_NORM, GATED_FFN, TENSOR_END};
/* Qwen2: RMSNorms without biases, Q/K/V biases, no o_proj bias, a SwiGLU;
 * Qwen3: Q/K/V/O biases only with attention_bias, per-head Q and K norms;
 * Gemma3: Qwen3's attention and a norm before and after each sublayer. */
static const tensor_id qwen2_tensors[] = {
    TENSOR_TOKEN_EMBEDDINGS, TENSOR_FINAL_NORM, TENSOR_ATTENTION_NORM, SEPARATE_QKV,
    TENSOR_ATTENTION_OUT, TENSOR_FFN_NORM, TENSOR_FFN_GATE, TENSOR_FFN_IN, TENSOR_FFN_OUT,
    TENSOR_END};
#define QWEN3_ATTENTION TENSOR_ATTENTION_NORM, SEPARATE_QKV, ATTENTION_OUT, TENSOR_Q_NORM, \
    TENSOR_K_NORM
static const tensor_id qwen3_tensors[] = {
    TENSOR_TOKEN_EMBEDDINGS, TENSOR_FINAL_NORM, QWEN3_ATTENTION, TENSOR_FFN_NORM,
    TENSOR_FFN_GATE, TENSOR_FFN_IN, TENSOR_FFN_OUT, TENSOR_END};
static const tensor_id gemma3_tensors[] = {
    TENSOR_TOKEN_EMBEDDINGS, TENSOR_FINAL_NORM, QWEN3_ATTENTION, TENSOR_ATTENTION_OUTPUT_NORM,
    TENSOR_FFN_NORM, TENSOR_FFN_OUTPUT_NORM, TENSOR_FFN_GATE, TENSOR_FFN_IN, TENSOR_FFN_OUT,
    TENSOR_END};
/* DeBERTa-v2/v3: BERT's layout, *_proj attention maps, disentangled
 * attention's own maps and relative embeddings. */
static const tensor_id deberta_tensors[] = {
    BERT_EMBEDDINGS, SEPARATE_QKV, TENSOR_POSITION_KEY, TENSOR_POSITION_KEY_BIAS,
    TENSOR_POSITION_QUERY, TENSOR_POSITION_QUERY_BIAS, TENSOR_RELATIVE_EMBEDDINGS,
    TENSOR_RELATIVE_NORM, TENSOR_RELATIVE_NORM_BIAS, ATTENTION_OUT, ATTENTION_NORM, PLAIN_FFN,
    FFN_NORM, TENSOR_END};
/* DistilBERT: BERT's embeddings (no token types), its own layer names. */
static const tensor_id distilbert_tensors[] = {BERT_EMBEDDINGS, SEPARATE_QKV, ATTENTION_OUT,
                                               ATTENTION_NORM, PLAIN_FFN, FFN_NORM, TENSOR_END};

static const char *const no_unused[] = {NULL};
static const char *const pooler_unused[] = {"pooler.", NULL};
/* BertForPreTraining / BertForMaskedLM (cls.), RoBERTa's and XLM-R's
 * lm_head, ELECTRA's generator and discriminator heads. */
static const char *const bert_pretraining[] = {"cls.", "lm_head.", "generator_predictions.",
                                               "generator_lm_head.", "discriminator_predictions.",
                                               NULL};
static const char *const lm_head_pretraining[] = {"lm_head.", NULL};
static const char *const distilbert_pretraining[] = {"vocab_transform.", "vocab_layer_norm.",
                                                     "vocab_projector.", NULL};
static const char *const modernbert_unused[] = {"head.", NULL};
static const char *const modernbert_pretraining[] = {"head.", "decoder.", NULL};
/* DebertaV2ForMaskedLM's head, and the replaced-token detection heads of
 * DeBERTa-v3's pretraining checkpoints. */
static const char *const deberta_pretraining[] = {"cls.", "lm_predictions.", "mask_predictions.",
                                                  NULL};
/* NewForMaskedLM's lm_head, and the one-label token classifier beside the
 * encoder of gte-multilingual-base (a NewForTokenClassification: its
 * per-token weights are the model's sparse output), which
 * sentence-transformers' AutoModel leaves out as well; a classifier of more
 * labels is a task head (tensor_map.c's check_gte_classifier). */
static const char *const gte_pretraining[] = {"lm_head.", "classifier.", NULL};

/* The task models' prefixes: BertModel's (BERT, ELECTRA, RoBERTa, XLM-R),
 * the rotary XLM-R's (roberta.), GTE's NewModel (new.), ModernBERT's and
 * Qwen's (model.). */
static const char *const bert_prefixes[] = {"", "bert.", "roberta.", "electra.", NULL};
static const char *const mpnet_prefixes[] = {"", "mpnet.", NULL};
static const char *const distilbert_prefixes[] = {"", "distilbert.", NULL};
static const char *const bert_only_prefixes[] = {"", "bert.", NULL};
static const char *const roberta_prefixes[] = {"", "roberta.", NULL};
static const char *const model_prefixes[] = {"", "model.", NULL};
static const char *const deberta_prefixes[] = {"", "deberta.", NULL};
static const char *const gte_prefixes[] = {"", "new.", NULL};

const architecture_tensors *import_architecture_tensors(architecture kind)
{
    static const architecture_tensors bert = {bert_prefixes, bert_tensors, pooler_unused,
                                              bert_pretraining};
    static const architecture_tensors mpnet = {mpnet_prefixes, mpnet_tensors, pooler_unused,
                                               lm_head_pretraining};
    static const architecture_tensors distilbert = {distilbert_prefixes, distilbert_tensors,
                                                    no_unused, distilbert_pretraining};
    static const architecture_tensors jina = {bert_only_prefixes, jina_tensors, pooler_unused,
                                              bert_pretraining};
    static const architecture_tensors nomic = {bert_only_prefixes, nomic_tensors, pooler_unused,
                                               bert_pretraining};
    static const architecture_tensors xlmr_rotary = {roberta_prefixes, xlmr_rotary_tensors,
                                                     pooler_unused, bert_pretraining};
    static const architecture_tensors modernbert = {model_prefixes, modernbert_tensors,
                                                    modernbert_unused, modernbert_pretraining};
    static const architecture_tensors qwen2 = {model_prefixes, qwen2_tensors, no_unused,
                                               lm_head_pretraining};
    static const architecture_tensors qwen3 = {model_prefixes, qwen3_tensors, no_unused,
                                               lm_head_pretraining};
    static const architecture_tensors gemma3 = {model_prefixes, gemma3_tensors, no_unused,
                                                lm_head_pretraining};
    static const architecture_tensors deberta = {deberta_prefixes, deberta_tensors, no_unused,
                                                 deberta_pretraining};
    static const architecture_tensors gte = {gte_prefixes, gte_tensors, pooler_unused,
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
    case ARCH_STATIC: return NULL; /* static_model.c: no encoder */
    default: return &bert; /* ARCH_BERT, ARCH_ROBERTA */
    }
}

/* Heads: the tensors under the encoder's prefix first. */
#define CLASSIFIER TENSOR_HEAD_DENSE, TENSOR_HEAD_DENSE_BIAS, TENSOR_HEAD_OUT, TENSOR_HEAD_OUT_BIAS
#define MASKED_LM TENSOR_HEAD_DECODER, TENSOR_HEAD_TRANSFORM, TENSOR_HEAD_TRANSFORM_BIAS, \
    TENSOR_HEAD_NORM, TENSOR_HEAD_NORM_BIAS, TENSOR_HEAD_DECODER_BIAS

const tensor_id *import_head_tensors(head_kind kind)
{
    static const tensor_id none[] = {TENSOR_END};
    static const tensor_id classifier[] = {CLASSIFIER, TENSOR_END};
    static const tensor_id modernbert[] = {TENSOR_HEAD_DENSE, TENSOR_HEAD_DENSE_BIAS,
                                           TENSOR_HEAD_NORM, TENSOR_HEAD_NORM_BIAS,
                                           TENSOR_HEAD_OUT, TENSOR_HEAD_OUT_BIAS, TENSOR_END};
    static const tensor_id masked_lm[] = {MASKED_LM, TENSOR_END};
    switch (kind) {
    case HEAD_BERT:
    case HEAD_ROBERTA:
    case HEAD_DISTILBERT:
    case HEAD_DEBERTA: return classifier;
    case HEAD_MODERNBERT: return modernbert;
    case HEAD_MLM_BERT:
    case HEAD_MLM_DISTILBERT:
    case HEAD_MLM_ROBERTA:
    case HEAD_MLM_MODERNBERT: return masked_lm;
    default: return none;
    }
}

const tensor_id import_projection_tensors[] = {TENSOR_PROJECTION, TENSOR_PROJECTION_BIAS,
                                               TENSOR_END};

void import_chosen_tensors(unsigned *chosen)
{
    memset(chosen, 0, TENSOR_COUNT * sizeof *chosen);
    for (int kind = ARCH_BERT; kind <= ARCH_STATIC; kind++) {
        const architecture_tensors *tensors = import_architecture_tensors((architecture)kind);
        for (int i = 0; tensors != NULL && tensors->tensors[i] != TENSOR_END; i++)
            chosen[tensors->tensors[i]] |= NAMES_OF_ARCHITECTURE(kind);
    }
    for (int kind = HEAD_NONE; kind <= HEAD_MLM_MODERNBERT; kind++) {
        const tensor_id *ids = import_head_tensors((head_kind)kind);
        for (int i = 0; ids[i] != TENSOR_END; i++)
            chosen[ids[i]] |= NAMES_OF_HEAD(kind);
    }
    for (int i = 0; import_projection_tensors[i] != TENSOR_END; i++)
        chosen[import_projection_tensors[i]] |= NAMES_OF_PROJECTION;
}

static int lowest_reader(unsigned readers)
{
    int bit = 0;
    while (bit < TENSOR_NAME_READERS - 1 && !(readers & (1u << bit)))
        bit++;
    return bit;
}

int import_check_tensor_names(const canonical_tensor *tensors, int n_tensors,
                              const unsigned *chosen, char *problem, size_t size)
{
    for (int t = 0; t < n_tensors; t++) {
        const canonical_tensor *tensor = &tensors[t];
        if (chosen[t] == 0) {
            snprintf(problem, size, "%s: no architecture or head has this tensor",
                     tensor->target);
            return -1;
        }
        unsigned named = 0;
        for (const tensor_name *name = tensor->names; name->pattern != NULL; name++) {
            unsigned unreachable = name->readers & ~chosen[t];
            if (name->readers == 0 || unreachable != 0) {
                snprintf(problem, size, "%s: name '%s' is listed for reader %d, which does not "
                         "have this tensor", tensor->target, name->pattern,
                         name->readers == 0 ? -1 : lowest_reader(unreachable));
                return -1;
            }
            named |= name->readers;
            if (name->pattern[0] == '\0')
                continue;
            /* The same name read by the same reader from the same place,
             * whole or the same half, as another tensor or twice as this one. */
            for (int u = t; u < n_tensors; u++)
                for (const tensor_name *other = u == t ? name + 1 : tensors[u].names;
                     other->pattern != NULL; other++) {
                    unsigned both = name->readers & other->readers;
                    if (both != 0 && strcmp(name->pattern, other->pattern) == 0
                        && name->half == other->half && name->beside == other->beside) {
                        snprintf(problem, size, "name '%s' of reader %d maps to %s and %s",
                                 name->pattern, lowest_reader(both), tensor->target,
                                 tensors[u].target);
                        return -1;
                    }
                }
        }
        if ((chosen[t] & ~named) != 0) {
            snprintf(problem, size, "%s: reader %d has this tensor but no name for it",
                     tensor->target, lowest_reader(chosen[t] & ~named));
            return -1;
        }
    }
    return 0;
}
