#!/usr/bin/env python3
"""Single-thread tokenization rate of HF `tokenizers` on a corpus, for
bench.sh to set beside tfenc's: encode_batch over all lines, ROUNDS times,
with Rayon held to one thread (RAYON_NUM_THREADS=1, set by bench.sh).
Usage: bench.py TOKENIZER_JSON CORPUS MAX_LENGTH ROUNDS"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_json import load, read_texts  # noqa: E402


def main():
    path, corpus, max_length, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    tokenizer = load(path)
    tokenizer.enable_truncation(max_length)
    texts = read_texts(corpus)
    size = sum(len(text.encode("utf-8")) for text in texts)
    tokens = 0
    started = time.perf_counter()
    for _ in range(rounds):
        tokens += sum(len(e.ids) for e in tokenizer.encode_batch(texts))
    seconds = time.perf_counter() - started
    print("hf: %d rounds of %d lines (%d bytes): %d tokens in %.3f s: %.0f tokens/s, %.1f MB/s"
          % (rounds, len(texts), size, tokens, seconds, tokens / seconds, rounds * size / seconds / 1e6))


if __name__ == "__main__":
    main()
