#!/usr/bin/env python3
"""Compares tfenc's pooled embeddings with the sentence-transformers
reference, row by row: cosine similarity and largest absolute difference,
and (when both files have `lengths`) the token count of every row.

usage: compare_embeddings.py REFERENCE.h5 TFENC.h5 LABEL [MIN_COSINE MAX_ABS_DIFF]
Without the two bounds it only reports (16-bit storage has no pass bar)."""
import sys

import h5py
import numpy as np


def main():
    reference_path, tfenc_path, label = sys.argv[1:4]
    bounds = [float(x) for x in sys.argv[4:6]]
    with h5py.File(reference_path, "r") as f:
        reference = f["embeddings"][()].astype(np.float64)
        reference_lengths = f["lengths"][()] if "lengths" in f else None
    with h5py.File(tfenc_path, "r") as f:
        ours = f["embeddings"][()].astype(np.float64)
        our_lengths = f["lengths"][()] if "lengths" in f else None
    if ours.shape != reference.shape:
        print(f"FAIL: {label}: tfenc shape {ours.shape}, reference {reference.shape}")
        return 1
    if reference_lengths is not None and our_lengths is not None:
        differ = np.flatnonzero(reference_lengths != our_lengths)
        print(f"{label}: token counts differ on {len(differ)} of {len(our_lengths)} lines")
        if len(differ):
            row = differ[0]
            print(f"FAIL: {label}: line {row + 1}: {our_lengths[row]} tokens, reference "
                  f"{reference_lengths[row]}")
            return 1
    cosine = np.sum(ours * reference, axis=1) / (
        np.linalg.norm(ours, axis=1) * np.linalg.norm(reference, axis=1))
    difference = np.max(np.abs(ours - reference), axis=1)
    worst = int(np.argmin(cosine))
    print(f"{label}: {len(cosine)} sentences, cosine min {cosine.min():.9f} "
          f"mean {cosine.mean():.9f} (worst line {worst + 1}), "
          f"max |diff| {difference.max():.3e}")
    if not bounds:
        return 0
    min_cosine, max_difference = bounds
    bad = np.flatnonzero((cosine < min_cosine) | (difference > max_difference))
    for row in bad[:10]:
        print(f"FAIL: {label}: line {row + 1}: cosine {cosine[row]:.8f}, "
              f"max |diff| {difference[row]:.3e}")
    if len(bad):
        print(f"FAIL: {label}: {len(bad)} of {len(cosine)} sentences outside cosine >= "
              f"{min_cosine} and max |diff| <= {max_difference}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
