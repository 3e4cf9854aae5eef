/* Writes the job file (docs/job-file.md) that runs an imported model as
 * its reference implementation does. */
#include "config.h"

#include "job_writer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "bge_m3.h"
#include "files.h"
#include "static_model.h"

/* `target` relative to directory `from` (both absolute and normalised by
 * realpath), so that the job keeps working when both move together. */
static char *relative_path(const char *from, const char *target)
{
    /* `common` ends the longest run of whole components both share. */
    size_t common = 0;
    for (size_t i = 0;; i++) {
        int from_end = from[i] == '/' || from[i] == '\0';
        int target_end = target[i] == '/' || target[i] == '\0';
        if (from_end && target_end)
            common = i;
        if (from[i] != target[i] || from[i] == '\0')
            break;
    }
    int ups = 0;
    for (size_t i = common; from[i] != '\0'; i++)
        ups += from[i] != '/' && (i == 0 || from[i - 1] == '/');
    const char *rest = target + common;
    while (*rest == '/')
        rest++;
    char *result = malloc((size_t)ups * 3 + strlen(rest) + 1);
    if (result == NULL)
        return NULL;
    result[0] = '\0';
    for (int i = 0; i < ups; i++)
        strcat(result, "../");
    strcat(result, rest);
    return result;
}

/* The absolute directory holding `path` (which need not exist yet). */
static char *absolute_directory(const char *path)
{
    char *copy = strdup(path);
    if (copy == NULL)
        return NULL;
    char *slash = strrchr(copy, '/');
    if (slash == copy)
        slash[1] = '\0';
    else if (slash != NULL)
        *slash = '\0';
    char *result = realpath(slash != NULL ? copy : ".", NULL);
    free(copy);
    return result;
}

/* The shortest decimal form that reads back as exactly `value` ("1e-12"). */
static void format_double(char *text, size_t size, double value)
{
    for (int precision = 1; precision <= 17; precision++) {
        snprintf(text, size, "%.*g", precision, value);
        if (strtod(text, NULL) == value)
            return;
    }
}

/* [model] max_positions, which bounds max_seq_len: the longest sequence
 * the model's positions can encode, as transformers runs them. A learned
 * position table has max_position_embeddings rows (RoBERTa's first
 * position_offset unused): BERT, RoBERTa, XLM-R, ELECTRA, DistilBERT, MPNet
 * (whose relative buckets sit beside its table) and DeBERTa with
 * position_biased_input. NomicBERT's rotary angles change past
 * max_trained_positions (dynamic NTK scaling, which tfenc does not
 * compute). Relative buckets alone (DeBERTa-v3), RoPE without scaling
 * (ModernBERT, Qwen2, Qwen3, Gemma3) or with GTE's fixed NTK scaling, and
 * ALiBi (JinaBERT) encode any
 * length, so their max_position_embeddings is no limit: the job format's
 * own maximum is. */
static int position_limit(const model_config *c, const char **why)
{
    if (c->learned_positions) {
        *why = "rows of the learned position table";
        return c->max_position_embeddings - c->position_offset;
    }
    if (c->architecture == ARCH_NOMIC_BERT) {
        *why = "max_trained_positions: NomicBERT scales its rotary angles beyond";
        return c->max_position_embeddings;
    }
    /* GTE's NTK scaling applies at every length (its rates are fixed when
     * the model is built), so its max_position_embeddings is no limit either. */
    *why = c->rope_scaling != NULL             ? "rotary positions, NTK-scaled at every length, "
                                                 "encode any length"
           : strcmp(c->position, "rope") == 0  ? "rotary positions encode any length"
           : strcmp(c->position, "alibi") == 0 ? "ALiBi encodes any length"
                                               : "relative positions encode any length";
    return IMPORT_MAX_POSITIONS;
}

/* A norm section of the model's kind, or nothing for a layer without one. */
static void write_norm(FILE *out, const char *section, const model_config *c)
{
    char eps[32];
    format_double(eps, sizeof eps, c->layer_norm_eps);
    fprintf(out, "[%s]\ntype = %s\neps = %s\n", section, c->rms_norm ? "rmsnorm" : "layernorm",
            eps);
    if (!c->rms_norm && !c->norm_bias)
        fprintf(out, "bias = false\n");
    if (c->rms_norm && c->norm_weight_offset != 0.0) {
        char offset[32];
        format_double(offset, sizeof offset, c->norm_weight_offset);
        fprintf(out, "weight_offset = %s\n", offset);
    }
    fprintf(out, "\n");
}

