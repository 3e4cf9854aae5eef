#!/usr/bin/python3
"""Checks the kept fields of tfenc outputs (tests/io/keep_fields.sh)
against the corpus, read here with json and gzip (JSON Lines) or pyarrow
(Parquet), independently of tfenc:

  check_kept.py values OUTPUT.h5 CORPUS_DIR FIELD...
      each field's dataset and FIELD_valid mask: the type (strings, int64,
      or float64 when any record holds a float), every value, the nulls
      (null or absent), and the ids
  check_kept.py same A.h5 B.h5
      every dataset of A equals B's, bit for bit
  check_kept.py parquet EXPORT_DIR CORPUS_DIR FIELD...
      tfenc-export's columns, read with pyarrow and pandas: Arrow nulls
      where the corpus has none, the values elsewhere
"""

import glob
import gzip
import json
import os
import sys

import h5py


def corpus_records(directory):
    paths = sorted(glob.glob(os.path.join(directory, "*")))
    records = []
    for path in paths:
        if path.endswith(".parquet"):
            import pyarrow.parquet as pq
            records += pq.read_table(path).to_pylist()
        else:
            opener = gzip.open if path.endswith(".gz") else open
            with opener(path, "rt", encoding="utf-8") as f:
                records += [json.loads(line) for line in f]
    return records


def expected(records, field):
    values = [r.get(field) for r in records]
    present = [v for v in values if v is not None]
    kind = ("string" if any(isinstance(v, str) for v in present)
            else "float" if any(isinstance(v, float) for v in present) else "integer")
    return kind, values


def check_values(output, directory, fields):
    records = corpus_records(directory)
    problems = []
    with h5py.File(output, "r") as f:
        if list(f["ids"].asstr()[:]) != [r["id"] for r in records]:
            problems.append("ids differ")
        for field in fields:
            kind, values = expected(records, field)
            data, valid = f[field][:], f[field + "_valid"][:]
            want_dtype = {"string": "S", "integer": "i", "float": "f"}[kind]
            if data.dtype.kind != want_dtype or (kind != "string" and data.dtype.itemsize != 8):
                problems.append(f"{field}: dtype {data.dtype}, expected {kind}")
                continue
            if kind == "string" and data.dtype.itemsize != max(
                    [len(v.encode()) for v in values if v is not None] or [1]):
                problems.append(f"{field}: {data.dtype.itemsize} bytes, not the longest value's")
            for i, v in enumerate(values):
                if bool(valid[i]) != (v is not None):
                    problems.append(f"{field}[{i}]: valid {valid[i]}, corpus {v!r}")
                elif v is None:
                    continue
                elif kind == "string" and data[i].decode() != v:
                    problems.append(f"{field}[{i}]: {data[i]!r} != {v!r}")
                elif kind == "integer" and int(data[i]) != v:
                    problems.append(f"{field}[{i}]: {data[i]} != {v}")
                elif kind == "float" and float(data[i]) != float(v):
                    problems.append(f"{field}[{i}]: {data[i]!r} != {float(v)!r}")
                if len(problems) > 5:
                    break
    return problems, f"{len(records)} records, fields {', '.join(fields)}"


def check_same(a, b):
    problems = []
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        names = sorted(k for k in fa if isinstance(fa[k], h5py.Dataset))
        if names != sorted(k for k in fb if isinstance(fb[k], h5py.Dataset)):
            problems.append(f"datasets differ: {names}")
        for name in names:
            x, y = fa[name][()], fb[name][()]
            if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
                problems.append(f"dataset '{name}' differs")
    return problems, f"{len(names)} datasets equal"


def check_parquet(directory, corpus, fields):
    import pyarrow.parquet as pq
    records = corpus_records(corpus)
    table = pq.read_table(directory)
    frame = table.to_pandas()
    problems = []
    if table.num_rows != len(records):
        return [f"{table.num_rows} rows, the corpus has {len(records)}"], ""
    for field in fields:
        kind, values = expected(records, field)
        column = table.column(field)
        want = {"string": "string", "integer": "int64", "float": "double"}[kind]
        if str(column.type) != want:
            problems.append(f"{field}: {column.type}, expected {want}")
        if column.null_count != sum(v is None for v in values):
            problems.append(f"{field}: {column.null_count} nulls, the corpus has "
                            f"{sum(v is None for v in values)}")
        got = column.to_pylist()
        for i, v in enumerate(values):
            w = None if v is None else float(v) if kind == "float" else v
            if got[i] != w:
                problems.append(f"{field}[{i}]: {got[i]!r} != {w!r}")
                break
        nulls = frame[field].isna().tolist()
        if nulls != [v is None for v in values]:
            problems.append(f"{field}: pandas sees other nulls")
    return problems, f"{table.num_rows} rows, columns {', '.join(fields)} (pyarrow, pandas)"


def main():
    mode = sys.argv[1]
    if mode == "values":
        problems, said = check_values(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif mode == "same":
        problems, said = check_same(sys.argv[2], sys.argv[3])
    else:
        problems, said = check_parquet(sys.argv[2], sys.argv[3], sys.argv[4:])
    if problems:
        print("; ".join(problems[:6]))
        sys.exit(1)
    print(said)


if __name__ == "__main__":
    main()
