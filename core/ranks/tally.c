/* Running totals sent to rank 0 in non-blocking messages. */
#include "ranks/tally.h"

#include "base/clock.h"
#include "ranks/patient_wait.h"

#include <stdlib.h>
#include <string.h>

/* A message: the totals, then 1 when it is the reporter's last. */
#define MESSAGE (TFENC_TALLY_VALUES + 1)
#define TAG_REPORT 1

struct tfenc_tally {
    MPI_Comm comm;
    int rank, n_ranks, reporting, n_reporters;
    /* A reporter other than rank 0. */
    MPI_Request request;      /* its message on the way, or MPI_REQUEST_NULL */
    int64_t sending[MESSAGE]; /* what that message holds: untouched until it has gone */
    /* Rank 0: each rank's latest message (its own reports written in place)
     * and how many last ones are in. */
    int64_t (*latest)[MESSAGE];
    int n_last;
};

int tfenc_tally_create(tfenc_context *ctx, MPI_Comm comm, int reporting, int n_reporters,
                       tfenc_tally **tally_out)
{
    *tally_out = NULL;
    tfenc_tally *t = calloc(1, sizeof *t);
    int ok = t != NULL;
    if (ok) {
        MPI_Comm_rank(comm, &t->rank);
        MPI_Comm_size(comm, &t->n_ranks);
        t->latest = t->rank == 0 ? calloc((size_t)t->n_ranks, sizeof *t->latest) : NULL;
        ok = t->rank != 0 || t->latest != NULL;
    }
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, comm);
    if (!all_ok) {
        if (t != NULL)
            free(t->latest);
        free(t);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for the progress counts");
    }
    /* A communicator of its own: no other message can match these. */
    if (MPI_Comm_dup(comm, &t->comm) != MPI_SUCCESS) {
        free(t->latest);
        free(t);
        return tfenc_error(ctx, TFENC_ERR_MPI, "cannot make the progress counts' communicator");
    }
    t->reporting = reporting;
    t->n_reporters = n_reporters;
    t->request = MPI_REQUEST_NULL;
    *tally_out = t;
    return TFENC_OK;
}

/* Sends `values` (and `last`) once the message before has gone; waits for
 * it only when `wait` (a last report), else leaves it for later. */
static int send_report(tfenc_context *ctx, tfenc_tally *t, const int64_t *values, int last,
                       int wait)
{
    if (t->rank == 0) {
        memcpy(t->latest[0], values, TFENC_TALLY_VALUES * sizeof *values);
        t->latest[0][TFENC_TALLY_VALUES] = last;
        t->n_last += last;
        return TFENC_OK;
    }
    int gone = 1, status = MPI_SUCCESS;
    if (wait)
        status = tfenc_patient_waitall(1, &t->request, MPI_STATUSES_IGNORE);
    else
        status = MPI_Test(&t->request, &gone, MPI_STATUS_IGNORE);
    if (status == MPI_SUCCESS && !gone)
        return TFENC_OK; /* the next report carries these totals */
    if (status == MPI_SUCCESS) {
        memcpy(t->sending, values, TFENC_TALLY_VALUES * sizeof *values);
        t->sending[TFENC_TALLY_VALUES] = last;
        status = MPI_Isend(t->sending, MESSAGE, MPI_INT64_T, 0, TAG_REPORT, t->comm,
                           &t->request);
    }
    if (status == MPI_SUCCESS && wait)
        status = tfenc_patient_waitall(1, &t->request, MPI_STATUSES_IGNORE);
    if (status != MPI_SUCCESS)
        return tfenc_error(ctx, TFENC_ERR_MPI, "rank %d: cannot send its progress counts to "
                           "rank 0", t->rank);
    return TFENC_OK;
}

int tfenc_tally_report(tfenc_context *ctx, tfenc_tally *t, const int64_t values[TFENC_TALLY_VALUES])
{
    if (!t->reporting)
        return TFENC_OK;
    /* Nothing new since the last message: no message. */
    const int64_t *sent = t->rank == 0 ? t->latest[0] : t->sending;
    if (memcmp(sent, values, TFENC_TALLY_VALUES * sizeof *values) == 0)
        return TFENC_OK;
    return send_report(ctx, t, values, 0, 0);
}

int tfenc_tally_report_last(tfenc_context *ctx, tfenc_tally *t,
                            const int64_t values[TFENC_TALLY_VALUES])
{
    return t->reporting ? send_report(ctx, t, values, 1, 1) : TFENC_OK;
}

int tfenc_tally_collect(tfenc_tally *t, int64_t sums[TFENC_TALLY_VALUES])
{
    memset(sums, 0, TFENC_TALLY_VALUES * sizeof *sums);
    if (t->rank != 0)
        return 0;
    for (;;) {
        int arrived = 0;
        MPI_Status status;
        if (MPI_Iprobe(MPI_ANY_SOURCE, TAG_REPORT, t->comm, &arrived, &status) != MPI_SUCCESS ||
            !arrived)
            break;
        int64_t *slot = t->latest[status.MPI_SOURCE];
        if (MPI_Recv(slot, MESSAGE, MPI_INT64_T, status.MPI_SOURCE, TAG_REPORT, t->comm,
                     MPI_STATUS_IGNORE) != MPI_SUCCESS)
            break;
        t->n_last += slot[TFENC_TALLY_VALUES] != 0;
    }
    for (int r = 0; r < t->n_ranks; r++)
        for (int v = 0; v < TFENC_TALLY_VALUES; v++)
            sums[v] += t->latest[r][v];
    return t->n_last;
}

int tfenc_tally_wait(tfenc_tally *t, double seconds, int64_t sums[TFENC_TALLY_VALUES])
{
    const double until = tfenc_clock_seconds() + seconds;
    long sleep = 0;
    int n_last = tfenc_tally_collect(t, sums);
    while (t->rank == 0 && n_last < t->n_reporters && tfenc_clock_seconds() < until) {
        tfenc_patient_pause(&sleep);
        n_last = tfenc_tally_collect(t, sums);
    }
    return n_last;
}

void tfenc_tally_destroy(tfenc_tally *t)
{
    if (t == NULL)
        return;
    MPI_Comm_free(&t->comm);
    free(t->latest);
    free(t);
}
