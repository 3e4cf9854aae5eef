/* The corpus's windows (core/input/windows) on one rank (MPI_COMM_SELF):
 * the grain, the taper toward the end of the corpus as windows.h states it
 * (each window 1/1024 of what is left, a multiple of the grain, between
 * the grain and W), windows that cover every document once with their
 * lines' byte offsets, a corpus smaller than one window, the rows counted
 * per window, and what an earlier run finished (fresh, partial and done
 * windows). */
#include "base/context.h"
#include "harness/checks.h"
#include "harness/cunit_main.h"
#include "input/windows.h"

#include <CUnit/CUnit.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tfenc_context ctx;
static char work[512]; /* a scratch directory of this test's own */

static int suite_init(void)
{
    MPI_Init(NULL, NULL);
    snprintf(work, sizeof work, "%s/tests/data/generated/test_windows-XXXXXX", build_dir());
    char parents[600];
    snprintf(parents, sizeof parents, "mkdir -p '%s/tests/data/generated'", build_dir());
    return system(parents) != 0 || mkdtemp(work) == NULL;
}

static int suite_clean(void)
{
    int failed = CU_get_number_of_failures() != 0;
    MPI_Finalize();
    if (failed) /* the files stay for inspection */
        return 0;
    char command[600];
    snprintf(command, sizeof command, "rm -rf '%s'", work);
    return system(command) != 0;
}

static void test_grain(void)
{
    /* W / 64 rounded up, at least 32 documents, at most W. */
    CU_ASSERT_EQUAL(tfenc_windows_grain(64 * 40), 40);
    CU_ASSERT_EQUAL(tfenc_windows_grain(64 * 40 + 1), 41);
    CU_ASSERT_EQUAL(tfenc_windows_grain(100), 32);
    CU_ASSERT_EQUAL(tfenc_windows_grain(20), 20);
}

/* Writes a text corpus of n lines of varied lengths and returns each
 * line's byte offset (n + 1 entries, the last the file size). */
static int64_t *write_corpus(const char *path, int64_t n)
{
    FILE *file = fopen(path, "w");
    int64_t *offsets = malloc(((size_t)n + 1) * sizeof *offsets);
    if (file == NULL || offsets == NULL) {
        if (file != NULL)
            fclose(file);
        free(offsets);
        return NULL;
    }
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++) {
        offsets[i] = at;
        at += fprintf(file, "document %lld%.*s\n", (long long)i, (int)(i % 7), "xxxxxxx");
    }
    offsets[n] = at;
    fclose(file);
    return offsets;
}

/* Scans and builds the windows of the text corpus at `path`. */
static int windows_of(const char *path, int64_t width, tfenc_windows *windows)
{
    tfenc_corpus_options options = {.path = path, .format = TFENC_CORPUS_TEXT};
    tfenc_windows_share share;
    tfenc_context_init(&ctx);
    int status = tfenc_windows_scan(&ctx, MPI_COMM_SELF, &options, width, &share);
    if (status == TFENC_OK)
        status = tfenc_windows_build(&ctx, MPI_COMM_SELF, &share, width, windows);
    else
        free(share.line_starts);
    if (status != TFENC_OK)
        fprintf(stderr, "\n  windows: %s\n", tfenc_context_message(&ctx));
    return status;
}

static void test_taper_covers_every_document(void)
{
    /* W = 64 (grain 32): whole windows while at least 1024 W documents are
     * left, then windows that shrink to the grain. */
    enum { WIDTH = 64, GRAIN = 32 };
    const int64_t n = 1024 * WIDTH + 5000;
    char path[600];
    snprintf(path, sizeof path, "%s/taper.txt", work);
    int64_t *offsets = write_corpus(path, n);
    CU_ASSERT_PTR_NOT_NULL_FATAL(offsets);
    tfenc_windows windows;
    CU_ASSERT_EQUAL_FATAL(windows_of(path, WIDTH, &windows), TFENC_OK);
    CU_ASSERT_EQUAL(windows.n_documents, n);
    CU_ASSERT_EQUAL(windows.window_documents, WIDTH);
    CU_ASSERT_PTR_NOT_NULL_FATAL(windows.byte_start);
    CU_ASSERT_EQUAL(windows.first_document[0], 0);
    CU_ASSERT_EQUAL(windows.first_document[windows.n_windows], n);
    int64_t previous = WIDTH, full = 0, smallest = WIDTH;
    for (int64_t k = 0; k < windows.n_windows; k++) {
        tfenc_corpus_range range;
        tfenc_windows_range(&windows, k, &range);
        const int64_t size = range.n_documents, left = n - range.first_index;
        CU_ASSERT_EQUAL(range.first_index, windows.first_document[k]);
        /* The rule of windows.h, computed here from what is left. */
        int64_t expected = left / 1024 / GRAIN * GRAIN;
        expected = expected < GRAIN ? GRAIN : expected > WIDTH ? WIDTH : expected;
        if (expected > left)
            expected = left;
        if (size != expected) {
            fprintf(stderr, "\n  window %lld: %lld documents with %lld left, expected %lld\n",
                    (long long)k, (long long)size, (long long)left, (long long)expected);
            CU_FAIL("a window's size breaks the taper rule");
            break;
        }
        CU_ASSERT(size <= previous); /* the taper never grows */
        previous = size;
        full += size == WIDTH;
        smallest = size < smallest ? size : smallest;
        /* Each window starts at its first document's line. */
        CU_ASSERT_EQUAL(range.byte_start, offsets[range.first_index]);
        CU_ASSERT_EQUAL(range.byte_end, offsets[range.first_index + size]);
    }
    CU_ASSERT(full >= 1 && full < windows.n_windows);
    CU_ASSERT(smallest <= GRAIN);
    tfenc_windows_free(&windows);
    free(offsets);
}

