/* The tokenizer pipeline: constructors (vocab.txt, token list; tokenizer.json
 * in tokenizer_json.c), invalid UTF-8, added tokens, and encode(), which runs
 * normalizers, pre-tokenizers, the model and the post-processor's specials. */
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_internal.h"
#include "base/files.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* HF's WordPiece default: a longer word becomes [UNK] whole. */
#define BERT_MAX_WORD_CHARS 100

/* The special tokens BertWordPieceTokenizer registers when the vocabulary
 * has them: written literally in a text, each stands for its own id. */
static const char *const bert_specials[] = {"[UNK]", "[SEP]", "[CLS]", "[PAD]", "[MASK]"};
#define N_BERT_SPECIALS (sizeof bert_specials / sizeof bert_specials[0])

void tfenc_tokenizer_options_default(tfenc_tokenizer_options *options)
{
    options->lowercase = 1;
    options->strip_accents = -1;
    options->chinese_chars = 1;
    options->invalid_utf8 = TFENC_INVALID_UTF8_REPLACE;
    options->job_set = 0;
}

static int check_options(tfenc_context *ctx, const tfenc_tokenizer_options *options)
{
    if (options->strip_accents < -1 || options->strip_accents > 1)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "tokenizer option strip_accents is %d; expected 1, 0 or -1 (follow lowercase)",
                           options->strip_accents);
    if (options->invalid_utf8 != TFENC_INVALID_UTF8_REPLACE &&
        options->invalid_utf8 != TFENC_INVALID_UTF8_ERROR)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "tokenizer option invalid_utf8 is %d; expected REPLACE (0) or ERROR (1)",
                           (int)options->invalid_utf8);
    return TFENC_OK;
}

static tfenc_tokenizer *new_tokenizer(tfenc_context *ctx, const char *source,
                                      const tfenc_tokenizer_options *options)
{
    tfenc_tokenizer *t = calloc(1, sizeof *t);
    if (t == NULL || (t->source = strdup(source)) == NULL) {
        free(t);
        tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "no memory for the tokenizer of %s", source);
        return NULL;
    }
    tfenc_tokenizer_options_default(&t->options);
    if (options != NULL)
        t->options = *options;
    t->invalid_utf8 = t->options.invalid_utf8;
    t->model.unk_id = -1;
    t->pad_id = -1;
    return t;
}

/* ---------------------------------------------------------- added tokens */

/* Normalizes in[0..length) through every normalizer into out. *moved (may
 * be NULL) tells whether one of them removed the first character, after
 * which HF no longer counts the text as starting at offset 0. */
static int normalize_all(tfenc_context *ctx, tfenc_tokenizer *t, const char *in, size_t length,
                         tok_text_buffer *out, int *moved)
{
    tok_text_buffer *ping = &t->pre_text[0], *pong = &t->pre_text[1];
    const char *current = in;
    size_t current_length = length;
    if (moved != NULL)
        *moved = 0;
    for (size_t i = 0; i < t->n_normalizers; i++) {
        tok_text_buffer *target = i % 2 == 0 ? ping : pong;
        int status = tok_normalizer_apply(ctx, &t->normalizers[i], current, current_length, target,
                                          &t->spare);
        if (status != TFENC_OK)
            return status;
        if (moved != NULL && t->normalizers[i].deleted_first)
            *moved = 1;
        current = target->data;
        current_length = target->length;
    }
    if (tok_text_append(out, current != NULL ? current : "", current_length) != 0)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "tokenizer: out of memory");
    return TFENC_OK;
}

/* The match patterns of the added tokens: the content itself, or for a
 * `normalized` token the content through the normalizers, as HF builds
 * its second matcher. */
static int prepare_added(tfenc_context *ctx, tfenc_tokenizer *t)
{
    t->raw_added = t->normalized_added = 0;
    memset(t->added_first, 0, sizeof t->added_first);
    for (size_t i = 0; i < t->n_added; i++) {
        tok_added_token *token = &t->added[i];
        free(token->pattern);
        token->pattern = NULL;
        tok_text_buffer pattern = {0};
        int status =
            token->normalized && t->n_normalizers > 0
                ? normalize_all(ctx, t, token->content, token->length, &pattern, NULL)
                : (tok_text_append(&pattern, token->content, token->length) == 0
                       ? TFENC_OK
                       : tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "tokenizer: out of memory"));
        if (status != TFENC_OK) {
            free(pattern.data);
            return status;
        }
        token->pattern = pattern.data;
        token->pattern_length = pattern.length;
        if (pattern.length > 0)
            t->added_first[token->normalized != 0][(unsigned char)pattern.data[0]] = 1;
        if (token->normalized)
            t->normalized_added++;
        else
            t->raw_added++;
    }
    return TFENC_OK;
}

/* The longest added token of the given kind matching at text[at..length),
 * or NULL: Aho-Corasick's leftmost-longest, one position at a time. */
static const tok_added_token *added_at(const tfenc_tokenizer *t, int normalized, const char *text,
                                       size_t at, size_t length)
{
    const tok_added_token *best = NULL;
    for (size_t i = 0; i < t->n_added; i++) {
        const tok_added_token *token = &t->added[i];
        if (token->normalized != normalized || token->pattern_length == 0 ||
            token->pattern_length > length - at ||
            (best != NULL && token->pattern_length <= best->pattern_length))
            continue;
        if (text[at] == token->pattern[0] &&
            memcmp(text + at, token->pattern, token->pattern_length) == 0)
            best = token;
    }
    return best;
}

static int32_t last_char(const char *text, size_t end)
{
    size_t k = 1;
    while (k < end && ((unsigned char)text[end - k] & 0xC0) == 0x80)
        k++;
    int32_t c;
    tok_utf8_decode(text + end - k, &c);
    return c;
}

