/* What tfenc-batch tells the user while and after it runs: progress lines
 * from rank 0, and the end-of-job summary gathered from every rank (per-rank
 * tokens/s, busy and idle fractions, load imbalance). Also remembers the
 * measured throughput so that a later --dry-run can estimate wall time. */
#ifndef TFENC_BATCH_REPORT_H
#define TFENC_BATCH_REPORT_H

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>

/* One rank's work during the encoding phase. */
typedef struct rank_work {
    int64_t tokens;          /* real tokens this rank ran its layers over */
    int64_t microbatches;
    double busy_seconds;     /* in its layers (the forward pass) */
    double writing_seconds;  /* last stage: writing rows and metadata */
    double waiting_seconds;  /* blocked on the previous stage */
    double encode_seconds;   /* wall time of the encoding phase */
    double flops;            /* FLOPs of its layers, from the plugins' estimates */
    int replica, stage;
} rank_work;

typedef struct progress {
    int enabled;
    int terminal;
    double start, last, interval;
    int64_t share_documents;
    int n_ranks;
} progress;

double report_now(void);

void report_progress(progress *p, int64_t documents_done, int64_t tokens_done, int final);

/* Collective over `world`. Rank 0 prints to `stream` one summary line and,
 * with more than one rank, a line per rank. */
void report_summary(FILE *stream, MPI_Comm world, const rank_work *mine, const char *output_path,
                    int64_t documents, int64_t truncated_documents, int64_t tokens,
                    double wall_seconds, int quiet);

/* The FLOP rate per rank of the last finished job on this machine (0 if
 * none is recorded), kept in $XDG_CACHE_HOME/tfenc/throughput. */
double report_last_flop_rate(void);
void report_remember_flop_rate(double flops_per_second_per_rank);

#endif
