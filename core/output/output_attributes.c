/* The output file's attributes and small whole datasets: provenance (the
 * job, its inputs' and plugins' digests, how the run was started), the
 * kind's own attributes, the compact dtypes' ranges, the int8 calibration
 * and the corpus's shards. Written at creation (and the run's own again on
 * a resume); read back by output_resume.c and the checks (output_checks.h). */
#include "output/output.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <hdf5.h>
#include <jansson.h>

#include "config.h"
#include "base/context.h"
#include "base/hdf5_attributes.h"
#include "base/hdf5_error.h"
#include "base/names.h"
#include "output/calibration.h"
#include "output/corpus_shards.h"
#include "output/output_internal.h"
#include "output/quantize.h"

/* ------------------------------------------------------------- attributes */

/* A one-value attribute of `object` (the file, or a group of it), with
 * the file named on failure. */
static int write_attribute_of(tfenc_context *ctx, tfenc_output *out, hid_t object,
                              const char *name, hid_t type, const void *value)
{
    return tfenc_hdf5_write_attribute(object, name, type, type, value) != 0
               ? tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, out->path,
                                        "cannot write attribute '%s'", name)
               : TFENC_OK;
}

int tfenc_output_write_attribute(tfenc_context *ctx, tfenc_output *out, const char *name,
                                 hid_t type, const void *value)
{
    return write_attribute_of(ctx, out, out->file, name, type, value);
}

static int write_string_attribute_of(tfenc_context *ctx, tfenc_output *out, hid_t object,
                                     const char *name, const char *value)
{
    return tfenc_hdf5_write_string_attribute(object, name, value) != 0
               ? tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, out->path,
                                        "cannot write attribute '%s'", name)
               : TFENC_OK;
}

int tfenc_output_write_string(tfenc_context *ctx, tfenc_output *out, const char *name,
                              const char *value)
{
    return write_string_attribute_of(ctx, out, out->file, name, value);
}

static int write_int64_attribute(tfenc_context *ctx, tfenc_output *out, const char *name,
                                 int64_t value)
{
    return tfenc_output_write_attribute(ctx, out, name, H5T_NATIVE_INT64, &value);
}

/* The attributes that say how this run was started (tfenc-batch --status
 * rebuilds the resume command from them). Rank 0's absolute job path and
 * working directory for everyone: attribute values must be identical on
 * every writer. */