/* HF's AddedVocabulary::find_matches on text[0..length): matched tokens
 * become pieces with their id, the text between them pieces to go on.
 * single_word wants no word character on either side; lstrip / rstrip
 * take the whitespace before / after into the token. */
static int split_on_added(tfenc_context *ctx, const tfenc_tokenizer *t, int normalized,
                          const char *text, size_t base, size_t length, int first,
                          tok_piece_list *out)
{
    size_t kinds = normalized ? t->normalized_added : t->raw_added;
    const unsigned char *starts = t->added_first[normalized != 0];
    size_t start_offset = 0;
    if (kinds > 0) {
        for (size_t at = 0; at < length;) {
            /* Most bytes start no added token: skip them. */
            while (at < length && !starts[(unsigned char)text[at]])
                at++;
            if (at == length)
                break;
            const tok_added_token *token = added_at(t, normalized, text, at, length);
            if (token == NULL) {
                at++;
                continue;
            }
            size_t start = at, stop = at + token->pattern_length;
            at = stop;
            if (token->single_word) {
                int word_before = start > 0 && tok_is_word_char(last_char(text, start));
                int32_t next = 0;
                if (stop < length)
                    tok_utf8_decode(text + stop, &next);
                int word_after = stop < length && tok_is_word_char(next);
                if (word_before || word_after)
                    continue;
            }
            if (token->lstrip) {
                size_t new_start = start;
                while (new_start > 0 && tok_is_whitespace(last_char(text, new_start))) {
                    size_t k = 1;
                    while (k < new_start && ((unsigned char)text[new_start - k] & 0xC0) == 0x80)
                        k++;
                    new_start -= k;
                }
                start = new_start > start_offset ? new_start : start_offset;
            }
            if (token->rstrip) {
                while (stop < length) {
                    int32_t c;
                    size_t k = tok_utf8_decode(text + stop, &c);
                    if (!tok_is_whitespace(c))
                        break;
                    stop += k;
                }
                at = stop;
            }
            if (start_offset < start &&
                tok_pieces_add(out, base + start_offset, start - start_offset, -1,
                               first && start_offset == 0) != 0)
                goto no_memory;
            if (tok_pieces_add(out, 0, 0, token->id, 0) != 0)
                goto no_memory;
            start_offset = stop;
        }
    }
    if (start_offset < length && tok_pieces_add(out, base + start_offset, length - start_offset, -1,
                                                first && start_offset == 0) != 0)
        goto no_memory;
    return TFENC_OK;
no_memory:
    return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "tokenizer: out of memory");
}

/* ------------------------------------------------------------- UTF-8 */

/* Length of the maximal subpart of an ill-formed sequence at s (Unicode's
 * definition, which Python's decoder follows: one U+FFFD each), or 0 when
 * a well-formed character starts there. */
static size_t invalid_length(const unsigned char *s, size_t available)
{
    unsigned char lead = s[0];
    size_t need;
    unsigned char low = 0x80, high = 0xBF;
    if (lead < 0x80)
        return 0;
    if (lead >= 0xC2 && lead <= 0xDF)
        need = 2;
    else if (lead >= 0xE0 && lead <= 0xEF) {
        need = 3;
        if (lead == 0xE0)
            low = 0xA0;
        if (lead == 0xED)
            high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        need = 4;
        if (lead == 0xF0)
            low = 0x90;
        if (lead == 0xF4)
            high = 0x8F;
    } else {
        return 1;
    }
    size_t i = 1;
    for (; i < need && i < available; i++) {
        unsigned char lo = i == 1 ? low : 0x80, hi = i == 1 ? high : 0xBF;
        if (s[i] < lo || s[i] > hi)
            return i;
    }
    return i == need ? 0 : i;
}

/* Copies text into t->text as valid UTF-8: under REPLACE each maximal
 * invalid subpart becomes U+FFFD, under ERROR it is refused. */
static int sanitize(tfenc_context *ctx, tfenc_tokenizer *t, const char *text, size_t length)
{
    const unsigned char *bytes = (const unsigned char *)text;
    t->text.length = 0;
    if (tok_text_reserve(&t->text, length) != 0)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "tokenizer: no memory for a text of %zu bytes",
                           length);
    size_t clean_from = 0;
    for (size_t i = 0; i < length;) {
        if (bytes[i] < 0x80) {
            i++;
            continue;
        }
        size_t bad = invalid_length(bytes + i, length - i);
        if (bad == 0) {
            i += tok_utf8_length(bytes[i]);
            continue;
        }
        if (t->invalid_utf8 == TFENC_INVALID_UTF8_ERROR)
            return tfenc_error(ctx, TFENC_ERR_INPUT,
                               "tokenizer: invalid UTF-8 at byte offset %zu of the text (byte 0x%02x)",
                               i, bytes[i]);
        if (tok_text_append(&t->text, text + clean_from, i - clean_from) != 0 ||
            tok_text_append(&t->text, "\xef\xbf\xbd", 3) != 0)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "tokenizer: out of memory");
        i += bad;
        clean_from = i;
    }
    if (tok_text_append(&t->text, text + clean_from, length - clean_from) != 0)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "tokenizer: out of memory");
    return TFENC_OK;
}

/* ---------------------------------------------------------------- encode */

/* Sentence ends inside a piece that holds whitespace (a tokenizer whose
 * pre-tokenizers do not split the text at it, as Llama-2's and Gemma's
 * SentencePiece BPE, whose spaces are ▁ in one piece): when the ids'
 * tokens tile the piece's text (a byte-fallback id one byte of it), an id
 * whose text ends with a sentence mark that whitespace follows in the
 * piece ends a sentence. Ids that do not tile it (WordPiece's ##, a
 * suffix, the unknown token) leave it to the piece's end. */
