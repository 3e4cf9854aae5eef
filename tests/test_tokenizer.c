/* Unit tests of the tokenizers: WordPiece on a small hand-made vocabulary,
 * and small hand-made tokenizer.json files (BPE merges by rank, Unigram's
 * best path, added tokens, post-processors, refusals, the weights-file
 * store/load), with expected ids worked out by hand from HF's rules. */
#include <CUnit/CUnit.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness/cunit_main.h"
#include "base/context.h"
#include "tokenizer/tokenizer.h"

/* Ids are the positions in this list. */
static const char *const vocab[] = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",          /* 0-4 */
    "un", "##aff", "##able", "the", "a",                     /* 5-9 */
    "##b", "hello", "world", ",", "!",                       /* 10-14 */
    "\xc3\xa9" /* é */, "e", "\xe4\xb8\xad" /* 中 */, "\xe6\x96\x87" /* 文 */, "i", /* 15-19 */
    "##\xcc\x87" /* ##U+0307 */,                            /* 20 */
    "x\xf0\x9d\x85\xa5\xf0\x9d\x85\xad" /* x U+1D165 U+1D16D, canonical order */, /* 21 */
    "##lo", "hel",                                           /* 22-23 */
};
#define N_VOCAB ((int)(sizeof vocab / sizeof vocab[0]))
enum { PAD, UNK, CLS, SEP, MASK, UN, AFF, ABLE, THE, A, B, HELLO, WORLD, COMMA, BANG,
       E_ACUTE, E, ZHONG, WEN, I, DOT_ABOVE, X_MARKS, LO, HEL };

static tfenc_context ctx;

static tfenc_tokenizer *make(int lowercase, int strip_accents, int chinese_chars,
                             tfenc_invalid_utf8_policy policy)
{
    tfenc_tokenizer_options options;
    tfenc_tokenizer_options_default(&options);
    options.lowercase = lowercase;
    options.strip_accents = strip_accents;
    options.chinese_chars = chinese_chars;
    options.invalid_utf8 = policy;
    tfenc_tokenizer *tokenizer = NULL;
    tfenc_context_clear(&ctx);
    int status = tfenc_tokenizer_create_from_tokens(&ctx, vocab, N_VOCAB, &options, &tokenizer);
    CU_ASSERT_EQUAL_FATAL(status, TFENC_OK);
    return tokenizer;
}

/* Encodes text (length given, so NULs and invalid bytes pass) and checks
 * the ids against expected[0..n_expected) and the truncated count. */
static void check_encode(tfenc_tokenizer *tokenizer, const char *text, size_t length, int max_length,
                         const int32_t *expected, int n_expected, int expected_truncated)
{
    int32_t ids[256];
    int n_ids = -1, n_truncated = -1;
    tfenc_context_clear(&ctx);
    int status = tfenc_tokenizer_encode(&ctx, tokenizer, text, length, ids, max_length, &n_ids,
                                        &n_truncated);
    CU_ASSERT_EQUAL(status, TFENC_OK);
    CU_ASSERT_EQUAL(n_ids, n_expected);
    CU_ASSERT_EQUAL(n_truncated, expected_truncated);
    for (int i = 0; i < n_expected && i < n_ids; i++)
        CU_ASSERT_EQUAL(ids[i], expected[i]);
    if (status != TFENC_OK || n_ids != n_expected || n_truncated != expected_truncated) {
        fprintf(stderr, "\n  text \"%.*s\": got %d ids (%d cut):", (int)(length < 60 ? length : 60),
                text, n_ids, n_truncated);
        for (int i = 0; i < n_ids; i++)
            fprintf(stderr, " %d", (int)ids[i]);
        fprintf(stderr, " %s\n", tfenc_context_message(&ctx));
    }
}

#define CHECK(tokenizer, text, max_length, truncated, ...)                                        \
    do {                                                                                          \
        const int32_t expected_[] = {__VA_ARGS__};                                                \
        check_encode(tokenizer, text, sizeof(text) - 1, max_length, expected_,                    \
                     (int)(sizeof expected_ / sizeof expected_[0]), truncated);                   \
    } while (0)

static void test_empty_text(void)
{
    tfenc_tokenizer *t = make(1, -1, 1, TFENC_INVALID_UTF8_REPLACE);
    CHECK(t, "", 128, 0, CLS, SEP);
    CHECK(t, " \t\r\n ", 128, 0, CLS, SEP);
    CU_ASSERT_EQUAL(tfenc_tokenizer_special_id(t, TFENC_SPECIAL_MASK), MASK);
    int32_t ids[2];
    int n_ids = 0, n_truncated = 0;
    CU_ASSERT_EQUAL(tfenc_tokenizer_encode(&ctx, t, NULL, 0, ids, 2, &n_ids, &n_truncated), TFENC_OK);
    CU_ASSERT_EQUAL(n_ids, 2);
    tfenc_tokenizer_destroy(t);
}

static void test_continuations(void)
{
    tfenc_tokenizer *t = make(1, -1, 1, TFENC_INVALID_UTF8_REPLACE);
    CHECK(t, "unaffable", 128, 0, CLS, UN, AFF, ABLE, SEP);
    /* Longest match first: "hel" + "##lo" would also cover "hello". */
    CHECK(t, "Hello, World!", 128, 0, CLS, HELLO, COMMA, WORLD, BANG, SEP);
    CHECK(t, "abbb", 128, 0, CLS, A, B, B, B, SEP);
    tfenc_tokenizer_destroy(t);
}

static void test_unknown_words(void)
{
    tfenc_tokenizer *t = make(1, -1, 1, TFENC_INVALID_UTF8_REPLACE);
    CHECK(t, "xyz the", 128, 0, CLS, UNK, THE, SEP);
    /* One uncoverable position makes the whole word [UNK], not "un" [UNK]. */
    CHECK(t, "unx", 128, 0, CLS, UNK, SEP);
    tfenc_tokenizer_destroy(t);
}