int tfenc_output_write_run_attributes(tfenc_context *ctx, tfenc_output *out,
                                const tfenc_output_options *options)
{
    char job_path[PATH_MAX] = "", directory[PATH_MAX] = "";
    int rank = 0;
    if (out->writers != MPI_COMM_NULL)
        MPI_Comm_rank(out->writers, &rank);
    if (rank == 0) {
        if (getcwd(directory, sizeof directory) == NULL)
            directory[0] = '\0';
        if (options->job_path == NULL || realpath(options->job_path, job_path) == NULL)
            snprintf(job_path, sizeof job_path, "%s",
                     options->job_path != NULL ? options->job_path : "");
    }
    if (out->writers != MPI_COMM_NULL
        && (MPI_Bcast(job_path, sizeof job_path, MPI_CHAR, 0, out->writers) != MPI_SUCCESS
            || MPI_Bcast(directory, sizeof directory, MPI_CHAR, 0, out->writers) != MPI_SUCCESS))
        return tfenc_error(ctx, TFENC_ERR_MPI, "%s: cannot share the job's path", out->path);
    size_t length = 1;
    for (int i = 0; i < options->n_overrides; i++)
        length += strlen(options->overrides[i]) + 1;
    char *overrides = malloc(length);
    if (overrides == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", out->path);
    overrides[0] = '\0';
    for (int i = 0; i < options->n_overrides; i++) {
        strcat(overrides, options->overrides[i]);
        strcat(overrides, "\n");
    }
    int status = tfenc_output_write_string(ctx, out, "job_path", job_path);
    if (status == TFENC_OK)
        status = tfenc_output_write_string(ctx, out, "working_directory", directory);
    if (status == TFENC_OK)
        status = tfenc_output_write_string(ctx, out, "job_overrides", overrides);
    if (status == TFENC_OK)
        status = tfenc_output_write_string(ctx, out, "precision", options->precision);
    if (status == TFENC_OK && options->kernels != NULL)
        status = tfenc_output_write_string(ctx, out, "kernels", options->kernels);
    if (status == TFENC_OK && options->path_choices != NULL)
        status = tfenc_output_write_string(ctx, out, "path_choices", options->path_choices);
    /* Rewritten by every run, like precision, which a resume must find the
     * same (check_model); a resumed int8 run takes the file's calibration,
     * so the cosine and steps stay the file's. */
    double cosine = options->precision_steps != NULL ? options->sample_min_cosine : 1.0;
    if (status == TFENC_OK)
        status = tfenc_output_write_attribute(ctx, out, "precision_sample_min_cosine",
                                              H5T_NATIVE_DOUBLE, &cosine);
    if (status == TFENC_OK)
        status = tfenc_output_write_string(ctx, out, "precision_steps", options->precision_steps);
    free(overrides);
    return status;
}

static int compare_text(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* One "NAME SHA256" line per plugin file (output.h), sorted, each once:
 * what the `plugins_sha256` attribute holds. NULL when out of memory. */
char *tfenc_output_plugins_text(const tfenc_output_options *options)
{
    const int n = options->n_plugins > 0 ? options->n_plugins : 0;
    char **lines = calloc((size_t)n + 1, sizeof *lines);
    size_t total = 1;
    int ok = lines != NULL;
    for (int i = 0; ok && i < n; i++) {
        const char *name = strrchr(options->plugin_paths[i], '/');
        name = name != NULL ? name + 1 : options->plugin_paths[i];
        const char *digest = options->plugin_sha256[i] != NULL ? options->plugin_sha256[i] : "";
        size_t size = strlen(name) + strlen(digest) + 3;
        ok = (lines[i] = malloc(size)) != NULL;
        if (ok)
            total += (size_t)snprintf(lines[i], size, "%s %s\n", name, digest);
    }
    char *text = ok ? malloc(total) : NULL;
    if (text != NULL) {
        qsort(lines, (size_t)n, sizeof *lines, compare_text);
        text[0] = '\0';
        for (int i = 0; i < n; i++)
            if (i == 0 || strcmp(lines[i], lines[i - 1]) != 0)
                strcat(text, lines[i]);
    }
    for (int i = 0; lines != NULL && i < n; i++)
        free(lines[i]);
    free(lines);
    return text;
}


/* What a multi-vector file's rows are: which side of late interaction they
 * encode, with which marker, and which tokens were left out. */
/* The kind's own string attributes (id2label, multivector_mode, ...),
 * from the options its entry names. */
static int write_kind_attributes(tfenc_context *ctx, tfenc_output *out,
                                 const tfenc_output_options *options)
{
    int status = TFENC_OK;
    for (const tfenc_output_kind_attribute *a = out->kind->attributes;
         status == TFENC_OK && a->name != NULL; a++) {
        const char *value = *(const char *const *)((const char *)options + a->option);
        status = tfenc_output_write_string(ctx, out, a->name, value != NULL ? value : "");
    }
    return status;
}

/* Whether the rows have unit length: what the README's dot-product
 * search assumes, and --status says. */
int tfenc_output_write_unit_norm(tfenc_context *ctx, tfenc_output *out,
                           const tfenc_output_options *options)
{
    int32_t unit = options->unit_norm != 0;
    return tfenc_output_write_attribute(ctx, out, "unit_norm", H5T_NATIVE_INT32, &unit);
}

/* The kept fields' names, one a line, in the job's order: what --status
 * and tfenc-export find their datasets by. */
static int write_kept_names(tfenc_context *ctx, tfenc_output *out)
{
    size_t bytes = 1;
    for (int k = 0; k < out->n_kept; k++)
        bytes += strlen(out->kept[k].name) + 1;
    char *names = malloc(bytes);
    if (names == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", out->path);
    size_t at = 0;
    for (int k = 0; k < out->n_kept; k++)
        at += (size_t)snprintf(names + at, bytes - at, "%s%s", k > 0 ? "\n" : "",
                               out->kept[k].name);
    int status = tfenc_output_write_string(ctx, out, TFENC_KEPT_FIELDS_ATTRIBUTE, names);
    free(names);
    return status;
}

int tfenc_output_write_attributes(tfenc_context *ctx, tfenc_output *out,
                            const tfenc_output_options *options)
{
    /* Rank 0's clock for everyone: attribute values must be identical on
     * every writer. */
    char created[32] = "";
    int rank = 0;
    if (out->writers != MPI_COMM_NULL)
        MPI_Comm_rank(out->writers, &rank);
    if (rank == 0) {
        time_t now = time(NULL);
        struct tm utc;
        gmtime_r(&now, &utc);
        strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &utc);
    }
    if (out->writers != MPI_COMM_NULL
        && MPI_Bcast(created, sizeof created, MPI_CHAR, 0, out->writers) != MPI_SUCCESS)
        return tfenc_error(ctx, TFENC_ERR_MPI, "%s: cannot share the creation time", out->path);
    int status = tfenc_output_write_string(ctx, out, "job", options->job_text);
    if (status == TFENC_OK)
        status = tfenc_output_write_string(ctx, out, "job_settings", options->job_settings);
    if (status == TFENC_OK)
        status = tfenc_output_write_string(ctx, out, "weights_sha256", options->weights_sha256);
    if (status == TFENC_OK)
        status = tfenc_output_write_string(ctx, out, "corpus_fingerprint",
                                           options->corpus_fingerprint);
    if (status == TFENC_OK)
        status = tfenc_output_write_string(ctx, out, "vocabulary_fingerprint",
                                           options->vocabulary_fingerprint);
    if (status == TFENC_OK) {
        char *plugins = tfenc_output_plugins_text(options);
        status = plugins == NULL
                     ? tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", out->path)
                     : tfenc_output_write_string(ctx, out, "plugins_sha256", plugins);
        free(plugins);
    }
    if (status == TFENC_OK)
        status = tfenc_output_write_string(ctx, out, "tfenc_version", PACKAGE_VERSION);
    if (status == TFENC_OK)
        status = tfenc_output_write_string(ctx, out, "layout", options->layout);
    if (status == TFENC_OK)
        status = tfenc_output_write_run_attributes(ctx, out, options);
    if (status == TFENC_OK)
        status = tfenc_output_write_string(ctx, out, "created", created);
    if (status == TFENC_OK)
        status = tfenc_output_write_string(ctx, out, "output_kind", out->kind->name);
    if (status == TFENC_OK)
        status = tfenc_output_write_string(
            ctx, out, "chunks",
            tfenc_name_of(tfenc_output_chunks_names, TFENC_CHUNKS_COUNT, out->chunks));
    if (status == TFENC_OK)
        status = tfenc_output_write_string(ctx, out, "dtype", tfenc_output_dtype_name(out->dtype));
    if (status == TFENC_OK)
        status = tfenc_output_write_string(ctx, out, "compression",
                                           options->compression == TFENC_COMPRESSION_GZIP ? "gzip"
                                                                                      : "none");
    if (status == TFENC_OK)
        status = write_int64_attribute(ctx, out, "d_model", out->d_model);
    if (status == TFENC_OK)
        status = tfenc_output_write_unit_norm(ctx, out, options);
    if (status == TFENC_OK)
        status = write_int64_attribute(ctx, out, "n_documents", out->n_documents);
    if (status == TFENC_OK && tfenc_output_per_token(out->kind))
        status = write_int64_attribute(ctx, out, "n_tokens", out->n_tokens);
    if (status == TFENC_OK)
        status = write_kind_attributes(ctx, out, options);
    if (status == TFENC_OK && out->chunks == TFENC_CHUNKS_EACH)
        status = write_int64_attribute(ctx, out, "n_chunks", out->n_tokens);
    if (status == TFENC_OK && out->n_kept > 0)
        status = write_kept_names(ctx, out);
    int32_t complete = 0;
    if (status == TFENC_OK)
        status = tfenc_output_write_attribute(ctx, out, "complete", H5T_NATIVE_INT32, &complete);
    return status;
}

static int write_float_array_attribute(tfenc_context *ctx, tfenc_output *out, const char *name,
                                       const float *values, hsize_t count)
{
    hid_t space = H5Screate_simple(1, &count, NULL);
    hid_t attribute = -1;
    herr_t result = -1;
    if (space >= 0) {
        if (H5Aexists(out->file, name) > 0)
            H5Adelete(out->file, name);
        attribute = H5Acreate2(out->file, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT);
    }
    if (attribute >= 0)
        result = H5Awrite(attribute, H5T_NATIVE_FLOAT, values);
    int status = result < 0 ? tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, out->path,
                                                     "cannot write attribute '%s'", name)
                            : TFENC_OK;
    if (attribute >= 0)
        H5Aclose(attribute);
    if (space >= 0)
        H5Sclose(space);
    return status;
}

/* A small whole dataset (rank 1 or 2) that the first writer fills; the
 * others take part in the collective creation and select nothing. A name
 * with slashes makes the groups it passes through. */
static int write_small_dataset(tfenc_context *ctx, tfenc_output *out, const char *name,
                               hid_t file_type, hid_t memory_type, int rank_of_data,
                               const hsize_t *dims, const void *values)
{
    hid_t links = H5Pcreate(H5P_LINK_CREATE);
    hid_t space = links >= 0 && H5Pset_create_intermediate_group(links, 1) >= 0
                      ? H5Screate_simple(rank_of_data, dims, NULL)
                      : -1;
    hid_t dataset = space >= 0 ? H5Dcreate2(out->file, name, file_type, space, links,
                                            H5P_DEFAULT, H5P_DEFAULT)
                               : -1;
    if (links >= 0)
        H5Pclose(links);
    int rank = 0;
    if (out->writers != MPI_COMM_NULL)
        MPI_Comm_rank(out->writers, &rank);
    int ok = dataset >= 0;
    if (ok && rank != 0)
        ok = H5Sselect_none(space) >= 0;
    hid_t memory = ok ? H5Screate_simple(rank_of_data, dims, NULL) : -1;
    if (ok && rank != 0)
        ok = memory >= 0 && H5Sselect_none(memory) >= 0;
    if (ok)
        ok = memory >= 0 && H5Dwrite(dataset, memory_type, memory, space, out->transfer,
                                     values) >= 0;
    int status
        = ok ? TFENC_OK
             : tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, out->path, "cannot write '%s'", name);
    if (memory >= 0)
        H5Sclose(memory);
    if (dataset >= 0)
        H5Dclose(dataset);
    if (space >= 0)
        H5Sclose(space);
    return status;
}

