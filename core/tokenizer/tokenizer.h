/* Tokenizers: text in, token ids out, the same ids as Hugging Face's
 * `tokenizers` (0.19) for the same tokenizer. Two sources:
 *
 *   - a tokenizer.json (what every current model folder ships): normalizers
 *     BertNormalizer, NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents,
 *     Replace, Prepend, Precompiled (SentencePiece's charsmap), Sequence;
 *     pre-tokenizers BertPreTokenizer, Whitespace, WhitespaceSplit,
 *     Metaspace, ByteLevel, Split, Digits, Punctuation, CharDelimiterSplit,
 *     Sequence; models WordPiece, BPE (byte-level or not, byte_fallback,
 *     prefixes and suffixes), Unigram; post-processors BertProcessing,
 *     RobertaProcessing, TemplateProcessing, ByteLevel, Sequence; added and
 *     special tokens with single_word / lstrip / rstrip / normalized. Any
 *     other component is refused in one line naming the file and the type.
 *   - a BERT vocab.txt (BertWordPieceTokenizer's pipeline: BertNormalizer,
 *     BertPreTokenizer, WordPiece with "##", [CLS] A [SEP]), with options.
 *
 * Pipeline, as in `tokenizers`: added tokens are matched on the raw text
 * (leftmost longest, case-sensitive); the text between them is normalized,
 * normalized added tokens are matched on that; pre-tokenizers split the
 * rest into pieces, the model turns each piece into ids, and the
 * post-processor adds its special tokens. Truncation keeps the first
 * max_length ids counting those special tokens (HF's truncation=True).
 *
 * Differences from `tokenizers` that remain, all from Unicode data
 * (tfenc uses utf8proc's Unicode 15; tokenizers 0.19's crates have older
 * tables, about Unicode 8-13): category tests (controls, punctuation,
 * marks), normal forms and grapheme clusters differ on code points assigned
 * or recategorized since. docs/tokenizers.md lists what the tests measured.
 * For BERT, on every code point c as the text "a" c "b": 149 code points
 * differ in the cased and lower-case-only configurations (129 punctuation
 * marks such as U+061D and U+2E43..U+2E5D that HF does not split off, 20
 * format characters, U+0890 U+0891 U+08E2 U+110CD U+13430..U+1343F, that HF
 * keeps) and 568 with accent stripping (also 419 newer nonspacing marks).
 *
 * Invalid UTF-8 (tfenc_invalid_utf8_policy):
 *   REPLACE: each maximal invalid subsequence (Unicode's "maximal subpart",
 *     the rule of Python's bytes.decode('utf-8', errors='replace')) becomes
 *     one U+FFFD, so the ids are those HF gives for the Python-decoded
 *     string (BERT's cleaner then drops U+FFFD; byte-level BPE encodes its
 *     three bytes; Unigram maps it to the unknown piece unless listed).
 *   ERROR: tfenc_tokenizer_encode() fails with TFENC_ERR_INPUT and a message
 *     giving the byte offset of the first invalid byte.
 *   Overlong forms, encoded surrogates (U+D800..U+DFFF) and code points above
 *   U+10FFFF are invalid.
 *
 * Cost: linear in the text (Unigram: text x longest piece; BPE: pieces x
 * log pieces). The whole text is tokenized even when the output is
 * truncated, so the truncated count is exact. Scratch buffers grow to the
 * largest document seen and are reused: no allocation per token or per
 * document once warm. Pieces of up to 32 bytes and their ids are remembered
 * in a 1.5 MB direct-mapped cache (real text repeats its words). A
 * tokenizer MUST NOT be used by two threads at once. */
#ifndef TFENC_TOKENIZER_H
#define TFENC_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "tfenc/plugin.h"
#include "tokenizer/tokenizer_types.h"

/* bert-base-uncased's settings: lowercase 1, strip_accents -1 (so on),
 * chinese_chars 1, invalid_utf8 REPLACE, job_set 0. */
void tfenc_tokenizer_options_default(tfenc_tokenizer_options *options);

/* Reads vocab.txt: one token per line, id = line index from 0. As HF does,
 * trailing whitespace (a CR included) is trimmed, a final line may lack its
 * newline, and a token listed twice keeps the id of its last line. Fails with
 * TFENC_ERR_IO (unreadable), TFENC_ERR_INPUT (invalid UTF-8 in a line, an
 * empty file) or TFENC_ERR_CONFIG ([CLS], [SEP] or [UNK] missing), naming the
 * file. options NULL means the defaults. */
int tfenc_tokenizer_create_from_file(tfenc_context *ctx, const char *vocab_path,
                                     const tfenc_tokenizer_options *options,
                                     tfenc_tokenizer **tokenizer);

/* The same from tokens[0..n_tokens) (id = index), copied; no trimming. Used
 * for the vocabulary stored in the weights file (/tokenizer/vocab). */
