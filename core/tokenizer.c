/* BERT WordPiece tokenization, equal to Hugging Face's BertWordPieceTokenizer. */
#include "tokenizer.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* HF's max_input_chars_per_word: a longer word becomes [UNK] whole. */
#define MAX_WORD_CHARS 100
#define MAX_WORD_BYTES (MAX_WORD_CHARS * 4)
#define CONTINUATION_PREFIX "##"
#define CONTINUATION_PREFIX_BYTES 2
/* Longest canonical decomposition in Unicode is 4 code points; room to spare. */
#define MAX_DECOMPOSITION 32

/* The special tokens BertWordPieceTokenizer registers (when the vocab has
 * them): written literally in a text, each stands for its own id. */
static const char *const special_token_names[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
#define N_SPECIAL_TOKENS (sizeof special_token_names / sizeof special_token_names[0])

typedef struct special_token {
    const char *text;
    size_t length;
    int32_t id;
} special_token;

/* A combining mark waiting for canonical reordering (NFD sorts each run of
 * marks by combining class before accents are stripped). */
typedef struct pending_mark {
    utf8proc_int32_t code_point;
    int combining_class;
} pending_mark;

struct tfenc_tokenizer {
    tfenc_tokenizer_options options;  /* strip_accents resolved to 0 or 1 */

    /* Vocabulary: token i is token_bytes[token_offset[i]], token_length[i]
     * bytes plus a NUL. The hash table maps bytes to the id. */
    int n_tokens;
    char *token_bytes;
    size_t *token_offset;             /* [n_tokens] */
    size_t *token_length;             /* [n_tokens] */
    int32_t *slots;                   /* [slot_mask + 1] ids, -1 = empty */
    size_t slot_mask;
    size_t longest_token;             /* bytes; no piece can be longer */
    int32_t cls_id, sep_id, unk_id;
    special_token specials[N_SPECIAL_TOKENS];
    int n_specials;

    /* Scratch of one encode() call. */
    tfenc_context *ctx;
    int32_t *ids;                     /* caller's output */
    long long piece_capacity;         /* max_length - 2 */
    long long n_pieces;               /* every piece, kept or cut */
    char word[MAX_WORD_BYTES];        /* the current word, up to MAX_WORD_CHARS */
    size_t word_bytes;
    long long word_chars;             /* may exceed MAX_WORD_CHARS: then only counted */
    char key[CONTINUATION_PREFIX_BYTES + MAX_WORD_BYTES];  /* "##" + rest of the word */
    pending_mark marks[MAX_WORD_CHARS + 1];
    int n_marks;
};

/* ------------------------------------------------------------ vocabulary */

/* FNV-1a: simple, and good enough spread for short token strings. */
static uint64_t hash_bytes(const char *bytes, size_t length)
{
    uint64_t hash = 1469598103934665603ULL;
    for (size_t i = 0; i < length; i++) {
        hash ^= (unsigned char)bytes[i];
        hash *= 1099511628211ULL;
    }
    return hash;
}

static int token_equals(const tfenc_tokenizer *t, int32_t id, const char *bytes, size_t length)
{
    return t->token_length[id] == length &&
           memcmp(t->token_bytes + t->token_offset[id], bytes, length) == 0;
}

static int32_t lookup(const tfenc_tokenizer *t, const char *bytes, size_t length)
{
    if (length > t->longest_token)
        return -1;
    for (size_t slot = hash_bytes(bytes, length) & t->slot_mask;; slot = (slot + 1) & t->slot_mask) {
        int32_t id = t->slots[slot];
        if (id < 0)
            return -1;
        if (token_equals(t, id, bytes, length))
            return id;
    }
}

/* A token listed twice keeps its last id, as HF's vocab loading does. */
static void insert(tfenc_tokenizer *t, int32_t id)
{
    const char *bytes = t->token_bytes + t->token_offset[id];
    size_t length = t->token_length[id];
    for (size_t slot = hash_bytes(bytes, length) & t->slot_mask;; slot = (slot + 1) & t->slot_mask) {
        if (t->slots[slot] < 0 || token_equals(t, t->slots[slot], bytes, length)) {
            t->slots[slot] = id;
            return;
        }
    }
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

/* Builds the tokenizer from n tokens given as (pointer, length) pairs;
 * `source` names the vocabulary in error messages. */
static int build(tfenc_context *ctx, const char *const *token, const size_t *length, int n,
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
    chosen.lowercase = chosen.lowercase != 0;
    chosen.chinese_chars = chosen.chinese_chars != 0;
    if (chosen.strip_accents < 0)
        chosen.strip_accents = chosen.lowercase;
    if (n <= 0)
        return tfenc_error(ctx, TFENC_ERR_INPUT, "vocabulary %s is empty", source);

    tfenc_tokenizer *t = calloc(1, sizeof *t);
    if (t == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "no memory for the tokenizer of %s", source);
    t->options = chosen;
    t->n_tokens = n;
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += length[i] + 1;
    size_t capacity = 16;
    while (capacity < 2 * (size_t)n)
        capacity *= 2;
    t->slot_mask = capacity - 1;
    t->token_bytes = malloc(total);
    t->token_offset = malloc((size_t)n * sizeof *t->token_offset);
    t->token_length = malloc((size_t)n * sizeof *t->token_length);
    t->slots = malloc(capacity * sizeof *t->slots);
    if (t->token_bytes == NULL || t->token_offset == NULL || t->token_length == NULL ||
        t->slots == NULL) {
        tfenc_tokenizer_destroy(t);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "no memory for the %d tokens of vocabulary %s",
                           n, source);
    }
    memset(t->slots, 0xff, capacity * sizeof *t->slots);

    size_t offset = 0;
    for (int i = 0; i < n; i++) {
        memcpy(t->token_bytes + offset, token[i], length[i]);
        t->token_bytes[offset + length[i]] = '\0';
        t->token_offset[i] = offset;
        t->token_length[i] = length[i];
        if (length[i] > t->longest_token)
            t->longest_token = length[i];
        offset += length[i] + 1;
        insert(t, i);
    }

    t->cls_id = tfenc_tokenizer_token_id(t, "[CLS]");
    t->sep_id = tfenc_tokenizer_token_id(t, "[SEP]");
    t->unk_id = tfenc_tokenizer_token_id(t, "[UNK]");
    const char *missing = t->cls_id < 0 ? "[CLS]" : t->sep_id < 0 ? "[SEP]" : t->unk_id < 0 ? "[UNK]" : NULL;
    if (missing != NULL) {
        tfenc_tokenizer_destroy(t);
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "vocabulary %s lacks the special token %s (BERT needs [CLS], [SEP] and [UNK])",
                           source, missing);
    }
    for (size_t i = 0; i < N_SPECIAL_TOKENS; i++) {
        int32_t id = tfenc_tokenizer_token_id(t, special_token_names[i]);
        if (id >= 0) {
            special_token *special = &t->specials[t->n_specials++];
            special->text = special_token_names[i];
            special->length = strlen(special_token_names[i]);
            special->id = id;
        }
    }
    *result = t;
    return TFENC_OK;
}

