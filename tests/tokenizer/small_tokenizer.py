#!/usr/bin/env python3
"""Replaces the vocab.json of a small RoBERTa test checkpoint
(tests/import/make_checkpoint.py) with a 50-token byte-level BPE
tokenizer.json in RoBERTa's form (ByteLevel, merges, <unk>,
RobertaProcessing), writes a few documents to CORPUS, and prints the number
of ids HF tokenizers gives each, one per line.
Usage: small_tokenizer.py CHECKPOINT_DIR CORPUS"""

import json
import os
import sys

from tokenizers import Tokenizer

TEXTS = ["the cat is on the mat", "Another TEXT, with capitals and 123 digits!",
         "\u00fcn\u00efc\u00f6d\u00e9 th\u00e9 end </s> and <s>", "a" * 300]


def main():
    folder, corpus = sys.argv[1:3]
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for c in "abcdefghijklmnopqrstuvwxyz":
        vocab[c] = len(vocab)
    merges = ["\u0120 t", "t h", "\u0120t h", "h e", "\u0120th e", "i n", "e r", "a n", "o n",
              "a t", "e n", "o r", "i s", "i t", "\u0120 a", "o u", "e s", "e d", "\u0120 o"]
    vocab["\u0120"] = len(vocab)
    for merge in merges:
        vocab.setdefault(merge.replace(" ", ""), len(vocab))
    special = [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": False, "special": True}
               for c, i in [("<s>", 0), ("<pad>", 1), ("</s>", 2), ("<unk>", 3)]]
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": special,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0],
                           "trim_offsets": True, "add_prefix_space": False},
        "decoder": None,
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>",
                  "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                  "byte_fallback": False, "vocab": vocab, "merges": merges}}
    assert len(vocab) <= 50
    os.remove(os.path.join(folder, "vocab.json"))
    path = os.path.join(folder, "tokenizer.json")
    with open(path, "w") as f:
        json.dump(tokenizer, f)
    with open(corpus, "w") as f:
        f.write("\n".join(TEXTS) + "\n")
    reference = Tokenizer.from_file(path)
    for text in TEXTS:
        print(len(reference.encode(text).ids))


if __name__ == "__main__":
    main()
