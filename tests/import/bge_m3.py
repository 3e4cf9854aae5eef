#!/usr/bin/env python3
"""A BGE-M3-shaped folder on random weights, and what tfenc must reproduce
from it: FlagEmbedding's BGEM3FlagModel written in PyTorch over
transformers' XLMRobertaModel.

usage: bge_m3.py make SENTENCES.txt OUT_DIR
         OUT_DIR/model/: config.json (xlm-roberta, scaled down),
         pytorch_model.bin (XLMRobertaModel's tensors, no prefix, as
         BAAI/bge-m3 ships them), an XLM-R tokenizer (jina_v3.py's), and
         colbert_linear.pt (Linear(d, d)) and sparse_linear.pt (Linear(d, 1)),
         torch.save'd state dicts as FlagEmbedding saves them;
         OUT_DIR/reference.h5: dense [N, d], colbert [T, d] with
         colbert_offsets [N+1], and the sparse rows as CSR (sparse_indptr,
         sparse_indices ascending, sparse_values), each sentence alone;
         OUT_DIR/ids.h5: the same sentences' token ids (tokens, offsets),
         a token-id corpus that must give the same rows;
         OUT_DIR/bad-shape/: sparse_linear.pt's weight [2, d];
         OUT_DIR/no-bias/: colbert_linear.pt without its bias.
       bge_m3.py compare REFERENCE.h5 OUTPUT.h5
         dense min cosine >= 0.99999, colbert per token max |diff| <= 1e-5,
         the same sparse ids per row and their weights within 1e-5.
       bge_m3.py same BASELINE.h5 OTHER.h5
         both complete, and every dataset of every head (the root's vectors
         and offsets, /outputs/dense, /outputs/sparse) bitwise equal.

The formulas (FlagEmbedding's bge_m3 modeling, read and not copied), from
last_hidden_state h of one sentence's ids (<s> ... </s>, no padding):
  dense   = normalize(h[0])
  colbert = normalize(colbert_linear(h[1:]))         every token after <s>
  sparse  = relu(sparse_linear(h)), per token id its largest weight, the
            ids of cls, eos, pad and unk and every weight <= 0 left out.
"""
import os
import shutil
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from jina_v3 import make_tokenizer  # noqa: E402

D, HEADS, LAYERS, FFN = 64, 4, 2, 128
# Bars at fp32. dense: the project's pooled bar. colbert: each value of a
# unit vector of 64 after 2 layers and a 64 x 64 map, where float32's
# rounding of sums of 64 terms in another order is ~1e-7 per value; 1e-5
# is 100 x that and still 1/1000 of a typical value (1/sqrt(64) = 0.125).
# sparse: one dot product of 64 terms plus a bias on O(1) states, the same
# rounding: 1e-5.
DENSE_MIN_COSINE, COLBERT_BAR, SPARSE_BAR = 0.99999, 1e-5, 1e-5


def reference(model, colbert, sparse, tokenizer, lines):
    dropped = {tokenizer.cls_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id,
               tokenizer.unk_token_id}
    dense, vectors, offsets = [], [], [0]
    indptr, indices, values = [0], [], []
    tokens = []
    with torch.no_grad():
        for line in lines:
            ids = tokenizer(line, return_tensors="pt")["input_ids"]
            tokens.append(ids[0])
            hidden = model(input_ids=ids).last_hidden_state[0]
            dense.append(F.normalize(hidden[0], dim=-1))
            kept = F.normalize(colbert(hidden[1:]), dim=-1)
            vectors.append(kept)
            offsets.append(offsets[-1] + kept.shape[0])
            weights = torch.relu(sparse(hidden)).squeeze(-1)
            best = {}
            for weight, token in zip(weights.tolist(), ids[0].tolist()):
                if token not in dropped and weight > 0 and weight > best.get(token, 0.0):
                    best[token] = weight
            for token in sorted(best):
                indices.append(token)
                values.append(best[token])
            indptr.append(len(indices))
    return {"dense": torch.stack(dense).numpy().astype(np.float32),
            "colbert": torch.cat(vectors).numpy().astype(np.float32),
            "colbert_offsets": np.array(offsets, dtype=np.int64),
            "sparse_indptr": np.array(indptr, dtype=np.int64),
            "sparse_indices": np.array(indices, dtype=np.int32),
            "sparse_values": np.array(values, dtype=np.float32)}, tokens


