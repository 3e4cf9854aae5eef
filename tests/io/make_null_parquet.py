#!/usr/bin/python3
"""Writes the shards of make_null_texts.py (OUT_DIR/rows.json) as Parquet
files with pyarrow, several row groups each, the nulls as Parquet nulls.

usage: make_null_parquet.py OUT_DIR     (writes OUT_DIR/pqnulls/part-0K.parquet)
"""

import json
import os
import sys

import pyarrow as pa
import pyarrow.parquet as pq


def main():
    out = sys.argv[1]
    shards = json.load(open(os.path.join(out, "rows.json"), encoding="utf-8"))
    os.makedirs(os.path.join(out, "pqnulls"), exist_ok=True)
    for k, rows in enumerate(shards):
        table = pa.table({"id": pa.array([r["id"] for r in rows], pa.string()),
                          "text": pa.array([r["text"] for r in rows], pa.string())})
        pq.write_table(table, os.path.join(out, "pqnulls", f"part-{k:02d}.parquet"),
                       row_group_size=16)


if __name__ == "__main__":
    main()
