/* BGE-M3 as FlagEmbedding's BGEM3FlagModel computes it from the encoder's
 * last_hidden_state h (docs/models.md, "BGE-M3"):
 *   colbert  normalize(colbert_linear(h[:, 1:]))   every token after the first
 *   dense    normalize(h[:, 0])                    the CLS row
 *   sparse   relu(sparse_linear(h)), the largest per token id, the ids of
 *            cls, eos, pad and unk dropped */
#include "config.h"

#include "bge_m3.h"

#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "tensor_map.h"

static const char *const head_files[2] = {"colbert_linear.pt", "sparse_linear.pt"};

int import_read_bge_m3(importer *self)
{
    tfenc_context *ctx = self->ctx;
    bge_m3_settings *m = &self->bge_m3;
    char *paths[2] = {import_join_path(self->transformer_dir, head_files[0]),
                      import_join_path(self->transformer_dir, head_files[1])};
    int status = TFENC_OK;
    if (paths[0] == NULL || paths[1] == NULL) {
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    const int present[2] = {import_file_exists(paths[0]), import_file_exists(paths[1])};
    if (!present[0] && !present[1])
        goto done;
    for (int i = 0; i < 2 && status == TFENC_OK; i++)
        if (!present[i])
            status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: not found beside %s: a BGE-M3 "
                                 "folder holds both colbert_linear.pt and sparse_linear.pt",
                                 paths[i], paths[1 - i]);
    if (status == TFENC_OK && self->config.architecture != ARCH_ROBERTA)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: BGE-M3's heads beside a %s encoder: "
                             "tfenc-import maps them over xlm-roberta (BAAI/bge-m3)", paths[0],
                             self->config.model_type);
    if (status == TFENC_OK && (self->config.head.kind != HEAD_NONE ||
                               self->config.multivector.present || self->pooling.dense.count > 0))
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: BGE-M3's heads beside another head of "
                             "the folder's (a task head, ColBERT or Dense modules)", paths[0]);
    if (status == TFENC_OK)
        status = tfenc_checkpoint_open(ctx, paths[0], &m->colbert);
    if (status == TFENC_OK)
        status = tfenc_checkpoint_open(ctx, paths[1], &m->sparse);
    if (status == TFENC_OK)
        m->present = 1;
done:
    free(paths[0]);
    free(paths[1]);
    return status;
}

int import_bge_m3_drop_ids(importer *self)
{
    bge_m3_settings *m = &self->bge_m3;
    if (!m->present)
        return TFENC_OK;
    if (self->tokenizer.json == NULL)
        return tfenc_error(self->ctx, TFENC_ERR_CONFIG, "%s: no tokenizer.json: BGE-M3's sparse "
                           "head drops the ids of the tokenizer's cls, eos, pad and unk tokens",
                           self->transformer_dir);
    static const tfenc_special_token dropped[4] = {TFENC_SPECIAL_CLS, TFENC_SPECIAL_EOS,
                                                   TFENC_SPECIAL_PAD, TFENC_SPECIAL_UNK};
    size_t used = 0;
    for (int i = 0; i < 4; i++) {
        int32_t id = tfenc_tokenizer_special_id(self->tokenizer.json, dropped[i]);
        if (id >= 0)
            used += (size_t)snprintf(m->drop_ids + used, sizeof m->drop_ids - used, "%s%d",
                                     used > 0 ? " " : "", (int)id);
    }
    return TFENC_OK;
}

int import_plan_bge_m3(importer *self, int capacity)
{
    const bge_m3_settings *m = &self->bge_m3;
    if (!m->present)
        return TFENC_OK;
    const int64_t d = self->config.d_model;
    const struct {
        const tfenc_checkpoint *file;
        const char *source, *target;
        int rank;
        int64_t rows, columns;
    } parts[IMPORT_BGE_M3_TENSORS] = {{m->colbert, "weight", "/colbert/weight", 2, d, d},
                                      {m->colbert, "bias", "/colbert/bias", 1, d, 0},
                                      {m->sparse, "weight", "/sparse/weight", 2, 1, d},
                                      {m->sparse, "bias", "/sparse/bias", 1, 1, 0}};
    int status = TFENC_OK;
    for (int i = 0; i < IMPORT_BGE_M3_TENSORS && status == TFENC_OK; i++)
        status = import_plan_add(self, capacity, parts[i].file, parts[i].source, parts[i].target,
                                 parts[i].rank, parts[i].rows, parts[i].columns, NULL);
    return status;
}

void import_write_bge_m3_heads(const importer *self, FILE *out)
{
    const int d = self->config.d_model;
    fprintf(out, "; BGE-M3's three outputs over the encoder, as FlagEmbedding's\n"
                 "; BGEM3FlagModel computes them. First head (the root's datasets):\n"
                 "; colbert_linear on every token after the first, unit length: vectors\n"
                 "; [T, %d] and offsets [N+1] ([job] skip_first_token).\n"
                 "[colbert]\ntype = multivector\nnormalize = true\nwidth = %d\nhead = colbert\n\n"
                 "; The CLS row at unit length: /outputs/dense/embeddings [N, %d].\n"
                 "[dense]\ntype = pooling\nmode = cls\nnormalize = true\nhead = dense\n\n"
                 "; relu(sparse_linear) per token, the largest per token id, without the\n"
                 "; tokenizer's cls, eos, pad and unk: CSR rows in /outputs/sparse.\n"
                 "[sparse]\ntype = lexical_weights\ndrop_ids = %s\nhead = sparse\n",
            d, d, d, self->bge_m3.drop_ids);
}
