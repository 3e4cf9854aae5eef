#!/usr/bin/env python3
"""Checks a weights file (and job file) written by tfenc-import against the
checkpoint directory it came from: every tensor under its tfenc name, equal
to the source exactly (or to PyTorch's own rounding for 16-bit storage), the
tokenizer group, the provenance attributes and the job's sections.

usage: check_import.py CHECKPOINT_DIR MODEL.h5 JOB.ini float32|float16|bfloat16"""
import configparser
import json
import os
import sys

import h5py
import numpy as np
import torch

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


def expected_datasets(config, prefix):
    """tfenc dataset path -> checkpoint tensor name (docs/weights.md)."""
    mapping = {
        "/embeddings/token_embeddings": "embeddings.word_embeddings.weight",
        "/embeddings/position_embeddings": "embeddings.position_embeddings.weight",
        "/embeddings/token_type_embeddings": "embeddings.token_type_embeddings.weight",
        "/embeddings_norm/weight": "embeddings.LayerNorm.weight",
        "/embeddings_norm/bias": "embeddings.LayerNorm.bias",
    }
    per_layer = {
        "attention/q_weight": "attention.self.query.weight",
        "attention/q_bias": "attention.self.query.bias",
        "attention/k_weight": "attention.self.key.weight",
        "attention/k_bias": "attention.self.key.bias",
        "attention/v_weight": "attention.self.value.weight",
        "attention/v_bias": "attention.self.value.bias",
        "attention/out_weight": "attention.output.dense.weight",
        "attention/out_bias": "attention.output.dense.bias",
        "attention/norm/weight": "attention.output.LayerNorm.weight",
        "attention/norm/bias": "attention.output.LayerNorm.bias",
        "ffn/in_weight": "intermediate.dense.weight",
        "ffn/in_bias": "intermediate.dense.bias",
        "ffn/out_weight": "output.dense.weight",
        "ffn/out_bias": "output.dense.bias",
        "ffn/norm/weight": "output.LayerNorm.weight",
        "ffn/norm/bias": "output.LayerNorm.bias",
    }
    for i in range(config["num_hidden_layers"]):
        for target, source in per_layer.items():
            mapping[f"/encoder/{i}/{target}"] = f"encoder.layer.{i}.{source}"
    return {target: prefix + source for target, source in mapping.items()}


def stored_as_float32(dataset, storage):
    values = dataset[()]
    if storage == "float16":
        check(values.dtype == np.float16, f"{dataset.name}: stored as {values.dtype}, not float16")
    else:
        check(values.dtype == np.float32, f"{dataset.name}: read as {values.dtype}")
    if storage == "bfloat16":
        t = dataset.id.get_type()
        layout = (t.get_size(), t.get_fields(), t.get_ebias())
        check(layout == (2, (15, 7, 8, 0, 7), 127),
              f"{dataset.name}: bfloat16 layout {layout} differs from docs/weights.md")
    return values


