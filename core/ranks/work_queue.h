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
 * for the add itself. */
#ifndef TFENC_WORK_QUEUE_H
#define TFENC_WORK_QUEUE_H

#include <mpi.h>
#include <stdint.h>

#include "tfenc/plugin.h"

typedef struct tfenc_work_queue tfenc_work_queue;

/* Collective over `comm`: a queue of `n_items` items, none taken yet. */
int tfenc_work_queue_create(tfenc_context *ctx, MPI_Comm comm, int64_t n_items,
                            tfenc_work_queue **queue);

/* Takes the next item: *item is its number, or -1 when every item is
 * taken. Any rank, any time, independently of the others. */
int tfenc_work_queue_take(tfenc_context *ctx, tfenc_work_queue *queue, int64_t *item);

/* How many items have been taken so far (at most n_items). Any rank. */
int64_t tfenc_work_queue_taken(tfenc_work_queue *queue);

/* Collective: frees the queue. NULL is allowed (on every rank alike). */
void tfenc_work_queue_destroy(tfenc_work_queue *queue);

#endif
