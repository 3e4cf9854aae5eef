/* Waiting for other ranks without spinning a core.
 *
 * Open MPI's blocking calls poll for progress at full speed until they are
 * done (they yield when the node is oversubscribed, and sched_yield gives
 * the core away only to a thread that is ready). A rank that has finished
 * its windows and waits for the slowest replica, or a pipeline stage that
 * waits for its upstream stage's next microbatch or for its downstream
 * stage to take one, so holds a whole core
 * that the job's other ranks and threads on the node could use, for as long
 * as the wait lasts.
 *
 * These poll (MPI_Testall, which also drives MPI's progress) for a short
 * time first, so that a message already on its way is taken at once, then
 * sleep between polls, the sleep doubling up to TFENC_PATIENT_SLEEP_MAX_US:
 * a long wait costs a few hundred polls a second instead of a core, and
 * ends at most that ceiling after what it waited for. Use them where a wait
 * may be long and a microsecond's latency does not matter; a large message
 * that needs the receiver's progress to move (a rendezvous without
 * single-copy transfers) is better finished with MPI_Waitall once its
 * small header has arrived. */
#ifndef TFENC_PATIENT_WAIT_H
#define TFENC_PATIENT_WAIT_H

#include <mpi.h>

/* Polling without a pause first, then sleeps from MIN to MAX. */
#define TFENC_PATIENT_SPIN_US 50
#define TFENC_PATIENT_SLEEP_MIN_US 10
#define TFENC_PATIENT_SLEEP_MAX_US 1000

/* One pause of a wait that polls something else than requests: sleeps
 * *sleep microseconds (from 0: the minimum), then doubles it up to the
 * ceiling for the next pause. */
void tfenc_patient_pause(long *sleep);

/* MPI_Waitall's contract (statuses may be MPI_STATUSES_IGNORE), patiently. */
int tfenc_patient_waitall(int count, MPI_Request *requests, MPI_Status *statuses);

/* MPI_Allreduce's contract, as MPI_Iallreduce and a patient wait: where
 * ranks arrive at very different times (the end of the encoding). */
int tfenc_patient_allreduce(const void *send, void *receive, int count, MPI_Datatype type,
                            MPI_Op op, MPI_Comm comm);

#endif
