/* Progress lines, the per-rank summary, and the remembered throughput. */
#include "report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

static const char *program = "tfenc-batch";

double report_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void report_progress(progress *p, int64_t documents_done, int64_t tokens_done, int final)
{
    if (!p->enabled)
        return;
    double now = report_now();
    if (!final && now - p->last < (p->terminal ? 0.5 : p->interval))
        return;
    p->last = now;
    double elapsed = now - p->start;
    double rate = elapsed > 0 ? (double)tokens_done / elapsed : 0.0;
    double fraction =
        p->share_documents > 0 ? (double)documents_done / (double)p->share_documents : 1.0;
    double eta = fraction > 0 ? elapsed / fraction - elapsed : 0.0;
    char line[256];
    snprintf(line, sizeof line, "%s%lld/%lld documents, %.0f tokens/s, ETA %.0f s",
             p->n_ranks > 1 ? "rank 0: " : "", (long long)documents_done,
             (long long)p->share_documents, rate, eta);
    if (p->terminal)
        fprintf(stderr, "\r%s\033[K%s", line, final ? "\n" : "");
    else
        fprintf(stderr, "%s: %s\n", program, line);
}

static double fraction(double part, double whole)
{
    return whole > 0 ? part / whole : 0.0;
}

/* This process's peak resident memory in KiB. VmHWM, not getrusage's
 * ru_maxrss: the latter also counts what the process was before exec (a
 * Python that launched tfenc-batch, say). */
static long peak_rss_kib(void)
{
    long kib = 0;
    FILE *status = fopen("/proc/self/status", "r");
    char line[256];
    while (status != NULL && fgets(line, sizeof line, status) != NULL)
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
            break;
    if (status != NULL)
        fclose(status);
    if (kib == 0) {
        struct rusage usage;
        getrusage(RUSAGE_SELF, &usage);
        kib = usage.ru_maxrss;
    }
    return kib;
}

void report_summary(FILE *stream, MPI_Comm world, const rank_work *mine, const char *output_path,
                    int64_t documents, int64_t truncated_documents, int64_t tokens,
                    double wall_seconds, int quiet)
{
    int rank = 0, n_ranks = 1;
    MPI_Comm_rank(world, &rank);
    MPI_Comm_size(world, &n_ranks);
    long rss = peak_rss_kib(), rss_max = 0;
    MPI_Reduce(&rss, &rss_max, 1, MPI_LONG, MPI_MAX, 0, world);
    rank_work *all = rank == 0 ? calloc((size_t)n_ranks, sizeof *all) : NULL;
    MPI_Gather(mine, (int)sizeof *mine, MPI_BYTE, all, (int)sizeof *mine, MPI_BYTE, 0, world);
    if (rank != 0)
        return;
    if (all == NULL)
        return;
    double encode = 0, busy_sum = 0, busy_max = 0, flops = 0;
    for (int i = 0; i < n_ranks; i++) {
        if (all[i].encode_seconds > encode)
            encode = all[i].encode_seconds;
        busy_sum += all[i].busy_seconds;
        if (all[i].busy_seconds > busy_max)
            busy_max = all[i].busy_seconds;
        flops += all[i].flops;
    }
    if (encode > 0 && flops > 0)
        report_remember_flop_rate(flops / encode / n_ranks);
    if (quiet) {
        free(all);
        return;
    }
    fprintf(stream,
            "%s: wrote %s: %lld documents (%lld truncated), %lld tokens; %.2f s in all, "
            "%.2f s encoding, %.0f tokens/s, %.2f GFLOP/s per rank; peak RSS %.1f MiB per rank\n",
            program, output_path, (long long)documents, (long long)truncated_documents,
            (long long)tokens, wall_seconds, encode, fraction((double)tokens, encode),
            fraction(flops, encode * n_ranks) / 1e9, (double)rss_max / 1024.0);
    if (n_ranks > 1) {
        double mean_busy = busy_sum / n_ranks;
        double idle_sum = 0;
        for (int i = 0; i < n_ranks; i++) {
            const rank_work *w = &all[i];
            double idle = w->encode_seconds - w->busy_seconds - w->writing_seconds;
            if (idle < 0)
                idle = 0;
            idle_sum += fraction(idle, w->encode_seconds);
            fprintf(stream,
                    "%s:   rank %d (replica %d, stage %d): %lld tokens in %lld microbatches, "
                    "%.0f tokens/s, busy %.0f%%, writing %.0f%%, idle %.0f%% (waiting for the "
                    "previous stage %.0f%%)\n",
                    program, i, w->replica, w->stage, (long long)w->tokens,
                    (long long)w->microbatches,
                    fraction((double)w->tokens, w->encode_seconds),
                    100 * fraction(w->busy_seconds, w->encode_seconds),
                    100 * fraction(w->writing_seconds, w->encode_seconds),
                    100 * fraction(idle, w->encode_seconds),
                    100 * fraction(w->waiting_seconds, w->encode_seconds));
        }
        fprintf(stream,
                "%s: load imbalance (busiest rank / mean) %.2f; mean idle fraction %.1f%%\n",
                program, fraction(busy_max, mean_busy), 100 * idle_sum / n_ranks);
    }
    free(all);
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

double report_last_flop_rate(void)
{
    char *path = throughput_path();
    double rate = 0;
    FILE *file = path != NULL ? fopen(path, "r") : NULL;
    if (file != NULL) {
        if (fscanf(file, "%lf", &rate) != 1 || !(rate > 0))
            rate = 0;
        fclose(file);
    }
    free(path);
    return rate;
}

/* Best effort: a read-only home only loses the estimate. */
void report_remember_flop_rate(double flops_per_second_per_rank)
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
    FILE *file = fopen(path, "w");
    if (file != NULL) {
        fprintf(file, "%.6g FLOP/s per rank, measured by tfenc-batch\n",
                flops_per_second_per_rank);
        fclose(file);
    }
    free(path);
}
