#!/usr/bin/env python3
"""A nomic-embed-text-v2-moe-shaped checkpoint on random weights, and what
tfenc must reproduce from it.

usage: nomic_moe.py make SENTENCES.txt OUT_DIR
  OUT_DIR/model/: config.json with the published model's keys (model_type
  nomic_bert, activation_function gelu, rotary_emb_fraction 1, num_experts 8,
  moe_top_k 2, moe_every_n_layers 2, moe_impl megablocks,
  moe_normalize_expert_weights false, pad_vocab_size_multiple 64, type_vocab_size
  1) at small sizes (d 64, 4 heads, 4 layers, n_inner 128), model.safetensors
  under the published checkpoint's names (encoder.layers.N.mlp.fc1/fc2 in the
  dense layers; mlp.router.layer.weight, mlp.experts.mlp.w1, w2 and
  mlp.experts.bias in layers 1 and 3), an XLM-R tokenizer (as jina_v3.py
  makes it) and sentence-transformers' Pooling (mean) and Normalize;
  OUT_DIR/reference.h5: `embeddings [N, d]` (each sentence alone,
  mean-pooled and normalised), `lengths [N]` and `tokens_per_expert [2, 8]`
  (each moe layer's routed tokens over the corpus);
  OUT_DIR/bad-experts/: layer 1 with 7 experts' router, w1 and w2;
  OUT_DIR/missing-expert/: layer 3 without mlp.experts.mlp.w2.

The reference is written from the published code, read and not copied:
nomic-ai/contrastors (models/encoder/modeling_nomic_bert.py: which layers
are moe layers, i % moe_every_n_layers == 1; layers/block.py: the post-norm
block) and megablocks as nomic-ai/megablocks has it (layers/router.py's
LearnedRouter: softmax over the experts of a bias-free linear map, then
torch.topk, normalized only when moe_normalize_expert_weights is set;
the dMoE's MLP experts, gelu(x w1_e^T) w2_e with w1, w2 stored [E f, d],
weighted by their router weight, summed, plus the shared bias). The
experts loop here over experts, gathering their tokens, as a dropless MoE
does; every token's top 2 differ by more than rounding, so torch.topk's
unspecified order of equal values never matters."""
import json
import os
import shutil
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from jina_v3 import make_tokenizer, write_mean_pooling  # noqa: E402
from reference_models import rotary_self_attention  # noqa: E402

D, HEADS, LAYERS, FFN, EXPERTS, TOP_K, EVERY = 64, 4, 4, 128, 8, 2, 2
PAD_MULTIPLE, BASE, EPS = 64, 10000.0, 1e-5


def is_moe(layer):
    return layer % EVERY == 1


def make_weights(vocab, generator, experts=EXPERTS):
    def normal(*shape, std=1.0):
        return torch.randn(*shape, generator=generator) * std

    weights = {}

    def linear(name, rows, columns):
        weights[f"{name}.weight"] = normal(rows, columns, std=columns ** -0.5)
        weights[f"{name}.bias"] = normal(rows, std=0.1)

    def norm(name):
        weights[f"{name}.weight"] = 1 + normal(D, std=0.1)
        weights[f"{name}.bias"] = normal(D, std=0.1)

    padded = (vocab + PAD_MULTIPLE - 1) // PAD_MULTIPLE * PAD_MULTIPLE
    weights["embeddings.word_embeddings.weight"] = normal(padded, D)
    weights["embeddings.token_type_embeddings.weight"] = normal(1, D)
    norm("emb_ln")
    for layer in range(LAYERS):
        prefix = f"encoder.layers.{layer}"
        linear(f"{prefix}.attn.Wqkv", 3 * D, D)
        linear(f"{prefix}.attn.out_proj", D, D)
        norm(f"{prefix}.norm1")
        norm(f"{prefix}.norm2")
        if is_moe(layer):
            # A router of gain 2, so that the softmax picks clear winners
            # and every expert gets tokens.
            weights[f"{prefix}.mlp.router.layer.weight"] = normal(experts, D, std=D ** -0.5)
            weights[f"{prefix}.mlp.experts.mlp.w1"] = normal(experts * FFN, D, std=D ** -0.5)
            weights[f"{prefix}.mlp.experts.mlp.w2"] = normal(experts * FFN, D, std=FFN ** -0.5)
            weights[f"{prefix}.mlp.experts.bias"] = normal(D, std=0.1)
        else:
            linear(f"{prefix}.mlp.fc1", FFN, D)
            linear(f"{prefix}.mlp.fc2", D, FFN)
    return weights


