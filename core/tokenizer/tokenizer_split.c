/* The pre-tokenizers of tokenizer.json (BertPreTokenizer, Whitespace,
 * WhitespaceSplit, Metaspace, ByteLevel, Split, Digits, Punctuation,
 * CharDelimiterSplit) and the patterns they and Replace match, with PCRE2
 * standing in for the Oniguruma engine `tokenizers` uses. */
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
    text_buffer out = {0};
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
                failed = text_append(&out, replacement, strlen(replacement));
            else
                failed = text_append(&out, pattern + i, 2);
            i++;
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = 1;
            failed = text_append(&out, pattern + i, 1);
            /* A ']' right after '[' or '[^' is a literal. */
            if (i + 1 < length && pattern[i + 1] == '^')
                failed |= text_append(&out, pattern + ++i, 1);
            if (i + 1 < length && pattern[i + 1] == ']')
                failed |= text_append(&out, pattern + ++i, 1);
            continue;
        }
        if (c == '[' && in_class) {
            /* Nested classes ([[:alpha:]], Oniguruma's [a[b]]): count depth. */
            in_class++;
        } else if (c == ']' && in_class) {
            in_class--;
        }
        failed = text_append(&out, pattern + i, 1);
    }
    if (failed || text_reserve(&out, 0) != 0) {
        free(out.data);
        return NULL;
    }
    return out.data;
}

int token_regex_compile(tfenc_context *ctx, const char *source, const char *what,
                        const char *pattern, token_regex *regex)
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
        token_regex_free(regex);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory for a %s pattern", source, what);
    }
    pcre2_set_match_limit(regex->limits, REGEX_MATCH_LIMIT);
    pcre2_set_depth_limit(regex->limits, REGEX_DEPTH_LIMIT);
    return TFENC_OK;
}

void token_regex_free(token_regex *regex)
{
    pcre2_match_data_free(regex->match);
    pcre2_match_context_free(regex->limits);
    pcre2_code_free(regex->code);
    memset(regex, 0, sizeof *regex);
}

int token_regex_next(tfenc_context *ctx, token_regex *regex, const char *text, size_t length,
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

static int add_match(match_list *matches, size_t start, size_t end)
{
    if (matches->count == matches->capacity) {
        size_t capacity = matches->capacity ? matches->capacity * 2 : 256;
        size_t *grown = realloc(matches->spans, 2 * capacity * sizeof *grown);
        if (grown == NULL)
            return -1;
        matches->spans = grown;
        matches->capacity = capacity;
    }
    matches->spans[2 * matches->count] = start;
    matches->spans[2 * matches->count + 1] = end;
    matches->count++;
    return 0;
}

int pattern_find_all(tfenc_context *ctx, text_pattern *pattern, const char *text, size_t length,
                     match_list *matches)
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
            if (add_match(matches, start, start + n) != 0)
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
        int found = token_regex_next(ctx, &pattern->regex, text, length, last_end, &start, &end);
        if (found < 0)
            return TFENC_ERR_INPUT;
        if (found == 0)
            break;
        if (start == end && have_last && last_match_end == end) {
            size_t step = last_end < length ? utf8_length((unsigned char)text[last_end]) : 1;
            last_end += step ? step : 1;
            continue;
        }
        last_end = end;
        last_match_end = end;
        have_last = 1;
        if (add_match(matches, start, end) != 0)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "tokenizer: out of memory");
    }
    return TFENC_OK;
}

void text_pattern_free(text_pattern *pattern)
{
    free(pattern->literal);
    token_regex_free(&pattern->regex);
    memset(pattern, 0, sizeof *pattern);
}

/* ---------------------------------------------------------------- splitting */

static int emit(const char *text, size_t start, size_t end, int first, text_buffer *out_text,
                piece_list *out)
{
    if (end <= start)
        return 0;  /* HF drops empty splits */
    size_t at = out_text->length;
    if (text_append(out_text, text + start, end - start) != 0)
        return -1;
    return pieces_add(out, at, end - start, -1, first && start == 0);
}

/* NormalizedString::split: the text alternates non-matches and matches;
 * each behaviour folds that sequence as HF's does. */
