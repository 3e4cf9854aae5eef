/* Reopening an output to resume it: the file must be this job's (its
 * identity attributes), hold the datasets the description gives it
 * (output_description.h, through output_layout.c), and keep the checks'
 * rules (output_checks.h) over its finished part, before
 * a row is appended (docs/output.md, "Resuming"). */
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
#include "output/output_checks.h"
#include "output/output_internal.h"
#include "output/output_layout.h"
#include "output/quantize.h"

/* A resumed file keeps the ranges it was begun with: the rows written
 * before and after the resume must share their buckets. */
static int read_ranges(tfenc_context *ctx, tfenc_output *out)
{
    if (out->ranges == NULL)
        return TFENC_OK;
    hid_t dataset = H5Lexists(out->file, "quantization_ranges", H5P_DEFAULT) > 0
                        ? H5Dopen2(out->file, "quantization_ranges", H5P_DEFAULT)
                        : -1;
    hid_t space = dataset >= 0 ? H5Dget_space(dataset) : -1;
    hsize_t dims[2] = {0, 0};
    int ok = space >= 0 && H5Sget_simple_extent_ndims(space) == 2
             && H5Sget_simple_extent_dims(space, dims, NULL) == 2 && dims[0] == 2
             && dims[1] == (hsize_t)out->d_model;
    if (ok)
        ok = H5Dread(dataset, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out->ranges) >= 0;
    if (space >= 0)
        H5Sclose(space);
    if (dataset >= 0)
        H5Dclose(dataset);
    H5Eclear2(H5E_DEFAULT);
    if (!ok)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: has no dataset 'quantization_ranges' "
                           "[2, %d]: not a tfenc output of this job; refusing to append to it",
                           out->path, out->d_model);
    tfenc_quantize_steps(out->ranges, out->d_model, out->quantize_starts, out->quantize_steps);
    return TFENC_OK;
}

/* ------------------------------------------------------------------ reopen */

/* What a refusal quotes of a stored attribute: the whole value, however
 * long (a digest cut short cannot be compared by eye), within the one
 * line a message holds. */
#define FOUND_SIZE TFENC_MESSAGE_MAX

/* For multi-line attributes (job_settings): the first line that differs,
 * which says what changed better than the start of the text. */
static void describe_first_difference(const char *stored, const char *wanted, char *found,
                                      size_t found_size)
{
    for (;;) {
        size_t a = strcspn(stored, "\n"), b = strcspn(wanted, "\n");
        if (a != b || memcmp(stored, wanted, a) != 0 || (*stored == '\0') != (*wanted == '\0')) {
            snprintf(found, found_size, "'%.*s' where this job has '%.*s'", (int)a, stored,
                     (int)b, wanted);
            return;
        }
        if (*stored == '\0')
            return;
        stored += a + (stored[a] == '\n');
        wanted += b + (wanted[b] == '\n');
    }
}

/* What `found` says of an attribute that holds no value to compare: missing,
 * an array (a hostile or damaged file), or one value of another type. */
static void describe_absent(tfenc_output *out, const char *name, char *found, size_t found_size)
{
    if (H5Aexists(out->file, name) <= 0) {
        snprintf(found, found_size, "(missing)");
        H5Eclear2(H5E_DEFAULT);
        return;
    }
    hid_t attribute = H5Aopen(out->file, name, H5P_DEFAULT);
    hid_t space = attribute >= 0 ? H5Aget_space(attribute) : -1;
    hssize_t count = space >= 0 ? H5Sget_simple_extent_npoints(space) : -1;
    if (count != 1)
        snprintf(found, found_size, "an array of %lld values, not one", (long long)count);
    else
        snprintf(found, found_size, "(not one value of its type)");
    if (space >= 0)
        H5Sclose(space);
    if (attribute >= 0)
        H5Aclose(attribute);
    H5Eclear2(H5E_DEFAULT);
}

/* Compares a string attribute with what this job would write; returns 0 and
 * fills `found` when it differs or is missing. */
static int same_string_attribute(tfenc_output *out, const char *name, const char *expected,
                                 char *found, size_t found_size)
{
    char *value = tfenc_hdf5_attribute_string(out->file, name);
    if (value == NULL) {
        describe_absent(out, name, found, found_size);
        return 0;
    }
    const char *wanted = expected != NULL ? expected : "";
    int same = strcmp(value, wanted) == 0;
    snprintf(found, found_size, "'%s'", value);
    if (!same && strchr(value, '\n') != NULL)
        describe_first_difference(value, wanted, found, found_size);
    free(value);
    return same;
}

