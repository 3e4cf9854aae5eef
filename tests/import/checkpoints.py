#!/usr/bin/env python3
"""Checkpoints as they are found on the Hub, written by transformers' own
save_pretrained and torch.save with random weights (tests/import/
architectures.py's BERT sizes, sharpened), and what transformers' own
loading computes from each folder: the reference tfenc must reproduce.

usage: checkpoints.py make OUT_DIR
         Each OUT_DIR/KIND/ holds a BertForMaskedLM checkpoint, a
         sentence-transformers head (mean pooling, Normalize), a 120-token
         vocab.txt, ids.h5 (12 sequences of 1 to 150 token ids) and
         reference.h5: `hidden [T, d]` per token (each sequence alone) and
         `embeddings [N, d]` pooled over one padded batch, from
         BertModel.from_pretrained(OUT_DIR/KIND) (which must report no
         missing tensor: transformers read every one), and `splade [N, V]`,
         SpladePooling's max over the tokens of log(1 + relu(logits)) of
         BertForMaskedLM.from_pretrained.
           legacy         model.safetensors whose LayerNorm tensors are
                          named gamma and beta, as checkpoints converted
                          from TensorFlow name them
           sharded        model.safetensors.index.json and 6 shards
           bin            pytorch_model.bin (torch.save's zip, float32)
           bin-half       pytorch_model.bin of float16 storages
           bin-bfloat16   pytorch_model.bin of bfloat16 storages
           bin-sharded    pytorch_model.bin.index.json and its shards
           bin-legacy     pytorch_model.bin in torch.save's legacy format
                          (before PyTorch 1.6: _use_new_zipfile_serialization
                          False)
         Folders tfenc-import must refuse (OUT_DIR/bad/NAME/), each with
         the good folder's other files:
           missing-shard, unlisted-in-shard (the index lists a tensor its
           shard lacks), elsewhere (a shard holds a tensor the index
           assigns to another), escaping-shard (a shard name with a
           folder), legacy-clash (gamma and weight of one LayerNorm),
           global-os-system (data.pkl: GLOBAL os.system, REDUCE, which
           would create OUT_DIR/bad/RAN if it ran), opcode-inst (data.pkl
           with the INST opcode), truncated-zip (the first half of a
           pytorch_model.bin), truncated-legacy (the first half of
           bin-legacy's).
       checkpoints.py compare REFERENCE.h5 DATASET TFENC.h5 LABEL
         `hidden` and `embeddings`: largest absolute difference within
         1e-4 (architectures.py's bar) and, pooled, the smallest cosine at
         least 0.99999; `splade`: tfenc's CSR (sparse_*) as a dense matrix
         within 1e-4 of the reference."""
import json
import os
import shutil
import sys
import zipfile

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from architectures import D, FFN, HEADS, LAYERS, VOCAB, sharpen, st_pool, write_head  # noqa: E402

TOLERANCE = 1e-4
MIN_COSINE = 0.99999
LENGTHS = [1, 2, 7, 16, 33, 64, 97, 129, 150, 5, 41, 12]
# The masked-LM decoder's bias, as tests/sparse/sparse.py sets it: a token's
# logits are positive for a few percent of the vocabulary, so that a wrong
# non-zero set shows.
DECODER_BIAS = -3.0


def masked_lm(torch_dtype=None):
    import torch
    import transformers as t
    config = t.BertConfig(hidden_size=D, num_attention_heads=HEADS, num_hidden_layers=LAYERS,
                          intermediate_size=FFN, vocab_size=VOCAB, max_position_embeddings=160,
                          hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = t.BertForMaskedLM(config)
    sharpen(model, torch.Generator().manual_seed(47))
    with torch.no_grad():
        model.cls.predictions.bias.add_(DECODER_BIAS)
    return model.eval()


def write_vocabulary(directory):
    """A WordPiece vocabulary of VOCAB tokens, so that the weights file has
    a tokenizer and the sparse output a vocabulary."""
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokens += [f"w{i}" for i in range(VOCAB - len(tokens))]
    with open(os.path.join(directory, "vocab.txt"), "w") as f:
        f.write("\n".join(tokens) + "\n")


def rewrite_safetensors(path, rename):
    """Renames the tensors of a safetensors file by rename(name)."""
    from safetensors.torch import load_file, save_file
    tensors = load_file(path)
    save_file({rename(name): tensor for name, tensor in tensors.items()}, path,
              metadata={"format": "pt"})


def legacy_name(name):
    return name.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias",
                                                                        "LayerNorm.beta")


