/* A queue of work items 0, 1, ..., n-1 that ranks take one at a time, in
 * order, whenever they are free: the next item is one MPI-3 atomic
 * fetch-and-add (MPI_Fetch_and_op) on a counter that rank 0 of the
 * communicator exposes. No extra process, no coordinator to answer
 * messages: on one node the add is an atomic in shared memory, across
 * nodes an RDMA atomic where the network has them (Open MPI's osc/ucx),
 * and otherwise it is served whenever rank 0 enters MPI, which a running
 * job does for every microbatch.
 *
 * A rank that is slow takes fewer items; none waits for another except
 * for the add itself.
 *
 * Not every MPI library can make that window across nodes: Open MPI 4.1
 * over TCP alone selects its osc/rdma component, which then refuses the
 * window (MPI_ERR_WIN). The queue then deals the items out in turn
 * instead (taker j of n takes j, j + n, j + 2n, ...): the same items, the
 * same results, only without the balancing. */
#ifndef TFENC_WORK_QUEUE_H
#define TFENC_WORK_QUEUE_H

#include <mpi.h>
#include <stdint.h>

#include "tfenc/plugin.h"

typedef struct tfenc_work_queue tfenc_work_queue;

/* Collective over `comm`: a queue of `n_items` items, none taken yet.
 * `taker` (0 <= taker < n_takers) is this rank's place among the ranks of
 * `comm` that will take items; the dealt-out fallback needs it. */
int tfenc_work_queue_create(tfenc_context *ctx, MPI_Comm comm, int64_t n_items, int taker,
                            int n_takers, tfenc_work_queue **queue);

/* 1 when the items are dealt out in turn because the MPI library could not
 * make the counter's window; *reason (when not NULL) is then its error. */
int tfenc_work_queue_dealt_out(const tfenc_work_queue *queue, const char **reason);

/* Takes the next item: *item is its number, or -1 when every item is
 * taken. Any rank, any time, independently of the others. */
int tfenc_work_queue_take(tfenc_context *ctx, tfenc_work_queue *queue, int64_t *item);

/* How many items have been taken so far (at most n_items). Any rank.
 * Dealt out, it is an estimate: this rank's count times the takers. */
int64_t tfenc_work_queue_taken(tfenc_work_queue *queue);

/* Collective: frees the queue. NULL is allowed (on every rank alike). */
void tfenc_work_queue_destroy(tfenc_work_queue *queue);

#endif