static char *stored_string(tfenc_output *out, const char *name)
{
    return tfenc_hdf5_attribute_string(out->file, name);
}

/* The digest the file's int8 calibration says it holds: NULL when the
 * file has no calibration, "" when its digest cannot be read. */
static char *stored_calibration_digest(tfenc_output *out)
{
    if (H5Lexists(out->file, TFENC_CALIBRATION_GROUP, H5P_DEFAULT) <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return NULL;
    }
    hid_t group = H5Gopen2(out->file, TFENC_CALIBRATION_GROUP, H5P_DEFAULT);
    char *digest = group >= 0 ? tfenc_hdf5_attribute_string(group, "sha256") : NULL;
    if (group >= 0)
        H5Gclose(group);
    H5Eclear2(H5E_DEFAULT);
    return digest != NULL ? digest : strdup("");
}

/* What a refusal to resume over changed input advises: resume = false
 * alone would overwrite the rows already finished. */
#define KEEP_THE_ROWS "restore it to resume; to run with it as it is now, choose another " \
    "[job] output, which keeps this file and its finished rows, where resume = false would " \
    "overwrite them"

/* The plugins' code, by content: a plugin rebuilt with other arithmetic
 * would mix two builds' rows in one file marked complete. */
static int check_plugins(tfenc_context *ctx, tfenc_output *out, const tfenc_output_options *options)
{
    char *expected = tfenc_output_plugins_text(options), found[FOUND_SIZE];
    if (expected == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", out->path);
    int status = TFENC_OK;
    if (!same_string_attribute(out, "plugins_sha256", expected, found, sizeof found)) {
        char *stored = stored_string(out, "plugins_sha256");
        int changed = -1;
        for (int i = 0; stored != NULL && changed < 0 && i < options->n_plugins; i++) {
            const char *name = strrchr(options->plugin_paths[i], '/');
            name = name != NULL ? name + 1 : options->plugin_paths[i];
            char line[1024];
            snprintf(line, sizeof line, "%s %s\n", name,
                     options->plugin_sha256[i] != NULL ? options->plugin_sha256[i] : "");
            int present = 0;
            for (const char *at = stored; !present && (at = strstr(at, line)) != NULL; at++)
                present = at == stored || at[-1] == '\n';
            if (!present)
                changed = i;
        }
        if (changed >= 0)
            status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                                 "%s: the plugin %s is not the one the run that began this file "
                                 "loaded (its SHA-256 differs from attribute 'plugins_sha256'); "
                                 "refusing to resume with changed code (" KEEP_THE_ROWS ")",
                                 out->path, options->plugin_paths[changed]);
        else
            status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                                 "%s: was written with other plugins: attribute 'plugins_sha256' "
                                 "is %s; refusing to resume with changed code (choose another "
                                 "[job] output, which keeps this file and its finished rows, "
                                 "where resume = false would overwrite them)", out->path, found);
        free(stored);
    }
    free(expected);
    return status;
}

/* The first row of `table` whose file has the name `name`, or -1. */
static int find_shard_name(const tfenc_corpus_shards *table, const char *name)
{
    for (int i = 0; i < table->n; i++)
        if (strcmp(tfenc_corpus_shard_name(table->shards[i].path), name) == 0)
            return i;
    return -1;
}

/* A shard is the same file when its name (the last component of its
 * path), its size and its fingerprint are: the rows depend on its content
 * and on its name (which may say its format), not on the directory it is
 * reached through. */
static int same_shard(const tfenc_corpus_shard *a, const tfenc_corpus_shard *b)
{
    return strcmp(tfenc_corpus_shard_name(a->path), tfenc_corpus_shard_name(b->path)) == 0
           && a->bytes == b->bytes && strcmp(a->fingerprint, b->fingerprint) == 0;
}

/* The file's table of shards: the dataset, or an older file's attribute.
 * TFENC_ERR_NOT_FOUND (no message) when it has neither. */
static int read_corpus_shards(tfenc_context *ctx, tfenc_output *out,
                              tfenc_corpus_shards *table)
{
    int status = tfenc_corpus_shards_read(ctx, out->path, out->file, table);
    if (status != TFENC_ERR_NOT_FOUND)
        return status;
    char *legacy = stored_string(out, "corpus_shards");
    status = legacy != NULL ? tfenc_corpus_shards_parse(ctx, out->path, legacy, table)
                            : TFENC_ERR_NOT_FOUND;
    free(legacy);
    return status;
}