/* int8 / uint8: the ranges as a dataset [2, d] and as attributes, so that
 * a query is quantized the same way (docs/output.md). Collective. */
int tfenc_output_write_ranges(tfenc_context *ctx, tfenc_output *out,
                        const tfenc_output_options *options)
{
    if (out->ranges == NULL)
        return TFENC_OK;
    hsize_t d = (hsize_t)out->d_model, dims[2] = {2, d};
    int status = write_small_dataset(ctx, out, "quantization_ranges", H5T_IEEE_F32LE,
                                     H5T_NATIVE_FLOAT, 2, dims, out->ranges);
    hsize_t n_sample = (hsize_t)options->n_sample;
    if (status == TFENC_OK && options->sample_indices != NULL && n_sample > 0)
        status = write_small_dataset(ctx, out, "quantization_sample", H5T_STD_I64LE,
                                     H5T_NATIVE_INT64, 1, &n_sample, options->sample_indices);
    const char *source = options->ranges_source;
    if (status == TFENC_OK)
        status = write_float_array_attribute(ctx, out, "quantization_min", out->ranges, d);
    if (status == TFENC_OK)
        status = write_float_array_attribute(ctx, out, "quantization_max", out->ranges + d, d);
    if (status == TFENC_OK)
        status = tfenc_output_write_string(ctx, out, "quantization_ranges_source", source);
    return status;
}

