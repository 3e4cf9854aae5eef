#!/usr/bin/env python3
"""A tokenizer.json of the kind Gemma's is (Gemma 2's, which mmBERT ships),
built with Hugging Face's `tokenizers` from text: the real one has 256,000
pieces from SentencePiece, 34 MB that no package offline carries.

What makes it Gemma's: the normalizer Replace(" ", "\u2581") and nothing
else (no Prepend: Gemma adds no space before the text), no pre-tokenizer
(the whole text is one BPE word, so merges run over a whole document), a
BPE model with byte_fallback and fuse_unk (a character outside the
vocabulary becomes its UTF-8 bytes <0x..>, ids 5 to 260 as in Gemma's
order of special tokens, then bytes), the special tokens <pad> <eos>
<bos> <unk> <mask> at ids 0 to 4 (mmBERT's), a few added tokens that are
not special (Gemma's HTML tags, normalized = false), the template
<bos> $A <eos> (mmBERT's), and a vocabulary of `size` pieces: the pieces
trained on the text (a SentencePiece-like vocabulary of whole-word pieces
starting with \u2581), then merges of trained pieces, lowest in rank, up to
the size, so that the model's tables are as large as the real one's.

usage: gemma_style.py TRAINING_TEXT OUTPUT.json [SIZE]"""
import json
import random
import sys

from tokenizers import (AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers,
                        processors, trainers)

SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"]
# Gemma's added tokens that are not special, matched in the raw text.
TAGS = ["<table>", "<tr>", "<td>", "<h1>"]
SPACE = "\u2581"


def trained_pieces(lines, count):
    """(pieces, merges) of a BPE trained on `lines` split at spaces as
    SentencePiece splits them, with a small alphabet so that rarer
    characters fall back to bytes."""
    t = Tokenizer(models.BPE(unk_token="<unk>"))
    t.normalizer = normalizers.Replace(" ", SPACE)
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="never")
    trainer = trainers.BpeTrainer(vocab_size=count, limit_alphabet=300, show_progress=False,
                                  special_tokens=SPECIALS)
    t.train_from_iterator(lines, trainer=trainer)
    model = json.loads(t.to_str())["model"]
    pieces = sorted(model["vocab"], key=model["vocab"].get)
    merges = [m.split(" ") if isinstance(m, str) else m for m in model["merges"]]
    return [p for p in pieces if p not in SPECIALS], merges


def build(lines, size=256000, trained=8000, seed=47):
    pieces, merges = trained_pieces(lines, trained)
    vocab = {token: i for i, token in enumerate(SPECIALS)}
    for byte in range(256):
        vocab["<0x%02X>" % byte] = len(vocab)
    for piece in pieces:
        vocab.setdefault(piece, len(vocab))
    # Merges of two trained pieces (the second not starting a word), ranked
    # after the trained ones: some apply to real text, most never do.
    rng = random.Random(seed)
    inner = [p for p in pieces if not p.startswith(SPACE)]
    while len(vocab) < size - len(TAGS):
        left, right = rng.choice(pieces), rng.choice(inner)
        if left + right not in vocab:
            vocab[left + right] = len(vocab)
            merges.append([left, right])
    model = models.BPE(vocab=vocab, merges=[tuple(m) for m in merges], unk_token="<unk>",
                       byte_fallback=True, fuse_unk=True)
    t = Tokenizer(model)
    t.normalizer = normalizers.Replace(" ", SPACE)
    t.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(),
                                   decoders.Fuse()])
    t.add_special_tokens([AddedToken(s, normalized=False, special=True) for s in SPECIALS])
    t.add_tokens([AddedToken(tag, normalized=False, special=False) for tag in TAGS])
    t.post_processor = processors.TemplateProcessing(
        single="<bos> $A <eos>", pair="<bos> $A <eos> $B <eos>",
        special_tokens=[("<bos>", vocab["<bos>"]), ("<eos>", vocab["<eos>"])])
    assert t.get_vocab_size(with_added_tokens=True) == size
    return t


def main():
    text, output = sys.argv[1:3]
    size = int(sys.argv[3]) if len(sys.argv) > 3 else 256000
    lines = [line.rstrip("\n") for line in open(text, encoding="utf-8")]
    build(lines, size).save(output)


if __name__ == "__main__":
    main()