/* A resume over another list of shards would mix two corpora's rows in one
 * file: the shards must be the same files (same_shard) in the same order,
 * wherever they are reached from (another working directory, the job file
 * named another way, a link to a directory). A refusal names the first
 * shard, in corpus order, that was added, removed or changed: with
 * thousands of shards, "the corpus changed" alone leaves the user to find
 * which. A corpus of one file before and after is left to the corpus
 * fingerprint, and so are files written before shards were recorded (no
 * table). *compared: the table was compared, which the corpus fingerprint
 * (over the same names and fingerprints, or in older files over the paths
 * as they were spelled) need not repeat. */
static int check_corpus_shards(tfenc_context *ctx, tfenc_output *out,
                               const tfenc_corpus_shards *wanted, int *compared)
{
    *compared = 0;
    tfenc_corpus_shards stored = {0};
    int status = wanted != NULL ? read_corpus_shards(ctx, out, &stored) : TFENC_ERR_NOT_FOUND;
    if (status != TFENC_OK || stored.n == 0 || (stored.n == 1 && wanted->n == 1)) {
        tfenc_corpus_shards_free(&stored);
        return status == TFENC_ERR_NOT_FOUND ? TFENC_OK : status;
    }
    *compared = 1;
    const int n = stored.n > wanted->n ? stored.n : wanted->n;
    for (int i = 0; status == TFENC_OK && i < n; i++) {
        const tfenc_corpus_shard *was = i < stored.n ? &stored.shards[i] : NULL;
        const tfenc_corpus_shard *is = i < wanted->n ? &wanted->shards[i] : NULL;
        if (was != NULL && is != NULL && same_shard(was, is))
            continue;
        const char *what = "is not where the run that began this file read it (the shards are "
                           "in another order, or one of the same name was added or removed)";
        const tfenc_corpus_shard *named = is != NULL ? is : was;
        if (was != NULL && is != NULL
            && strcmp(tfenc_corpus_shard_name(was->path), tfenc_corpus_shard_name(is->path)) == 0)
            what = "changed since the run that began this file read it";
        else if (was != NULL && find_shard_name(wanted, tfenc_corpus_shard_name(was->path)) < 0)
            what = "was read by the run that began this file and is no longer in the corpus",
            named = was;
        else if (is != NULL && find_shard_name(&stored, tfenc_corpus_shard_name(is->path)) < 0)
            what = "was not in the corpus of the run that began this file";
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: shard %s %s; refusing to resume with "
                             "changed input (" KEEP_THE_ROWS ")", out->path, named->path, what);
    }
    tfenc_corpus_shards_free(&stored);
    return status;
}

static int same_int_attribute(tfenc_output *out, const char *name, int64_t expected,
                              char *found, size_t found_size)
{
    int64_t value = 0;
    if (!tfenc_hdf5_attribute_number(out->file, name, H5T_INTEGER, H5T_NATIVE_INT64, &value)) {
        describe_absent(out, name, found, found_size);
        return 0;
    }
    snprintf(found, found_size, "%lld", (long long)value);
    return value == expected;
}

/* Rows of unit length or not, as this job makes them. A file begun before
 * tfenc recorded it holds the rows that version made: the same, but for
 * chunk means of a normalising model, which it left shorter than unit. */
static int check_unit_norm(tfenc_context *ctx, tfenc_output *out,
                           const tfenc_output_options *options)
{
    char found[FOUND_SIZE];
    if (same_int_attribute(out, "unit_norm", options->unit_norm != 0, found, sizeof found))
        return TFENC_OK;
    if (strcmp(found, "(missing)") != 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: was written by a different job: "
                           "attribute 'unit_norm' is %s, and this job's rows %s unit length; "
                           "refusing to append to it (remove it, choose another output, or "
                           "set [job] resume = false to overwrite it)", out->path, found,
                           options->unit_norm ? "have" : "do not have");
    if (options->unit_chunk_means)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: was begun by an older tfenc, whose "
                           "chunk means are not scaled back to unit length as this version's "
                           "are; refusing to mix both in one file (finish it with that "
                           "version, or set [job] resume = false to start over)", out->path);
    return TFENC_OK;
}

/* The model that encoded the rows: a resume runs the same precision (a CPU
 * without bf16 runs fp32 instead: rows of two precisions in one file are
 * no one model's) and, at int8, the same calibration (output/calibration.h).
 * A file of a tfenc that recorded neither is let be. */