def main():
    checkpoint, weights_path, job_path, storage = sys.argv[1:5]
    with open(os.path.join(checkpoint, "config.json")) as f:
        config_text = f.read()
    config = json.loads(config_text)
    reference = torch.load(os.path.join(checkpoint, "reference.pt"))
    prefix = next(p for p in ("", "bert.", "roberta.")
                  if p + "embeddings.word_embeddings.weight" in reference)
    mapping = expected_datasets(config, prefix)

    with h5py.File(weights_path, "r") as h5:
        found = []
        h5.visititems(lambda name, obj: found.append("/" + name)
                      if isinstance(obj, h5py.Dataset) else None)
        tokenizer_datasets = {"/tokenizer/vocab"}
        check(set(found) - tokenizer_datasets == set(mapping),
              f"datasets differ: extra {sorted(set(found) - tokenizer_datasets - set(mapping))}, "
              f"missing {sorted(set(mapping) - set(found))}")
        for target, source in mapping.items():
            if target not in h5:
                continue
            values = stored_as_float32(h5[target], storage)
            want = reference[source]
            # Exact: the importer copies; 16-bit storage must round as PyTorch does.
            if storage == "float16":
                want = want.half().numpy()
            elif storage == "bfloat16":
                want = want.bfloat16().float().numpy()
            else:
                want = want.numpy()
            check(values.shape == want.shape, f"{target}: shape {values.shape} != {want.shape}")
            if values.shape == want.shape:
                bad = int(np.sum(values.view(np.uint8) != want.view(np.uint8)))
                check(bad == 0, f"{target}: {bad} bytes differ from {source}")

        check(h5.attrs.get("config_json") == config_text, "root attribute config_json differs")
        check(h5.attrs.get("source") == os.path.realpath(checkpoint),
              f"root attribute source is {h5.attrs.get('source')!r}")
        check(str(h5.attrs.get("importer_version", "")).startswith("tfenc-import "),
              "root attribute importer_version missing")

        vocab_path = os.path.join(checkpoint, "vocab.txt")
        if os.path.exists(vocab_path):
            with open(vocab_path, encoding="utf-8") as f:
                vocab = [line.rstrip("\n") for line in f]
            stored = [t.decode("utf-8") if isinstance(t, bytes) else t
                      for t in h5["/tokenizer/vocab"][()]]
            check(stored == vocab, "/tokenizer/vocab differs from vocab.txt")
            attrs = dict(h5["/tokenizer"].attrs)
            with open(os.path.join(checkpoint, "sentence_bert_config.json")) as f:
                max_seq_length = json.load(f)["max_seq_length"]
            want = {"do_lower_case": 0, "strip_accents": -1, "tokenize_chinese_chars": 1,
                    "max_length": min(max_seq_length, config["max_position_embeddings"]),
                    "cls_token": "[CLS]", "sep_token": "[SEP]", "unk_token": "[UNK]",
                    "pad_token": "[PAD]"}
            for key, value in want.items():
                got = attrs.get(key)
                got = got.decode() if isinstance(got, bytes) else got
                check(got == value, f"/tokenizer attribute {key} = {got!r}, expected {value!r}")
        else:
            check("/tokenizer" not in h5, "a /tokenizer group without vocab.txt")

    # The job file: what a user runs.
    job = configparser.ConfigParser(inline_comment_prefixes=(";", "#"))
    job.read(job_path)
    roberta = config["model_type"] in ("roberta", "xlm-roberta")
    offset = config["pad_token_id"] + 1 if roberta else 0
    positions = config["max_position_embeddings"] - offset
    want_sections = ["job", "model", "embeddings", "embeddings_norm", "encoder",
                     "encoder.attention", "encoder.attention.norm", "encoder.ffn",
                     "encoder.ffn.norm"]
    if os.path.exists(os.path.join(checkpoint, "modules.json")):
        want_sections.append("pooling")
    check(job.sections() == want_sections, f"job sections {job.sections()}")
    weights = os.path.join(os.path.dirname(job_path), job.get("model", "weights", fallback=""))
    check(os.path.realpath(weights) == os.path.realpath(weights_path),
          f"job weights {weights} is not {weights_path}")
    activation = {"gelu": "gelu", "gelu_new": "gelu_tanh", "relu": "relu"}[config["hidden_act"]]
    expect = {
        ("model", "d_model"): str(config["hidden_size"]),
        ("model", "vocab_size"): str(config["vocab_size"]),
        ("model", "max_positions"): str(positions),
        ("embeddings", "type"): "embedding",
        ("embeddings", "learned_positions"): "true",
        ("embeddings", "token_types"): "true",
        ("encoder", "repeat"): str(config["num_hidden_layers"]),
        ("encoder", "norm_position"): "post",
        ("encoder.attention", "type"): "mha",
        ("encoder.attention", "n_heads"): str(config["num_attention_heads"]),
        ("encoder.ffn", "type"): "ffn",
        ("encoder.ffn", "activation"): activation,
    }
    if roberta:
        expect[("embeddings", "position_offset")] = str(offset)
        expect[("job", "max_seq_len")] = str(positions)
    else:
        check(not job.has_option("embeddings", "position_offset"), "BERT has no position_offset")
        expect[("job", "max_seq_len")] = str(min(40, positions))
        expect[("pooling", "mode")] = "cls"
        expect[("pooling", "normalize")] = "true"
    for (section, key), value in expect.items():
        got = job.get(section, key, fallback=None)
        check(got == value, f"job [{section}] {key} = {got!r}, expected {value!r}")
    for section in ("embeddings_norm", "encoder.attention.norm", "encoder.ffn.norm"):
        check(job.get(section, "type", fallback="") == "layernorm", f"[{section}] type")
        check(float(job.get(section, "eps", fallback="nan")) == config["layer_norm_eps"],
              f"[{section}] eps {job.get(section, 'eps', fallback=None)}")

    for message in failures:
        print("FAIL:", message)
    print(f"check_import: {weights_path} ({storage}): {len(mapping)} datasets, "
          f"{len(failures)} problems")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
