/* The normalizers of tokenizer.json (BertNormalizer, NFC/NFD/NFKC/NFKD,
 * Lowercase, Strip, StripAccents, Replace, Prepend, SentencePiece's
 * Precompiled), as string -> string transforms. Uses the leaves beneath
 * (tokenizer_text.c, tokenizer_pattern.c) and nothing of the later stages.
 * Unicode data from utf8proc. */
#include "tokenizer/tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* BertNormalizer's control characters: categories Cc, Cf, Co (and Cs), but
 * not \t \n \r, which are whitespace. Unassigned code points are kept. */
static int is_control(int32_t c)
{
    if (c == '\t' || c == '\n' || c == '\r')
        return 0;
    utf8proc_category_t category = utf8proc_category(c);
    return category == UTF8PROC_CATEGORY_CC || category == UTF8PROC_CATEGORY_CF ||
           category == UTF8PROC_CATEGORY_CO || category == UTF8PROC_CATEGORY_CS;
}

/* The CJK ideograph blocks of HF's BertNormalizer (Extension E+F from
 * U+2B920, where Google's BERT code says U+2B820). */
int tok_is_chinese_char(int32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* Rust's char::to_lowercase, one character at a time as HF's
 * NormalizedString::lowercase does (so no final-sigma rule). utf8proc has
 * the simple mappings; U+0130 is the one character whose full lower case
 * differs: "i" + U+0307. */
static int append_lower(tok_text_buffer *out, int32_t c)
{
    if (c == 0x130)
        return tok_text_append(out, "i\xcc\x87", 3);
    return tok_text_append_char(out, c < 0x80 ? (c >= 'A' && c <= 'Z' ? c + 32 : c)
                                              : utf8proc_tolower(c));
}

/* ------------------------------------------------------------ Unicode forms */

/* Normal form of in[0..length) into out: decompose into the spare buffer
 * as code points (utf8proc writes into caller memory, so nothing is
 * allocated per call), compose when asked, encode back. */
static int unicode_form(const char *in, size_t length, utf8proc_option_t options,
                        tok_text_buffer *out, tok_text_buffer *spare)
{
    out->length = 0;
    if (length == 0)
        return tok_text_reserve(out, 0);
    for (;;) {
        size_t capacity_points = spare->capacity / sizeof(utf8proc_int32_t);
        utf8proc_ssize_t n = utf8proc_decompose((const utf8proc_uint8_t *)in, (utf8proc_ssize_t)length,
                                                (utf8proc_int32_t *)spare->data,
                                                (utf8proc_ssize_t)capacity_points,
                                                (options & ~(utf8proc_option_t)UTF8PROC_COMPOSE) |
                                                    UTF8PROC_DECOMPOSE);
        if (n < 0)
            return -1;
        if ((size_t)n <= capacity_points) {
            utf8proc_int32_t *points = (utf8proc_int32_t *)spare->data;
            if (options & UTF8PROC_COMPOSE) {
                n = utf8proc_normalize_utf32(points, n, options);
                if (n < 0)
                    return -1;
            }
            if (tok_text_reserve(out, (size_t)n * 4) != 0)
                return -1;
            for (utf8proc_ssize_t i = 0; i < n; i++)
                out->length += (size_t)utf8proc_encode_char(points[i],
                                                            (utf8proc_uint8_t *)out->data + out->length);
            out->data[out->length] = '\0';
            return 0;
        }
        spare->length = 0;
        if (tok_text_reserve(spare, (size_t)n * sizeof(utf8proc_int32_t)) != 0)
            return -1;
    }
}

/* --------------------------------------------------------- BertNormalizer */

static int bert_normalize(tok_normalizer *n, const char *in, size_t length, tok_text_buffer *out,
                          tok_text_buffer *spare)
{
    /* Clean and space out ideographs into spare, strip accents (NFD, drop
     * Mn) into out, lower-case last, as HF orders the steps. */
    spare->length = 0;
    for (size_t i = 0; i < length;) {
        int32_t c;
        i += tok_utf8_decode(in + i, &c);
        if (n->clean_text) {
            if (c == 0 || c == 0xFFFD || is_control(c))
                continue;
            if (tok_is_whitespace(c))
                c = ' ';
        }
        if (n->handle_chinese_chars && tok_is_chinese_char(c)) {
            if (tok_text_append(spare, " ", 1) != 0 || tok_text_append_char(spare, c) != 0 ||
                tok_text_append(spare, " ", 1) != 0)
                return -1;
        } else if (tok_text_append_char(spare, c) != 0) {
            return -1;
        }
    }
    const char *text = spare->data;
    size_t text_length = spare->length;
    if (n->strip_accents) {
        tok_text_buffer *decomposed = &n->work;
        if (unicode_form(text, text_length, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE, decomposed,
                         &n->points) != 0)
            return -1;
        /* Keep all but the nonspacing marks. */
        size_t kept = 0;
        for (size_t i = 0; i < decomposed->length;) {
            int32_t c;
            size_t k = tok_utf8_decode(decomposed->data + i, &c);
            if (c < 0x300 || utf8proc_category(c) != UTF8PROC_CATEGORY_MN) {
                memmove(decomposed->data + kept, decomposed->data + i, k);
                kept += k;
            }
            i += k;
        }
        decomposed->length = kept;
        text = decomposed->data;
        text_length = kept;
    }
    out->length = 0;
    int status = tok_text_reserve(out, text_length);
    for (size_t i = 0; i < text_length && status == 0;) {
        int32_t c;
        i += tok_utf8_decode(text + i, &c);
        status = n->lowercase ? append_lower(out, c) : tok_text_append_char(out, c);
    }
    return status;
}

/* ---------------------------------------------------------- Precompiled */

/* darts-clone's double-array units, as SentencePiece stores them. */
static uint32_t unit_label(uint32_t unit)
{
    return unit & ((1u << 31) | 0xFF);
}

static int unit_has_leaf(uint32_t unit)
{
    return (unit >> 8) & 1;
}

static uint32_t unit_value(uint32_t unit)
{
    return unit & ((1u << 31) - 1);
}

static size_t unit_offset(uint32_t unit)
{
    return (size_t)((unit >> 10) << ((unit & (1u << 9)) >> 6));
}

/* The replacement of the shortest prefix of key[0..length) that the trie
 * holds (SentencePiece's, and HF's, first common-prefix result), or NULL. */
static const char *precompiled_lookup(const tok_normalizer *n, const char *key, size_t length,
                                      size_t *replacement_length)
{
    if (n->trie_units == 0)
        return NULL;
    size_t position = unit_offset(n->trie[0]);
    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)key[i];
        if (c == 0)
            return NULL;
        position ^= c;
        if (position >= n->trie_units)
            return NULL;
        uint32_t unit = n->trie[position];
        if (unit_label(unit) != c)
            return NULL;
        position ^= unit_offset(unit);
        if (position >= n->trie_units)
            return NULL;
        if (unit_has_leaf(unit)) {
            size_t start = unit_value(n->trie[position]);
            if (start >= n->replacements_length)
                return NULL;
            const char *text = n->replacements + start;
            *replacement_length = strnlen(text, n->replacements_length - start);
            return text;
        }
    }
    return NULL;
}

