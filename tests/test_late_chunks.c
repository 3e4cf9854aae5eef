/* Late chunking's spans and windows (core/run/late_chunks): where each
 * span of a document lies, by tokens and by sentences, and how a document
 * longer than the context is cut into windows of whole spans. */
#include "harness/cunit_main.h"
#include "run/late_chunks.h"

#include <CUnit/CUnit.h>
#include <string.h>

/* Spans of 100 pieces every 80, sequences of 1022 pieces between [CLS]
 * and [SEP]: late_chunking.sh's job. */
static const tfenc_late_chunks job = {.span = 100, .step = 80, .room = 1022, .n_prefix = 1,
                                      .n_suffix = 1};

static int32_t begin[2000], end[2000];

static int spans(const tfenc_late_chunks *c, int n_pieces, const uint8_t *sentence_ends)
{
    return tfenc_late_chunks_spans(c, n_pieces, sentence_ends, begin, end);
}

static void test_span_count(void)
{
    CU_ASSERT_EQUAL(spans(&job, 0, NULL), 1); /* an empty document: one empty span */
    CU_ASSERT(begin[0] == 0 && end[0] == 0);
    CU_ASSERT_EQUAL(spans(&job, 100, NULL), 1);
    CU_ASSERT_EQUAL(spans(&job, 101, NULL), 2); /* 0..100, 80..101 */
    CU_ASSERT(begin[1] == 80 && end[1] == 101);
    CU_ASSERT_EQUAL(spans(&job, 180, NULL), 2);
    CU_ASSERT_EQUAL(spans(&job, 181, NULL), 3);
    CU_ASSERT_EQUAL(spans(&job, 1600, NULL), 20); /* the last starts at 1520 */
    CU_ASSERT(begin[19] == 1520 && end[19] == 1600);
}

/* A document that fits the context is one window of every span (even
 * more than a longer document's windows hold); a longer one is cut into
 * windows of 1 + (1022 - 100) / 80 = 12 whole spans, each window's pieces
 * from its first span's start to its last span's end. */
static void test_windows(void)
{
    int n = spans(&job, 1022, NULL);
    CU_ASSERT_EQUAL(tfenc_late_chunks_window(&job, 1022, begin, end, n, 0), 13);
    CU_ASSERT_EQUAL(end[12], 1022); /* the last, 960..1022, cut by the document */
    n = spans(&job, 1600, NULL);
    CU_ASSERT_EQUAL(tfenc_late_chunks_window(&job, 1600, begin, end, n, 0), 12);
    CU_ASSERT_EQUAL(end[11], 11 * 80 + 100); /* 980 <= 1022 pieces */
    CU_ASSERT_EQUAL(tfenc_late_chunks_window(&job, 1600, begin, end, n, 12), 8);
    CU_ASSERT(begin[12] == 960 && end[19] == 1600);
    CU_ASSERT(end[19] - begin[12] <= job.room);
}

/* By sentence: a span ends after each marked piece and with the
 * document; a sentence longer than `span` pieces is cut into spans of
 * `span`, the last one the rest. */
static void test_sentence_spans(void)
{
    const tfenc_late_chunks by_sentence = {.span = 4, .step = 4, .room = 10, .n_prefix = 1,
                                           .n_suffix = 1, .sentences = 1};
    /* pieces:            0  1  2  3  4  5  6  7  8  9 10 11 12 */
    const uint8_t ends[] = {0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0};
    CU_ASSERT_EQUAL(spans(&by_sentence, 13, ends), 5);
    const int32_t want_begin[] = {0, 2, 6, 10, 11}, want_end[] = {2, 6, 10, 11, 13};
    CU_ASSERT(memcmp(begin, want_begin, sizeof want_begin) == 0);
    CU_ASSERT(memcmp(end, want_end, sizeof want_end) == 0);
    /* 13 pieces > room 10: windows of the whole spans that fit 10 pieces. */
    CU_ASSERT_EQUAL(tfenc_late_chunks_window(&by_sentence, 13, begin, end, 5, 0), 3);
    CU_ASSERT_EQUAL(tfenc_late_chunks_window(&by_sentence, 13, begin, end, 5, 3), 2);
    /* One sentence, its mark the last piece; no marks at all; empty. */
    const uint8_t last[] = {0, 0, 1};
    CU_ASSERT_EQUAL(spans(&by_sentence, 3, last), 1);
    CU_ASSERT(begin[0] == 0 && end[0] == 3);
    CU_ASSERT_EQUAL(spans(&by_sentence, 9, NULL), 3);
    CU_ASSERT(begin[2] == 8 && end[2] == 9);
    CU_ASSERT_EQUAL(spans(&by_sentence, 0, NULL), 1);
    CU_ASSERT(begin[0] == 0 && end[0] == 0);
    /* Every window holds a span: one as long as the room fits alone. */
    const tfenc_late_chunks tight = {.span = 4, .step = 4, .room = 4, .sentences = 1};
    CU_ASSERT_EQUAL(spans(&tight, 9, NULL), 3);
    CU_ASSERT_EQUAL(tfenc_late_chunks_window(&tight, 9, begin, end, 3, 0), 1);
    CU_ASSERT_EQUAL(tfenc_late_chunks_window(&tight, 9, begin, end, 3, 1), 1);
    CU_ASSERT_EQUAL(tfenc_late_chunks_window(&tight, 9, begin, end, 3, 2), 1);
}

static const test_case late_chunks_cases[] = {
    {"a document's spans", test_span_count},
    {"windows of whole spans past the context", test_windows},
    {"spans by sentence, cut at chunk_tokens", test_sentence_spans},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"late chunks", NULL, NULL, late_chunks_cases},
    {NULL, NULL, NULL, NULL}};
