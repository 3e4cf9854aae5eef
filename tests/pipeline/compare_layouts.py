#!/usr/bin/python3
"""Compares tfenc-batch outputs made at different rank layouts with the one
made by a single rank.

usage: compare_layouts.py BASELINE.h5 OTHER.h5 [OTHER.h5 ...]

Every file must hold the same documents in the same rows: lengths,
truncated, offsets (per-token) and ids equal exactly, complete = 1, and the
float rows within 1e-5 max |diff| of the baseline. Prints, per file, the
max |diff| and whether it is bitwise equal, and exits 1 when any check fails.

Why 1e-5 and not 0: a document's rows are computed by OpenBLAS sgemm on the
whole microbatch it shares with other documents, and sgemm's kernels pick
their blocking (hence the order of the additions in one dot product) from
the matrix sizes, so the same row can come out a few float32 ulps apart in a
microbatch of another size (measured: up to ~1e-7 on 6-layer d=64 models).
A layout changes which documents share a microbatch; a wrong row, a row at
the wrong index or a stage skipped differs by 1e-2 or more.
"""

import sys

import h5py
import numpy as np

TOLERANCE = 1e-5


def load(path):
    with h5py.File(path, "r") as f:
        data = {name: f[name][()] for name in f.keys()}
        data["complete"] = int(f.attrs["complete"])
    return data


def main():
    baseline_path, others = sys.argv[1], sys.argv[2:]
    baseline = load(baseline_path)
    failed = 0
    if baseline["complete"] != 1:
        print(f"FAIL {baseline_path}: not marked complete")
        failed += 1
    rows = "embeddings" if "embeddings" in baseline else "hidden"
    for path in others:
        other = load(path)
        problems = []
        if other["complete"] != 1:
            problems.append("not marked complete")
        if set(other) != set(baseline):
            problems.append(f"datasets {sorted(other)} != {sorted(baseline)}")
        for name in ("lengths", "truncated", "offsets", "ids"):
            if name in baseline and not np.array_equal(baseline[name], other.get(name)):
                problems.append(f"{name} differs")
        diff = float("inf")
        if other.get(rows) is not None and other[rows].shape == baseline[rows].shape:
            diff = float(np.max(np.abs(other[rows].astype(np.float64) - baseline[rows])))
            if not np.all(np.isfinite(other[rows])):
                problems.append(f"{rows} has non-finite values")
        else:
            problems.append(f"{rows} shape differs")
        if not diff <= TOLERANCE:
            problems.append(f"max |diff| {diff:.3g} > {TOLERANCE}")
        bitwise = diff == 0.0
        if problems:
            failed += 1
            print(f"FAIL {path}: " + "; ".join(problems))
        else:
            print(f"ok   {path}: max |diff| {diff:.3g}, {'bitwise equal' if bitwise else 'not bitwise'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
