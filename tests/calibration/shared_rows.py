"""Compares the rows two outputs hold for the documents they share.

usage: shared_rows.py equal A.h5 B.h5 MAP     exit 0 when every shared row is bitwise equal
       shared_rows.py count A.h5 B.h5 MAP     prints how many differ, exit 0
       shared_rows.py calibration FILE...     exit 0 when every file records the same
                                              int8 calibration (its sha256), printed

MAP holds lines "I J": document I of A is document J of B.
"""

import sys

import h5py
import numpy as np


def differing(a_path, b_path, map_path):
    pairs = np.loadtxt(map_path, dtype=np.int64, ndmin=2)
    with h5py.File(a_path, "r") as a, h5py.File(b_path, "r") as b:
        rows_a = a["embeddings"][...][pairs[:, 0]]
        rows_b = b["embeddings"][...][pairs[:, 1]]
    # Bitwise: compare the bytes, so that -0.0 and 0.0 (or two NaNs) differ.
    bits_a = rows_a.view(np.uint32)
    bits_b = rows_b.view(np.uint32)
    differ = np.any(bits_a != bits_b, axis=1)
    largest = float(np.max(np.abs(rows_a - rows_b))) if len(pairs) else 0.0
    return int(differ.sum()), len(pairs), largest


def main():
    mode = sys.argv[1]
    if mode == "calibration":
        digests = []
        for path in sys.argv[2:]:
            with h5py.File(path, "r") as f:
                group = f.get("int8_calibration")
                digest = group.attrs.get("sha256") if group is not None else None
            digests.append(digest.decode() if isinstance(digest, bytes) else digest)
        print(" ".join(str(d)[:16] for d in digests))
        sys.exit(0 if digests[0] is not None and len(set(digests)) == 1 else 1)
    n, total, largest = differing(*sys.argv[2:5])
    print(f"{n} of {total} shared rows differ (largest difference {largest:.3g})")
    sys.exit(0 if mode == "count" or n == 0 else 1)


if __name__ == "__main__":
    main()
