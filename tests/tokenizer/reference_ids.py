#!/usr/bin/env python3
"""Writes the reference token ids of a raw-bytes corpus with Hugging Face's
`tokenizers` (an independent WordPiece implementation, in Rust), one line
"n_truncated: id id ..." per corpus line, the format tokenize_corpus prints.
Each line is decoded as Python does with errors='replace', as tfenc's
REPLACE policy promises to match.
Usage: reference_ids.py VOCAB_TXT CORPUS MAX_LENGTH LOWERCASE(0|1) STRIP_ACCENTS(-1|0|1) OUTPUT"""

import sys

from tokenizers import BertWordPieceTokenizer

from reference_json import read_texts, write_ids


def main():
    vocab, corpus, max_length, lowercase, strip_accents, output = sys.argv[1:7]
    max_length = int(max_length)
    strip = {"-1": None, "0": False, "1": True}[strip_accents]

    def make():
        return BertWordPieceTokenizer(vocab, clean_text=True, handle_chinese_chars=True,
                                      strip_accents=strip, lowercase=lowercase == "1")

    truncating = make()
    truncating.enable_truncation(max_length)
    whole = make()  # no truncation: its length gives the count of pieces cut

    texts = read_texts(corpus)
    write_ids(output, truncating.encode_batch(texts), whole.encode_batch(texts))


if __name__ == "__main__":
    main()
