/* The work queue: one int64 counter in an MPI window on rank 0, or the
 * items dealt out in turn where the window cannot be made. */
#include "ranks/work_queue.h"

#include <stdio.h>
#include <stdlib.h>

struct tfenc_work_queue {
    MPI_Win window;
    int64_t *counter; /* rank 0's exposed memory; NULL elsewhere */
    int64_t n_items;
    int dealt_out;       /* no window: taker j takes j, j + n_takers, ... */
    int taker, n_takers; /* this rank's place among the takers, how many */
    int64_t dealt;       /* items this rank has taken when dealt out */
    char reason[MPI_MAX_ERROR_STRING];
};

/* MPI_Win_allocate with its errors returned, not fatal: the window's
 * creation reports on the communicator, so a duplicate with
 * MPI_ERRORS_RETURN carries it. 1 when every rank has the window. */
static int allocate_counter(tfenc_work_queue *queue, MPI_Comm comm, int rank)
{
    MPI_Comm returning;
    if (MPI_Comm_dup(comm, &returning) != MPI_SUCCESS)
        return 0;
    MPI_Comm_set_errhandler(returning, MPI_ERRORS_RETURN);
    /* The counter only ever takes fetch-and-add and reads. */
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "accumulate_ops", "same_op_no_op");
    int status = MPI_Win_allocate(rank == 0 ? (MPI_Aint)sizeof(int64_t) : 0, sizeof(int64_t),
                                  info, returning, &queue->counter, &queue->window);
    MPI_Info_free(&info);
    int ok = status == MPI_SUCCESS, all_ok = 0;
    if (!ok) {
        int length = 0;
        MPI_Error_string(status, queue->reason, &length);
    }
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, returning);
    MPI_Comm_free(&returning);
    /* A window that some ranks have and others not cannot be freed (that
     * is collective over all of them): it is left to MPI_Finalize. */
    if (!all_ok && queue->reason[0] == '\0')
        snprintf(queue->reason, sizeof queue->reason, "another rank could not make its part");
    return all_ok;
}

int tfenc_work_queue_create(tfenc_context *ctx, MPI_Comm comm, int64_t n_items, int taker,
                            int n_takers, tfenc_work_queue **queue_out)
{
    *queue_out = NULL;
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    tfenc_work_queue *queue = calloc(1, sizeof *queue);
    int ok = queue != NULL, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (!all_ok) {
        free(queue);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for the work queue");
    }
    queue->n_items = n_items;
    queue->taker = taker;
    queue->n_takers = n_takers > 0 ? n_takers : 1;
    if (!allocate_counter(queue, comm, rank)) {
        queue->dealt_out = 1;
        *queue_out = queue;
        return TFENC_OK;
    }
    if (rank == 0)
        *queue->counter = 0;
    /* The counter is set before anyone may add to it. */
    MPI_Barrier(comm);
    MPI_Win_lock_all(MPI_MODE_NOCHECK, queue->window);
    *queue_out = queue;
    return TFENC_OK;
}

int tfenc_work_queue_take(tfenc_context *ctx, tfenc_work_queue *queue, int64_t *item)
{
    (void)ctx;
    if (queue->dealt_out) {
        const int64_t next = queue->taker + queue->dealt * queue->n_takers;
        queue->dealt++;
        *item = next < queue->n_items ? next : -1;
        return TFENC_OK;
    }
    const int64_t one = 1;
    int64_t before = 0;
    MPI_Fetch_and_op(&one, &before, MPI_INT64_T, 0, 0, MPI_SUM, queue->window);
    MPI_Win_flush(0, queue->window);
    *item = before < queue->n_items ? before : -1;
    return TFENC_OK;
}

int64_t tfenc_work_queue_taken(tfenc_work_queue *queue)
{
    if (queue->dealt_out) {
        const int64_t estimate = queue->dealt * queue->n_takers;
        return estimate < queue->n_items ? estimate : queue->n_items;
    }
    int64_t value = 0, unused = 0;
    MPI_Fetch_and_op(&unused, &value, MPI_INT64_T, 0, 0, MPI_NO_OP, queue->window);
    MPI_Win_flush(0, queue->window);
    return value < queue->n_items ? value : queue->n_items;
}

void tfenc_work_queue_destroy(tfenc_work_queue *queue)
{
    if (queue == NULL)
        return;
    if (!queue->dealt_out) {
        MPI_Win_unlock_all(queue->window);
        MPI_Win_free(&queue->window);
    }
    free(queue);
}

int tfenc_work_queue_dealt_out(const tfenc_work_queue *queue, const char **reason)
{
    if (reason != NULL)
        *reason = queue->dealt_out ? queue->reason : NULL;
    return queue->dealt_out;
}
