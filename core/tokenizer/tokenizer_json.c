/* tokenizer.json (Hugging Face `tokenizers`' serialization) -> the pipeline
 * of core/tokenizer/tokenizer_internal.h, parsed with jansson. Every refusal is one
 * line naming the file and the key or the component type. */
#include "tokenizer/tokenizer_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Parsing state: the tokenizer being filled and where errors point. */
typedef struct parser {
    tfenc_context *ctx;
    tfenc_tokenizer *t;
    const char *source;
    int pair_processors; /* post-processors seen that lay out pairs */
} parser;

static int refuse(parser *p, const char *where, const char *message)
{
    return tfenc_error(p->ctx, TFENC_ERR_CONFIG, "%s: %s: %s", p->source, where, message);
}

static int no_memory(parser *p)
{
    return tfenc_error(p->ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", p->source);
}

/* An optional boolean member (absent or null: the default). */
static int get_bool(parser *p, json_t *object, const char *where, const char *key, int fallback,
                    int *value)
{
    json_t *item = json_object_get(object, key);
    if (item == NULL || json_is_null(item)) {
        *value = fallback;
        return TFENC_OK;
    }
    if (!json_is_boolean(item)) {
        char message[128];
        snprintf(message, sizeof message, "'%s' must be true or false", key);
        return refuse(p, where, message);
    }
    *value = json_is_true(item);
    return TFENC_OK;
}

/* An optional string member: NULL when absent or null. */
static int get_string(parser *p, json_t *object, const char *where, const char *key,
                      const char **value, size_t *length)
{
    json_t *item = json_object_get(object, key);
    *value = NULL;
    if (length != NULL)
        *length = 0;
    if (item == NULL || json_is_null(item))
        return TFENC_OK;
    if (!json_is_string(item)) {
        char message[128];
        snprintf(message, sizeof message, "'%s' must be a string", key);
        return refuse(p, where, message);
    }
    *value = json_string_value(item);
    if (length != NULL)
        *length = json_string_length(item);
    return TFENC_OK;
}

/* An id: an integer in 0..INT32_MAX - 1, so that the vocabulary's size
 * (largest id + 1, the rows of the embedding table) is an int32 too; the
 * same range as the ids of an HDF5 corpus (core/input/corpus.c). */
static int get_id(parser *p, json_t *item, const char *where, int32_t *id)
{
    if (!json_is_integer(item) || json_integer_value(item) < 0 ||
        json_integer_value(item) > INT32_MAX - 1) {
        char message[160];
        if (json_is_integer(item))
            snprintf(message, sizeof message,
                     "id %" JSON_INTEGER_FORMAT " is outside 0..2147483646",
                     json_integer_value(item));
        else
            snprintf(message, sizeof message, "an id must be an integer from 0 to 2147483646");
        return refuse(p, where, message);
    }
    *id = (int32_t)json_integer_value(item);
    return TFENC_OK;
}

static char *copy_bytes(const char *bytes, size_t length)
{
    char *copy = malloc(length + 1);
    if (copy != NULL) {
        memcpy(copy, bytes, length);
        copy[length] = '\0';
    }
    return copy;
}

/* The one character of a string member (Metaspace's replacement,
 * CharDelimiterSplit's delimiter). */
static int get_char(parser *p, json_t *object, const char *where, const char *key,
                    int32_t fallback, int32_t *value)
{
    const char *text;
    size_t length;
    int status = get_string(p, object, where, key, &text, &length);
    if (status != TFENC_OK)
        return status;
    if (text == NULL) {
        *value = fallback;
        return TFENC_OK;
    }
    if (length == 0 || tok_utf8_length((unsigned char)text[0]) != length) {
        char message[128];
        snprintf(message, sizeof message, "'%s' must be one character", key);
        return refuse(p, where, message);
    }
    tok_utf8_decode(text, value);
    return TFENC_OK;
}

/* {"String": "..."} or {"Regex": "..."}. */
static int get_pattern(parser *p, json_t *object, const char *where, tok_text_pattern *pattern)
{
    json_t *item = json_object_get(object, "pattern");
    json_t *literal = json_object_get(item, "String");
    json_t *regex = json_object_get(item, "Regex");
    if (json_is_string(literal)) {
        pattern->is_regex = 0;
        pattern->literal_length = json_string_length(literal);
        pattern->literal = copy_bytes(json_string_value(literal), pattern->literal_length);
        return pattern->literal != NULL ? TFENC_OK : no_memory(p);
    }
    if (json_is_string(regex)) {
        if (strlen(json_string_value(regex)) != json_string_length(regex))
            return refuse(p, where, "the pattern holds a NUL character");
        pattern->is_regex = 1;
        return tok_regex_compile(p->ctx, p->source, where, json_string_value(regex),
                                 &pattern->regex);
    }
    return refuse(p, where, "'pattern' must be {\"String\": ...} or {\"Regex\": ...}");
}

static int get_behavior(parser *p, json_t *object, const char *where, tok_split_behavior fallback,
                        tok_split_behavior *behavior)
{
    static const char *const names[] = {"Removed", "Isolated", "MergedWithPrevious",
                                        "MergedWithNext", "Contiguous"};
    const char *name;
    int status = get_string(p, object, where, "behavior", &name, NULL);
    if (status != TFENC_OK)
        return status;
    if (name == NULL) {
        *behavior = fallback;
        return TFENC_OK;
    }
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(name, names[i]) == 0) {
            *behavior = (tok_split_behavior)i;
            return TFENC_OK;
        }
    return refuse(p, where, "'behavior' must be Removed, Isolated, MergedWithPrevious, "
                            "MergedWithNext or Contiguous");
}

