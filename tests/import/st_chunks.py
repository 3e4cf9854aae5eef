#!/usr/bin/env python3
"""The reference for long documents cut into chunks: what
sentence-transformers' model computes for each chunk's token ids.

usage: st_chunks.py MODEL_DIR DOCUMENTS.txt MAX_SEQ_LEN OVERLAP OUT.h5

Each line of DOCUMENTS.txt is tokenized by the model's own (Hugging Face)
tokenizer without special tokens; its pieces are cut into chunks of
MAX_SEQ_LEN - 2 pieces starting every MAX_SEQ_LEN - 2 - OVERLAP pieces (the
last chunk ends with the document), each wrapped in [CLS] ... [SEP], and
run through the SentenceTransformer (transformer, pooling, normalize). A
document that fits is one chunk. Writes `chunks [C, d]` (every chunk's
vector, document by document), `counts [N]`, `mean [N, d]` (each
document's chunks' mean) and `unit_mean [N, d]` (that mean L2-normalised
as the model's Normalize module does, torch.nn.functional.normalize: the
row a model that normalises promises)."""
import sys

import h5py
import numpy as np
import torch
from sentence_transformers import SentenceTransformer


def main():
    model_dir, documents_path, max_seq_len, overlap, out_path = sys.argv[1:6]
    max_seq_len, overlap = int(max_seq_len), int(overlap)
    model = SentenceTransformer(model_dir, device="cpu")
    tokenizer = model.tokenizer
    room, step = max_seq_len - 2, max_seq_len - 2 - overlap
    with open(documents_path, encoding="utf-8") as f:
        documents = [line.rstrip("\n") for line in f]
    vectors, counts = [], []
    for text in documents:
        pieces = tokenizer(text, add_special_tokens=False)["input_ids"]
        starts = [0]
        while starts[-1] + room < len(pieces):
            starts.append(starts[-1] + step)
        counts.append(len(starts))
        for start in starts:
            ids = [tokenizer.cls_token_id] + pieces[start:start + room] + [tokenizer.sep_token_id]
            features = {"input_ids": torch.tensor([ids]),
                        "attention_mask": torch.ones(1, len(ids), dtype=torch.long),
                        "token_type_ids": torch.zeros(1, len(ids), dtype=torch.long)}
            with torch.no_grad():
                vectors.append(model(features)["sentence_embedding"][0].numpy())
    vectors = np.asarray(vectors, dtype=np.float32)
    means, at = [], 0
    for n in counts:
        means.append(vectors[at:at + n].mean(axis=0))
        at += n
    unit_means = torch.nn.functional.normalize(torch.tensor(np.asarray(means)), p=2, dim=1)
    with h5py.File(out_path, "w") as out:
        out["chunks"] = vectors
        out["counts"] = np.asarray(counts, dtype=np.int32)
        out["mean"] = np.asarray(means, dtype=np.float32)
        out["unit_mean"] = unit_means.numpy().astype(np.float32)
    print(f"st_chunks: {len(documents)} documents, {len(vectors)} chunks of up to "
          f"{max_seq_len} tokens, overlap {overlap}")


if __name__ == "__main__":
    main()
