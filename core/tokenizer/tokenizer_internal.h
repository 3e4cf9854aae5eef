/* What the tokenizer modules share (core/tokenizer*.c): the pipeline's
 * components as data, the scratch they write into, and the token table.
 * Not a public header: only core/tokenizer*.c include it.
 *
 * A tokenizer is Hugging Face's pipeline, reduced to what ids depend on (no
 * offsets, no alignments): added tokens split the raw text, each other
 * segment is normalized, split again on normalized added tokens,
 * pre-tokenized into pieces, and each piece goes through the model; the
 * post-processor then wraps the ids in its special tokens. */
#ifndef TFENC_TOKENIZER_INTERNAL_H
#define TFENC_TOKENIZER_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"

/* ---------------------------------------------------------- token table */

/* Strings -> ids by open addressing; the strings live in one arena. A
 * string listed twice keeps the id it was last inserted with (HF builds its
 * vocabularies as hash maps, where the last insert wins). */
typedef struct token_table {
    char *bytes;          /* every string, each followed by a NUL */
    size_t bytes_used, bytes_capacity;
    size_t *offset;       /* [count] into bytes */
    uint32_t *length;     /* [count] */
    uint64_t *hash;       /* [count] */
    int32_t *value;       /* [count] the id stored for the string */
    size_t count, capacity;
    int32_t *slots;       /* [slot_mask + 1] entry indexes, -1 = empty */
    size_t slot_mask;
    size_t longest;       /* bytes of the longest string */
} token_table;

uint64_t token_hash_start(void);
uint64_t token_hash_byte(uint64_t hash, unsigned char byte);
uint64_t token_hash(const char *bytes, size_t length);
void token_table_init(token_table *table);
void token_table_free(token_table *table);
/* 0 on success, -1 when out of memory. Replaces the value of a string
 * already present. */
int token_table_put(token_table *table, const char *bytes, size_t length, int32_t value);
/* The value, or -1. */
int32_t token_table_get(const token_table *table, const char *bytes, size_t length);
/* The same with the hash already computed (token_hash of the bytes). */
int32_t token_table_get_hashed(const token_table *table, uint64_t hash, const char *bytes,
                               size_t length);

/* ------------------------------------------------------------- scratch */

/* A growing byte string; grows to the largest document and stays. */
typedef struct text_buffer {
    char *data;
    size_t length, capacity;
} text_buffer;

int text_reserve(text_buffer *text, size_t more);   /* 0, or -1 out of memory */
int text_append(text_buffer *text, const char *bytes, size_t length);
int text_append_char(text_buffer *text, int32_t code_point);

/* A span of some buffer: a piece of text on its way to the model, or an
 * added token already matched (id >= 0). `first` marks the piece that starts
 * at offset 0 of the original text (Metaspace's prepend_scheme "first"). */
typedef struct text_piece {
    size_t start, length;
    int32_t id;
    int first;
} text_piece;

typedef struct piece_list {
    text_piece *items;
    size_t count, capacity;
} piece_list;

int pieces_add(piece_list *list, size_t start, size_t length, int32_t id, int first);

/* ------------------------------------------------------- regular expressions */

/* A PCRE2 pattern compiled from HF's (Oniguruma) syntax, and its match data. */
typedef struct token_regex {
    pcre2_code *code;
    pcre2_match_data *match;
    pcre2_match_context *limits;
} token_regex;

/* Compiles pattern (HF's syntax: Oniguruma's, with \s \w \d as in Unicode
 * mode); `what` names the component in the error. */
int token_regex_compile(tfenc_context *ctx, const char *source, const char *what,
                        const char *pattern, token_regex *regex);
void token_regex_free(token_regex *regex);
/* Finds the next match at or after `from` in text[0..length): 1 found (span
 * in *start, *end), 0 none, <0 error (written to ctx). */
int token_regex_next(tfenc_context *ctx, token_regex *regex, const char *text, size_t length,
                     size_t from, size_t *start, size_t *end);

/* A literal or a regex pattern (HF's {"String": ...} / {"Regex": ...}). */
typedef struct text_pattern {
    int is_regex;
    char *literal;
    size_t literal_length;
    token_regex regex;
} text_pattern;

/* Every match of the pattern, HF's Pattern::find_matches: *matches gets
 * (start, end) pairs in order, non-overlapping; empty matches follow the
 * Oniguruma iterator's rule. */
typedef struct match_list {
    size_t *spans;        /* [2 * count] */
    size_t count, capacity;
} match_list;

int pattern_find_all(tfenc_context *ctx, text_pattern *pattern, const char *text, size_t length,
                     match_list *matches);
void text_pattern_free(text_pattern *pattern);

/* ---------------------------------------------------------- normalizers */