static void note_inner_ends(tfenc_tokenizer *t, const char *text, size_t length, size_t before)
{
    /* The text the rule reads: ByteLevel's characters are one byte each. */
    const char *raw = text;
    size_t raw_length = length;
    if (t->byte_level) {
        t->raw_piece.length = 0;
        for (size_t i = 0; i < length;) {
            int32_t c;
            i += tok_utf8_decode(text + i, &c);
            int byte = tok_byte_level_byte(c);
            char b = (char)byte;
            if (byte < 0 || tok_text_append(&t->raw_piece, &b, 1) != 0)
                return;
        }
        raw = t->raw_piece.data;
        raw_length = t->raw_piece.length;
    }
    const tok_table *vocab = &t->model.vocab;
    size_t at = 0, raw_at = 0;
    for (size_t k = before; k + 1 < t->ids.count; k++) {
        const int32_t id = t->ids.ids[k];
        size_t n = 0, raw_n = 0;
        if (t->model.byte_fallback && at < length &&
            t->model.byte_ids[(unsigned char)text[at]] == id) {
            n = raw_n = 1;
        } else if (id >= 0 && id < t->vocab_size && t->token_entry[id] != UINT32_MAX) {
            const uint32_t entry = t->token_entry[id];
            const char *token = vocab->bytes + vocab->offset[entry];
            n = vocab->length[entry];
            if (n == 0 || at + n > length || memcmp(text + at, token, n) != 0)
                return;
            raw_n = n;
            if (t->byte_level) {
                raw_n = 0;
                for (size_t i = 0; i < n; i++)
                    raw_n += ((unsigned char)token[i] & 0xC0) != 0x80;
            }
        } else {
            return;
        }
        at += n;
        raw_at += raw_n;
        if (raw_at >= raw_length || ((unsigned char)raw[raw_at] & 0xC0) == 0x80)
            continue; /* the piece's end, or inside a character */
        int32_t next;
        tok_utf8_decode(raw + raw_at, &next);
        if (tok_is_sentence_space(next) && tok_is_sentence_mark(last_char(raw, raw_at)))
            t->sentence_ends[k] = 1;
    }
}

/* Sentence ends of a pre-tokenizer's piece, whose ids are
 * t->ids[before ..]: the last one when the piece ends with a sentence
 * mark that whitespace follows, and those inside it (note_inner_ends);
 * every other id ends none (an added token's included). */
static int note_sentence_end(tfenc_context *ctx, tfenc_tokenizer *t, const tok_text_piece *piece,
                             const tok_text_buffer *piece_text, size_t before)
{
    if (t->ids.count > t->sentence_ends_capacity) {
        size_t capacity = t->sentence_ends_capacity > 0 ? t->sentence_ends_capacity : 256;
        while (capacity < t->ids.count)
            capacity *= 2;
        uint8_t *grown = realloc(t->sentence_ends, capacity);
        if (grown == NULL)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "tokenizer: out of memory");
        t->sentence_ends = grown;
        t->sentence_ends_capacity = capacity;
    }
    if (t->ids.count == before)
        return TFENC_OK;
    memset(t->sentence_ends + before, 0, t->ids.count - before);
    if (piece->id >= 0 || piece->length == 0)
        return TFENC_OK;
    if (t->ids.count - before > 1)
        note_inner_ends(t, piece_text->data + piece->start, piece->length, before);
    if (piece->space_after != 1)
        return TFENC_OK;
    int mark = piece->mark_end;
    if (mark < 0) /* a piece no pre-tokenizer split: its text as the model saw it */
        mark = tok_is_sentence_mark(last_char(piece_text->data + piece->start, piece->length));
    t->sentence_ends[t->ids.count - 1] = (uint8_t)(mark == 1);
    return TFENC_OK;
}

/* Steps 1 to 5 of the pipeline: the text's ids, without special tokens
 * and before truncation, into t->ids. */
static int tokenize_pieces(tfenc_context *ctx, tfenc_tokenizer *t, const char *text, size_t length)
{
    if (text == NULL && length > 0)
        return tfenc_error(ctx, TFENC_ERR_INPUT, "tokenizer: no text but a length of %zu bytes", length);
    int status = sanitize(ctx, t, text != NULL ? text : "", length);
    if (status != TFENC_OK)
        return status;

    /* 1. Added tokens on the raw text, 2. normalization of the rest, 3.
     * added tokens on the normalized text. */
    t->segments.count = 0;
    t->raw_pieces.count = 0;
    t->normalized.length = 0;
    status = split_on_added(ctx, t, 0, t->text.data, 0, t->text.length, 1, &t->segments);
    for (size_t i = 0; i < t->segments.count && status == TFENC_OK; i++) {
        tok_text_piece segment = t->segments.items[i];
        if (segment.id >= 0) {
            if (tok_pieces_add(&t->raw_pieces, 0, 0, segment.id, 0) != 0)
                return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "tokenizer: out of memory");
            continue;
        }
        size_t base = t->normalized.length;
        int moved = 0;
        status = normalize_all(ctx, t, t->text.data + segment.start, segment.length, &t->normalized,
                               &moved);
        if (status == TFENC_OK)
            status = split_on_added(ctx, t, 1, t->normalized.data + base, base,
                                    t->normalized.length - base, segment.first && !moved,
                                    &t->raw_pieces);
    }
    if (status != TFENC_OK)
        return status;

    /* 4. Pre-tokenizers, each over the pieces of the one before. */
    for (int i = 0; i < 2; i++) {
        t->pieces[i].mark_sentences = t->mark_sentences;
        t->pieces[i].chinese_padded = t->chinese_padded;
    }
    const tok_text_buffer *piece_text = &t->normalized;
    const tok_piece_list *pieces = &t->raw_pieces;
    for (size_t i = 0; i < t->n_pre_tokenizers; i++) {
        tok_text_buffer *target_text = &t->pre_text[i % 2];
        tok_piece_list *target = &t->pieces[i % 2];
        status = tok_pre_tokenizer_apply(ctx, &t->pre_tokenizers[i], piece_text, pieces,
                                         target_text, target, &t->matches);
        if (status != TFENC_OK)
            return status;
        piece_text = target_text;
        pieces = target;
    }

    /* 5. The model on each piece. */
    t->ids.count = 0;
    for (size_t i = 0; i < pieces->count; i++) {
        const tok_text_piece *piece = &pieces->items[i];
        const size_t before = t->ids.count;
        if (piece->id >= 0)
            status = tok_ids_add(&t->ids, piece->id) == 0
                         ? TFENC_OK
                         : tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "tokenizer: out of memory");
        else
            status = tok_model_tokenize(ctx, &t->model, &t->scratch,
                                        piece_text->data + piece->start, piece->length, &t->ids);
        if (status == TFENC_OK && t->mark_sentences)
            status = note_sentence_end(ctx, t, piece, piece_text, before);
        if (status != TFENC_OK)
            return status;
    }
    /* The end of the text ends its last sentence: the caller's to count
     * (whitespace after it is there or not as the normalizers strip it). */
    if (t->mark_sentences && t->ids.count > 0)
        t->sentence_ends[t->ids.count - 1] = 0;
    return TFENC_OK;
}

