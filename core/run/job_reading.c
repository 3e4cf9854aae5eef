/* Reading the job (run/job_reading.h): the file, its [model] and [job]
 * keys, the plugins and the weights, and the state of every file it names,
 * kept to tell whether one changed while the job read it. */
#include "config.h"

#include "run/job_reading.h"
#include "run/heads.h"

#include "base/sha256.h"
#include "matrix/matrix.h"
#include "ranks/agreement.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Open MPI binds each rank to one core by default, also a rank started
 * without mpiexec: the rank's threads would then share that core and run
 * slower than one thread. Or the job asks for more threads than the
 * machine has cores. Said once, by rank 0, as advice. */
static void warn_about_binding(tfenc_run *r)
{
    cpu_set_t cores;
    int threads = tfenc_matrix_threads();
    if (r->rank != 0 || threads < 2 || sched_getaffinity(0, sizeof cores, &cores) != 0)
        return;
    int usable = CPU_COUNT(&cores);
    if (usable < threads && usable < sysconf(_SC_NPROCESSORS_ONLN))
        tfenc_run_notice(
            r,
            "warning: %d threads per rank but this rank may run on %d core%s "
            "(MPI binds ranks to cores): start with mpiexec --bind-to none (or set "
            "OMPI_MCA_hwloc_base_binding_policy=none), or use 1 thread and more ranks",
            threads, usable, usable == 1 ? "" : "s");
    else if (usable < threads)
        tfenc_run_notice(
            r,
            "warning: %d threads per rank but this machine has %d core%s: threads wait "
            "for a core; set [job] threads = %d",
            threads, usable, usable == 1 ? "" : "s", usable);
}

/* The file as it was, for telling whether anything changed it since: a
 * write or a truncation moves its size or modification time. */