def make(sentences_path, out_dir):
    from transformers import XLMRobertaConfig, XLMRobertaModel
    torch.manual_seed(0)
    model_dir = os.path.join(out_dir, "model")
    os.makedirs(model_dir, exist_ok=True)
    tokenizer = make_tokenizer(sentences_path, model_dir)
    config = XLMRobertaConfig(vocab_size=len(tokenizer), hidden_size=D, num_attention_heads=HEADS,
                              num_hidden_layers=LAYERS, intermediate_size=FFN,
                              max_position_embeddings=8194, type_vocab_size=1, pad_token_id=1,
                              bos_token_id=0, eos_token_id=2, layer_norm_eps=1e-5,
                              architectures=["XLMRobertaModel"])
    model = XLMRobertaModel(config, add_pooling_layer=False).eval()
    # transformers' initialisation (std 0.02) leaves the layers near the
    # identity; larger weights make every layer count.
    with torch.no_grad():
        for name, tensor in model.named_parameters():
            if name.endswith("weight") and "LayerNorm" not in name:
                tensor.normal_(0.0, 0.2)
            elif "LayerNorm" not in name:
                tensor.normal_(0.0, 0.1)
    model.save_pretrained(model_dir, safe_serialization=False)
    colbert, sparse = torch.nn.Linear(D, D), torch.nn.Linear(D, 1)
    torch.save(colbert.state_dict(), os.path.join(model_dir, "colbert_linear.pt"))
    torch.save(sparse.state_dict(), os.path.join(model_dir, "sparse_linear.pt"))
    with open(sentences_path, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    expected, tokens = reference(model, colbert, sparse, tokenizer, lines)
    with h5py.File(os.path.join(out_dir, "reference.h5"), "w") as f:
        for name, data in expected.items():
            f[name] = data
    with h5py.File(os.path.join(out_dir, "ids.h5"), "w") as f:
        f["tokens"] = torch.cat(tokens).numpy().astype(np.int32)
        f["offsets"] = np.cumsum([0] + [len(row) for row in tokens]).astype(np.int64)
    bad = os.path.join(out_dir, "bad-shape")
    shutil.copytree(model_dir, bad)
    torch.save({"weight": torch.zeros(2, D), "bias": torch.zeros(2)},
               os.path.join(bad, "sparse_linear.pt"))
    no_bias = os.path.join(out_dir, "no-bias")
    shutil.copytree(model_dir, no_bias)
    torch.save({"weight": colbert.weight.detach().clone()},
               os.path.join(no_bias, "colbert_linear.pt"))


def compare(reference_path, output_path):
    failed = 0
    with h5py.File(reference_path, "r") as ref, h5py.File(output_path, "r") as out:
        dense = out["outputs/dense/embeddings"][()]
        cosine = (dense * ref["dense"][()]).sum(1) / np.linalg.norm(dense, axis=1)
        ok = cosine.min() >= DENSE_MIN_COSINE
        failed += not ok
        print(f"bge-m3 dense: min cosine {cosine.min():.8f} over {len(cosine)} rows "
              f"({'ok' if ok else 'FAIL'}, bar {DENSE_MIN_COSINE})")

        same_offsets = np.array_equal(out["offsets"][()], ref["colbert_offsets"][()])
        failed += within(f"colbert: {len(ref['colbert'])} token vectors, offsets",
                         same_offsets, out["vectors"], ref["colbert"], COLBERT_BAR)
        group = out["outputs/sparse"]
        same_ids = (np.array_equal(group["sparse_indptr"][()], ref["sparse_indptr"][()]) and
                    np.array_equal(group["sparse_indices"][()], ref["sparse_indices"][()]))
        failed += within(f"sparse: {len(ref['sparse_values'])} weights, token ids", same_ids,
                         group["sparse_values"], ref["sparse_values"], SPARSE_BAR)
    return failed


def within(what, same_layout, values, reference_values, bar):
    """1 (and FAIL) unless the layout agrees and every value is within bar."""
    diff = np.abs(values[()] - reference_values[()]).max() if same_layout else float("nan")
    ok = bool(diff <= bar)
    print(f"bge-m3 {what} {'equal' if same_layout else 'DIFFER'}, max |diff| {diff:.3g} "
          f"({'ok' if ok else 'FAIL'}, bar {bar})")
    return 0 if ok else 1


def same(baseline_path, other_path):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                    "pipeline"))
    from compare_layouts import load  # every dataset of the file, groups' too
    baseline, other = load(baseline_path), load(other_path)
    differ = sorted(name for name in set(baseline) | set(other)
                    if name not in baseline or name not in other
                    or np.asarray(baseline[name]).tobytes() != np.asarray(other[name]).tobytes())
    if baseline["complete"] != 1 or differ:
        print(f"FAIL {other_path} against {baseline_path}: complete {baseline['complete']}, "
              f"{other['complete']}; datasets that differ: {differ}")
        return 1
    print(f"{other_path}: {len(baseline) - 1} datasets bitwise equal to {baseline_path}'s")
    return 0


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "same":
        return same(sys.argv[2], sys.argv[3])
    if len(sys.argv) == 4 and sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3])
        return 0
    if len(sys.argv) == 4 and sys.argv[1] == "compare":
        return 1 if compare(sys.argv[2], sys.argv[3]) else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
