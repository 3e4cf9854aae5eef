/* The patterns of tokenizer.json ({"String": ...} and {"Regex": ...}) that
 * the Replace normalizer and the Split pre-tokenizers match, with PCRE2
 * standing in for the Oniguruma engine `tokenizers` uses. A leaf beneath
 * both stages: it uses only the scratch text (tokenizer_text.c). */
#include "tokenizer/tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ------------------------------------------------------ regular expressions */

/* A runaway pattern (catastrophic backtracking) is an error after this many
 * steps, not a hang; real split patterns need a few hundred per match. */
#define REGEX_MATCH_LIMIT 10000000u
#define REGEX_DEPTH_LIMIT 100000u

/* The Unicode classes of Oniguruma's \w and \s, which `tokenizers` (built
 * with Oniguruma) gives its patterns: \w is Alphabetic, marks, decimal
 * digits, connector punctuation and the joiners; \s is White_Space, which
 * holds U+0085 (PCRE2's \s does not). PCRE2's own \w also takes every N*
 * (superscripts, fractions) that Oniguruma's leaves out. */
#define WORD_CLASS "\\p{L}\\p{M}\\p{Nd}\\p{Nl}\\p{Pc}\\x{200C}\\x{200D}\\x{24B6}-\\x{24E9}"
#define SPACE_CLASS "\\s\\x{85}"

/* Rewrites \w \W \s \S into explicit classes, inside and outside [...]. */
static char *translate_pattern(const char *pattern)
{
    size_t length = strlen(pattern);
    tok_text_buffer out = {0};
    int in_class = 0, failed = 0;
    for (size_t i = 0; i < length && !failed; i++) {
        char c = pattern[i];
        if (c == '\\' && i + 1 < length) {
            char e = pattern[i + 1];
            const char *replacement = NULL;
            if (e == 'w')
                replacement = in_class ? WORD_CLASS : "[" WORD_CLASS "]";
            else if (e == 's')
                replacement = in_class ? SPACE_CLASS : "[" SPACE_CLASS "]";
            else if (e == 'W' && !in_class)
                replacement = "[^" WORD_CLASS "]";
            else if (e == 'S' && !in_class)
                replacement = "[^" SPACE_CLASS "]";
            if (replacement != NULL)
                failed = tok_text_append(&out, replacement, strlen(replacement));
            else
                failed = tok_text_append(&out, pattern + i, 2);
            i++;
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = 1;
            failed = tok_text_append(&out, pattern + i, 1);
            /* A ']' right after '[' or '[^' is a literal. */
            if (i + 1 < length && pattern[i + 1] == '^')
                failed |= tok_text_append(&out, pattern + ++i, 1);
            if (i + 1 < length && pattern[i + 1] == ']')
                failed |= tok_text_append(&out, pattern + ++i, 1);
            continue;
        }
        if (c == '[' && in_class) {
            /* Nested classes ([[:alpha:]], Oniguruma's [a[b]]): count depth. */
            in_class++;
        } else if (c == ']' && in_class) {
            in_class--;
        }
        failed = tok_text_append(&out, pattern + i, 1);
    }
    if (failed || tok_text_reserve(&out, 0) != 0) {
        free(out.data);
        return NULL;
    }
    return out.data;
}

int tok_regex_compile(tfenc_context *ctx, const char *source, const char *what, const char *pattern,
                      tok_regex *regex)
{
    memset(regex, 0, sizeof *regex);
    char *translated = translate_pattern(pattern);
    if (translated == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory for a %s pattern", source, what);
    int error;
    PCRE2_SIZE offset;
    regex->code = pcre2_compile((PCRE2_SPTR)translated, PCRE2_ZERO_TERMINATED,
                                PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset, NULL);
    free(translated);
    if (regex->code == NULL) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(error, message, sizeof message);
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: %s pattern '%.200s' does not compile: %s",
                           source, what, pattern, (const char *)message);
    }
    /* JIT when the platform has it; the interpreter otherwise. */
    pcre2_jit_compile(regex->code, PCRE2_JIT_COMPLETE);
    regex->match = pcre2_match_data_create_from_pattern(regex->code, NULL);
    regex->limits = pcre2_match_context_create(NULL);
    if (regex->match == NULL || regex->limits == NULL) {
        tok_regex_free(regex);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory for a %s pattern", source, what);
    }
    pcre2_set_match_limit(regex->limits, REGEX_MATCH_LIMIT);
    pcre2_set_depth_limit(regex->limits, REGEX_DEPTH_LIMIT);
    return TFENC_OK;
}

void tok_regex_free(tok_regex *regex)
{
    pcre2_match_data_free(regex->match);
    pcre2_match_context_free(regex->limits);
    pcre2_code_free(regex->code);
    memset(regex, 0, sizeof *regex);
}

int tok_regex_next(tfenc_context *ctx, tok_regex *regex, const char *text, size_t length,
                   size_t from, size_t *start, size_t *end)
{
    int rc = pcre2_match(regex->code, (PCRE2_SPTR)text, length, from, PCRE2_NO_UTF_CHECK,
                         regex->match, regex->limits);
    if (rc == PCRE2_ERROR_NOMATCH)
        return 0;
    if (rc < 0) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(rc, message, sizeof message);
        return tfenc_error(ctx, TFENC_ERR_INPUT, "tokenizer: split pattern failed on a text of %zu "
                           "bytes: %s", length, (const char *)message);
    }
    PCRE2_SIZE *vector = pcre2_get_ovector_pointer(regex->match);
    *start = vector[0];
    *end = vector[1];
    return 1;
}

int tok_pattern_find_all(tfenc_context *ctx, tok_text_pattern *pattern, const char *text,
                         size_t length, tok_match_list *matches)
{
    matches->count = 0;
    if (!pattern->is_regex) {
        /* A literal: leftmost non-overlapping occurrences; an empty one
         * matches nothing, as in HF. */
        size_t n = pattern->literal_length;
        if (n == 0)
            return TFENC_OK;
        for (size_t at = 0; at + n <= length;) {
            const char *found = memmem(text + at, length - at, pattern->literal, n);
            if (found == NULL)
                break;
            size_t start = (size_t)(found - text);
            if (tok_matches_add(matches, start, start + n) != 0)
                return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "tokenizer: out of memory");
            at = start + n;
        }
        return TFENC_OK;
    }
    /* The Oniguruma crate's find_iter: an empty match right where the last
     * match ended is skipped by one character. */
    size_t last_end = 0;
    int have_last = 0;
    size_t last_match_end = 0;
    while (last_end <= length) {
        size_t start, end;
        int found = tok_regex_next(ctx, &pattern->regex, text, length, last_end, &start, &end);
        if (found < 0)
            return TFENC_ERR_INPUT;
        if (found == 0)
            break;
        if (start == end && have_last && last_match_end == end) {
            size_t step = last_end < length ? tok_utf8_length((unsigned char)text[last_end]) : 1;
            last_end += step ? step : 1;
            continue;
        }
        last_end = end;
        last_match_end = end;
        have_last = 1;
        if (tok_matches_add(matches, start, end) != 0)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "tokenizer: out of memory");
    }
    return TFENC_OK;
}

void tok_text_pattern_free(tok_text_pattern *pattern)
{
    free(pattern->literal);
    tok_regex_free(&pattern->regex);
    memset(pattern, 0, sizeof *pattern);
}
