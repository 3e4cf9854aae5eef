#!/usr/bin/env python3
"""An int8 (or bf16) file of several heads against the fp32 file of the same
job, head by head, each by the bar the accuracy gate holds its kind to
(docs/job-file.md, "Several outputs in one pass"; docs/scores.md, "bf16 and
int8"):
  pooled rows (`embeddings`), multi-vector rows (`vectors`, the same
  `offsets`) and sparse rows (the CSR's rows, merged by column): the
  smallest cosine of a row to fp32's, at least MIN_COSINE;
  scores: each label's largest error relative to the spread of fp32's
  scores of that label over the file, at most acos(MIN_COSINE) (4.47% at
  0.999).
The heads are the root's (attribute `head`) and each group of /outputs.

usage: compare_heads.py FP32.h5 OTHER.h5 MIN_COSINE [HEAD=LIMIT ...]
  prints a line per head, exits 1 when one misses its bar. HEAD=LIMIT
  asks the opposite of head HEAD: its figure (a cosine, or for scores
  the error as a fraction of the spread) must be worse than LIMIT (the
  file of a calibration that judged another head only).
"""
import math
import sys

import h5py
import numpy as np


def text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def row_cosines(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    dot = (a * b).sum(1)
    na, nb = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    both_zero = (na == 0) & (nb == 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        cosine = np.where(both_zero, 1.0, dot / (na * nb))
    return np.nan_to_num(cosine, nan=-1.0)


def sparse_cosines(x, y):
    cosines = []
    xp, xi, xv = x["sparse_indptr"][()], x["sparse_indices"][()], x["sparse_values"][()]
    yp, yi, yv = y["sparse_indptr"][()], y["sparse_indices"][()], y["sparse_values"][()]
    if len(xp) != len(yp):
        return np.array([-1.0])
    for r in range(len(xp) - 1):
        u = dict(zip(xi[xp[r]:xp[r + 1]].tolist(), xv[xp[r]:xp[r + 1]].astype(np.float64)))
        v = dict(zip(yi[yp[r]:yp[r + 1]].tolist(), yv[yp[r]:yp[r + 1]].astype(np.float64)))
        dot = sum(value * v.get(column, 0.0) for column, value in u.items())
        nu = math.sqrt(sum(value * value for value in u.values()))
        nv = math.sqrt(sum(value * value for value in v.values()))
        cosines.append(1.0 if nu == 0 and nv == 0 else 0.0 if nu == 0 or nv == 0
                       else dot / (nu * nv))
    return np.array(cosines)


def measure(kind, x, y):
    """(figure, is_scores): the smallest cosine, or the scores' relative error."""
    if kind == "scores":
        want, got = x["scores"][()].astype(np.float64), y["scores"][()].astype(np.float64)
        spread = want.max(0) - want.min(0)
        spread = np.where(spread > 0, spread, np.maximum(np.abs(want).max(0), 1e-30))
        return float((np.abs(got - want).max(0) / spread).max()), True
    if kind == "sparse":
        return float(sparse_cosines(x, y).min()), False
    if kind == "vectors":
        if not np.array_equal(x["offsets"][()], y["offsets"][()]):
            return -1.0, False
        return float(row_cosines(x["vectors"][()], y["vectors"][()]).min()), False
    return float(row_cosines(x["embeddings"][()], y["embeddings"][()]).min()), False


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    bar = float(sys.argv[3])
    worse = dict(arg.split("=", 1) for arg in sys.argv[4:])
    failed = 0
    with h5py.File(sys.argv[1], "r") as x, h5py.File(sys.argv[2], "r") as y:
        heads = [(text(x.attrs["head"]), text(x.attrs["output_kind"]), x, y)]
        for name in x["outputs"]:
            heads.append((name, text(x["outputs"][name].attrs["output_kind"]),
                          x["outputs"][name], y["outputs"][name]))
        for name, kind, a, b in heads:
            figure, scores = measure(kind, a, b)
            if scores:
                ok = figure <= math.acos(bar)
                said = (f"scores off fp32's by at most {100 * figure:.3g}% of their spread "
                        f"(bar {100 * math.acos(bar):.3g}%)")
            else:
                ok = figure >= bar
                said = f"min cosine {figure:.6f} to fp32 (bar {bar})"
            if name in worse:
                limit = float(worse[name])
                ok = figure > limit if scores else figure < limit
                said += f", asked to be worse than {limit}"
            failed += not ok
            print(f"compare_heads: {'ok  ' if ok else 'FAIL'} head {name} ({kind}): {said}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