int tfenc_tokenizer_create_from_tokens(tfenc_context *ctx, const char *const *tokens,
                                       int n_tokens, const tfenc_tokenizer_options *options,
                                       tfenc_tokenizer **tokenizer);

/* Reads a tokenizer.json. Fails with TFENC_ERR_IO (unreadable), or
 * TFENC_ERR_CONFIG in one line naming the path and the key or component
 * type (malformed JSON, an unsupported component, a merge naming an absent
 * token, a pattern that does not compile). Of the options only
 * invalid_utf8 applies; job_set must be 0. */
int tfenc_tokenizer_create_from_json_file(tfenc_context *ctx, const char *path,
                                          const tfenc_tokenizer_options *options,
                                          tfenc_tokenizer **tokenizer);

/* The same from the text of a tokenizer.json (length bytes, copied);
 * `source` names it in messages. */
int tfenc_tokenizer_create_from_json_text(tfenc_context *ctx, const char *text, size_t length,
                                          const char *source, const tfenc_tokenizer_options *options,
                                          tfenc_tokenizer **tokenizer);

/* Encodes text[0..length) into ids (capacity max_length, which must hold
 * the post-processor's special tokens and one more): specials, pieces,
 * specials. *n_ids gets the count written, *n_truncated the number of
 * pieces cut (may be NULL). The text need not be NUL-terminated and may
 * contain NUL bytes. */
int tfenc_tokenizer_encode(tfenc_context *ctx, tfenc_tokenizer *tokenizer, const char *text,
                           size_t length, int32_t *ids, int max_length, int *n_ids,
                           int *n_truncated);

/* Encodes a pair of texts (a query and a passage for a cross-encoder) as
 * `tokenizers`' encode(first, second) does: each text's pieces, cut
 * together to max_length by HF's longest_first truncation, laid out by the
 * post-processor's pair rule (BERT: [CLS] first [SEP] second [SEP], token
 * types 0 then 1; RoBERTa: <s> first </s></s> second </s>, all 0; a
 * TemplateProcessing: its `pair` template, types included; none: first
 * second, types 0 then 1). types gets one type per id. *n_truncated is the
 * number of pieces both texts lost. Fails with TFENC_ERR_CONFIG when the
 * post-processor has no pair rule. */
int tfenc_tokenizer_encode_pair(tfenc_context *ctx, tfenc_tokenizer *tokenizer, const char *first,
                                size_t first_length, const char *second, size_t second_length,
                                int32_t *ids, int32_t *types, int max_length, int *n_ids,
                                int *n_truncated);

/* TFENC_OK when the tokenizer can encode pairs; else TFENC_ERR_CONFIG and
 * a message naming the tokenizer's file and why not. */
int tfenc_tokenizer_check_pairs(tfenc_context *ctx, const tfenc_tokenizer *tokenizer);

/* How many special tokens the post-processor adds to a pair. */
int tfenc_tokenizer_pair_special_count(const tfenc_tokenizer *tokenizer);

/* After tfenc_tokenizer_encode(): every piece of that text, before
 * truncation and without the special tokens (*count of them). Valid until
 * the next encode. How a long document is cut into chunks: each chunk is
 * the specials around a run of these pieces. */
const int32_t *tfenc_tokenizer_last_pieces(const tfenc_tokenizer *tokenizer, int *count);

/* Sentence ends, for late chunking's spans by sentence (run/late_chunks.h):
 * after tfenc_tokenizer_mark_sentences(ctx, t, 1) every
 * tfenc_tokenizer_encode() also notes, for each of its pieces
 * (tfenc_tokenizer_last_pieces()), whether a sentence of the text ends
 * with it: the rule, on the text, is a sentence mark (. ! ? U+3002, or a
 * character whose NFKC form ends with one: ！ ？ ． … ‼ ...) that whitespace
 * follows; the piece is the last one whose text ends at that mark. The
 * tokenizer finds it in its own pieces: the last id of a pre-tokenizer's
 * piece whose last character is a mark and which whitespace follows
 * (dropped by the pre-tokenizer, as BERT's does, or at the start of the
 * next piece, as ByteLevel's Ġ and Metaspace's ▁ are; a space that
 * BertNormalizer puts before a Chinese character is not the text's), or
 * inside a piece that holds whitespace, an id whose token ends at a mark
 * that whitespace follows (Llama-2 and Gemma-style SentencePiece BPE).
 * So "e.g." ends nothing after "e.", nor "3.14" after "3."; "e.g. x" and
 * "Dr. X" end a sentence (no list of abbreviations), "e.g., x" does not.
 * Off by default (the encode then notes nothing). The last piece is never
 * marked: the end of the text ends its last sentence, which is the
 * caller's to count. Fails only out of memory. */
int tfenc_tokenizer_mark_sentences(tfenc_context *ctx, tfenc_tokenizer *tokenizer, int on);

