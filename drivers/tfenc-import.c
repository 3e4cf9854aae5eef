/* tfenc-import: turns a Hugging Face model directory (config.json,
 * model.safetensors or its shards or pytorch_model.bin, vocab.txt,
 * sentence-transformers files) of one of the
 * architectures of docs/models.md into a tfenc weights file
 * (docs/weights.md) and optionally a job file (docs/job-file.md) that
 * reproduces the model's embeddings.
 *
 * This file is the program: arguments, the order of the steps, and writing
 * both outputs all or nothing. The steps live in drivers/import/: reading
 * the folder (hf_config, sentence_transformers, tokenizer_files), mapping
 * its tensors (tensor_map), and writing (weights_writer, job_writer). */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hdf5.h>

#include "output/ownership.h"

#include "import/adapters.h"
#include "import/files.h"
#include "import/colbert.h"
#include "import/hf_config.h"
#include "import/bge_m3.h"
#include "import/importer.h"
#include "import/job_writer.h"
#include "import/sentence_transformers.h"
#include "import/static_model.h"
#include "import/tensor_map.h"
#include "import/tokenizer_files.h"
#include "import/weights_writer.h"

static void importer_free(importer *self)
{
    tfenc_checkpoint_close(self->weights);
    free(self->plan);
    free(self->transformer_dir);
    free(self->dense_dir);
    tfenc_checkpoint_close(self->dense_weights);
    tfenc_checkpoint_close(self->bge_m3.colbert);
    tfenc_checkpoint_close(self->bge_m3.sparse);
    free(self->config.model_type);
    free(self->config.config_text);
    free(self->config.local_layers);
    free(self->config.head.labels);
    free(self->config.multivector.query_marker);
    free(self->config.multivector.document_marker);
    free(self->config.multivector.markers_file);
    free(self->static_model.table);
    free(self->static_model.weights);
    for (int i = 0; i < 4; i++)
        free(self->tokenizer.special[i]);
    free(self->tokenizer.vocab);
    free(self->tokenizer.vocab_text);
    tfenc_tokenizer_destroy(self->tokenizer.json);
    json_decref(self->pooling.prompts);
    for (int i = 0; i < 2; i++) {
        free(self->pooling.dense.dir[i]);
        tfenc_checkpoint_close(self->pooling.dense.weights[i]);
    }
}

static void usage(FILE *stream)
{
    fprintf(stream,
            "usage: tfenc-import HF_MODEL_DIR -o MODEL.h5 [--job JOB.ini] "
            "[--dtype float32|float16|bfloat16] [--task NAME] [--sparse] [--verbose]\n"
            "Converts a Hugging Face checkpoint (config.json; model.safetensors, its shards\n"
            "or pytorch_model.bin; vocab.txt or tokenizer.json; sentence-transformers\n"
            "modules) of BERT, RoBERTa, XLM-R, ELECTRA, DistilBERT,\n"
            "MPNet, Qwen2, Qwen3, Gemma3 (EmbeddingGemma), DeBERTa-v2/v3, NomicBERT,\n"
            "ModernBERT, JinaBERT v2 or XLM-R with rotary positions (jina-embeddings-v3),\n"
            "or a model2vec static-embedding folder, into a tfenc weights file\n"
            "and, with --job, a job file that computes the same embeddings (ColBERT and\n"
            "PyLate folders: the same multi-vector encodings).\n"
            "--sparse: a *ForMaskedLM checkpoint's masked-LM head becomes a splade head,\n"
            "whose job writes SPLADE sparse vectors (a SparseEncoder folder implies it).\n"
            "--task NAME: a model with LoRA task adapters (lora_adaptations) gets the\n"
            "adapter of task NAME merged into its weights and the task's instruction as\n"
            "the job's prompt; such a model needs it.\n"
            "--verbose: say which files were read and which tensor names were changed as\n"
            "transformers changes them on load (legacy LayerNorm gamma/beta).\n");
}

/* The files of the model folder (two levels: the sentence-transformers
 * modules sit in subfolders), which the outputs must not be. */
typedef struct folder_files {
    tfenc_input_file *files;
    char **paths;
    int count, capacity;
} folder_files;

static int collect_file(folder_files *list, const char *path)
{
    if (list->count == list->capacity) {
        int capacity = list->capacity > 0 ? 2 * list->capacity : 32;
        tfenc_input_file *files = realloc(list->files, (size_t)capacity * sizeof *files);
        if (files != NULL)
            list->files = files;
        char **paths = realloc(list->paths, (size_t)capacity * sizeof *paths);
        if (paths != NULL)
            list->paths = paths;
        if (files == NULL || paths == NULL)
            return 0;
        list->capacity = capacity;
    }
    if ((list->paths[list->count] = strdup(path)) == NULL)
        return 0;
    list->files[list->count] = (tfenc_input_file){"a file of the model folder",
                                                  list->paths[list->count]};
    list->count++;
    return 1;
}