/* The bytes of text[0..length) that hold its first max_chars code points:
 * each byte that is not a UTF-8 continuation byte starts one. */
static size_t first_chars_length(const char *text, size_t length, long max_chars)
{
    long chars = 0;
    for (size_t i = 0; i < length; i++)
        if (((unsigned char)text[i] & 0xC0) != 0x80 && chars++ == max_chars)
            return i;
    return length;
}

int tfenc_tokenizer_encode(tfenc_context *ctx, tfenc_tokenizer *tokenizer, const char *text,
                           size_t length, int32_t *ids, int max_length, int *n_ids,
                           int *n_truncated)
{
    tfenc_tokenizer *t = tokenizer;
    *n_ids = 0;
    if (n_truncated != NULL)
        *n_truncated = 0;
    int n_special = t->n_prefix + t->n_suffix;
    if (max_length < n_special || max_length < 1)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "tokenizer: max_length is %d; it must hold the %d special tokens the "
                           "post-processor adds and at least one token", max_length, n_special);
    const size_t whole = length;
    if (t->max_chars > 0)
        length = first_chars_length(text, length, t->max_chars);
    int status = tokenize_pieces(ctx, t, text, length);
    if (status != TFENC_OK)
        return status;

    /* 6. Truncation keeps room for the specials (HF's post_process). */
    size_t room = (size_t)(max_length - n_special);
    size_t kept = t->ids.count < room ? t->ids.count : room;
    int n = 0;
    for (int i = 0; i < t->n_prefix; i++)
        ids[n++] = t->prefix_ids[i];
    if (kept > 0)
        memcpy(ids + n, t->ids.ids, kept * sizeof *ids);
    /* The text rules' unknown token leaves the ids kept, wherever it came
     * from (a piece the model does not know, or the token written in the
     * text): model2vec truncates in the tokenizer, then drops it. */
    size_t kept_ids = kept;
    if (t->drop_unknown && t->model.unk_id >= 0) {
        kept_ids = 0;
        for (size_t i = 0; i < kept; i++)
            if (ids[n + i] != t->model.unk_id)
                ids[n + kept_ids++] = ids[n + i];
    }
    n += (int)kept_ids;
    for (int i = 0; i < t->n_suffix; i++)
        ids[n++] = t->suffix_ids[i];
    *n_ids = n;
    if (n_truncated != NULL) {
        size_t cut = t->ids.count - kept;
        /* Text cut by max_chars lost pieces that were never counted. */
        if (cut == 0 && length < whole)
            cut = 1;
        *n_truncated = cut > INT_MAX ? INT_MAX : (int)cut;
    }
    return TFENC_OK;
}

int tfenc_tokenizer_check_pairs(tfenc_context *ctx, const tfenc_tokenizer *tokenizer)
{
    const tok_pair_template *pair = &tokenizer->pair;
    if (tokenizer->no_pairs)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: the job encodes texts without special "
                           "tokens ([tokenizer] special_tokens = false), so it cannot lay out "
                           "a pair of texts", tokenizer->source);
    if (pair->processors > 1 || (pair->processors == 1 && !pair->defined))
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: the post_processor %s, so it cannot encode "
                           "a pair of texts", tokenizer->source, pair->processors > 1
                           ? "is a Sequence of several that add special tokens"
                           : "has no 'pair' template of the form: specials, A, specials, B, "
                             "specials");
    return TFENC_OK;
}

int tfenc_tokenizer_pair_special_count(const tfenc_tokenizer *tokenizer)
{
    const tok_pair_template *pair = &tokenizer->pair;
    return pair->n[TOK_PAIR_BEFORE] + pair->n[TOK_PAIR_BETWEEN] + pair->n[TOK_PAIR_AFTER];
}

/* `tokenizers`' longest_first truncation of a pair to `room` ids (0.19,
 * TruncationStrategy::LongestFirst): when both texts must lose ids they
 * keep room/2 each, the longer one the odd id over (the second on a tie);
 * else the longer one is cut to what the shorter leaves. */
static void longest_first(size_t first, size_t second, size_t room, size_t *keep_first,
                          size_t *keep_second)
{
    const int swapped = first > second;
    size_t shorter = swapped ? second : first;
    size_t shorter_keep = shorter, longer_keep;
    if (shorter > room)
        longer_keep = shorter;
    else
        longer_keep = shorter > room - shorter ? shorter : room - shorter;
    if (shorter_keep + longer_keep > room) {
        shorter_keep = room / 2;
        longer_keep = shorter_keep + room % 2;
    }
    size_t a = swapped ? longer_keep : shorter_keep, b = swapped ? shorter_keep : longer_keep;
    *keep_first = first < a ? first : a;
    *keep_second = second < b ? second : b;
}