/* Per extended grapheme cluster: a cluster under 6 bytes whose prefix the
 * map knows is replaced whole; otherwise each character on its own. This
 * is what SentencePiece and HF do, odd as it looks. */
static int precompiled_normalize(tok_normalizer *n, const char *in, size_t length,
                                 tok_text_buffer *out)
{
    out->length = 0;
    if (tok_text_reserve(out, length) != 0)
        return -1;
    size_t start = 0;
    while (start < length) {
        /* Find the end of the grapheme cluster that starts here. */
        utf8proc_int32_t state = 0, previous;
        size_t end = start + tok_utf8_decode(in + start, &previous);
        while (end < length) {
            int32_t c;
            size_t k = tok_utf8_decode(in + end, &c);
            if (utf8proc_grapheme_break_stateful(previous, c, &state))
                break;
            previous = c;
            end += k;
        }
        size_t replacement_length;
        const char *replacement = NULL;
        if (end - start < 6)
            replacement = precompiled_lookup(n, in + start, end - start, &replacement_length);
        if (replacement != NULL) {
            if (start == 0 && replacement_length == 0)
                n->deleted_first = 1;
            if (tok_text_append(out, replacement, replacement_length) != 0)
                return -1;
        } else {
            for (size_t i = start; i < end;) {
                int32_t c;
                size_t k = tok_utf8_decode(in + i, &c);
                replacement = precompiled_lookup(n, in + i, k, &replacement_length);
                if (i == 0 && replacement != NULL && replacement_length == 0)
                    n->deleted_first = 1;
                if (replacement != NULL ? tok_text_append(out, replacement, replacement_length) != 0
                                        : tok_text_append(out, in + i, k) != 0)
                    return -1;
                i += k;
            }
        }
        start = end;
    }
    return 0;
}

/* ------------------------------------------------------------ the others */

static int strip(const tok_normalizer *n, const char *in, size_t length, tok_text_buffer *out)
{
    size_t start = 0, end = length;
    while (n->strip_left && start < end) {
        int32_t c;
        size_t k = tok_utf8_decode(in + start, &c);
        if (!tok_is_whitespace(c))
            break;
        start += k;
    }
    while (n->strip_right && end > start) {
        size_t k = 1;
        while (k < end - start && ((unsigned char)in[end - k] & 0xC0) == 0x80)
            k++;
        int32_t c;
        tok_utf8_decode(in + end - k, &c);
        if (!tok_is_whitespace(c))
            break;
        end -= k;
    }
    out->length = 0;
    return tok_text_append(out, in + start, end - start);
}

/* Whether the normalizer removes the first character of in (when it holds
 * one): HF then aligns the normalized text to a later original offset,
 * which Metaspace's prepend_scheme "first" looks at. */