class Reference:
    """NomicBertModel's forward for one unpadded sequence."""

    def __init__(self, weights):
        self.w = weights
        self.tokens_per_expert = np.zeros((LAYERS // EVERY, EXPERTS), dtype=np.int64)
        self.closest = float("inf")  # the smallest ratio of a k-th to a (k+1)-th probability
        self.inputs = None  # when a list: each moe layer's inputs are kept in it

    def norm(self, name, x):
        return F.layer_norm(x, (D,), self.w[f"{name}.weight"], self.w[f"{name}.bias"], EPS)

    def linear(self, name, x):
        return F.linear(x, self.w[f"{name}.weight"], self.w[f"{name}.bias"])

    def moe(self, prefix, x, index):
        """megablocks' dMoE on x [L, d]: the router's softmax and top k,
        then each expert over the tokens routed to it."""
        w = self.w
        if self.inputs is not None:
            self.inputs.append((index, x))
        scores = F.linear(x, w[f"{prefix}.mlp.router.layer.weight"]).softmax(dim=-1)
        top_weights, top_experts = torch.topk(scores, TOP_K, dim=-1)
        ordered = scores.sort(dim=-1, descending=True).values
        self.closest = min(self.closest, float((ordered[:, TOP_K - 1] / ordered[:, TOP_K]).min()))
        w1 = w[f"{prefix}.mlp.experts.mlp.w1"].view(EXPERTS, FFN, D)
        w2 = w[f"{prefix}.mlp.experts.mlp.w2"].view(EXPERTS, FFN, D)
        out = torch.zeros_like(x)
        for expert in range(EXPERTS):
            tokens, rank = torch.where(top_experts == expert)
            self.tokens_per_expert[index, expert] += len(tokens)
            if len(tokens) == 0:
                continue
            y = F.gelu(x[tokens] @ w1[expert].T) @ w2[expert]
            out.index_add_(0, tokens, top_weights[tokens, rank, None] * y)
        return out + w[f"{prefix}.mlp.experts.bias"]

    def forward(self, ids):
        w = self.w
        h = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.token_type_embeddings.weight"][torch.zeros_like(ids)])
        h = self.norm("emb_ln", h)[None]
        for layer in range(LAYERS):
            prefix = f"encoder.layers.{layer}"
            context = rotary_self_attention(self.linear(f"{prefix}.attn.Wqkv", h), HEADS, BASE)
            h = self.norm(f"{prefix}.norm1", h + self.linear(f"{prefix}.attn.out_proj", context))
            if is_moe(layer):
                mlp = self.moe(prefix, h[0], layer // EVERY)[None]
            else:
                mlp = self.linear(f"{prefix}.mlp.fc2", F.gelu(self.linear(f"{prefix}.mlp.fc1", h)))
            h = self.norm(f"{prefix}.norm2", h + mlp)
        return h[0]


def balance_routers(weights, tokenizer, lines):
    """Trained routers spread the tokens (the load-balancing loss); random
    ones send nearly all to two experts, since the layers' inputs share a
    large mean. Each router, in layer order, loses its rows' component
    along its inputs' mean and is scaled to logits of unit spread."""
    for index in range(LAYERS // EVERY):
        reference = Reference(weights)
        reference.inputs = []
        with torch.no_grad():
            for line in lines[:64]:
                reference.forward(tokenizer(line, return_tensors="pt")["input_ids"][0])
        x = torch.cat([x for i, x in reference.inputs if i == index])
        mean = x.mean(0)
        mean = mean / mean.norm()
        name = f"encoder.layers.{index * EVERY + 1}.mlp.router.layer.weight"
        router = weights[name] - torch.outer(weights[name] @ mean, mean)
        weights[name] = router / F.linear(x, router).std()


def config_json(vocab):
    return {"model_type": "nomic_bert", "architectures": ["NomicBertModel"],
            "activation_function": "gelu", "n_embd": D, "n_head": HEADS, "n_layer": LAYERS,
            "n_inner": FFN, "n_positions": 2048, "max_trained_positions": 2048,
            "vocab_size": vocab, "pad_vocab_size_multiple": PAD_MULTIPLE,
            "type_vocab_size": 1, "layer_norm_epsilon": EPS, "rotary_emb_fraction": 1.0,
            "rotary_emb_base": BASE, "rotary_emb_interleaved": False,
            "rotary_emb_scale_base": None, "rotary_scaling_factor": None, "prenorm": False,
            "parallel_block": False, "use_rms_norm": False, "causal": False,
            "qkv_proj_bias": True, "mlp_fc1_bias": True, "mlp_fc2_bias": True,
            "num_experts": EXPERTS, "moe_top_k": TOP_K, "moe_every_n_layers": EVERY,
            "moe_impl": "megablocks", "moe_normalize_expert_weights": False,
            "num_shared_experts": 0, "expert_choice_router": False, "ffn_div": 1,
            "router_aux_loss_coef": 0.1, "moe_resid_pdrop": 0.0, "pad_token_id": 1}


def write_folder(directory, tokenizer, weights):
    from safetensors.torch import save_file
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config_json(len(tokenizer)), f, indent=2)
    save_file({name: tensor.contiguous() for name, tensor in weights.items()},
              os.path.join(directory, "model.safetensors"))
    write_mean_pooling(directory, "sentence_transformers.models.Transformer", D)


def bad_folder(model_dir, directory, weights):
    from safetensors.torch import save_file
    shutil.copytree(model_dir, directory, dirs_exist_ok=True)
    save_file({name: tensor.contiguous() for name, tensor in weights.items()},
              os.path.join(directory, "model.safetensors"))


def make(sentences_path, out_dir):
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(47)
    model_dir = os.path.join(out_dir, "model")
    os.makedirs(model_dir, exist_ok=True)
    tokenizer = make_tokenizer(sentences_path, model_dir)
    weights = make_weights(len(tokenizer), generator)
    with open(sentences_path, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    balance_routers(weights, tokenizer, lines)
    write_folder(model_dir, tokenizer, weights)
    reference = Reference(weights)
    rows, lengths = [], []
    with torch.no_grad():
        for line in lines:
            ids = tokenizer(line, return_tensors="pt")["input_ids"][0]
            rows.append(F.normalize(reference.forward(ids).mean(0), dim=0).numpy())
            lengths.append(len(ids))
    # Every expert of both moe layers gets tokens: a mixed-up expert, its
    # weights or its transposition would show.
    assert (reference.tokens_per_expert > 0).all(), reference.tokens_per_expert
    with h5py.File(os.path.join(out_dir, "reference.h5"), "w") as f:
        f["embeddings"] = np.stack(rows).astype(np.float32)
        f["lengths"] = np.array(lengths, dtype=np.int64)
        f["tokens_per_expert"] = reference.tokens_per_expert

    fewer = dict(weights)
    prefix = "encoder.layers.1.mlp"
    fewer[f"{prefix}.router.layer.weight"] = weights[f"{prefix}.router.layer.weight"][:7]
    for part in ("w1", "w2"):
        fewer[f"{prefix}.experts.mlp.{part}"] = weights[f"{prefix}.experts.mlp.{part}"][:7 * FFN]
    bad_folder(model_dir, os.path.join(out_dir, "bad-experts"), fewer)
    missing = dict(weights)
    del missing["encoder.layers.3.mlp.experts.mlp.w2"]
    bad_folder(model_dir, os.path.join(out_dir, "missing-expert"), missing)
    print(f"nomic_moe: {len(lines)} sentences, tokens per expert "
          f"{reference.tokens_per_expert.tolist()}, closest call between a token's k-th and "
          f"(k+1)-th expert: ratio {reference.closest:.7f}")


if __name__ == "__main__":
    if sys.argv[1:2] != ["make"] or len(sys.argv) != 4:
        sys.exit(__doc__)
    make(sys.argv[2], sys.argv[3])
