#!/usr/bin/python3
"""Writes random weights for a BERT-style job file: the demo's fallback
model when the all-MiniLM-L6-v2 package cannot be installed.

usage: random_model.py JOB.ini MODEL.h5

Needs only Debian's python3-h5py and python3-numpy (no PyTorch), so that the
demo runs on the runtime dependencies alone. The job must compose what
jobs/bert-text/job.ini composes: an `embedding` layer (learned positions,
token types), a `layernorm` after it, one block of `mha` and `ffn` sublayers
with `layernorm` norms, and pooling. The datasets follow docs/weights.md;
the vectors mean nothing, the pipeline is the real one.
"""

import configparser
import sys

import h5py
import numpy as np


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().split("\n\n")[1])
    job = configparser.ConfigParser(inline_comment_prefixes=(";", "#"))
    job.read(sys.argv[1])
    d = job.getint("model", "d_model")
    vocab_size = job.getint("model", "vocab_size")
    positions = job.getint("model", "max_positions")
    layers = job.getint("encoder", "repeat")
    ffn_width = 4 * d
    rng = np.random.default_rng(7)

    def normal(*shape):
        # BERT's initialisation scale: activations stay of order 1 through
        # the post-norm blocks.
        return (0.02 * rng.standard_normal(shape)).astype(np.float32)

    def norm(group):
        datasets[f"{group}/weight"] = np.ones(d, np.float32)
        datasets[f"{group}/bias"] = np.zeros(d, np.float32)

    datasets = {"embeddings/token_embeddings": normal(vocab_size, d),
                "embeddings/position_embeddings": normal(positions, d),
                "embeddings/token_type_embeddings": normal(2, d)}
    norm("embeddings_norm")
    for i in range(layers):
        attention, ffn = f"encoder/{i}/attention", f"encoder/{i}/ffn"
        for name in ("q", "k", "v", "out"):
            datasets[f"{attention}/{name}_weight"] = normal(d, d)
            datasets[f"{attention}/{name}_bias"] = np.zeros(d, np.float32)
        norm(f"{attention}/norm")
        datasets[f"{ffn}/in_weight"] = normal(ffn_width, d)
        datasets[f"{ffn}/in_bias"] = np.zeros(ffn_width, np.float32)
        datasets[f"{ffn}/out_weight"] = normal(d, ffn_width)
        datasets[f"{ffn}/out_bias"] = np.zeros(d, np.float32)
        norm(f"{ffn}/norm")
    with h5py.File(sys.argv[2], "w") as f:
        for path, value in datasets.items():
            f[path] = value


if __name__ == "__main__":
    main()