static void test_word_length_limit(void)
{
    tfenc_tokenizer *t = make(1, -1, 1, TFENC_INVALID_UTF8_REPLACE);
    char text[128];
    int32_t expected[128];
    /* 100 characters are still split into pieces: a ##b x 99. */
    memset(text, 'b', 100);
    text[0] = 'a';
    expected[0] = CLS;
    expected[1] = A;
    for (int i = 2; i <= 100; i++)
        expected[i] = B;
    expected[101] = SEP;
    check_encode(t, text, 100, 128, expected, 102, 0);
    /* 101 characters make one [UNK]. */
    text[100] = 'b';
    const int32_t unknown[] = {CLS, UNK, SEP};
    check_encode(t, text, 101, 128, unknown, 3, 0);
    /* The limit counts characters after normalization: 100 é are 200 bytes,
     * stripped to 100 e, which are no word of this vocabulary... */
    char accents[256];
    for (int i = 0; i < 100; i++)
        memcpy(accents + 2 * i, "\xc3\xa9", 2);
    check_encode(t, accents, 200, 128, unknown, 3, 0);
    /* ... but "é" alone is: cased, its 2 bytes are 1 character. */
    tfenc_tokenizer *cased = make(0, 0, 1, TFENC_INVALID_UTF8_REPLACE);
    CHECK(cased, "\xc3\xa9", 128, 0, CLS, E_ACUTE, SEP);
    tfenc_tokenizer_destroy(cased);
    tfenc_tokenizer_destroy(t);
}

static void test_truncation(void)
{
    tfenc_tokenizer *t = make(1, -1, 1, TFENC_INVALID_UTF8_REPLACE);
    const char text[] = "the the the the the the the the the the";  /* 10 pieces */
    CHECK(t, text, 5, 7, CLS, THE, THE, THE, SEP);
    CHECK(t, text, 2, 10, CLS, SEP);
    CHECK(t, text, 12, 0, CLS, THE, THE, THE, THE, THE, THE, THE, THE, THE, THE, SEP);
    CHECK(t, text, 11, 1, CLS, THE, THE, THE, THE, THE, THE, THE, THE, THE, SEP);
    /* Pieces of one word count one by one. */
    CHECK(t, "unaffable the", 4, 2, CLS, UN, AFF, SEP);
    int32_t ids[2];
    int n_ids = 0, n_truncated = 0;
    tfenc_context_clear(&ctx);
    CU_ASSERT_EQUAL(tfenc_tokenizer_encode(&ctx, t, "the", 3, ids, 1, &n_ids, &n_truncated),
                    TFENC_ERR_CONFIG);
    tfenc_tokenizer_destroy(t);
}

/* A static-embedding model's rules (model2vec): no special tokens, the
 * unknown token left out after truncation, the text cut by code points. */
static void test_text_rules(void)
{
    tfenc_tokenizer *t = make(1, -1, 1, TFENC_INVALID_UTF8_REPLACE);
    tfenc_tokenizer_text_rules rules = {.special_tokens = 0, .drop_unknown = 1, .max_chars = 0};
    tfenc_tokenizer_set_text_rules(t, &rules);
    CU_ASSERT_EQUAL(tfenc_tokenizer_special_count(t), 0);
    /* [UNK] leaves, also the one written in the text. */
    CHECK(t, "xyz the [UNK] world", 128, 0, THE, WORLD);
    /* Truncation keeps 3 pieces (the xyz the), then xyz leaves: 2 ids, 2 cut. */
    CHECK(t, "the xyz the world hello", 3, 2, THE, THE);
    /* A text of unknown words keeps none. */
    check_encode(t, "xyz", 3, 128, NULL, 0, 0);
    tfenc_context_clear(&ctx);
    CU_ASSERT_EQUAL(tfenc_tokenizer_check_pairs(&ctx, t), TFENC_ERR_CONFIG);
    /* Two code points of six bytes; a cut that lost text counts as 1. */
    rules.max_chars = 2;
    tfenc_tokenizer_set_text_rules(t, &rules);
    CHECK(t, "\xe4\xb8\xad\xe6\x96\x87 the", 128, 1, ZHONG, WEN);
    CHECK(t, "\xe4\xb8\xad\xe6\x96\x87", 128, 0, ZHONG, WEN);
    /* Unknown tokens kept without drop_unknown. */
    rules = (tfenc_tokenizer_text_rules){.special_tokens = 0, .drop_unknown = 0};
    tfenc_tokenizer_set_text_rules(t, &rules);
    CHECK(t, "xyz the", 128, 0, UNK, THE);
    tfenc_tokenizer_destroy(t);
}

static void test_invalid_utf8(void)
{
    tfenc_tokenizer *t = make(1, -1, 1, TFENC_INVALID_UTF8_REPLACE);
    /* The replacement character is dropped, so the word stays one word. */
    CHECK(t, "hel\xfflo", 128, 0, CLS, HELLO, SEP);
    CHECK(t, "hel\xe2\x82lo", 128, 0, CLS, HELLO, SEP);
    /* A truncated sequence must not swallow the ASCII byte after it. */
    CHECK(t, "\xe2\x82the", 128, 0, CLS, THE, SEP);
    /* Overlong '/', an encoded surrogate, a truncated 4-byte sequence at the end. */
    CHECK(t, "the\xc0\xaf \xed\xa0\x80 a\xf0\x9f\x98", 128, 0, CLS, THE, A, SEP);
    /* NUL bytes are dropped like U+0000. */
    CHECK(t, "th\0e", 128, 0, CLS, THE, SEP);
    tfenc_tokenizer_destroy(t);

    t = make(1, -1, 1, TFENC_INVALID_UTF8_ERROR);
    int32_t ids[16];
    int n_ids = 0;
    tfenc_context_clear(&ctx);
    CU_ASSERT_EQUAL(tfenc_tokenizer_encode(&ctx, t, "the \xc3\x28", 6, ids, 16, &n_ids, NULL),
                    TFENC_ERR_INPUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(&ctx), "byte offset 4"));
    /* Valid multi-byte text passes under the strict policy too. */
    CHECK(t, "h\xc3\xa9llo \xe4\xb8\xad", 128, 0, CLS, HELLO, ZHONG, SEP);
    tfenc_tokenizer_destroy(t);
}

