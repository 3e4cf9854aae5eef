/* Patient waits (core/ranks/patient_wait) on one process: a wait for a
 * request that another thread completes a while later returns only after
 * it is complete, and sleeps through the wait instead of polling a core
 * (its thread's CPU time stays a small part of the wait: a spinning wait
 * takes all of it whenever it has a core, and less only when the machine
 * takes the core away, so a loaded machine cannot make this check fail,
 * only a spinning wait can). Requests already complete, null requests and
 * the all-reduce give what MPI's own calls give. */
#include "harness/cunit_main.h"
#include "base/clock.h"
#include "ranks/patient_wait.h"

#include <CUnit/CUnit.h>
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

static int suite_init(void)
{
    int provided = 0;
    return MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS
           || provided < MPI_THREAD_MULTIPLE;
}

static int suite_clean(void)
{
    return MPI_Finalize() != MPI_SUCCESS;
}

/* A generalized request: done when another thread says so. */
static int query_status(void *extra, MPI_Status *status)
{
    (void)extra;
    MPI_Status_set_elements(status, MPI_BYTE, 0);
    MPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    return MPI_SUCCESS;
}

static int free_request(void *extra)
{
    (void)extra;
    return MPI_SUCCESS;
}

static int cancel_request(void *extra, int complete)
{
    (void)extra;
    (void)complete;
    return MPI_SUCCESS;
}

typedef struct completer {
    MPI_Request request;
    long milliseconds;
    atomic_int completed;
} completer;

static void *complete_later(void *argument)
{
    completer *c = argument;
    struct timespec pause = {c->milliseconds / 1000, (c->milliseconds % 1000) * 1000000L};
    nanosleep(&pause, NULL);
    atomic_store(&c->completed, 1);
    MPI_Grequest_complete(c->request);
    return NULL;
}

static double thread_cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void test_sleeps_until_complete(void)
{
    completer c = {.milliseconds = 300};
    atomic_init(&c.completed, 0);
    CU_ASSERT_EQUAL_FATAL(MPI_Grequest_start(query_status, free_request, cancel_request, NULL,
                                             &c.request), MPI_SUCCESS);
    MPI_Request waited = c.request;
    pthread_t thread;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&thread, NULL, complete_later, &c), 0);
    const double wall_start = tfenc_clock_seconds(), cpu_start = thread_cpu_seconds();
    CU_ASSERT_EQUAL(tfenc_patient_waitall(1, &waited, MPI_STATUSES_IGNORE), MPI_SUCCESS);
    const double wall = tfenc_clock_seconds() - wall_start;
    const double cpu = thread_cpu_seconds() - cpu_start;
    pthread_join(thread, NULL);
    CU_ASSERT_EQUAL(atomic_load(&c.completed), 1);
    CU_ASSERT_EQUAL(waited, MPI_REQUEST_NULL);
    CU_ASSERT(wall >= 0.25);
    CU_ASSERT(cpu < 0.25 * wall);
}

static void test_complete_and_null_requests(void)
{
    int sent = 41, received = 0;
    MPI_Request requests[3] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Status statuses[3];
    CU_ASSERT_EQUAL(MPI_Irecv(&received, 1, MPI_INT, 0, 7, MPI_COMM_SELF, &requests[0]),
                    MPI_SUCCESS);
    CU_ASSERT_EQUAL(MPI_Isend(&sent, 1, MPI_INT, 0, 7, MPI_COMM_SELF, &requests[2]),
                    MPI_SUCCESS);
    CU_ASSERT_EQUAL(tfenc_patient_waitall(3, requests, statuses), MPI_SUCCESS);
    CU_ASSERT_EQUAL(received, 41);
    CU_ASSERT_EQUAL(statuses[0].MPI_TAG, 7);
    for (int i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(requests[i], MPI_REQUEST_NULL);
    CU_ASSERT_EQUAL(tfenc_patient_waitall(0, requests, MPI_STATUSES_IGNORE), MPI_SUCCESS);
}

static void test_allreduce(void)
{
    long long mine[2] = {5, -3}, total[2] = {0, 0};
    CU_ASSERT_EQUAL(tfenc_patient_allreduce(mine, total, 2, MPI_LONG_LONG, MPI_SUM,
                                            MPI_COMM_SELF), MPI_SUCCESS);
    CU_ASSERT_EQUAL(total[0], 5);
    CU_ASSERT_EQUAL(total[1], -3);
    int flag = 1, any = 0;
    CU_ASSERT_EQUAL(tfenc_patient_allreduce(&flag, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_SELF),
                    MPI_SUCCESS);
    CU_ASSERT_EQUAL(any, 1);
}

static const test_case patient_cases[] = {
    {"sleeps until another thread completes the request", test_sleeps_until_complete},
    {"complete and null requests, statuses", test_complete_and_null_requests},
    {"all-reduce", test_allreduce},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"patient wait", suite_init, suite_clean, patient_cases},
    {NULL, NULL, NULL, NULL}};
