#!/usr/bin/env python3
"""Compares tfenc's token ids with the reference ids, line by line and token
by token. Prints the number of lines compared and of mismatches, and the
first mismatching lines with both token lists; exits 1 on any mismatch.
Usage: compare.py VOCAB_TXT|TOKENIZER_JSON CORPUS EXPECTED ACTUAL LABEL"""

import sys

SHOWN = 5


def read_ids(path):
    rows = []
    for line in open(path):
        cut, _, ids = line.rstrip("\n").partition(":")
        rows.append((int(cut), [int(i) for i in ids.split()]))
    return rows


def main():
    vocab_path, corpus_path, expected_path, actual_path, label = sys.argv[1:6]
    if vocab_path.endswith(".json"):
        from reference_json import load
        tokenizer = load(vocab_path)
        vocab = [tokenizer.id_to_token(i) for i in range(tokenizer.get_vocab_size(with_added_tokens=True))]
    else:
        vocab = [line.rstrip() for line in open(vocab_path, encoding="utf-8")]
    data = open(corpus_path, "rb").read()
    corpus = data.split(b"\n")
    if data.endswith(b"\n"):
        corpus.pop()
    expected = read_ids(expected_path)
    actual = read_ids(actual_path)
    if not (len(expected) == len(actual) == len(corpus)):
        print("%s: FAIL: %d corpus lines, %d reference rows, %d tfenc rows"
              % (label, len(corpus), len(expected), len(actual)))
        return 1
    mismatches = [i for i in range(len(corpus)) if expected[i] != actual[i]]
    n_tokens = sum(len(ids) for _, ids in expected)
    n_cut = sum(1 for cut, _ in expected if cut > 0)
    print("%s: %d lines compared (%d tokens, %d lines truncated), %d mismatches"
          % (label, len(corpus), n_tokens, n_cut, len(mismatches)))

    def names(ids):
        return " ".join(str(vocab[i]) if 0 <= i < len(vocab) else "<%d>" % i for i in ids)

    for i in mismatches[:SHOWN]:
        print("  line %d: %r" % (i + 1, corpus[i][:300]))
        print("    reference (cut %d): %s" % (expected[i][0], names(expected[i][1])))
        print("    tfenc     (cut %d): %s" % (actual[i][0], names(actual[i][1])))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