static void test_missing_special_tokens(void)
{
    tfenc_tokenizer *t = NULL;
    const char *no_sep[] = {"[UNK]", "[CLS]", "hello"};
    tfenc_context_clear(&ctx);
    CU_ASSERT_EQUAL(tfenc_tokenizer_create_from_tokens(&ctx, no_sep, 3, NULL, &t), TFENC_ERR_CONFIG);
    CU_ASSERT_PTR_NULL(t);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(&ctx), "[SEP]"));

    char path[] = "/tmp/tfenc-vocab-XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    const char content[] = "[CLS]\n[SEP]\nhello\n";
    CU_ASSERT_EQUAL(write(fd, content, sizeof content - 1), (ssize_t)(sizeof content - 1));
    close(fd);
    tfenc_context_clear(&ctx);
    CU_ASSERT_EQUAL(tfenc_tokenizer_create_from_file(&ctx, path, NULL, &t), TFENC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(&ctx), "[UNK]"));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(&ctx), path));
    unlink(path);

    tfenc_context_clear(&ctx);
    CU_ASSERT_EQUAL(tfenc_tokenizer_create_from_file(&ctx, "/nonexistent/vocab.txt", NULL, &t),
                    TFENC_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(&ctx), "/nonexistent/vocab.txt"));
}

static void test_vocab_file(void)
{
    char path[] = "/tmp/tfenc-vocab-XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    /* CRLF lines, trailing spaces, a token listed twice (the last id wins,
     * as in HF) and a last line without newline. */
    const char content[] = "[PAD]\r\n[UNK]\r\n[CLS]\nhello  \n[SEP]\nhello\nworld";
    CU_ASSERT_EQUAL(write(fd, content, sizeof content - 1), (ssize_t)(sizeof content - 1));
    close(fd);
    tfenc_tokenizer *t = NULL;
    tfenc_context_clear(&ctx);
    CU_ASSERT_EQUAL_FATAL(tfenc_tokenizer_create_from_file(&ctx, path, NULL, &t), TFENC_OK);
    unlink(path);
    CU_ASSERT_EQUAL(tfenc_tokenizer_vocab_size(t), 7);
    CU_ASSERT_EQUAL(tfenc_tokenizer_token_id(t, "[PAD]"), 0);
    CU_ASSERT_EQUAL(tfenc_tokenizer_token_id(t, "[UNK]"), 1);
    CU_ASSERT_EQUAL(tfenc_tokenizer_token_id(t, "hello"), 5);
    CU_ASSERT_EQUAL(tfenc_tokenizer_token_id(t, "world"), 6);
    CU_ASSERT_EQUAL(tfenc_tokenizer_token_id(t, "absent"), -1);
    CHECK(t, "Hello world", 16, 0, 2, 5, 6, 4);
    tfenc_tokenizer_destroy(t);
}

static void test_normalization(void)
{
    tfenc_tokenizer *uncased = make(1, -1, 1, TFENC_INVALID_UTF8_REPLACE);
    tfenc_tokenizer *cased = make(0, 0, 1, TFENC_INVALID_UTF8_REPLACE);
    tfenc_tokenizer *lower_only = make(1, 0, 1, TFENC_INVALID_UTF8_REPLACE);
    tfenc_tokenizer *no_cjk = make(1, -1, 0, TFENC_INVALID_UTF8_REPLACE);
    /* É composed and decomposed: uncased strips to e, cased keeps é. */
    CHECK(uncased, "\xc3\x89 E\xcc\x81", 128, 0, CLS, E, E, SEP);
    CHECK(cased, "\xc3\xa9 e\xcc\x81", 128, 0, CLS, E_ACUTE, UNK, SEP);
    CHECK(lower_only, "\xc3\x89", 128, 0, CLS, E_ACUTE, SEP);
    /* Ideographs become words of their own, unless chinese_chars is off. */
    CHECK(uncased, "the\xe4\xb8\xad\xe6\x96\x87the", 128, 0, CLS, THE, ZHONG, WEN, THE, SEP);
    CHECK(no_cjk, "\xe4\xb8\xad\xe6\x96\x87", 128, 0, CLS, UNK, SEP);
    /* Whitespace: ideographic space, no-break space, tab. Controls and
     * format characters (U+200B) vanish without splitting a word. */
    CHECK(uncased, "the\xe3\x80\x80" "a\xc2\xa0" "the\t\x01th\xe2\x80\x8b" "e a", 128, 0,
          CLS, THE, A, THE, THE, A, SEP);
    /* U+0130 lower-cases fully to i + U+0307; stripping then removes the dot. */
    CHECK(lower_only, "\xc4\xb0", 128, 0, CLS, I, DOT_ABOVE, SEP);
    CHECK(uncased, "\xc4\xb0", 128, 0, CLS, I, SEP);
    /* NFD puts the spacing marks U+1D16D (class 226) and U+1D165 (216) in
     * canonical order, which only the accent-stripping path computes. */
    CHECK(uncased, "x\xf0\x9d\x85\xad\xf0\x9d\x85\xa5", 128, 0, CLS, X_MARKS, SEP);
    CHECK(cased, "x\xf0\x9d\x85\xad\xf0\x9d\x85\xa5", 128, 0, CLS, UNK, SEP);
    tfenc_tokenizer_destroy(uncased);
    tfenc_tokenizer_destroy(cased);
    tfenc_tokenizer_destroy(lower_only);
    tfenc_tokenizer_destroy(no_cjk);
}

static void test_special_tokens_in_text(void)
{
    tfenc_tokenizer *t = make(1, -1, 1, TFENC_INVALID_UTF8_REPLACE);
    /* Matched before normalization and case-sensitively, as HF does. */
    CHECK(t, "the [MASK] a[SEP]the", 128, 0, CLS, THE, MASK, A, SEP, THE, SEP);
    CHECK(t, "[mask]", 128, 0, CLS, UNK, UNK, UNK, SEP);
    tfenc_tokenizer_destroy(t);
    /* Without [MASK] in the vocabulary the text is ordinary punctuation and words. */
    const char *small[] = {"[UNK]", "[CLS]", "[SEP]", "[", "]", "mask"};
    tfenc_tokenizer *s = NULL;
    tfenc_context_clear(&ctx);
    CU_ASSERT_EQUAL_FATAL(tfenc_tokenizer_create_from_tokens(&ctx, small, 6, NULL, &s), TFENC_OK);
    CHECK(s, "[MASK]", 128, 0, 1, 3, 5, 4, 2);
    tfenc_tokenizer_destroy(s);
}

