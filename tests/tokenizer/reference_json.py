#!/usr/bin/env python3
"""Writes the reference token ids of a raw-bytes corpus with Hugging Face's
`tokenizers` for a tokenizer.json, one line "n_truncated: id id ..." per
corpus line (tokenize_corpus's format), truncating at MAX_LENGTH with the
special tokens counted, as tfenc does. Lines are decoded as Python does with
errors='replace', which tfenc's REPLACE policy follows. A file whose merges
are ["a", "b"] pairs (tokenizers >= 0.20) is given to 0.19 as "a b".
Usage: reference_json.py TOKENIZER_JSON CORPUS MAX_LENGTH OUTPUT"""

import json
import sys

from tokenizers import Tokenizer


def load(path):
    data = json.load(open(path, encoding="utf-8"))
    merges = data.get("model", {}).get("merges")
    if merges and isinstance(merges[0], list):
        data["model"]["merges"] = [" ".join(pair) for pair in merges]
    tokenizer = Tokenizer.from_str(json.dumps(data))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def read_texts(corpus):
    """The corpus's lines (split on b"\\n" only), decoded as Python does with
    errors='replace', the text HF tokenizers gets."""
    data = open(corpus, "rb").read()
    lines = data.split(b"\n")
    if data.endswith(b"\n"):
        lines.pop()
    return [line.decode("utf-8", errors="replace") for line in lines]


def write_ids(output, kept, full):
    """One "n_truncated: id id ..." line per text, tokenize_corpus's format."""
    with open(output, "w") as f:
        for k, w in zip(kept, full):
            f.write("%d: %s\n" % (len(w.ids) - len(k.ids), " ".join(map(str, k.ids))))


def main():
    path, corpus, max_length, output = sys.argv[1:5]
    max_length = int(max_length)
    whole = load(path)
    truncating = load(path)
    truncating.enable_truncation(max_length)
    texts = read_texts(corpus)
    write_ids(output, truncating.encode_batch(texts), whole.encode_batch(texts))


if __name__ == "__main__":
    main()