void tfenc_tokenizer_options_default(tfenc_tokenizer_options *options)
{
    options->lowercase = 1;
    options->strip_accents = -1;
    options->chinese_chars = 1;
    options->invalid_utf8 = TFENC_INVALID_UTF8_REPLACE;
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
    int status = build(ctx, tokens, length, n_tokens, options, "(in-memory token list)", tokenizer);
    free(length);
    return status;
}

/* Unicode White_Space as Rust's char::is_whitespace sees it (HF trims vocab
 * lines and splits words with it): ASCII and U+0085 controls, and Z*. */
static int is_whitespace(utf8proc_int32_t c)
{
    if (c == ' ' || (c >= '\t' && c <= '\r') || c == 0x85)
        return 1;
    utf8proc_category_t category = utf8proc_category(c);
    return category == UTF8PROC_CATEGORY_ZS || category == UTF8PROC_CATEGORY_ZL ||
           category == UTF8PROC_CATEGORY_ZP;
}

/* Real vocabularies stay below a few megabytes (250k multilingual pieces);
 * the limit stops a wrong path such as /dev/zero from eating all memory. A
 * power of two, as the read buffer doubles up to it. */
#define MAX_VOCAB_FILE_BYTES ((size_t)1 << 28)

/* Reads the whole file: vocab.txt is small (a few hundred kilobytes). */
static int read_file(tfenc_context *ctx, const char *path, char **data, size_t *size)
{
    FILE *file = fopen(path, "rb");
    if (file == NULL)
        return tfenc_error(ctx, TFENC_ERR_IO, "cannot open vocabulary %s", path);
    size_t capacity = 1 << 16, used = 0;
    char *buffer = malloc(capacity);
    while (buffer != NULL) {
        used += fread(buffer + used, 1, capacity - used, file);
        if (used < capacity)
            break;
        if (capacity >= MAX_VOCAB_FILE_BYTES) {
            free(buffer);
            fclose(file);
            return tfenc_error(ctx, TFENC_ERR_INPUT, "vocabulary %s: larger than %d MiB: not a "
                               "vocab.txt", path, (int)(MAX_VOCAB_FILE_BYTES >> 20));
        }
        char *grown = realloc(buffer, capacity * 2);
        if (grown == NULL) {
            free(buffer);
            buffer = NULL;
            break;
        }
        buffer = grown;
        capacity *= 2;
    }
    if (buffer == NULL) {
        fclose(file);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "no memory to read vocabulary %s", path);
    }
    int failed = ferror(file);
    fclose(file);
    if (failed) {
        free(buffer);
        return tfenc_error(ctx, TFENC_ERR_IO, "cannot read vocabulary %s", path);
    }
    *data = buffer;
    *size = used;
    return TFENC_OK;
}

