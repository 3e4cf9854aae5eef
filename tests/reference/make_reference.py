#!/usr/bin/python3
"""PyTorch reference models for tfenc's end-to-end tests and example jobs.

usage: make_reference.py KIND OUTDIR [--seed N] [--separate-qkv] [--no-job]
                         [--text CORPUS --vocab VOCAB [--tokenizer auto|hf|builtin]]

Builds one encoder with torch.nn.TransformerEncoder (Debian's torch 1.13, run
with /usr/bin/python3), initialised from a fixed seed, and writes to OUTDIR:

  model.h5     the weights in tfenc's layout, exactly as docs/weights.md says
  input.h5     the token ids, ragged: tokens int32 [T] + offsets int64 [N+1]
  expected.h5  PyTorch's output on the real (non-pad) tokens: expected_hidden
               [T, d] + offsets for per-token models, expected_embeddings [N, d]
               for pooled ones; plus lengths, truncated and provenance
  job.ini      a tfenc job running the model on input.h5 (unless --no-job)

KIND is one of
  postnorm_relu  the original encoder of "Attention is all you need": token
                 embedding * sqrt(d_model) + sinusoidal positions, post-norm
                 ReLU blocks, no final norm, per-token output
  prenorm_gelu   GPT-style: token + learned position embeddings, pre-norm GELU
                 blocks, final LayerNorm, mean pooling
  bert_like      BERT-style: word + learned position + token-type embeddings,
                 LayerNorm eps 1e-12 everywhere, post-norm GELU blocks, mean
                 pooling then L2 normalisation (sentence-transformers style);
                 token types are all zero (tfenc inputs carry none)

With --text and --vocab (bert_like only) the documents are the lines of CORPUS,
tokenized as BERT does ([CLS] pieces [SEP], truncated to --max-seq-len) with
the Hugging Face `tokenizers` package when it is importable, else with the
independent pure-Python WordPiece in wordpiece.py; the job then reads CORPUS
itself and input.h5 only records the reference's ids.

Every parameter (biases and LayerNorm weights included) is drawn at random,
and every layer differently, so a weight mapped to the wrong dataset changes
the result. Before writing, the script re-computes the whole model in float64
NumPy from model.h5 alone, following docs/weights.md and docs/job-file.md, and
fails if that disagrees with PyTorch: this checks the layout mapping itself,
independently of tfenc.
"""

import argparse
import hashlib
import math
import os
import sys
import warnings

import h5py
import numpy as np
import torch
from torch import nn

# No __pycache__ in the source tree (it may be read-only, as in distcheck).
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wordpiece  # noqa: E402  (found beside this script)

# Small but non-trivial: several heads, a 4x feed-forward, six layers.
D_MODEL = 64
N_HEADS = 4
D_FF = 256
N_LAYERS = 6
VOCAB_SIZE = 1000
MAX_POSITIONS = 128
TOKEN_TYPES = 2
N_DOCUMENTS = 40
MAX_LEN = 96
# Several microbatches per run, so that batching cannot hide in the result.
BATCH_TOKENS = 512

# The same bars tfenc must meet: float32 through six layers in another
# summation order than PyTorch's differs by ~1e-6 relative; a wrong weight,
# mask or formula gives errors of order 1e-1.
MAX_ABS_TOLERANCE = 1e-4
REL_FROBENIUS_TOLERANCE = 1e-5

KINDS = {
    "postnorm_relu": dict(norm_first=False, activation="relu", eps=1e-5, positions="sinusoidal",
                          scale_embeddings=True, token_types=False, embeddings_norm=False,
                          final_norm=False, pooling=None, normalize=False),
    "prenorm_gelu": dict(norm_first=True, activation="gelu", eps=1e-5, positions="learned",
                         scale_embeddings=False, token_types=False, embeddings_norm=False,
                         final_norm=True, pooling="mean", normalize=False),
    "bert_like": dict(norm_first=False, activation="gelu", eps=1e-12, positions="learned",
                      scale_embeddings=False, token_types=True, embeddings_norm=True,
                      final_norm=False, pooling="mean", normalize=True),
}


