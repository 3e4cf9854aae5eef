/* BGE-M3 folders (BAAI/bge-m3): an XLM-R encoder with FlagEmbedding's two
 * heads beside it, colbert_linear.pt and sparse_linear.pt (torch.save'd
 * state dicts of nn.Linear), written as a job of three heads over one
 * trunk: colbert (multivector, the root's datasets), dense and sparse. */
#ifndef TFENC_IMPORT_BGE_M3_H
#define TFENC_IMPORT_BGE_M3_H

#include "importer.h"

/* When the folder holds colbert_linear.pt or sparse_linear.pt: opens both
 * (one without the other is refused, naming the missing file), for an
 * xlm-roberta encoder only. Else nothing. */
int import_read_bge_m3(importer *self);

/* The ids the sparse head drops (the tokenizer's cls, eos, pad and unk),
 * from the tokenizer.json import_read_tokenizer read. */
int import_bge_m3_drop_ids(importer *self);

/* The plan's entries of the two heads' weights: colbert_linear's weight
 * [d, d] and bias [d] as /colbert, sparse_linear's weight [1, d] and bias
 * [1] as /sparse, checked like the encoder's (check_tensor names the .pt
 * file and the tensor). At most IMPORT_BGE_M3_TENSORS entries. */
#define IMPORT_BGE_M3_TENSORS 4
int import_plan_bge_m3(importer *self, int capacity);

/* The job's heads, after the trunk's layers. */
void import_write_bge_m3_heads(const importer *self, FILE *out);

#endif