int split_emit(const char *text, size_t length, const match_list *matches, split_behavior behavior,
               int invert, int first, text_buffer *out_text, piece_list *out)
{
    /* Walk the alternating spans with one span of look-behind (`held`),
     * which MergedWithPrevious / MergedWithNext / Contiguous extend. */
    size_t held_start = 0, held_end = 0;
    int have_held = 0, held_removed = 0, previous_match = 0;
    size_t at = 0, next_match = 0;
    int failed = 0;
    while (at < length || (next_match < matches->count && !failed)) {
        size_t start, end;
        int is_match;
        if (next_match < matches->count && matches->spans[2 * next_match] == at) {
            start = at;
            end = matches->spans[2 * next_match + 1];
            is_match = 1;
            next_match++;
        } else {
            start = at;
            end = next_match < matches->count ? matches->spans[2 * next_match] : length;
            is_match = 0;
        }
        at = end;
        if (invert)
            is_match = !is_match;
        int merge = 0;
        switch (behavior) {
        case SPLIT_REMOVED:
        case SPLIT_ISOLATED:
            break;
        case SPLIT_CONTIGUOUS:
            merge = have_held && is_match == previous_match;
            break;
        case SPLIT_MERGED_WITH_PREVIOUS:
            merge = have_held && is_match && !previous_match;
            break;
        case SPLIT_MERGED_WITH_NEXT:
            /* A match waits for what follows, unless another match follows. */
            merge = have_held && !is_match && previous_match;
            break;
        }
        if (merge) {
            held_end = end;
        } else {
            if (have_held && !held_removed)
                failed |= emit(text, held_start, held_end, first, out_text, out);
            held_start = start;
            held_end = end;
            held_removed = behavior == SPLIT_REMOVED && is_match;
            have_held = 1;
        }
        previous_match = is_match;
        if (start == end && at >= length && next_match >= matches->count)
            break;
    }
    if (have_held && !held_removed)
        failed |= emit(text, held_start, held_end, first, out_text, out);
    return failed ? -1 : 0;
}

/* ------------------------------------------------------------ predicates */

typedef int (*char_test)(const pre_tokenizer *p, int32_t c);

static int test_whitespace(const pre_tokenizer *p, int32_t c)
{
    (void)p;
    return tokenizer_is_whitespace(c);
}

static int test_punctuation(const pre_tokenizer *p, int32_t c)
{
    (void)p;
    return tokenizer_is_bert_punctuation(c);
}

/* Rust's char::is_numeric: categories Nd, Nl, No. */
static int test_numeric(const pre_tokenizer *p, int32_t c)
{
    (void)p;
    if (c < 0x80)
        return c >= '0' && c <= '9';
    utf8proc_category_t category = utf8proc_category(c);
    return category == UTF8PROC_CATEGORY_ND || category == UTF8PROC_CATEGORY_NL ||
           category == UTF8PROC_CATEGORY_NO;
}

static int test_delimiter(const pre_tokenizer *p, int32_t c)
{
    return c == p->delimiter;
}

/* Every character that passes the test is a match of its own (HF's
 * Pattern for Fn(char) -> bool). */
static int char_matches(const char *text, size_t length, const pre_tokenizer *p, char_test test,
                        match_list *matches)
{
    matches->count = 0;
    for (size_t i = 0; i < length;) {
        int32_t c;
        size_t k = utf8_decode(text + i, &c);
        if (test(p, c) && add_match(matches, i, i + k) != 0)
            return -1;
        i += k;
    }
    return 0;
}

/* --------------------------------------------------------- pre-tokenizers */

/* GPT-2's byte -> character map: printable Latin-1 bytes stand for
 * themselves, the others for U+0100 and up, in byte order. */