/* 10 MB documents: the pieces are counted exactly, and the time stays
 * linear (a quadratic pass would take hours, not the seconds allowed). */
static void test_long_document(void)
{
    tfenc_tokenizer *t = make(1, -1, 1, TFENC_INVALID_UTF8_REPLACE);
    const size_t size = 10u << 20;
    char *text = malloc(size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    const char unit[] = "Hello, unaffable world! ";  /* 7 pieces in 24 bytes */
    const size_t unit_bytes = sizeof unit - 1;
    size_t repeats = size / unit_bytes;
    for (size_t i = 0; i < repeats; i++)
        memcpy(text + i * unit_bytes, unit, unit_bytes);
    int32_t ids[512];
    int n_ids = 0, n_truncated = 0;
    clock_t start = clock();
    CU_ASSERT_EQUAL(tfenc_tokenizer_encode(&ctx, t, text, repeats * unit_bytes, ids, 512, &n_ids,
                                           &n_truncated), TFENC_OK);
    double seconds = (double)(clock() - start) / CLOCKS_PER_SEC;
    CU_ASSERT_EQUAL(n_ids, 512);
    CU_ASSERT_EQUAL(n_truncated, (int)(7 * repeats - 510));
    CU_ASSERT_EQUAL(ids[1], HELLO);
    CU_ASSERT_EQUAL(ids[510], ids[510 - 7]);
    CU_ASSERT_EQUAL(ids[511], SEP);
    CU_ASSERT(seconds < 30.0);

    /* One 10 MB word: one [UNK], and no memory for the word itself. */
    memset(text, 'a', size);
    CU_ASSERT_EQUAL(tfenc_tokenizer_encode(&ctx, t, text, size, ids, 512, &n_ids, &n_truncated),
                    TFENC_OK);
    CU_ASSERT_EQUAL(n_ids, 3);
    CU_ASSERT_EQUAL(ids[1], UNK);
    /* 10 MB of one spacing mark with a combining class (U+1D165, 4 bytes),
     * the case that sorts marks: still one [UNK] word. */
    for (size_t i = 0; i + 4 <= size; i += 4)
        memcpy(text + i, "\xf0\x9d\x85\xa5", 4);
    CU_ASSERT_EQUAL(tfenc_tokenizer_encode(&ctx, t, text, size, ids, 512, &n_ids, &n_truncated),
                    TFENC_OK);
    CU_ASSERT_EQUAL(n_ids, 3);
    CU_ASSERT_EQUAL(ids[1], UNK);
    fprintf(stderr, "(10 MB in %.2f s) ", seconds);
    free(text);
    tfenc_tokenizer_destroy(t);
}


/* ------------------------------------------------------- tokenizer.json */

static tfenc_tokenizer *from_json(const char *json)
{
    tfenc_tokenizer *t = NULL;
    tfenc_context_clear(&ctx);
    int status = tfenc_tokenizer_create_from_json_text(&ctx, json, strlen(json), "test.json", NULL, &t);
    if (status != TFENC_OK)
        fprintf(stderr, "\n  %s\n", tfenc_context_message(&ctx));
    CU_ASSERT_EQUAL_FATAL(status, TFENC_OK);
    return t;
}

/* Refused in one line naming the file and what is wrong. */
static void check_refused(const char *json, const char *expected)
{
    tfenc_tokenizer *t = NULL;
    tfenc_context_clear(&ctx);
    CU_ASSERT_NOT_EQUAL(tfenc_tokenizer_create_from_json_text(&ctx, json, strlen(json), "bad.json",
                                                              NULL, &t), TFENC_OK);
    CU_ASSERT_PTR_NULL(t);
    const char *message = tfenc_context_message(&ctx);
    CU_ASSERT_PTR_NOT_NULL(strstr(message, "bad.json"));
    CU_ASSERT_PTR_NOT_NULL(strstr(message, expected));
    CU_ASSERT_PTR_NULL(strchr(message, '\n'));
    if (strstr(message, expected) == NULL)
        fprintf(stderr, "\n  expected '%s' in: %s\n", expected, message);
}

/* Merges apply lowest rank first, wherever they are in the word: "abcd"
 * with ranks (c d) 0, (a b) 1, (b cd) 2, (ab cd) 3 goes c+d, a+b, then
 * ab+cd (b is gone, so (b cd) never applies). */
static void test_json_bpe(void)
{
    tfenc_tokenizer *t = from_json(
        "{\"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\", \"fuse_unk\": true,"
        " \"vocab\": {\"<unk>\": 0, \"a\": 1, \"b\": 2, \"c\": 3, \"d\": 4, \"cd\": 5, \"ab\": 6,"
        " \"bcd\": 7, \"abcd\": 8},"
        " \"merges\": [\"c d\", [\"a\", \"b\"], \"b cd\", \"ab cd\"]},"
        " \"pre_tokenizer\": {\"type\": \"WhitespaceSplit\"},"
        " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"Sequence\": {\"id\": \"A\","
        " \"type_id\": 0}}, {\"SpecialToken\": {\"id\": \"</s>\", \"type_id\": 0}}], \"pair\": [],"
        " \"special_tokens\": {\"</s>\": {\"id\": \"</s>\", \"ids\": [9], \"tokens\": [\"</s>\"]}}},"
        " \"added_tokens\": [{\"id\": 9, \"content\": \"</s>\", \"special\": true}]}");
    CHECK(t, "abcd", 16, 0, 8, 9);
    CHECK(t, "bcd dcb", 16, 0, 7, 4, 3, 2, 9);
    /* Unknown characters fuse into one <unk>; the added token splits words. */
    CHECK(t, "xyab</s>a", 16, 0, 0, 6, 9, 1, 9);
    /* Truncation keeps room for </s>: 5 pieces, 3 kept. */
    CHECK(t, "a b c d a", 4, 2, 1, 2, 3, 9);
    CU_ASSERT_EQUAL(tfenc_tokenizer_special_id(t, TFENC_SPECIAL_EOS), 9);
    CU_ASSERT_EQUAL(tfenc_tokenizer_special_id(t, TFENC_SPECIAL_BOS), -1);
    CU_ASSERT_EQUAL(tfenc_tokenizer_special_id(t, TFENC_SPECIAL_MASK), -1);
    CU_ASSERT_EQUAL(tfenc_tokenizer_special_count(t), 1);
    CU_ASSERT_EQUAL(tfenc_tokenizer_vocab_size(t), 10);
    tfenc_tokenizer_destroy(t);
}

/* Encodes the pair (first, second) and checks ids and types against
 * expected[0..n) and expected_types, and the pieces cut. */
static void check_pair(tfenc_tokenizer *t, const char *first, const char *second, int max_length,
                       const int32_t *expected, const int32_t *expected_types, int n,
                       int expected_truncated)
{
    int32_t ids[64], types[64];
    int n_ids = -1, n_truncated = -1;
    tfenc_context_clear(&ctx);
    int status = tfenc_tokenizer_encode_pair(&ctx, t, first, strlen(first), second, strlen(second),
                                             ids, types, max_length, &n_ids, &n_truncated);
    CU_ASSERT_EQUAL(status, TFENC_OK);
    CU_ASSERT_EQUAL(n_ids, n);
    CU_ASSERT_EQUAL(n_truncated, expected_truncated);
    int same = status == TFENC_OK && n_ids == n && n_truncated == expected_truncated;
    for (int i = 0; i < n && i < n_ids; i++) {
        CU_ASSERT_EQUAL(ids[i], expected[i]);
        CU_ASSERT_EQUAL(types[i], expected_types[i]);
        same = same && ids[i] == expected[i] && types[i] == expected_types[i];
    }
    if (!same) {
        fprintf(stderr, "\n  pair (\"%s\", \"%s\"): got %d ids (%d cut):", first, second, n_ids,
                n_truncated);
        for (int i = 0; i < n_ids; i++)
            fprintf(stderr, " %d/%d", (int)ids[i], (int)types[i]);
        fprintf(stderr, " %s\n", tfenc_context_message(&ctx));
    }
}

#define CHECK_PAIR(t, first, second, max_length, truncated, ids_, types_)                         \
    do {                                                                                          \
        const int32_t expected_[] = ids_, types_expected_[] = types_;                             \
        check_pair(t, first, second, max_length, expected_, types_expected_,                      \
                   (int)(sizeof expected_ / sizeof expected_[0]), truncated);                     \
    } while (0)
#define LIST(...) {__VA_ARGS__}

/* Pairs as `tokenizers` 0.19 encodes them (encode(a, b) with
 * longest_first truncation; the counts below were measured with it):
 * vocab.txt is BERT's [CLS] a [SEP] b [SEP] with types 0 then 1; a
 * TemplateProcessing lays a pair out by its `pair` template, types and
 * all; no post-processor is a b with types 0 then 1. longest_first cuts
 * the longer text to what the shorter leaves, and when both must lose
 * tokens keeps room/2 of the first and the rest (the odd one) of the
 * second: 10 and 10 pieces in a room of 5 keep 2 and 3, 3 and 20 keep 2
 * and 3, 11 and 10 keep 3 and 2. */
static void test_pairs(void)
{
    tfenc_tokenizer *t = make(1, -1, 1, TFENC_INVALID_UTF8_REPLACE);
    CU_ASSERT_EQUAL(tfenc_tokenizer_pair_special_count(t), 3);
    CHECK_PAIR(t, "hello world", "the a", 16, 0, LIST(CLS, HELLO, WORLD, SEP, THE, A, SEP),
               LIST(0, 0, 0, 0, 1, 1, 1));
    /* Room 5: "the" x10 and "a" x10 keep 2 and 3. */
    CHECK_PAIR(t, "the the the the the the the the the the", "a a a a a a a a a a", 8, 15,
               LIST(CLS, THE, THE, SEP, A, A, A, SEP), LIST(0, 0, 0, 0, 1, 1, 1, 1));
    /* 3 and 20 keep 2 and 3 (the shorter gives up one too). */
    CHECK_PAIR(t, "the the the", "a a a a a a a a a a a a a a a a a a a a", 8, 18,
               LIST(CLS, THE, THE, SEP, A, A, A, SEP), LIST(0, 0, 0, 0, 1, 1, 1, 1));
    /* 11 and 10: the longer first keeps the odd one. */
    CHECK_PAIR(t, "the the the the the the the the the the the", "a a a a a a a a a a", 8, 16,
               LIST(CLS, THE, THE, THE, SEP, A, A, SEP), LIST(0, 0, 0, 0, 0, 1, 1, 1));
    /* Only the longer is cut when the shorter fits in half. */
    CHECK_PAIR(t, "hello", "a a a a a a", 7, 3, LIST(CLS, HELLO, SEP, A, A, A, SEP),
               LIST(0, 0, 0, 1, 1, 1, 1));
    tfenc_tokenizer_destroy(t);

    /* A template with types of its own, and doubled separators. */
    t = from_json(
        "{\"model\": {\"type\": \"WordPiece\", \"unk_token\": \"u\", \"vocab\": {\"u\": 0,"
        " \"a\": 1, \"b\": 2, \"<s>\": 3, \"</s>\": 4}},"
        " \"pre_tokenizer\": {\"type\": \"WhitespaceSplit\"},"
        " \"post_processor\": {\"type\": \"TemplateProcessing\","
        " \"single\": [{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 0}},"
        " {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, {\"SpecialToken\": {\"id\": \"</s>\", \"type_id\": 0}}],"
        " \"pair\": [{\"SpecialToken\": {\"id\": \"<s>\", \"type_id\": 2}},"
        " {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}, {\"SpecialToken\": {\"id\": \"</s>\", \"type_id\": 0}},"
        " {\"SpecialToken\": {\"id\": \"</s>\", \"type_id\": 1}}, {\"Sequence\": {\"id\": \"B\", \"type_id\": 1}},"
        " {\"SpecialToken\": {\"id\": \"</s>\", \"type_id\": 1}}],"
        " \"special_tokens\": {\"<s>\": {\"id\": \"<s>\", \"ids\": [3], \"tokens\": [\"<s>\"]},"
        " \"</s>\": {\"id\": \"</s>\", \"ids\": [4], \"tokens\": [\"</s>\"]}}},"
        " \"added_tokens\": []}");
    CU_ASSERT_EQUAL(tfenc_tokenizer_pair_special_count(t), 4);
    CHECK_PAIR(t, "a a", "b", 16, 0, LIST(3, 1, 1, 4, 4, 2, 4), LIST(2, 0, 0, 0, 1, 1, 1));
    tfenc_tokenizer_destroy(t);

    /* No post-processor: a b, the second text type 1. */
    t = from_json("{\"model\": {\"type\": \"WordPiece\", \"unk_token\": \"u\", \"vocab\": {\"u\": 0,"
                  " \"a\": 1, \"b\": 2}}, \"pre_tokenizer\": {\"type\": \"WhitespaceSplit\"},"
                  " \"post_processor\": null, \"added_tokens\": []}");
    CHECK_PAIR(t, "a", "b b", 16, 0, LIST(1, 2, 2), LIST(0, 1, 1));
    tfenc_tokenizer_destroy(t);

    /* A template without a pair (or with B first) encodes single texts, and
     * refuses pairs in one line naming the file. */
    t = from_json("{\"model\": {\"type\": \"WordPiece\", \"unk_token\": \"u\", \"vocab\": {\"u\": 0,"
                  " \"a\": 1}}, \"pre_tokenizer\": {\"type\": \"WhitespaceSplit\"},"
                  " \"post_processor\": {\"type\": \"TemplateProcessing\","
                  " \"single\": [{\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}],"
                  " \"pair\": [{\"Sequence\": {\"id\": \"B\", \"type_id\": 0}},"
                  " {\"Sequence\": {\"id\": \"A\", \"type_id\": 0}}], \"special_tokens\": {}},"
                  " \"added_tokens\": []}");
    CHECK(t, "a", 4, 0, 1);
    tfenc_context_clear(&ctx);
    CU_ASSERT_EQUAL(tfenc_tokenizer_check_pairs(&ctx, t), TFENC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(&ctx), "test.json: the post_processor has no 'pair' template"));
    tfenc_tokenizer_destroy(t);
}