typedef enum {
    NORMALIZER_BERT,
    NORMALIZER_NFC,
    NORMALIZER_NFD,
    NORMALIZER_NFKC,
    NORMALIZER_NFKD,
    NORMALIZER_LOWERCASE,
    NORMALIZER_STRIP,
    NORMALIZER_STRIP_ACCENTS,
    NORMALIZER_REPLACE,
    NORMALIZER_PREPEND,
    NORMALIZER_PRECOMPILED
} normalizer_kind;

typedef struct normalizer {
    normalizer_kind kind;
    /* BERT */
    int clean_text, handle_chinese_chars, strip_accents, lowercase;
    /* STRIP */
    int strip_left, strip_right;
    /* REPLACE: pattern -> content; PREPEND: content */
    text_pattern pattern;
    char *content;
    size_t content_length;
    /* PRECOMPILED: SentencePiece's double-array trie and its strings */
    uint32_t *trie;
    size_t trie_units;
    char *replacements;
    size_t replacements_length;
    match_list matches;         /* REPLACE's scratch */
    text_buffer work, points;   /* BERT's accent stripping: text, code points */
    /* Set by normalizer_apply: it removed the first character of its input,
     * so (in HF's alignments) the text no longer starts at offset 0. */
    int deleted_first;
} normalizer;

/* Normalizes in[0..length) into out (cleared first); spare is scratch. */
int normalizer_apply(tfenc_context *ctx, normalizer *n, const char *in, size_t length,
                     text_buffer *out, text_buffer *spare);
void normalizer_free(normalizer *n);

/* ------------------------------------------------------- pre-tokenizers */

typedef enum {
    PRE_BERT,
    PRE_WHITESPACE,        /* \w+|[^\w\s]+ */
    PRE_WHITESPACE_SPLIT,
    PRE_METASPACE,
    PRE_BYTE_LEVEL,
    PRE_SPLIT,
    PRE_DIGITS,
    PRE_PUNCTUATION,
    PRE_CHAR_DELIMITER
} pre_tokenizer_kind;

typedef enum {
    SPLIT_REMOVED,
    SPLIT_ISOLATED,
    SPLIT_MERGED_WITH_PREVIOUS,
    SPLIT_MERGED_WITH_NEXT,
    SPLIT_CONTIGUOUS
} split_behavior;

typedef enum { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER } prepend_scheme;

typedef struct pre_tokenizer {
    pre_tokenizer_kind kind;
    split_behavior behavior;
    int invert;
    text_pattern pattern;       /* SPLIT, and BYTE_LEVEL's regex */
    /* METASPACE */
    int32_t replacement;
    prepend_scheme prepend;
    int split;
    /* BYTE_LEVEL */
    int add_prefix_space, use_regex;
    /* DIGITS */
    int individual_digits;
    /* CHAR_DELIMITER */
    int32_t delimiter;
    text_buffer work;           /* a piece after Metaspace's or ByteLevel's edits */
} pre_tokenizer;

/* Splits each piece of `in` (text in in_text) into pieces of `out`, whose
 * text goes to out_text (both cleared first). */
int pre_tokenizer_apply(tfenc_context *ctx, pre_tokenizer *p, const text_buffer *in_text,
                        const piece_list *in, text_buffer *out_text, piece_list *out,
                        match_list *matches);
/* Splits text[0..length) at the spans of `matches` with HF's split
 * behaviours, appending the kept non-empty parts to out/out_text. */
int split_emit(const char *text, size_t length, const match_list *matches, split_behavior behavior,
               int invert, int first, text_buffer *out_text, piece_list *out);
void pre_tokenizer_free(pre_tokenizer *p);

/* ---------------------------------------------------------------- models */

typedef enum { MODEL_WORDPIECE, MODEL_BPE, MODEL_UNIGRAM } model_kind;

/* A BPE merge: the pair (left, right) of ids gives `merged`, and the lower
 * the rank the earlier it applies. */
typedef struct bpe_merge {
    int32_t left, right, merged;
    int32_t rank;
} bpe_merge;

typedef struct model {
    model_kind kind;
    token_table vocab;               /* every model: piece -> id */
    int32_t unk_id;                  /* -1 = none */
    /* WORDPIECE and BPE */
    char *continuing_prefix;
    size_t continuing_prefix_length;
    int max_input_chars_per_word;    /* WORDPIECE */
    /* BPE */
    char *end_of_word_suffix;
    size_t end_of_word_suffix_length;
    int fuse_unk, byte_fallback, ignore_merges;
    bpe_merge *merges;               /* open-addressed by (left, right) */
    size_t merge_mask;
    int32_t byte_ids[256];           /* <0xXX> ids for byte_fallback, -1 = absent */
    /* UNIGRAM */
    double *scores;                  /* [n_pieces] by id */
    size_t n_pieces;
    double min_score;
} model;