static int check_model(tfenc_context *ctx, tfenc_output *out, const tfenc_output_options *options)
{
    char found[FOUND_SIZE];
    if (options->precision != NULL &&
        !same_string_attribute(out, "precision", options->precision, found, sizeof found) &&
        strcmp(found, "(missing)") != 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: was begun at precision %s and this run "
                           "runs precision = %s; refusing to mix the rows of two precisions in "
                           "one file (resume it where that precision runs, or set [job] resume "
                           "= false to start over)", out->path, found, options->precision);
    char *stored = stored_calibration_digest(out);
    const tfenc_int8_calibration *wanted = options->calibration;
    int status = TFENC_OK;
    if (stored != NULL && wanted == NULL)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: was begun at precision = int8 with the "
                             "int8 calibration it records, and this run runs precision = %s; "
                             "refusing to mix the rows of two models in one file (set [job] "
                             "resume = false to start over)", out->path,
                             options->precision != NULL ? options->precision : "(none)");
    else if (stored != NULL && strcmp(stored, wanted->sha256) != 0)
        status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: was begun with another int8 calibration "
                             "(attribute '" TFENC_CALIBRATION_GROUP "/sha256' is '%s', "
                             "this run's is '%s', %s); refusing to continue it with "
                             "another (give [model] calibration the file it was begun with, or "
                             "set [job] resume = false to start over)", out->path,
                             stored[0] != '\0' ? stored : "(missing)", wanted->sha256,
                             wanted->source);
    free(stored);
    return status;
}

/* The file must be this job's, attribute by attribute: the settings that
 * shape the rows, the corpus's files, the inputs' and the plugins'
 * content, the sizes. */
static int check_identity(tfenc_context *ctx, tfenc_output *out,
                          const tfenc_output_options *options)
{
    char found[FOUND_SIZE];
    int status = TFENC_OK;
    const struct { const char *name; const char *expected; } strings[] = {
        {"job_settings", options->job_settings},
        {"weights_sha256", options->weights_sha256},
        {"output_kind", out->kind->name},
        {"chunks", tfenc_name_of(tfenc_output_chunks_names, TFENC_CHUNKS_COUNT, out->chunks)},
        {"dtype", tfenc_output_dtype_name(out->dtype)},
        {"compression", out->compress ? "gzip" : "none"}};
    for (size_t i = 0; status == TFENC_OK && i < sizeof strings / sizeof strings[0]; i++)
        if (!same_string_attribute(out, strings[i].name, strings[i].expected, found,
                                   sizeof found))
            status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: was written by a different job: "
                                 "attribute '%s' is %s; refusing to append to it (remove "
                                 "it, choose another output, or set [job] resume = false to "
                                 "overwrite it)", out->path,
                                 strings[i].name, found);
    int shards_compared = 0;
    if (status == TFENC_OK)
        status = check_corpus_shards(ctx, out, options->corpus_shards, &shards_compared);
    /* The inputs, by content: an edited or swapped corpus of the same size
     * would otherwise mix two corpora's rows in one file. */
    const struct { const char *name, *what, *path, *expected; int wanted; } inputs[] = {
        {"corpus_fingerprint", "the corpus", options->corpus_path, options->corpus_fingerprint,
         !shards_compared},
        {"vocabulary_fingerprint", "the vocabulary", options->vocabulary_path,
         options->vocabulary_fingerprint, 1}};
    for (size_t i = 0; status == TFENC_OK && i < sizeof inputs / sizeof inputs[0]; i++)
        if (inputs[i].wanted
            && !same_string_attribute(out, inputs[i].name, inputs[i].expected, found,
                                      sizeof found))
            status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                                 "%s: %s %s is not the one the run that began this file read "
                                 "(attribute '%s' is %s); refusing to resume with changed "
                                 "input (" KEEP_THE_ROWS ")",
                                 out->path, inputs[i].what,
                                 inputs[i].path != NULL ? inputs[i].path : "(none)",
                                 inputs[i].name, found);
    if (status == TFENC_OK)
        status = check_plugins(ctx, out, options);
    if (status == TFENC_OK)
        status = check_unit_norm(ctx, out, options);
    if (status == TFENC_OK)
        status = check_model(ctx, out, options);
    const struct { const char *name; int64_t expected; int wanted; } numbers[] = {
        {"d_model", out->d_model, 1},
        {"n_documents", out->n_documents, 1},
        {"n_tokens", out->n_tokens, tfenc_output_per_token(out->kind)},
        {"n_chunks", out->n_tokens, out->chunks == TFENC_CHUNKS_EACH}};
    for (size_t i = 0; status == TFENC_OK && i < sizeof numbers / sizeof numbers[0]; i++)
        if (numbers[i].wanted
            && !same_int_attribute(out, numbers[i].name, numbers[i].expected, found, sizeof found))
            status = tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: attribute '%s' is %s but this job "
                                 "has %lld (has the corpus changed?); refusing to append to it",
                                 out->path, numbers[i].name, found,
                                 (long long)numbers[i].expected);
    return status;
}

