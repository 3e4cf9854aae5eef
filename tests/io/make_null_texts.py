#!/usr/bin/python3
"""Writes the corpora of tests/io/null_text.sh: documents whose text is
null among the others, in JSON Lines shards (plain and gzip) and, when
pyarrow is there, Parquet, with the same corpus as one file without the
null records, and where each remaining document lies.

usage: make_null_texts.py EXAMPLE_CORPUS.txt COPIES OUT_DIR [PYARROW_PYTHON]

OUT_DIR/filtered.jsonl  the documents whose text is not null, in order
OUT_DIR/nulls/          part-00.jsonl (plain, starts with a null),
                        part-01.jsonl.gz (gzip, nulls in a row), and
                        part-02.jsonl (plain, the most documents, ends with a
                        null): "text": null every seventh line
OUT_DIR/expected.json   [shard index, 1-based line] of each filtered document
OUT_DIR/skipped.json    the null records of each shard
OUT_DIR/rows.json       the records of each shard, for make_parquet below
"""

import gzip
import json
import os
import sys


def main():
    source, copies, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    words = [line.split() for line in open(source, encoding="utf-8").read().splitlines()]
    records = []
    for copy in range(copies):
        for i, w in enumerate(words):
            k = (copy + i) % len(w)
            records.append({"text": " ".join(w[k:] + w[:k]), "id": f"doc-{len(records)}"})
    for i, r in enumerate(records):
        if i % 7 == 3 or i in (0, 41, 42, len(records) - 1):
            r["text"] = None
    n = len(records)
    cuts = [0, n // 5, 2 * n // 5, n]
    os.makedirs(os.path.join(out, "nulls"), exist_ok=True)
    names = ["part-00.jsonl", "part-01.jsonl.gz", "part-02.jsonl"]
    expected, skipped, shards = [], [], []
    for k, name in enumerate(names):
        part = records[cuts[k]:cuts[k + 1]]
        shards.append(part)
        body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in part).encode()
        path = os.path.join(out, "nulls", name)
        with open(path, "wb") as f:
            f.write(gzip.compress(body) if name.endswith(".gz") else body)
        skipped.append(sum(r["text"] is None for r in part))
        expected += [[k, line + 1] for line, r in enumerate(part) if r["text"] is not None]
    with open(os.path.join(out, "filtered.jsonl"), "w", encoding="utf-8") as f:
        f.write("".join(json.dumps(r, ensure_ascii=False) + "\n"
                        for r in records if r["text"] is not None))
    for name, value in (("expected.json", expected), ("skipped.json", skipped),
                        ("rows.json", shards)):
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            json.dump(value, f)


if __name__ == "__main__":
    main()