static void test_corpus_smaller_than_a_window(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s/small.txt", work);
    int64_t *offsets = write_corpus(path, 10);
    CU_ASSERT_PTR_NOT_NULL_FATAL(offsets);
    tfenc_windows windows;
    CU_ASSERT_EQUAL_FATAL(windows_of(path, 4096, &windows), TFENC_OK);
    CU_ASSERT_EQUAL(windows.n_windows, 1);
    tfenc_corpus_range range;
    tfenc_windows_range(&windows, 0, &range);
    CU_ASSERT_EQUAL(range.first_index, 0);
    CU_ASSERT_EQUAL(range.n_documents, 10);
    CU_ASSERT_EQUAL(range.byte_start, 0);
    CU_ASSERT_EQUAL(range.byte_end, offsets[10]);
    tfenc_windows_free(&windows);
    free(offsets);
}

/* Window k holds k + 1 rows per document, say. */
static int rows_of_window(tfenc_context *c, void *user, int64_t k, int64_t *rows)
{
    const tfenc_windows *windows = user;
    *rows = (k + 1) * (windows->first_document[k + 1] - windows->first_document[k]);
    return TFENC_OK;
}

static void test_rows_counted_per_window(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s/rows.txt", work);
    int64_t *offsets = write_corpus(path, 300);
    CU_ASSERT_PTR_NOT_NULL_FATAL(offsets);
    tfenc_windows windows;
    CU_ASSERT_EQUAL_FATAL(windows_of(path, 64, &windows), TFENC_OK);
    CU_ASSERT_FATAL(windows.n_windows >= 3);
    /* Counter 1 of 2 counts the odd windows only; the even ones stay 0
     * until another counter's counts are summed in. */
    CU_ASSERT_EQUAL(tfenc_windows_count_local(&ctx, &windows, 1, 2, rows_of_window, &windows),
                    TFENC_OK);
    CU_ASSERT_EQUAL(tfenc_windows_sum_rows(&ctx, MPI_COMM_SELF, &windows), TFENC_OK);
    int64_t running = 0;
    for (int64_t k = 0; k < windows.n_windows; k++) {
        CU_ASSERT_EQUAL(windows.first_row[k], running);
        if (k % 2 == 1)
            running += (k + 1) * (windows.first_document[k + 1] - windows.first_document[k]);
    }
    CU_ASSERT_EQUAL(windows.first_row[windows.n_windows], running);
    /* One counter counts them all. */
    CU_ASSERT_EQUAL(tfenc_windows_count_local(&ctx, &windows, 0, 1, rows_of_window, &windows),
                    TFENC_OK);
    CU_ASSERT_EQUAL(tfenc_windows_sum_rows(&ctx, MPI_COMM_SELF, &windows), TFENC_OK);
    running = 0;
    for (int64_t k = 0; k < windows.n_windows; k++)
        running += (k + 1) * (windows.first_document[k + 1] - windows.first_document[k]);
    CU_ASSERT_EQUAL(windows.first_row[windows.n_windows], running);
    tfenc_windows_free(&windows);
    free(offsets);
}

/* Which counter counted each window (rows_counted_by). */
static int counted_by[8];
static int current_counter;

static int note_counter(tfenc_context *c, void *user, int64_t k, int64_t *rows)
{
    (void)c, (void)user;
    counted_by[k] = counted_by[k] < 0 ? current_counter : 99; /* 99: counted twice */
    *rows = 1;
    return TFENC_OK;
}

