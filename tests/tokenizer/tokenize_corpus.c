/* Test driver: tokenizes each line of a raw-bytes corpus with tfenc and prints
 * "n_truncated: id id ..." per line, for compare.py to set beside HF's ids.
 * With --bench it prints only the time and the rate instead (wall and CPU
 * seconds), and with --static MAX_CHARS after it tokenizes as a
 * static-embedding job does (tokenizer.h's text rules: no special tokens,
 * the unknown token dropped, texts cut at MAX_CHARS; tests/bench/static.sh).
 * The timed texts are held in memory (read before the clock starts), or,
 * with --stream last, read from CORPUS line by line while they are
 * tokenized, the reading timed too (one round), as a job reads its corpus.
 * With --pairs
 * each line is two texts separated by a tab, encoded as a pair, and the
 * line printed is "n_truncated: id id ... | type type ...". With --sentences
 * the tokenizer marks sentence ends (tfenc_tokenizer_mark_sentences) and
 * each line printed is the pieces (0-based, special tokens not counted,
 * before truncation) that end a sentence: "ends: i j ...". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/context.h"
#include "tokenizer/tokenizer.h"

static int usage(void)
{
    fprintf(stderr, "usage: tokenize_corpus VOCAB_TXT CORPUS MAX_LENGTH LOWERCASE(0|1) STRIP_ACCENTS(-1|0|1)\n"
                    "       tokenize_corpus --json TOKENIZER_JSON CORPUS MAX_LENGTH [--bench ROUNDS "
                    "[--static MAX_CHARS] [--stream]]\n"
                    "       tokenize_corpus --json TOKENIZER_JSON CORPUS MAX_LENGTH --pairs\n"
                    "       tokenize_corpus --json TOKENIZER_JSON CORPUS MAX_LENGTH --sentences\n"
                    "  CORPUS lines are split on \\n only; every byte else is text.\n");
    return 2;
}

static double seconds_of(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double now(void)
{
    return seconds_of(CLOCK_MONOTONIC);
}

/* --stream: each line read from the file (getdelim) and tokenized at once,
 * both timed; prints the same line as --bench. */
static int stream_corpus(tfenc_context *ctx, tfenc_tokenizer *tokenizer, FILE *corpus,
                         const char *corpus_path, int max_length)
{
    int32_t *ids = malloc((size_t)max_length * sizeof *ids);
    char *line = NULL;
    size_t capacity = 0, n_lines = 0, total_bytes = 0;
    ssize_t length;
    long long tokens = 0;
    int failed = ids == NULL;
    double started = now(), cpu_started = seconds_of(CLOCK_PROCESS_CPUTIME_ID);
    while (!failed && (length = getdelim(&line, &capacity, '\n', corpus)) >= 0) {
        if (length > 0 && line[length - 1] == '\n')
            length--;
        int n_ids = 0, n_truncated = 0;
        if (tfenc_tokenizer_encode(ctx, tokenizer, line, (size_t)length, ids, max_length, &n_ids,
                                   &n_truncated) != TFENC_OK) {
            fprintf(stderr, "tokenize_corpus: %s: line %zu: %s\n", corpus_path, n_lines + 1,
                    tfenc_context_message(ctx));
            failed = 1;
        }
        tokens += n_ids;
        total_bytes += (size_t)length;
        n_lines++;
    }
    /* getdelim gives -1 at the end and on a read error alike */
    if (!failed && ferror(corpus)) {
        fprintf(stderr, "tokenize_corpus: %s: read error after line %zu\n", corpus_path, n_lines);
        failed = 1;
    }
    if (!failed) {
        double seconds = now() - started;
        double cpu = seconds_of(CLOCK_PROCESS_CPUTIME_ID) - cpu_started;
        printf("tfenc: 1 rounds of %zu lines (%zu bytes) read from the file: %lld tokens in "
               "%.3f s: %.0f tokens/s, %.1f MB/s; %.3f CPU-seconds: %.0f tokens per CPU-second\n",
               n_lines, total_bytes, tokens, seconds, tokens / seconds,
               total_bytes / seconds / 1e6, cpu, tokens / cpu);
    }
    free(line);
    free(ids);
    return failed;
}

