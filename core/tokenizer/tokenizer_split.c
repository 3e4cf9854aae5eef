/* The pre-tokenizers of tokenizer.json (BertPreTokenizer, Whitespace,
 * WhitespaceSplit, Metaspace, ByteLevel, Split, Digits, Punctuation,
 * CharDelimiterSplit). Uses the leaves beneath (tokenizer_text.c,
 * tokenizer_pattern.c) and nothing of the normalizers or the models. */
#include "tokenizer/tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ---------------------------------------------------------------- splitting */

/* The last character of text[start..end) (valid UTF-8). */
static int32_t last_char_of(const char *text, size_t start, size_t end)
{
    size_t at = end - 1;
    while (at > start && ((unsigned char)text[at] & 0xC0) == 0x80)
        at--;
    int32_t c;
    tok_utf8_decode(text + at, &c);
    return c;
}

/* text[start..end) of text[0..length) as a piece, with what sentence ends
 * read of it: its last character, and the one after it (a piece that ends
 * with the text has the space_after of the text's own piece, set by
 * tok_pre_tokenizer_apply). */
static int emit(const char *text, size_t length, size_t start, size_t end, int first,
                tok_text_buffer *out_text, tok_piece_list *out)
{
    if (end <= start)
        return 0;  /* HF drops empty splits */
    size_t at = out_text->length;
    if (tok_text_append(out_text, text + start, end - start) != 0 ||
        tok_pieces_add(out, at, end - start, -1, first && start == 0) != 0)
        return -1;
    if (!out->mark_sentences)
        return 0;
    tok_text_piece *piece = &out->items[out->count - 1];
    piece->mark_end = (signed char)tok_is_sentence_mark(last_char_of(text, start, end));
    if (end < length) {
        int32_t next, after = 0;
        size_t k = tok_utf8_decode(text + end, &next);
        int space = tok_is_sentence_space(next);
        /* BertNormalizer's one space before a Chinese character is its own. */
        if (space && next == ' ' && out->chinese_padded && end + k < length) {
            tok_utf8_decode(text + end + k, &after);
            space = !tok_is_chinese_char(after);
        }
        piece->space_after = (signed char)space;
    }
    return 0;
}

/* NormalizedString::split: the text alternates non-matches and matches;
 * each behaviour folds that sequence as HF's does. */
int tok_split_emit(const char *text, size_t length, const tok_match_list *matches,
                   tok_split_behavior behavior, int invert, int first, tok_text_buffer *out_text,
                   tok_piece_list *out)
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
        case TOK_SPLIT_REMOVED:
        case TOK_SPLIT_ISOLATED:
            break;
        case TOK_SPLIT_CONTIGUOUS:
            merge = have_held && is_match == previous_match;
            break;
        case TOK_SPLIT_MERGED_WITH_PREVIOUS:
            merge = have_held && is_match && !previous_match;
            break;
        case TOK_SPLIT_MERGED_WITH_NEXT:
            /* A match waits for what follows, unless another match follows. */
            merge = have_held && !is_match && previous_match;
            break;
        }
        if (merge) {
            held_end = end;
        } else {
            if (have_held && !held_removed)
                failed |= emit(text, length, held_start, held_end, first, out_text, out);
            held_start = start;
            held_end = end;
            held_removed = behavior == TOK_SPLIT_REMOVED && is_match;
            have_held = 1;
        }
        previous_match = is_match;
        if (start == end && at >= length && next_match >= matches->count)
            break;
    }
    if (have_held && !held_removed)
        failed |= emit(text, length, held_start, held_end, first, out_text, out);
    return failed ? -1 : 0;
}

/* ------------------------------------------------------------ predicates */

typedef int (*char_test)(const tok_pre_tokenizer *p, int32_t c);

static int test_whitespace(const tok_pre_tokenizer *p, int32_t c)
{
    (void)p;
    return tok_is_whitespace(c);
}

static int test_punctuation(const tok_pre_tokenizer *p, int32_t c)
{
    (void)p;
    return tok_is_bert_punctuation(c);
}

