#!/usr/bin/env python3
"""Random-weight DeBERTa-v2/v3 checkpoints written by transformers' own
save_pretrained, and what tfenc must reproduce from them (one process makes
everything deberta.sh compares).

usage: deberta.py make OUT_DIR SENTENCES
         OUT_DIR/base/: a DebertaV2Model as DeBERTa-v3 configures it
         (relative_attention, position_buckets, share_att_key, LayerNorm of
         the relative embeddings, p2c|c2p, no absolute positions, and v3's
         max_position_embeddings of 512, which its positions never use), scaled
         down so that sequences up to 600 tokens pass both position_buckets
         (16) and max_relative_positions (32), with a sentence-transformers
         head (mean pooling, Normalize); reference.h5 holds `hidden [T, d]`
         per token (each sequence alone) and `embeddings [N, d]` pooled by
         sentence-transformers over one padded batch.
         OUT_DIR/classifier/: a DebertaV2ForSequenceClassification of the
         same encoder with 3 labels (ContextPooler: dense + GELU on [CLS]);
         reference.h5 holds `logits` (each sequence alone), `padded` (one
         padded batch) and `scores` (softmax, the pipeline's default).
         OUT_DIR/variant/: the other branches of DisentangledSelfAttention:
         pos_key_proj of its own (share_att_key false), c2p alone, exact
         distances clamped at max_relative_positions (no buckets), no
         LayerNorm of the relative embeddings, absolute positions (a table
         of 1024) and token types; reference.h5 `hidden`.
         OUT_DIR/v3-buckets/: one layer with DeBERTa-v3's own bucket settings
         (position_buckets 256, max_relative_positions 512), on sequences
         up to 600 tokens: every log bucket of the real models' table up
         to distance 599, float32 rounding of the logarithm included;
         reference.h5 `hidden`.
         Each directory has ids.h5, the token ids tfenc reads.
         OUT_DIR/text/: the classifier with a tokenizer: a SentencePiece
         Unigram with DeBERTa-v3's special pieces trained here on
         SENTENCES (deberta.py make OUT_DIR SENTENCES) and saved by
         transformers' DebertaV2TokenizerFast; reference.h5 `scores`, the
         softmax of the logits of transformers' tokenizer and model on the
         lines of SENTENCES, in padded batches, truncated at 256 tokens.
       deberta.py compare LIST
         Each line of LIST: REFERENCE.h5 DATASET TFENC.h5 MIN_COSINE LABEL
         (MIN_COSINE "-" for none), compared as below in one process (a
         Python start with numpy and h5py costs a CPU second); exits 1 if
         any fails.
         Largest absolute difference of tfenc's output (`hidden` per token,
         `embeddings`, or `scores` for logits/padded/scores) from DATASET;
         fails above 1e-4 (architectures.py's bar: float32 in another order
         leaves ~1e-6; a wrong bucket, term or scale moves these unit-gain
         activations by far more than 1e-2). With MIN_COSINE (bf16, int8
         jobs) the smallest cosine of a row to the reference must reach it
         instead: parity.sh's bars, 0.9999 for bf16 and 0.999 for int8."""
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from architectures import D, FFN, HEADS, LAYERS, VOCAB, sharpen, st_pool, write_head  # noqa: E402

TOLERANCE = 1e-4
# Past position_buckets / 2 = 8 (exact), position_buckets (16), the last
# bucket at max_relative_positions (32), a query block (64) and 512.
BASE_LENGTHS = [1, 2, 9, 17, 33, 64, 65, 130, 257, 600, 5, 40]
LENGTHS = [1, 2, 7, 16, 33, 64, 97, 129, 150, 5, 41, 12]


def config(**extra):
    import transformers as t
    settings = dict(hidden_size=D, num_attention_heads=HEADS, num_hidden_layers=LAYERS,
                    intermediate_size=FFN, vocab_size=VOCAB, hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0, max_position_embeddings=512,
                    relative_attention=True, position_buckets=16, max_relative_positions=32,
                    pos_att_type="p2c|c2p", share_att_key=True, norm_rel_ebd="layer_norm",
                    position_biased_input=False, type_vocab_size=0, layer_norm_eps=1e-7,
                    pad_token_id=0)
    settings.update(extra)
    return t.DebertaV2Config(**settings)


def token_rows(lengths, generator):
    return [torch.randint(3, VOCAB, (n,), generator=generator) for n in lengths]


def padded_batch(rows):
    longest = max(len(ids) for ids in rows)
    batch = torch.zeros(len(rows), longest, dtype=torch.long)
    mask = torch.zeros(len(rows), longest, dtype=torch.long)
    for i, ids in enumerate(rows):
        batch[i, :len(ids)] = ids
        mask[i, :len(ids)] = 1
    return batch, mask


def write_ids(directory, rows):
    with h5py.File(os.path.join(directory, "ids.h5"), "w") as f:
        f["tokens"] = torch.cat(rows).numpy().astype(np.int32)
        f["offsets"] = np.cumsum([0] + [len(ids) for ids in rows]).astype(np.int64)


def make_encoder(directory, model_config, lengths, generator, head):
    import transformers as t
    model = t.DebertaV2Model(model_config)
    sharpen(model, generator)
    model.save_pretrained(directory, safe_serialization=True)
    model.eval()
    rows = token_rows(lengths, generator)
    with torch.no_grad():
        hidden = [model(input_ids=ids[None]).last_hidden_state[0] for ids in rows]
        padded = torch.zeros(len(rows), max(lengths), D)
        _, mask = padded_batch(rows)
        for i, h in enumerate(hidden):
            padded[i, :len(h)] = h
        embeddings = st_pool(padded, mask, D, "mean", True)
    if head:
        write_head(directory, D, "mean")
    write_ids(directory, rows)
    with h5py.File(os.path.join(directory, "reference.h5"), "w") as f:
        f["hidden"] = torch.cat(hidden).numpy()
        f["embeddings"] = embeddings.numpy()


