#!/usr/bin/python3
"""Checks the scale_norm job's output against PyTorch's.

usage: compare.py OUTPUT.h5 EXPECTED.h5 [--large-eps]

OUTPUT.h5 is what tfenc-batch wrote for job.ini, EXPECTED.h5 what
make_model.py wrote. Compares `embeddings` with `expected_embeddings` (or,
with --large-eps, with `expected_large_eps`, for a run with
--set final_norm.eps=1000) and `lengths`, and checks the file is marked
complete. Prints one line per check; exits 1 if any fails.
"""

import argparse
import sys

import h5py
import numpy as np

# float32 through two encoder layers, five ScaleNorms and the mean, summed in
# another order than PyTorch's (OpenBLAS blocking, packed batches), differs
# from it by about 1e-6 of the vectors' size; a g read from the wrong
# dataset, the norm of the wrong row or eps ignored gives differences of
# 1e-2 and more. 1e-4 relative to the largest element and 1e-5 relative
# (Frobenius) sit well between the two.
MAX_REL_TOLERANCE = 1e-4
REL_FROBENIUS_TOLERANCE = 1e-5


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output")
    parser.add_argument("expected")
    parser.add_argument("--large-eps", action="store_true")
    args = parser.parse_args()

    failures = 0

    def check(ok, what):
        nonlocal failures
        failures += 0 if ok else 1
        print(f"compare: {'ok  ' if ok else 'FAIL'} {what}")

    with h5py.File(args.output, "r") as out, h5py.File(args.expected, "r") as ref:
        check(int(np.asarray(out.attrs.get("complete", 0))) == 1, "output is marked complete")
        want = ref["expected_large_eps" if args.large_eps else "expected_embeddings"][:]
        if "embeddings" not in out:
            check(False, f"{args.output} has an `embeddings` dataset")
            return 1
        got = out["embeddings"][:].astype(np.float64)
        check(got.shape == want.shape, f"embeddings shape {got.shape} == {want.shape}")
        if got.shape == want.shape:
            scale = float(np.abs(want).max())
            largest = float(np.abs(got - want).max()) / scale
            relative = float(np.linalg.norm(got - want) / np.linalg.norm(want))
            check(largest <= MAX_REL_TOLERANCE,
                  f"max |tfenc - torch| / max |torch| = {largest:.2e} <= {MAX_REL_TOLERANCE:g}")
            check(relative <= REL_FROBENIUS_TOLERANCE,
                  f"relative Frobenius error {relative:.2e} <= {REL_FROBENIUS_TOLERANCE:g}")
        check(np.array_equal(out["lengths"][:], ref["lengths"][:]), "lengths match the input")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