/* Rust's char::is_numeric: categories Nd, Nl, No. */
static int test_numeric(const tok_pre_tokenizer *p, int32_t c)
{
    (void)p;
    if (c < 0x80)
        return c >= '0' && c <= '9';
    utf8proc_category_t category = utf8proc_category(c);
    return category == UTF8PROC_CATEGORY_ND || category == UTF8PROC_CATEGORY_NL ||
           category == UTF8PROC_CATEGORY_NO;
}

static int test_delimiter(const tok_pre_tokenizer *p, int32_t c)
{
    return c == p->delimiter;
}

/* Every character that passes the test is a match of its own (HF's
 * Pattern for Fn(char) -> bool). */
static int char_matches(const char *text, size_t length, const tok_pre_tokenizer *p, char_test test,
                        tok_match_list *matches)
{
    matches->count = 0;
    for (size_t i = 0; i < length;) {
        int32_t c;
        size_t k = tok_utf8_decode(text + i, &c);
        if (test(p, c) && tok_matches_add(matches, i, i + k) != 0)
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

/* The map as UTF-8, and back, built once. */
static char byte_map[256][3];
static unsigned char byte_map_length[256];
static int16_t char_byte[324]; /* the byte a character stands for, -1 for none */

static void build_byte_map(void)
{
    if (byte_map_length[0] != 0)
        return;
    for (int c = 0; c < 324; c++)
        char_byte[c] = -1;
    for (int b = 0; b < 256; b++)
        char_byte[byte_char((unsigned char)b)] = (int16_t)b;
    for (int b = 255; b >= 0; b--)
        byte_map_length[b] = (unsigned char)utf8proc_encode_char(byte_char((unsigned char)b),
                                                                 (utf8proc_uint8_t *)byte_map[b]);
}

int tok_byte_level_byte(int32_t c)
{
    build_byte_map();
    return c >= 0 && c < 324 ? char_byte[c] : -1;
}

/* Rust's \w+|[^\w\s]+ over the piece: runs of word characters and runs of
 * other non-space characters; spaces go. */
static int whitespace_runs(const char *text, size_t length, int first, tok_text_buffer *out_text,
                           tok_piece_list *out)
{
    size_t run_start = 0;
    int run_kind = 0; /* 0 none, 1 word, 2 other */
    for (size_t i = 0; i <= length;) {
        int kind = 0;
        size_t k = 1;
        if (i < length) {
            int32_t c;
            k = tok_utf8_decode(text + i, &c);
            kind = tok_is_word_char(c) ? 1 : tok_is_whitespace(c) ? 0 : 2;
        }
        if (kind != run_kind || i == length) {
            if (run_kind != 0 && emit(text, length, run_start, i, first, out_text, out) != 0)
                return -1;
            run_start = i;
            run_kind = kind;
        }
        i += k;
    }
    return 0;
}

/* BertPreTokenizer: whitespace removed, then each punctuation character
 * isolated; in one pass, whitespace ends a piece and punctuation is alone. */
static int bert_split(const char *text, size_t length, int first, tok_text_buffer *out_text,
                      tok_piece_list *out)
{
    size_t start = 0;
    for (size_t i = 0; i < length;) {
        int32_t c;
        size_t k = tok_utf8_decode(text + i, &c);
        if (tok_is_whitespace(c)) {
            if (emit(text, length, start, i, first, out_text, out) != 0)
                return -1;
            start = i + k;
        } else if (tok_is_bert_punctuation(c)) {
            if (emit(text, length, start, i, first, out_text, out) != 0 ||
                emit(text, length, i, i + k, first, out_text, out) != 0)
                return -1;
            start = i + k;
        }
        i += k;
    }
    return emit(text, length, start, length, first, out_text, out);
}

/* WhitespaceSplit, CharDelimiterSplit, Punctuation and Digits: split at the
 * characters of one class, with the pre-tokenizer's behaviour. */
static int class_split(const tok_pre_tokenizer *p, const char *text, size_t length, int first,
                       tok_text_buffer *out_text, tok_piece_list *out, tok_match_list *matches)
{
    char_test test = NULL;
    tok_split_behavior behavior = TOK_SPLIT_REMOVED;
    switch (p->kind) {
    case TOK_PRE_WHITESPACE_SPLIT:
        test = test_whitespace;
        break;
    case TOK_PRE_CHAR_DELIMITER:
        test = test_delimiter;
        break;
    case TOK_PRE_PUNCTUATION:
        test = test_punctuation;
        behavior = p->behavior;
        break;
    default: /* TOK_PRE_DIGITS */
        test = test_numeric;
        behavior = p->individual_digits ? TOK_SPLIT_ISOLATED : TOK_SPLIT_CONTIGUOUS;
        break;
    }
    if (char_matches(text, length, p, test, matches) != 0)
        return -1;
    return tok_split_emit(text, length, matches, behavior, 0, first, out_text, out);
}

/* Metaspace: spaces become the replacement; the piece gets one in front per
 * the prepend scheme; then it splits before each replacement. */
static int metaspace_split(tok_pre_tokenizer *p, const char *text, size_t length, int first,
                           tok_text_buffer *out_text, tok_piece_list *out,
                           tok_match_list *matches)
{
    char replacement[4];
    size_t replacement_length =
        (size_t)utf8proc_encode_char(p->replacement, (utf8proc_uint8_t *)replacement);
    tok_text_buffer *work = &p->work;
    work->length = 0;
    int starts_with = length >= 1 && (text[0] == ' ' ||
                                      (length >= replacement_length &&
                                       memcmp(text, replacement, replacement_length) == 0));
    if (!starts_with &&
        (p->prepend == TOK_PREPEND_ALWAYS || (p->prepend == TOK_PREPEND_FIRST && first)))
        if (tok_text_append(work, replacement, replacement_length) != 0)
            return -1;
    for (size_t i = 0; i < length; i++)
        if (text[i] == ' ' ? tok_text_append(work, replacement, replacement_length) != 0
                           : tok_text_append(work, text + i, 1) != 0)
            return -1;
    if (tok_text_reserve(work, 0) != 0)
        return -1;
    if (!p->split) {
        size_t at = out_text->length;
        if (work->length == 0)
            return 0;
        if (tok_text_append(out_text, work->data, work->length) != 0)
            return -1;
        return tok_pieces_add(out, at, work->length, -1, first);
    }
    matches->count = 0;
    for (size_t i = 0; i + replacement_length <= work->length;) {
        if (memcmp(work->data + i, replacement, replacement_length) == 0) {
            if (tok_matches_add(matches, i, i + replacement_length) != 0)
                return -1;
            i += replacement_length;
        } else {
            i++;
        }
    }
    return tok_split_emit(work->data, work->length, matches, TOK_SPLIT_MERGED_WITH_NEXT, 0, first,
                          out_text, out);
}

/* ByteLevel's second half: the pieces from first_new on, whose raw bytes
 * sit at the end of out_text from text_start, each byte mapped to its 1 or
 * 2 bytes of visible characters. The raw pieces are copied out first
 * (into work), as the mapped text is longer and overwrites them. */
static int map_bytes(tok_text_buffer *work, size_t first_new, size_t text_start,
                     tok_text_buffer *out_text, tok_piece_list *out)
{
    size_t raw_length = out_text->length - text_start;
    work->length = 0;
    if (tok_text_append(work, out_text->data + text_start, raw_length) != 0)
        return -1;
    out_text->length = text_start;
    for (size_t i = first_new; i < out->count; i++) {
        tok_text_piece *piece = &out->items[i];
        size_t raw_start = piece->start - text_start;
        size_t mapped_start = out_text->length;
        if (tok_text_reserve(out_text, 2 * piece->length) != 0)
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

/* ByteLevel: a space in front if asked, the split pattern (GPT-2's) if
 * asked, then every byte of each piece mapped to a visible character. */
static int byte_level_split(tfenc_context *ctx, tok_pre_tokenizer *p, const char *text,
                            size_t length, int first, tok_text_buffer *out_text,
                            tok_piece_list *out, tok_match_list *matches)
{
    tok_text_buffer *work = &p->work;
    work->length = 0;
    if (p->add_prefix_space && (length == 0 || text[0] != ' ') &&
        tok_text_append(work, " ", 1) != 0)
        return -1;
    if (tok_text_append(work, text, length) != 0)
        return -1;
    size_t first_new = out->count;
    size_t text_start = out_text->length;
    if (p->use_regex) {
        int status = tok_pattern_find_all(ctx, &p->pattern, work->data, work->length, matches);
        if (status != TFENC_OK)
            return status;
        if (tok_split_emit(work->data, work->length, matches, TOK_SPLIT_ISOLATED, 0, first,
                           out_text, out) != 0)
            return -1;
    } else if (emit(work->data, work->length, 0, work->length, first, out_text, out) != 0) {
        return -1;
    }
    return map_bytes(work, first_new, text_start, out_text, out);
}

/* One pre-tokenizer on one piece: 0 (or TFENC_OK), -1 out of memory, or an
 * error status already written to ctx. */
static int apply_one(tfenc_context *ctx, tok_pre_tokenizer *p, const char *text, size_t length,
                     int first, tok_text_buffer *out_text, tok_piece_list *out,
                     tok_match_list *matches)
{
    switch (p->kind) {
    case TOK_PRE_BERT:
        return bert_split(text, length, first, out_text, out);
    case TOK_PRE_WHITESPACE:
        return whitespace_runs(text, length, first, out_text, out);
    case TOK_PRE_WHITESPACE_SPLIT:
    case TOK_PRE_CHAR_DELIMITER:
    case TOK_PRE_PUNCTUATION:
    case TOK_PRE_DIGITS:
        return class_split(p, text, length, first, out_text, out, matches);
    case TOK_PRE_SPLIT: {
        int status = tok_pattern_find_all(ctx, &p->pattern, text, length, matches);
        if (status != TFENC_OK)
            return status;
        return tok_split_emit(text, length, matches, p->behavior, p->invert, first, out_text, out);
    }
    case TOK_PRE_METASPACE:
        return metaspace_split(p, text, length, first, out_text, out, matches);
    case TOK_PRE_BYTE_LEVEL:
        return byte_level_split(ctx, p, text, length, first, out_text, out, matches);
    }
    return tfenc_error(ctx, TFENC_ERR_CONFIG, "tokenizer: unknown pre-tokenizer");
}

int tok_pre_tokenizer_apply(tfenc_context *ctx, tok_pre_tokenizer *p,
                            const tok_text_buffer *in_text, const tok_piece_list *in,
                            tok_text_buffer *out_text, tok_piece_list *out, tok_match_list *matches)
{
    build_byte_map();
    out_text->length = 0;
    out->count = 0;
    for (size_t i = 0; i < in->count; i++) {
        const tok_text_piece *piece = &in->items[i];
        if (piece->id >= 0) {
            /* An added token passes through untouched. */
            if (tok_pieces_add(out, 0, 0, piece->id, piece->first) != 0)
                return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "tokenizer: out of memory");
            continue;
        }
        const size_t first_new = out->count;
        int status = apply_one(ctx, p, in_text->data + piece->start, piece->length, piece->first,
                               out_text, out, matches);
        /* What follows the piece follows its last part. */
        for (size_t k = first_new; out->mark_sentences && k < out->count; k++)
            if (out->items[k].space_after < 0)
                out->items[k].space_after = piece->space_after;
        if (status > 0 || status == -1)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "tokenizer: out of memory while splitting");
        if (status != TFENC_OK)
            return status;
    }
    if (tok_text_reserve(out_text, 0) != 0)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "tokenizer: out of memory while splitting");
    return TFENC_OK;
}

void tok_pre_tokenizer_free(tok_pre_tokenizer *p)
{
    tok_text_pattern_free(&p->pattern);
    free(p->work.data);
}