/* Whether layer `layer` is a local (sliding-window) one (Gemma3's and
 * ModernBERT's layer types). */
static int is_local_layer(const model_config *c, int layer)
{
    return c->local_layers != NULL && c->local_layers[layer];
}

/* The attention sublayer [BLOCK.attention] of layer `layer` (ModernBERT's
 * and Gemma3's layers differ: global ones see the whole sequence with one
 * RoPE base, local ones a window with another). */
static void write_attention(FILE *out, const char *block, const model_config *c, int layer)
{
    fprintf(out, "[%s.attention]\ntype = mha\nn_heads = %d\n", block, c->n_heads);
    if (c->n_kv_heads != c->n_heads)
        fprintf(out, "n_kv_heads = %d\n", c->n_kv_heads);
    int head_dim = c->head_dim > 0 ? c->head_dim : c->d_model / c->n_heads;
    if (c->head_dim > 0)
        fprintf(out, "head_dim = %d\n", c->head_dim);
    if (c->attention_scale != 0.0) {
        char scale[32];
        format_double(scale, sizeof scale, c->attention_scale);
        fprintf(out, "scale = %s\n", scale);
    }
    if (c->qk_norm) {
        char eps[32];
        format_double(eps, sizeof eps, c->layer_norm_eps);
        fprintf(out, "qk_norm = true\nqk_norm_eps = %s\n", eps);
        if (c->norm_weight_offset != 0.0) {
            char offset[32];
            format_double(offset, sizeof offset, c->norm_weight_offset);
            fprintf(out, "qk_norm_weight_offset = %s\n", offset);
        }
    }
    if (!c->qkv_bias)
        fprintf(out, "bias = false\n");
    if (c->out_bias != c->qkv_bias)
        fprintf(out, "out_bias = %s\n", c->out_bias ? "true" : "false");
    if (c->causal)
        fprintf(out, "causal = true\n");
    if (strcmp(c->position, "none") != 0)
        fprintf(out, "position = %s\n", c->position);
    if (strcmp(c->position, "relative_buckets") == 0)
        /* transformers' MPNet: 32 buckets whatever the table holds, 128 the
         * distance of the last. */
        fprintf(out, "num_buckets = 32\nmax_distance = 128\n");
    if (strcmp(c->position, "disentangled") == 0) {
        char eps[32];
        format_double(eps, sizeof eps, c->layer_norm_eps);
        fprintf(out, "; DeBERTa's c2p and p2c terms over its relative embeddings\n"
                     "position_buckets = %d\nmax_relative_positions = %d\nrelative_terms = %s\n"
                     "share_att_key = %s\nrelative_norm = %s\nrelative_norm_eps = %s\n",
                c->position_buckets, c->max_relative_positions, c->relative_terms,
                c->share_att_key ? "true" : "false", c->relative_norm ? "true" : "false", eps);
    }
    if (strcmp(c->position, "rope") == 0) {
        int local = is_local_layer(c, layer);
        char theta[32];
        format_double(theta, sizeof theta, local ? c->local_rope_theta : c->rope_theta);
        fprintf(out, "rope_theta = %s\n", theta);
        if (c->rope_dims != head_dim)
            fprintf(out, "rope_dims = %d\n", c->rope_dims);
        if (c->rope_interleaved)
            fprintf(out, "rope_style = interleaved\n");
        if (c->rope_scaling != NULL) {
            char factor[32];
            format_double(factor, sizeof factor, c->rope_factor);
            fprintf(out, "rope_scaling = %s\nrope_factor = %s\n", c->rope_scaling, factor);
            if (c->rope_mixed_b > 0) {
                char mixed_b[32];
                format_double(mixed_b, sizeof mixed_b, c->rope_mixed_b);
                fprintf(out, "rope_mixed_b = %s\n", mixed_b);
            }
        }
        if (local)
            fprintf(out, "window = %d\n", c->local_reach);
    }
    fprintf(out, "\n");
}

/* Block `name` of `repeat` layers from layer `first` on, its weights in
 * `weights` (a template with {i}, or one group). */