static void put_specials(const tok_pair_template *pair, int place, int32_t *ids, int32_t *types,
                         int *n)
{
    for (int i = 0; i < pair->n[place]; i++, (*n)++) {
        ids[*n] = pair->ids[place][i];
        types[*n] = pair->types[place][i];
    }
}

static void put_sequence(const int32_t *from, size_t count, int32_t type, int32_t *ids,
                         int32_t *types, int *n)
{
    if (count > 0)
        memcpy(ids + *n, from, count * sizeof *ids);
    for (size_t i = 0; i < count; i++)
        types[*n + (int)i] = type;
    *n += (int)count;
}

int tfenc_tokenizer_encode_pair(tfenc_context *ctx, tfenc_tokenizer *tokenizer, const char *first,
                                size_t first_length, const char *second, size_t second_length,
                                int32_t *ids, int32_t *types, int max_length, int *n_ids,
                                int *n_truncated)
{
    tfenc_tokenizer *t = tokenizer;
    const tok_pair_template *pair = &t->pair;
    *n_ids = 0;
    if (n_truncated != NULL)
        *n_truncated = 0;
    int status = tfenc_tokenizer_check_pairs(ctx, t);
    if (status != TFENC_OK)
        return status;
    int n_special = tfenc_tokenizer_pair_special_count(t);
    if (max_length < n_special + 1)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "tokenizer: max_length is %d; it must hold the %d special tokens the "
                           "post-processor adds to a pair and at least one token", max_length,
                           n_special);
    if ((status = tokenize_pieces(ctx, t, first, first_length)) != TFENC_OK)
        return status;
    /* The first text's ids move aside while the second is tokenized. */
    tok_id_list swap = t->first_ids;
    t->first_ids = t->ids;
    t->ids = swap;
    if ((status = tokenize_pieces(ctx, t, second, second_length)) != TFENC_OK)
        return status;
    size_t keep_first, keep_second;
    longest_first(t->first_ids.count, t->ids.count, (size_t)(max_length - n_special), &keep_first,
                  &keep_second);
    /* Without a post-processor the second text is type 1 (as in `tokenizers`). */
    int32_t type_b = pair->processors == 0 ? 1 : pair->type_b;
    int n = 0;
    put_specials(pair, TOK_PAIR_BEFORE, ids, types, &n);
    put_sequence(t->first_ids.ids, keep_first, pair->type_a, ids, types, &n);
    put_specials(pair, TOK_PAIR_BETWEEN, ids, types, &n);
    put_sequence(t->ids.ids, keep_second, type_b, ids, types, &n);
    put_specials(pair, TOK_PAIR_AFTER, ids, types, &n);
    *n_ids = n;
    if (n_truncated != NULL) {
        size_t cut = t->first_ids.count - keep_first + t->ids.count - keep_second;
        *n_truncated = cut > INT_MAX ? INT_MAX : (int)cut;
    }
    return TFENC_OK;
}

/* ------------------------------------------------------------ building */

int tok_finish(tfenc_context *ctx, tfenc_tokenizer *t)
{
    int status = prepare_added(ctx, t);
    if (status != TFENC_OK)
        return status;
    int32_t largest = -1;
    const tok_table *vocab = &t->model.vocab;
    for (size_t i = 0; i < vocab->count; i++)
        if (vocab->value[i] > largest)
            largest = vocab->value[i];
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].id > largest)
            largest = t->added[i].id;
    for (int i = 0; i < t->n_prefix; i++)
        if (t->prefix_ids[i] > largest)
            largest = t->prefix_ids[i];
    for (int i = 0; i < t->n_suffix; i++)
        if (t->suffix_ids[i] > largest)
            largest = t->suffix_ids[i];
    for (int place = 0; place < TOK_PAIR_PLACES; place++)
        for (int i = 0; i < t->pair.n[place]; i++)
            if (t->pair.ids[place][i] > largest)
                largest = t->pair.ids[place][i];
    /* Added tokens take the id after the largest: that one may be past
     * int32's last id, whose successor (the size) would not be an int32. */
    if (largest == INT32_MAX)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "%s: an added token takes id 2147483647, past the last id a "
                           "vocabulary may have (2147483646)", t->source);
    t->vocab_size = largest + 1;
    if (t->model.kind != TOK_MODEL_BPE || t->model.byte_fallback)
        tok_model_find_byte_ids(&t->model);
    if (t->pad_id < 0) {
        static const char *const pads[] = {"[PAD]", "<pad>", "<|pad|>"};
        for (size_t i = 0; i < sizeof pads / sizeof *pads && t->pad_id < 0; i++)
            t->pad_id = tfenc_tokenizer_token_id(t, pads[i]);
    }
    return TFENC_OK;
}

