#!/usr/bin/python3
"""Model, input and PyTorch reference for the scale_norm example job.

usage: make_model.py [OUTDIR] [--seed N]

Writes to OUTDIR (default: this script's directory):
  model.h5     a small pre-norm encoder (token + learned position embeddings,
               two GELU blocks whose norms are ScaleNorm, a final ScaleNorm,
               mean pooling), every weight random, in the layout of
               docs/weights.md; each ScaleNorm's g is the dataset `scale` [1]
               of its group (/encoder/{i}/attention/norm, ..., /final_norm)
  input.h5     30 documents of random token ids, 1 to 48 long (ragged:
               tokens int32 [T] + offsets int64 [N+1])
  expected.h5  PyTorch's pooled vectors: expected_embeddings [N, d], and
               expected_large_eps [N, d], the same with the final norm's
               eps = LARGE_EPS (larger than every norm it sees, so that the
               max() in g x / max(||x||, eps) takes eps)

Needs torch and h5py: Debian's python3-torch and python3-h5py serve
/usr/bin/python3. Each document is run through PyTorch alone, without
padding, so the reference needs no attention mask.
"""

import argparse
import os
import sys

import h5py
import numpy as np
import torch
from torch import nn

sys.dont_write_bytecode = True

D_MODEL = 32
N_HEADS = 4
D_FF = 64
N_LAYERS = 2
VOCAB_SIZE = 200
MAX_POSITIONS = 64
N_DOCUMENTS = 30
MAX_LEN = 48
EPS = 1e-5
LARGE_EPS = 1000.0  # job.ini's final norm under --set final_norm.eps=1000


class ScaleNorm(nn.Module):
    """y = g x / max(||x||_2, eps) over the last dimension, as scale_norm.c."""

    def __init__(self, eps=EPS):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))
        self.eps = eps

    def forward(self, x):
        return self.scale * x / x.norm(dim=-1, keepdim=True).clamp(min=self.eps)


class Block(nn.Module):
    """Pre-norm: x + attention(norm(x)), then x + ffn(norm(x))."""

    def __init__(self):
        super().__init__()
        self.attention_norm = ScaleNorm()
        self.attention = nn.MultiheadAttention(D_MODEL, N_HEADS, batch_first=True)
        self.ffn_norm = ScaleNorm()
        self.linear1 = nn.Linear(D_MODEL, D_FF)
        self.linear2 = nn.Linear(D_FF, D_MODEL)

    def forward(self, x):  # x [1, L, d]
        h = self.attention_norm(x)
        x = x + self.attention(h, h, h, need_weights=False)[0]
        return x + self.linear2(nn.functional.gelu(self.linear1(self.ffn_norm(x))))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.token_embeddings = nn.Embedding(VOCAB_SIZE, D_MODEL)
        self.position_embeddings = nn.Embedding(MAX_POSITIONS, D_MODEL)
        self.blocks = nn.ModuleList(Block() for _ in range(N_LAYERS))
        self.final_norm = ScaleNorm()

    def forward(self, ids):  # ids [L], one document; returns its mean-pooled vector
        x = self.token_embeddings(ids) + self.position_embeddings(torch.arange(ids.shape[0]))
        x = x.unsqueeze(0)
        for block in self.blocks:
            x = block(x)
        return self.final_norm(x)[0].mean(0)


def build(seed):
    """Every parameter random and distinct per layer, so that a weight read
    from the wrong dataset changes the result (each g differs)."""
    torch.manual_seed(seed)
    model = Encoder()
    with torch.no_grad():
        nn.init.normal_(model.position_embeddings.weight, std=0.5)
        norms = [model.final_norm]
        for block in model.blocks:
            nn.init.uniform_(block.attention.in_proj_bias, -0.2, 0.2)
            nn.init.uniform_(block.attention.out_proj.bias, -0.2, 0.2)
            norms += [block.attention_norm, block.ffn_norm]
        for norm in norms:
            nn.init.uniform_(norm.scale, 2.0, 8.0)
    model.eval()
    return model


def datasets(model):
    """Dataset path -> float32 array, named as docs/weights.md prescribes."""
    def array(tensor):
        return tensor.detach().to(torch.float32).numpy().copy()

    out = {"/embeddings/token_embeddings": array(model.token_embeddings.weight),
           "/embeddings/position_embeddings": array(model.position_embeddings.weight)}
    for i, block in enumerate(model.blocks):
        attention, ffn = f"/encoder/{i}/attention", f"/encoder/{i}/ffn"
        out[f"{attention}/qkv_weight"] = array(block.attention.in_proj_weight)
        out[f"{attention}/qkv_bias"] = array(block.attention.in_proj_bias)
        out[f"{attention}/out_weight"] = array(block.attention.out_proj.weight)
        out[f"{attention}/out_bias"] = array(block.attention.out_proj.bias)
        out[f"{attention}/norm/scale"] = array(block.attention_norm.scale)
        out[f"{ffn}/in_weight"] = array(block.linear1.weight)
        out[f"{ffn}/in_bias"] = array(block.linear1.bias)
        out[f"{ffn}/out_weight"] = array(block.linear2.weight)
        out[f"{ffn}/out_bias"] = array(block.linear2.bias)
        out[f"{ffn}/norm/scale"] = array(block.ffn_norm.scale)
    out["/final_norm/scale"] = array(model.final_norm.scale)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", nargs="?", default=os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    model = build(args.seed)
    generator = np.random.default_rng(args.seed)
    lengths = generator.integers(1, MAX_LEN + 1, size=N_DOCUMENTS)
    lengths[0] = 1  # a one-token document
    documents = [generator.integers(0, VOCAB_SIZE, size=n).astype(np.int32) for n in lengths]

    with torch.no_grad():
        pooled = torch.stack([model(torch.from_numpy(ids).long()) for ids in documents])
        model.final_norm.eps = LARGE_EPS
        large_eps = torch.stack([model(torch.from_numpy(ids).long()) for ids in documents])

    os.makedirs(args.outdir, exist_ok=True)
    with h5py.File(os.path.join(args.outdir, "model.h5"), "w") as f:
        for path, value in datasets(model).items():
            f.create_dataset(path, data=value)
    with h5py.File(os.path.join(args.outdir, "input.h5"), "w") as f:
        f.create_dataset("tokens", data=np.concatenate(documents))
        f.create_dataset("offsets", data=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
    with h5py.File(os.path.join(args.outdir, "expected.h5"), "w") as f:
        f.create_dataset("expected_embeddings", data=pooled.numpy().astype(np.float32))
        f.create_dataset("expected_large_eps", data=large_eps.numpy().astype(np.float32))
        f.create_dataset("lengths", data=lengths.astype(np.int32))
    print(f"make_model: wrote model.h5, input.h5 and expected.h5 ({N_DOCUMENTS} documents, "
          f"{int(lengths.sum())} tokens) in {args.outdir}")


if __name__ == "__main__":
    main()
