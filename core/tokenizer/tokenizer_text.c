/* The tokenizer's leaves: the scratch text and piece lists every stage
 * writes into, UTF-8 decoding, and the character classes of Rust and the
 * `tokenizers` crate that the normalizers and pre-tokenizers share. Calls
 * nothing of the tokenizer above it. Unicode data from utf8proc. */
#include "tokenizer/tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ----------------------------------------------------------- scratch text */

/* Room for `more` bytes and a NUL; the text stays NUL-terminated (an empty
 * buffer too, once reserved), as PCRE2 and the callers expect. */
int tok_text_reserve(tok_text_buffer *text, size_t more)
{
    if (text->length + more + 1 <= text->capacity) {
        text->data[text->length] = '\0';
        return 0;
    }
    size_t capacity = text->capacity ? text->capacity : 256;
    while (capacity < text->length + more + 1) {
        if (capacity > SIZE_MAX / 2)
            return -1;
        capacity *= 2;
    }
    char *grown = realloc(text->data, capacity);
    if (grown == NULL)
        return -1;
    text->data = grown;
    text->capacity = capacity;
    text->data[text->length] = '\0';
    return 0;
}

int tok_text_append(tok_text_buffer *text, const char *bytes, size_t length)
{
    if (tok_text_reserve(text, length) != 0)
        return -1;
    if (length > 0)
        memcpy(text->data + text->length, bytes, length);
    text->length += length;
    text->data[text->length] = '\0';
    return 0;
}

int tok_text_append_char(tok_text_buffer *text, int32_t code_point)
{
    if (tok_text_reserve(text, 4) != 0)
        return -1;
    text->length += (size_t)utf8proc_encode_char(code_point,
                                                 (utf8proc_uint8_t *)text->data + text->length);
    text->data[text->length] = '\0';
    return 0;
}

int tok_pieces_add(tok_piece_list *list, size_t start, size_t length, int32_t id, int first)
{
    if (list->count == list->capacity) {
        size_t capacity = list->capacity ? list->capacity * 2 : 256;
        tok_text_piece *grown = realloc(list->items, capacity * sizeof *grown);
        if (grown == NULL)
            return -1;
        list->items = grown;
        list->capacity = capacity;
    }
    tok_text_piece *piece = &list->items[list->count++];
    piece->start = start;
    piece->length = length;
    piece->id = id;
    piece->space_after = piece->mark_end = -1;
    piece->first = (signed char)(first != 0);
    return 0;
}

int tok_matches_add(tok_match_list *matches, size_t start, size_t end)
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

size_t tok_utf8_length(unsigned char lead)
{
    return lead < 0x80 ? 1 : lead < 0xC0 ? 0 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : lead < 0xF8 ? 4 : 0;
}

size_t tok_utf8_decode(const char *text, int32_t *code_point)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t n = tok_utf8_length(s[0]);
    switch (n) {
    case 1:
        *code_point = s[0];
        return 1;
    case 2:
        *code_point = ((s[0] & 0x1F) << 6) | (s[1] & 0x3F);
        return 2;
    case 3:
        *code_point = ((s[0] & 0x0F) << 12) | ((s[1] & 0x3F) << 6) | (s[2] & 0x3F);
        return 3;
    case 4:
        *code_point = ((s[0] & 0x07) << 18) | ((s[1] & 0x3F) << 12) | ((s[2] & 0x3F) << 6) |
                      (s[3] & 0x3F);
        return 4;
    }
    /* Not reached on the scratch text, which is valid UTF-8. */
    *code_point = 0xFFFD;
    return 1;
}

/* ------------------------------------------------------ character classes */

/* Rust's char::is_whitespace (the White_Space property): ASCII and U+0085
 * controls, and the categories Zs Zl Zp. */
int tok_is_whitespace(int32_t c)
{
    if (c == ' ' || (c >= '\t' && c <= '\r') || c == 0x85)
        return 1;
    if (c < 0x80)
        return 0;
    utf8proc_category_t category = utf8proc_category(c);
    return category == UTF8PROC_CATEGORY_ZS || category == UTF8PROC_CATEGORY_ZL ||
           category == UTF8PROC_CATEGORY_ZP;
}

/* BERT's punctuation: all non-alphanumeric printable ASCII (so $ + < = > ^ `
 * | ~ too, which Unicode calls symbols) and every Unicode category P*. */
/* Every character whose compatibility form (NFKC) ends with . ! ? or
 * U+3002, so that a text means the same sentences whether or not its
 * tokenizer normalizes it: "…" (U+2026) ends as the "..." NFKC makes of
 * it, "！" as "!". Sorted. */
static const int32_t sentence_marks[] = {
    0x21, 0x2E, 0x3F, 0x2024, 0x2025, 0x2026, 0x203C, 0x2047, 0x2048, 0x2049, 0x2488,
    0x2489, 0x248A, 0x248B, 0x248C, 0x248D, 0x248E, 0x248F, 0x2490, 0x2491, 0x2492, 0x2493,
    0x2494, 0x2495, 0x2496, 0x2497, 0x2498, 0x2499, 0x249A, 0x249B, 0x3002, 0x33C2, 0x33C7,
    0x33D8, 0xFE12, 0xFE15, 0xFE16, 0xFE19, 0xFE30, 0xFE52, 0xFE56, 0xFE57, 0xFF01, 0xFF0E,
    0xFF1F, 0xFF61, 0x1F100};

int tok_is_sentence_mark(int32_t c)
{
    if (c < 0x80)
        return c == '.' || c == '!' || c == '?';
    size_t low = 3, high = sizeof sentence_marks / sizeof *sentence_marks;
    while (low < high) {
        size_t middle = (low + high) / 2;
        if (sentence_marks[middle] < c)
            low = middle + 1;
        else
            high = middle;
    }
    return low < sizeof sentence_marks / sizeof *sentence_marks && sentence_marks[low] == c;
}

int tok_is_sentence_space(int32_t c)
{
    return c == 0x2581 || tok_is_whitespace(c);
}

int tok_is_bert_punctuation(int32_t c)
{
    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
        (c >= 123 && c <= 126))
        return 1;
    if (c < 0x80)
        return 0;
    utf8proc_category_t category = utf8proc_category(c);
    return category >= UTF8PROC_CATEGORY_PC && category <= UTF8PROC_CATEGORY_PO;
}

/* The Rust regex crate's \w: Alphabetic, marks, decimal digits, connector
 * punctuation, joiners. utf8proc has no Other_Alphabetic property: beyond
 * the marks it covers, the letter-like symbols (circled and squared Latin
 * letters) are listed here. */
int tok_is_word_char(int32_t c)
{
    if (c < 0x80)
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (c == 0x200C || c == 0x200D || (c >= 0x24B6 && c <= 0x24E9) ||
        (c >= 0x1F130 && c <= 0x1F149) || (c >= 0x1F150 && c <= 0x1F169) ||
        (c >= 0x1F170 && c <= 0x1F189))
        return 1;
    utf8proc_category_t category = utf8proc_category(c);
    return (category >= UTF8PROC_CATEGORY_LU && category <= UTF8PROC_CATEGORY_ME) ||
           category == UTF8PROC_CATEGORY_ND || category == UTF8PROC_CATEGORY_NL ||
           category == UTF8PROC_CATEGORY_PC;
}
