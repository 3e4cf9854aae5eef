/* Running totals that some ranks keep (the writers' finished documents and
 * tokens) and rank 0 reads, with no collective while they run: each
 * reporting rank sends its latest totals to rank 0 in a small non-blocking
 * message whenever they change and its previous message has gone, and rank
 * 0 takes whatever has arrived when it looks. A report that finds the
 * previous one still on its way is folded into the next (the totals are
 * cumulative, so none is lost); a rank's last report is always sent, and
 * rank 0 can wait for every reporter's last one.
 *
 * Point-to-point messages on a communicator of their own, not a one-sided
 * window: they work wherever MPI does (the work queue's window cannot be
 * made over TCP with Open MPI 4.1), and rank 0 serves them whenever it
 * enters MPI, which a running job does for every microbatch. */
#ifndef TFENC_TALLY_H
#define TFENC_TALLY_H

#include <mpi.h>
#include <stdint.h>

#include "tfenc/plugin.h"

/* The totals each reporter keeps. */
#define TFENC_TALLY_VALUES 2

typedef struct tfenc_tally tfenc_tally;

/* Collective over `comm`: `reporting` is 1 on the ranks that will report
 * (rank 0 may be one of them), `n_reporters` how many there are. */
int tfenc_tally_create(tfenc_context *ctx, MPI_Comm comm, int reporting, int n_reporters,
                       tfenc_tally **tally);

/* A reporter's totals so far (each never smaller than in its last report).
 * Never waits: on rank 0 they are kept; elsewhere sent unless the previous
 * message is still on its way, in which case the next report carries them. */
int tfenc_tally_report(tfenc_context *ctx, tfenc_tally *tally,
                       const int64_t values[TFENC_TALLY_VALUES]);

/* A reporter's last totals: sent after the previous message has gone, and
 * waited for (patiently, core/ranks/patient_wait.h). Once per reporter. */
int tfenc_tally_report_last(tfenc_context *ctx, tfenc_tally *tally,
                            const int64_t values[TFENC_TALLY_VALUES]);

/* Rank 0: takes every report that has arrived; `sums` gets the reporters'
 * latest totals added up. Returns how many reporters' last reports are in
 * (n_reporters: every total is final). Never waits. Other ranks: 0. */
int tfenc_tally_collect(tfenc_tally *tally, int64_t sums[TFENC_TALLY_VALUES]);

/* Rank 0: waits (sleeping between looks) until every reporter's last
 * report is in, or `seconds` have passed; then as tfenc_tally_collect. */
int tfenc_tally_wait(tfenc_tally *tally, double seconds, int64_t sums[TFENC_TALLY_VALUES]);

/* Collective over the communicator it was made on: frees it. Every message
 * sent must have been received (rank 0 waited for every last report); NULL
 * is allowed on every rank alike. */
void tfenc_tally_destroy(tfenc_tally *tally);

#endif