int tfenc_tokenizer_create_from_file(tfenc_context *ctx, const char *vocab_path,
                                     const tfenc_tokenizer_options *options,
                                     tfenc_tokenizer **tokenizer)
{
    *tokenizer = NULL;
    char *data = NULL;
    size_t size = 0;
    int status = read_file(ctx, vocab_path, &data, &size);
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
            if (!is_whitespace(c))
                kept_end = position;
        }
        token[line] = data + start;
        length[line] = kept_end - start;
        start = line_end + 1;
    }
    status = build(ctx, token, length, (int)n_lines, options, vocab_path, tokenizer);
done:
    free(token);
    free(length);
    free(data);
    return status;
}

int tfenc_tokenizer_vocab_size(const tfenc_tokenizer *tokenizer)
{
    return tokenizer->n_tokens;
}

int32_t tfenc_tokenizer_token_id(const tfenc_tokenizer *tokenizer, const char *token)
{
    return lookup(tokenizer, token, strlen(token));
}

void tfenc_tokenizer_destroy(tfenc_tokenizer *tokenizer)
{
    if (tokenizer == NULL)
        return;
    free(tokenizer->token_bytes);
    free(tokenizer->token_offset);
    free(tokenizer->token_length);
    free(tokenizer->slots);
    free(tokenizer);
}

/* ------------------------------------------------- character classes */

/* BertNormalizer's control characters: categories Cc, Cf, Co (and Cs, which
 * valid UTF-8 never yields), except the tab and line breaks, which are
 * whitespace. Unassigned code points (Cn) are kept, as HF keeps them. */
static int is_control(utf8proc_int32_t c)
{
    if (c == '\t' || c == '\n' || c == '\r')
        return 0;
    utf8proc_category_t category = utf8proc_category(c);
    return category == UTF8PROC_CATEGORY_CC || category == UTF8PROC_CATEGORY_CF ||
           category == UTF8PROC_CATEGORY_CO || category == UTF8PROC_CATEGORY_CS;
}

/* BERT's punctuation: all non-alphanumeric printable ASCII (so $ + < = > ^ `
 * | ~ too, which Unicode calls symbols) and every Unicode category P*. */
static int is_punctuation(utf8proc_int32_t c)
{
    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
        (c >= 123 && c <= 126))
        return 1;
    utf8proc_category_t category = utf8proc_category(c);
    return category >= UTF8PROC_CATEGORY_PC && category <= UTF8PROC_CATEGORY_PO;
}

/* The CJK ideograph blocks of BertNormalizer. These are HF tokenizers'
 * ranges: they start Extension E+F at U+2B920 where Google's BERT code
 * says U+2B820, and tfenc matches HF. */
