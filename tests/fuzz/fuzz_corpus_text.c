/* libFuzzer target: arbitrary bytes as a text or JSON Lines corpus, read in
 * 1 to 8 byte-range shares as the ranks of tfenc-batch read it. Checked
 * against an independent split of the bytes into lines: the shares together
 * hold every line once, in order; a NUL byte is refused naming its true
 * line number and file offset, whichever share finds it. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/context.h"
#include "input/corpus.h"

/* A broken invariant is a finding: say which, then stop the fuzzer with a
 * stack trace and the input saved. */
#define require(condition) ((condition) ? (void)0 : broken(__LINE__, #condition))

static void broken(int line, const char *condition)
{
    fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, line, condition);
    abort();
}

static char path[64];

static void remove_input(void)
{
    if (path[0] != '\0')
        unlink(path);
}

/* The reference split: line i is bytes [start, end) without "\n" and then
 * one "\r"; a final line needs no newline; nothing after a final newline. */
typedef struct line {
    size_t start;
    size_t length;
} line;

static size_t split_lines(const uint8_t *text, size_t size, line *lines)
{
    size_t n = 0;
    for (size_t start = 0; start < size;) {
        const uint8_t *newline = memchr(text + start, '\n', size - start);
        size_t end = newline != NULL ? (size_t)(newline - text) : size;
        size_t length = end - start;
        if (length > 0 && text[end - 1] == '\r')
            length--;
        lines[n].start = start;
        lines[n].length = length;
        n++;
        start = end + 1;
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (path[0] == '\0') {
        snprintf(path, sizeof path, "%s/tfenc-fuzz-corpus-%ld.txt",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (long)getpid());
        atexit(remove_input);
    }
    if (size < 1)
        return 0;
    /* The first byte: format and share count; the rest is the file. */
    int jsonl = data[0] & 1;
    int n_shares = 1 + ((data[0] >> 1) & 7);
    const uint8_t *text = data + 1;
    size_t text_size = size - 1;
    FILE *file = fopen(path, "wb");
    require(file != NULL);
    require(fwrite(text, 1, text_size, file) == text_size);
    require(fclose(file) == 0);

    /* A file that opens with a compressor's magic bytes is read as that
     * stream (core/input/stream.c): its documents are the decoded lines,
     * which this model does not compute, so only the failure's form is
     * checked for it (test_stream checks the codecs' contents). */
    static const uint8_t gzip[] = {0x1f, 0x8b}, zstd[] = {0x28, 0xb5, 0x2f, 0xfd},
                         xz[] = {0xfd, '7', 'z', 'X', 'Z', 0x00};
    const int compressed =
        (text_size >= sizeof gzip && memcmp(text, gzip, sizeof gzip) == 0) ||
        (text_size >= sizeof zstd && memcmp(text, zstd, sizeof zstd) == 0) ||
        (text_size >= sizeof xz && memcmp(text, xz, sizeof xz) == 0);
    line *lines = malloc((text_size + 1) * sizeof *lines);
    require(lines != NULL);
    size_t n_lines = split_lines(text, text_size, lines);
    /* The first NUL byte, and its line: what the refusal must name. */
    const uint8_t *nul = memchr(text, '\0', text_size);
    size_t nul_line = 0;
    while (nul != NULL && nul_line + 1 < n_lines && lines[nul_line + 1].start <= (size_t)(nul - text))
        nul_line++;

    tfenc_corpus_options options = {.path = path,
                                    .format = jsonl ? TFENC_CORPUS_JSONL : TFENC_CORPUS_TEXT,
                                    .id_field = jsonl && (data[0] & 16) ? "id" : NULL};
    size_t seen = 0;
    int failed = 0;
    for (int share = 0; share < n_shares && !failed; share++) {
        tfenc_context ctx;
        tfenc_context_init(&ctx);
        tfenc_corpus *corpus = NULL;
        int status = tfenc_corpus_open(&ctx, &options, share, n_shares, &corpus);
        require(status == TFENC_OK);
        tfenc_corpus_counts counts;
        /* Odd shares learn their first index as the driver would tell them;
         * even ones do not, so error messages must find line numbers alone. */
        if (share % 2 == 1)
            tfenc_corpus_set_first_index(corpus, (int64_t)seen);
        status = tfenc_corpus_count(&ctx, corpus, &counts);
        tfenc_document document;
        size_t local = 0;
        while (status == TFENC_OK && (status = tfenc_corpus_next(&ctx, corpus, &document)) == TFENC_OK) {
            if (compressed) {
                require(document.text != NULL && document.text[document.text_length] == '\0');
                local++;
                continue;
            }
            require(document.local_index == (int64_t)local);
            require(seen + local < n_lines);
            const line *expected = &lines[seen + local];
            if (!jsonl) {
                require(document.text_length == expected->length);
                require(memcmp(document.text, text + expected->start, expected->length) == 0);
                require(document.text[document.text_length] == '\0');
            } else {
                require(document.text != NULL && document.text[document.text_length] == '\0');
                require(options.id_field == NULL || document.id != NULL);
            }
            local++;
        }
        if (status == TFENC_ERR_NOT_FOUND) {
            require((int64_t)local == counts.n_documents);
            seen += local;
        } else {
            const char *message = tfenc_context_message(&ctx);
            require(message[0] != '\0' && strchr(message, '\n') == NULL);
            if (!jsonl && !compressed) {
                /* Text can only fail on a NUL byte: the first one of the file. */
                require(nul != NULL);
                char expected[256];
                snprintf(expected, sizeof expected, "%s: line %zu: NUL byte at byte offset %zu ",
                         path, nul_line + 1, (size_t)(nul - text));
                require(strncmp(message, expected, strlen(expected)) == 0);
            }
            failed = 1;
        }
        tfenc_corpus_close(corpus);
    }
    if (!failed && !compressed) {
        require(seen == n_lines);
        require(jsonl || nul == NULL);
    }
    free(lines);
    return 0;
}