static void write_block(FILE *out, const char *name, int repeat, const char *weights,
                        const model_config *c, int first)
{
    fprintf(out, "[%s]\nrepeat = %d\nnorm_position = %s\n", name, repeat,
            c->pre_norm ? "pre" : "post");
    if (weights != NULL)
        fprintf(out, "weights = %s\n", weights);
    fprintf(out, "\n");
    write_attention(out, name, c, first);
    char section[64];
    /* ModernBERT's first layer has no norm before its attention. */
    if (!(c->architecture == ARCH_MODERNBERT && first == 0)) {
        snprintf(section, sizeof section, "%s.attention.norm", name);
        write_norm(out, section, c);
    }
    /* Gemma's norms on each sublayer's output, before the residual. */
    if (c->output_norms) {
        snprintf(section, sizeof section, "%s.attention.output_norm", name);
        write_norm(out, section, c);
    }
    if (import_is_moe_layer(c, first)) {
        /* megablocks' dMoE: routed experts without biases, one bias after
         * their sum. */
        fprintf(out, "[%s.ffn]\ntype = moe\nexperts = %d\ntop_k = %d\nactivation = %s\n", name,
                c->moe_experts, c->moe_top_k, c->activation);
        if (c->moe_normalize != 0.0) {
            char q[32];
            format_double(q, sizeof q, c->moe_normalize);
            fprintf(out, "normalize = %s\n", q);
        }
    } else {
        fprintf(out, "[%s.ffn]\ntype = ffn\nactivation = %s\n", name, c->activation);
        if (!c->ffn_in_bias && !c->ffn_out_bias)
            fprintf(out, "bias = false\n");
    }
    fprintf(out, "\n");
    snprintf(section, sizeof section, "%s.ffn.norm", name);
    write_norm(out, section, c);
    if (c->output_norms) {
        snprintf(section, sizeof section, "%s.ffn.output_norm", name);
        write_norm(out, section, c);
    }
}

/* The layers: embedding, its norm, the blocks, the final norm. */
static void write_layers(FILE *out, const model_config *c)
{
    fprintf(out, "[embeddings]\ntype = embedding\nlearned_positions = %s\ntoken_types = %s\n",
            c->learned_positions ? "true" : "false", c->type_vocab_size > 0 ? "true" : "false");
    if (c->embedding_scale)
        fprintf(out, "scale_by_sqrt_d = true\n");
    if (c->position_offset != 0)
        fprintf(out, "; %s numbers positions from padding_idx + 1.\nposition_offset = %d\n",
                c->architecture == ARCH_MPNET ? "MPNet" : "RoBERTa", c->position_offset);
    fprintf(out, "\n");
    if (c->embeddings_norm)
        write_norm(out, "embeddings_norm", c);
    if (c->architecture == ARCH_MODERNBERT || c->local_layers != NULL || c->moe_experts > 0) {
        /* Layers differ (global or local attention, ModernBERT's first
         * without an attention norm, NomicBERT v2's mixture-of-experts
         * layers between dense ones): one block per layer, each reading
         * its own group. */
        for (int layer = 0; layer < c->n_layers; layer++) {
            char name[32], weights[48];
            snprintf(name, sizeof name, "layer_%d", layer);
            snprintf(weights, sizeof weights, "encoder/%d", layer);
            write_block(out, name, 1, weights, c, layer);
        }
    } else {
        write_block(out, "encoder", c->n_layers, NULL, c, 0);
    }
    if (c->final_norm)
        write_norm(out, "final_norm", c);
}

/* [prompts]: sentence-transformers' named prompts, NAME = "text" (a JSON
 * string), which `[job] prompt = NAME` selects. */