static const char *type_of(json_t *object)
{
    const char *type = json_string_value(json_object_get(object, "type"));
    return type != NULL ? type : "";
}

/* ---------------------------------------------------------- scores */

/* A Unigram score as `tokenizers` reads it. serde_json (without its
 * float_roundtrip feature) parses a number as its digits D, an integer,
 * times 10^E: (double)D, then one multiplication or division by 10^|E|.
 * When D has more than 15 digits, (double)D rounds first, and the result
 * can be one unit in the last place away from the correctly rounded value
 * that jansson's strtod gives. Viterbi compares sums of scores, so that
 * unit decides ties. The file's text is the shortest decimal that reads
 * back as the same double (what Rust and Python write), so it can be
 * recovered from the double and re-read the serde way. */
static double serde_json_double(double value)
{
    if (value == 0.0 || !isfinite(value))
        return value;
    char text[40];
    int digits = 15;
    for (; digits <= 17; digits++) {
        snprintf(text, sizeof text, "%.*e", digits - 1, value);
        if (strtod(text, NULL) == value)
            break;
    }
    char *exponent_mark = strchr(text, 'e');
    if (digits > 17 || exponent_mark == NULL)
        return value;
    long exponent = strtol(exponent_mark + 1, NULL, 10) - (digits - 1);
    uint64_t significand = 0;
    for (const char *c = text; c < exponent_mark; c++)
        if (*c >= '0' && *c <= '9')
            significand = significand * 10 + (uint64_t)(*c - '0');
    if (digits <= 15 && exponent >= -22 && exponent <= 22)
        return value;  /* everything exact: both parsers round once */
    double result = (double)significand;
    while (exponent < -308) {
        result /= 1e308;
        exponent += 308;
    }
    if (exponent > 308)
        return value;
    double power = 1.0;
    /* 10^|E| as the nearest double, as serde's table holds it. */
    char power_text[16];
    snprintf(power_text, sizeof power_text, "1e%ld", exponent < 0 ? -exponent : exponent);
    power = strtod(power_text, NULL);
    result = exponent >= 0 ? result * power : result / power;
    return value < 0 ? -fabs(result) : fabs(result);
}

/* ------------------------------------------------------------- base64 */

