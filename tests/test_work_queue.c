/* The work queue (core/ranks/work_queue) on one rank (MPI_COMM_SELF): items
 * come out once each and in order, then -1 however often a rank asks, the
 * count of taken items stops at the number of items, and an empty queue
 * has nothing to give. Several ranks taking from one queue are the layout
 * tests' (tests/pipeline/layouts.sh). */
#include "base/context.h"
#include "harness/cunit_main.h"
#include "ranks/work_queue.h"

#include <CUnit/CUnit.h>
#include <mpi.h>

static tfenc_context ctx;

static int suite_init(void)
{
    return MPI_Init(NULL, NULL) != MPI_SUCCESS;
}

static int suite_clean(void)
{
    return MPI_Finalize() != MPI_SUCCESS;
}

static void test_items_once_in_order(void)
{
    enum { ITEMS = 1000 };
    tfenc_context_init(&ctx);
    tfenc_work_queue *queue = NULL;
    CU_ASSERT_EQUAL_FATAL(tfenc_work_queue_create(&ctx, MPI_COMM_SELF, ITEMS, 0, 1, &queue), TFENC_OK);
    CU_ASSERT_EQUAL(tfenc_work_queue_taken(queue), 0);
    int64_t item = -2, out_of_order = 0;
    for (int64_t expected = 0; expected < ITEMS; expected++) {
        CU_ASSERT_EQUAL(tfenc_work_queue_take(&ctx, queue, &item), TFENC_OK);
        out_of_order += item != expected;
    }
    CU_ASSERT_EQUAL(out_of_order, 0);
    CU_ASSERT_EQUAL(tfenc_work_queue_taken(queue), ITEMS);
    /* Every later ask gets -1, and the count stays at the number of items. */
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(tfenc_work_queue_take(&ctx, queue, &item), TFENC_OK);
        CU_ASSERT_EQUAL(item, -1);
    }
    CU_ASSERT_EQUAL(tfenc_work_queue_taken(queue), ITEMS);
    tfenc_work_queue_destroy(queue);
    tfenc_work_queue_destroy(NULL);
}

static void test_empty_queue(void)
{
    tfenc_context_init(&ctx);
    tfenc_work_queue *queue = NULL;
    CU_ASSERT_EQUAL_FATAL(tfenc_work_queue_create(&ctx, MPI_COMM_SELF, 0, 0, 1, &queue), TFENC_OK);
    int64_t item = 7;
    CU_ASSERT_EQUAL(tfenc_work_queue_take(&ctx, queue, &item), TFENC_OK);
    CU_ASSERT_EQUAL(item, -1);
    CU_ASSERT_EQUAL(tfenc_work_queue_taken(queue), 0);
    tfenc_work_queue_destroy(queue);
}

static const test_case queue_cases[] = {
    {"items once and in order, then -1", test_items_once_in_order},
    {"an empty queue", test_empty_queue},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"work queue", suite_init, suite_clean, queue_cases},
    {NULL, NULL, NULL, NULL}};
