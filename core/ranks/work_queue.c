/* The work queue: one int64 counter in an MPI window on rank 0. */
#include "ranks/work_queue.h"

#include <stdlib.h>

struct tfenc_work_queue {
    MPI_Win window;
    int64_t *counter; /* rank 0's exposed memory; NULL elsewhere */
    int64_t n_items;
};

int tfenc_work_queue_create(tfenc_context *ctx, MPI_Comm comm, int64_t n_items,
                            tfenc_work_queue **queue_out)
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
    /* The counter only ever takes fetch-and-add and reads. */
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "accumulate_ops", "same_op_no_op");
    MPI_Win_allocate(rank == 0 ? (MPI_Aint)sizeof(int64_t) : 0, sizeof(int64_t), info, comm,
                     &queue->counter, &queue->window);
    MPI_Info_free(&info);
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
    const int64_t one = 1;
    int64_t before = 0;
    MPI_Fetch_and_op(&one, &before, MPI_INT64_T, 0, 0, MPI_SUM, queue->window);
    MPI_Win_flush(0, queue->window);
    *item = before < queue->n_items ? before : -1;
    return TFENC_OK;
}

int64_t tfenc_work_queue_taken(tfenc_work_queue *queue)
{
    int64_t value = 0, unused = 0;
    MPI_Fetch_and_op(&unused, &value, MPI_INT64_T, 0, 0, MPI_NO_OP, queue->window);
    MPI_Win_flush(0, queue->window);
    return value < queue->n_items ? value : queue->n_items;
}

void tfenc_work_queue_destroy(tfenc_work_queue *queue)
{
    if (queue == NULL)
        return;
    MPI_Win_unlock_all(queue->window);
    MPI_Win_free(&queue->window);
    free(queue);
}
