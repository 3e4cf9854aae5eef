/* The per-rank summary and the remembered throughput. */
#include "run/run_report.h"

#include "base/context.h"
#include "base/files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

static double fraction(double part, double whole)
{
    return whole > 0 ? part / whole : 0.0;
}

/* A "Name: N kB" field of a /proc file (`format` is its sscanf pattern),
 * or -1 when the file or the field is missing. */
static long proc_kib(const char *path, const char *format)
{
    long kib = -1;
    FILE *file = fopen(path, "r");
    char line[256];
    while (file != NULL && fgets(line, sizeof line, file) != NULL)
        if (sscanf(line, format, &kib) == 1)
            break;
    if (file != NULL)
        fclose(file);
    return kib;
}

/* This process's peak resident memory in KiB. VmHWM, not getrusage's
 * ru_maxrss: the latter also counts what the process was before exec (a
 * Python that launched tfenc-batch, say). */
static long peak_rss_kib(void)
{
    long kib = proc_kib("/proc/self/status", "VmHWM: %ld kB");
    if (kib <= 0) {
        struct rusage usage;
        getrusage(RUSAGE_SELF, &usage);
        kib = usage.ru_maxrss;
    }
    return kib;
}

double tfenc_peak_rss_mib(void)
{
    return (double)peak_rss_kib() / 1024.0;
}

static void remember_flop_rate(double flops_per_second_per_rank);

double tfenc_proportional_mib(void)
{
    long kib = proc_kib("/proc/self/smaps_rollup", "Pss: %ld kB");
    if (kib < 0)
        kib = proc_kib("/proc/self/status", "VmRSS: %ld kB");
    return kib > 0 ? (double)kib / 1024.0 : 0.0;
}

/* What the fullest node holds: the sum of its ranks' proportional set
 * sizes, its shared weights and its rank count, on rank 0. */
static void node_memory(MPI_Comm world, double shared_mib, tfenc_run_summary *summary)
{
    MPI_Comm node;
    int rank = 0, node_ranks = 1;
    MPI_Comm_rank(world, &rank);
    MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &node_ranks);
    double mine = tfenc_proportional_mib(), sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, node);
    MPI_Comm_free(&node);
    struct {
        double value;
        int rank;
    } local = {sum, rank}, fullest = {0, 0};
    MPI_Allreduce(&local, &fullest, 1, MPI_DOUBLE_INT, MPI_MAXLOC, world);
    double facts[2] = {shared_mib, (double)node_ranks};
    if (fullest.rank != 0 && rank == fullest.rank)
        MPI_Send(facts, 2, MPI_DOUBLE, 0, 0, world);
    if (rank == 0 && fullest.rank != 0)
        MPI_Recv(facts, 2, MPI_DOUBLE, fullest.rank, 0, world, MPI_STATUS_IGNORE);
    summary->node_memory_mib = fullest.value;
    summary->node_shared_mib = facts[0];
    summary->node_ranks = (int)facts[1];
}

void tfenc_run_summary_gather(MPI_Comm world, const tfenc_rank_work *mine, int64_t documents,
                              int64_t truncated_documents, int64_t tokens, double wall_seconds,
                              tfenc_run_summary *summary)
{
    int rank = 0, n_ranks = 1;
    MPI_Comm_rank(world, &rank);
    MPI_Comm_size(world, &n_ranks);
    memset(summary, 0, sizeof *summary);
    tfenc_rank_work own = *mine;
    own.peak_rss_mib = tfenc_peak_rss_mib();
    int64_t counts[3] = {documents, truncated_documents, tokens}, totals[3] = {0, 0, 0};
    MPI_Reduce(counts, totals, 3, MPI_INT64_T, MPI_SUM, 0, world);
    tfenc_run_summary node = {0};
    node_memory(world, own.shared_mib, &node);
    tfenc_rank_work *all = rank == 0 ? calloc((size_t)n_ranks, sizeof *all) : NULL;
    /* Every rank takes part even when rank 0 could not allocate. */
    MPI_Gather(&own, (int)sizeof own, MPI_BYTE, all, (int)sizeof own, MPI_BYTE, 0, world);
    if (rank != 0 || all == NULL)
        return;
    summary->documents = totals[0];
    summary->truncated_documents = totals[1];
    summary->tokens = totals[2];
    summary->wall_seconds = wall_seconds;
    summary->n_ranks = n_ranks;
    summary->ranks = all;
    summary->node_memory_mib = node.node_memory_mib;
    summary->node_shared_mib = node.node_shared_mib;
    summary->node_ranks = node.node_ranks;
    double busy_sum = 0, busy_max = 0, flops = 0, idle_sum = 0;
    for (int i = 0; i < n_ranks; i++) {
        const tfenc_rank_work *w = &all[i];
        if (w->encode_seconds > summary->encode_seconds)
            summary->encode_seconds = w->encode_seconds;
        if (w->peak_rss_mib > summary->peak_rss_mib)
            summary->peak_rss_mib = w->peak_rss_mib;
        summary->encode_cpu_seconds += w->encode_cpu_seconds;
        busy_sum += w->busy_seconds;
        if (w->busy_seconds > busy_max)
            busy_max = w->busy_seconds;
        flops += w->flops;
        double idle = w->encode_seconds - w->busy_seconds - w->writing_seconds;
        idle_sum += fraction(idle > 0 ? idle : 0, w->encode_seconds);
    }
    summary->flops_per_rank = fraction(flops, summary->encode_seconds * n_ranks);
    summary->load_imbalance = fraction(busy_max, busy_sum / n_ranks);
    summary->mean_idle_fraction = idle_sum / n_ranks;
    if (summary->flops_per_rank > 0)
        remember_flop_rate(summary->flops_per_rank);
}