def sinusoidal_table(n_positions, d_model):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(same), in float64."""
    position = np.arange(n_positions, dtype=np.float64)[:, None]
    frequency = np.power(10000.0, -np.arange(0, d_model, 2, dtype=np.float64) / d_model)
    table = np.zeros((n_positions, d_model), dtype=np.float64)
    table[:, 0::2] = np.sin(position * frequency)
    table[:, 1::2] = np.cos(position * frequency)
    return table


class ReferenceEncoder(nn.Module):
    """Embeddings + nn.TransformerEncoder + pooling, as one of KINDS describes."""

    def __init__(self, spec, vocab_size):
        super().__init__()
        self.spec = spec
        self.token_embeddings = nn.Embedding(vocab_size, D_MODEL)
        if spec["positions"] == "learned":
            self.position_embeddings = nn.Embedding(MAX_POSITIONS, D_MODEL)
        else:
            table = torch.from_numpy(sinusoidal_table(MAX_POSITIONS, D_MODEL).astype(np.float32))
            self.register_buffer("sinusoid", table)
        if spec["token_types"]:
            self.token_type_embeddings = nn.Embedding(TOKEN_TYPES, D_MODEL)
        if spec["embeddings_norm"]:
            self.embeddings_norm = nn.LayerNorm(D_MODEL, eps=spec["eps"])
        layer = nn.TransformerEncoderLayer(
            D_MODEL, N_HEADS, dim_feedforward=D_FF, dropout=0.0,
            activation=spec["activation"], layer_norm_eps=spec["eps"],
            batch_first=True, norm_first=spec["norm_first"])
        final_norm = nn.LayerNorm(D_MODEL, eps=spec["eps"]) if spec["final_norm"] else None
        self.encoder = nn.TransformerEncoder(layer, N_LAYERS, norm=final_norm)

    def forward(self, ids, types, pad_mask, lengths):
        positions = torch.arange(ids.shape[1]).unsqueeze(0)
        x = self.token_embeddings(ids)
        if self.spec["scale_embeddings"]:
            x = x * math.sqrt(D_MODEL)
        if self.spec["positions"] == "learned":
            x = x + self.position_embeddings(positions)
        else:
            x = x + self.sinusoid[: ids.shape[1]].unsqueeze(0)
        if self.spec["token_types"]:
            x = x + self.token_type_embeddings(types)
        if self.spec["embeddings_norm"]:
            x = self.embeddings_norm(x)
        hidden = self.encoder(x, src_key_padding_mask=pad_mask)
        if self.spec["pooling"] is None:
            return hidden
        # Pads may hold anything (the pre-norm fast path leaves them unmasked).
        real = (~pad_mask).unsqueeze(-1)
        pooled = torch.where(real, hidden, torch.zeros_like(hidden)).sum(1)
        pooled = pooled / lengths.to(hidden.dtype).unsqueeze(-1)
        if self.spec["normalize"]:
            pooled = nn.functional.normalize(pooled, p=2.0, dim=1, eps=1e-12)
        return pooled


def randomize_layer_norm(norm):
    nn.init.normal_(norm.weight, mean=1.0, std=0.2)
    nn.init.normal_(norm.bias, mean=0.0, std=0.2)


def build_model(spec, vocab_size, seed):
    """A model whose every parameter is random and distinct per layer.

    nn.TransformerEncoder deep-copies one layer N times, so without this the
    six layers would be identical; default init also leaves attention biases
    at zero and LayerNorms at identity, which would hide a swapped mapping."""
    torch.manual_seed(seed)
    model = ReferenceEncoder(spec, vocab_size)
    with torch.no_grad():
        # Token embeddings of unit scale once scaled: N(0, d^-1/2) * sqrt(d)
        # for the original encoder, N(0, 1) otherwise (nn.Embedding default).
        std = D_MODEL ** -0.5 if spec["scale_embeddings"] else 1.0
        nn.init.normal_(model.token_embeddings.weight, std=std)
        if spec["positions"] == "learned":
            nn.init.normal_(model.position_embeddings.weight, std=0.5)
        if spec["token_types"]:
            nn.init.normal_(model.token_type_embeddings.weight, std=0.5)
        if spec["embeddings_norm"]:
            randomize_layer_norm(model.embeddings_norm)
        for layer in model.encoder.layers:
            layer.self_attn._reset_parameters()
            layer.self_attn.out_proj.reset_parameters()
            nn.init.uniform_(layer.self_attn.in_proj_bias, -0.2, 0.2)
            nn.init.uniform_(layer.self_attn.out_proj.bias, -0.2, 0.2)
            layer.linear1.reset_parameters()
            layer.linear2.reset_parameters()
            randomize_layer_norm(layer.norm1)
            randomize_layer_norm(layer.norm2)
        if spec["final_norm"]:
            randomize_layer_norm(model.encoder.norm)
    model.eval()
    return model


def weight_datasets(model, spec, separate_qkv):
    """Dataset path -> float32 array, named as docs/weights.md prescribes.

    norm1 belongs to the attention sublayer and norm2 to the feed-forward one
    in both norm positions: post-norm applies norm1 after attention's residual
    sum, pre-norm applies it before attention; the job's norm_position says
    which, the weights file does not."""
    def array(tensor):
        return tensor.detach().to(torch.float32).numpy().copy()

    out = {"/embeddings/token_embeddings": array(model.token_embeddings.weight)}
    if spec["positions"] == "learned":
        out["/embeddings/position_embeddings"] = array(model.position_embeddings.weight)
    if spec["token_types"]:
        out["/embeddings/token_type_embeddings"] = array(model.token_type_embeddings.weight)
    if spec["embeddings_norm"]:
        out["/embeddings_norm/weight"] = array(model.embeddings_norm.weight)
        out["/embeddings_norm/bias"] = array(model.embeddings_norm.bias)
    for i, layer in enumerate(model.encoder.layers):
        attention = f"/encoder/{i}/attention"
        ffn = f"/encoder/{i}/ffn"
        in_weight = array(layer.self_attn.in_proj_weight)
        in_bias = array(layer.self_attn.in_proj_bias)
        if separate_qkv:
            # in_proj_weight stacks Q rows, then K rows, then V rows.
            for part, name in enumerate("qkv"):
                rows = slice(part * D_MODEL, (part + 1) * D_MODEL)
                out[f"{attention}/{name}_weight"] = in_weight[rows].copy()
                out[f"{attention}/{name}_bias"] = in_bias[rows].copy()
        else:
            out[f"{attention}/qkv_weight"] = in_weight
            out[f"{attention}/qkv_bias"] = in_bias
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
    if spec["final_norm"]:
        out["/final_norm/weight"] = array(model.encoder.norm.weight)
        out["/final_norm/bias"] = array(model.encoder.norm.bias)
    return out


def job_text(kind, spec, vocab_size, text_mode, max_seq_len):
    """The job file (docs/job-file.md) that composes the same model in tfenc."""
    lines = [f"; {kind}: generated by tests/reference/make_reference.py", "", "[job]"]
    if text_mode:
        lines += ["input = corpus.txt", f"max_seq_len = {max_seq_len}"]
    else:
        lines += ["input = input.h5", "input_format = hdf5", f"max_seq_len = {MAX_POSITIONS}"]
    lines += ["output = output.h5", f"batch_tokens = {BATCH_TOKENS}", "",
              "[model]", "weights = model.h5", f"d_model = {D_MODEL}",
              f"vocab_size = {vocab_size}", f"max_positions = {MAX_POSITIONS}", ""]
    if text_mode:
        lines += ["[tokenizer]", "vocab = vocab.txt", "lowercase = true", ""]
    lines += ["[embeddings]", "type = embedding"]
    if spec["scale_embeddings"]:
        lines.append("scale_by_sqrt_d = true")
    if spec["positions"] == "learned":
        lines.append("learned_positions = true")
    if spec["token_types"]:
        lines.append("token_types = true")
    lines.append("")
    if spec["positions"] == "sinusoidal":
        lines += ["[positions]", "type = sinusoidal", ""]
    if spec["embeddings_norm"]:
        lines += ["[embeddings_norm]", "type = layernorm", f"eps = {spec['eps']:g}", ""]
    norm_position = "pre" if spec["norm_first"] else "post"
    lines += ["[encoder]", f"repeat = {N_LAYERS}", f"norm_position = {norm_position}", "",
              "[encoder.attention]", "type = mha", f"n_heads = {N_HEADS}", "",
              "[encoder.attention.norm]", "type = layernorm", f"eps = {spec['eps']:g}", "",
              "[encoder.ffn]", "type = ffn", f"activation = {spec['activation']}", "",
              "[encoder.ffn.norm]", "type = layernorm", f"eps = {spec['eps']:g}", ""]
    if spec["final_norm"]:
        lines += ["[final_norm]", "type = layernorm", f"eps = {spec['eps']:g}", ""]
    if spec["pooling"] is not None:
        lines += ["[pooling]", "type = pooling", f"mode = {spec['pooling']}",
                  f"normalize = {'true' if spec['normalize'] else 'false'}", ""]
    return "\n".join(lines)


# ------------------------------------------------------------------ inputs

def random_documents(seed, vocab_size):
    """N_DOCUMENTS random id sequences, lengths 1..MAX_LEN, both ends included."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, MAX_LEN + 1, size=N_DOCUMENTS)
    lengths[0] = 1
    lengths[1] = MAX_LEN
    lengths[2] = 2
    rng.shuffle(lengths)
    return [rng.integers(0, vocab_size, size=int(n)).astype(np.int32) for n in lengths], \
        [0] * N_DOCUMENTS


