#!/usr/bin/env python3
"""Writes the sentence ends of a raw-bytes corpus by Hugging Face's
`tokenizers` offsets for a tokenizer.json, one line "ends: i j ..." per
corpus line (tokenize_corpus --sentences's format): the pieces (0-based,
without special tokens, before truncation) after which a sentence ends by
late chunking's rule (core/tokenizer/tokenizer.h): the last piece whose
text ends at a sentence mark (a character whose NFKC form ends with . ! ?
or U+3002) that whitespace (Unicode's White_Space) follows in the text. The rule read from the text itself, not from the tokenizer's
pieces; pieces of one character (byte fallback's) end where it ends; the last
piece is never one (the end of the text ends its sentence).
Usage: reference_sentences.py TOKENIZER_JSON CORPUS OUTPUT"""

import sys
import unicodedata

from reference_json import load, read_texts


# Unicode's White_Space (Rust's char::is_whitespace; Python's isspace also
# takes U+001C..U+001F).
WHITESPACE = set("\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
                 "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


def is_mark(c):
    return unicodedata.normalize("NFKC", c)[-1:] in (".", "!", "?", "\u3002")


def sentence_ends(text, encoding):
    ends = []
    offsets = encoding.offsets
    for i, (_, stop) in enumerate(offsets[:-1]):
        last_of_stop = offsets[i + 1][1] != stop
        if (stop > 0 and is_mark(text[stop - 1]) and stop < len(text) and text[stop] in WHITESPACE
                and last_of_stop):
            ends.append(i)
    return ends


def main():
    path, corpus, output = sys.argv[1:4]
    tokenizer = load(path)
    texts = read_texts(corpus)
    encodings = tokenizer.encode_batch(texts, add_special_tokens=False)
    with open(output, "w") as f:
        for text, encoding in zip(texts, encodings):
            f.write("ends:%s\n" % "".join(" %d" % i for i in sentence_ends(text, encoding)))


if __name__ == "__main__":
    main()
