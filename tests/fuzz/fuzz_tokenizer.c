/* libFuzzer target: WordPiece-encodes arbitrary bytes with a small vocabulary
 * and checks what every encoding must satisfy, whatever the text. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/context.h"
#include "tokenizer/tokenizer.h"

/* Multi-byte, continuation and special pieces, so that the longest-match
 * search, the "##" lookups and the special-token split all get exercised. */
static const char *const vocab[] = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "ab", "##b", "##a", "##ab",
    "hello", "##llo", "he", "world", ",", ".", "!", "[", "]", "é", "e", "##é", "中", "文",
    "日本", "##本", "ǆ", "i", "##̇", "straße", "##ß", "\xf0\x9f\x98\x80", "1", "##1",
};
#define N_VOCAB ((int)(sizeof vocab / sizeof vocab[0]))
#define MAX_LENGTH 64

/* A broken invariant is a finding: say which, then stop the fuzzer with a
 * stack trace and the input saved. */
#define require(condition) ((condition) ? (void)0 : broken(__LINE__, #condition))

static void broken(int line, const char *condition)
{
    fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, line, condition);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    /* The first byte picks the options and the output capacity. */
    uint8_t choice = data[0];
    tfenc_tokenizer_options options;
    tfenc_tokenizer_options_default(&options);
    options.lowercase = choice & 1;
    options.strip_accents = (int)((choice >> 1) % 3) - 1;
    options.chinese_chars = (choice >> 3) & 1;
    options.invalid_utf8 = (choice >> 4) & 1 ? TFENC_INVALID_UTF8_ERROR
                                             : TFENC_INVALID_UTF8_REPLACE;
    int max_length = 2 + (choice >> 5) * 3; /* 2..23: truncation is common */
    const char *text = (const char *)data + 1;
    size_t length = size - 1;

    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_tokenizer *tokenizer = NULL;
    require(tfenc_tokenizer_create_from_tokens(&ctx, vocab, N_VOCAB, &options, &tokenizer)
            == TFENC_OK);

    /* A heap copy of exactly `length` bytes: ASan then sees any read past
     * the text, which need not be NUL-terminated. */
    char *copy = malloc(length > 0 ? length : 1);
    require(copy != NULL);
    memcpy(copy, text, length);

    int32_t ids[MAX_LENGTH];
    int n_ids = -1, n_truncated = -1;
    int status = tfenc_tokenizer_encode(&ctx, tokenizer, copy, length, ids, max_length, &n_ids,
                                        &n_truncated);
    if (status != TFENC_OK) {
        /* Only the invalid-UTF-8 policy may refuse a text, with a message. */
        require(status == TFENC_ERR_INPUT);
        require(options.invalid_utf8 == TFENC_INVALID_UTF8_ERROR);
        require(tfenc_context_message(&ctx)[0] != '\0');
    } else {
        require(n_ids >= 2 && n_ids <= max_length && n_truncated >= 0);
        require(ids[0] == tfenc_tokenizer_token_id(tokenizer, "[CLS]"));
        require(ids[n_ids - 1] == tfenc_tokenizer_token_id(tokenizer, "[SEP]"));
        for (int i = 0; i < n_ids; i++)
            require(ids[i] >= 0 && ids[i] < N_VOCAB);

        /* With room for everything, the same pieces come out untruncated:
         * truncation only cuts the tail. */
        int32_t whole[MAX_LENGTH];
        int n_whole = -1, cut = -1;
        if (n_ids - 2 + n_truncated + 2 <= MAX_LENGTH) {
            require(tfenc_tokenizer_encode(&ctx, tokenizer, copy, length, whole, MAX_LENGTH,
                                           &n_whole, &cut) == TFENC_OK);
            require(cut == 0 && n_whole == n_ids + n_truncated);
            require(memcmp(whole, ids, (size_t)(n_ids - 1) * sizeof *ids) == 0);
        }
    }
    free(copy);
    tfenc_tokenizer_destroy(tokenizer);
    return 0;
}
