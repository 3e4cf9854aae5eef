#!/usr/bin/python3
"""Writes the corpora of the layout tests: an HDF5 token-id corpus and a
larger text corpus made from an example's lines.

usage: make_inputs.py hdf5 OUT.h5 N_DOCUMENTS VOCAB_SIZE MAX_LENGTH SEED [TRAP_ID]
       make_inputs.py text IN.txt OUT.txt COPIES
       make_inputs.py heads MODEL.h5 OUT.h5
The last copies a bert-text model (d_model 64, 512 tokens) with random
heads beside its encoder: a classifier of 3 labels (/scores), a SPLADE
head over its vocabulary (/splade) and a ColBERT projection to 16
(/colbert).

The HDF5 corpus is ragged (tokens + offsets) with lengths 1..MAX_LENGTH and
ids below VOCAB_SIZE - 1; with TRAP_ID, the LAST document alone holds that
id (the failing-rank test's `fail` layer trips on it, so the failure happens
on the last replica).
"""

import sys

import numpy as np


def hdf5(path, n_documents, vocab_size, max_length, seed, trap=None):
    import h5py

    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, max_length + 1, size=n_documents)
    offsets = np.zeros(n_documents + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(lengths)
    tokens = rng.integers(0, vocab_size - 1, size=int(offsets[-1])).astype(np.int32)
    if trap is not None:
        tokens[tokens == trap] = 0
        tokens[offsets[-2]] = trap
    with h5py.File(path, "w") as f:
        f["tokens"] = tokens
        f["offsets"] = offsets


def text(source, path, copies):
    lines = open(source, encoding="utf-8").read().splitlines()
    with open(path, "w", encoding="utf-8") as out:
        for copy in range(copies):
            for i, line in enumerate(lines):
                # Rotate words so the copies are different documents.
                words = line.split()
                k = (copy + i) % max(1, len(words))
                out.write(" ".join(words[k:] + words[:k]) + "\n")


def heads(model, path):
    import shutil
    import h5py
    rng = np.random.default_rng(0)
    shutil.copy(model, path)
    with h5py.File(path, "a") as f:
        f["/scores/out_weight"] = rng.standard_normal((3, 64), dtype=np.float32)
        f["/scores/out_bias"] = rng.standard_normal(3, dtype=np.float32)
        f["/scores/dense_weight"] = rng.standard_normal((64, 64), dtype=np.float32) * 0.1
        f["/scores/dense_bias"] = np.zeros(64, np.float32)
        f["/splade/transform_weight"] = rng.standard_normal((64, 64), dtype=np.float32) * 0.1
        f["/splade/norm_weight"] = np.ones(64, np.float32)
        f["/splade/norm_bias"] = np.zeros(64, np.float32)
        f["/splade/decoder_weight"] = rng.standard_normal((512, 64), dtype=np.float32) * 0.2
        f["/splade/decoder_bias"] = np.zeros(512, np.float32)
        f["/colbert/weight"] = rng.standard_normal((16, 64), dtype=np.float32)


if __name__ == "__main__":
    if sys.argv[1] == "heads":
        heads(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "hdf5":
        trap = int(sys.argv[7]) if len(sys.argv) > 7 else None
        hdf5(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), trap)
    else:
        text(sys.argv[2], sys.argv[3], int(sys.argv[4]))
