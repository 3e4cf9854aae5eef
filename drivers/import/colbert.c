/* A ColBERT checkpoint as colbert-ai saves it (stanford-futuredata/
 * colbertv2.0): a BERT whose tensors are `bert.*`, the projection
 * `linear.weight [dim, d_model]` beside it, config.json naming HF_ColBERT,
 * and artifact.metadata (colbert-ai's ColBERTConfig as JSON) with the
 * marker tokens, the query and document lengths and mask_punctuation. */
#include "config.h"

#include "colbert.h"

#include <stdlib.h>
#include <string.h>

#include "files.h"

/* colbert-ai's ColBERTConfig defaults, for keys a metadata file leaves out. */
#define COLBERT_QUERY_MAXLEN 32
#define COLBERT_DOC_MAXLEN 220

static int copy_string(importer *self, const char *path, json_t *metadata, const char *key,
                       const char *default_value, char **value)
{
    const char *text = NULL;
    int status = import_json_string(self->ctx, path, metadata, key, default_value, &text);
    if (status == TFENC_OK && (*value = strdup(text)) == NULL)
        status = tfenc_error(self->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    return status;
}

static int names_colbert(const importer *self)
{
    json_t *config = NULL;
    char *path = import_join_path(self->transformer_dir, "config.json");
    int found = 0;
    json_error_t error;
    if (path != NULL && (config = json_load_file(path, 0, &error)) != NULL) {
        const char *name =
            json_string_value(json_array_get(json_object_get(config, "architectures"), 0));
        found = name != NULL && strcmp(name, "HF_ColBERT") == 0;
    }
    json_decref(config);
    free(path);
    return found;
}

int import_read_colbert(importer *self)
{
    tfenc_context *ctx = self->ctx;
    multivector_settings *m = &self->config.multivector;
    char *path = import_join_path(self->transformer_dir, "artifact.metadata");
    if (path == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    int has_metadata = import_file_exists(path);
    if (!has_metadata && !names_colbert(self)) {
        free(path);
        return TFENC_OK;
    }
    json_t *metadata = NULL;
    int status = has_metadata ? import_load_json(ctx, path, &metadata, NULL) : TFENC_OK;
    const char *similarity = "cosine";
    if (status == TFENC_OK)
        status = import_json_string(ctx, path, metadata, "similarity", "cosine", &similarity);
    /* l2 ranks by the distance of unnormalised vectors' sums: another
     * recipe than the MaxSim of unit vectors the output documents. */
    if (status == TFENC_OK && strcmp(similarity, "cosine") != 0)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: similarity '%s': tfenc writes the unit "
                             "vectors of similarity cosine", path, similarity);
    if (status == TFENC_OK)
        status = copy_string(self, path, metadata, "query_token_id", "[unused0]",
                             &m->query_marker);
    if (status == TFENC_OK)
        status = copy_string(self, path, metadata, "doc_token_id", "[unused1]",
                             &m->document_marker);
    if (status == TFENC_OK)
        status = import_json_int(ctx, path, metadata, "query_maxlen", 2, IMPORT_MAX_POSITIONS,
                                 COLBERT_QUERY_MAXLEN, &m->query_length);
    if (status == TFENC_OK)
        status = import_json_int(ctx, path, metadata, "doc_maxlen", 2, IMPORT_MAX_POSITIONS,
                                 COLBERT_DOC_MAXLEN, &m->document_length);
    if (status == TFENC_OK)
        status = import_json_bool(ctx, path, metadata, "mask_punctuation", 1,
                                  &m->skip_punctuation);
    if (status == TFENC_OK)
        status = import_json_bool(ctx, path, metadata, "attend_to_mask_tokens", 0,
                                  &m->attend_to_mask_tokens);
    /* 0: the rows of linear.weight (tensor_map.c). */
    if (status == TFENC_OK)
        status = import_json_int(ctx, path, metadata, "dim", 1, IMPORT_MAX_WIDTH, 0, &m->width);
    json_decref(metadata);
    free(path);
    if (status == TFENC_OK) {
        m->present = 1;
        m->source = has_metadata ? "artifact.metadata" : "colbert-ai's defaults";
    }
    return status;
}
