#!/usr/bin/python3
"""Compares tfenc-batch outputs made at different rank layouts with the one
made by a single rank.

usage: compare_layouts.py BASELINE.h5 OTHER.h5 [OTHER.h5 ...]

Every file must hold the same documents in the same rows (embeddings,
scores or hidden states): lengths, truncated, offsets (per-token), ids and
document_source equal exactly, complete = 1, the float rows bitwise equal
to the baseline, and so every other dataset (vectors, sparse rows, kept
fields, the further heads' /outputs groups, the int8 calibration). Prints, per file, the max |diff|
and exits 1 when any check fails.

Why bitwise: a document's rows are computed on the microbatch it shares
with other documents, and a float32 GEMM's result for one row depends on the
size of the matrix it is multiplied in (the kernels block by size). So
tfenc cuts the corpus into windows that depend on the job alone and forms
microbatches inside a window only (core/input/windows.h): at any layout, and
after a resume at any other, every document meets the same companions in
the same microbatch, and its vector is the same to the bit.
"""

import sys

import h5py
import numpy as np

TOLERANCE = 0.0


def load(path):
    """Every dataset of the file by its path (groups' too: an int8 file's
    int8_calibration holds the ranges every layout must share)."""
    data = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, item: data.__setitem__(name, item[()])
                     if isinstance(item, h5py.Dataset) else None)
        data["complete"] = int(f.attrs["complete"])
    return data


def main():
    baseline_path, others = sys.argv[1], sys.argv[2:]
    baseline = load(baseline_path)
    failed = 0
    if baseline["complete"] != 1:
        print(f"FAIL {baseline_path}: not marked complete")
        failed += 1
    rows = next((name for name in ("embeddings", "scores") if name in baseline), "hidden")
    for path in others:
        other = load(path)
        problems = []
        if other["complete"] != 1:
            problems.append("not marked complete")
        # A corpus of one file has no document_source (its row is its line):
        # a sharded corpus is compared with it on everything else.
        # corpus_shards describes the input, which older files keep as an
        # attribute: not a dataset of rows.
        if set(other) - {"document_source", "corpus_shards"} != set(baseline) - {
                "document_source", "corpus_shards"} or (
                "document_source" in baseline and "document_source" not in other):
            problems.append(f"datasets {sorted(other)} != {sorted(baseline)}")
        for name in ("lengths", "truncated", "offsets", "ids", "chunks", "chunk_offsets",
                     "chunk_starts", "document_source"):
            if name in baseline and not np.array_equal(baseline[name], other.get(name)):
                problems.append(f"{name} differs")
        # Every other dataset too, bit for bit: a multi-vector file's
        # vectors, sparse rows, kept fields, the further heads' groups
        # (outputs/NAME/...), an int8 file's calibration.
        checked = {rows, "complete", "document_source", "corpus_shards"}
        for name in baseline:
            if name in checked or name in ("lengths", "truncated", "offsets", "ids", "chunks",
                                           "chunk_offsets", "chunk_starts"):
                continue
            mine, theirs = baseline[name], other.get(name)
            if theirs is None or np.shape(mine) != np.shape(theirs) or (
                    np.asarray(mine).tobytes() != np.asarray(theirs).tobytes()):
                problems.append(f"{name} differs")
        diff = float("inf")
        if other.get(rows) is not None and other[rows].shape == baseline[rows].shape:
            diff = float(np.max(np.abs(other[rows].astype(np.float64) - baseline[rows])))
            if not np.all(np.isfinite(other[rows])):
                problems.append(f"{rows} has non-finite values")
        else:
            problems.append(f"{rows} shape differs")
        if not diff <= TOLERANCE:
            problems.append(f"not bitwise equal: max |diff| {diff:.3g}")
        if problems:
            failed += 1
            print(f"FAIL {path}: " + "; ".join(problems))
        else:
            print(f"ok   {path}: bitwise equal")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