/* int8: the job's calibration (output/calibration.h), so that a later job
 * encodes with the same int8 model. Collective: every writer holds the
 * same calibration. */
int tfenc_output_write_calibration(tfenc_context *ctx, tfenc_output *out,
                             const tfenc_int8_calibration *calibration)
{
    /* A model without a product to run in int8 (a static-embedding model's
     * lookup and mean) has no map: nothing to record, and no group made
     * by a map's dataset to put the attributes on. */
    if (calibration == NULL || calibration->n_maps == 0)
        return TFENC_OK;
    int status = TFENC_OK;
    for (int i = 0; status == TFENC_OK && i < calibration->n_maps; i++) {
        char name[1200];
        snprintf(name, sizeof name, TFENC_CALIBRATION_GROUP "%s", calibration->maps[i]);
        hsize_t width = (hsize_t)calibration->widths[i];
        status = write_small_dataset(ctx, out, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 1,
                                     &width, calibration->ranges[i]);
    }
    hid_t group = -1;
    if (status == TFENC_OK &&
        (group = H5Gopen2(out->file, TFENC_CALIBRATION_GROUP, H5P_DEFAULT)) < 0)
        status = tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, out->path, "cannot open group '%s'",
                                        TFENC_CALIBRATION_GROUP);
    const struct { const char *name; const char *value; } texts[] = {
        {"sha256", calibration->sha256}, {"source", calibration->source},
        {"precision_steps", calibration->precision_steps},
        {"weights_sha256", calibration->weights_sha256}};
    for (size_t i = 0; status == TFENC_OK && i < sizeof texts / sizeof texts[0]; i++)
        status = write_string_attribute_of(ctx, out, group, texts[i].name, texts[i].value);
    if (status == TFENC_OK && calibration->heads != NULL)
        status = write_string_attribute_of(ctx, out, group, "heads", calibration->heads);
    if (status == TFENC_OK)
        status = write_attribute_of(ctx, out, group, "min_cosine", H5T_NATIVE_DOUBLE,
                                    &calibration->min_cosine);
    if (status == TFENC_OK)
        status = write_attribute_of(ctx, out, group, "sample_min_cosine", H5T_NATIVE_DOUBLE,
                                    &calibration->sample_min_cosine);
    if (status == TFENC_OK)
        status = write_attribute_of(ctx, out, group, "sample_documents", H5T_NATIVE_INT64,
                                    &calibration->sample_documents);
    if (group >= 0)
        H5Gclose(group);
    return status;
}

