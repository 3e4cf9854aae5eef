#!/usr/bin/python3
"""Checks that a chunk-mean output holds each document's chunks averaged and
scaled back to unit length, as a model that normalises promises.

usage: unit_means.py EACH.h5 MEAN.h5 LABEL

EACH.h5 is the same job with chunk_pooling = none (every chunk's row,
`chunks` per document), MEAN.h5 with chunk_pooling = mean: each of its
rows must be normalize(mean(the document's chunk rows)) within 1e-6, and
of L2 norm 1 within 1e-6. Exits 1 when not."""
import sys

import h5py
import numpy as np


def main():
    each_path, mean_path, label = sys.argv[1:4]
    with h5py.File(each_path, "r") as each, h5py.File(mean_path, "r") as mean:
        chunks, rows = each["embeddings"][:].astype(np.float64), mean["embeddings"][:]
        wanted, at = [], 0
        for n in each["chunks"][:]:
            wanted.append(chunks[at:at + n].mean(axis=0))
            at += n
    wanted = np.asarray(wanted)
    wanted /= np.linalg.norm(wanted, axis=1, keepdims=True)
    worst = float(np.max(np.abs(rows - wanted)))
    norms = np.linalg.norm(rows.astype(np.float64), axis=1)
    print(f"{label}: max |diff| to normalize(mean(chunks)) {worst:.2e}, norms "
          f"{norms.min():.9f}..{norms.max():.9f}")
    if worst > 1e-6 or not np.all(np.abs(norms - 1) <= 1e-6):
        sys.exit(f"{label}: FAIL: not normalize(mean(chunks)) of unit length")


if __name__ == "__main__":
    main()
