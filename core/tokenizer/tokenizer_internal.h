/* What the tokenizer modules share (the .c files of core/tokenizer): the pipeline's
 * components as data, the scratch they write into, and the token table.
 * Not a public header: only the .c files of core/tokenizer include it. Its names start
 * with tok_ (TOK_ for constants), so that a grep for the tokenizer's model
 * or normalizer does not meet the encoder's.
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

#include "tfenc/plugin.h"
#include "tokenizer/tokenizer_types.h"

/* ------------------------------------- token table (tokenizer_model.c) */

/* Strings -> ids by open addressing; the strings live in one arena. A
 * string listed twice keeps the id it was last inserted with (HF builds its
 * vocabularies as hash maps, where the last insert wins). */
typedef struct tok_table {
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
} tok_table;

uint64_t tok_hash_start(void);
uint64_t tok_hash_byte(uint64_t hash, unsigned char byte);
uint64_t tok_hash(const char *bytes, size_t length);
void tok_table_init(tok_table *table);
void tok_table_free(tok_table *table);
/* 0 on success, -1 when out of memory. Replaces the value of a string
 * already present. */
int tok_table_put(tok_table *table, const char *bytes, size_t length, int32_t value);
/* The value, or -1. */
int32_t tok_table_get(const tok_table *table, const char *bytes, size_t length);
/* The same with the hash already computed (tok_hash of the bytes). */
int32_t tok_table_get_hashed(const tok_table *table, uint64_t hash, const char *bytes,
                             size_t length);

/* --------------------------------------------- scratch (tokenizer_text.c) */

/* A growing byte string; grows to the largest document and stays. */
typedef struct tok_text_buffer {
    char *data;
    size_t length, capacity;
} tok_text_buffer;

int tok_text_reserve(tok_text_buffer *text, size_t more); /* 0, or -1 out of memory */
int tok_text_append(tok_text_buffer *text, const char *bytes, size_t length);
int tok_text_append_char(tok_text_buffer *text, int32_t code_point);

/* A span of some buffer: a piece of text on its way to the model, or an
 * added token already matched (id >= 0). `first` marks the piece that starts
 * at offset 0 of the original text (Metaspace's prepend_scheme "first").
 * What sentence ends need (tfenc_tokenizer_mark_sentences), each 1, 0 or
 * -1 not known: whether whitespace follows the piece in the text (a
 * pre-tokenizer sees it after the piece, dropped or kept in the next
 * piece; a piece that ends where the piece it was split from ends has
 * that one's), and whether the piece's last character is a sentence mark
 * (seen before ByteLevel maps the bytes). */
typedef struct tok_text_piece {
    size_t start, length;
    int32_t id;
    signed char first; /* chars: a piece stays 24 bytes */
    signed char space_after, mark_end;
} tok_text_piece;

typedef struct tok_piece_list {
    tok_text_piece *items;
    size_t count, capacity;
    /* Sentence ends (tfenc_tokenizer_mark_sentences): whether the pieces
     * note them (else their space_after and mark_end stay -1, and
     * splitting costs nothing more), and whether the text was normalized
     * with spaces put around each Chinese character (BertNormalizer), so
     * that one space before one is not the text's own. */
    int mark_sentences, chinese_padded;
} tok_piece_list;

int tok_pieces_add(tok_piece_list *list, size_t start, size_t length, int32_t id, int first);

/* (start, end) byte spans of matches, in order. */
typedef struct tok_match_list {
    size_t *spans; /* [2 * count] */
    size_t count, capacity;
} tok_match_list;

int tok_matches_add(tok_match_list *matches, size_t start, size_t end);

/* --------------------- regular expressions, patterns (tokenizer_pattern.c) */

/* A PCRE2 pattern compiled from HF's (Oniguruma) syntax, and its match data. */
typedef struct tok_regex {
    pcre2_code *code;
    pcre2_match_data *match;
    pcre2_match_context *limits;
} tok_regex;

/* Compiles pattern (HF's syntax: Oniguruma's, with \s \w \d as in Unicode
 * mode); `what` names the component in the error. */
int tok_regex_compile(tfenc_context *ctx, const char *source, const char *what, const char *pattern,
                      tok_regex *regex);
void tok_regex_free(tok_regex *regex);
/* Finds the next match at or after `from` in text[0..length): 1 found (span
 * in *start, *end), 0 none, <0 error (written to ctx). */
int tok_regex_next(tfenc_context *ctx, tok_regex *regex, const char *text, size_t length,
                   size_t from, size_t *start, size_t *end);