/* The BERT pipeline of a vocab.txt (BertWordPieceTokenizer's). */
static int build_bert(tfenc_context *ctx, const char *const *token, const size_t *length, int n,
                      const tfenc_tokenizer_options *options, const char *source,
                      tfenc_tokenizer **result)
{
    *result = NULL;
    tfenc_tokenizer_options chosen;
    tfenc_tokenizer_options_default(&chosen);
    if (options != NULL)
        chosen = *options;
    int status = check_options(ctx, &chosen);
    if (status != TFENC_OK)
        return status;
    if (n <= 0)
        return tfenc_error(ctx, TFENC_ERR_INPUT, "vocabulary %s is empty", source);
    tfenc_tokenizer *t = new_tokenizer(ctx, source, &chosen);
    if (t == NULL)
        return TFENC_ERR_NO_MEMORY;
    t->options.lowercase = chosen.lowercase != 0;
    t->options.chinese_chars = chosen.chinese_chars != 0;
    t->normalizers = calloc(1, sizeof *t->normalizers);
    t->pre_tokenizers = calloc(1, sizeof *t->pre_tokenizers);
    t->vocab_tokens = calloc((size_t)n, sizeof *t->vocab_tokens);
    t->added = calloc(N_BERT_SPECIALS, sizeof *t->added);
    t->model.continuing_prefix = strdup("##");
    if (t->normalizers == NULL || t->pre_tokenizers == NULL || t->vocab_tokens == NULL ||
        t->added == NULL || t->model.continuing_prefix == NULL)
        goto no_memory;
    t->n_vocab_tokens = n;
    t->n_normalizers = 1;
    tok_normalizer *bert = &t->normalizers[0];
    bert->kind = TOK_NORMALIZER_BERT;
    bert->clean_text = 1;
    bert->handle_chinese_chars = t->options.chinese_chars;
    bert->lowercase = t->options.lowercase;
    bert->strip_accents = chosen.strip_accents < 0 ? t->options.lowercase : chosen.strip_accents;
    t->n_pre_tokenizers = 1;
    t->pre_tokenizers[0].kind = TOK_PRE_BERT;
    tok_model *m = &t->model;
    m->kind = TOK_MODEL_WORDPIECE;
    m->continuing_prefix_length = 2;
    m->max_input_chars_per_word = BERT_MAX_WORD_CHARS;
    for (int i = 0; i < n; i++) {
        if ((t->vocab_tokens[i] = strndup(token[i], length[i])) == NULL ||
            tok_table_put(&m->vocab, token[i], length[i], i) != 0)
            goto no_memory;
    }
    int32_t cls = tfenc_tokenizer_token_id(t, "[CLS]"), sep = tfenc_tokenizer_token_id(t, "[SEP]");
    m->unk_id = tfenc_tokenizer_token_id(t, "[UNK]");
    const char *missing = cls < 0 ? "[CLS]" : sep < 0 ? "[SEP]" : m->unk_id < 0 ? "[UNK]" : NULL;
    if (missing != NULL) {
        tfenc_tokenizer_destroy(t);
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "vocabulary %s lacks the special token %s (BERT needs [CLS], [SEP] and [UNK])",
                           source, missing);
    }
    for (size_t i = 0; i < N_BERT_SPECIALS; i++) {
        int32_t id = tfenc_tokenizer_token_id(t, bert_specials[i]);
        if (id < 0)
            continue;
        tok_added_token *added = &t->added[t->n_added];
        if ((added->content = strdup(bert_specials[i])) == NULL)
            goto no_memory;
        added->length = strlen(bert_specials[i]);
        added->id = id;
        added->special = 1;
        t->n_added++;
    }
    t->prefix_ids[t->n_prefix++] = cls;
    t->suffix_ids[t->n_suffix++] = sep;
    /* BertWordPieceTokenizer's pair: [CLS] A [SEP] B [SEP], B's part type 1. */
    tok_pair_template *pair = &t->pair;
    pair->processors = pair->defined = 1;
    pair->ids[TOK_PAIR_BEFORE][pair->n[TOK_PAIR_BEFORE]++] = cls;
    pair->ids[TOK_PAIR_BETWEEN][pair->n[TOK_PAIR_BETWEEN]++] = sep;
    pair->types[TOK_PAIR_AFTER][0] = 1;
    pair->ids[TOK_PAIR_AFTER][pair->n[TOK_PAIR_AFTER]++] = sep;
    pair->type_b = 1;
    status = tok_finish(ctx, t);
    if (status != TFENC_OK) {
        tfenc_tokenizer_destroy(t);
        return status;
    }
    /* The embedding table has one row per vocab.txt line. */
    t->vocab_size = n;
    *result = t;
    return TFENC_OK;
no_memory:
    tfenc_tokenizer_destroy(t);
    return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "no memory for the %d tokens of vocabulary %s", n,
                       source);
}

int tfenc_tokenizer_create_from_tokens(tfenc_context *ctx, const char *const *tokens,
                                       int n_tokens, const tfenc_tokenizer_options *options,
                                       tfenc_tokenizer **tokenizer)
{
    *tokenizer = NULL;
    if (n_tokens < 0 || (n_tokens > 0 && tokens == NULL))
        return tfenc_error(ctx, TFENC_ERR_INPUT, "in-memory vocabulary: %d tokens and no token array",
                           n_tokens);
    size_t *length = malloc((n_tokens > 0 ? (size_t)n_tokens : 1) * sizeof *length);
    if (length == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "no memory for an in-memory vocabulary of %d tokens",
                           n_tokens);
    for (int i = 0; i < n_tokens; i++) {
        if (tokens[i] == NULL) {
            free(length);
            return tfenc_error(ctx, TFENC_ERR_INPUT, "in-memory vocabulary: token %d is NULL", i);
        }
        length[i] = strlen(tokens[i]);
    }
    int status = build_bert(ctx, tokens, length, n_tokens, options, "(in-memory token list)", tokenizer);
    free(length);
    return status;
}

/* Real vocabularies stay below a few megabytes (a tokenizer.json with 250k
 * pieces is ~20 MB); the limit stops a wrong path such as /dev/zero from
 * eating all memory. */
#define MAX_TOKENIZER_FILE_BYTES ((size_t)1 << 28)

int tok_read_file(tfenc_context *ctx, const char *path, const char *what, char **data, size_t *size)
{
    /* A regular file only (core/base/files.h): a FIFO would block, a device never end. */
    return tfenc_file_read_all(ctx, what, path, MAX_TOKENIZER_FILE_BYTES, data, size);
}

