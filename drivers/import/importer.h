/* What tfenc-import learns about one Hugging Face model folder, filled in
 * by the readers (hf_config, sentence_transformers, tokenizer_files,
 * tensor_map) and read by the writers (weights_writer, job_writer). */
#ifndef TFENC_IMPORT_IMPORTER_H
#define TFENC_IMPORT_IMPORTER_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "base/context.h"
#include "model/checkpoint.h"
#include "tokenizer/tokenizer.h"

#define IMPORTER_VERSION "tfenc-import " PACKAGE_VERSION

/* How the weights file stores the tensors. */
typedef enum storage_dtype { STORAGE_FLOAT32, STORAGE_FLOAT16, STORAGE_BFLOAT16 } storage_dtype;
extern const char *const import_storage_names[3]; /* "float32", "float16", "bfloat16" */

/* The architectures tfenc-import maps (docs/models.md). */
typedef enum architecture {
    ARCH_BERT,       /* bert, and electra with embedding_size = hidden_size */
    ARCH_ROBERTA,    /* roberta, xlm-roberta: BERT with positions from pad_token_id + 1 */
    ARCH_XLMR_ROTARY, /* xlm-roberta with position_embedding_type rotary
                       * (jinaai/xlm-roberta-flash-implementation, jina-embeddings-v3):
                       * post-norm, RoPE, fused QKV, GELU, LoRA task adapters */
    ARCH_MPNET,      /* BERT-like, relative position buckets shared by all layers */
    ARCH_DISTILBERT, /* BERT without token types, its own tensor names */
    ARCH_JINA_BERT,  /* bert with position_embedding_type alibi: ALiBi, GEGLU */
    ARCH_NOMIC_BERT, /* post-norm, RoPE, fused QKV, SwiGLU */
    ARCH_MODERNBERT, /* pre-norm, RoPE, alternating global and local attention, GEGLU */
    ARCH_QWEN2,      /* decoder: RMSNorm, RoPE, grouped-query causal attention, SwiGLU */
    ARCH_DEBERTA_V2, /* BERT's layout, disentangled relative attention (DeBERTa-v2/v3) */
    ARCH_QWEN3,      /* Qwen2 with per-head RMSNorm on Q and K, its own head_dim, no biases */
    ARCH_GEMMA3,     /* Gemma3 text layers run bidirectionally (EmbeddingGemma): four
                      * (1 + weight) RMSNorms per layer, sliding and global layers */
    ARCH_GTE,        /* model_type new (GTE v1.5, mGTE): post-norm, RoPE with NTK scaling,
                      * packed QKV, GLU with up and gate in one map */
    ARCH_STATIC      /* model2vec: no encoder, a table's rows averaged (static_model.c) */
} architecture;

/* A sequence-classification head (config.json's architectures names a
 * *ForSequenceClassification), written as the job's [head] section of type
 * classifier (plugins/classifier.c). */
typedef enum head_kind {
    HEAD_NONE,
    HEAD_BERT,      /* BertPooler (dense + tanh on [CLS]) and classifier */
    HEAD_ROBERTA,   /* classifier.dense + activation on <s>, classifier.out_proj (and ELECTRA) */
    HEAD_DISTILBERT, /* pre_classifier + ReLU, classifier */
    HEAD_DEBERTA,    /* ContextPooler (pooler.dense + pooler_hidden_act on [CLS]), classifier */
    HEAD_MODERNBERT, /* cls or masked-mean pooling, head.dense + classifier_activation +
                      * head.norm (ModernBertPredictionHead), classifier */
    /* Masked-LM heads, mapped only when sparse output is asked for (a
     * SparseEncoder folder, or --sparse): the job's [head] of type splade
     * (plugins/splade.c). Otherwise they are pretraining heads, dropped. */
    HEAD_MLM_BERT,      /* cls.predictions: transform, LayerNorm, decoder tied to the
                         * word embeddings, bias */
    HEAD_MLM_DISTILBERT, /* vocab_transform, vocab_layer_norm, vocab_projector */
    HEAD_MLM_ROBERTA,   /* lm_head: dense, exact GELU whatever hidden_act says, layer_norm,
                         * decoder tied to the word embeddings, bias (RoBERTa, XLM-R,
                         * MPNet) */
    HEAD_MLM_MODERNBERT /* head (ModernBertPredictionHead: dense, classifier_activation,
                         * norm), decoder tied to tok_embeddings, its bias when
                         * decoder_bias */
} head_kind;