/* The datasets this job writes into, as the description gives them
 * (output_layout.c), then what the checks (output_checks.h) hold every
 * tfenc output to: the attributes' domains, and the description's rules
 * over the documents the file marks
 * finished (offsets from 0 and never decreasing, runs agreeing with the
 * lengths, CSR columns in the vocabulary, document_source inside
 * corpus_shards, ...), read in bounded blocks. A damaged file is refused
 * before a row is appended to it, in one line naming the file and the
 * dataset or attribute. */
static int open_existing_datasets(tfenc_context *ctx, tfenc_output *out,
                                  const tfenc_output_options *options)
{
    int status = tfenc_output_layout_reopen(ctx, out, options);
    if (status == TFENC_OK)
        status = read_ranges(ctx, out);
    if (status != TFENC_OK)
        return status;
    tfenc_output_census census;
    status = tfenc_output_check_attributes(ctx, out->path, out->file);
    if (status == TFENC_OK)
        status = tfenc_output_check_datasets(ctx, out->path, out->file, &census);
    if (status != TFENC_OK && status != TFENC_ERR_NO_MEMORY)
        status = tfenc_error_prefix(ctx, status, "refusing to resume");
    H5Eclear2(H5E_DEFAULT);
    return status;
}

/* Incomplete again until this run finishes; the layout, the job text and
 * the run's attributes are this run's. *was_complete: the file said 1. */
static int mark_reopened(tfenc_context *ctx, tfenc_output *out,
                         const tfenc_output_options *options, int *was_complete)
{
    char found[FOUND_SIZE];
    same_int_attribute(out, "complete", 1, found, sizeof found);
    *was_complete = strcmp(found, "1") == 0;
    int32_t zero = 0;
    int status = tfenc_output_write_attribute(ctx, out, "complete", H5T_NATIVE_INT32, &zero);
    if (status == TFENC_OK)
        status = tfenc_output_write_string(ctx, out, "layout", options->layout);
    if (status == TFENC_OK)
        status = tfenc_output_write_string(ctx, out, "job", options->job_text);
    if (status == TFENC_OK)
        status = tfenc_output_write_run_attributes(ctx, out, options);
    /* A file of an older tfenc that passed check_unit_norm gets it. */
    if (status == TFENC_OK)
        status = tfenc_output_write_unit_norm(ctx, out, options);
    if (status == TFENC_OK && H5Fflush(out->file, H5F_SCOPE_GLOBAL) < 0)
        status = tfenc_output_hdf5_fail(ctx, TFENC_ERR_IO, out->path,
                                        "cannot flush the reopened file");
    return status;
}

int tfenc_output_reopen(tfenc_context *ctx, MPI_Comm writers, const tfenc_output_options *options,
                        tfenc_output **out_result, int *was_complete)
{
    tfenc_output *out = NULL;
    *was_complete = 0;
    int status = tfenc_output_prepare(ctx, writers, options, &out);
    *out_result = NULL;
    if (status != TFENC_OK)
        return status;
    /* Absent on every rank alike (the path is on a shared file system).
     * An empty file is no output either: the job's lock makes the file
     * before HDF5 creates it (core/output/ownership.h). */
    struct stat existing;
    if (stat(out->path, &existing) != 0 || existing.st_size == 0) {
        tfenc_output_close(out);
        return TFENC_ERR_NOT_FOUND;
    }
    /* HDF5 compresses whole chunks in memory: a killed job's compressed
     * file cannot say which rows reached the disk. */
    if (out->compress) {
        status = tfenc_error(ctx, TFENC_ERR_CONFIG,
                             "%s exists and compressed output cannot be resumed: remove it, or "
                             "set [job] resume = false to overwrite it (for long jobs write "
                             "compression = none and h5repack afterwards)",
                             out->path);
        tfenc_output_close(out);
        return status;
    }
    int complete = 0;
    status = tfenc_output_open_file(ctx, out, writers, out->n_writers, 0);
    if (status == TFENC_OK)
        status = check_identity(ctx, out, options);
    if (status == TFENC_OK)
        status = open_existing_datasets(ctx, out, options);
    if (status == TFENC_OK)
        status = mark_reopened(ctx, out, options, &complete);
    out->reopened = 1;
    if (status != TFENC_OK) {
        tfenc_output_close(out);
        return status;
    }
    *was_complete = complete;
    *out_result = out;
    return TFENC_OK;
}
