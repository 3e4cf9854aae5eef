#!/usr/bin/python3
"""Checks the scores_head job's output against NumPy's.

usage: compare.py SCORES.h5 EXPECTED.h5

Compares `scores` with make_model.py's `expected_scores` and checks that the
file is complete and says output_kind scores. Exits 1 if any check fails."""

import sys

import h5py
import numpy as np

# float32 through a norm and a 32-wide product differs from float64 by about
# 1e-7 in a sigmoid's value; a wrong token, weight or missing bias moves the
# scores by 1e-2 and more.
TOLERANCE = 1e-5


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with h5py.File(sys.argv[1], "r") as out, h5py.File(sys.argv[2], "r") as ref:
        got, want = out["scores"][:].astype(np.float64), ref["expected_scores"][:]
        checks = [(int(out.attrs["complete"]) == 1, "the file is complete"),
                  (out.attrs["output_kind"] == "scores", "output_kind is scores"),
                  (got.shape == want.shape, f"scores {got.shape}, expected {want.shape}")]
        if got.shape == want.shape:
            worst = float(np.abs(got - want).max())
            checks.append((worst <= TOLERANCE, f"max |tfenc - numpy| = {worst:.1e} <= {TOLERANCE:g}"))
    for ok, what in checks:
        print(f"compare: {'ok  ' if ok else 'FAIL'} {what}")
    return 0 if all(ok for ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