static int removes_first(tok_normalizer *n, const char *in, size_t length)
{
    if (length == 0)
        return 0;
    int32_t c;
    tok_utf8_decode(in, &c);
    utf8proc_category_t category = utf8proc_category(c);
    switch (n->kind) {
    case TOK_NORMALIZER_BERT:
        if (n->clean_text && (c == 0 || c == 0xFFFD || is_control(c)))
            return 1;
        if (n->strip_accents) {
            utf8proc_int32_t first[8];
            utf8proc_ssize_t k = utf8proc_decompose_char(c, first, 8, UTF8PROC_DECOMPOSE, NULL);
            return k > 0 && k <= 8 && utf8proc_category(first[0]) == UTF8PROC_CATEGORY_MN;
        }
        return 0;
    case TOK_NORMALIZER_STRIP:
        return n->strip_left && tok_is_whitespace(c);
    case TOK_NORMALIZER_STRIP_ACCENTS:
        return category == UTF8PROC_CATEGORY_MN || category == UTF8PROC_CATEGORY_MC ||
               category == UTF8PROC_CATEGORY_ME;
    case TOK_NORMALIZER_REPLACE:
        /* n->matches holds this input's matches (tok_normalizer_apply ran). */
        return n->content_length == 0 && n->matches.count > 0 && n->matches.spans[0] == 0 &&
               n->matches.spans[1] > 0;
    default:
        return 0;
    }
}

int tok_normalizer_apply(tfenc_context *ctx, tok_normalizer *n, const char *in, size_t length,
                         tok_text_buffer *out, tok_text_buffer *spare)
{
    int failed = 0;
    out->length = 0;
    n->deleted_first = 0;
    switch (n->kind) {
    case TOK_NORMALIZER_BERT:
        failed = bert_normalize(n, in, length, out, spare);
        break;
    case TOK_NORMALIZER_NFC:
        failed = unicode_form(in, length, UTF8PROC_STABLE | UTF8PROC_COMPOSE, out, spare);
        break;
    case TOK_NORMALIZER_NFD:
        failed = unicode_form(in, length, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE, out, spare);
        break;
    case TOK_NORMALIZER_NFKC:
        failed = unicode_form(in, length, UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT, out,
                              spare);
        break;
    case TOK_NORMALIZER_NFKD:
        failed = unicode_form(in, length, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT,
                              out, spare);
        break;
    case TOK_NORMALIZER_LOWERCASE:
        failed = tok_text_reserve(out, length);
        for (size_t i = 0; i < length && !failed;) {
            int32_t c;
            i += tok_utf8_decode(in + i, &c);
            failed = append_lower(out, c);
        }
        break;
    case TOK_NORMALIZER_STRIP:
        failed = strip(n, in, length, out);
        break;
    case TOK_NORMALIZER_STRIP_ACCENTS:
        /* HF's StripAccents drops every combining mark (M*); it does not
         * decompose first (a Sequence puts NFD before it). */
        failed = tok_text_reserve(out, length);
        for (size_t i = 0; i < length && !failed;) {
            int32_t c;
            size_t k = tok_utf8_decode(in + i, &c);
            utf8proc_category_t category = c < 0x300 ? UTF8PROC_CATEGORY_LL : utf8proc_category(c);
            if (category != UTF8PROC_CATEGORY_MN && category != UTF8PROC_CATEGORY_MC &&
                category != UTF8PROC_CATEGORY_ME)
                failed = tok_text_append(out, in + i, k);
            i += k;
        }
        break;
    case TOK_NORMALIZER_REPLACE: {
        tok_match_list *matches = &n->matches;
        int status = tok_pattern_find_all(ctx, &n->pattern, in, length, matches);
        if (status != TFENC_OK)
            return status;
        size_t at = 0;
        failed = tok_text_reserve(out, length);
        for (size_t i = 0; i < matches->count && !failed; i++) {
            size_t start = matches->spans[2 * i], end = matches->spans[2 * i + 1];
            failed = tok_text_append(out, in + at, start - at) ||
                     tok_text_append(out, n->content, n->content_length);
            at = end;
        }
        if (!failed)
            failed = tok_text_append(out, in + at, length - at);
        break;
    }
    case TOK_NORMALIZER_PREPEND:
        failed = tok_text_reserve(out, length + n->content_length);
        if (!failed && length > 0)
            failed = tok_text_append(out, n->content, n->content_length);
        if (!failed)
            failed = tok_text_append(out, in, length);
        break;
    case TOK_NORMALIZER_PRECOMPILED:
        failed = precompiled_normalize(n, in, length, out);
        break;
    }
    if (failed)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "tokenizer: out of memory while normalizing");
    if (n->kind != TOK_NORMALIZER_PRECOMPILED)
        n->deleted_first = removes_first(n, in, length);
    return TFENC_OK;
}

void tok_normalizer_free(tok_normalizer *n)
{
    tok_text_pattern_free(&n->pattern);
    free(n->content);
    free(n->trie);
    free(n->replacements);
    free(n->matches.spans);
    free(n->work.data);
    free(n->points.data);
}
