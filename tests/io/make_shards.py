#!/usr/bin/python3
"""Writes one corpus three ways for tests/io/shards.sh, with the Python
standard library's gzip and lzma (zstd shards are compressed afterwards by
the zstd program, which the script runs).

usage: make_shards.py EXAMPLE_CORPUS.txt COPIES OUT_DIR [TINY]

OUT_DIR/one.jsonl     every document, one JSON object a line ("text", "id")
OUT_DIR/shards/       the same documents in 8 files, in path order: a shard
                      of one document, gzip, (zstd), plain, gzip (two
                      members, as concatenated .gz files are), (zstd), xz, and
                      an empty shard; the files to compress with zstd are
                      left plain as *.jsonl.tozst
OUT_DIR/list.txt      the shards' names, shuffled (the list is sorted by tfenc)
OUT_DIR/tiny/         TINY (default 10,000) one-document shards, and
                      tiny.jsonl the same
"""

import gzip
import json
import lzma
import os
import random
import sys


def main():
    source, copies, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    tiny = int(sys.argv[4]) if len(sys.argv) > 4 else 10000
    words = [line.split() for line in open(source, encoding="utf-8").read().splitlines()]
    lines = []
    for copy in range(copies):
        for i, w in enumerate(words):
            k = (copy + i) % len(w)
            text = " ".join(w[k:] + w[:k])
            lines.append(json.dumps({"text": text, "id": f"doc-{len(lines)}"}, ensure_ascii=False))
    os.makedirs(os.path.join(out, "shards"), exist_ok=True)
    with open(os.path.join(out, "one.jsonl"), "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
    n = len(lines)
    cuts = [0, 1, n // 6, n // 6 + n // 7, n // 2, 3 * n // 4, n - 1, n, n]
    kinds = ["plain", "gzip", "zstd", "plain", "gzip2", "zstd", "xz", "plain"]
    names = []
    for k, kind in enumerate(kinds):
        body = "".join(line + "\n" for line in lines[cuts[k]:cuts[k + 1]]).encode()
        name = f"part-{k:02d}.jsonl"
        path = os.path.join(out, "shards", name)
        if kind == "gzip":
            name += ".gz"
            data = gzip.compress(body)
        elif kind == "gzip2":
            name += ".gz"
            half = body.index(b"\n", len(body) // 2) + 1
            data = gzip.compress(body[:half]) + gzip.compress(body[half:])
        elif kind == "xz":
            name += ".xz"
            data = lzma.compress(body)
        elif kind == "zstd":
            name += ".tozst"
            data = body
        else:
            data = body
        with open(os.path.join(out, "shards", name), "wb") as f:
            f.write(data)
        names.append(name.replace(".tozst", ".zst"))
    random.Random(7).shuffle(names)
    with open(os.path.join(out, "list.txt"), "w") as f:
        f.write("# the shards, in any order\n")
        f.write("".join(f"shards/{name}\n" for name in names))
    os.makedirs(os.path.join(out, "tiny"), exist_ok=True)
    with open(os.path.join(out, "tiny.jsonl"), "w", encoding="utf-8") as whole:
        for i in range(tiny):
            line = lines[i % n] + "\n"
            whole.write(line)
            with open(os.path.join(out, "tiny", f"{i:05d}.jsonl"), "w", encoding="utf-8") as f:
                f.write(line)


if __name__ == "__main__":
    main()