def save(kind, directory):
    import torch
    model = masked_lm()
    if kind == "legacy":
        model.save_pretrained(directory, safe_serialization=True)
        rewrite_safetensors(os.path.join(directory, "model.safetensors"), legacy_name)
    elif kind == "sharded":
        model.save_pretrained(directory, safe_serialization=True, max_shard_size="20KB")
    elif kind == "bin-sharded":
        model.save_pretrained(directory, safe_serialization=False, max_shard_size="20KB")
    elif kind == "bin-legacy":
        model.save_pretrained(directory, safe_serialization=False)
        path = os.path.join(directory, "pytorch_model.bin")
        torch.save(torch.load(path, map_location="cpu"), path,
                   _use_new_zipfile_serialization=False)
    else:
        dtype = {"bin": None, "bin-half": torch.float16, "bin-bfloat16": torch.bfloat16}[kind]
        if dtype is not None:
            model = model.to(dtype)
        model.save_pretrained(directory, safe_serialization=False)
    write_head(directory, D, "mean")
    write_vocabulary(directory)


def reference(directory):
    """What transformers computes from the folder as it loads it."""
    import torch
    import transformers as t
    encoder, info = t.BertModel.from_pretrained(directory, output_loading_info=True,
                                                add_pooling_layer=False,
                                                torch_dtype=torch.float32)
    if info["missing_keys"] or info["mismatched_keys"] or info["error_msgs"]:
        raise SystemExit(f"{directory}: transformers did not load every tensor: {info}")
    masked = t.BertForMaskedLM.from_pretrained(directory, torch_dtype=torch.float32)
    encoder.eval()
    masked.eval()
    generator = torch.Generator().manual_seed(7)
    rows = [torch.randint(5, VOCAB, (n,), generator=generator) for n in LENGTHS]
    with torch.no_grad():
        hidden = [encoder(input_ids=ids[None]).last_hidden_state[0] for ids in rows]
        longest = max(LENGTHS)
        padded = torch.zeros(len(rows), longest, D)
        mask = torch.zeros(len(rows), longest, dtype=torch.long)
        for i, h in enumerate(hidden):
            padded[i, :len(h)] = h
            mask[i, :len(h)] = 1
        embeddings = st_pool(padded, mask, D, "mean", True)
        splade = torch.stack([torch.log1p(torch.relu(masked(input_ids=ids[None]).logits[0]))
                              .max(dim=0).values for ids in rows])
    with h5py.File(os.path.join(directory, "ids.h5"), "w") as f:
        f["tokens"] = torch.cat(rows).numpy().astype(np.int32)
        f["offsets"] = np.cumsum([0] + LENGTHS).astype(np.int64)
    with h5py.File(os.path.join(directory, "reference.h5"), "w") as f:
        f["hidden"] = torch.cat(hidden).numpy()
        f["embeddings"] = embeddings.numpy()
        f["splade"] = splade.numpy()


def copy_folder(source, bad_dir, name):
    target = os.path.join(bad_dir, name)
    shutil.copytree(source, target)
    for generated in ("ids.h5", "reference.h5"):
        os.remove(os.path.join(target, generated))
    return target


def edit_index(directory, edit):
    path = os.path.join(directory, "model.safetensors.index.json")
    with open(path) as f:
        index = json.load(f)
    edit(index["weight_map"])
    with open(path, "w") as f:
        json.dump(index, f)


