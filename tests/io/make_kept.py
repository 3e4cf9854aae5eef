#!/usr/bin/python3
"""Writes the corpora of tests/io/keep_fields.sh: records with metadata
fields to keep beside their text, as JSON Lines shards (plain and gzip)
and, with pyarrow, as Parquet; and the bad corpora each refusal needs.

usage: make_kept.py EXAMPLE_CORPUS.txt COPIES OUT_DIR [--parquet]

OUT_DIR/kept/      part-00.jsonl (plain), part-01.jsonl.gz, part-02.jsonl:
                   id, text, url (a string, null every 5th record, absent
                   every 7th), lang (a string), n (an integer, null every
                   9th), score (an integer in odd records, a float in even
                   ones), big (an integer beyond 2^53)
OUT_DIR/pq/        with --parquet: the same records in part-0.parquet (row
                   groups of 30, lang dictionary-encoded, n int32) and
                   part-1.parquet (url large_string), absent values null
OUT_DIR/bad/       object.jsonl (line 4's url is an object), array.jsonl
                   (line 2's lang is an array), boolean.jsonl (line 3's n is
                   true), long.jsonl (line 5's url is 40 bytes), mixed/
                   (url a string in part-0.jsonl, an integer at line 3 of
                   part-1.jsonl), nowhere.jsonl (no record has 'url'), and
                   with --parquet list.parquet (a list column 'url')
"""

import gzip
import json
import os
import sys


def records_of(source, copies):
    words = [line.split() for line in open(source, encoding="utf-8").read().splitlines()]
    records = []
    for copy in range(copies):
        for i, w in enumerate(words):
            k = len(records)
            r = {"id": f"doc-{k}", "text": " ".join(w[(copy + i) % len(w):] + w[:(copy + i) % len(w)])}
            if k % 7 != 3:
                r["url"] = None if k % 5 == 1 else f"https://example.org/{k}/caf\u00e9" + "x" * (k % 13)
            r["lang"] = ("en", "de", "fr")[k % 3]
            r["n"] = None if k % 9 == 4 else k * 37 - 1000
            r["score"] = k if k % 2 else k / 7 + 0.1
            r["big"] = 2**53 + 2 * k + 1
            records.append(r)
    return records


def write_lines(path, records, compress=False):
    body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()
    with open(path, "wb") as f:
        f.write(gzip.compress(body) if compress else body)


def write_parquet(out, records):
    import pyarrow as pa
    import pyarrow.parquet as pq

    def table(rows, url_type, dictionary):
        lang = pa.array([r["lang"] for r in rows], pa.string())
        return pa.table({
            "id": pa.array([r["id"] for r in rows], pa.string()),
            "text": pa.array([r["text"] for r in rows], pa.string()),
            "url": pa.array([r.get("url") for r in rows], url_type),
            "lang": lang.dictionary_encode() if dictionary else lang,
            "n": pa.array([r["n"] for r in rows], pa.int32()),
            "score": pa.array([float(r["score"]) for r in rows], pa.float64()),
            "big": pa.array([r["big"] for r in rows], pa.int64()),
        })

    os.makedirs(os.path.join(out, "pq"), exist_ok=True)
    half = len(records) // 2
    pq.write_table(table(records[:half], pa.string(), True),
                   os.path.join(out, "pq", "part-0.parquet"), row_group_size=30)
    pq.write_table(table(records[half:], pa.large_string(), False),
                   os.path.join(out, "pq", "part-1.parquet"), row_group_size=45)
    rows = records[:6]
    pq.write_table(pa.table({"id": [r["id"] for r in rows], "text": [r["text"] for r in rows],
                             "url": pa.array([[1, 2]] * len(rows), pa.list_(pa.int64()))}),
                   os.path.join(out, "bad", "list.parquet"))


def main():
    source, copies, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    records = records_of(source, copies)
    n = len(records)
    os.makedirs(os.path.join(out, "kept"), exist_ok=True)
    cuts = [0, 3 * n // 10, n // 2, n]
    for k, (name, compress) in enumerate((("part-00.jsonl", False), ("part-01.jsonl.gz", True),
                                          ("part-02.jsonl", False))):
        write_lines(os.path.join(out, "kept", name), records[cuts[k]:cuts[k + 1]], compress)
    bad = os.path.join(out, "bad")
    os.makedirs(os.path.join(bad, "mixed"), exist_ok=True)
    few = [dict(r) for r in records[:8]]
    for name, line, field, value in (("object", 4, "url", {"host": "example.org"}),
                                     ("array", 2, "lang", ["en"]), ("boolean", 3, "n", True),
                                     ("long", 5, "url", "https://example.org/" + "y" * 20)):
        rows = [dict(r) for r in few]
        rows[line - 1][field] = value
        write_lines(os.path.join(bad, name + ".jsonl"), rows)
    rows = [{k: v for k, v in r.items() if k != "url"} for r in few]
    write_lines(os.path.join(bad, "nowhere.jsonl"), rows)
    mixed = [dict(r, url=f"u{k}") for k, r in enumerate(records[:40])]
    mixed[20 + 2]["url"] = 5
    write_lines(os.path.join(bad, "mixed", "part-0.jsonl"), mixed[:20])
    write_lines(os.path.join(bad, "mixed", "part-1.jsonl"), mixed[20:])
    if "--parquet" in sys.argv[4:]:
        write_parquet(out, records)


if __name__ == "__main__":
    main()
