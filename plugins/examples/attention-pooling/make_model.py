#!/usr/bin/python3
"""Model, input and PyTorch reference for the attention_pooling example job.

usage: make_model.py [OUTDIR] [--seed N]

Writes to OUTDIR (default: this script's directory):
  model.h5     a small pre-norm encoder (token + learned position embeddings,
               two GELU blocks, a final LayerNorm) followed by the example's
               attention pooling, every weight random, in the layout of
               docs/weights.md; the pooling layer's group is /attention_pool
  input.h5     30 documents of random token ids, 1 to 48 long (ragged:
               tokens int32 [T] + offsets int64 [N+1])
  expected.h5  PyTorch's pooled vectors: expected_embeddings [N, d], and
               expected_normalized [N, d] (the same, L2-normalised)

Needs torch and h5py: Debian's python3-torch and python3-h5py serve
/usr/bin/python3. Each document is run through PyTorch alone, without padding,
so the reference needs no attention mask.
"""

import argparse
import os
import sys

import h5py
import numpy as np
import torch
from torch import nn

sys.dont_write_bytecode = True

# Small enough for a test under AddressSanitizer, big enough that several
# heads, several layers and several microbatches (job.ini: batch_tokens 128)
# all take part.
D_MODEL = 32
N_HEADS = 4
D_FF = 64
N_LAYERS = 2
ATTENTION_WIDTH = 16
VOCAB_SIZE = 200
MAX_POSITIONS = 64
N_DOCUMENTS = 30
MAX_LEN = 48


class AttentionPooling(nn.Module):
    """y = sum_t softmax_t(tanh(W x_t + b) . q) x_t, as attention_pooling.c."""

    def __init__(self, d_model, width):
        super().__init__()
        self.projection = nn.Linear(d_model, width)
        self.query = nn.Parameter(torch.randn(width))

    def forward(self, hidden):  # hidden [L, d], one document
        scores = torch.tanh(self.projection(hidden)) @ self.query
        return (torch.softmax(scores, dim=0).unsqueeze(-1) * hidden).sum(0)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.token_embeddings = nn.Embedding(VOCAB_SIZE, D_MODEL)
        self.position_embeddings = nn.Embedding(MAX_POSITIONS, D_MODEL)
        layer = nn.TransformerEncoderLayer(D_MODEL, N_HEADS, dim_feedforward=D_FF, dropout=0.0,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, N_LAYERS, norm=nn.LayerNorm(D_MODEL))
        self.pool = AttentionPooling(D_MODEL, ATTENTION_WIDTH)

    def forward(self, ids):  # ids [L], one document
        positions = torch.arange(ids.shape[0])
        x = self.token_embeddings(ids) + self.position_embeddings(positions)
        hidden = self.encoder(x.unsqueeze(0))[0]
        return self.pool(hidden)


def build(seed):
    """Every parameter random and distinct per layer, so that a weight read
    from the wrong dataset changes the result (default init would leave
    biases at zero and LayerNorms at identity, and copy one layer N times)."""
    torch.manual_seed(seed)
    model = Encoder()
    with torch.no_grad():
        nn.init.normal_(model.position_embeddings.weight, std=0.5)
        norms = [model.encoder.norm]
        for layer in model.encoder.layers:
            layer.self_attn._reset_parameters()
            layer.self_attn.out_proj.reset_parameters()
            nn.init.uniform_(layer.self_attn.in_proj_bias, -0.2, 0.2)
            nn.init.uniform_(layer.self_attn.out_proj.bias, -0.2, 0.2)
            layer.linear1.reset_parameters()
            layer.linear2.reset_parameters()
            norms += [layer.norm1, layer.norm2]
        for norm in norms:
            nn.init.normal_(norm.weight, mean=1.0, std=0.2)
            nn.init.normal_(norm.bias, mean=0.0, std=0.2)
        nn.init.uniform_(model.pool.projection.bias, -0.5, 0.5)
    model.eval()
    return model


def datasets(model):
    """Dataset path -> float32 array, named as docs/weights.md prescribes.
    In a pre-norm block norm1 precedes attention and norm2 the feed-forward."""
    def array(tensor):
        return tensor.detach().to(torch.float32).numpy().copy()

    out = {"/embeddings/token_embeddings": array(model.token_embeddings.weight),
           "/embeddings/position_embeddings": array(model.position_embeddings.weight)}
    for i, layer in enumerate(model.encoder.layers):
        attention, ffn = f"/encoder/{i}/attention", f"/encoder/{i}/ffn"
        out[f"{attention}/qkv_weight"] = array(layer.self_attn.in_proj_weight)
        out[f"{attention}/qkv_bias"] = array(layer.self_attn.in_proj_bias)
        out[f"{attention}/out_weight"] = array(layer.self_attn.out_proj.weight)
        out[f"{attention}/out_bias"] = array(layer.self_attn.out_proj.bias)
        out[f"{attention}/norm/weight"] = array(layer.norm1.weight)
        out[f"{attention}/norm/bias"] = array(layer.norm1.bias)
        out[f"{ffn}/in_weight"] = array(layer.linear1.weight)
        out[f"{ffn}/in_bias"] = array(layer.linear1.bias)
        out[f"{ffn}/out_weight"] = array(layer.linear2.weight)
        out[f"{ffn}/out_bias"] = array(layer.linear2.bias)
        out[f"{ffn}/norm/weight"] = array(layer.norm2.weight)
        out[f"{ffn}/norm/bias"] = array(layer.norm2.bias)
    out["/final_norm/weight"] = array(model.encoder.norm.weight)
    out["/final_norm/bias"] = array(model.encoder.norm.bias)
    out["/attention_pool/projection_weight"] = array(model.pool.projection.weight)
    out["/attention_pool/projection_bias"] = array(model.pool.projection.bias)
    out["/attention_pool/query"] = array(model.pool.query)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("outdir", nargs="?", default=os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()

    model = build(args.seed)
    generator = np.random.default_rng(args.seed)
    lengths = generator.integers(1, MAX_LEN + 1, size=N_DOCUMENTS)
    lengths[0] = 1  # a one-token document: softmax over one score is 1
    documents = [generator.integers(0, VOCAB_SIZE, size=n).astype(np.int32) for n in lengths]

    with torch.no_grad():
        pooled = torch.stack([model(torch.from_numpy(ids).long()) for ids in documents])
        normalized = nn.functional.normalize(pooled, p=2.0, dim=1, eps=1e-12)

    os.makedirs(args.outdir, exist_ok=True)
    with h5py.File(os.path.join(args.outdir, "model.h5"), "w") as f:
        for path, value in datasets(model).items():
            f.create_dataset(path, data=value)
    with h5py.File(os.path.join(args.outdir, "input.h5"), "w") as f:
        f.create_dataset("tokens", data=np.concatenate(documents))
        f.create_dataset("offsets", data=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
    with h5py.File(os.path.join(args.outdir, "expected.h5"), "w") as f:
        f.create_dataset("expected_embeddings", data=pooled.numpy().astype(np.float32))
        f.create_dataset("expected_normalized", data=normalized.numpy().astype(np.float32))
        f.create_dataset("lengths", data=lengths.astype(np.int32))
    print(f"make_model: wrote model.h5, input.h5 and expected.h5 ({N_DOCUMENTS} documents, "
          f"{int(lengths.sum())} tokens) in {args.outdir}")


if __name__ == "__main__":
    main()
