#!/usr/bin/python3
"""Weights, input and NumPy's scores for the scores_head example job.

usage: make_model.py [OUTDIR] [--seed N]

Writes to OUTDIR (default: this script's directory):
  model.h5     token and position embeddings, a LayerNorm and the head's
               /scores/weight [3, 32] and /scores/bias [3], every weight random
  input.h5     30 documents of random token ids, 1 to 48 long (tokens int32
               [T] + offsets int64 [N+1])
  expected.h5  expected_scores [N, 3]: sigmoid(W x_0 + b) of each document's
               first token after the embeddings and the norm, in float64

Needs numpy and h5py (Debian's python3-numpy and python3-h5py)."""

import argparse
import os

import h5py
import numpy as np

D_MODEL, LABELS, VOCAB_SIZE, MAX_POSITIONS, N_DOCUMENTS, MAX_LEN = 32, 3, 200, 64, 30, 48


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", nargs="?", default=os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    # Every weight random and of unit gain, so that a wrong one shows.
    weights = {
        "/embeddings/token_embeddings": rng.normal(size=(VOCAB_SIZE, D_MODEL)),
        "/embeddings/position_embeddings": rng.normal(size=(MAX_POSITIONS, D_MODEL)),
        "/norm/weight": rng.normal(1.0, 0.2, size=D_MODEL),
        "/norm/bias": rng.normal(0.0, 0.2, size=D_MODEL),
        "/scores/weight": rng.normal(size=(LABELS, D_MODEL)) / D_MODEL ** 0.5,
        "/scores/bias": rng.normal(0.0, 0.5, size=LABELS),
    }
    weights = {name: value.astype(np.float32) for name, value in weights.items()}
    lengths = rng.integers(1, MAX_LEN + 1, size=N_DOCUMENTS)
    documents = [rng.integers(0, VOCAB_SIZE, size=n).astype(np.int32) for n in lengths]

    w = {name: value.astype(np.float64) for name, value in weights.items()}
    first = np.stack([w["/embeddings/token_embeddings"][ids[0]] for ids in documents])
    first += w["/embeddings/position_embeddings"][0]
    mean = first.mean(axis=1, keepdims=True)
    variance = ((first - mean) ** 2).mean(axis=1, keepdims=True)
    normed = (first - mean) / np.sqrt(variance + 1e-5) * w["/norm/weight"] + w["/norm/bias"]
    scores = 1.0 / (1.0 + np.exp(-(normed @ w["/scores/weight"].T + w["/scores/bias"])))

    os.makedirs(args.outdir, exist_ok=True)
    with h5py.File(os.path.join(args.outdir, "model.h5"), "w") as f:
        for name, value in weights.items():
            f[name] = value
    with h5py.File(os.path.join(args.outdir, "input.h5"), "w") as f:
        f["tokens"] = np.concatenate(documents)
        f["offsets"] = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    with h5py.File(os.path.join(args.outdir, "expected.h5"), "w") as f:
        f["expected_scores"] = scores
    print(f"make_model: wrote model.h5, input.h5 and expected.h5 ({N_DOCUMENTS} documents, "
          f"{LABELS} scores each) in {args.outdir}")


if __name__ == "__main__":
    main()