static int same_state(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Rank 0: the state of every file a path key of the job names (the list
 * of core/job/params.h), taken before the job reads their data, so that a
 * file changed while the job read it is found: the weights and the
 * tokenizer's file before their checksums are recorded, the corpus also
 * before the output is marked complete. */
static int watch_input(void *user, const char *what, const char *setting, const char *path)
{
    tfenc_run *r = user;
    tfenc_watched_file *grown =
        realloc(r->state.watched, ((size_t)r->state.n_watched + 1) * sizeof *grown);
    if (grown == NULL)
        return tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    r->state.watched = grown;
    tfenc_watched_file *file = &r->state.watched[r->state.n_watched];
    size_t size = strlen(what) + strlen(setting) + 4;
    file->what = malloc(size);
    file->path = strdup(path);
    if (file->what == NULL || file->path == NULL) {
        free(file->what);
        free(file->path);
        return tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    }
    snprintf(file->what, size, "%s (%s)", what, setting);
    r->state.n_watched++;
    /* A file that is not there yet is the reader's to report, in its own
     * words; one that appears later counts as changed. */
    if (stat(path, &file->state) != 0)
        memset(&file->state, 0, sizeof file->state);
    return TFENC_OK;
}

/* TFENC_ERR_IO naming the first watched file (or, with `only` not NULL,
 * the first of those that are `only` to the job, e.g. "the corpus") that
 * is no longer as it was. */
int tfenc_run_check_watched(tfenc_run *r, const char *only)
{
    for (int i = 0; i < r->state.n_watched; i++) {
        const tfenc_watched_file *file = &r->state.watched[i];
        struct stat now;
        if (only != NULL && strncmp(file->what, only, strlen(only)) != 0)
            continue;
        if (stat(file->path, &now) != 0 || !same_state(&now, &file->state))
            return tfenc_error(r->ctx, TFENC_ERR_IO,
                               "%s: %s changed while this job read it (its size or "
                               "modification time is not what it was when the job began): the "
                               "output would hold rows of two versions of it, or record the "
                               "checksum of bytes the job did not use; run the job again once "
                               "the file is whole",
                               file->path, file->what);
    }
    return TFENC_OK;
}

void tfenc_run_free_watched(tfenc_run *r)
{
    for (int i = 0; i < r->state.n_watched; i++) {
        free(r->state.watched[i].what);
        free(r->state.watched[i].path);
    }
    free(r->state.watched);
}

/* Rank 0: a weights file's SHA-256, taken as the job opens it and before
 * any layer reads it; open_output() records it only if the file is still
 * the same then (check_watched), so that the checksum is of the bytes the
 * layers used. */
static int hash_weights_file(tfenc_run *r, const char *path, char sha256[65])
{
    struct stat before, after;
    if (stat(path, &before) != 0)
        return tfenc_error(r->ctx, TFENC_ERR_IO, "weights %s: cannot examine it", path);
    int status = tfenc_sha256_file(r->ctx, path, sha256);
    if (status == TFENC_OK && (stat(path, &after) != 0 || !same_state(&after, &before)))
        status = tfenc_error(r->ctx, TFENC_ERR_IO, "weights %s: the file changed while this "
                             "job computed its SHA-256; run the job again once it is whole",
                             path);
    return status;
}

/* Rank 0: [model] weights', then each layer's weights_file's: a head
 * swapped for another in the same file name changes the rows as much as
 * other encoder weights do. */
int tfenc_run_hash_weights(tfenc_run *r)
{
    int status = hash_weights_file(r, r->settings.model.weights_path, r->settings.weights_sha256);
    const int n_steps = tfenc_model_plan_count_every_step(&r->settings.steps);
    for (int i = 0; status == TFENC_OK && i < n_steps; i++) {
        const tfenc_step_plan *step = tfenc_model_plan_every_step(&r->settings.steps, i);
        if (step->weights_file != NULL)
            status = hash_weights_file(r, step->weights_file, r->settings.weights_file_sha256[i]);
    }
    return status;
}

/* Rank 0, once tfenc_run_hash_weights() has run: the digest an int8 calibration
 * records as the weights it is of, [model] weights' SHA-256; with layers'
 * weights_files, the SHA-256 of that and of each file's "NAME SHA256" line,
 * so that a calibration made with one head is not taken for another (its
 * maps' input ranges follow the head's own earlier maps). */
void tfenc_run_calibration_weights_digest(const tfenc_run *r, char digest[65])
{
    char lines[4096];
    size_t used = (size_t)snprintf(lines, sizeof lines, "%s\n", r->settings.weights_sha256);
    int heads = 0;
    const int n_steps = tfenc_model_plan_count_every_step(&r->settings.steps);
    for (int i = 0; i < n_steps && used < sizeof lines; i++) {
        const tfenc_step_plan *step = tfenc_model_plan_every_step(&r->settings.steps, i);
        if (step->weights_file != NULL) {
            used += (size_t)snprintf(lines + used, sizeof lines - used, "%.256s %s\n",
                                     step->name, r->settings.weights_file_sha256[i]);
            heads++;
        }
    }
    if (heads == 0)
        memcpy(digest, r->settings.weights_sha256, 65);
    else
        tfenc_sha256_hex(lines, used < sizeof lines ? used : sizeof lines - 1, digest);
}

/* The job, the model's plan and the layout check: identical on every rank,
 * so errors here are reported once. */
int tfenc_run_read_job(tfenc_run *r)
{
    const tfenc_run_request *q = r->settings.request;
    int status = tfenc_jobfile_load(r->ctx, q->job_path, &r->settings.job_file);
    for (int i = 0; status == TFENC_OK && i < q->n_overrides; i++)
        status = tfenc_jobfile_override(r->ctx, r->settings.job_file, q->overrides[i]);
    if (status == TFENC_OK)
        status = tfenc_model_config_read(r->ctx, r->settings.job_file, &r->settings.model);
    /* Before any weight is loaded: what this CPU runs of the precision
     * asked for, said in one line where it lacks an instruction set. */
    if (status == TFENC_OK) {
        char line[512];
        tfenc_precision runs;
        if (tfenc_matrix_describe(r->settings.model.precision, &runs, line, sizeof line))
            tfenc_run_notice(r, "%s", line);
        r->settings.model.precision = runs;
    }
    if (status == TFENC_OK)
        status = tfenc_job_settings_read(r->ctx, r->settings.job_file, &r->settings.model,
                                         &r->settings.job);
    if (status == TFENC_OK)
        status = tfenc_model_plan_read(r->ctx, r->settings.job_file, &r->settings.steps);
    if (status == TFENC_OK)
        status = tfenc_heads_check_job(r->ctx, r->settings.job_file->path, &r->settings.steps,
                                       r->settings.job.late_chunk ? "late_chunk"
                                       : r->settings.job.chunks != TFENC_CHUNKS_OFF ? "chunk"
                                                                                    : NULL);
    if (status == TFENC_OK) {
        char where[512];
        snprintf(where, sizeof where, "%s: [job]", r->settings.job_file->path);
        status = tfenc_layout_place(r->ctx, where, r->rank, r->n_ranks,
                                    (int)r->settings.job.pipeline_stages, r->settings.steps.n_steps,
                                    &r->plan.layout);
    }
    if (status == TFENC_OK)
        tfenc_matrix_set_threads((int)r->settings.job.threads);
    /* Which kernels run, known before any map is made: an fp32 library
     * older than the CPU is said in one line (a job's fp32 bits and speed
     * follow it; the output records the line of describe_kernels). */
    if (status == TFENC_OK)
        status = tfenc_matrix_load(r->ctx);
    if (status == TFENC_OK) {
        char line[512];
        if (tfenc_matrix_describe_fallback(line, sizeof line))
            tfenc_run_notice(r, "%s", line);
    }
    if (status == TFENC_OK)
        warn_about_binding(r);
    if (status == TFENC_OK)
        status =
            tfenc_plugin_registry_create(r->ctx, r->settings.model.plugin_path,
                                         r->settings.job_file->directory, &r->settings.registry);
    for (int i = 0;
         status == TFENC_OK && i < tfenc_plugin_registry_n_warnings(r->settings.registry); i++)
        tfenc_run_notice(r, "warning: %s", tfenc_plugin_registry_warning(r->settings.registry, i));
    /* Only the plugin files of the types this job names (core/plugin/plugin_loader.h). */
    if (status == TFENC_OK)
        status = tfenc_plugin_registry_load_job(r->ctx, r->settings.registry, r->settings.job_file);
    if (status == TFENC_OK)
        status = tfenc_weight_store_open(r->ctx, r->settings.model.weights_path, &r->plan.weights);
    if (status == TFENC_OK)
        status = tfenc_model_attach_weights_files(r->ctx, r->settings.job_file, &r->settings.steps,
                                                  r->plan.weights);
    if (status == TFENC_OK &&
        (r->settings.weights_file_sha256 =
             calloc((size_t)tfenc_model_plan_count_every_step(&r->settings.steps),
                    sizeof *r->settings.weights_file_sha256)) == NULL)
        status = tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory");
    if (status == TFENC_OK && r->rank == 0 && !r->settings.request->dry_run)
        status = tfenc_jobfile_each_input(r->settings.job_file, watch_input, r);
    /* The corpus's files ([job] input: a file, a directory, a glob, @list). */
    for (int i = 0; status == TFENC_OK && r->rank == 0 && !r->settings.request->dry_run &&
                    i < r->settings.job.sources.n; i++)
        status = watch_input(r, "the corpus", "[job] input", r->settings.job.sources.paths[i]);
    if (status == TFENC_OK && r->rank == 0 && !r->settings.request->dry_run)
        status = tfenc_run_hash_weights(r);
    return status;
}

/* Every rank expands [job] input (a glob, a directory, a list file) on its
 * own node; the windows are numbered over rank 0's list, so a node that
 * sees other files (a file system not yet in sync, shards still being
 * written) would encode another corpus under the same numbers. */
int tfenc_run_same_sources(tfenc_run *r)
{
    const tfenc_sources *sources = &r->settings.job.sources;
    size_t length = 0;
    for (int i = 0; i < sources->n; i++)
        length += strlen(sources->paths[i]) + 1;
    char *joined = malloc(length + 1);
    if (joined == NULL)
        return tfenc_run_agree_on_failure(
            r, tfenc_error(r->ctx, TFENC_ERR_NO_MEMORY, "out of memory"));
    size_t used = 0;
    for (int i = 0; i < sources->n; i++) {
        size_t n = strlen(sources->paths[i]);
        memcpy(joined + used, sources->paths[i], n);
        joined[used + n] = '\n';
        used += n + 1;
    }
    int other = -1;
    long fewest = 0, most = 0;
    tfenc_ranks_compare(MPI_COMM_WORLD, joined, used, (long)sources->n, &other, &fewest, &most);
    free(joined);
    if (other < 0)
        return 0;
    int status =
        tfenc_error(r->ctx, TFENC_ERR_CONFIG,
                    "%s: [job] input = %s: rank %d sees "
                    "other files than rank 0 (%ld to %ld files over the ranks): every "
                    "node must see the same corpus",
                    r->settings.job_file->path, r->settings.job.input, other, fewest, most);
    return tfenc_run_agree_on_failure(r, r->rank == 0 ? status : TFENC_ERR_MPI);
}