typedef struct head_settings {
    head_kind kind;
    const char *activation;   /* the classifier's: tanh, relu, gelu, gelu_tanh; splade's
                               * transform's */
    const char *pooling;      /* the classifier's: cls (NULL) or mean (ModernBERT's
                               * classifier_pooling) */
    int dense_bias;           /* ModernBERT's head.dense has a bias (classifier_bias); the
                               * other heads' dense maps always have one */
    int decoder_bias;         /* ModernBERT's masked-LM decoder has a bias (decoder_bias) */
    int norm;                 /* the classifier's LayerNorm after the activation (ModernBERT's
                               * head.norm: the encoder's norm_eps, its bias when norm_bias) */
    const char *sparse_pooling; /* splade: max or sum (SpladePooling's pooling_strategy) */
    int n_labels;             /* id2label's size */
    const char *problem_type; /* config.json's, or "auto" when unset */
    const char *scores;       /* "auto", or what a sentence-transformers CrossEncoder applies */
    char *labels;             /* id2label as compact JSON, ';' and '#' escaped (owned) */
} head_settings;

/* A late-interaction (ColBERT) model: the per-token projection beside the
 * encoder, written as the job's [head] section of type multivector
 * (plugins/multivector.c), and the tokens around it (drivers/import/colbert.c). */
typedef struct multivector_settings {
    int present;
    int width;             /* rows of the projection (artifact.metadata's dim) */
    int projection_bias;   /* PyLate's Dense has a bias (linear.bias) */
    char *query_marker;    /* the token after [CLS] of a query ([unused0]) */
    char *document_marker; /* ... of a document ([unused1]) */
    const char *query_marker_key, *document_marker_key; /* the keys that name them */
    char *markers_file;    /* the file that names them, or NULL: the defaults (owned) */
    int query_length;      /* query_maxlen */
    int document_length;   /* doc_maxlen, or 0 */
    int skip_punctuation;  /* mask_punctuation */
    int attend_to_mask_tokens;
    const char *source;    /* the file they came from, for the job's comment */
} multivector_settings;