static int write_prompts(importer *self, FILE *out, const char *job_path)
{
    json_t *prompts = self->pooling.prompts;
    if (prompts == NULL || json_object_size(prompts) == 0)
        return TFENC_OK;
    fprintf(out, "\n; sentence-transformers' prompts (config_sentence_transformers.json), put\n"
                 "; before each document by `[job] prompt = NAME`. Each value is a JSON\n"
                 "; string: quoted, so that spaces at its ends stay.\n[prompts]\n");
    const char *name;
    json_t *value;
    json_object_foreach(prompts, name, value) {
        char *text = import_ini_json(value, JSON_ENCODE_ANY);
        if (text == NULL)
            return tfenc_error(self->ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", job_path);
        fprintf(out, "%s = %s\n", name, text);
        free(text);
    }
    return TFENC_OK;
}

/* A multi-vector model's [job] keys: documents by default; the query side
 * is one --set away (docs/output.md). */
static void write_multivector_keys(FILE *out, const multivector_settings *m)
{
    fprintf(out, "; ColBERT (%s): documents get their marker after [CLS] and lose\n"
                 "; their punctuation's vectors; multivector_mode = query encodes\n"
                 "; queries instead ([MASK]-padded to query_length).\n"
                 "multivector_mode = document\ndocument_marker = %s\nquery_marker = %s\n"
                 "query_length = %d\nskip_punctuation = %s\nattend_to_mask_tokens = %s\n",
            m->source, m->document_marker, m->query_marker, m->query_length,
            m->skip_punctuation ? "true" : "false", m->attend_to_mask_tokens ? "true" : "false");
}

int import_write_job(importer *self, const char *job_tmp, const char *job_path,
                     const char *weights_path)
{
    tfenc_context *ctx = self->ctx;
    const model_config *c = &self->config;
    char *job_dir = absolute_directory(job_path);
    char *weights_dir = absolute_directory(weights_path);
    const char *weights_name = strrchr(weights_path, '/');
    weights_name = weights_name != NULL ? weights_name + 1 : weights_path;
    char *weights_absolute = weights_dir != NULL ? import_join_path(weights_dir, weights_name)
                                                 : NULL;
    char *weights_relative = job_dir != NULL && weights_absolute != NULL
                             ? relative_path(job_dir, weights_absolute) : NULL;
    int status = TFENC_OK;
    FILE *out = NULL;
    if (weights_relative == NULL) {
        status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot resolve the directories of the job "
                             "and of %s", job_path, weights_path);
        goto done;
    }
    if (strpbrk(weights_relative, "\n;#") != NULL) {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: the weights path '%s' holds a "
                             "character a job file cannot carry (newline, ';' or '#')", job_path,
                             weights_relative);
        goto done;
    }
    out = fopen(job_tmp, "w");
    if (out == NULL) {
        status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot create: %s", job_tmp,
                             strerror(errno));
        goto done;
    }
    char *source = realpath(self->model_dir, NULL);
    fprintf(out, "; Written by %s from %s\n; (%s, %d layers, d_model %d, %lld parameters).\n",
            IMPORTER_VERSION, source != NULL ? source : self->model_dir, c->model_type,
            c->n_layers, c->d_model, self->n_parameters);
    free(source);
    fprintf(out, "; `input` is a placeholder: point it at a corpus (one document per line)\n"
                 "; here or on the command line, e.g.\n"
                 ";   tfenc-batch --set job.input=corpus.txt --set job.output=out.h5 JOB\n\n");
    if (c->architecture == ARCH_STATIC) {
        import_write_static_job(self, out, weights_relative);
        goto close;
    }
    fprintf(out, "[job]\n");
    if (!self->tokenizer.present)
        fprintf(out, "; This model has no WordPiece vocabulary: give it HDF5 token ids.\n"
                     "input = tokens.h5\ninput_format = hdf5\n");
    else
        fprintf(out, "input = corpus.txt\n");
    const int sparse_head = c->head.kind == HEAD_MLM_BERT || c->head.kind == HEAD_MLM_DISTILBERT ||
                            c->head.kind == HEAD_MLM_ROBERTA ||
                            c->head.kind == HEAD_MLM_MODERNBERT;
    const multivector_settings *multivector = &c->multivector;
    int max_length = self->max_length;
    if (multivector->present && multivector->document_length > 0 &&
        multivector->document_length < max_length)
        max_length = multivector->document_length;
    fprintf(out, "output = %s\nmax_seq_len = %d\n",
            self->bge_m3.present        ? "bge_m3.h5"
            : multivector->present      ? "vectors.h5"
            : sparse_head               ? "sparse.h5"
            : c->head.kind != HEAD_NONE ? "scores.h5"
                                        : "embeddings.h5",
            max_length);
    if (multivector->present)
        write_multivector_keys(out, multivector);
    if (self->bge_m3.present)
        fprintf(out, "; BGE-M3's colbert vectors are last_hidden_state[:, 1:].\n"
                     "skip_first_token = true\n");
    if (self->adapters.task != NULL)
        fprintf(out, "; --task %s: the task's adapter is merged into the weights%s\n",
                self->adapters.task, self->pooling.default_prompt != NULL
                ? ", and its\n; instruction (task_instructions) goes before every document."
                : " (its\n; instruction is empty).");
    if (self->adapters.task != NULL && self->pooling.default_prompt != NULL)
        fprintf(out, "prompt = %s\n", self->pooling.default_prompt);
    else if (self->pooling.default_prompt != NULL)
        fprintf(out, "; sentence-transformers' default_prompt_name: the prompt every document\n"
                     "; gets (see [prompts]).\nprompt = %s\n", self->pooling.default_prompt);
    fprintf(out, "\n");
    const char *limit_reason;
    int limit = position_limit(c, &limit_reason);
    fprintf(out, "[model]\nweights = %s\nd_model = %d\nvocab_size = %d\n"
                 "; The longest sequence the model's positions allow (%s).\n"
                 "max_positions = %d\n\n",
            weights_relative, c->d_model, c->vocab_size, limit_reason, limit);
    if (self->tokenizer.present)
        fprintf(out, "; No [tokenizer] section: the vocabulary and its settings are read\n"
                     "; from the weights file (/tokenizer).\n\n");
    write_layers(out, c);
    /* Every layer section ends in a blank line. */
    const head_settings *head = &c->head;
    if (self->bge_m3.present)
        import_write_bge_m3_heads(self, out);
    else if (multivector->present)
        fprintf(out, "; The checkpoint's late-interaction projection: the output holds\n"
                     "; vectors [T, %d] and offsets [N+1] (docs/output.md).\n"
                     "[head]\ntype = multivector\nnormalize = true\nwidth = %d\n",
                multivector->width, multivector->width);
    else if (sparse_head)
        fprintf(out, "; The checkpoint's masked-LM head as SPLADE: the output holds one\n"
                     "; sparse row per document over the vocabulary, as CSR (docs/output.md).\n"
                     "; [job] sparse_top_k and sparse_threshold thin the rows.\n"
                     "[head]\ntype = splade\nactivation = %s\npooling = %s\nnorm_eps = %g\n",
                head->activation, head->sparse_pooling, c->layer_norm_eps);
    else if (head->kind != HEAD_NONE) {
        fprintf(out, "; The checkpoint's sequence-classification head: the output holds\n"
                     "; scores [N, n_labels] (docs/scores.md). scores = logits, softmax or\n"
                     "; sigmoid overrides what auto applies (transformers' pipeline).\n"
                     "[head]\ntype = classifier\npooling = %s\ndense = true\n"
                     "activation = %s\n",
                head->pooling != NULL ? head->pooling : "cls", head->activation);
        if (head->norm) {
            /* ModernBertPredictionHead's LayerNorm, after the activation. */
            char eps[32];
            format_double(eps, sizeof eps, c->layer_norm_eps);
            fprintf(out, "norm = true\nnorm_eps = %s\n", eps);
        }
        fprintf(out, "problem_type = %s\nscores = %s\nn_labels = %d\nlabels = %s\n",
                head->problem_type, head->scores, head->n_labels, head->labels);
    }
    else if (self->pooling.present && self->pooling.dense.count > 0)
        /* Pooling, the Dense pair, then Normalize: the norm comes last. */
        fprintf(out, "[pooling]\ntype = pooling\nmode = %s\nnormalize = false\n\n"
                     "; sentence-transformers' two Dense modules (Identity): d_model -> %d ->\n"
                     "; d_model, one linear map after the other.\n"
                     "[dense]\ntype = ffn\nactivation = identity\nbias = %s\n%s",
                self->pooling.mode, self->pooling.dense.width,
                self->pooling.dense.bias[0] || self->pooling.dense.bias[1] ? "true" : "false",
                self->pooling.normalize
                    ? "\n[normalize]\ntype = pooling\nmode = none\nnormalize = true\n"
                    : "");
    else if (self->pooling.present)
        fprintf(out, "[pooling]\ntype = pooling\nmode = %s\nnormalize = %s\n",
                self->pooling.mode, self->pooling.normalize ? "true" : "false");
    else
        fprintf(out, "; No sentence-transformers pooling in the checkpoint: the output holds\n"
                     "; per-token hidden states. Add a [pooling] section for one vector each.\n");
    if ((status = write_prompts(self, out, job_path)) != TFENC_OK)
        goto done;
close:
    if (fclose(out) != 0) {
        out = NULL;
        status = tfenc_error(ctx, TFENC_ERR_IO, "%s: write error: %s", job_tmp, strerror(errno));
        goto done;
    }
    out = NULL;
done:
    if (out != NULL)
        fclose(out);
    free(job_dir);
    free(weights_dir);
    free(weights_absolute);
    free(weights_relative);
    return status;
}