static int collect_folder(folder_files *list, const char *dir, int depth)
{
    DIR *folder = opendir(dir);
    if (folder == NULL)
        return 1;
    int ok = 1;
    struct dirent *entry;
    while (ok && (entry = readdir(folder)) != NULL) {
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
            continue;
        char *path = import_join_path(dir, entry->d_name);
        struct stat info;
        if (path == NULL)
            ok = 0;
        else if (stat(path, &info) == 0 && S_ISREG(info.st_mode))
            ok = collect_file(list, path);
        else if (depth > 0 && stat(path, &info) == 0 && S_ISDIR(info.st_mode))
            ok = collect_folder(list, path, depth - 1);
        free(path);
    }
    closedir(folder);
    return ok;
}

/* tfenc-import writes OUTPUT.tmp and renames it over OUTPUT: an output
 * that is one of the model's own files under another name (a path inside
 * the folder, a link to it) would destroy the checkpoint being read. */
static int check_outputs(tfenc_context *ctx, const char *model_dir, const char *output,
                         const char *job)
{
    folder_files list = {0};
    int status = collect_folder(&list, model_dir, 2) ? TFENC_OK
                                                      : tfenc_error(ctx, TFENC_ERR_NO_MEMORY,
                                                                    "out of memory");
    if (status == TFENC_OK)
        status = tfenc_output_check_not_input(ctx, output, list.files, list.count);
    if (status == TFENC_OK && job != NULL)
        status = tfenc_output_check_not_input(ctx, job, list.files, list.count);
    if (status == TFENC_OK && job != NULL) {
        tfenc_input_file weights = {"the weights output (-o)", output};
        status = tfenc_output_check_not_input(ctx, job, &weights, 1);
        if (status == TFENC_OK && strcmp(job, output) == 0)
            status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: -o and --job name the same file",
                                 job);
    }
    for (int i = 0; i < list.count; i++)
        free(list.paths[i]);
    free(list.paths);
    free(list.files);
    return status;
}

static char *temporary_name(const char *path)
{
    char *name = malloc(strlen(path) + 5);
    if (name != NULL)
        sprintf(name, "%s.tmp", path);
    return name;
}

/* The command line: what to import and where to write it. */
typedef struct import_arguments {
    const char *model_dir, *output, *job;
    const char *task; /* --task */
    storage_dtype dtype;
    int sparse;  /* --sparse */
    int verbose; /* --verbose */
} import_arguments;

/* Parses argv into *args. Returns -1 to go on, else the exit status (0 after
 * --help or --version, 2 for a usage error, already reported). */
static int parse_arguments(int argc, char **argv, import_arguments *args)
{
    *args = (import_arguments){.dtype = STORAGE_FLOAT32};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(arg, "--sparse") == 0) {
            args->sparse = 1;
        } else if (strcmp(arg, "--verbose") == 0 || strcmp(arg, "-v") == 0) {
            args->verbose = 1;
        } else if (strcmp(arg, "--version") == 0) {
            printf("%s\n", IMPORTER_VERSION);
            return 0;
        } else if ((strcmp(arg, "-o") == 0 || strcmp(arg, "--output") == 0
                    || strcmp(arg, "--job") == 0 || strcmp(arg, "--dtype") == 0
                    || strcmp(arg, "--task") == 0)) {
            if (i + 1 >= argc) {
                fprintf(stderr, "tfenc-import: %s needs a value\n", arg);
                return 2;
            }
            const char *value = argv[++i];
            if (strcmp(arg, "--job") == 0) {
                args->job = value;
            } else if (strcmp(arg, "--task") == 0) {
                args->task = value;
            } else if (strcmp(arg, "--dtype") == 0) {
                int found = 0;
                for (int k = 0; k < 3 && !found; k++)
                    if (strcmp(value, import_storage_names[k]) == 0) {
                        args->dtype = (storage_dtype)k;
                        found = 1;
                    }
                if (!found) {
                    fprintf(stderr, "tfenc-import: --dtype '%s' is not float32, float16 or "
                            "bfloat16\n", value);
                    return 2;
                }
            } else {
                args->output = value;
            }
        } else if (arg[0] == '-' && arg[1] != '\0') {
            fprintf(stderr, "tfenc-import: unknown option '%s' (see --help)\n", arg);
            return 2;
        } else if (args->model_dir == NULL) {
            args->model_dir = arg;
        } else {
            fprintf(stderr, "tfenc-import: one model directory expected, got '%s' and '%s'\n",
                    args->model_dir, arg);
            return 2;
        }
    }
    if (args->model_dir == NULL || args->output == NULL) {
        usage(stderr);
        return 2;
    }
    return -1;
}

/* Reads the model folder: modules, config, pooling, prompts, tokenizer and
 * the weights' tensors, into `self`. */