/* What config.json says about the architecture, in tfenc's terms. */
typedef struct model_config {
    char *model_type;            /* as config.json names it */
    architecture architecture;
    int d_model;                 /* hidden_size */
    int n_heads;                 /* num_attention_heads */
    int n_kv_heads;              /* key/value heads (grouped-query attention), else n_heads */
    int head_dim;                /* features per head: d_model / n_heads unless config.json
                                  * says otherwise (Qwen3, Gemma3) */
    int qk_norm;                 /* Q and K RMS-normalised per head (Qwen3, Gemma3) */
    double norm_weight_offset;   /* the RMSNorms scale by offset + weight (Gemma: 1) */
    int output_norms;            /* a norm on each sublayer's output before its residual
                                  * (Gemma's post_attention and post_feedforward norms) */
    int embedding_scale;         /* token embeddings times sqrt(d_model) (Gemma) */
    double attention_scale;      /* multiplies Q K^T; 0: 1/sqrt(head_dim) */
    unsigned char *local_layers; /* [n_layers]: 1 where a layer is a sliding-window one
                                  * (Gemma3's and ModernBERT's layer types), or NULL (owned) */
    int local_reach;             /* local layers see |i - j| <= local_reach */
    int n_layers;                /* num_hidden_layers */
    int ffn_width;               /* intermediate_size */
    int vocab_size;
    int max_position_embeddings; /* rows of the position table, or the longest input */
    int type_vocab_size;         /* rows of the token-type table (0: none) */
    int pad_token_id;
    int position_offset;         /* RoBERTa numbers positions from pad_token_id + 1 */
    int learned_positions;       /* the embedding adds a learned position vector */
    double layer_norm_eps;
    int rms_norm;                /* rmsnorm rather than layernorm */
    int norm_bias;               /* the layer norms have a bias */
    int pre_norm;                /* x + f(norm(x)) rather than norm(x + f(x)) */
    int final_norm;              /* a norm after the last block (pre-norm models) */
    int embeddings_norm;         /* a norm right after the embedding */
    const char *activation;      /* tfenc's ffn activation: gelu, gelu_tanh, relu, swiglu, geglu */
    int qkv_bias;                /* the Q, K, V projections have biases */
    int out_bias;                /* the attention output projection has a bias */
    int ffn_in_bias;             /* the first FFN linear(s) have biases */
    int ffn_out_bias;            /* the second FFN linear has a bias */
    const char *position;        /* mha position: none, rope, alibi, relative_buckets */
    double rope_theta;           /* rope: base (global layers of ModernBERT) */
    int rope_dims;               /* rope: rotated dims of each head */
    int rope_interleaved;        /* rope: GPT-J pairs 2i, 2i + 1 (flash-attention's
                                  * rotary_emb_interleaved), the mha's rope_style =
                                  * interleaved; else GPT-NeoX halves */
    double local_rope_theta;     /* local layers' base (ModernBERT, Gemma3) */
    const char *rope_scaling;    /* mha rope_scaling: NULL (none) or ntk (GTE) */
    double rope_factor;          /* rope_scaling: its factor */
    double rope_mixed_b;         /* rope_scaling ntk: the mixed form's b, 0 for the fixed form */
    int num_buckets;             /* relative_buckets: rows of the bias table */
    int position_buckets;        /* disentangled: log buckets (0: exact distances) */
    int max_relative_positions;  /* disentangled: where the last bucket applies */
    int relative_span;           /* disentangled: relative embeddings per side */
    const char *relative_terms;  /* disentangled: both, c2p or p2c */
    int share_att_key;           /* disentangled: relative embeddings through the K, Q maps */
    int relative_norm;           /* disentangled: LayerNorm of the relative embeddings */
    int causal;                  /* decoder: token i sees tokens j <= i */
    int moe_experts;             /* NomicBERT's num_experts; 0: no mixture of experts */
    int moe_top_k;               /* experts per token (moe_top_k) */
    int moe_every;               /* layer i is a moe layer when i % moe_every == 1 */
    int moe_width;               /* each expert's hidden width: n_inner / ffn_div */
    double moe_normalize;        /* moe_normalize_expert_weights' q-norm; 0: none */
    char *config_text;           /* config.json as read, stored in the weights file */
    head_settings head;
    multivector_settings multivector;
} model_config;

/* Whether layer `layer`'s feed-forward block is a mixture of experts:
 * contrastors' NomicBertEncoder makes layer i one when i % moe_every_n_layers
 * == 1 (the second, fourth, ... layer at 2). */
static inline int import_is_moe_layer(const model_config *c, int layer)
{
    return c->moe_experts > 0 && c->moe_every > 0 && layer % c->moe_every == 1;
}

/* The tokenizer stored under /tokenizer: the model's tokenizer.json when
 * it has one (it carries the model's own special tokens and template),
 * else its WordPiece vocab.txt with these settings. */
typedef struct tokenizer_settings {
    int present;                 /* tokenizer.json or vocab.txt exists */
    tfenc_tokenizer *json;       /* from tokenizer.json, or NULL */
    int do_lower_case;
    int strip_accents;           /* 1, 0, or -1 = follow do_lower_case */
    int tokenize_chinese_chars;
    char *special[4];            /* cls, sep, unk, pad */
    char *vocab_text;            /* vocab.txt, its newlines replaced by NULs */
    const char **vocab;          /* [vocab_count] pointers into vocab_text */
    int vocab_count;
} tokenizer_settings;

/* Keys of the four special tokens, in the order of tokenizer_settings.special. */
extern const char *const import_special_names[4];

/* sentence-transformers Dense modules after the Pooling: tfenc runs a pair
 * of them with the Identity activation, d -> width -> d (EmbeddingGemma's
 * 768 -> 3072 -> 768), as one ffn layer with activation = identity. */
typedef struct dense_settings {
    int count;                     /* 0 or 2 */
    char *dir[2];                  /* each module's folder (owned) */
    int width;                     /* out_features of the first, in_features of the second */
    int bias[2];                   /* each has linear.bias */
    tfenc_checkpoint *weights[2];  /* each folder's weights (owned) */
} dense_settings;

/* The sentence-transformers head (modules.json), if the model has one, and
 * its prompts (config_sentence_transformers.json). */
