/* The BERT WordPiece tokenizer: text in, [CLS] piece ids [SEP] out, the same
 * ids as Hugging Face's BertWordPieceTokenizer (the `tokenizers` package, which
 * BertTokenizerFast runs) for the same vocabulary and options.
 *
 * Pipeline, as in `tokenizers`:
 *   1. Special tokens ([PAD] [UNK] [CLS] [SEP] [MASK], those in the vocab)
 *      written literally in the raw text are matched first, case-sensitively,
 *      and become their own id, as HF does for added special tokens.
 *   2. BertNormalizer on the text between them: drop U+0000, U+FFFD and
 *      control characters (categories Cc Cf Co Cs, but not \t \n \r, which are
 *      whitespace; unassigned code points are kept, as HF keeps them), map
 *      whitespace to a space, put spaces around CJK ideographs, strip accents
 *      (NFD then drop category Mn), lower-case.
 *   3. BertPreTokenizer: split on whitespace, and isolate each punctuation
 *      character (ASCII 33-47, 58-64, 91-96, 123-126 and categories P*).
 *   4. WordPiece: greedy longest match first, "##" on continuation pieces; a
 *      word longer than 100 code points, or one that cannot be covered by
 *      pieces, becomes [UNK].
 *
 * Unicode data comes from utf8proc (Unicode 15 on Debian 12). `tokenizers`
 * 0.23 classifies categories with older tables (from about Unicode 8), so
 * the two differ on code points assigned or recategorized since. Measured on
 * every code point c as the text "a" c "b": ids differ for 149 code points in
 * the cased and lower-case-only configurations (129 punctuation marks such
 * as U+061D and U+2E43..U+2E5D that HF does not split off, 20 format
 * characters, U+0890 U+0891 U+08E2 U+110CD U+13430..U+1343F, that HF keeps)
 * and for 568 with accent stripping (also 419 newer nonspacing marks that HF
 * keeps). Everything else, case mapping and NFD included, is identical.
 * tfenc follows the current standard there.
 *
 * Invalid UTF-8 (tfenc_invalid_utf8_policy):
 *   REPLACE: each maximal invalid subsequence (Unicode's "maximal subpart",
 *     the rule of Python's bytes.decode('utf-8', errors='replace')) stands
 *     for one U+FFFD, which the cleaner then drops. So the ids are those HF
 *     gives for the Python-decoded string; an invalid byte does not split a
 *     word ("ab\xffcd" is the word "abcd").
 *   ERROR: tfenc_tokenizer_encode() fails with TFENC_ERR_INPUT and a message
 *     giving the byte offset of the first invalid byte.
 *   Overlong forms, encoded surrogates (U+D800..U+DFFF) and code points above
 *   U+10FFFF are invalid.
 *
 * Cost: linear in the text length. The whole text is tokenized even when the
 * output is truncated, so the truncated count is exact. Memory beyond the
 * vocabulary is a few kilobytes of scratch per tokenizer, whatever the text
 * length. A tokenizer MUST NOT be used by two threads at once (the scratch). */
#ifndef TFENC_TOKENIZER_H
#define TFENC_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "tfenc/plugin.h"

typedef struct tfenc_tokenizer tfenc_tokenizer;

typedef enum {
    TFENC_INVALID_UTF8_REPLACE = 0,
    TFENC_INVALID_UTF8_ERROR = 1
} tfenc_invalid_utf8_policy;

typedef struct tfenc_tokenizer_options {
    int lowercase;          /* 1 = lower-case */
    int strip_accents;      /* 1, 0, or -1 = follow lowercase */
    int chinese_chars;      /* 1 = split CJK ideographs */
    tfenc_invalid_utf8_policy invalid_utf8;
} tfenc_tokenizer_options;

/* bert-base-uncased's settings: lowercase 1, strip_accents -1 (so on),
 * chinese_chars 1, invalid_utf8 REPLACE. */
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

/* Encodes text[0..length) into ids (capacity max_length >= 2): [CLS] pieces [SEP].
   *n_ids gets the count written, *n_truncated the number of word pieces cut.
   Truncation keeps the first max_length - 2 pieces (HF's truncation=True);
   the text need not be NUL-terminated and may contain NUL bytes (dropped as
   U+0000 is). n_truncated may be NULL. */
int tfenc_tokenizer_encode(tfenc_context *ctx, tfenc_tokenizer *tokenizer, const char *text,
                           size_t length, int32_t *ids, int max_length, int *n_ids,
                           int *n_truncated);

/* Number of vocabulary lines, i.e. one more than the largest id (the row
 * count the embedding table needs), even if some token appears twice. */
int tfenc_tokenizer_vocab_size(const tfenc_tokenizer *tokenizer);

int32_t tfenc_tokenizer_token_id(const tfenc_tokenizer *tokenizer, const char *token); /* -1 if absent */

/* Accepts NULL. */
void tfenc_tokenizer_destroy(tfenc_tokenizer *tokenizer);

#endif