def read_corpus_lines(path):
    """Documents of a text corpus: one per line, trailing \\r dropped, bytes
    decoded with U+FFFD for invalid sequences (tfenc's default policy)."""
    with open(path, "rb") as handle:
        data = handle.read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [(line[:-1] if line.endswith(b"\r") else line).decode("utf-8", errors="replace")
            for line in lines]


def hf_encoder(vocab_path):
    """A function text -> (pieces without specials) from Hugging Face tokenizers, or None."""
    try:
        import tokenizers
    except ImportError:
        return None, None
    tokenizer = tokenizers.BertWordPieceTokenizer(
        vocab_path, lowercase=True, strip_accents=None, clean_text=True,
        handle_chinese_chars=True)

    def encode(text):
        return tokenizer.encode(text, add_special_tokens=False).ids
    return encode, f"tokenizers {tokenizers.__version__}"


def text_documents(corpus_path, vocab_path, max_seq_len, choice):
    """Token ids of each line as BERT makes them, and the pieces cut per line."""
    texts = read_corpus_lines(corpus_path)
    builtin = wordpiece.BertWordPiece(vocab_path, lowercase=True)
    hf, hf_name = hf_encoder(vocab_path) if choice in ("auto", "hf") else (None, None)
    if choice == "hf" and hf is None:
        raise SystemExit("make_reference: --tokenizer hf but the tokenizers package is missing")
    documents, truncated = [], []
    for number, text in enumerate(texts, 1):
        ids, cut = builtin.encode(text, max_seq_len)
        if hf is not None:
            pieces = hf(text)
            keep = max_seq_len - 2
            hf_ids = [builtin.cls_id] + pieces[:keep] + [builtin.sep_id]
            if hf_ids != ids:
                raise SystemExit(f"make_reference: {corpus_path}:{number}: the built-in WordPiece "
                                 f"gives {ids}, {hf_name} gives {hf_ids}")
            cut = max(0, len(pieces) - keep)
        documents.append(np.array(ids, dtype=np.int32))
        truncated.append(cut)
    if hf is not None:
        used = f"{hf_name} (the built-in WordPiece agrees on all {len(texts)} lines)"
    else:
        used = "built-in pure-Python WordPiece (tests/reference/wordpiece.py)"
    return documents, truncated, len(builtin.vocab), used