static int read_model(importer *self)
{
    /* A model2vec folder has no encoder: its own reader, before the
     * sentence-transformers modules (its modules.json names a
     * StaticEmbedding) are looked at. */
    int is_static = 0;
    int status = import_detect_static_model(self, &is_static);
    if (status != TFENC_OK || is_static)
        return status == TFENC_OK ? import_read_static_model(self) : status;
    char *pooling_dir = NULL;
    status = import_read_modules(self, &pooling_dir);
    if (status == TFENC_OK)
        status = import_read_config(self);
    if (status == TFENC_OK && self->sparse)
        status = import_sparse_head(self);
    if (status == TFENC_OK)
        status = self->dense_dir != NULL ? import_read_pylate(self) : import_read_colbert(self);
    if (status == TFENC_OK && pooling_dir != NULL)
        status = import_read_pooling(self, pooling_dir);
    if (status == TFENC_OK)
        status = import_read_dense(self);
    if (status == TFENC_OK)
        status = import_read_prompts(self);
    if (status == TFENC_OK)
        status = import_read_adapters(self);
    free(pooling_dir);
    if (status == TFENC_OK)
        status = import_read_tokenizer(self);
    if (status == TFENC_OK)
        status = import_check_markers(self);
    if (status == TFENC_OK)
        status = import_read_bge_m3(self);
    if (status == TFENC_OK)
        status = import_bge_m3_drop_ids(self);
    if (status == TFENC_OK)
        status = import_open_weights(self);
    return status;
}

/* Writes the weights (and the job) under temporary names, then renames
 * both into place: all or nothing, so a failed import leaves no half file
 * where a job would find it. */
static int write_outputs(importer *self, const import_arguments *args)
{
    tfenc_context *ctx = self->ctx;
    char *weights_tmp = temporary_name(args->output);
    char *job_tmp = args->job != NULL ? temporary_name(args->job) : NULL;
    int weights_written = 0, job_written = 0;
    int status = TFENC_OK;
    if (weights_tmp == NULL || (args->job != NULL && job_tmp == NULL)) {
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory");
        goto done;
    }
    weights_written = 1;
    if ((status = import_write_weights(self, weights_tmp)) != TFENC_OK)
        goto done;
    if (args->job != NULL) {
        job_written = 1;
        if ((status = import_write_job(self, job_tmp, args->job, args->output)) != TFENC_OK)
            goto done;
    }
    if (rename(weights_tmp, args->output) != 0) {
        status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot rename to %s: %s", weights_tmp,
                             args->output, strerror(errno));
        goto done;
    }
    weights_written = 0;
    if (args->job != NULL && rename(job_tmp, args->job) != 0) {
        status = tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot rename to %s: %s", job_tmp,
                             args->job, strerror(errno));
        unlink(args->output); /* all or nothing */
        goto done;
    }
    job_written = 0;
done:
    if (weights_written)
        unlink(weights_tmp);
    if (job_written)
        unlink(job_tmp);
    free(weights_tmp);
    free(job_tmp);
    return status;
}

int main(int argc, char **argv)
{
    import_arguments args;
    int exit_status = parse_arguments(argc, argv, &args);
    if (exit_status >= 0)
        return exit_status;
    /* The one-line message below says what failed; HDF5's stack dump would
     * bury it. */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    importer self = {.ctx = &ctx, .dtype = args.dtype, .sparse = args.sparse,
                     .verbose = args.verbose ? stdout : NULL,
                     .adapters = {.task = args.task}};
    int status = TFENC_OK;
    self.model_dir = strdup(args.model_dir);
    self.transformer_dir = strdup(args.model_dir);
    struct stat info;
    if (self.model_dir == NULL || self.transformer_dir == NULL)
        status = tfenc_error(&ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    else if (stat(args.model_dir, &info) != 0 || !S_ISDIR(info.st_mode))
        status = tfenc_error(&ctx, TFENC_ERR_IO, "%s: not a directory", args.model_dir);
    if (status == TFENC_OK)
        status = check_outputs(&ctx, args.model_dir, args.output, args.job);
    if (status == TFENC_OK)
        status = read_model(&self);
    if (status == TFENC_OK)
        status = write_outputs(&self, &args);
    if (status == TFENC_OK) {
        if (self.warning != NULL)
            fprintf(stderr, "tfenc-import: warning: %s\n", self.warning);
        printf("tfenc-import: wrote %s (%s, %d layers, d_model %d, %lld parameters, %s)%s%s\n",
               args.output, self.config.model_type, self.config.n_layers, self.config.d_model,
               self.n_parameters, import_storage_names[args.dtype], args.job != NULL ? " and " : "",
               args.job != NULL ? args.job : "");
    } else {
        fprintf(stderr, "tfenc-import: %s\n", tfenc_context_message(&ctx));
    }
    importer_free(&self);
    free(self.model_dir);
    return status == TFENC_OK ? 0 : 1;
}