/* A literal or a regex pattern (HF's {"String": ...} / {"Regex": ...}). */
typedef struct tok_text_pattern {
    int is_regex;
    char *literal;
    size_t literal_length;
    tok_regex regex;
} tok_text_pattern;

/* Every match of the pattern, HF's Pattern::find_matches: *matches gets
 * (start, end) pairs in order, non-overlapping; empty matches follow the
 * Oniguruma iterator's rule. */
int tok_pattern_find_all(tfenc_context *ctx, tok_text_pattern *pattern, const char *text,
                         size_t length, tok_match_list *matches);
void tok_text_pattern_free(tok_text_pattern *pattern);

/* --------------------------------------- normalizers (tokenizer_normalize.c) */

typedef enum {
    TOK_NORMALIZER_BERT,
    TOK_NORMALIZER_NFC,
    TOK_NORMALIZER_NFD,
    TOK_NORMALIZER_NFKC,
    TOK_NORMALIZER_NFKD,
    TOK_NORMALIZER_LOWERCASE,
    TOK_NORMALIZER_STRIP,
    TOK_NORMALIZER_STRIP_ACCENTS,
    TOK_NORMALIZER_REPLACE,
    TOK_NORMALIZER_PREPEND,
    TOK_NORMALIZER_PRECOMPILED
} tok_normalizer_kind;

typedef struct tok_normalizer {
    tok_normalizer_kind kind;
    /* BERT */
    int clean_text, handle_chinese_chars, strip_accents, lowercase;
    /* STRIP */
    int strip_left, strip_right;
    /* REPLACE: pattern -> content; PREPEND: content */
    tok_text_pattern pattern;
    char *content;
    size_t content_length;
    /* PRECOMPILED: SentencePiece's double-array trie and its strings */
    uint32_t *trie;
    size_t trie_units;
    char *replacements;
    size_t replacements_length;
    tok_match_list matches;       /* REPLACE's scratch */
    tok_text_buffer work, points; /* BERT's accent stripping: text, code points */
    /* Set by tok_normalizer_apply: it removed the first character of its input,
     * so (in HF's alignments) the text no longer starts at offset 0. */
    int deleted_first;
} tok_normalizer;

/* Normalizes in[0..length) into out (cleared first); spare is scratch. */
int tok_normalizer_apply(tfenc_context *ctx, tok_normalizer *n, const char *in, size_t length,
                         tok_text_buffer *out, tok_text_buffer *spare);
void tok_normalizer_free(tok_normalizer *n);

/* ---------------------------------------- pre-tokenizers (tokenizer_split.c) */

typedef enum {
    TOK_PRE_BERT,
    TOK_PRE_WHITESPACE, /* \w+|[^\w\s]+ */
    TOK_PRE_WHITESPACE_SPLIT,
    TOK_PRE_METASPACE,
    TOK_PRE_BYTE_LEVEL,
    TOK_PRE_SPLIT,
    TOK_PRE_DIGITS,
    TOK_PRE_PUNCTUATION,
    TOK_PRE_CHAR_DELIMITER
} tok_pre_tokenizer_kind;

typedef enum {
    TOK_SPLIT_REMOVED,
    TOK_SPLIT_ISOLATED,
    TOK_SPLIT_MERGED_WITH_PREVIOUS,
    TOK_SPLIT_MERGED_WITH_NEXT,
    TOK_SPLIT_CONTIGUOUS
} tok_split_behavior;

typedef enum { TOK_PREPEND_ALWAYS, TOK_PREPEND_FIRST, TOK_PREPEND_NEVER } tok_prepend_scheme;

typedef struct tok_pre_tokenizer {
    tok_pre_tokenizer_kind kind;
    tok_split_behavior behavior;
    int invert;
    tok_text_pattern pattern; /* SPLIT, and BYTE_LEVEL's regex */
    /* METASPACE */
    int32_t replacement;
    tok_prepend_scheme prepend;
    int split;
    /* BYTE_LEVEL */
    int add_prefix_space, use_regex;
    /* DIGITS */
    int individual_digits;
    /* CHAR_DELIMITER */
    int32_t delimiter;
    tok_text_buffer work; /* a piece after Metaspace's or ByteLevel's edits */
} tok_pre_tokenizer;

/* Splits each piece of `in` (text in in_text) into pieces of `out`, whose
 * text goes to out_text (both cleared first). */
int tok_pre_tokenizer_apply(tfenc_context *ctx, tok_pre_tokenizer *p,
                            const tok_text_buffer *in_text, const tok_piece_list *in,
                            tok_text_buffer *out_text, tok_piece_list *out,
                            tok_match_list *matches);