typedef struct pooling_settings {
    int present;
    dense_settings dense;
    const char *mode;           /* tfenc's pooling mode: cls, mean, max, mean_sqrt_len,
                                 * weightedmean, lasttoken */
    int normalize;
    json_t *prompts;            /* {"name": "text", ...} or NULL (owned) */
    const char *default_prompt; /* default_prompt_name, or NULL (in prompts) */
} pooling_settings;

/* A static-embedding (model2vec) folder, read by static_model.c: its table
 * with the token mapping already applied (row i is token i's), its weights,
 * and how it tokenizes. */
typedef struct static_settings {
    int present;
    int normalize;    /* config.json's normalize */
    int drop_unknown; /* the tokenizer model has an unk_token, which model2vec drops */
    long max_chars;   /* model2vec cuts a text at max_length x median token length */
    float *table;     /* [vocab_size, d_model] (owned) */
    float *weights;   /* [vocab_size], or NULL (owned) */
} static_settings;

/* One source tensor (or a block of its rows) and where it goes in the
 * weights file. */
typedef struct tensor_plan {
    char source[160]; /* name in the checkpoint as transformers loads it, prefix included */
    char target[96];  /* HDF5 dataset path */
    int rank;
    int64_t dims[2];  /* the shape written */
    int64_t source_rows; /* rows of the source tensor (dims[0] unless a block is taken) */
    int64_t first_row;   /* the block starts at this row of the source */
    int transposed;      /* the block is written transposed: dims are its columns, rows
                          * (megablocks' w2 stores each expert's [f, d], tfenc [d, f]) */
    int zeros;           /* no source: a dataset of zeros */
    const tfenc_checkpoint_tensor *tensor; /* NULL for zeros */
    const tfenc_checkpoint *file; /* holding the tensor: the model's, or a Dense module's */
    /* The chosen task adapter of a LoRA-parametrized weight (adapters.c),
     * merged as it is written; NULL when the weight has none. */
    const tfenc_checkpoint_tensor *lora_a, *lora_b;
    int lora_embedding; /* an embedding's: A [tasks, rows, rank], B [tasks, rank, columns] */
    const float *values; /* or the values themselves, computed by the importer (NULL) */
} tensor_plan;

/* Task adapters (config.json's lora_adaptations): one is chosen by --task
 * and merged into the weights it parametrizes (drivers/import/adapters.c). */
typedef struct adapter_settings {
    const char *task;  /* --task NAME, or NULL */
    int count;         /* tasks in lora_adaptations; 0: the model has no adapters */
    int index;         /* the chosen task's row of the stacked lora_A and lora_B */
    int rank;          /* lora_rank */
    double scale;      /* lora_alpha / lora_rank, as LoRAParametrization computes it */
    int trained;       /* load_trained_adapters: the checkpoint holds them */
} adapter_settings;

/* A BGE-M3 folder's two heads beside the encoder (drivers/import/bge_m3.c). */
typedef struct bge_m3_settings {
    int present;
    tfenc_checkpoint *colbert; /* colbert_linear.pt: weight [d, d], bias [d] (owned) */
    tfenc_checkpoint *sparse;  /* sparse_linear.pt: weight [1, d], bias [1] (owned) */
    char drop_ids[64];         /* the sparse head's dropped ids: cls, eos, pad, unk */
} bge_m3_settings;

typedef struct importer {
    tfenc_context *ctx;
    char *model_dir;       /* the directory as given */
    char *transformer_dir; /* where config.json lives (modules.json may name a subfolder) */
    char *dense_dir;       /* a PyLate model's Dense module (1_Dense), or NULL */
    tfenc_checkpoint *dense_weights; /* its weights, once opened */
    model_config config;
    tokenizer_settings tokenizer;
    pooling_settings pooling;
    adapter_settings adapters;
    static_settings static_model;
    bge_m3_settings bge_m3;
    int max_length;        /* longest input in tokens, special tokens included */
    int sparse;            /* sparse output asked for: --sparse, or SpladePooling */
    storage_dtype dtype;
    tfenc_checkpoint *weights; /* model.safetensors, its shards or pytorch_model.bin */
    tensor_plan *plan;
    int plan_count;
    long long n_parameters;
    const char *warning;   /* printed by main() when the import still succeeds */
    FILE *verbose;         /* --verbose: where the readers say what they found, or NULL */
} importer;

#endif