/* Unigram takes the best-scoring path: "▁abc" as "▁a" + "bc" (-0.25 - 1.5)
 * beats "▁a" + "b" + "c" (-2.25) and "▁" + "ab" + "c" (-2.5); "x" is
 * unknown, and a run of unknowns is one <unk>. */
static void test_json_unigram(void)
{
    tfenc_tokenizer *t = from_json(
        "{\"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": [[\"<unk>\", 0.0],"
        " [\"a\", -1.0], [\"b\", -1.0], [\"c\", -1.0], [\"ab\", -1.0], [\"bc\", -1.5],"
        " [\"\\u2581\", -0.5], [\"\\u2581a\", -0.25]]},"
        " \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFKC\"},"
        " {\"type\": \"Lowercase\"}]},"
        " \"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"\\u2581\","
        " \"prepend_scheme\": \"always\", \"split\": true},"
        " \"post_processor\": null, \"added_tokens\": []}");
    /* NFKC and Lowercase turn the fullwidth A into "a"; Metaspace puts
     * U+2581 in front. */
    CHECK(t, "\xef\xbc\xa1" "bc", 16, 0, 7, 5);
    /* ...and x x fuse into one unknown. */
    CHECK(t, "xxab", 16, 0, 6, 0, 4);
    tfenc_tokenizer_destroy(t);
}

/* Metaspace's prepend_scheme "first" prepends only to the text that starts
 * at offset 0 of the original, and HF's alignments move that start when a
 * normalizer removes the first character: Strip with leading spaces,
 * BertNormalizer with a leading control, Replace with "" at the start.
 * Expected pieces from tokenizers 0.19 on the same tokenizer. */
static void test_json_metaspace_first(void)
{
    static const char *const normalizers[] = {
        "{\"type\": \"Lowercase\"}", "{\"type\": \"Strip\", \"strip_left\": true, \"strip_right\": true}",
        "{\"type\": \"BertNormalizer\", \"lowercase\": false}",
        "{\"type\": \"Replace\", \"pattern\": {\"String\": \"x\"}, \"content\": \"\"}"};
    /* Ids: <unk> 0, ▁ 1, h 2, ▁h 3, x 4; texts "h h", "  h h", "\x01h h", "xh h". */
    static const int32_t expected[4][4][4] = {
        {{3, 3, -1}, {1, 3, 3, -1}, {1, 0, 2, 3}, {1, 4, 2, 3}},
        {{3, 3, -1}, {2, 3, -1}, {1, 0, 2, 3}, {1, 4, 2, 3}},
        {{3, 3, -1}, {1, 3, 3, -1}, {2, 3, -1}, {1, 4, 2, 3}},
        {{3, 3, -1}, {1, 3, 3, -1}, {1, 0, 2, 3}, {2, 3, -1}}};
    static const char *const texts[] = {"h h", "  h h", "\x01h h", "xh h"};
    for (int n = 0; n < 4; n++) {
        char json[1024];
        snprintf(json, sizeof json,
                 "{\"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": [[\"<unk>\", 0.0],"
                 " [\"\\u2581\", -1.0], [\"h\", -2.0], [\"\\u2581h\", -1.5], [\"x\", -1.0]]},"
                 " \"normalizer\": %s, \"pre_tokenizer\": {\"type\": \"Metaspace\","
                 " \"replacement\": \"\\u2581\", \"prepend_scheme\": \"first\", \"split\": true}}",
                 normalizers[n]);
        tfenc_tokenizer *t = from_json(json);
        for (int k = 0; k < 4; k++) {
            int n_expected = 0;
            while (n_expected < 4 && expected[n][k][n_expected] >= 0)
                n_expected++;
            check_encode(t, texts[k], strlen(texts[k]), 16, expected[n][k], n_expected, 0);
        }
        tfenc_tokenizer_destroy(t);
    }
}

/* Added tokens: matched on the raw text, longest first; single_word only
 * between non-word characters; lstrip / rstrip swallow the spaces. */
static void test_json_added_tokens(void)
{
    tfenc_tokenizer *t = from_json(
        "{\"model\": {\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\", \"vocab\": {\"[UNK]\": 0,"
        " \"[CLS]\": 1, \"[SEP]\": 2, \"a\": 3, \"##a\": 4, \"<m>\": 5, \"<\": 6, \">\": 7, \"m\": 8,"
        " \"w\": 9, \"<mm>\": 10}},"
        " \"normalizer\": {\"type\": \"BertNormalizer\", \"lowercase\": true},"
        " \"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"},"
        " \"post_processor\": {\"type\": \"BertProcessing\", \"sep\": [\"[SEP]\", 2], \"cls\": [\"[CLS]\", 1]},"
        " \"added_tokens\": [{\"id\": 5, \"content\": \"<m>\", \"lstrip\": true, \"rstrip\": true,"
        " \"normalized\": false, \"special\": true},"
        " {\"id\": 10, \"content\": \"<mm>\", \"normalized\": false, \"special\": true},"
        " {\"id\": 9, \"content\": \"W\", \"single_word\": true, \"normalized\": false}]}");
    CHECK(t, "a <m> a", 16, 0, 1, 3, 5, 3, 2);
    CHECK(t, "aa<mm>a", 16, 0, 1, 3, 4, 10, 3, 2);
    /* W alone is the added token; inside "aWa" it is a letter (lower-cased
     * to w, then [UNK] as a word "awa" WordPiece cannot cover). HF ignores
     * the file's id 9 for W, which the model lacks: it takes the next id
     * after the model's 11 entries, 11. */
    CHECK(t, "a W a", 16, 0, 1, 3, 11, 3, 2);
    CHECK(t, "aWa", 16, 0, 1, 0, 2);
    /* Case-sensitive: <M> is not <m>; it is lower-cased to "<", "m", ">". */
    CHECK(t, "<M>", 16, 0, 1, 6, 8, 7, 2);
    CU_ASSERT_EQUAL(tfenc_tokenizer_special_id(t, TFENC_SPECIAL_CLS), 1);
    CU_ASSERT_EQUAL(tfenc_tokenizer_special_id(t, TFENC_SPECIAL_UNK), 0);
    tfenc_tokenizer_destroy(t);
}

/* RoBERTa and XLM-R spell the mask token <mask> (ColBERT pads queries with
 * it); a BPE whose vocabulary has it finds it as the mask. */
static void test_json_mask_spelling(void)
{
    tfenc_tokenizer *t = from_json(
        "{\"model\": {\"type\": \"BPE\", \"unk_token\": \"<unk>\","
        " \"vocab\": {\"<unk>\": 0, \"a\": 1, \"<mask>\": 2}, \"merges\": []},"
        " \"pre_tokenizer\": {\"type\": \"WhitespaceSplit\"},"
        " \"added_tokens\": [{\"id\": 2, \"content\": \"<mask>\", \"special\": true}]}");
    CU_ASSERT_EQUAL(tfenc_tokenizer_special_id(t, TFENC_SPECIAL_MASK), 2);
    tfenc_tokenizer_destroy(t);
}

/* Byte-level BPE: bytes map to GPT-2's characters (space -> U+0120), an
 * invalid byte becomes U+FFFD's three bytes, as Python's decoding gives. */
static void test_json_byte_level(void)
{
    tfenc_tokenizer *t = from_json(
        "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"\\u0120\": 1, \"\\u0120a\": 2,"
        " \"\\u00ef\": 3, \"\\u00bf\": 4, \"\\u00bd\": 5}, \"merges\": [\"\\u0120 a\"]},"
        " \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true},"
        " \"post_processor\": {\"type\": \"ByteLevel\"}, \"added_tokens\": []}");
    CHECK(t, "a a", 16, 0, 0, 2);
    CHECK(t, "a\xff", 16, 0, 0, 3, 4, 5);
    CU_ASSERT_EQUAL(tfenc_tokenizer_special_count(t), 0);
    tfenc_tokenizer_destroy(t);
}

/* A 1 MiB word: BPE's merges go through the heap in n log n (2^20 a's
 * merge pairwise ten times into 1024 pieces of 1024 a's), Unigram's
 * lattice in n x longest piece; both exact and in seconds. */
static void test_json_long_word(void)
{
    char json[16384];
    int at = snprintf(json, sizeof json, "{\"model\": {\"type\": \"BPE\", \"vocab\": {");
    for (int k = 0; k <= 10; k++) {
        at += snprintf(json + at, sizeof json - (size_t)at, "%s\"", k ? ", " : "");
        for (int i = 0; i < (1 << k); i++)
            json[at++] = 'a';
        at += snprintf(json + at, sizeof json - (size_t)at, "\": %d", k);
    }
    at += snprintf(json + at, sizeof json - (size_t)at, "}, \"merges\": [");
    for (int k = 0; k < 10; k++) {
        at += snprintf(json + at, sizeof json - (size_t)at, "%s\"", k ? ", " : "");
        for (int side = 0; side < 2; side++) {
            for (int i = 0; i < (1 << k); i++)
                json[at++] = 'a';
            json[at++] = side == 0 ? ' ' : '"';
        }
    }
    snprintf(json + at, sizeof json - (size_t)at, "]}}");
    tfenc_tokenizer *bpe = from_json(json);
    tfenc_tokenizer *unigram = from_json(
        "{\"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": [[\"<unk>\", 0.0],"
        " [\"a\", -1.0], [\"aa\", -1.5], [\"aaaa\", -2.5]]}}");
    const size_t size = (size_t)1 << 20;
    char *text = malloc(size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    memset(text, 'a', size);
    int32_t *ids = malloc(2048 * sizeof *ids);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ids);
    int n_ids = 0, n_truncated = 0;
    clock_t start = clock();
    tfenc_context_clear(&ctx);
    CU_ASSERT_EQUAL(tfenc_tokenizer_encode(&ctx, bpe, text, size, ids, 2048, &n_ids, &n_truncated),
                    TFENC_OK);
    CU_ASSERT_EQUAL(n_ids, 1024);
    CU_ASSERT_EQUAL(n_truncated, 0);
    CU_ASSERT_EQUAL(ids[0], 10);
    CU_ASSERT_EQUAL(ids[1023], 10);
    /* Unigram: "aaaa" (-2.5) beats every other way to cover four a's. */
    CU_ASSERT_EQUAL(tfenc_tokenizer_encode(&ctx, unigram, text, size, ids, 2048, &n_ids, &n_truncated),
                    TFENC_OK);
    CU_ASSERT_EQUAL(n_ids, 2048);
    CU_ASSERT_EQUAL(n_truncated, (int)(size / 4) - 2048);
    CU_ASSERT_EQUAL(ids[0], 3);
    double seconds = (double)(clock() - start) / CLOCKS_PER_SEC;
    CU_ASSERT(seconds < 30.0);
    fprintf(stderr, "(2 x 1 MiB in %.2f s) ", seconds);
    free(ids);
    free(text);
    tfenc_tokenizer_destroy(bpe);
    tfenc_tokenizer_destroy(unigram);
}

static void test_json_refusals(void)
{
    check_refused("{\"model\": {\"type\": \"WordLevel\", \"vocab\": {}}}", "WordLevel");
    check_refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
                  " \"normalizer\": {\"type\": \"Nmt\"}}", "normalizer: type 'Nmt'");
    check_refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
                  " \"pre_tokenizer\": {\"type\": \"UnicodeScripts\"}}", "UnicodeScripts");
    check_refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
                  " \"post_processor\": {\"type\": \"Mystery\"}}", "post_processor: type 'Mystery'");
    check_refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a b\"]}}",
                  "merge 1");
    check_refused("{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []},"
                  " \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\"},"
                  " \"behavior\": \"Isolated\"}}", "does not compile");
    check_refused("{\"model\": ", "not JSON");
    check_refused("{\"model\": {\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\", \"vocab\": {\"a\": 0}}}",
                  "unk_token '[UNK]' is not in the vocabulary");
    tfenc_tokenizer *t = NULL;
    tfenc_context_clear(&ctx);
    CU_ASSERT_EQUAL(tfenc_tokenizer_create_from_json_file(&ctx, "/nonexistent/tokenizer.json", NULL, &t),
                    TFENC_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(&ctx), "/nonexistent/tokenizer.json"));
}