char *tfenc_run_summary_json(const tfenc_run_summary *summary, int finished)
{
    json_t *ranks = json_array();
    for (int i = 0; ranks != NULL && i < summary->n_ranks; i++) {
        const tfenc_rank_work *w = &summary->ranks[i];
        json_array_append_new(ranks, json_pack("{s:i, s:I, s:f, s:f}", "rank", i,
                                               "tokens", (json_int_t)w->tokens,
                                               "encode_seconds", w->encode_seconds,
                                               "tokens_per_second",
                                               fraction((double)w->tokens, w->encode_seconds)));
    }
    /* "o": the object takes the array, also when packing fails. */
    json_t *run = json_pack("{s:b, s:f, s:I, s:I, s:o}", "finished", finished, "elapsed_seconds",
                            summary->wall_seconds, "documents", (json_int_t)summary->documents,
                            "tokens", (json_int_t)summary->tokens, "ranks", ranks);
    char *text = run != NULL ? json_dumps(run, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(run);
    return text;
}

void tfenc_run_summary_free(tfenc_run_summary *summary)
{
    free(summary->ranks);
    summary->ranks = NULL;
}

static char *throughput_path(void)
{
    const char *cache = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    char *path = NULL;
    size_t size;
    if (cache != NULL && cache[0] != '\0') {
        size = strlen(cache) + 32;
        path = malloc(size);
        if (path != NULL)
            snprintf(path, size, "%s/tfenc/throughput", cache);
    } else if (home != NULL && home[0] != '\0') {
        size = strlen(home) + 40;
        path = malloc(size);
        if (path != NULL)
            snprintf(path, size, "%s/.cache/tfenc/throughput", home);
    }
    return path;
}

double tfenc_run_last_flop_rate(void)
{
    char *path = throughput_path();
    double rate = 0;
    /* A regular file only (core/base/files.h): a FIFO in its place blocked
     * every --dry-run and job forever. Best effort: no message. */
    tfenc_context quiet;
    tfenc_context_init(&quiet);
    char *text = NULL;
    size_t length = 0;
    if (path != NULL && tfenc_file_read_all(&quiet, "throughput file", path, 4096, &text,
                                            &length) == TFENC_OK) {
        if (sscanf(text, "%lf", &rate) != 1 || !(rate > 0))
            rate = 0;
    }
    free(text);
    free(path);
    return rate;
}

/* Best effort: a read-only home only loses the estimate. */
static void remember_flop_rate(double flops_per_second_per_rank)
{
    char *path = throughput_path();
    if (path == NULL)
        return;
    char *slash = strrchr(path, '/');
    *slash = '\0';
    char *parent = strrchr(path, '/');
    if (parent != NULL) {
        *parent = '\0';
        mkdir(path, 0755);
        *parent = '/';
    }
    mkdir(path, 0755);
    *slash = '/';
    /* Written beside it and renamed over it: concurrent jobs on one node
     * (every job's rank 0 remembers its rate) then never read a truncated
     * or half-written figure; nothing at the path is opened or followed. */
    struct stat existing;
    if (lstat(path, &existing) == 0 && !S_ISREG(existing.st_mode)) {
        /* Not ours to replace: someone put it there. */
        free(path);
        return;
    }
    size_t temporary_size = strlen(path) + 8;
    char *temporary = malloc(temporary_size);
    if (temporary == NULL) {
        free(path);
        return;
    }
    snprintf(temporary, temporary_size, "%s.XXXXXX", path);
    int fd = mkstemp(temporary);
    FILE *file = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (fd >= 0 && file == NULL)
        close(fd);
    bool written = false;
    if (file != NULL) {
        written = fprintf(file, "%.6g FLOP/s per rank, measured by tfenc-batch\n",
                          flops_per_second_per_rank) > 0;
        written = fclose(file) == 0 && written;
    }
    if (fd >= 0 && (!written || rename(temporary, path) != 0))
        unlink(temporary);
    free(temporary);
    free(path);
}