# --------------------------------------------------------------- PyTorch run

class PathProbe:
    """Counts calls of the fused kernels that make up nn.TransformerEncoder's
    eval "fast path", so the report can say which path really ran."""

    def __enter__(self):
        self.layer_calls = 0
        self.nested_calls = 0
        self.saved = (torch._transformer_encoder_layer_fwd, torch._nested_tensor_from_mask)

        def layer(*args, **kwargs):
            self.layer_calls += 1
            return self.saved[0](*args, **kwargs)

        def nested(*args, **kwargs):
            self.nested_calls += 1
            return self.saved[1](*args, **kwargs)
        torch._transformer_encoder_layer_fwd = layer
        torch._nested_tensor_from_mask = nested
        return self

    def __exit__(self, *exc):
        torch._transformer_encoder_layer_fwd, torch._nested_tensor_from_mask = self.saved
        return False

    def describe(self):
        if self.layer_calls == 0:
            return "slow path (plain modules, padded batch)"
        what = f"fast path: {self.layer_calls} fused _transformer_encoder_layer_fwd calls"
        if self.nested_calls:
            return what + " on nested tensors (padding dropped)"
        return what + " on the padded batch with key_padding_mask"


def padded_batch(documents, types):
    n = len(documents)
    width = max(len(d) for d in documents)
    ids = torch.zeros((n, width), dtype=torch.long)
    token_types = torch.zeros((n, width), dtype=torch.long)
    pad_mask = torch.ones((n, width), dtype=torch.bool)
    for row, doc in enumerate(documents):
        ids[row, : len(doc)] = torch.from_numpy(doc.astype(np.int64))
        token_types[row, : len(doc)] = types[row]
        pad_mask[row, : len(doc)] = False
    lengths = torch.tensor([len(d) for d in documents], dtype=torch.long)
    return ids, token_types, pad_mask, lengths


