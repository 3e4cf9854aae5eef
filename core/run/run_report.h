/* What a run measures about itself: each rank's work while encoding,
 * gathered into one summary (per-rank tokens/s, busy and idle fractions,
 * load imbalance, peak memory), and the FLOP rate it reached, remembered
 * so that a later dry run can estimate wall time. Nothing here prints:
 * the driver formats what it is given. */
#ifndef TFENC_RUN_REPORT_H
#define TFENC_RUN_REPORT_H

#include <mpi.h>
#include <stdint.h>

/* One rank's work during the encoding phase. */
typedef struct tfenc_rank_work {
    int64_t tokens;          /* real tokens this rank ran its layers over */
    int64_t microbatches;
    int64_t windows;         /* windows of the corpus this rank's replica took */
    double busy_seconds;     /* in its layers (the forward pass) */
    double writing_seconds;  /* last stage: writing rows and metadata */
    double waiting_seconds;  /* blocked on the previous stage */
    double encode_seconds;   /* wall time of the encoding phase */
    double encode_cpu_seconds; /* CPU time this rank's threads spent in it */
    double flops;            /* FLOPs of its layers, from the plugins' estimates */
    double peak_rss_mib;     /* filled by tfenc_run_summary_gather */
    double shared_mib;       /* weights this rank's node holds once for its ranks */
    int replica, stage;
} tfenc_rank_work;

/* The whole job's figures, complete on rank 0 only. */
typedef struct tfenc_run_summary {
    const char *output_path;
    int64_t documents;           /* encoded by this run (a resume counts only its own) */
    int64_t truncated_documents;
    int64_t tokens;
    double wall_seconds;         /* the whole run, setup included */
    double encode_seconds;       /* the slowest rank's encoding phase */
    double encode_cpu_seconds;   /* all ranks' CPU time while encoding */
    double flops_per_rank;       /* FLOP/s per rank while encoding */
    double peak_rss_mib;         /* the largest of the ranks' */
    double node_memory_mib;      /* the largest over nodes of the sum of the node's ranks'
                                  * proportional set sizes (shared pages counted once) at
                                  * the end of encoding */
    double node_shared_mib;      /* that node's shared weights */
    int node_ranks;              /* the most ranks on one node */
    int n_ranks;
    tfenc_rank_work *ranks;      /* [n_ranks] on rank 0, NULL elsewhere */
    double load_imbalance;       /* busiest rank's busy time / the mean */
    double mean_idle_fraction;
} tfenc_run_summary;

/* Collective over `world`: gathers every rank's work into `summary` on
 * rank 0 (free it with tfenc_run_summary_free) and remembers the FLOP rate
 * for tfenc_run_last_flop_rate(). The counts are this rank's and are
 * summed. */
void tfenc_run_summary_gather(MPI_Comm world, const tfenc_rank_work *mine, int64_t documents,
                              int64_t truncated_documents, int64_t tokens, double wall_seconds,
                              tfenc_run_summary *summary);
void tfenc_run_summary_free(tfenc_run_summary *summary);
/* Rank 0: the summary as the JSON object the output file keeps for this run
 * (attribute run_summaries, docs/output.md): elapsed_seconds, documents,
 * tokens, finished (0: stopped on request, resumable) and per rank its
 * tokens, encoding seconds and tokens/s. NULL when out of memory; free()
 * it. */
char *tfenc_run_summary_json(const tfenc_run_summary *summary, int finished);

/* This process's peak resident memory in MiB. */
double tfenc_peak_rss_mib(void);
/* This process's proportional set size now, in MiB: its private pages
 * plus its share of pages mapped by several processes (a node's shared
 * weights count 1/n in each of n ranks); its RSS where the kernel does not
 * say. */
double tfenc_proportional_mib(void);

/* The FLOP rate per rank of the last finished job on this machine (0 if
 * none is recorded), kept in $XDG_CACHE_HOME/tfenc/throughput. */
double tfenc_run_last_flop_rate(void);

#endif
