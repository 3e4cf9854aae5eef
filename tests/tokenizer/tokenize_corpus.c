/* Test driver: tokenizes each line of a raw-bytes corpus with tfenc and prints
 * "n_truncated: id id ..." per line, for compare.py to set beside HF's ids. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "tokenizer.h"

static int usage(void)
{
    fprintf(stderr, "usage: tokenize_corpus VOCAB_TXT CORPUS MAX_LENGTH LOWERCASE(0|1) STRIP_ACCENTS(-1|0|1)\n"
                    "  CORPUS lines are split on \\n only; every byte else is text.\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc != 6)
        return usage();
    int max_length = atoi(argv[3]);
    tfenc_tokenizer_options options;
    tfenc_tokenizer_options_default(&options);
    options.lowercase = atoi(argv[4]);
    options.strip_accents = atoi(argv[5]);

    tfenc_context ctx;
    tfenc_context_init(&ctx);
    tfenc_tokenizer *tokenizer = NULL;
    if (tfenc_tokenizer_create_from_file(&ctx, argv[1], &options, &tokenizer) != TFENC_OK) {
        fprintf(stderr, "tokenize_corpus: %s\n", tfenc_context_message(&ctx));
        return 1;
    }
    FILE *corpus = fopen(argv[2], "rb");
    if (corpus == NULL) {
        fprintf(stderr, "tokenize_corpus: cannot open %s\n", argv[2]);
        return 1;
    }
    int32_t *ids = malloc((size_t)max_length * sizeof *ids);
    char *line = NULL;
    size_t capacity = 0;
    ssize_t length;
    int status = 0;
    while ((length = getdelim(&line, &capacity, '\n', corpus)) >= 0) {
        if (length > 0 && line[length - 1] == '\n')
            length--;
        int n_ids = 0, n_truncated = 0;
        if (tfenc_tokenizer_encode(&ctx, tokenizer, line, (size_t)length, ids, max_length, &n_ids,
                                   &n_truncated) != TFENC_OK) {
            fprintf(stderr, "tokenize_corpus: %s\n", tfenc_context_message(&ctx));
            status = 1;
            break;
        }
        printf("%d:", n_truncated);
        for (int i = 0; i < n_ids; i++)
            printf(" %d", (int)ids[i]);
        putchar('\n');
    }
    free(line);
    free(ids);
    fclose(corpus);
    tfenc_tokenizer_destroy(tokenizer);
    return status;
}
