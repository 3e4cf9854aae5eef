/* libFuzzer target: a tokenizer.json from arbitrary bytes, then texts
 * through it. Malformed JSON, unknown components, wrong types, huge ids,
 * pathological regexes: creation either succeeds or fails with one line
 * naming the source; encoding then never crashes or hangs, and every id it
 * gives is inside the vocabulary. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/context.h"
#include "tokenizer/tokenizer.h"

#define require(condition) ((condition) ? (void)0 : broken(__LINE__, #condition))

static void broken(int line, const char *condition)
{
    fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, line, condition);
    abort();
}

/* Texts every tokenizer gets after the fuzzed one, beside the input's own
 * tail: scripts, emoji, combining marks, controls, invalid UTF-8. */
static const char *const texts[] = {
    "Hello, world! It's 2024: naïve café, Straße 123.",
    ("\xe4\xb8\xad\xe6\x96\x87 \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 "
     "\xd8\xa7\xd9\x84\xd8\xb9\xd8\xb1\xd8\xa8\xd9\x8a\xd8\xa9 \xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x92\xbb"),
    "e\xcc\x81\xcc\xa3 \t\r\n\x01\x7f \xff\xc3\x28 \xed\xa0\x80 [CLS] <s> </s> <unk> <mask>",
    "   leading and trailing spaces   ",
    "",
};
#define N_TEXTS (sizeof texts / sizeof texts[0])
#define MAX_LENGTH 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The JSON runs to the first NUL byte; what follows is one more text. */
    const uint8_t *nul = memchr(data, 0, size);
    size_t json_length = nul != NULL ? (size_t)(nul - data) : size;
    /* Heap copies of exactly the bytes given, so ASan sees any overread. */
    char *json = malloc(json_length + 1);
    require(json != NULL);
    memcpy(json, data, json_length);
    json[json_length] = '\0';
    size_t tail_length = nul != NULL ? size - json_length - 1 : 0;
    char *tail = malloc(tail_length + 1);
    require(tail != NULL);
    if (tail_length > 0)
        memcpy(tail, nul + 1, tail_length);

    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_tokenizer_options options;
    tfenc_tokenizer_options_default(&options);
    options.invalid_utf8 = size % 2 ? TFENC_INVALID_UTF8_ERROR : TFENC_INVALID_UTF8_REPLACE;
    tfenc_tokenizer *tokenizer = NULL;
    int status = tfenc_tokenizer_create_from_json_text(&ctx, json, json_length, "fuzz.json",
                                                       &options, &tokenizer);
    if (status != TFENC_OK) {
        const char *message = tfenc_context_message(&ctx);
        require(tokenizer == NULL);
        require(message[0] != '\0' && strchr(message, '\n') == NULL);
        require(strstr(message, "fuzz.json") != NULL || status == TFENC_ERR_NO_MEMORY);
    } else {
        int vocab_size = tfenc_tokenizer_vocab_size(tokenizer);
        int specials = tfenc_tokenizer_special_count(tokenizer);
        int max_length = specials + 1 + (int)(size % 17);
        if (max_length > MAX_LENGTH)
            max_length = MAX_LENGTH;
        for (size_t i = 0; i <= N_TEXTS; i++) {
            const char *text = i < N_TEXTS ? texts[i] : tail;
            size_t length = i < N_TEXTS ? strlen(texts[i]) : tail_length;
            int32_t ids[MAX_LENGTH];
            int n_ids = -1, n_truncated = -1;
            tfenc_context_clear(&ctx);
            status = tfenc_tokenizer_encode(&ctx, tokenizer, text, length, ids, max_length, &n_ids,
                                            &n_truncated);
            if (status != TFENC_OK) {
                /* Invalid UTF-8 under ERROR, a regex over its step limit, a
                 * Unigram model without unk_id, or a budget too small. */
                const char *message = tfenc_context_message(&ctx);
                require(message[0] != '\0' && strchr(message, '\n') == NULL);
                continue;
            }
            require(n_ids >= specials && n_ids <= max_length && n_truncated >= 0);
            for (int k = 0; k < n_ids; k++)
                require(ids[k] >= 0 && ids[k] < vocab_size);
        }
        tfenc_tokenizer_destroy(tokenizer);
    }
    free(json);
    free(tail);
    return 0;
}