def replace_pickle(path, pickle_bytes):
    """pytorch_model.bin with its data.pkl replaced, its storages kept."""
    with zipfile.ZipFile(path) as archive:
        entries = [(info, archive.read(info)) for info in archive.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for info, data in entries:
            archive.writestr(info, pickle_bytes if info.filename.endswith("/data.pkl") else data)


def make_bad(out_dir):
    bad = os.path.join(out_dir, "bad")
    os.makedirs(bad)
    sharded = os.path.join(out_dir, "sharded")
    with open(os.path.join(sharded, "model.safetensors.index.json")) as f:
        weight_map = json.load(f)["weight_map"]
    shards = sorted(set(weight_map.values()))
    # A tensor of the first shard that holds more than one (the index still
    # names that shard when the tensor is moved away).
    counts = {shard: list(weight_map.values()).count(shard) for shard in shards}
    first = next(name for name, shard in sorted(weight_map.items()) if counts[shard] > 1)

    directory = copy_folder(sharded, bad, "missing-shard")
    os.remove(os.path.join(directory, shards[-1]))
    directory = copy_folder(sharded, bad, "unlisted-in-shard")
    edit_index(directory, lambda m: m.__setitem__("bert.encoder.layer.0.extra.weight",
                                                  weight_map[first]))
    directory = copy_folder(sharded, bad, "elsewhere")
    edit_index(directory, lambda m: m.__setitem__(first, shards[-1]))
    directory = copy_folder(sharded, bad, "escaping-shard")
    edit_index(directory, lambda m: m.__setitem__(first, "../sharded/" + weight_map[first]))

    directory = copy_folder(os.path.join(out_dir, "legacy"), bad, "legacy-clash")
    path = os.path.join(directory, "model.safetensors")
    from safetensors.torch import load_file, save_file
    tensors = load_file(path)
    tensors["bert.embeddings.LayerNorm.weight"] = tensors["bert.embeddings.LayerNorm.gamma"].clone()
    save_file(tensors, path, metadata={"format": "pt"})

    source = os.path.join(out_dir, "bin")
    marker = os.path.join(bad, "RAN")
    directory = copy_folder(source, bad, "global-os-system")
    # What a malicious pickle looks like: os.system('touch RAN') on load.
    command = f"touch {marker}".encode()
    replace_pickle(os.path.join(directory, "pytorch_model.bin"),
                   b"\x80\x02cos\nsystem\nq\x00X" + len(command).to_bytes(4, "little")
                   + command + b"q\x01\x85q\x02Rq\x03.")
    directory = copy_folder(source, bad, "opcode-inst")
    replace_pickle(os.path.join(directory, "pytorch_model.bin"),
                   b"\x80\x02(X\x04\x00\x00\x00testibuiltins\nprint\n.")
    directory = copy_folder(source, bad, "truncated-zip")
    path = os.path.join(directory, "pytorch_model.bin")
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[:len(data) // 2])
    directory = copy_folder(os.path.join(out_dir, "bin-legacy"), bad, "truncated-legacy")
    path = os.path.join(directory, "pytorch_model.bin")
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[:len(data) // 2])


KINDS = ["legacy", "sharded", "bin", "bin-half", "bin-bfloat16", "bin-sharded", "bin-legacy"]


def make(out_dir):
    import torch
    torch.manual_seed(0)
    for kind in KINDS:
        directory = os.path.join(out_dir, kind)
        save(kind, directory)
        reference(directory)
        print(f"checkpoints: {kind}: {sorted(os.listdir(directory))}")
    make_bad(out_dir)


def compare(reference_path, dataset, tfenc_path, label):
    with h5py.File(reference_path, "r") as f:
        want = f[dataset][()].astype(np.float64)
    with h5py.File(tfenc_path, "r") as f:
        if dataset == "splade":
            indptr, indices = f["sparse_indptr"][()], f["sparse_indices"][()]
            values = f["sparse_values"][()]
            got = np.zeros_like(want)
            for i in range(len(indptr) - 1):
                got[i, indices[indptr[i]:indptr[i + 1]]] = values[indptr[i]:indptr[i + 1]]
        else:
            got = f["hidden" if dataset == "hidden" else "embeddings"][()].astype(np.float64)
    if got.shape != want.shape:
        print(f"FAIL: {label}: tfenc shape {got.shape}, reference {want.shape}")
        return 1
    worst = float(np.max(np.abs(got - want)))
    cosine = np.sum(got * want, axis=1) / np.maximum(
        np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1), 1e-30)
    lowest = float(np.min(cosine))
    print(f"{label}: max |diff| {worst:.2e}, min cosine {lowest:.9f} over {want.shape[0]} rows")
    if not worst <= TOLERANCE or (dataset == "embeddings" and not lowest >= MIN_COSINE):
        print(f"FAIL: {label}: beyond {TOLERANCE} or below cosine {MIN_COSINE}")
        return 1
    return 0


def main():
    if sys.argv[1] == "make":
        make(sys.argv[2])
        return 0
    return compare(*sys.argv[2:6])


if __name__ == "__main__":
    sys.exit(main())