/* The notes of the last encode: one per piece (*count), or *count 0 when
 * marking is off. Valid until the next encode. */
const uint8_t *tfenc_tokenizer_last_sentence_ends(const tfenc_tokenizer *tokenizer, int *count);

/* The special tokens the post-processor puts before and after the pieces. */
void tfenc_tokenizer_specials(const tfenc_tokenizer *tokenizer, const int32_t **prefix,
                              int *n_prefix, const int32_t **suffix, int *n_suffix);

/* One more than the largest id (the row count the embedding table needs):
 * for a vocab.txt the number of lines, even if some token appears twice. */
int tfenc_tokenizer_vocab_size(const tfenc_tokenizer *tokenizer);

/* Every id's token, for mapping ids back to text (a sparse output's
 * columns): *tokens is a new array of vocab_size pointers (free it; the
 * strings belong to the tokenizer and live as long as it), "" for an id
 * that no token has. */
int tfenc_tokenizer_tokens(tfenc_context *ctx, const tfenc_tokenizer *tokenizer,
                           const char ***tokens);

/* The id of a token of the vocabulary or an added token; -1 if absent. */
int32_t tfenc_tokenizer_token_id(const tfenc_tokenizer *tokenizer, const char *token);

typedef enum {
    TFENC_SPECIAL_CLS = 0,  /* the first token put before the text: [CLS], <s> (BOS) */
    TFENC_SPECIAL_SEP = 1,  /* the last token put after it: [SEP], </s>, an EOS */
    TFENC_SPECIAL_PAD = 2,  /* tokenizer.json's padding pad_id, else [PAD] or <pad> */
    TFENC_SPECIAL_UNK = 3,  /* the model's unknown token */
    TFENC_SPECIAL_MASK = 4  /* the masked-language-model token: [MASK] (BERT) or <mask> (RoBERTa, XLM-R) */
} tfenc_special_token;
#define TFENC_SPECIAL_BOS TFENC_SPECIAL_CLS
#define TFENC_SPECIAL_EOS TFENC_SPECIAL_SEP

/* The id, or -1 when the tokenizer has none. */
int32_t tfenc_tokenizer_special_id(const tfenc_tokenizer *tokenizer, tfenc_special_token which);

/* How many special tokens the post-processor adds to one text. */
int tfenc_tokenizer_special_count(const tfenc_tokenizer *tokenizer);

/* Writes the tokenizer into the `/tokenizer` group of an open HDF5 file
 * (the weights file tfenc-import makes; `path` names it in messages): the
 * tokenizer.json text as the string dataset /tokenizer/json, or for a
 * vocab.txt the layout tfenc 0.1 wrote and reads: /tokenizer/vocab (one
 * string per id) with the attributes do_lower_case, strip_accents,
 * tokenize_chinese_chars, cls_token, sep_token, unk_token, pad_token.
 * `file` is an hid_t (int64_t), so that this header needs no hdf5.h. */
int tfenc_tokenizer_store(tfenc_context *ctx, const tfenc_tokenizer *tokenizer, int64_t file,
                          const char *path);

/* Reads the tokenizer stored in the weights file at `path`: /tokenizer/json,
 * or the vocab.txt layout, whose stored options apply except those the job
 * set (options->job_set). Returns TFENC_ERR_NOT_FOUND, with a message, when
 * the file has no tokenizer. */
int tfenc_tokenizer_load(tfenc_context *ctx, const char *path,
                         const tfenc_tokenizer_options *options, tfenc_tokenizer **tokenizer);

/* How a static-embedding model (model2vec) tokenizes, which differs from
 * what an encoder needs: its text alone, without the post-processor's
 * special tokens (HF's add_special_tokens=False), the unknown token left
 * out of the ids truncation keeps (model2vec 0.10 truncates in the
 * tokenizer, then drops it: a word-level vocabulary maps every unseen word
 * to it), and only the first max_chars code points of a text read
 * (model2vec cuts the string at max_length times its vocabulary's median
 * token length before tokenizing). */
typedef struct tfenc_tokenizer_text_rules {
    int special_tokens; /* 1: the post-processor's tokens around the text (the default) */
    int drop_unknown;   /* 1: no id of the unknown token in the output */
    long max_chars;     /* > 0: tokenize the text's first max_chars code points only */
} tfenc_tokenizer_text_rules;

/* Applies the rules to every later encode (the defaults are 1, 0, 0).
 * Without special tokens a pair cannot be laid out: encode_pair and
 * check_pairs then refuse it. A code point is counted as UTF-8 lead bytes
 * count them: a text with invalid UTF-8 may be cut a little differently
 * from Python's decoded string. */
void tfenc_tokenizer_set_text_rules(tfenc_tokenizer *tokenizer,
                                    const tfenc_tokenizer_text_rules *rules);

/* Accepts NULL. */
void tfenc_tokenizer_destroy(tfenc_tokenizer *tokenizer);

#endif