/* Windows 2, 3 and 4 start in a compressed file (source 1), the others in
 * plain ones: the three go to one counter, which then decodes the file
 * once, and every window is counted by exactly one counter. */
static void test_compressed_file_counted_once(void)
{
    int64_t first_document[8] = {0, 10, 20, 30, 40, 50, 60, 70};
    int64_t byte_start[8] = {0, 500, (int64_t)1 << 40, ((int64_t)1 << 40) + 10,
                             ((int64_t)1 << 40) + 20, (int64_t)2 << 40, ((int64_t)2 << 40) + 300,
                             ((int64_t)2 << 40) + 600};
    uint8_t source_whole[3] = {0, 1, 0};
    tfenc_windows windows = {.n_documents = 70, .n_windows = 7, .window_documents = 10,
                             .first_document = first_document, .byte_start = byte_start,
                             .n_sources = 3, .source_whole = source_whole};
    for (int k = 0; k < 8; k++)
        counted_by[k] = -1;
    for (current_counter = 0; current_counter < 2; current_counter++) {
        CU_ASSERT_EQUAL(tfenc_windows_count_local(&ctx, &windows, current_counter, 2,
                                                  note_counter, NULL), TFENC_OK);
        free(windows.first_row);
        windows.first_row = NULL;
    }
    for (int k = 0; k < 7; k++)
        CU_ASSERT(counted_by[k] == 0 || counted_by[k] == 1);
    CU_ASSERT_EQUAL(counted_by[3], counted_by[2]);
    CU_ASSERT_EQUAL(counted_by[4], counted_by[2]);
    /* The plain windows still alternate around it. */
    CU_ASSERT_NOT_EQUAL(counted_by[0], counted_by[1]);
    CU_ASSERT_NOT_EQUAL(counted_by[5], counted_by[6]);
}

/* An earlier run finished window 0 whole, every third document of window
 * 1, and nothing after. */
static int earlier_run(tfenc_context *c, void *user, int64_t first, int64_t n, uint8_t *done)
{
    const tfenc_windows *windows = user;
    for (int64_t i = 0; i < n; i++) {
        int64_t document = first + i;
        done[i] = document < windows->first_document[1] ||
                  (document < windows->first_document[2] && document % 3 == 0);
    }
    return TFENC_OK;
}

static void test_resume_states(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s/resume.txt", work);
    int64_t *offsets = write_corpus(path, 300);
    CU_ASSERT_PTR_NOT_NULL_FATAL(offsets);
    tfenc_windows windows;
    CU_ASSERT_EQUAL_FATAL(windows_of(path, 64, &windows), TFENC_OK);
    CU_ASSERT_FATAL(windows.n_windows >= 3);
    CU_ASSERT_EQUAL(tfenc_windows_progress_local(&ctx, &windows, 0, 1, earlier_run, &windows),
                    TFENC_OK);
    CU_ASSERT_EQUAL(tfenc_windows_combine_progress(&ctx, MPI_COMM_SELF, &windows), TFENC_OK);
    CU_ASSERT_EQUAL(windows.state[0], TFENC_WINDOW_DONE);
    CU_ASSERT_EQUAL(windows.state[1], TFENC_WINDOW_PARTIAL);
    for (int64_t k = 2; k < windows.n_windows; k++)
        CU_ASSERT_EQUAL(windows.state[k], TFENC_WINDOW_FRESH);
    CU_ASSERT_EQUAL(windows.n_partial, 1);
    /* Flags only for the partial window, one per document. */
    CU_ASSERT_PTR_NULL(tfenc_windows_finished_documents(&windows, 0));
    CU_ASSERT_PTR_NULL(tfenc_windows_finished_documents(&windows, 2));
    const uint8_t *done = tfenc_windows_finished_documents(&windows, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(done);
    int64_t first = windows.first_document[1], n = windows.first_document[2] - first;
    int64_t expected = windows.first_document[1];
    for (int64_t i = 0; i < n; i++) {
        CU_ASSERT_EQUAL(done[i] != 0, (first + i) % 3 == 0);
        expected += (first + i) % 3 == 0;
    }
    CU_ASSERT_EQUAL(tfenc_windows_documents_finished(&windows), expected);
    tfenc_windows_free(&windows);
    free(offsets);
}

static const test_case windows_cases[] = {
    {"grain", test_grain},
    {"taper covers every document once", test_taper_covers_every_document},
    {"corpus smaller than a window", test_corpus_smaller_than_a_window},
    {"rows counted per window", test_rows_counted_per_window},
    {"a compressed file's windows counted by one counter", test_compressed_file_counted_once},
    {"fresh, partial and done windows", test_resume_states},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"windows", suite_init, suite_clean, windows_cases},
    {NULL, NULL, NULL, NULL}};