/* Splits text[0..length) at the spans of `matches` with HF's split
 * behaviours, appending the kept non-empty parts to out/out_text. */
int tok_split_emit(const char *text, size_t length, const tok_match_list *matches,
                   tok_split_behavior behavior, int invert, int first, tok_text_buffer *out_text,
                   tok_piece_list *out);
void tok_pre_tokenizer_free(tok_pre_tokenizer *p);

/* -------------------------------------------------- models (tokenizer_model.c) */

typedef enum { TOK_MODEL_WORDPIECE, TOK_MODEL_BPE, TOK_MODEL_UNIGRAM } tok_model_kind;

/* A BPE merge: the pair (left, right) of ids gives `merged`, and the lower
 * the rank the earlier it applies. */
typedef struct tok_bpe_merge {
    int32_t left, right, merged;
    int32_t rank;
} tok_bpe_merge;

typedef struct tok_model {
    tok_model_kind kind;
    tok_table vocab;                 /* every model: piece -> id */
    int32_t unk_id;                  /* -1 = none */
    /* WORDPIECE and BPE */
    char *continuing_prefix;
    size_t continuing_prefix_length;
    int max_input_chars_per_word;    /* WORDPIECE */
    /* BPE */
    char *end_of_word_suffix;
    size_t end_of_word_suffix_length;
    int fuse_unk, byte_fallback, ignore_merges;
    tok_bpe_merge *merges; /* open-addressed by (left, right) */
    size_t merge_mask;
    int32_t byte_ids[256];           /* <0xXX> ids for byte_fallback, -1 = absent */
    /* UNIGRAM */
    double *scores;                  /* [n_pieces] by id */
    size_t n_pieces;
    double min_score;
} tok_model;

/* A remembered piece and its ids: real text repeats its words, and a
 * piece's ids depend on the piece alone. Direct-mapped by hash. */
#define CACHE_SLOTS 16384
#define CACHE_WORD_BYTES 32
#define CACHE_IDS 12
typedef struct tok_cache_slot {
    uint64_t hash;
    uint32_t length;             /* 0 = empty */
    uint32_t n_ids;
    char word[CACHE_WORD_BYTES];
    int32_t ids[CACHE_IDS];
} tok_cache_slot;

/* Scratch of the models, grown as needed. */
typedef struct tok_model_scratch {
    tok_cache_slot *cache; /* [CACHE_SLOTS], made at first use */
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
    tok_text_buffer key; /* WordPiece/BPE lookups with prefix/suffix */
} tok_model_scratch;

/* Appends the ids of piece[0..length) to ids (growing). */
typedef struct tok_id_list {
    int32_t *ids;
    size_t count, capacity;
} tok_id_list;

int tok_ids_add(tok_id_list *list, int32_t id);
int tok_model_tokenize(tfenc_context *ctx, const tok_model *m, tok_model_scratch *scratch,
                       const char *piece, size_t length, tok_id_list *out);
void tok_model_free(tok_model *m);
void tok_model_scratch_free(tok_model_scratch *scratch);
/* Builds the merge table from (left, right) string pairs; `source` names
 * the file in errors. */
int tok_model_set_merges(tfenc_context *ctx, tok_model *m, const char *const *left,
                         const size_t *left_length, const char *const *right,
                         const size_t *right_length, size_t count, const char *source);
void tok_model_find_byte_ids(tok_model *m);

/* ----------------------------------------------------------- added tokens */

typedef struct tok_added_token {
    char *content;
    size_t length;
    int32_t id;
    int single_word, lstrip, rstrip, normalized, special;
    char *pattern;           /* normalized tokens: the content normalized */
    size_t pattern_length;
} tok_added_token;

/* ------------------------------------------------------------- the whole */

#define MAX_SPECIAL_IDS 16

/* How the post-processor lays out a pair of texts: the special tokens
 * before A, between A and B and after B (TOK_PAIR_BEFORE..AFTER), each
 * with its token type, and the types of A's and B's own tokens. BERT:
 * [CLS] A [SEP] | B [SEP], types 0 then 1; RoBERTa: <s> A </s> </s> B
 * </s>, all type 0. `processors` counts the post-processors that add
 * special tokens: a pair needs exactly one (none: A B with types 0 and 1,
 * as `tokenizers` does; two in a Sequence would need their nesting rules,
 * which no model folder uses). `defined` is 0 for a TemplateProcessing
 * without a `pair` template (HF refuses pairs then too). */
