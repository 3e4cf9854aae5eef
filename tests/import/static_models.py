#!/usr/bin/env python3
"""Static-embedding (model2vec) folders and their references, made by
model2vec itself (run in a venv of its own: tests/import/static.sh).

usage: static_models.py make TOKENIZER_JSON CORPUS OUTPUT_DIR
       static_models.py potion TOKENIZER_JSON DIM OUTPUT_DIR    (tests/bench/static.sh)
       static_models.py compare REFERENCE.npy TFENC.h5 LABEL   (a Python with h5py)

`make` saves, with model2vec's own StaticModel.save_pretrained and random
vectors of the real structure, one folder per kind under OUTPUT_DIR:
  plain      potion's form: embeddings [vocab, 64], normalize true
  weighted   embeddings [vocab, 48] with F64 per-token weights, not
             normalized, config.json max_length 40 (texts cut by tokens and,
             before that, by characters)
  quantized  a vocabulary-quantized model: 16 rows of embeddings, a token
             mapping (int32) and F32 weights, normalized
and writes beside each KIND.npy: StaticModel.from_pretrained(folder)
.encode(lines of CORPUS), model2vec's defaults otherwise. It also writes
broken copies of `quantized`, each a folder bad-WHAT that tfenc-import must
refuse naming the file and tensor (bad.txt lists WHAT and what the message
must hold).

`compare` checks every row: cosine >= 0.99999 and |difference| <= 1e-5,
and a row of zeros (a text that kept no token) exactly zeros in both."""
import json
import os
import sys

import numpy as np


def make(tokenizer_json, corpus, output):
    from model2vec import StaticModel
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(tokenizer_json)
    vocab = tokenizer.get_vocab_size()
    rng = np.random.default_rng(47)
    kinds = {
        "plain": dict(vectors=rng.standard_normal((vocab, 64)).astype(np.float32),
                      normalize=True),
        "weighted": dict(vectors=rng.standard_normal((vocab, 48)).astype(np.float32),
                         weights=rng.uniform(0.05, 2.0, vocab).astype(np.float64),
                         normalize=False, max_length=40),
        "quantized": dict(vectors=rng.standard_normal((16, 32)).astype(np.float32),
                          token_mapping=rng.integers(0, 16, vocab).astype(np.int32),
                          weights=rng.uniform(0.05, 2.0, vocab).astype(np.float32),
                          normalize=True),
    }
    with open(corpus, encoding="utf-8") as f:
        lines = f.read().split("\n")[:-1]
    os.makedirs(output, exist_ok=True)
    for kind, arguments in kinds.items():
        folder = os.path.join(output, kind)
        StaticModel(tokenizer=Tokenizer.from_file(tokenizer_json), **arguments).save_pretrained(
            folder)
        # save_pretrained writes config.json as json.dump of the model's config
        with open(os.path.join(folder, "config.json")) as f:
            assert json.load(f)["normalize"] == arguments["normalize"]
        model = StaticModel.from_pretrained(folder)
        reference = model.encode(lines, use_multiprocessing=False)
        np.save(os.path.join(output, kind + ".npy"), reference.astype(np.float32))
    make_bad(os.path.join(output, "quantized"), output)


def potion(tokenizer_json, dim, output):
    """One folder of potion-base's shape: every token's row, normalized."""
    from model2vec import StaticModel
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(tokenizer_json)
    vectors = np.random.default_rng(8).standard_normal((tokenizer.get_vocab_size(), int(dim)))
    StaticModel(vectors=vectors.astype(np.float32), tokenizer=tokenizer,
                normalize=True).save_pretrained(output)


def make_bad(good, output):
    """Copies of a good folder, each with one tensor of model.safetensors
    missing or of the wrong size."""
    import shutil

    from safetensors.numpy import load_file, save_file

    tensors = load_file(os.path.join(good, "model.safetensors"))
    vocab = len(tensors["mapping"])
    cases = {
        "missing-embeddings": ({k: v for k, v in tensors.items() if k != "embeddings"},
                               "'embeddings' not found"),
        "short-weights": (dict(tensors, weights=tensors["weights"][:-3]),
                          "'weights' must be [%d]" % vocab),
        "short-mapping": (dict(tensors, mapping=tensors["mapping"][:-1]),
                          "'mapping' must be [%d]" % vocab),
        "mapping-outside": (dict(tensors, mapping=np.full(vocab, 16, np.int32)),
                            "'mapping' sends token 0 to row 16"),
        "rows": ({k: v for k, v in tensors.items() if k != "mapping"},
                 "'embeddings' has 16 rows but tokenizer.json has %d tokens" % vocab),
    }
    with open(os.path.join(output, "bad.txt"), "w") as listing:
        for name, (content, message) in cases.items():
            folder = os.path.join(output, "bad-" + name)
            shutil.copytree(good, folder)
            save_file(content, os.path.join(folder, "model.safetensors"))
            listing.write(f"{name}\t{message}\n")


def compare(reference_path, tfenc_path, label):
    import h5py

    reference = np.load(reference_path).astype(np.float64)
    with h5py.File(tfenc_path, "r") as f:
        ours = f["embeddings"][()].astype(np.float64)
    if ours.shape != reference.shape:
        print(f"FAIL: {label}: tfenc shape {ours.shape}, reference {reference.shape}")
        return 1
    zero = ~reference.any(axis=1)
    bad = np.flatnonzero(zero & ours.any(axis=1))
    norms = np.linalg.norm(ours, axis=1) * np.linalg.norm(reference, axis=1)
    cosine = np.ones(len(ours))
    cosine[~zero] = np.sum(ours * reference, axis=1)[~zero] / np.where(norms > 0, norms, 1)[~zero]
    difference = np.max(np.abs(ours - reference), axis=1)
    print(f"{label}: {len(ours)} texts ({zero.sum()} kept no token), cosine min "
          f"{cosine.min():.9f}, max |diff| {difference.max():.3e}")
    bad = np.union1d(bad, np.flatnonzero((cosine < 0.99999) | (difference > 1e-5)))
    for row in bad[:10]:
        print(f"FAIL: {label}: line {row + 1}: cosine {cosine[row]:.8f}, "
              f"max |diff| {difference[row]:.3e}")
    return 1 if len(bad) else 0


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(*sys.argv[2:5])
    elif sys.argv[1] == "potion":
        potion(*sys.argv[2:5])
    else:
        sys.exit(compare(*sys.argv[2:5]))
