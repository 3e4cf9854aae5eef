#include "ranks/patient_wait.h"

#include <errno.h>
#include <time.h>

#include "base/clock.h"

static void sleep_microseconds(long microseconds)
{
    struct timespec pause = {microseconds / 1000000, (microseconds % 1000000) * 1000};
    while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
    }
}

void tfenc_patient_pause(long *sleep)
{
    if (*sleep < TFENC_PATIENT_SLEEP_MIN_US)
        *sleep = TFENC_PATIENT_SLEEP_MIN_US;
    sleep_microseconds(*sleep);
    *sleep = *sleep * 2 < TFENC_PATIENT_SLEEP_MAX_US ? *sleep * 2 : TFENC_PATIENT_SLEEP_MAX_US;
}

int tfenc_patient_waitall(int count, MPI_Request *requests, MPI_Status *statuses)
{
    int done = 0;
    int status = MPI_Testall(count, requests, &done, statuses);
    const double spin_until = tfenc_clock_seconds() + TFENC_PATIENT_SPIN_US * 1e-6;
    while (status == MPI_SUCCESS && !done && tfenc_clock_seconds() < spin_until)
        status = MPI_Testall(count, requests, &done, statuses);
    long sleep = TFENC_PATIENT_SLEEP_MIN_US;
    while (status == MPI_SUCCESS && !done) {
        tfenc_patient_pause(&sleep);
        status = MPI_Testall(count, requests, &done, statuses);
    }
    return status;
}

int tfenc_patient_allreduce(const void *send, void *receive, int count, MPI_Datatype type,
                            MPI_Op op, MPI_Comm comm)
{
    MPI_Request request;
    int status = MPI_Iallreduce(send, receive, count, type, op, comm, &request);
    return status == MPI_SUCCESS ? tfenc_patient_waitall(1, &request, MPI_STATUS_IGNORE) : status;
}