/* The corpus's files (output/corpus_shards.h), as the first writer found
 * them; the writers make the dataset together, so they agree on the width
 * of its paths first. Collective. */
int tfenc_output_write_corpus_shards(tfenc_context *ctx, tfenc_output *out,
                               const tfenc_corpus_shards *table)
{
    if (table == NULL)
        return TFENC_OK;
    unsigned long long path_size = tfenc_corpus_shards_path_size(table);
    if (out->writers != MPI_COMM_NULL
        && MPI_Allreduce(MPI_IN_PLACE, &path_size, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX,
                         out->writers) != MPI_SUCCESS)
        return tfenc_error(ctx, TFENC_ERR_MPI, "%s: writers could not agree on the width of "
                           "'corpus_shards'", out->path);
    hid_t file_type = tfenc_corpus_shards_type(path_size, 0);
    hid_t memory_type = tfenc_corpus_shards_type(path_size, 1);
    void *rows = tfenc_corpus_shards_pack(table, path_size);
    hsize_t n = (hsize_t)table->n;
    int status
        = file_type < 0 || memory_type < 0 ? tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, out->path,
                                                                    "cannot make the type of "
                                                                    "'corpus_shards'")
          : rows == NULL
              ? tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", out->path)
              : write_small_dataset(ctx, out, "corpus_shards", file_type, memory_type, 1, &n, rows);
    free(rows);
    if (file_type >= 0)
        H5Tclose(file_type);
    if (memory_type >= 0)
        H5Tclose(memory_type);
    return status;
}