/* A remembered piece and its ids: real text repeats its words, and a
 * piece's ids depend on the piece alone. Direct-mapped by hash. */
#define CACHE_SLOTS 16384
#define CACHE_WORD_BYTES 32
#define CACHE_IDS 12
typedef struct cache_slot {
    uint64_t hash;
    uint32_t length;             /* 0 = empty */
    uint32_t n_ids;
    char word[CACHE_WORD_BYTES];
    int32_t ids[CACHE_IDS];
} cache_slot;

/* Scratch of the models, grown as needed. */
typedef struct model_scratch {
    cache_slot *cache;               /* [CACHE_SLOTS], made at first use */
    /* BPE symbols */
    int32_t *symbol_id;
    int32_t *symbol_prev, *symbol_next;
    uint32_t *symbol_length;
    size_t symbol_capacity;
    uint64_t *heap;                  /* (rank << 32 | position) */
    size_t heap_count, heap_capacity;
    /* UNIGRAM best paths */
    double *best_score;
    int32_t *best_id;
    int64_t *best_start;
    size_t best_capacity;
    int32_t *reversed;
    size_t reversed_capacity;
    text_buffer key;                 /* WordPiece/BPE lookups with prefix/suffix */
} model_scratch;

/* Appends the ids of piece[0..length) to ids (growing). */
typedef struct id_list {
    int32_t *ids;
    size_t count, capacity;
} id_list;

int ids_add(id_list *list, int32_t id);
int model_tokenize(tfenc_context *ctx, const model *m, model_scratch *scratch, const char *piece,
                   size_t length, id_list *out);
void model_free(model *m);
void model_scratch_free(model_scratch *scratch);
/* Builds the merge table from (left, right) string pairs; `source` names
 * the file in errors. */
int model_set_merges(tfenc_context *ctx, model *m, const char *const *left,
                     const size_t *left_length, const char *const *right,
                     const size_t *right_length, size_t count, const char *source);
void model_find_byte_ids(model *m);

/* ----------------------------------------------------------- added tokens */

typedef struct added_token {
    char *content;
    size_t length;
    int32_t id;
    int single_word, lstrip, rstrip, normalized, special;
    char *pattern;           /* normalized tokens: the content normalized */
    size_t pattern_length;
} added_token;

/* ------------------------------------------------------------- the whole */

#define MAX_SPECIAL_IDS 16

struct tfenc_tokenizer {
    char *source;                        /* path or description, for errors */
    tfenc_invalid_utf8_policy invalid_utf8;
    normalizer *normalizers;
    size_t n_normalizers;
    pre_tokenizer *pre_tokenizers;
    size_t n_pre_tokenizers;
    model model;
    added_token *added;
    size_t n_added;
    size_t raw_added, normalized_added;  /* how many of each kind */
    unsigned char added_first[2][256];   /* [normalized][byte]: a pattern starts with it */
    int32_t prefix_ids[MAX_SPECIAL_IDS], suffix_ids[MAX_SPECIAL_IDS];
    int n_prefix, n_suffix;
    int32_t pad_id;
    int32_t vocab_size;                  /* largest id + 1 */

    /* What tfenc_tokenizer_store writes: the tokenizer.json text, or for a
     * WordPiece vocab.txt the tokens and options. */
    char *json_text;
    size_t json_length;
    char **vocab_tokens;
    int n_vocab_tokens;
    tfenc_tokenizer_options options;

    /* Scratch of one encode() call. */
    text_buffer text, segment, normalized, spare, pre_text[2];
    piece_list segments, raw_pieces, pieces[2];
    match_list matches;
    model_scratch scratch;
    id_list ids;
};

/* Character classes as Rust and the `tokenizers` crate see them. */
int tokenizer_is_whitespace(int32_t c);      /* char::is_whitespace */
int tokenizer_is_bert_punctuation(int32_t c);/* ASCII punctuation or P* */
int tokenizer_is_word_char(int32_t c);       /* regex \w: Alphabetic, M, Nd, Pc, Join_Control */

/* Reads one code point of valid UTF-8 (the scratch text is always valid). */
size_t utf8_decode(const char *text, int32_t *code_point);
size_t utf8_length(unsigned char lead);

/* Reads a whole file (NUL-terminated); `what` names it in messages. */
int tokenizer_read_file(tfenc_context *ctx, const char *path, const char *what, char **data,
                        size_t *size);
/* tokenizer.json: fills a zeroed tokenizer from the parsed text. */
int tokenizer_from_json(tfenc_context *ctx, tfenc_tokenizer *t, const char *text, size_t length);
/* The shared tail of every constructor: vocab size, scratch. */
int tokenizer_finish(tfenc_context *ctx, tfenc_tokenizer *t);

#endif