static int is_chinese_char(utf8proc_int32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* ------------------------------------------------------------ WordPiece */

static void emit(tfenc_tokenizer *t, int32_t id)
{
    if (t->n_pieces < t->piece_capacity)
        t->ids[1 + t->n_pieces] = id;
    t->n_pieces++;
}

/* Greedy longest-match-first over the current word, then clears it. */
static void end_word(tfenc_tokenizer *t)
{
    if (t->word_chars == 0)
        return;
    if (t->word_chars > MAX_WORD_CHARS) {
        emit(t, t->unk_id);
        t->word_bytes = 0;
        t->word_chars = 0;
        return;
    }
    int32_t pieces[MAX_WORD_CHARS];
    int n_pieces = 0;
    size_t length = t->word_bytes;
    for (size_t start = 0; start < length;) {
        const char *candidate = t->word + start;
        size_t prefix = 0;
        if (start > 0) {
            /* Continuations are looked up as "##rest"; build it once per start. */
            memcpy(t->key, CONTINUATION_PREFIX, CONTINUATION_PREFIX_BYTES);
            memcpy(t->key + CONTINUATION_PREFIX_BYTES, t->word + start, length - start);
            candidate = t->key;
            prefix = CONTINUATION_PREFIX_BYTES;
        }
        /* Nothing longer than the longest vocabulary entry can match. */
        size_t longest = t->longest_token > prefix ? t->longest_token - prefix : 0;
        size_t end = length - start > longest ? start + longest : length;
        while (end > start && end < length && ((unsigned char)t->word[end] & 0xC0) == 0x80)
            end--;
        int32_t id = -1;
        while (end > start) {
            id = lookup(t, candidate, prefix + end - start);
            if (id >= 0)
                break;
            do
                end--;
            while (end > start && ((unsigned char)t->word[end] & 0xC0) == 0x80);
        }
        if (id < 0) {
            /* One uncoverable spot makes the whole word unknown. */
            n_pieces = 0;
            pieces[n_pieces++] = t->unk_id;
            break;
        }
        pieces[n_pieces++] = id;
        start = end;
    }
    for (int i = 0; i < n_pieces; i++)
        emit(t, pieces[i]);
    t->word_bytes = 0;
    t->word_chars = 0;
}

static void append_to_word(tfenc_tokenizer *t, utf8proc_int32_t c)
{
    /* Past MAX_WORD_CHARS the word is [UNK] whatever it holds: count only,
     * so that a 10 MB "word" costs no memory. */
    if (++t->word_chars <= MAX_WORD_CHARS)
        t->word_bytes += (size_t)utf8proc_encode_char(c, (utf8proc_uint8_t *)t->word + t->word_bytes);
}

/* BertPreTokenizer: whitespace ends a word, punctuation is a word alone. */
static void pre_tokenize(tfenc_tokenizer *t, utf8proc_int32_t c)
{
    if (is_whitespace(c)) {
        end_word(t);
    } else if (is_punctuation(c)) {
        end_word(t);
        append_to_word(t, c);
        end_word(t);
    } else {
        append_to_word(t, c);
    }
}

/* ------------------------------------------------------ normalization */

/* Lower-casing comes last in BertNormalizer, after accent stripping. */
static void lower_case(tfenc_tokenizer *t, utf8proc_int32_t c)
{
    if (!t->options.lowercase) {
        pre_tokenize(t, c);
    } else if (c == 0x130) {
        /* utf8proc has the simple one-character mapping (to "i"); HF uses the
         * full one, and U+0130 is the only character whose full lower case
         * differs: "i" + U+0307 COMBINING DOT ABOVE. */
        pre_tokenize(t, 'i');
        pre_tokenize(t, 0x307);
    } else {
        pre_tokenize(t, utf8proc_tolower(c));
    }
}

/* Releases the run of combining marks in canonical order: a stable sort by
 * combining class. The run holds at most MAX_WORD_CHARS + 1 marks, so the
 * insertion sort stays cheap. */
static void flush_marks(tfenc_tokenizer *t)
{
    for (int i = 1; i < t->n_marks; i++) {
        pending_mark mark = t->marks[i];
        int j = i;
        for (; j > 0 && t->marks[j - 1].combining_class > mark.combining_class; j--)
            t->marks[j] = t->marks[j - 1];
        t->marks[j] = mark;
    }
    for (int i = 0; i < t->n_marks; i++)
        lower_case(t, t->marks[i].code_point);
    t->n_marks = 0;
}

/* strip_accents: NFD, then drop the nonspacing marks (Mn). NFD's canonical
 * reordering only matters for the marks that survive (Mc with a non-zero
 * combining class), so only those wait in the run. */
static void strip_accents(tfenc_tokenizer *t, utf8proc_int32_t c)
{
    if (!t->options.strip_accents) {
        lower_case(t, c);
        return;
    }
    utf8proc_int32_t decomposed[MAX_DECOMPOSITION];
    utf8proc_ssize_t n = utf8proc_decompose_char(c, decomposed, MAX_DECOMPOSITION,
                                                 UTF8PROC_DECOMPOSE, NULL);
    if (n < 0 || n > MAX_DECOMPOSITION) {
        /* Cannot happen for valid code points; keep the character as it is. */
        decomposed[0] = c;
        n = 1;
    }
    for (utf8proc_ssize_t i = 0; i < n; i++) {
        const utf8proc_property_t *property = utf8proc_get_property(decomposed[i]);
        if (property->category == UTF8PROC_CATEGORY_MN)
            continue;
        if (property->combining_class == 0) {
            flush_marks(t);
            lower_case(t, decomposed[i]);
        } else {
            /* A run longer than a word can be is one [UNK] word in any
             * order (marks are neither space nor punctuation): release it. */
            if (t->n_marks == MAX_WORD_CHARS + 1)
                flush_marks(t);
            t->marks[t->n_marks].code_point = decomposed[i];
            t->marks[t->n_marks].combining_class = property->combining_class;
            t->n_marks++;
        }
    }
}

/* BertNormalizer's first two steps: clean the text, space out CJK ideographs. */
static void normalize(tfenc_tokenizer *t, utf8proc_int32_t c)
{
    if (c == 0 || c == 0xFFFD || is_control(c))
        return;
    if (is_whitespace(c))
        c = ' ';
    if (t->options.chinese_chars && is_chinese_char(c)) {
        strip_accents(t, ' ');
        strip_accents(t, c);
        strip_accents(t, ' ');
    } else {
        strip_accents(t, c);
    }
}

/* Everything pending at the end of a segment of text. */
static void end_segment(tfenc_tokenizer *t)
{
    flush_marks(t);
    end_word(t);
}

/* Decodes and normalizes text[start..end) (no special tokens inside). */
static int encode_segment(tfenc_tokenizer *t, const char *text, size_t start, size_t end)
{
    const unsigned char *bytes = (const unsigned char *)text;
    size_t position = start;
    while (position < end) {
        utf8proc_int32_t c = bytes[position];
        size_t n = 1;
        if (c >= 0x80) {
            utf8proc_ssize_t decoded = utf8proc_iterate(bytes + position,
                                                        (utf8proc_ssize_t)(end - position), &c);
            if (decoded < 0) {
                if (t->options.invalid_utf8 == TFENC_INVALID_UTF8_ERROR)
                    return tfenc_error(t->ctx, TFENC_ERR_INPUT,
                                       "tokenizer: invalid UTF-8 at byte offset %zu of the text (byte 0x%02x)",
                                       position, bytes[position]);
                /* Python's decoder turns each maximal invalid subsequence into
                 * one U+FFFD, which the cleaner drops. Skipping one byte at a
                 * time drops the same bytes: the rest of such a subsequence
                 * is continuation bytes, invalid on their own, and no valid
                 * character starts inside it. */
                position++;
                continue;
            }
            n = (size_t)decoded;
        }
        normalize(t, c);
        position += n;
    }
    end_segment(t);
    return TFENC_OK;
}

static const special_token *special_at(const tfenc_tokenizer *t, const char *text, size_t available)
{
    for (int i = 0; i < t->n_specials; i++)
        if (t->specials[i].length <= available &&
            memcmp(text, t->specials[i].text, t->specials[i].length) == 0)
            return &t->specials[i];
    return NULL;
}

int tfenc_tokenizer_encode(tfenc_context *ctx, tfenc_tokenizer *tokenizer, const char *text,
                           size_t length, int32_t *ids, int max_length, int *n_ids,
                           int *n_truncated)
{
    tfenc_tokenizer *t = tokenizer;
    *n_ids = 0;
    if (n_truncated != NULL)
        *n_truncated = 0;
    if (max_length < 2)
        return tfenc_error(ctx, TFENC_ERR_CONFIG,
                           "tokenizer: max_length is %d; it must hold at least [CLS] and [SEP] (2)",
                           max_length);
    if (text == NULL && length > 0)
        return tfenc_error(ctx, TFENC_ERR_INPUT, "tokenizer: no text but a length of %zu bytes", length);
    t->ctx = ctx;
    t->ids = ids;
    t->piece_capacity = max_length - 2;
    t->n_pieces = 0;
    t->word_bytes = 0;
    t->word_chars = 0;
    t->n_marks = 0;

    /* Special tokens split the raw text before normalization, as HF's added
     * tokens do; all of them start with '['. */
    size_t segment_start = 0, position = 0;
    while (position < length) {
        const char *bracket = memchr(text + position, '[', length - position);
        if (bracket == NULL)
            break;
        position = (size_t)(bracket - text);
        const special_token *special = special_at(t, bracket, length - position);
        if (special == NULL) {
            position++;
            continue;
        }
        int status = encode_segment(t, text, segment_start, position);
        if (status != TFENC_OK)
            return status;
        emit(t, special->id);
        position += special->length;
        segment_start = position;
    }
    int status = encode_segment(t, text, segment_start, length);
    if (status != TFENC_OK)
        return status;

    long long kept = t->n_pieces < t->piece_capacity ? t->n_pieces : t->piece_capacity;
    ids[0] = t->cls_id;
    ids[1 + kept] = t->sep_id;
    *n_ids = (int)kept + 2;
    if (n_truncated != NULL) {
        long long cut = t->n_pieces - kept;
        *n_truncated = cut > INT_MAX ? INT_MAX : (int)cut;
    }
    return TFENC_OK;
}
