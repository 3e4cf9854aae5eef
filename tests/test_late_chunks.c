/* Late chunking's spans and windows (core/run/late_chunks): where each
 * span of a document lies, how a document longer than the context is cut
 * into windows of whole spans, and each span's rows in its sequence. */
#include "harness/cunit_main.h"
#include "run/late_chunks.h"

#include <CUnit/CUnit.h>

/* Spans of 100 pieces every 80, sequences of 1022 pieces between [CLS]
 * and [SEP]: late_chunking.sh's job. */
static const tfenc_late_chunks job = {.span = 100, .step = 80, .room = 1022, .n_prefix = 1,
                                      .n_suffix = 1};

static void test_span_count(void)
{
    CU_ASSERT_EQUAL(tfenc_late_chunks_count(&job, 0), 1);   /* an empty document: one span */
    CU_ASSERT_EQUAL(tfenc_late_chunks_count(&job, 100), 1);
    CU_ASSERT_EQUAL(tfenc_late_chunks_count(&job, 101), 2); /* 0..100, 80..101 */
    CU_ASSERT_EQUAL(tfenc_late_chunks_count(&job, 180), 2);
    CU_ASSERT_EQUAL(tfenc_late_chunks_count(&job, 181), 3);
    CU_ASSERT_EQUAL(tfenc_late_chunks_count(&job, 1600), 20); /* the last starts at 1520 */
}

/* A document that fits the context is one window of every span (even
 * more than a longer document's windows hold); a longer one is cut into
 * windows of 1 + (1022 - 100) / 80 = 12 whole spans, each window's pieces
 * from its first span's start to its last span's end. */
static void test_windows(void)
{
    int first_span, n_spans, first_piece, end_piece;
    CU_ASSERT_EQUAL(tfenc_late_chunks_windows(&job, 1022), 1);
    tfenc_late_chunks_window(&job, 1022, 0, &first_span, &n_spans, &first_piece, &end_piece);
    CU_ASSERT_EQUAL(n_spans, 13); /* 13 spans: the last, 960..1022, cut by the document */
    CU_ASSERT_EQUAL(end_piece, 1022);
    CU_ASSERT_EQUAL(tfenc_late_chunks_windows(&job, 1600), 2);
    tfenc_late_chunks_window(&job, 1600, 0, &first_span, &n_spans, &first_piece, &end_piece);
    CU_ASSERT_EQUAL(first_span, 0);
    CU_ASSERT_EQUAL(n_spans, 12);
    CU_ASSERT_EQUAL(first_piece, 0);
    CU_ASSERT_EQUAL(end_piece, 11 * 80 + 100); /* 980 <= 1022 pieces */
    tfenc_late_chunks_window(&job, 1600, 1, &first_span, &n_spans, &first_piece, &end_piece);
    CU_ASSERT_EQUAL(first_span, 12);
    CU_ASSERT_EQUAL(n_spans, 8);
    CU_ASSERT_EQUAL(first_piece, 960);
    CU_ASSERT_EQUAL(end_piece, 1600);
    CU_ASSERT(end_piece - first_piece <= job.room);
}

/* Rows in the sequence: past [CLS], relative to the window's first piece,
 * the last span cut where the sequence's pieces end; the empty span of an
 * empty document is empty. */
static void test_span_rows(void)
{
    int32_t begin, end;
    tfenc_late_chunks_span_rows(&job, 0, 0, 1022, &begin, &end);
    CU_ASSERT(begin == 1 && end == 101);
    tfenc_late_chunks_span_rows(&job, 12, 0, 1022, &begin, &end);
    CU_ASSERT(begin == 961 && end == 1023);
    tfenc_late_chunks_span_rows(&job, 13, 960, 640, &begin, &end);
    CU_ASSERT(begin == 81 && end == 181);
    tfenc_late_chunks_span_rows(&job, 19, 960, 640, &begin, &end);
    CU_ASSERT(begin == 1 + 1520 - 960 && end == 1 + 640);
    tfenc_late_chunks_span_rows(&job, 0, 0, 0, &begin, &end);
    CU_ASSERT(begin == 1 && end == 1);
}

static const test_case late_chunks_cases[] = {
    {"a document's spans", test_span_count},
    {"windows of whole spans past the context", test_windows},
    {"each span's rows in its sequence", test_span_rows},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"late chunks", NULL, NULL, late_chunks_cases},
    {NULL, NULL, NULL, NULL}};
