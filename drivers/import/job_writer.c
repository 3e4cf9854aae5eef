/* Writes the job file (docs/job-file.md) that runs an imported model as
 * its reference implementation does. */
#include "config.h"

#include "job_writer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"

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
    fprintf(out, "[job]\n");
    if (!self->tokenizer.present)
        fprintf(out, "; This model has no WordPiece vocabulary: give it HDF5 token ids.\n"
                     "input = tokens.h5\ninput_format = hdf5\n");
    else
        fprintf(out, "input = corpus.txt\n");
    fprintf(out, "output = embeddings.h5\nmax_seq_len = %d\n\n", self->max_length);
    fprintf(out, "[model]\nweights = %s\nd_model = %d\nvocab_size = %d\nmax_positions = %d\n\n",
            weights_relative, c->d_model, c->vocab_size,
            c->max_position_embeddings - c->position_offset);
    if (self->tokenizer.present)
        fprintf(out, "; No [tokenizer] section: the vocabulary and its settings are read\n"
                     "; from the weights file (/tokenizer).\n\n");
    fprintf(out, "[embeddings]\ntype = embedding\nlearned_positions = true\ntoken_types = %s\n",
            c->type_vocab_size > 0 ? "true" : "false");
    if (c->position_offset != 0)
        fprintf(out, "; RoBERTa numbers positions from padding_idx + 1.\nposition_offset = %d\n",
                c->position_offset);
    char eps[32];
    format_double(eps, sizeof eps, c->layer_norm_eps);
    fprintf(out, "\n[embeddings_norm]\ntype = layernorm\neps = %s\n\n", eps);
    fprintf(out, "[encoder]\nrepeat = %d\nnorm_position = post\n\n", c->n_layers);
    fprintf(out, "[encoder.attention]\ntype = mha\nn_heads = %d\n\n", c->n_heads);
    fprintf(out, "[encoder.attention.norm]\ntype = layernorm\neps = %s\n\n", eps);
    fprintf(out, "[encoder.ffn]\ntype = ffn\nactivation = %s\n\n", c->activation);
    fprintf(out, "[encoder.ffn.norm]\ntype = layernorm\neps = %s\n", eps);
    if (self->pooling.present)
        fprintf(out, "\n[pooling]\ntype = pooling\nmode = %s\nnormalize = %s\n",
                self->pooling.mode, self->pooling.normalize ? "true" : "false");
    else
        fprintf(out, "\n; No sentence-transformers pooling in the checkpoint: the output holds\n"
                     "; per-token hidden states. Add a [pooling] section for one vector each.\n");
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
