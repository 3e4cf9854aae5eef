#!/usr/bin/env python3
"""Reference embeddings for the sentence-transformers features a job turns
on: a prompt put before every document, and a Matryoshka width.

usage: st_features.py MODEL_DIR SENTENCES.txt OUT.h5 PROMPT TRUNCATE_DIM
Writes `embeddings [N, TRUNCATE_DIM]`: SentenceTransformer(MODEL_DIR,
prompts={"query": PROMPT}, truncate_dim=TRUNCATE_DIM).encode(sentences,
prompt_name="query", normalize_embeddings=True), i.e. prompt + text through
the model, the first TRUNCATE_DIM values kept, scaled to unit length."""
import sys

import h5py
import numpy as np
from sentence_transformers import SentenceTransformer


def main():
    model_dir, sentences_path, out_path, prompt, width = sys.argv[1:6]
    with open(sentences_path, encoding="utf-8") as f:
        sentences = [line.rstrip("\n") for line in f]
    model = SentenceTransformer(model_dir, device="cpu", prompts={"query": prompt},
                                truncate_dim=int(width))
    embeddings = model.encode(sentences, prompt_name="query", batch_size=32,
                              normalize_embeddings=True, convert_to_numpy=True,
                              show_progress_bar=False)
    with h5py.File(out_path, "w") as out:
        out["embeddings"] = np.asarray(embeddings, dtype=np.float32)


if __name__ == "__main__":
    main()