enum { TOK_PAIR_BEFORE, TOK_PAIR_BETWEEN, TOK_PAIR_AFTER, TOK_PAIR_PLACES };
typedef struct tok_pair_template {
    int32_t ids[TOK_PAIR_PLACES][MAX_SPECIAL_IDS];
    int32_t types[TOK_PAIR_PLACES][MAX_SPECIAL_IDS];
    int n[TOK_PAIR_PLACES];
    int32_t type_a, type_b;
    int processors, defined;
} tok_pair_template;

struct tfenc_tokenizer {
    char *source;                        /* path or description, for errors */
    tfenc_invalid_utf8_policy invalid_utf8;
    tok_normalizer *normalizers;
    size_t n_normalizers;
    tok_pre_tokenizer *pre_tokenizers;
    size_t n_pre_tokenizers;
    tok_model model;
    tok_added_token *added;
    size_t n_added;
    size_t raw_added, normalized_added;  /* how many of each kind */
    unsigned char added_first[2][256];   /* [normalized][byte]: a pattern starts with it */
    int32_t prefix_ids[MAX_SPECIAL_IDS], suffix_ids[MAX_SPECIAL_IDS];
    int n_prefix, n_suffix;
    tok_pair_template pair;
    int32_t pad_id;
    int32_t vocab_size;                  /* largest id + 1 */

    /* What tfenc_tokenizer_store writes: the tokenizer.json text, or for a
     * WordPiece vocab.txt the tokens and options. */
    char *json_text;
    size_t json_length;
    char **vocab_tokens;
    int n_vocab_tokens;
    tfenc_tokenizer_options options;
    int drop_unknown;                    /* text rules (tokenizer.h) */
    long max_chars;
    int no_pairs;                        /* special tokens turned off */

    /* Scratch of one encode() call. */
    tok_text_buffer text, segment, normalized, spare, pre_text[2];
    tok_piece_list segments, raw_pieces, pieces[2];
    tok_match_list matches;
    tok_model_scratch scratch;
    tok_id_list ids;
    tok_id_list first_ids; /* a pair's first text, while the second is tokenized */
    int mark_sentences;     /* tfenc_tokenizer_mark_sentences() */
    uint8_t *sentence_ends; /* [ids.count] when mark_sentences */
    size_t sentence_ends_capacity;
    uint32_t *token_entry;  /* mark_sentences: each id's entry of model.vocab, or UINT32_MAX */
    int chinese_padded;     /* a BertNormalizer puts spaces around Chinese characters */
    int byte_level;         /* a ByteLevel pre-tokenizer maps the pieces' bytes */
    tok_text_buffer raw_piece; /* sentence ends: a ByteLevel piece's bytes */
};

/* Character classes as Rust and the `tokenizers` crate see them, and UTF-8
 * (tokenizer_text.c). */
int tok_is_whitespace(int32_t c);       /* char::is_whitespace */
int tok_is_bert_punctuation(int32_t c); /* ASCII punctuation or P* */
int tok_is_word_char(int32_t c);        /* regex \w: Alphabetic, M, Nd, Pc, Join_Control */
/* Late chunking's sentence marks: . ! ? U+3002 and every character whose
 * NFKC form ends with one (the full-width ！ ？ ．, "…", "‼", ...). */
int tok_is_sentence_mark(int32_t c);
/* ByteLevel's map back: the byte character c stands for, or -1
 * (tokenizer_split.c). */
int tok_byte_level_byte(int32_t c);
/* The CJK ideographs BertNormalizer puts spaces around (tokenizer_normalize.c). */
int tok_is_chinese_char(int32_t c);
/* Whitespace after a piece, for sentence ends: char::is_whitespace, or
 * U+2581, the space Metaspace (SentencePiece) writes. */
int tok_is_sentence_space(int32_t c);

/* Reads one code point of valid UTF-8 (the scratch text is always valid). */
size_t tok_utf8_decode(const char *text, int32_t *code_point);
size_t tok_utf8_length(unsigned char lead);

/* Reads a whole file (NUL-terminated); `what` names it in messages
 * (tokenizer.c). */
int tok_read_file(tfenc_context *ctx, const char *path, const char *what, char **data,
                  size_t *size);
/* tokenizer.json: fills a zeroed tokenizer from the parsed text
 * (tokenizer_json.c). */
int tok_from_json(tfenc_context *ctx, tfenc_tokenizer *t, const char *text, size_t length);
/* The shared tail of every constructor: vocab size, scratch. */
int tok_finish(tfenc_context *ctx, tfenc_tokenizer *t);

#endif
