/* The canonical tensors of a weights file (docs/weights.md) and, for each,
 * the Hugging Face names it is saved under by every architecture and head
 * that has it: one table of names per tensor, as llama.cpp's gguf-py
 * TensorNameMap keeps them, and per architecture the list of tensors it
 * has. tensor_map.c plans a checkpoint's tensors from them. */
#ifndef TFENC_IMPORT_TENSOR_NAMES_H
#define TFENC_IMPORT_TENSOR_NAMES_H

#include <stddef.h>

#include "importer.h"

/* The tensors tfenc's layers read, whatever a checkpoint calls them. */
typedef enum tensor_id {
    /* once per model */
    TENSOR_TOKEN_EMBEDDINGS,
    TENSOR_POSITION_EMBEDDINGS,
    TENSOR_TOKEN_TYPE_EMBEDDINGS,
    TENSOR_EMBEDDINGS_NORM,
    TENSOR_EMBEDDINGS_NORM_BIAS,
    TENSOR_FINAL_NORM,
    TENSOR_FINAL_NORM_BIAS,
    /* per layer: attention */
    TENSOR_ATTENTION_NORM,
    TENSOR_ATTENTION_NORM_BIAS,
    TENSOR_Q,
    TENSOR_Q_BIAS,
    TENSOR_K,
    TENSOR_K_BIAS,
    TENSOR_V,
    TENSOR_V_BIAS,
    TENSOR_QKV,
    TENSOR_QKV_BIAS,
    TENSOR_POSITION_KEY,
    TENSOR_POSITION_KEY_BIAS,
    TENSOR_POSITION_QUERY,
    TENSOR_POSITION_QUERY_BIAS,
    TENSOR_RELATIVE_EMBEDDINGS,
    TENSOR_RELATIVE_NORM,
    TENSOR_RELATIVE_NORM_BIAS,
    TENSOR_RELATIVE_ATTENTION_BIAS,
    TENSOR_ATTENTION_OUT,
    TENSOR_ATTENTION_OUT_BIAS,
    TENSOR_Q_NORM,
    TENSOR_K_NORM,
    TENSOR_ATTENTION_OUTPUT_NORM,
    /* per layer: feed-forward */
    TENSOR_FFN_NORM,
    TENSOR_FFN_NORM_BIAS,
    TENSOR_FFN_GATE,
    TENSOR_FFN_GATE_BIAS,
    TENSOR_FFN_IN,
    TENSOR_FFN_IN_BIAS,
    TENSOR_FFN_OUT,
    TENSOR_FFN_OUT_BIAS,
    TENSOR_FFN_OUTPUT_NORM,
    /* heads */
    TENSOR_HEAD_DENSE,
    TENSOR_HEAD_DENSE_BIAS,
    TENSOR_HEAD_TRANSFORM,
    TENSOR_HEAD_TRANSFORM_BIAS,
    TENSOR_HEAD_NORM,
    TENSOR_HEAD_NORM_BIAS,
    TENSOR_HEAD_OUT,
    TENSOR_HEAD_OUT_BIAS,
    TENSOR_HEAD_DECODER,
    TENSOR_HEAD_DECODER_BIAS,
    TENSOR_PROJECTION,
    TENSOR_PROJECTION_BIAS,
    TENSOR_COUNT,
    TENSOR_END = -1 /* ends a list of tensors */
} tensor_id;

/* Who reads a name: an architecture's encoder, a head kind, or the
 * multi-vector projection (ColBERT's and PyLate's), one bit each. */
#define NAMES_OF_ARCHITECTURE(kind) (1u << (kind))
#define NAMES_OF_HEAD(kind) (1u << (16 + (kind)))
#define NAMES_OF_PROJECTION (1u << 31)
#define TENSOR_NAME_READERS 32

/* One Hugging Face name of a canonical tensor, after the encoder's prefix. */
typedef struct tensor_name {
    const char *pattern; /* printf pattern, %d the layer (a per-layer tensor named without
                          * one is a single tensor that every layer receives a copy of);
                          * "" writes zeros (a bias the model lacks where the tfenc layer has
                          * one for all its linear maps) */
    unsigned readers;    /* NAMES_OF_* bits of the architectures and heads named so */
    const char *when;    /* conditions that must all hold (tensor_map.c's applies()) */
    char half;           /* 0: the whole tensor; '1' / '2': the first / second half of its
                          * rows (a fused gate-and-up projection) */
    char beside;         /* found at the top of the file, not under the encoder's prefix
                          * (a task head) */
} tensor_name;

#define TENSOR_MAX_NAMES 12

/* A canonical tensor: its dataset, its shape, and its names. */
typedef struct canonical_tensor {
    const char *target; /* dataset in the weights file; %d the layer for a per-layer one */
    const char *shape;  /* one letter per dimension (tensor_map.c's dimension()); a half
                         * name's tensor has twice the rows */
    tensor_name names[TENSOR_MAX_NAMES]; /* ended by a NULL pattern */
} canonical_tensor;

extern const canonical_tensor import_canonical_tensors[TENSOR_COUNT];

/* The tensors of one architecture's encoder, and how its checkpoints wrap it. */
typedef struct architecture_tensors {
    const char *const *prefixes; /* tried in order: task models wrap the bare one */
    const tensor_id *tensors;    /* in the order they are written; the first is one per model
                                  * that locates the prefix; ended by TENSOR_END */
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
} architecture_tensors;

const architecture_tensors *import_architecture_tensors(architecture kind);

/* The tensors of a head kind (none for HEAD_NONE), and of the projection. */
const tensor_id *import_head_tensors(head_kind kind);
extern const tensor_id import_projection_tensors[];

/* Into chosen[TENSOR_COUNT]: the readers (NAMES_OF_* bits) whose lists hold
 * each tensor. */
void import_chosen_tensors(unsigned *chosen);

/* Checks a table of names against the readers that chose each tensor: no
 * name (with its half and place) of one reader maps to two canonical
 * tensors, or twice to one; every tensor is chosen by some reader; every
 * name is read by a reader that chose its tensor; every reader that chose
 * a tensor has a name for it. Returns 0, or -1 with the first problem in
 * `problem`. */
int import_check_tensor_names(const canonical_tensor *tensors, int n_tensors,
                              const unsigned *chosen, char *problem, size_t size);

#endif