def real_rows(output, pad_mask, pooled):
    """[T, d] rows of the real tokens in document order, or the [N, d] pooled rows."""
    if pooled:
        return output.numpy().astype(np.float32)
    return output[~pad_mask].numpy().astype(np.float32)


def run_torch(model, documents, types, pooled):
    ids, token_types, pad_mask, lengths = padded_batch(documents, types)
    with torch.no_grad(), PathProbe() as probe, warnings.catch_warnings():
        # torch 1.13 warns that nested tensors are a prototype on every run.
        warnings.filterwarnings("ignore", message=".*nested tensors is in prototype.*")
        fast = model(ids, token_types, pad_mask, lengths)
    # With autograd on and parameters requiring grad, PyTorch takes the plain
    # module path: a second opinion on the fused kernels' numerics.
    with torch.enable_grad():
        slow = model(ids, token_types, pad_mask, lengths).detach()
    return real_rows(fast, pad_mask, pooled), real_rows(slow, pad_mask, pooled), probe.describe()


# ---------------------------------------------------- float64 NumPy re-check

def numpy_forward(weights_path, spec, documents):
    """The model in float64 NumPy from model.h5 alone, one document at a time,
    reading datasets by the names docs/weights.md gives each layer type."""
    with h5py.File(weights_path, "r") as f:
        w = {}
        f.visititems(lambda name, obj: w.__setitem__("/" + name, obj[...].astype(np.float64))
                     if isinstance(obj, h5py.Dataset) else None)
    erf = np.vectorize(math.erf)

    def layer_norm(x, group):
        mean = x.mean(axis=-1, keepdims=True)
        variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(variance + spec["eps"]) * w[group + "/weight"] + w[group + "/bias"]

    def attention(x, group):
        if group + "/qkv_weight" in w:
            qkv = x @ w[group + "/qkv_weight"].T + w[group + "/qkv_bias"]
            q, k, v = np.split(qkv, 3, axis=1)
        else:
            q, k, v = (x @ w[f"{group}/{n}_weight"].T + w[f"{group}/{n}_bias"] for n in "qkv")
        head = D_MODEL // N_HEADS
        context = np.zeros_like(x)
        for h in range(N_HEADS):
            cols = slice(h * head, (h + 1) * head)
            scores = q[:, cols] @ k[:, cols].T / math.sqrt(head)
            scores = np.exp(scores - scores.max(axis=1, keepdims=True))
            context[:, cols] = (scores / scores.sum(axis=1, keepdims=True)) @ v[:, cols]
        return context @ w[group + "/out_weight"].T + w[group + "/out_bias"]

    def feed_forward(x, group):
        inner = x @ w[group + "/in_weight"].T + w[group + "/in_bias"]
        if spec["activation"] == "relu":
            inner = np.maximum(inner, 0.0)
        else:
            inner = 0.5 * inner * (1.0 + erf(inner / math.sqrt(2.0)))
        return inner @ w[group + "/out_weight"].T + w[group + "/out_bias"]

    sinusoid = sinusoidal_table(MAX_POSITIONS, D_MODEL)
    rows = []
    for doc in documents:
        n = len(doc)
        x = w["/embeddings/token_embeddings"][doc]
        if spec["scale_embeddings"]:
            x = x * math.sqrt(D_MODEL)
        if spec["positions"] == "learned":
            x = x + w["/embeddings/position_embeddings"][:n]
        else:
            x = x + sinusoid[:n]
        if spec["token_types"]:
            x = x + w["/embeddings/token_type_embeddings"][0]
        if spec["embeddings_norm"]:
            x = layer_norm(x, "/embeddings_norm")
        for i in range(N_LAYERS):
            for name, sublayer in (("attention", attention), ("ffn", feed_forward)):
                group = f"/encoder/{i}/{name}"
                if spec["norm_first"]:
                    x = x + sublayer(layer_norm(x, group + "/norm"), group)
                else:
                    x = layer_norm(x + sublayer(x, group), group + "/norm")
        if spec["final_norm"]:
            x = layer_norm(x, "/final_norm")
        if spec["pooling"] is None:
            rows.append(x)
            continue
        pooled = x.mean(axis=0)
        if spec["normalize"]:
            pooled = pooled / max(np.linalg.norm(pooled), 1e-12)
        rows.append(pooled[None, :])
    return np.concatenate(rows, axis=0)