int main(int argc, char **argv)
{
    int json = argc >= 5 && strcmp(argv[1], "--json") == 0;
    int rounds = 0, pairs = 0, stream = 0, sentences = 0;
    long static_chars = -1;
    if (json && argc >= 8 && strcmp(argv[5], "--bench") == 0 &&
        strcmp(argv[argc - 1], "--stream") == 0) {
        stream = 1;
        argc--;
    }
    if (json && argc == 9 && strcmp(argv[5], "--bench") == 0 && strcmp(argv[7], "--static") == 0) {
        rounds = atoi(argv[6]);
        static_chars = atol(argv[8]);
    } else if (json && argc == 7 && strcmp(argv[5], "--bench") == 0)
        rounds = atoi(argv[6]);
    else if (json && argc == 6 && strcmp(argv[5], "--pairs") == 0)
        pairs = 1;
    else if (json && argc == 6 && strcmp(argv[5], "--sentences") == 0)
        sentences = 1;
    else if (json ? argc != 5 : argc != 6)
        return usage();
    const char *source = argv[json ? 2 : 1], *corpus_path = argv[json ? 3 : 2];
    int max_length = atoi(argv[json ? 4 : 3]);
    tfenc_tokenizer_options options;
    tfenc_tokenizer_options_default(&options);
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_tokenizer *tokenizer = NULL;
    int status;
    if (json) {
        status = tfenc_tokenizer_create_from_json_file(&ctx, source, &options, &tokenizer);
    } else {
        options.lowercase = atoi(argv[4]);
        options.strip_accents = atoi(argv[5]);
        status = tfenc_tokenizer_create_from_file(&ctx, source, &options, &tokenizer);
    }
    if (status != TFENC_OK) {
        fprintf(stderr, "tokenize_corpus: %s\n", tfenc_context_message(&ctx));
        return 1;
    }
    if (static_chars >= 0) {
        tfenc_tokenizer_text_rules rules = {.special_tokens = 0, .drop_unknown = 1,
                                            .max_chars = static_chars};
        tfenc_tokenizer_set_text_rules(tokenizer, &rules);
    }
    if (sentences && tfenc_tokenizer_mark_sentences(&ctx, tokenizer, 1) != TFENC_OK) {
        fprintf(stderr, "tokenize_corpus: %s\n", tfenc_context_message(&ctx));
        return 1;
    }
    FILE *corpus = fopen(corpus_path, "rb");
    if (corpus == NULL) {
        fprintf(stderr, "tokenize_corpus: cannot open %s\n", corpus_path);
        return 1;
    }
    if (stream) {
        int failed = stream_corpus(&ctx, tokenizer, corpus, corpus_path, max_length);
        fclose(corpus);
        tfenc_tokenizer_destroy(tokenizer);
        return failed;
    }
    /* The whole corpus in memory, so that --bench times tokenization alone. */
    char **lines = NULL;
    size_t *lengths = NULL, n_lines = 0, capacity_lines = 0, total_bytes = 0;
    char *line = NULL;
    size_t capacity = 0;
    ssize_t length;
    while ((length = getdelim(&line, &capacity, '\n', corpus)) >= 0) {
        if (length > 0 && line[length - 1] == '\n')
            length--;
        if (n_lines == capacity_lines) {
            capacity_lines = capacity_lines ? 2 * capacity_lines : 1024;
            lines = realloc(lines, capacity_lines * sizeof *lines);
            lengths = realloc(lengths, capacity_lines * sizeof *lengths);
            if (lines == NULL || lengths == NULL)
                return 1;
        }
        lines[n_lines] = malloc((size_t)length + 1);
        if (lines[n_lines] == NULL)
            return 1;
        memcpy(lines[n_lines], line, (size_t)length);
        lengths[n_lines++] = (size_t)length;
        total_bytes += (size_t)length;
    }
    free(line);
    fclose(corpus);
    int32_t *ids = malloc((size_t)max_length * sizeof *ids);
    int32_t *types = malloc((size_t)max_length * sizeof *types);
    int failed = 0;
    double started = now(), cpu_started = seconds_of(CLOCK_PROCESS_CPUTIME_ID);
    long long tokens = 0;
    for (int round = 0; round < (rounds > 0 ? rounds : 1) && !failed; round++) {
        for (size_t i = 0; i < n_lines; i++) {
            int n_ids = 0, n_truncated = 0;
            const char *tab = pairs ? memchr(lines[i], '\t', lengths[i]) : NULL;
            if (pairs && tab == NULL) {
                fprintf(stderr, "tokenize_corpus: line %zu: no tab between the two texts\n", i + 1);
                failed = 1;
                break;
            }
            size_t first = tab != NULL ? (size_t)(tab - lines[i]) : 0;
            status = pairs ? tfenc_tokenizer_encode_pair(&ctx, tokenizer, lines[i], first, tab + 1,
                                                         lengths[i] - first - 1, ids, types,
                                                         max_length, &n_ids, &n_truncated)
                           : tfenc_tokenizer_encode(&ctx, tokenizer, lines[i], lengths[i], ids,
                                                    max_length, &n_ids, &n_truncated);
            if (status != TFENC_OK) {
                fprintf(stderr, "tokenize_corpus: line %zu: %s\n", i + 1, tfenc_context_message(&ctx));
                failed = 1;
                break;
            }
            tokens += n_ids;
            if (rounds > 0)
                continue;
            if (sentences) {
                int n_pieces = 0;
                const uint8_t *ends = tfenc_tokenizer_last_sentence_ends(tokenizer, &n_pieces);
                printf("ends:");
                for (int k = 0; k < n_pieces; k++)
                    if (ends[k])
                        printf(" %d", k);
                putchar('\n');
                continue;
            }
            printf("%d:", n_truncated);
            for (int k = 0; k < n_ids; k++)
                printf(" %d", (int)ids[k]);
            if (pairs) {
                printf(" |");
                for (int k = 0; k < n_ids; k++)
                    printf(" %d", (int)types[k]);
            }
            putchar('\n');
        }
    }
    if (rounds > 0 && !failed) {
        double seconds = now() - started;
        double cpu = seconds_of(CLOCK_PROCESS_CPUTIME_ID) - cpu_started;
        printf("tfenc: %d rounds of %zu lines (%zu bytes): %lld tokens in %.3f s: %.0f tokens/s, "
               "%.1f MB/s; %.3f CPU-seconds: %.0f tokens per CPU-second\n", rounds, n_lines,
               total_bytes, tokens, seconds, tokens / seconds, rounds * total_bytes / seconds / 1e6,
               cpu, tokens / cpu);
    }
    for (size_t i = 0; i < n_lines; i++)
        free(lines[i]);
    free(lines);
    free(lengths);
    free(ids);
    free(types);
    tfenc_tokenizer_destroy(tokenizer);
    return failed;
}
