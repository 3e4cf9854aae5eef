"""Checks tfenc-export's Parquet files against the tfenc output they came
from, read independently with h5py: every column of every row, the rows a
partial file may give (only finished documents, and of a multi-vector file
only those whose end is recorded), the split into files, the key-value
metadata; then reads the directory with pandas, Polars and DuckDB.

usage: check_parquet.py OUTPUT.h5 DIR ROWS_PER_FILE LABEL [--readers]

Prints one "ok" line, or the first difference and exits 1.
"""
import json
import os
import sys

import h5py
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

BLOCK_DOCUMENTS = 65536


class Mismatch(Exception):
    pass


def expect(condition, message):
    if not condition:
        raise Mismatch(message)


def text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def attribute(f, name):
    return text(f.attrs[name]) if name in f.attrs else None


def same_values(got, want, what):
    """Bit for bit (floats through their bits, so that -0.0 and NaN count)."""
    got, want = np.asarray(got), np.asarray(want)
    expect(got.dtype == want.dtype, f"{what}: {got.dtype}, expected {want.dtype}")
    expect(got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}")
    if got.dtype.kind == "f":
        got, want = got.view(np.uint32), want.view(np.uint32)
    bad = np.flatnonzero(got.reshape(-1) != want.reshape(-1))
    expect(bad.size == 0, f"{what}: {bad.size} values differ, the first at flat index "
           f"{bad[:1].tolist()}")


def stored_values(dataset, rows):
    """A dataset's rows as tfenc-export writes them: 16-bit floats widened
    (by HDF5's own conversion), integers as they are."""
    if rows.size == 0:
        shape = (0,) + dataset.shape[1:]
        kind = dataset.dtype.kind
        return np.zeros(shape, np.float32 if kind == "f" or dataset.dtype.itemsize == 2
                        else dataset.dtype)
    if dataset.dtype.kind in "iu" and dataset.dtype.itemsize == 1:
        return dataset[rows]
    if dataset.dtype.kind in "iu":
        return dataset[rows]
    return dataset.astype(np.float32)[rows]


def exportable(f):
    """The documents a file gives, and each one's rows (first, count)."""
    lengths = f["lengths"][:]
    n = lengths.size
    finished = lengths >= 0
    complete = int(f.attrs["complete"]) == 1
    kind = attribute(f, "output_kind")
    next_finished = np.append(finished[1:], True)
    if kind in ("tokens", "vectors") or "chunk_offsets" in f:
        offsets = f["offsets" if kind != "pooled" else "chunk_offsets"][:]
        first = offsets[:-1]
        if kind == "tokens":
            count = lengths.astype(np.int64)
        elif kind == "pooled":
            count = f["chunks"][:].astype(np.int64)
        else:
            count = np.where(next_finished, offsets[1:] - offsets[:-1], -1)
        # where the next start is recorded it must agree
        known = finished & next_finished
        expect(np.array_equal(first[known] + count[known], offsets[1:][known]),
               "the h5 file's offsets and counts disagree (a broken test)")
        keep = finished & (count >= 0)
        return np.flatnonzero(keep), first, count, int((finished & ~keep).sum())
    if kind == "sparse":
        expect(complete, "an unfinished sparse file was exported")
        indptr = f["sparse_indptr"][:]
        return np.arange(n), indptr[:-1], indptr[1:] - indptr[:-1], 0
    return np.flatnonzero(finished), np.arange(n), np.ones(n, np.int64), 0


def gather(dataset, first, count, documents):
    rows = np.concatenate([np.arange(first[i], first[i] + count[i]) for i in documents]) \
        if documents.size else np.zeros(0, np.int64)
    return stored_values(dataset, rows)


def list_lengths(column):
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    offsets = column.offsets.to_numpy()
    return offsets[1:] - offsets[:-1], column.flatten()