int tfenc_tokenizer_create_from_file(tfenc_context *ctx, const char *vocab_path,
                                     const tfenc_tokenizer_options *options,
                                     tfenc_tokenizer **tokenizer)
{
    *tokenizer = NULL;
    char *data = NULL;
    size_t size = 0;
    int status = tok_read_file(ctx, vocab_path, "vocabulary", &data, &size);
    if (status != TFENC_OK)
        return status;

    /* One line per token; a final line without newline counts, the empty
     * "line" after a final newline does not. */
    size_t n_lines = 0;
    for (size_t i = 0; i < size; i++)
        n_lines += data[i] == '\n';
    if (size > 0 && data[size - 1] != '\n')
        n_lines++;
    if (n_lines > INT32_MAX) {
        free(data);
        return tfenc_error(ctx, TFENC_ERR_INPUT, "vocabulary %s has more than %d lines", vocab_path,
                           INT32_MAX);
    }
    const char **token = malloc((n_lines > 0 ? n_lines : 1) * sizeof *token);
    size_t *length = malloc((n_lines > 0 ? n_lines : 1) * sizeof *length);
    if (token == NULL || length == NULL) {
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "no memory for the lines of vocabulary %s",
                             vocab_path);
        goto done;
    }
    size_t start = 0;
    for (size_t line = 0; line < n_lines; line++) {
        const char *end = memchr(data + start, '\n', size - start);
        size_t line_end = end != NULL ? (size_t)(end - data) : size;
        /* Trailing whitespace goes (HF trims lines the same way): decode
         * forward, remembering where the last non-space character ends. */
        size_t position = start, kept_end = start;
        while (position < line_end) {
            utf8proc_int32_t c;
            utf8proc_ssize_t n = utf8proc_iterate((const utf8proc_uint8_t *)data + position,
                                                  (utf8proc_ssize_t)(line_end - position), &c);
            if (n < 0) {
                status = tfenc_error(ctx, TFENC_ERR_INPUT,
                                     "vocabulary %s line %zu: invalid UTF-8 at byte %zu of the line",
                                     vocab_path, line + 1, position - start);
                goto done;
            }
            position += (size_t)n;
            if (!tok_is_whitespace(c))
                kept_end = position;
        }
        token[line] = data + start;
        length[line] = kept_end - start;
        start = line_end + 1;
    }
    status = build_bert(ctx, token, length, (int)n_lines, options, vocab_path, tokenizer);
done:
    free(token);
    free(length);
    free(data);
    return status;
}

int tfenc_tokenizer_create_from_json_text(tfenc_context *ctx, const char *text, size_t length,
                                          const char *source, const tfenc_tokenizer_options *options,
                                          tfenc_tokenizer **tokenizer)
{
    *tokenizer = NULL;
    tfenc_tokenizer_options chosen;
    tfenc_tokenizer_options_default(&chosen);
    if (options != NULL)
        chosen = *options;
    int status = check_options(ctx, &chosen);
    if (status != TFENC_OK)
        return status;
    if (chosen.job_set != 0)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "%s: lowercase, strip_accents and chinese_chars apply to a vocab.txt; "
                           "a tokenizer.json sets its own normalizer", source);
    tfenc_tokenizer *t = new_tokenizer(ctx, source, &chosen);
    if (t == NULL)
        return TFENC_ERR_NO_MEMORY;
    status = tok_from_json(ctx, t, text, length);
    if (status == TFENC_OK)
        status = tok_finish(ctx, t);
    if (status == TFENC_OK) {
        t->json_text = malloc(length + 1);
        if (t->json_text == NULL)
            status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", source);
        else {
            memcpy(t->json_text, text, length);
            t->json_text[length] = '\0';
            t->json_length = length;
        }
    }
    if (status != TFENC_OK) {
        tfenc_tokenizer_destroy(t);
        return status;
    }
    *tokenizer = t;
    return TFENC_OK;
}

int tfenc_tokenizer_create_from_json_file(tfenc_context *ctx, const char *path,
                                          const tfenc_tokenizer_options *options,
                                          tfenc_tokenizer **tokenizer)
{
    *tokenizer = NULL;
    char *data = NULL;
    size_t size = 0;
    int status = tok_read_file(ctx, path, "tokenizer", &data, &size);
    if (status != TFENC_OK)
        return status;
    status = tfenc_tokenizer_create_from_json_text(ctx, data, size, path, options, tokenizer);
    free(data);
    return status;
}

/* ------------------------------------------------------------- queries */

int tfenc_tokenizer_vocab_size(const tfenc_tokenizer *tokenizer)
{
    return tokenizer->vocab_size;
}