static int32_t byte_char(unsigned char byte)
{
    if ((byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE)
        return byte;
    int n = 0;
    for (int b = 0; b < byte; b++)
        if (!((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE))
            n++;
    return 256 + n;
}

/* The map as UTF-8, built once. */
static char byte_map[256][3];
static unsigned char byte_map_length[256];

static void build_byte_map(void)
{
    if (byte_map_length[0] != 0)
        return;
    for (int b = 255; b >= 0; b--)
        byte_map_length[b] = (unsigned char)utf8proc_encode_char(byte_char((unsigned char)b),
                                                                 (utf8proc_uint8_t *)byte_map[b]);
}

/* Rust's \w+|[^\w\s]+ over the piece: runs of word characters and runs of
 * other non-space characters; spaces go. */
static int whitespace_runs(const char *text, size_t length, int first, text_buffer *out_text,
                           piece_list *out)
{
    size_t run_start = 0;
    int run_kind = 0; /* 0 none, 1 word, 2 other */
    for (size_t i = 0; i <= length;) {
        int kind = 0;
        size_t k = 1;
        if (i < length) {
            int32_t c;
            k = utf8_decode(text + i, &c);
            kind = tokenizer_is_word_char(c) ? 1 : tokenizer_is_whitespace(c) ? 0 : 2;
        }
        if (kind != run_kind || i == length) {
            if (run_kind != 0 && emit(text, run_start, i, first, out_text, out) != 0)
                return -1;
            run_start = i;
            run_kind = kind;
        }
        i += k;
    }
    return 0;
}

static int apply_one(tfenc_context *ctx, pre_tokenizer *p, const char *text, size_t length,
                     int first, text_buffer *out_text, piece_list *out, match_list *matches)
{
    switch (p->kind) {
    case PRE_BERT: {
        /* Whitespace removed, then each punctuation character isolated:
         * in one pass, whitespace ends a piece and punctuation is alone. */
        size_t start = 0;
        for (size_t i = 0; i < length;) {
            int32_t c;
            size_t k = utf8_decode(text + i, &c);
            if (tokenizer_is_whitespace(c)) {
                if (emit(text, start, i, first, out_text, out) != 0)
                    return -1;
                start = i + k;
            } else if (tokenizer_is_bert_punctuation(c)) {
                if (emit(text, start, i, first, out_text, out) != 0 ||
                    emit(text, i, i + k, first, out_text, out) != 0)
                    return -1;
                start = i + k;
            }
            i += k;
        }
        return emit(text, start, length, first, out_text, out);
    }
    case PRE_WHITESPACE:
        return whitespace_runs(text, length, first, out_text, out);
    case PRE_WHITESPACE_SPLIT:
        if (char_matches(text, length, p, test_whitespace, matches) != 0)
            return -1;
        return split_emit(text, length, matches, SPLIT_REMOVED, 0, first, out_text, out);
    case PRE_CHAR_DELIMITER:
        if (char_matches(text, length, p, test_delimiter, matches) != 0)
            return -1;
        return split_emit(text, length, matches, SPLIT_REMOVED, 0, first, out_text, out);
    case PRE_PUNCTUATION:
        if (char_matches(text, length, p, test_punctuation, matches) != 0)
            return -1;
        return split_emit(text, length, matches, p->behavior, 0, first, out_text, out);
    case PRE_DIGITS:
        if (char_matches(text, length, p, test_numeric, matches) != 0)
            return -1;
        return split_emit(text, length, matches,
                          p->individual_digits ? SPLIT_ISOLATED : SPLIT_CONTIGUOUS, 0, first,
                          out_text, out);
    case PRE_SPLIT: {
        int status = pattern_find_all(ctx, &p->pattern, text, length, matches);
        if (status != TFENC_OK)
            return status;
        return split_emit(text, length, matches, p->behavior, p->invert, first, out_text, out);
    }
    case PRE_METASPACE: {
        /* Spaces become the replacement; the piece gets one in front per
         * the prepend scheme; then it splits before each replacement. */
        char replacement[4];
        size_t replacement_length = (size_t)utf8proc_encode_char(p->replacement,
                                                                 (utf8proc_uint8_t *)replacement);
        text_buffer *work = &p->work;
        work->length = 0;
        int starts_with = length >= 1 && (text[0] == ' ' ||
                          (length >= replacement_length &&
                           memcmp(text, replacement, replacement_length) == 0));
        if (!starts_with && (p->prepend == PREPEND_ALWAYS || (p->prepend == PREPEND_FIRST && first)))
            if (text_append(work, replacement, replacement_length) != 0)
                return -1;
        for (size_t i = 0; i < length; i++)
            if (text[i] == ' ' ? text_append(work, replacement, replacement_length) != 0
                               : text_append(work, text + i, 1) != 0)
                return -1;
        if (text_reserve(work, 0) != 0)
            return -1;
        if (!p->split) {
            size_t at = out_text->length;
            if (work->length == 0)
                return 0;
            if (text_append(out_text, work->data, work->length) != 0)
                return -1;
            return pieces_add(out, at, work->length, -1, first);
        }
        matches->count = 0;
        for (size_t i = 0; i + replacement_length <= work->length;) {
            if (memcmp(work->data + i, replacement, replacement_length) == 0) {
                if (add_match(matches, i, i + replacement_length) != 0)
                    return -1;
                i += replacement_length;
            } else {
                i++;
            }
        }
        return split_emit(work->data, work->length, matches, SPLIT_MERGED_WITH_NEXT, 0, first,
                          out_text, out);
    }
    case PRE_BYTE_LEVEL: {
        text_buffer *work = &p->work;
        work->length = 0;
        if (p->add_prefix_space && (length == 0 || text[0] != ' ') && text_append(work, " ", 1) != 0)
            return -1;
        if (text_append(work, text, length) != 0)
            return -1;
        /* Split (on a copy of the piece list), then map each piece's bytes. */
        size_t first_new = out->count;
        size_t text_start = out_text->length;
        if (p->use_regex) {
            int status = pattern_find_all(ctx, &p->pattern, work->data, work->length, matches);
            if (status != TFENC_OK)
                return status;
            if (split_emit(work->data, work->length, matches, SPLIT_ISOLATED, 0, first, out_text,
                           out) != 0)
                return -1;
        } else if (emit(work->data, 0, work->length, first, out_text, out) != 0) {
            return -1;
        }
        /* Map in place from the end, each byte to 1 or 2 bytes: copy the
         * raw pieces out first (they sit at the end of out_text). */
        size_t raw_length = out_text->length - text_start;
        work->length = 0;
        if (text_append(work, out_text->data + text_start, raw_length) != 0)
            return -1;
        out_text->length = text_start;
        for (size_t i = first_new; i < out->count; i++) {
            text_piece *piece = &out->items[i];
            size_t raw_start = piece->start - text_start;
            size_t mapped_start = out_text->length;
            if (text_reserve(out_text, 2 * piece->length) != 0)
                return -1;
            for (size_t b = 0; b < piece->length; b++) {
                unsigned char byte = (unsigned char)work->data[raw_start + b];
                memcpy(out_text->data + out_text->length, byte_map[byte], byte_map_length[byte]);
                out_text->length += byte_map_length[byte];
            }
            piece->start = mapped_start;
            piece->length = out_text->length - mapped_start;
        }
        return 0;
    }
    }
    return tfenc_error(ctx, TFENC_ERR_CONFIG, "tokenizer: unknown pre-tokenizer");
}

int pre_tokenizer_apply(tfenc_context *ctx, pre_tokenizer *p, const text_buffer *in_text,
                        const piece_list *in, text_buffer *out_text, piece_list *out,
                        match_list *matches)
{
    build_byte_map();
    out_text->length = 0;
    out->count = 0;
    for (size_t i = 0; i < in->count; i++) {
        const text_piece *piece = &in->items[i];
        if (piece->id >= 0) {
            /* An added token passes through untouched. */
            if (pieces_add(out, 0, 0, piece->id, piece->first) != 0)
                return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "tokenizer: out of memory");
            continue;
        }
        int status = apply_one(ctx, p, in_text->data + piece->start, piece->length, piece->first,
                               out_text, out, matches);
        if (status > 0 || status == -1)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "tokenizer: out of memory while splitting");
        if (status != TFENC_OK)
            return status;
    }
    if (text_reserve(out_text, 0) != 0)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "tokenizer: out of memory while splitting");
    return TFENC_OK;
}

void pre_tokenizer_free(pre_tokenizer *p)
{
    text_pattern_free(&p->pattern);
    free(p->work.data);
}