def check_files(directory, rows_per_file, total):
    names = sorted(os.listdir(directory))
    parts = [name for name in names if name.startswith("part-") and name.endswith(".parquet")]
    expect(parts == names, f"{directory} holds other files than part-*.parquet: {names}")
    expect(parts == [f"part-{i:05d}.parquet" for i in range(len(parts))],
           f"the files are not numbered from 0: {parts}")
    counts = [pq.ParquetFile(os.path.join(directory, name)).metadata.num_rows for name in parts]
    wanted = [rows_per_file] * (total // rows_per_file)
    if total % rows_per_file or total == 0:
        wanted.append(total % rows_per_file)
    expect(counts == wanted, f"rows per file {counts}, expected {wanted}")
    for name in parts:
        meta = pq.ParquetFile(os.path.join(directory, name)).metadata
        for g in range(meta.num_row_groups):
            expect(meta.row_group(g).num_rows <= BLOCK_DOCUMENTS,
                   f"{name}: a row group of {meta.row_group(g).num_rows} rows")
    tables = [pq.read_table(os.path.join(directory, name)) for name in parts]
    for table in tables[1:]:
        expect(table.schema.equals(tables[0].schema, check_metadata=True),
               "the files' schemas or metadata differ")
    return pa.concat_tables(tables), len(parts)


def check_metadata(f, table):
    meta = {key.decode(): value.decode() for key, value in table.schema.metadata.items()}
    for name in ("output_kind", "dtype", "tfenc_version", "created", "weights_sha256",
                 "job_settings"):
        expect(meta.get("tfenc." + name) == attribute(f, name), f"metadata tfenc.{name}")
    expect(meta["tfenc.complete"] == str(int(f.attrs["complete"])), "metadata tfenc.complete")
    expect(meta["tfenc.n_documents"] == str(int(f.attrs["n_documents"])), "tfenc.n_documents")
    shards = json.loads(meta["tfenc.corpus_shards"])
    table_rows = f["corpus_shards"][:]
    expect(len(shards) == len(table_rows), "metadata tfenc.corpus_shards: count")
    for got, row in zip(shards, table_rows):
        expect(got["path"] == text(row["path"]) and got["fingerprint"] == text(row["fingerprint"])
               and [got[k] for k in ("bytes", "first_document", "documents", "skipped")]
               == [int(row[k]) for k in ("bytes", "first_document", "documents", "skipped")],
               f"metadata tfenc.corpus_shards: {got}")
    kind = attribute(f, "output_kind")
    if kind == "scores":
        expect(json.loads(meta["tfenc.id2label"]) == json.loads(attribute(f, "id2label")),
               "metadata tfenc.id2label")
    if "quantization_ranges" in f:
        ranges = np.array(json.loads(meta["tfenc.quantization_ranges"]), dtype=np.float32)
        same_values(ranges, f["quantization_ranges"][:], "metadata tfenc.quantization_ranges")
        expect(meta["tfenc.quantization_ranges_source"]
               == attribute(f, "quantization_ranges_source"), "tfenc.quantization_ranges_source")
    else:
        expect("tfenc.quantization_ranges" not in meta, "ranges for a file without them")
    if kind == "sparse":
        vocabulary = [text(token) for token in f["vocabulary"][:]]
        expect(json.loads(meta["tfenc.vocabulary"]) == vocabulary, "metadata tfenc.vocabulary")
        expect(int(meta["tfenc.sparse_top_k"]) == int(f.attrs["sparse_top_k"]), "sparse_top_k")
        expect(float(meta["tfenc.sparse_threshold"]) == float(f.attrs["sparse_threshold"]),
               "sparse_threshold")
    if kind == "vectors":
        for name in ("multivector_mode", "multivector_marker", "multivector_skiplist",
                     "multivector_query_padding", "multivector_first_token"):
            expect(meta["tfenc." + name] == attribute(f, name), f"metadata tfenc.{name}")


def check_columns(f, table, documents, first, count):
    kind = attribute(f, "output_kind")
    names = ["document"] + (["ids"] if "ids" in f else []) \
        + (["source_file", "source_line"] if "document_source" in f else []) \
        + ["lengths", "truncated"] + (["chunks"] if "chunks" in f else [])
    rows_name = {"pooled": "embeddings", "scores": "scores", "tokens": "hidden",
                 "vectors": "vectors", "sparse": "sparse"}[kind]
    names += [rows_name] + (["token_ids"] if "token_ids" in f else []) \
        + (["chunk_starts"] if "chunk_starts" in f else [])
    expect(table.column_names == names, f"columns {table.column_names}, expected {names}")
    for field in table.schema:
        expect(not field.nullable, f"column {field.name} is nullable")
    same_values(table["document"].to_numpy(), documents.astype(np.int64), "document")
    if "ids" in f:
        want = [text(x) for x in f["ids"][:][documents]]
        expect(table["ids"].to_pylist() == want, "ids differ")
    if "document_source" in f:
        paths = [text(p) for p in f["corpus_shards"]["path"]]
        source = f["document_source"][:][documents]
        expect(table["source_file"].to_pylist() == [paths[s] for s in source["shard"]],
               "source_file differs")
        same_values(table["source_line"].to_numpy(), source["line"].astype(np.int64),
                    "source_line")
    for name in ("lengths", "truncated", "chunks"):
        if name in f:
            same_values(table[name].to_numpy(), f[name][:][documents].astype(np.int32), name)
    column = table[rows_name].combine_chunks()
    if kind == "sparse":
        sizes, entries = list_lengths(column)
        same_values(sizes, count[documents].astype(sizes.dtype), "sparse: entries per row")
        same_values(entries.field("index").to_numpy(),
                    gather(f["sparse_indices"], first, count, documents), "sparse: indices")
        same_values(entries.field("value").to_numpy(),
                    gather(f["sparse_values"], first, count, documents), "sparse: values")
    elif rows_name in ("hidden", "vectors") or "chunk_offsets" in f:
        dataset = f[rows_name]
        sizes, vectors = list_lengths(column)
        same_values(sizes, count[documents].astype(sizes.dtype), f"{rows_name}: vectors per row")
        expect(pa.types.is_fixed_size_list(vectors.type)
               and vectors.type.list_size == dataset.shape[1], f"{rows_name}: {vectors.type}")
        same_values(vectors.flatten().to_numpy().reshape(-1, dataset.shape[1]),
                    gather(dataset, first, count, documents), rows_name)
    else:
        dataset = f[rows_name]
        expect(pa.types.is_fixed_size_list(column.type)
               and column.type.list_size == dataset.shape[1], f"{rows_name}: {column.type}")
        same_values(column.flatten().to_numpy().reshape(-1, dataset.shape[1]),
                    stored_values(dataset, documents), rows_name)
    for name in ("token_ids", "chunk_starts"):
        if name in f:
            sizes, values = list_lengths(table[name])
            same_values(sizes, count[documents].astype(sizes.dtype), f"{name}: per row")
            same_values(values.to_numpy(), gather(f[name], first, count, documents), name)


def check_readers(directory, table, rows_name):
    """pandas, Polars and DuckDB read the same rows."""
    import duckdb
    import pandas
    import polars

    documents = table["document"].to_pylist()
    flat = table[rows_name].combine_chunks()
    while not pa.types.is_primitive(flat.type) and not pa.types.is_struct(flat.type):
        flat = flat.flatten()
    if pa.types.is_struct(flat.type):
        flat = flat.field("value")
    total = float(np.sum(flat.to_numpy().astype(np.float64)))

    frame = pandas.read_parquet(directory)
    expect(frame["document"].tolist() == documents, "pandas: documents differ")
    if len(frame):
        first = np.asarray(frame[rows_name].iloc[0])
        expect(first.size > 0 or rows_name == "sparse", "pandas: an empty first row")

    polars_frame = polars.read_parquet(os.path.join(directory, "*.parquet"))
    expect(polars_frame["document"].to_list() == documents, "polars: documents differ")
    if "ids" in table.column_names:
        expect(polars_frame["ids"].to_list() == table["ids"].to_pylist(), "polars: ids differ")

    files = os.path.join(directory, "*.parquet")
    got = [row[0] for row in duckdb.sql(
        f"SELECT document FROM read_parquet('{files}') ORDER BY document").fetchall()]
    expect(got == sorted(documents), "duckdb: documents differ")
    if rows_name == "sparse":
        query = f"SELECT sum(list_sum(list_transform({rows_name}, e -> e.value))) FROM read_parquet('{files}')"
    elif rows_name in ("hidden", "vectors") or "chunk_starts" in table.column_names:
        query = f"SELECT sum(list_sum(flatten(list_transform({rows_name}, v -> v::FLOAT[])))) FROM read_parquet('{files}')"
    else:
        query = f"SELECT sum(list_sum({rows_name}::DOUBLE[])) FROM read_parquet('{files}')"
    duck_total = duckdb.sql(query).fetchone()[0] or 0.0
    expect(abs(duck_total - total) <= 1e-3 * max(1.0, abs(total)),
           f"duckdb: the values sum to {duck_total}, pyarrow's to {total}")
    return f"pandas {pandas.__version__}, polars {polars.__version__}, duckdb {duckdb.__version__}"


def main():
    path, directory, rows_per_file, label = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    try:
        with h5py.File(path, "r") as f:
            documents, first, count, left_out = exportable(f)
            table, files = check_files(directory, rows_per_file, documents.size)
            check_metadata(f, table)
            check_columns(f, table, documents, first, count)
            rows_name = [name for name in ("embeddings", "scores", "hidden", "vectors", "sparse")
                         if name in table.column_names][0]
        readers = check_readers(directory, table, rows_name) if "--readers" in sys.argv else ""
    except Mismatch as e:
        print(f"export: FAIL {label}: {e}")
        return 1
    print(f"export: ok   {label}: {documents.size} rows in {files} files equal the h5 file's "
          f"datasets ({left_out} finished left out){'; read by ' + readers if readers else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
