/* What tfenc-import learns about one Hugging Face model folder, filled in
 * by the readers (hf_config, sentence_transformers, tokenizer_files,
 * tensor_map) and read by the writers (weights_writer, job_writer). */
#ifndef TFENC_IMPORT_IMPORTER_H
#define TFENC_IMPORT_IMPORTER_H

#include <stdint.h>

#include "context.h"
#include "safetensors.h"

#define IMPORTER_VERSION "tfenc-import " PACKAGE_VERSION

/* How the weights file stores the tensors. */
typedef enum storage_dtype { STORAGE_FLOAT32, STORAGE_FLOAT16, STORAGE_BFLOAT16 } storage_dtype;
extern const char *const import_storage_names[3]; /* "float32", "float16", "bfloat16" */

/* What config.json says about the architecture. */
typedef struct model_config {
    char *model_type;            /* bert, roberta or xlm-roberta */
    int d_model;                 /* hidden_size */
    int n_heads;                 /* num_attention_heads */
    int n_layers;                /* num_hidden_layers */
    int ffn_width;               /* intermediate_size */
    int vocab_size;
    int max_position_embeddings; /* rows of the position table */
    int type_vocab_size;         /* rows of the token-type table */
    int pad_token_id;
    int position_offset;         /* RoBERTa numbers positions from pad_token_id + 1 */
    double layer_norm_eps;
    const char *activation;      /* tfenc's name: gelu (erf), gelu_tanh, relu */
    char *config_text;           /* config.json as read, stored in the weights file */
} model_config;

/* The WordPiece tokenizer settings stored under /tokenizer. */
typedef struct tokenizer_settings {
    int present;                 /* vocab.txt exists */
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

/* The sentence-transformers head (modules.json), if the model has one. */
typedef struct pooling_settings {
    int present;
    const char *mode; /* mean, cls or max */
    int normalize;
} pooling_settings;

/* One source tensor and where it goes in the weights file. */
typedef struct tensor_plan {
    char source[160]; /* name in model.safetensors, prefix included */
    char target[96];  /* HDF5 dataset path */
    int rank;
    int64_t dims[2];
    const tfenc_safetensors_tensor *tensor;
} tensor_plan;

typedef struct importer {
    tfenc_context *ctx;
    char *model_dir;       /* the directory as given */
    char *transformer_dir; /* where config.json lives (modules.json may name a subfolder) */
    model_config config;
    tokenizer_settings tokenizer;
    pooling_settings pooling;
    int max_length;        /* longest input in tokens, special tokens included */
    storage_dtype dtype;
    tfenc_safetensors *weights;
    tensor_plan *plan;
    int plan_count;
    long long n_parameters;
    const char *warning;   /* printed by main() when the import still succeeds */
} importer;

#endif
