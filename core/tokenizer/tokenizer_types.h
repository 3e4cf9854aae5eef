/* The tokenizer's types that its modules share with its users: the opaque
 * tokenizer and the options a job or a weights file sets. A header of its own
 * so that tokenizer_internal.h (what the .c files of core/tokenizer share)
 * needs nothing from tokenizer.h, whose implementation, tokenizer.c, includes
 * tokenizer_internal.h: the modules of the subsystem then depend downward. */
#ifndef TFENC_TOKENIZER_TYPES_H
#define TFENC_TOKENIZER_TYPES_H

typedef struct tfenc_tokenizer tfenc_tokenizer;

typedef enum {
    TFENC_INVALID_UTF8_REPLACE = 0,
    TFENC_INVALID_UTF8_ERROR = 1
} tfenc_invalid_utf8_policy;

/* Which of the BERT options a job set explicitly (job_set bits): those win
 * over the settings stored in a weights file; a tokenizer.json refuses them. */
#define TFENC_TOKENIZER_SET_LOWERCASE 1u
#define TFENC_TOKENIZER_SET_STRIP_ACCENTS 2u
#define TFENC_TOKENIZER_SET_CHINESE_CHARS 4u

typedef struct tfenc_tokenizer_options {
    int lowercase;          /* vocab.txt only: 1 = lower-case */
    int strip_accents;      /* vocab.txt only: 1, 0, or -1 = follow lowercase */
    int chinese_chars;      /* vocab.txt only: 1 = split CJK ideographs */
    tfenc_invalid_utf8_policy invalid_utf8;  /* every tokenizer */
    unsigned job_set;       /* TFENC_TOKENIZER_SET_* bits */
} tfenc_tokenizer_options;

#endif