/* The weights file keeps a tokenizer.json whole and a vocab.txt in tfenc
 * 0.1's layout; both load back to the same ids, and a file written by hand
 * in the 0.1 layout (as tfenc-import 0.1 did) loads with its options. */
static void test_store_and_load(void)
{
    char path[] = "/tmp/tfenc-tokenizer-XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    close(fd);
    tfenc_tokenizer *wordpiece = make(0, 0, 1, TFENC_INVALID_UTF8_REPLACE);
    const char json[] = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2},"
                        " \"merges\": [\"a b\"]}, \"added_tokens\": []}";
    tfenc_tokenizer *bpe = from_json(json);
    for (int kind = 0; kind < 2; kind++) {
        hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        CU_ASSERT_FATAL(file >= 0);
        tfenc_context_clear(&ctx);
        CU_ASSERT_EQUAL(tfenc_tokenizer_store(&ctx, kind ? bpe : wordpiece, file, path), TFENC_OK);
        H5Fclose(file);
        tfenc_tokenizer *loaded = NULL;
        CU_ASSERT_EQUAL_FATAL(tfenc_tokenizer_load(&ctx, path, NULL, &loaded), TFENC_OK);
        if (kind) {
            CHECK(loaded, "abba", 16, 0, 2, 1, 0);
        } else {
            /* Stored cased: É stays é (15) where the default would strip it. */
            CHECK(loaded, "\xc3\xa9 Hello", 16, 0, CLS, E_ACUTE, UNK, SEP);
            tfenc_tokenizer_destroy(loaded);
            /* The job's own lowercase wins over the stored one. */
            tfenc_tokenizer_options options;
            tfenc_tokenizer_options_default(&options);
            options.lowercase = 1;
            options.strip_accents = -1;
            options.job_set = TFENC_TOKENIZER_SET_LOWERCASE | TFENC_TOKENIZER_SET_STRIP_ACCENTS;
            CU_ASSERT_EQUAL_FATAL(tfenc_tokenizer_load(&ctx, path, &options, &loaded), TFENC_OK);
            CHECK(loaded, "\xc3\xa9 Hello", 16, 0, CLS, E, HELLO, SEP);
        }
        tfenc_tokenizer_destroy(loaded);
    }
    /* A file without a tokenizer: TFENC_ERR_NOT_FOUND with the path. */
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(file);
    tfenc_tokenizer *none = NULL;
    tfenc_context_clear(&ctx);
    CU_ASSERT_EQUAL(tfenc_tokenizer_load(&ctx, path, NULL, &none), TFENC_ERR_NOT_FOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(&ctx), path));
    unlink(path);
    tfenc_tokenizer_destroy(wordpiece);
    tfenc_tokenizer_destroy(bpe);
}

