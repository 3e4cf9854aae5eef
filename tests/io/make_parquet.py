#!/usr/bin/python3
"""Writes the corpus of tests/io/shards.sh (one.jsonl) a third way, as
Parquet files written by pyarrow, and the bad Parquet files.

usage: make_parquet.py ONE.jsonl OUT_DIR

OUT_DIR/pq/       part-0.parquet (text as large_string, row groups of 100),
                  part-1.parquet (one row), part-2.parquet (text
                  dictionary-encoded, row groups of 90), part-3.parquet (no
                  rows); columns id, text and an integer column n
OUT_DIR/pqnull/   one file whose row 5 (row group 1) has a null text
OUT_DIR/pqbad/    one file cut short (its footer gone)
"""

import json
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq


def table(rows, text_type=pa.string(), dictionary=False, null_at=None):
    texts = [r["text"] for r in rows]
    if null_at is not None:
        texts[null_at] = None
    text = pa.array(texts, text_type)
    if dictionary:
        text = text.dictionary_encode()
    return pa.table({"id": pa.array([r["id"] for r in rows], pa.string()), "text": text,
                     "n": pa.array(range(len(rows)), pa.int64())})


def main():
    rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
    out = sys.argv[2]
    for d in ("pq", "pqnull", "pqbad"):
        os.makedirs(os.path.join(out, d), exist_ok=True)
    n = len(rows)
    pq.write_table(table(rows[: n // 3], pa.large_string()), os.path.join(out, "pq/part-0.parquet"),
                   row_group_size=100)
    pq.write_table(table(rows[n // 3: n // 3 + 1]), os.path.join(out, "pq/part-1.parquet"))
    pq.write_table(table(rows[n // 3 + 1:], dictionary=True), os.path.join(out, "pq/part-2.parquet"),
                   row_group_size=90)
    pq.write_table(table(rows[:0]), os.path.join(out, "pq/part-3.parquet"))
    pq.write_table(table(rows[:20], null_at=5 + 4), os.path.join(out, "pqnull/part-0.parquet"),
                   row_group_size=4)
    whole = os.path.join(out, "pqbad/part-0.parquet")
    pq.write_table(table(rows[:50]), whole, row_group_size=10)
    data = open(whole, "rb").read()
    with open(whole, "wb") as f:
        f.write(data[: len(data) // 2])


if __name__ == "__main__":
    main()