def make_classifier(directory, generator):
    import transformers as t
    model = t.DebertaV2ForSequenceClassification(config(
        num_labels=3, id2label={i: f"label {i}" for i in range(3)}))
    sharpen(model, generator)
    model.save_pretrained(directory, safe_serialization=True)
    model.eval()
    rows = token_rows(LENGTHS, generator)
    with torch.no_grad():
        alone = torch.cat([model(input_ids=ids[None]).logits for ids in rows])
        batch, mask = padded_batch(rows)
        padded = model(input_ids=batch, attention_mask=mask).logits
    write_ids(directory, rows)
    with h5py.File(os.path.join(directory, "reference.h5"), "w") as f:
        f["logits"] = alone.numpy()
        f["padded"] = padded.numpy()
        f["scores"] = torch.softmax(alone, dim=-1).numpy()


def make_text_classifier(directory, sentences, generator):
    import sentencepiece as spm
    import transformers as t
    os.makedirs(directory, exist_ok=True)
    lines = open(sentences, encoding="utf-8").read().splitlines()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_prefix=os.path.join(directory, "spm"),
        vocab_size=600, model_type="unigram", character_coverage=0.9995, num_threads=1,
        minloglevel=2, pad_id=0, pad_piece="[PAD]", bos_id=1, bos_piece="[CLS]", eos_id=2,
        eos_piece="[SEP]", unk_id=3, unk_piece="[UNK]")
    tokenizer = t.DebertaV2TokenizerFast(vocab_file=os.path.join(directory, "spm.model"))
    os.remove(os.path.join(directory, "spm.model"))
    os.remove(os.path.join(directory, "spm.vocab"))
    model = t.DebertaV2ForSequenceClassification(config(vocab_size=len(tokenizer), num_labels=2))
    sharpen(model, generator)
    model.save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    model.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(lines), 64):
            batch = tokenizer(lines[start:start + 64], padding=True, truncation=True,
                              max_length=256, return_tensors="pt")
            out.append(torch.softmax(model(input_ids=batch["input_ids"],
                                           attention_mask=batch["attention_mask"]).logits, -1))
    with h5py.File(os.path.join(directory, "reference.h5"), "w") as f:
        f["scores"] = torch.cat(out).numpy()


def make(out_dir, sentences):
    torch.manual_seed(0)
    make_encoder(os.path.join(out_dir, "base"), config(), BASE_LENGTHS,
                 torch.Generator().manual_seed(700), head=True)
    make_classifier(os.path.join(out_dir, "classifier"), torch.Generator().manual_seed(701))
    make_encoder(os.path.join(out_dir, "variant"),
                 config(share_att_key=False, pos_att_type=["c2p"], position_buckets=-1,
                        max_relative_positions=24, norm_rel_ebd="none",
                        position_biased_input=True, type_vocab_size=2,
                        max_position_embeddings=1024),
                 LENGTHS, torch.Generator().manual_seed(702), head=False)
    make_encoder(os.path.join(out_dir, "v3-buckets"),
                 config(num_hidden_layers=1, position_buckets=256, max_relative_positions=512),
                 [600, 257, 129, 3], torch.Generator().manual_seed(703), head=False)
    make_text_classifier(os.path.join(out_dir, "text"), sentences,
                         torch.Generator().manual_seed(704))
    print("deberta: base, classifier, variant, v3-buckets and text checkpoints written")


def compare(reference_path, dataset, tfenc_path, label, min_cosine=None):
    with h5py.File(reference_path, "r") as f:
        want = f[dataset][()].astype(np.float64)
    output = {"hidden": "hidden", "embeddings": "embeddings"}.get(dataset, "scores")
    with h5py.File(tfenc_path, "r") as f:
        got = f[output][()].astype(np.float64)
    if got.shape != want.shape:
        print(f"FAIL: {label}: tfenc shape {got.shape}, reference {want.shape}")
        return 1
    if min_cosine is not None:
        cosine = np.sum(got * want, axis=1) / (np.linalg.norm(got, axis=1)
                                               * np.linalg.norm(want, axis=1))
        worst = float(np.min(cosine))
        print(f"{label}: min cosine {worst:.6f} over {want.shape[0]} rows")
        if not worst >= float(min_cosine):
            print(f"FAIL: {label}: min cosine {worst:.6f} < {min_cosine}")
            return 1
        return 0
    worst = float(np.max(np.abs(got - want)))
    print(f"{label}: max |diff| {worst:.2e} over {want.shape[0]} rows")
    if not worst <= TOLERANCE:
        print(f"FAIL: {label}: max |diff| {worst:.3e} > {TOLERANCE}")
        return 1
    return 0


def compare_list(path, check=None):
    """Each line of `path` through `check` (compare() above, or gte.py's)."""
    failures = 0
    for line in open(path, encoding="utf-8"):
        reference, dataset, output, min_cosine, label = line.rstrip("\n").split(" ", 4)
        failures += (check or compare)(reference, dataset, output, label,
                                       None if min_cosine == "-" else min_cosine)
    return 1 if failures else 0


if __name__ == "__main__":
    if sys.argv[1] == "make":
        # Only the generator needs PyTorch (1.5 CPU-s to import): the
        # comparison does not load it.
        import torch
        torch.set_num_threads(1)  # tiny models: more threads only spin
        make(sys.argv[2], sys.argv[3])
        sys.exit(0)
    sys.exit(compare_list(sys.argv[2]))