static int suite_init(void)
{
    tfenc_context_init(&ctx);
    return 0;
}

static const test_case tokenizer_cases[] = {
    {"empty text gives [CLS] [SEP]", test_empty_text},
    {"## continuations, longest match first", test_continuations},
    {"unknown words", test_unknown_words},
    {"100-character word limit", test_word_length_limit},
    {"truncation and its count", test_truncation},
    {"text rules: no specials, unknown dropped, characters cut", test_text_rules},
    {"invalid UTF-8 under both policies", test_invalid_utf8},
    {"missing special tokens", test_missing_special_tokens},
    {"vocab.txt parsing", test_vocab_file},
    {"normalization", test_normalization},
    {"special tokens written in the text", test_special_tokens_in_text},
    {"10 MB documents", test_long_document},
    {"tokenizer.json BPE: merges by rank, unknowns, template", test_json_bpe},
    {"tokenizer.json: the mask token spelled <mask>", test_json_mask_spelling},
    {"pairs: layouts, types, longest_first truncation", test_pairs},
    {"tokenizer.json Unigram: best path, NFKC, Metaspace", test_json_unigram},
    {"tokenizer.json added tokens", test_json_added_tokens},
    {"Metaspace prepend_scheme first after normalizers", test_json_metaspace_first},
    {"tokenizer.json byte-level BPE and invalid UTF-8", test_json_byte_level},
    {"tokenizer.json refusals in one line", test_json_refusals},
    {"1 MiB words through BPE and Unigram", test_json_long_word},
    {"store in and load from the weights file", test_store_and_load},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"tokenizer", suite_init, NULL, tokenizer_cases},
    {NULL, NULL, NULL, NULL}};
