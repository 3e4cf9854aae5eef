#!/usr/bin/env python3
"""Reference sentence embeddings from sentence-transformers itself: what
tfenc-import + tfenc-batch must reproduce.

usage: st_reference.py MODEL_DIR SENTENCES.txt OUT_DIR
Writes OUT_DIR/reference.h5: `embeddings [N, d]` (float32), one row per line
of SENTENCES.txt, computed by SentenceTransformer.encode(...,
normalize_embeddings=True), and `lengths [N]`, the tokens of each line
after sentence-transformers' truncation; and OUT_DIR/ids.h5: those token
ids as tfenc's HDF5 corpus (`tokens` [T] int32, `offsets` [N+1]), so that
a model's weights can be checked apart from tfenc's tokenizer. One
directory, so that tests/harness/generate keeps both."""
import os
import sys

import h5py
import numpy as np
import sentence_transformers
import torch
import transformers
from sentence_transformers import SentenceTransformer


def main():
    model_dir, sentences_path, out_dir = sys.argv[1:4]
    os.makedirs(out_dir, exist_ok=True)
    print(f"st_reference: sentence-transformers {sentence_transformers.__version__}, "
          f"transformers {transformers.__version__}, torch {torch.__version__}")
    with open(sentences_path, encoding="utf-8") as f:
        sentences = [line.rstrip("\n") for line in f]
    model = SentenceTransformer(model_dir, device="cpu")
    print(f"st_reference: {len(sentences)} sentences, max_seq_length {model.max_seq_length}")
    embeddings = model.encode(sentences, batch_size=32, normalize_embeddings=True,
                              convert_to_numpy=True, show_progress_bar=False)
    ids = []
    for first in range(0, len(sentences), 64):
        features = model.tokenize(sentences[first:first + 64])
        for row, mask in zip(features["input_ids"], features["attention_mask"]):
            ids.append(row[mask.bool()].numpy().astype(np.int32))
    with h5py.File(os.path.join(out_dir, "reference.h5"), "w") as out:
        out["embeddings"] = np.asarray(embeddings, dtype=np.float32)
        out["lengths"] = np.array([len(row) for row in ids], dtype=np.int64)
    with h5py.File(os.path.join(out_dir, "ids.h5"), "w") as out:
        out["tokens"] = np.concatenate(ids)
        out["offsets"] = np.cumsum([0] + [len(row) for row in ids]).astype(np.int64)


if __name__ == "__main__":
    main()