def differences(got, expected):
    got = np.asarray(got, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    max_abs = float(np.max(np.abs(got - expected)))
    rel = float(np.linalg.norm(got - expected) / np.linalg.norm(expected))
    return max_abs, rel


# ------------------------------------------------------------------ writing

def write_weights(path, datasets, kind, seed):
    with h5py.File(path, "w") as f:
        for name, value in sorted(datasets.items()):
            f.create_dataset(name, data=value, dtype=np.float32)
        f.attrs["generator"] = "tests/reference/make_reference.py"
        f.attrs["kind"] = kind
        f.attrs["seed"] = seed


def offsets_of(documents):
    offsets = np.zeros(len(documents) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(d) for d in documents])
    return offsets


def write_input(path, documents):
    with h5py.File(path, "w") as f:
        f.create_dataset("tokens", data=np.concatenate(documents).astype(np.int32))
        f.create_dataset("offsets", data=offsets_of(documents))


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_expected(path, rows, documents, truncated, pooled, attributes):
    with h5py.File(path, "w") as f:
        name = "expected_embeddings" if pooled else "expected_hidden"
        f.create_dataset(name, data=rows.astype(np.float32))
        f.create_dataset("offsets", data=offsets_of(documents))
        f.create_dataset("lengths", data=np.array([len(d) for d in documents], dtype=np.int32))
        f.create_dataset("truncated", data=np.array(truncated, dtype=np.int32))
        for key, value in attributes.items():
            # torch.__version__ is a str subclass that h5py cannot store as is.
            f.attrs[key] = str(value) if isinstance(value, str) else value


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=sorted(KINDS))
    parser.add_argument("outdir")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--separate-qkv", action="store_true",
                        help="write q/k/v_weight and q/k/v_bias instead of fused qkv_*")
    parser.add_argument("--no-job", action="store_true", help="do not write job.ini")
    parser.add_argument("--text", help="corpus: one document per line (bert_like only)")
    parser.add_argument("--vocab", help="BERT vocab.txt for --text")
    parser.add_argument("--max-seq-len", type=int, default=64,
                        help="tokens per document at most with --text, [CLS] and [SEP] included")
    parser.add_argument("--tokenizer", choices=("auto", "hf", "builtin"), default="auto")
    args = parser.parse_args()

    spec = KINDS[args.kind]
    text_mode = args.text is not None
    if text_mode and (args.kind != "bert_like" or args.vocab is None):
        parser.error("--text needs --vocab and the bert_like kind")
    if text_mode and args.max_seq_len > MAX_POSITIONS:
        parser.error(f"--max-seq-len must be at most {MAX_POSITIONS}")
    os.makedirs(args.outdir, exist_ok=True)
    torch.set_num_threads(1)  # the machine is shared; the model is tiny

    if text_mode:
        documents, truncated, vocab_size, tokenizer_used = text_documents(
            args.text, args.vocab, args.max_seq_len, args.tokenizer)
    else:
        vocab_size = VOCAB_SIZE
        documents, _ = random_documents(args.seed, vocab_size)
        truncated = [0] * len(documents)
        tokenizer_used = "none (token ids in input.h5)"
    types = [0] * len(documents)
    pooled = spec["pooling"] is not None

    model = build_model(spec, vocab_size, args.seed)
    fast, slow, path = run_torch(model, documents, types, pooled)

    weights_path = os.path.join(args.outdir, "model.h5")
    write_weights(weights_path, weight_datasets(model, spec, args.separate_qkv), args.kind, args.seed)
    reference = numpy_forward(weights_path, spec, documents)
    slow_max, slow_rel = differences(fast, slow)
    numpy_max, numpy_rel = differences(fast, reference)

    write_input(os.path.join(args.outdir, "input.h5"), documents)
    attributes = {
        "kind": args.kind, "seed": args.seed, "separate_qkv": int(args.separate_qkv),
        "output_kind": "pooled" if pooled else "tokens", "d_model": D_MODEL,
        "n_documents": len(documents), "n_tokens": int(sum(len(d) for d in documents)),
        "torch_version": torch.__version__, "torch_path": path, "tokenizer": tokenizer_used,
        "weights_file": "model.h5", "weights_sha256": sha256_of(weights_path),
        "fast_vs_slow_max_abs": slow_max, "numpy_float64_max_abs": numpy_max,
        "numpy_float64_rel_frobenius": numpy_rel,
    }
    write_expected(os.path.join(args.outdir, "expected.h5"), fast, documents, truncated, pooled,
                   attributes)
    if not args.no_job:
        with open(os.path.join(args.outdir, "job.ini"), "w") as handle:
            handle.write(job_text(args.kind, spec, vocab_size, text_mode, args.max_seq_len))

    lengths = [len(d) for d in documents]
    print(f"make_reference: {args.kind} seed {args.seed}"
          f"{' separate q/k/v' if args.separate_qkv else ''}: {len(documents)} documents, "
          f"{sum(lengths)} tokens, lengths {min(lengths)}..{max(lengths)}, "
          f"torch {torch.__version__}, {path}")
    print(f"make_reference: tokenizer: {tokenizer_used}")
    print(f"make_reference: PyTorch fast vs slow path: max |diff| {slow_max:.3g}, "
          f"rel Frobenius {slow_rel:.3g}")
    print(f"make_reference: PyTorch vs float64 NumPy from model.h5: max |diff| {numpy_max:.3g}, "
          f"rel Frobenius {numpy_rel:.3g}")
    if not (numpy_max <= MAX_ABS_TOLERANCE and numpy_rel <= REL_FROBENIUS_TOLERANCE):
        print("make_reference: FAIL: the weights file does not reproduce PyTorch "
              f"(bars: max |diff| <= {MAX_ABS_TOLERANCE:g}, rel Frobenius <= "
              f"{REL_FROBENIUS_TOLERANCE:g})", file=sys.stderr)
        return 1
    print(f"make_reference: wrote {args.outdir}/model.h5 input.h5 expected.h5"
          f"{'' if args.no_job else ' job.ini'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