int tfenc_tokenizer_tokens(tfenc_context *ctx, const tfenc_tokenizer *tokenizer,
                           const char ***tokens_out)
{
    const int32_t size = tokenizer->vocab_size;
    const char **tokens = calloc(size > 0 ? (size_t)size : 1, sizeof *tokens);
    *tokens_out = NULL;
    if (tokens == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", tokenizer->source);
    const tok_table *vocab = &tokenizer->model.vocab;
    for (size_t i = 0; i < vocab->count; i++) {
        int32_t id = vocab->value[i];
        /* a token written twice: the lookup's id is the one kept, so
         * the later entry names it, as it does in the table */
        if (id >= 0 && id < size)
            tokens[id] = vocab->bytes + vocab->offset[i];
    }
    for (size_t i = 0; i < tokenizer->n_added; i++)
        if (tokenizer->added[i].id >= 0 && tokenizer->added[i].id < size)
            tokens[tokenizer->added[i].id] = tokenizer->added[i].content;
    for (int32_t id = 0; id < size; id++)
        if (tokens[id] == NULL)
            tokens[id] = "";
    *tokens_out = tokens;
    return TFENC_OK;
}

int32_t tfenc_tokenizer_token_id(const tfenc_tokenizer *tokenizer, const char *token)
{
    size_t length = strlen(token);
    for (size_t i = tokenizer->n_added; i-- > 0;)
        if (tokenizer->added[i].length == length &&
            memcmp(tokenizer->added[i].content, token, length) == 0)
            return tokenizer->added[i].id;
    return tok_table_get(&tokenizer->model.vocab, token, length);
}

int32_t tfenc_tokenizer_special_id(const tfenc_tokenizer *tokenizer, tfenc_special_token which)
{
    switch (which) {
    case TFENC_SPECIAL_CLS:
        return tokenizer->n_prefix > 0 ? tokenizer->prefix_ids[0] : -1;
    case TFENC_SPECIAL_SEP:
        return tokenizer->n_suffix > 0 ? tokenizer->suffix_ids[tokenizer->n_suffix - 1] : -1;
    case TFENC_SPECIAL_PAD:
        return tokenizer->pad_id;
    case TFENC_SPECIAL_UNK:
        return tokenizer->model.unk_id;
    case TFENC_SPECIAL_MASK: {
        /* tokenizer.json does not say which token is the mask (that is in
         * tokenizer_config.json); the two spellings the model families use. */
        int32_t id = tfenc_tokenizer_token_id(tokenizer, "[MASK]");
        return id >= 0 ? id : tfenc_tokenizer_token_id(tokenizer, "<mask>");
    }
    }
    return -1;
}

const int32_t *tfenc_tokenizer_last_pieces(const tfenc_tokenizer *tokenizer, int *count)
{
    *count = tokenizer->ids.count > INT_MAX ? INT_MAX : (int)tokenizer->ids.count;
    return tokenizer->ids.ids;
}

int tfenc_tokenizer_mark_sentences(tfenc_context *ctx, tfenc_tokenizer *tokenizer, int on)
{
    tfenc_tokenizer *t = tokenizer;
    t->mark_sentences = on != 0;
    if (!on || t->token_entry != NULL)
        return TFENC_OK;
    const size_t n_ids = t->vocab_size > 0 ? (size_t)t->vocab_size : 1;
    t->token_entry = malloc(n_ids * sizeof *t->token_entry);
    if (t->token_entry == NULL) {
        t->mark_sentences = 0;
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", t->source);
    }
    for (int32_t id = 0; id < t->vocab_size; id++)
        t->token_entry[id] = UINT32_MAX;
    /* A token written twice: the lookup's id is the one kept. */
    for (size_t i = 0; i < t->model.vocab.count; i++) {
        const int32_t id = t->model.vocab.value[i];
        if (id >= 0 && id < t->vocab_size)
            t->token_entry[id] = (uint32_t)i;
    }
    for (size_t i = 0; i < t->n_normalizers; i++)
        if (t->normalizers[i].kind == TOK_NORMALIZER_BERT && t->normalizers[i].handle_chinese_chars)
            t->chinese_padded = 1;
    for (size_t i = 0; i < t->n_pre_tokenizers; i++)
        if (t->pre_tokenizers[i].kind == TOK_PRE_BYTE_LEVEL)
            t->byte_level = 1;
    return TFENC_OK;
}

const uint8_t *tfenc_tokenizer_last_sentence_ends(const tfenc_tokenizer *tokenizer, int *count)
{
    *count = tokenizer->ids.count > INT_MAX ? INT_MAX : (int)tokenizer->ids.count;
    if (!tokenizer->mark_sentences)
        *count = 0;
    return tokenizer->sentence_ends;
}

void tfenc_tokenizer_specials(const tfenc_tokenizer *tokenizer, const int32_t **prefix,
                              int *n_prefix, const int32_t **suffix, int *n_suffix)
{
    *prefix = tokenizer->prefix_ids;
    *n_prefix = tokenizer->n_prefix;
    *suffix = tokenizer->suffix_ids;
    *n_suffix = tokenizer->n_suffix;
}

void tfenc_tokenizer_set_text_rules(tfenc_tokenizer *tokenizer,
                                    const tfenc_tokenizer_text_rules *rules)
{
    /* Without the post-processor's tokens every count of specials
     * (truncation, chunks, the feeder's room) is zero as well. */
    if (!rules->special_tokens) {
        tokenizer->n_prefix = tokenizer->n_suffix = 0;
        tokenizer->no_pairs = 1;
    }
    tokenizer->drop_unknown = rules->drop_unknown;
    tokenizer->max_chars = rules->max_chars > 0 ? rules->max_chars : 0;
}

int tfenc_tokenizer_special_count(const tfenc_tokenizer *tokenizer)
{
    return tokenizer->n_prefix + tokenizer->n_suffix;
}

void tfenc_tokenizer_destroy(tfenc_tokenizer *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < t->n_normalizers; i++)
        tok_normalizer_free(&t->normalizers[i]);
    free(t->normalizers);
    for (size_t i = 0; i < t->n_pre_tokenizers; i++)
        tok_pre_tokenizer_free(&t->pre_tokenizers[i]);
    free(t->pre_tokenizers);
    tok_model_free(&t->model);
    for (size_t i = 0; i < t->n_added; i++) {
        free(t->added[i].content);
        free(t->added[i].pattern);
    }
    free(t->added);
    for (int i = 0; i < t->n_vocab_tokens; i++)
        free(t->vocab_tokens[i]);
    free(t->vocab_tokens);
    free(t->json_text);
    free(t->source);
    free(t->text.data);
    free(t->segment.data);
    free(t->normalized.data);
    free(t->spare.data);
    free(t->pre_text[0].data);
    free(t->pre_text[1].data);
    free(t->segments.items);
    free(t->raw_pieces.items);
    free(t->pieces[0].items);
    free(t->pieces[1].items);
    free(t->matches.spans);
    tok_model_scratch_free(&t->scratch);
    free(t->ids.ids);
    free(t->first_ids.ids);
    free(t->sentence_ends);
    free(t->token_entry);
    free(t->raw_piece.data);
    free(t);
}