static int base64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* Standard base64 (the charsmap's encoding); -1 on a bad character. */
static long base64_decode(const char *in, size_t length, unsigned char *out)
{
    size_t n = 0;
    unsigned value = 0;
    int bits = 0;
    for (size_t i = 0; i < length; i++) {
        if (in[i] == '=')
            break;
        int v = base64_value((unsigned char)in[i]);
        if (v < 0)
            return -1;
        value = (value << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (unsigned char)(value >> bits);
            value &= (1u << bits) - 1;
        }
    }
    return (long)n;
}

/* --------------------------------------------------------- normalizers */

static int add_normalizer(parser *p, tok_normalizer **out)
{
    tfenc_tokenizer *t = p->t;
    tok_normalizer *grown = realloc(t->normalizers, (t->n_normalizers + 1) * sizeof *grown);
    if (grown == NULL)
        return no_memory(p);
    t->normalizers = grown;
    *out = &t->normalizers[t->n_normalizers++];
    memset(*out, 0, sizeof **out);
    return TFENC_OK;
}

/* SentencePiece's precompiled_charsmap: a u32 trie size, the double-array
 * units, then the NUL-separated replacement strings. */
static int parse_precompiled(parser *p, tok_normalizer *n, json_t *object)
{
    const char *where = "normalizer Precompiled";
    const char *encoded;
    size_t length;
    int status = get_string(p, object, where, "precompiled_charsmap", &encoded, &length);
    if (status != TFENC_OK || encoded == NULL || length == 0)
        return status;
    unsigned char *data = malloc(length / 4 * 3 + 3);
    if (data == NULL)
        return no_memory(p);
    long size = base64_decode(encoded, length, data);
    status = TFENC_OK;
    uint32_t trie_bytes = 0;
    if (size >= 4)
        trie_bytes = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 |
                     (uint32_t)data[3] << 24;
    if (size < 4 || trie_bytes % 4 != 0 || (size_t)trie_bytes > (size_t)size - 4) {
        free(data);
        return refuse(p, where, "precompiled_charsmap is not SentencePiece's charsmap "
                                "(bad base64 or trie size)");
    }
    n->trie_units = trie_bytes / 4;
    n->trie = malloc((n->trie_units ? n->trie_units : 1) * sizeof *n->trie);
    n->replacements_length = (size_t)size - 4 - trie_bytes;
    n->replacements = copy_bytes((const char *)data + 4 + trie_bytes, n->replacements_length);
    if (n->trie == NULL || n->replacements == NULL)
        status = no_memory(p);
    for (size_t i = 0; status == TFENC_OK && i < n->trie_units; i++) {
        const unsigned char *unit = data + 4 + 4 * i;
        n->trie[i] = (uint32_t)unit[0] | (uint32_t)unit[1] << 8 | (uint32_t)unit[2] << 16 |
                     (uint32_t)unit[3] << 24;
    }
    free(data);
    return status;
}

/* The options of one normalizer of a known kind; `where` names it in
 * errors. */
static int normalizer_options(parser *p, tok_normalizer *n, json_t *object, const char *where)
{
    int status = TFENC_OK;
    switch (n->kind) {
    case TOK_NORMALIZER_BERT: {
        json_t *strip = json_object_get(object, "strip_accents");
        if ((status = get_bool(p, object, where, "clean_text", 1, &n->clean_text)) ||
            (status = get_bool(p, object, where, "handle_chinese_chars", 1, &n->handle_chinese_chars)) ||
            (status = get_bool(p, object, where, "lowercase", 1, &n->lowercase)))
            return status;
        /* null: follow lowercase, as HF's BertNormalizer does. */
        if (strip == NULL || json_is_null(strip))
            n->strip_accents = n->lowercase;
        else if ((status = get_bool(p, object, where, "strip_accents", 0, &n->strip_accents)))
            return status;
        return TFENC_OK;
    }
    case TOK_NORMALIZER_STRIP:
        if ((status = get_bool(p, object, where, "strip_left", 1, &n->strip_left)))
            return status;
        return get_bool(p, object, where, "strip_right", 1, &n->strip_right);
    case TOK_NORMALIZER_REPLACE: {
        const char *content;
        if ((status = get_pattern(p, object, where, &n->pattern)) ||
            (status = get_string(p, object, where, "content", &content, &n->content_length)))
            return status;
        if (content == NULL)
            return refuse(p, where, "'content' is missing");
        n->content = copy_bytes(content, n->content_length);
        return n->content != NULL ? TFENC_OK : no_memory(p);
    }
    case TOK_NORMALIZER_PREPEND: {
        const char *content;
        if ((status = get_string(p, object, where, "prepend", &content, &n->content_length)))
            return status;
        if (content == NULL)
            return refuse(p, where, "'prepend' is missing");
        n->content = copy_bytes(content, n->content_length);
        return n->content != NULL ? TFENC_OK : no_memory(p);
    }
    case TOK_NORMALIZER_PRECOMPILED:
        return parse_precompiled(p, n, object);
    default:
        return TFENC_OK;
    }
}

static int parse_normalizer(parser *p, json_t *object, int depth)
{
    if (object == NULL || json_is_null(object))
        return TFENC_OK;
    if (!json_is_object(object))
        return refuse(p, "normalizer", "must be an object or null");
    if (depth > 16)
        return refuse(p, "normalizer", "Sequence nested more than 16 deep");
    const char *type = type_of(object);
    if (strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(object, "normalizers");
        if (!json_is_array(list))
            return refuse(p, "normalizer Sequence", "'normalizers' must be a list");
        for (size_t i = 0; i < json_array_size(list); i++) {
            int status = parse_normalizer(p, json_array_get(list, i), depth + 1);
            if (status != TFENC_OK)
                return status;
        }
        return TFENC_OK;
    }
    static const struct {
        const char *name;
        tok_normalizer_kind kind;
    } kinds[] = {{"BertNormalizer", TOK_NORMALIZER_BERT},
                 {"NFC", TOK_NORMALIZER_NFC},
                 {"NFD", TOK_NORMALIZER_NFD},
                 {"NFKC", TOK_NORMALIZER_NFKC},
                 {"NFKD", TOK_NORMALIZER_NFKD},
                 {"Lowercase", TOK_NORMALIZER_LOWERCASE},
                 {"Strip", TOK_NORMALIZER_STRIP},
                 {"StripAccents", TOK_NORMALIZER_STRIP_ACCENTS},
                 {"Replace", TOK_NORMALIZER_REPLACE},
                 {"Prepend", TOK_NORMALIZER_PREPEND},
                 {"Precompiled", TOK_NORMALIZER_PRECOMPILED}};
    size_t which = 0;
    while (which < sizeof kinds / sizeof *kinds && strcmp(type, kinds[which].name) != 0)
        which++;
    if (which == sizeof kinds / sizeof *kinds) {
        char message[200];
        snprintf(message, sizeof message, "type '%.80s' is not supported (supported: "
                 "BertNormalizer, NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, "
                 "Replace, Prepend, Precompiled, Sequence)", type);
        return refuse(p, "normalizer", message);
    }
    tok_normalizer *n = NULL;
    int status = add_normalizer(p, &n);
    if (status != TFENC_OK)
        return status;
    n->kind = kinds[which].kind;
    char where[64];
    snprintf(where, sizeof where, "normalizer %s", kinds[which].name);
    return normalizer_options(p, n, object, where);
}

/* ------------------------------------------------------- pre-tokenizers */

/* GPT-2's split pattern, ByteLevel's use_regex. */
#define GPT2_PATTERN "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

static int add_pre_tokenizer(parser *p, tok_pre_tokenizer **out)
{
    tfenc_tokenizer *t = p->t;
    tok_pre_tokenizer *grown =
        realloc(t->pre_tokenizers, (t->n_pre_tokenizers + 1) * sizeof *grown);
    if (grown == NULL)
        return no_memory(p);
    t->pre_tokenizers = grown;
    *out = &t->pre_tokenizers[t->n_pre_tokenizers++];
    memset(*out, 0, sizeof **out);
    return TFENC_OK;
}

/* The options of one pre-tokenizer of a known kind; `where` names it in
 * errors. */
static int pre_tokenizer_options(parser *p, tok_pre_tokenizer *pre, json_t *object,
                                 const char *where)
{
    int status = TFENC_OK;
    switch (pre->kind) {
    case TOK_PRE_METASPACE: {
        const char *scheme;
        int add_prefix_space;
        if ((status = get_char(p, object, where, "replacement", 0x2581, &pre->replacement)) ||
            (status = get_bool(p, object, where, "split", 1, &pre->split)) ||
            (status = get_bool(p, object, where, "add_prefix_space", 1, &add_prefix_space)) ||
            (status = get_string(p, object, where, "prepend_scheme", &scheme, NULL)))
            return status;
        /* Files older than prepend_scheme say add_prefix_space instead. */
        if (scheme == NULL)
            pre->prepend = add_prefix_space ? TOK_PREPEND_ALWAYS : TOK_PREPEND_NEVER;
        else if (strcmp(scheme, "always") == 0)
            pre->prepend = TOK_PREPEND_ALWAYS;
        else if (strcmp(scheme, "first") == 0)
            pre->prepend = TOK_PREPEND_FIRST;
        else if (strcmp(scheme, "never") == 0)
            pre->prepend = TOK_PREPEND_NEVER;
        else
            return refuse(p, where, "'prepend_scheme' must be always, first or never");
        return TFENC_OK;
    }
    case TOK_PRE_BYTE_LEVEL:
        if ((status = get_bool(p, object, where, "add_prefix_space", 1, &pre->add_prefix_space)) ||
            (status = get_bool(p, object, where, "use_regex", 1, &pre->use_regex)))
            return status;
        pre->pattern.is_regex = 1;
        return pre->use_regex
                   ? tok_regex_compile(p->ctx, p->source, where, GPT2_PATTERN, &pre->pattern.regex)
                   : TFENC_OK;
    case TOK_PRE_SPLIT:
        if ((status = get_pattern(p, object, where, &pre->pattern)) ||
            (status = get_behavior(p, object, where, TOK_SPLIT_REMOVED, &pre->behavior)))
            return status;
        if (json_object_get(object, "behavior") == NULL)
            return refuse(p, where, "'behavior' is missing");
        return get_bool(p, object, where, "invert", 0, &pre->invert);
    case TOK_PRE_DIGITS:
        return get_bool(p, object, where, "individual_digits", 0, &pre->individual_digits);
    case TOK_PRE_PUNCTUATION:
        return get_behavior(p, object, where, TOK_SPLIT_ISOLATED, &pre->behavior);
    case TOK_PRE_CHAR_DELIMITER:
        if ((status = get_char(p, object, where, "delimiter", -1, &pre->delimiter)))
            return status;
        return pre->delimiter < 0 ? refuse(p, where, "'delimiter' is missing") : TFENC_OK;
    default:
        return TFENC_OK;
    }
}

static int parse_pre_tokenizer(parser *p, json_t *object, int depth)
{
    if (object == NULL || json_is_null(object))
        return TFENC_OK;
    if (!json_is_object(object))
        return refuse(p, "pre_tokenizer", "must be an object or null");
    if (depth > 16)
        return refuse(p, "pre_tokenizer", "Sequence nested more than 16 deep");
    const char *type = type_of(object);
    if (strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(object, "pretokenizers");
        if (!json_is_array(list))
            return refuse(p, "pre_tokenizer Sequence", "'pretokenizers' must be a list");
        for (size_t i = 0; i < json_array_size(list); i++) {
            int status = parse_pre_tokenizer(p, json_array_get(list, i), depth + 1);
            if (status != TFENC_OK)
                return status;
        }
        return TFENC_OK;
    }
    static const struct {
        const char *name;
        tok_pre_tokenizer_kind kind;
    } kinds[] = {{"BertPreTokenizer", TOK_PRE_BERT},
                 {"Whitespace", TOK_PRE_WHITESPACE},
                 {"WhitespaceSplit", TOK_PRE_WHITESPACE_SPLIT},
                 {"Metaspace", TOK_PRE_METASPACE},
                 {"ByteLevel", TOK_PRE_BYTE_LEVEL},
                 {"Split", TOK_PRE_SPLIT},
                 {"Digits", TOK_PRE_DIGITS},
                 {"Punctuation", TOK_PRE_PUNCTUATION},
                 {"CharDelimiterSplit", TOK_PRE_CHAR_DELIMITER}};
    size_t which = 0;
    while (which < sizeof kinds / sizeof *kinds && strcmp(type, kinds[which].name) != 0)
        which++;
    if (which == sizeof kinds / sizeof *kinds) {
        char message[220];
        snprintf(message, sizeof message, "type '%.80s' is not supported (supported: "
                 "BertPreTokenizer, Whitespace, WhitespaceSplit, Metaspace, ByteLevel, Split, "
                 "Digits, Punctuation, CharDelimiterSplit, Sequence)", type);
        return refuse(p, "pre_tokenizer", message);
    }
    tok_pre_tokenizer *pre = NULL;
    int status = add_pre_tokenizer(p, &pre);
    if (status != TFENC_OK)
        return status;
    pre->kind = kinds[which].kind;
    char where[64];
    snprintf(where, sizeof where, "pre_tokenizer %s", kinds[which].name);
    return pre_tokenizer_options(p, pre, object, where);
}

/* -------------------------------------------------------------- models */

/* {"token": id, ...} into the model's table. */
static int parse_vocab_object(parser *p, json_t *vocab, const char *where)
{
    if (!json_is_object(vocab))
        return refuse(p, where, "'vocab' must be an object of token: id");
    const char *key;
    json_t *value;
    json_object_foreach(vocab, key, value) {
        int32_t id;
        int status = get_id(p, value, where, &id);
        if (status != TFENC_OK)
            return status;
        /* jansson gives keys NUL-terminated; one with a NUL inside is cut
         * there, which no real vocabulary holds. */
        if (tok_table_put(&p->t->model.vocab, key, strlen(key), id) != 0)
            return no_memory(p);
    }
    return TFENC_OK;
}

/* fallback: HF's default when the key is absent (WordPiece's "[UNK]"), or
 * NULL for none. */
static int set_unk(parser *p, json_t *object, const char *where, const char *fallback)
{
    const char *unk;
    size_t length;
    int status = get_string(p, object, where, "unk_token", &unk, &length);
    if (status != TFENC_OK)
        return status;
    tok_model *m = &p->t->model;
    if (unk == NULL && fallback != NULL) {
        unk = fallback;
        length = strlen(fallback);
    }
    if (unk == NULL) {
        m->unk_id = -1;
        return TFENC_OK;
    }
    m->unk_id = tok_table_get(&m->vocab, unk, length);
    if (m->unk_id < 0) {
        char message[200];
        snprintf(message, sizeof message, "unk_token '%.80s' is not in the vocabulary", unk);
        return refuse(p, where, message);
    }
    return TFENC_OK;
}

static int set_affix(parser *p, json_t *object, const char *where, const char *key,
                     const char *fallback, char **value, size_t *length)
{
    const char *text;
    int status = get_string(p, object, where, key, &text, length);
    if (status != TFENC_OK)
        return status;
    if (text == NULL && fallback != NULL) {
        text = fallback;
        *length = strlen(fallback);
    }
    if (text == NULL)
        return TFENC_OK;
    *value = copy_bytes(text, *length);
    return *value != NULL ? TFENC_OK : no_memory(p);
}

static int parse_merges(parser *p, json_t *merges, const char *where)
{
    if (!json_is_array(merges))
        return refuse(p, where, "'merges' must be a list");
    size_t count = json_array_size(merges);
    const char **left = malloc((count ? count : 1) * sizeof *left);
    const char **right = malloc((count ? count : 1) * sizeof *right);
    size_t *left_length = malloc((count ? count : 1) * sizeof *left_length);
    size_t *right_length = malloc((count ? count : 1) * sizeof *right_length);
    int status = TFENC_OK;
    if (left == NULL || right == NULL || left_length == NULL || right_length == NULL)
        status = no_memory(p);
    for (size_t i = 0; i < count && status == TFENC_OK; i++) {
        json_t *merge = json_array_get(merges, i);
        if (json_is_string(merge)) {
            /* "a b": exactly one space, as HF requires. */
            const char *text = json_string_value(merge);
            size_t length = json_string_length(merge);
            const char *space = memchr(text, ' ', length);
            if (space == NULL || memchr(space + 1, ' ', length - (size_t)(space - text) - 1) != NULL) {
                char message[96];
                snprintf(message, sizeof message, "merge %zu is not two tokens separated by one space",
                         i + 1);
                status = refuse(p, where, message);
                break;
            }
            left[i] = text;
            left_length[i] = (size_t)(space - text);
            right[i] = space + 1;
            right_length[i] = length - left_length[i] - 1;
        } else if (json_is_array(merge) && json_array_size(merge) == 2 &&
                   json_is_string(json_array_get(merge, 0)) &&
                   json_is_string(json_array_get(merge, 1))) {
            /* ["a", "b"]: the newer serialization (tokenizers >= 0.20). */
            left[i] = json_string_value(json_array_get(merge, 0));
            left_length[i] = json_string_length(json_array_get(merge, 0));
            right[i] = json_string_value(json_array_get(merge, 1));
            right_length[i] = json_string_length(json_array_get(merge, 1));
        } else {
            char message[96];
            snprintf(message, sizeof message, "merge %zu is neither \"a b\" nor [\"a\", \"b\"]", i + 1);
            status = refuse(p, where, message);
        }
    }
    if (status == TFENC_OK)
        status = tok_model_set_merges(p->ctx, &p->t->model, left, left_length, right, right_length,
                                      count, p->source);
    free(left);
    free(right);
    free(left_length);
    free(right_length);
    return status;
}

/* model WordPiece: the vocabulary, the continuing prefix, the unknown token
 * and the longest word it splits. */
static int parse_wordpiece(parser *p, json_t *object)
{
    tok_model *m = &p->t->model;
    int status;
    const char *where = "model WordPiece";
    json_t *limit = json_object_get(object, "max_input_chars_per_word");
    m->kind = TOK_MODEL_WORDPIECE;
    m->max_input_chars_per_word = 100;
    if (limit != NULL && !json_is_null(limit)) {
        if (!json_is_integer(limit) || json_integer_value(limit) < 0 ||
            json_integer_value(limit) > INT32_MAX)
            return refuse(p, where, "'max_input_chars_per_word' must be a count");
        m->max_input_chars_per_word = (int)json_integer_value(limit);
    }
    if ((status = parse_vocab_object(p, json_object_get(object, "vocab"), where)) ||
        (status = set_affix(p, object, where, "continuing_subword_prefix", "##",
                            &m->continuing_prefix, &m->continuing_prefix_length)))
        return status;
    return set_unk(p, object, where, "[UNK]");
}

/* model BPE: vocabulary, merges, affixes and options; dropout must be off
 * (a batch encoder must give the same ids every time). */
static int parse_bpe(parser *p, json_t *object)
{
    tok_model *m = &p->t->model;
    int status;
    const char *where = "model BPE";
    m->kind = TOK_MODEL_BPE;
    json_t *dropout = json_object_get(object, "dropout");
    if (dropout != NULL && !json_is_null(dropout) &&
        !(json_is_number(dropout) && json_number_value(dropout) == 0.0))
        return refuse(p, where, "'dropout' is random sampling, which a batch encoder cannot "
                                "reproduce: set it to null");
    if ((status = parse_vocab_object(p, json_object_get(object, "vocab"), where)) ||
        (status = set_affix(p, object, where, "continuing_subword_prefix", NULL,
                            &m->continuing_prefix, &m->continuing_prefix_length)) ||
        (status = set_affix(p, object, where, "end_of_word_suffix", NULL,
                            &m->end_of_word_suffix, &m->end_of_word_suffix_length)) ||
        (status = get_bool(p, object, where, "fuse_unk", 0, &m->fuse_unk)) ||
        (status = get_bool(p, object, where, "byte_fallback", 0, &m->byte_fallback)) ||
        (status = get_bool(p, object, where, "ignore_merges", 0, &m->ignore_merges)) ||
        (status = set_unk(p, object, where, NULL)))
        return status;
    return parse_merges(p, json_object_get(object, "merges"), where);
}

/* model Unigram: the pieces with their scores and the unknown id. */
static int parse_unigram(parser *p, json_t *object)
{
    tok_model *m = &p->t->model;
    int status;
    const char *where = "model Unigram";
    m->kind = TOK_MODEL_UNIGRAM;
    json_t *vocab = json_object_get(object, "vocab");
    json_t *unk = json_object_get(object, "unk_id");
    if ((status = get_bool(p, object, where, "byte_fallback", 0, &m->byte_fallback)))
        return status;
    if (!json_is_array(vocab) || json_array_size(vocab) == 0)
        return refuse(p, where, "'vocab' must be a non-empty list of [piece, score]");
    m->n_pieces = json_array_size(vocab);
    if (m->n_pieces > INT32_MAX)
        return refuse(p, where, "more than 2147483647 pieces");
    m->scores = malloc(m->n_pieces * sizeof *m->scores);
    if (m->scores == NULL)
        return no_memory(p);
    m->min_score = INFINITY;
    for (size_t i = 0; i < m->n_pieces; i++) {
        json_t *entry = json_array_get(vocab, i);
        json_t *piece = json_array_get(entry, 0), *score = json_array_get(entry, 1);
        if (!json_is_array(entry) || !json_is_string(piece) || !json_is_number(score)) {
            char message[96];
            snprintf(message, sizeof message, "vocab entry %zu is not [piece, score]", i);
            return refuse(p, where, message);
        }
        m->scores[i] = serde_json_double(json_number_value(score));
        if (m->scores[i] < m->min_score)
            m->min_score = m->scores[i];
        if (tok_table_put(&m->vocab, json_string_value(piece), json_string_length(piece),
                          (int32_t)i) != 0)
            return no_memory(p);
    }
    m->unk_id = -1;
    if (unk != NULL && !json_is_null(unk)) {
        if ((status = get_id(p, unk, where, &m->unk_id)))
            return status;
        if ((size_t)m->unk_id >= m->n_pieces)
            return refuse(p, where, "'unk_id' is past the end of the vocabulary");
    }
    return TFENC_OK;
}

static int parse_model(parser *p, json_t *object)
{
    if (!json_is_object(object))
        return refuse(p, "model", "is missing or not an object");
    const char *type = type_of(object);
    /* Old files have no type: tell the model by its members. */
    if (type[0] == '\0')
        type = json_object_get(object, "merges") != NULL ? "BPE"
               : json_is_array(json_object_get(object, "vocab")) ? "Unigram"
               : json_object_get(object, "max_input_chars_per_word") != NULL ? "WordPiece"
               : "";
    if (strcmp(type, "WordPiece") == 0)
        return parse_wordpiece(p, object);
    if (strcmp(type, "BPE") == 0)
        return parse_bpe(p, object);
    if (strcmp(type, "Unigram") == 0)
        return parse_unigram(p, object);
    char message[160];
    snprintf(message, sizeof message, "type '%.80s' is not supported (supported: WordPiece, BPE, "
             "Unigram)", type);
    return refuse(p, "model", message);
}

/* ------------------------------------------------------- post-processors */

static int add_special(parser *p, int before, int32_t id)
{
    tfenc_tokenizer *t = p->t;
    int *count = before ? &t->n_prefix : &t->n_suffix;
    int32_t *ids = before ? t->prefix_ids : t->suffix_ids;
    if (*count >= MAX_SPECIAL_IDS)
        return refuse(p, "post_processor", "more than 16 special tokens on one side");
    if (before) {
        /* A later processor wraps what the earlier ones produced. */
        memmove(ids + 1, ids, (size_t)*count * sizeof *ids);
        ids[0] = id;
    } else {
        ids[*count] = id;
    }
    (*count)++;
    return TFENC_OK;
}

/* ["[CLS]", 101] */
static int pair_id(parser *p, json_t *object, const char *where, const char *key, int32_t *id)
{
    json_t *pair = json_object_get(object, key);
    if (!json_is_array(pair) || json_array_size(pair) != 2 || !json_is_string(json_array_get(pair, 0))) {
        char message[96];
        snprintf(message, sizeof message, "'%s' must be [token, id]", key);
        return refuse(p, where, message);
    }
    return get_id(p, json_array_get(pair, 1), where, id);
}

static int parse_template(parser *p, json_t *object)
{
    const char *where = "post_processor TemplateProcessing";
    json_t *single = json_object_get(object, "single");
    json_t *specials = json_object_get(object, "special_tokens");
    if (!json_is_array(single))
        return refuse(p, where, "'single' must be a list");
    int32_t before[MAX_SPECIAL_IDS], after[MAX_SPECIAL_IDS];
    int n_before = 0, n_after = 0, seen_a = 0;
    for (size_t i = 0; i < json_array_size(single); i++) {
        json_t *item = json_array_get(single, i);
        json_t *sequence = json_object_get(item, "Sequence");
        json_t *special = json_object_get(item, "SpecialToken");
        if (sequence != NULL) {
            const char *which = json_string_value(json_object_get(sequence, "id"));
            if (which == NULL || strcmp(which, "A") != 0 || seen_a)
                return refuse(p, where, "'single' must hold the sequence A exactly once");
            seen_a = 1;
            continue;
        }
        const char *name = json_string_value(json_object_get(special, "id"));
        json_t *entry = json_object_get(specials, name != NULL ? name : "");
        json_t *ids = json_object_get(entry, "ids");
        if (name == NULL || !json_is_array(ids)) {
            char message[160];
            snprintf(message, sizeof message, "special token '%.60s' of 'single' has no entry in "
                     "'special_tokens'", name != NULL ? name : "?");
            return refuse(p, where, message);
        }
        for (size_t k = 0; k < json_array_size(ids); k++) {
            int32_t id;
            int status = get_id(p, json_array_get(ids, k), where, &id);
            if (status != TFENC_OK)
                return status;
            if ((seen_a ? n_after : n_before) >= MAX_SPECIAL_IDS)
                return refuse(p, where, "more than 16 special tokens on one side");
            if (seen_a)
                after[n_after++] = id;
            else
                before[n_before++] = id;
        }
    }
    if (!seen_a)
        return refuse(p, where, "'single' must hold the sequence A exactly once");
    for (int i = n_before; i-- > 0;) {
        int status = add_special(p, 1, before[i]);
        if (status != TFENC_OK)
            return status;
    }
    for (int i = 0; i < n_after; i++) {
        int status = add_special(p, 0, after[i]);
        if (status != TFENC_OK)
            return status;
    }
    return TFENC_OK;
}

/* The `pair` template: special tokens, the sequence A, special tokens, the
 * sequence B, special tokens (every model's template has this shape). Each
 * item carries its token type. A template of another shape (B first, a
 * sequence twice) or an empty one leaves pairs undefined: single texts
 * still encode, and a job of pairs is refused when it starts. */
static int parse_pair_template(parser *p, json_t *object)
{
    const char *where = "post_processor TemplateProcessing";
    tok_pair_template *pair = &p->t->pair;
    memset(pair, 0, sizeof *pair);
    pair->processors = ++p->pair_processors;
    json_t *template = json_object_get(object, "pair");
    if (template == NULL || json_is_null(template))
        return TFENC_OK;
    if (!json_is_array(template))
        return refuse(p, where, "'pair' must be a list");
    json_t *specials = json_object_get(object, "special_tokens");
    int place = TOK_PAIR_BEFORE;
    for (size_t i = 0; i < json_array_size(template); i++) {
        json_t *item = json_array_get(template, i);
        json_t *sequence = json_object_get(item, "Sequence");
        json_t *special = json_object_get(item, "SpecialToken");
        json_t *part = sequence != NULL ? sequence : special;
        json_t *type = json_object_get(part, "type_id");
        int32_t type_id = 0;
        if (type != NULL) {
            int status = get_id(p, type, where, &type_id);
            if (status != TFENC_OK)
                return status;
        }
        if (sequence != NULL) {
            const char *which = json_string_value(json_object_get(sequence, "id"));
            const char *expected = place == TOK_PAIR_BEFORE ? "A" : "B";
            if (which == NULL || strcmp(which, expected) != 0 || place == TOK_PAIR_AFTER)
                return TFENC_OK;
            if (place == TOK_PAIR_BEFORE)
                pair->type_a = type_id;
            else
                pair->type_b = type_id;
            place++;
            continue;
        }
        const char *name = json_string_value(json_object_get(special, "id"));
        json_t *ids = json_object_get(json_object_get(specials, name != NULL ? name : ""), "ids");
        if (name == NULL || !json_is_array(ids)) {
            char message[160];
            snprintf(message, sizeof message, "special token '%.60s' of 'pair' has no entry in "
                     "'special_tokens'", name != NULL ? name : "?");
            return refuse(p, where, message);
        }
        for (size_t k = 0; k < json_array_size(ids); k++) {
            int32_t id;
            int status = get_id(p, json_array_get(ids, k), where, &id);
            if (status != TFENC_OK)
                return status;
            if (pair->n[place] >= MAX_SPECIAL_IDS)
                return refuse(p, where, "more than 16 special tokens in one place of 'pair'");
            pair->types[place][pair->n[place]] = type_id;
            pair->ids[place][pair->n[place]++] = id;
        }
    }
    pair->defined = place == TOK_PAIR_AFTER;
    return TFENC_OK;
}

static int parse_post_processor(parser *p, json_t *object, int depth)
{
    if (object == NULL || json_is_null(object))
        return TFENC_OK;
    if (!json_is_object(object))
        return refuse(p, "post_processor", "must be an object or null");
    if (depth > 16)
        return refuse(p, "post_processor", "Sequence nested more than 16 deep");
    const char *type = type_of(object);
    int status;
    if (strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(object, "processors");
        if (!json_is_array(list))
            return refuse(p, "post_processor Sequence", "'processors' must be a list");
        for (size_t i = 0; i < json_array_size(list); i++)
            if ((status = parse_post_processor(p, json_array_get(list, i), depth + 1)))
                return status;
        return TFENC_OK;
    }
    if (strcmp(type, "BertProcessing") == 0 || strcmp(type, "RobertaProcessing") == 0) {
        const char *where = type[0] == 'B' ? "post_processor BertProcessing"
                                           : "post_processor RobertaProcessing";
        int32_t cls, sep;
        if ((status = pair_id(p, object, where, "cls", &cls)) ||
            (status = pair_id(p, object, where, "sep", &sep)) ||
            (status = add_special(p, 1, cls)))
            return status;
        /* Their pairs, as `tokenizers` writes them: BERT's second text and
         * its [SEP] are type 1; RoBERTa doubles the separator between the
         * texts and keeps every type 0. */
        const int bert = type[0] == 'B';
        tok_pair_template *pair = &p->t->pair;
        memset(pair, 0, sizeof *pair);
        pair->processors = p->pair_processors + 1;
        pair->defined = 1;
        pair->ids[TOK_PAIR_BEFORE][pair->n[TOK_PAIR_BEFORE]++] = cls;
        pair->ids[TOK_PAIR_BETWEEN][pair->n[TOK_PAIR_BETWEEN]++] = sep;
        if (!bert)
            pair->ids[TOK_PAIR_BETWEEN][pair->n[TOK_PAIR_BETWEEN]++] = sep;
        pair->ids[TOK_PAIR_AFTER][pair->n[TOK_PAIR_AFTER]++] = sep;
        pair->types[TOK_PAIR_AFTER][0] = bert;
        pair->type_b = bert;
        p->pair_processors++;
        return add_special(p, 0, sep);
    }
    if (strcmp(type, "TemplateProcessing") == 0) {
        if ((status = parse_template(p, object)))
            return status;
        return parse_pair_template(p, object);
    }
    if (strcmp(type, "ByteLevel") == 0)
        return TFENC_OK;  /* it only adjusts offsets */
    char message[200];
    snprintf(message, sizeof message, "type '%.80s' is not supported (supported: BertProcessing, "
             "RobertaProcessing, TemplateProcessing, ByteLevel, Sequence)", type);
    return refuse(p, "post_processor", message);
}

/* --------------------------------------------------------- added tokens */

static int parse_added(parser *p, json_t *list)
{
    tfenc_tokenizer *t = p->t;
    const char *where = "added_tokens";
    if (list == NULL || json_is_null(list))
        return TFENC_OK;
    if (!json_is_array(list))
        return refuse(p, where, "must be a list");
    size_t count = json_array_size(list);
    t->added = calloc(count ? count : 1, sizeof *t->added);
    if (t->added == NULL)
        return no_memory(p);
    int32_t largest_added = -1;
    for (size_t i = 0; i < count; i++) {
        json_t *item = json_array_get(list, i);
        const char *content;
        size_t length;
        int32_t id;
        int status;
        if (!json_is_object(item))
            return refuse(p, where, "an entry is not an object");
        if ((status = get_string(p, item, where, "content", &content, &length)) ||
            (status = get_id(p, json_object_get(item, "id"), where, &id)))
            return status;
        if (content == NULL || length == 0)
            continue;  /* HF ignores empty tokens */
        tok_added_token *token = &t->added[t->n_added];
        if ((status = get_bool(p, item, where, "single_word", 0, &token->single_word)) ||
            (status = get_bool(p, item, where, "lstrip", 0, &token->lstrip)) ||
            (status = get_bool(p, item, where, "rstrip", 0, &token->rstrip)) ||
            (status = get_bool(p, item, where, "special", 0, &token->special)) ||
            (status = get_bool(p, item, where, "normalized", !token->special, &token->normalized)))
            return status;
        /* HF ignores the file's id (it only warns when they differ): an
         * added token takes the model's id for the same text, or the next
         * id after the model's vocabulary and the tokens added so far. */
        (void)id;
        int32_t model_id = tok_table_get(&t->model.vocab, content, length);
        int32_t model_size = (int32_t)(t->model.kind == TOK_MODEL_UNIGRAM ? t->model.n_pieces
                                                                          : t->model.vocab.count);
        token->id = model_id;
        for (size_t k = 0; k < t->n_added && token->id < 0; k++)
            if (t->added[k].length == length && memcmp(t->added[k].content, content, length) == 0)
                token->id = t->added[k].id;
        if (token->id < 0 && largest_added == INT32_MAX)
            return refuse(p, where, "more added tokens than ids up to 2147483646");
        if (token->id < 0)
            token->id = largest_added < 0 ? model_size
                        : largest_added >= model_size || model_size == 0 ? largest_added + 1
                                                                         : model_size;
        if (token->id > largest_added)
            largest_added = token->id;
        token->content = copy_bytes(content, length);
        token->length = length;
        if (token->content == NULL)
            return no_memory(p);
        /* The same text listed twice: the later entry wins. */
        for (size_t k = 0; k < t->n_added; k++)
            if (t->added[k].length == length && memcmp(t->added[k].content, content, length) == 0) {
                free(t->added[k].content);
                t->added[k] = *token;
                memset(token, 0, sizeof *token);
                token = NULL;
                break;
            }
        if (token != NULL)
            t->n_added++;
    }
    return TFENC_OK;
}

/* ---------------------------------------------------------------- entry */

int tok_from_json(tfenc_context *ctx, tfenc_tokenizer *t, const char *text, size_t length)
{
    parser p = {.ctx = ctx, .t = t, .source = t->source};
    json_error_t error;
    json_t *root = json_loadb(text, length, JSON_ALLOW_NUL, &error);
    if (root == NULL)
        return tfenc_error(ctx, TFENC_ERR_CONFIG, "%s: line %d: not JSON: %s", t->source,
                           error.line, error.text);
    int status = TFENC_OK;
    if (!json_is_object(root))
        status = refuse(&p, "top level", "must be an object");
    if (status == TFENC_OK)
        status = parse_model(&p, json_object_get(root, "model"));
    if (status == TFENC_OK)
        status = parse_normalizer(&p, json_object_get(root, "normalizer"), 0);
    if (status == TFENC_OK)
        status = parse_pre_tokenizer(&p, json_object_get(root, "pre_tokenizer"), 0);
    if (status == TFENC_OK)
        status = parse_post_processor(&p, json_object_get(root, "post_processor"), 0);
    if (status == TFENC_OK)
        status = parse_added(&p, json_object_get(root, "added_tokens"));
    json_t *padding = json_object_get(root, "padding");
    if (status == TFENC_OK && json_is_object(padding) &&
        json_is_integer(json_object_get(padding, "pad_id")))
        status = get_id(&p, json_object_get(padding, "pad_id"), "padding", &t->pad_id);
    json_decref(root);
    return status;
}
