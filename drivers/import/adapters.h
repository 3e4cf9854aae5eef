/* LoRA task adapters (jina-embeddings-v3): the one --task names is merged
 * into the weights it parametrizes, and its instruction becomes the job's
 * prompt. */
#ifndef TFENC_IMPORT_ADAPTERS_H
#define TFENC_IMPORT_ADAPTERS_H

#include "importer.h"

/* config.json's lora_adaptations, lora_rank, lora_alpha,
 * load_trained_adapters and task_instructions, with self->adapters.task
 * (--task): a model with adapters needs one of its tasks named, a model
 * without refuses --task. The task's instruction joins self->pooling's
 * prompts as the job's prompt. Call after the config and the prompts are
 * read. */
int import_read_adapters(importer *self);

/* torch.nn.utils.parametrize stores a parametrized layer's weight as
 * NAME.parametrizations.weight.original: it loads as NAME.weight, the
 * name the tensor map knows. Only when trained adapters are to be merged. */
int import_rename_adapted_weights(importer *self);

/* Finds the chosen task's lora_A and lora_B of every planned matrix (every
 * linear and embedding layer is parametrized) and checks their shapes
 * against lora_rank and the task count, refusing a missing one or one of
 * another rank in one line naming the file and the tensor. */
int import_plan_adapters(importer *self, const char *weights_path);

/* Adds scale * B A (a linear layer's [out, in] weight) or scale * A B (an
 * embedding's [rows, width] table) of the chosen task to `weights`, the
 * plan item's tensor as read. */
int import_merge_adapter(importer *self, const tensor_plan *item, float *weights);

#endif
