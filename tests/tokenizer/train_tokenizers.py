#!/usr/bin/env python3
"""Trains the tokenizers that tests/tokenizer/test-json.sh compares with
tfenc, each a tokenizer.json in OUTPUT_DIR, on the lines of TRAINING_TEXT:

  wordpiece        BertNormalizer (cased), BertPreTokenizer, WordPiece, BertProcessing
  wordpiece-nfd    NFD + Lowercase + StripAccents, Whitespace + Digits, WordPiece,
                   TemplateProcessing
  bpe-bytelevel    RoBERTa's: ByteLevel (prefix space), byte-level BPE,
                   RobertaProcessing, <mask> with lstrip
  bpe-split        Qwen's: NFC, Split on Qwen's pattern + ByteLevel, BPE,
                   TemplateProcessing "$A <|endoftext|>" (none + EOS)
  bpe-char         NFKC + Lowercase + Strip, WhitespaceSplit + Punctuation, BPE
                   with "##" prefix, "</w>" suffix, <unk> fused
  unigram          NFKC + Replace(" {2,}"), Metaspace (prepend "first"), Unigram,
                   TemplateProcessing, added tokens with single_word / rstrip
  spm-unigram      SentencePiece Unigram converted as transformers converts
                   XLM-RoBERTa: Precompiled charsmap + Replace, Metaspace
  spm-deberta      SentencePiece Unigram with DeBERTa-v3's special pieces ([PAD],
                   [CLS], [SEP], [UNK]) converted by transformers'
                   DebertaV2TokenizerFast: Strip + Precompiled + Replace,
                   Sequence[Metaspace], TemplateProcessing [CLS] $A [SEP]
  spm-bpe          SentencePiece BPE with byte_fallback, converted as Llama:
                   Prepend + Replace, BPE byte_fallback, fuse_unk
  gemma-bpe        Gemma's (mmBERT's) kind at its 256,000 pieces: Replace
                   alone, no pre-tokenizer, BPE byte_fallback, <bos> $A <eos>
                   (tests/tokenizer/gemma_style.py)

The trainers (tokenizers' own, and sentencepiece) are the ones users train
with; the comparison is against HF `tokenizers` on the resulting files.
Usage: train_tokenizers.py TRAINING_TEXT OUTPUT_DIR"""

import os
import sys

from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                        pre_tokenizers, processors, trainers)

VOCAB = 6000
QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def train(tokenizer, trainer, lines, path):
    tokenizer.train_from_iterator(lines, trainer=trainer)
    tokenizer.save(path)


def wordpiece(lines, out):
    t = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    t.normalizer = normalizers.BertNormalizer(lowercase=False)
    t.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    trainer = trainers.WordPieceTrainer(vocab_size=VOCAB, special_tokens=specials)
    t.train_from_iterator(lines, trainer=trainer)
    t.post_processor = processors.BertProcessing(("[SEP]", t.token_to_id("[SEP]")),
                                                 ("[CLS]", t.token_to_id("[CLS]")))
    t.save(out)


def wordpiece_nfd(lines, out):
    t = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=40))
    t.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.Lowercase(),
                                         normalizers.StripAccents()])
    t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(),
                                               pre_tokenizers.Digits(individual_digits=True)])
    trainer = trainers.WordPieceTrainer(vocab_size=VOCAB, special_tokens=["[UNK]", "[CLS]", "[SEP]"])
    t.train_from_iterator(lines, trainer=trainer)
    t.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", t.token_to_id("[CLS]")),
                                                 ("[SEP]", t.token_to_id("[SEP]"))])
    t.save(out)


def bpe_bytelevel(lines, out):
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    t.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<s>", "<pad>", "</s>", "<unk>"])
    t.train_from_iterator(lines, trainer=trainer)
    t.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True)])
    t.post_processor = processors.RobertaProcessing(("</s>", t.token_to_id("</s>")),
                                                    ("<s>", t.token_to_id("<s>")))
    t.save(out)


def bpe_split(lines, out):
    t = Tokenizer(models.BPE())
    t.normalizer = normalizers.NFC()
    t.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    t.train_from_iterator(lines, trainer=trainer)
    t.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    t.post_processor = processors.TemplateProcessing(
        single="$A <|endoftext|>", special_tokens=[("<|endoftext|>", t.token_to_id("<|endoftext|>"))])
    t.save(out)


def bpe_char(lines, out):
    t = Tokenizer(models.BPE(unk_token="<unk>", continuing_subword_prefix="##",
                             end_of_word_suffix="</w>", fuse_unk=True))
    t.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase(), normalizers.Strip()])
    t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                               pre_tokenizers.Punctuation()])
    # A small alphabet, so that rarer characters are unknown and fuse.
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, limit_alphabet=300, special_tokens=["<unk>", "<s>", "</s>"],
                                  continuing_subword_prefix="##", end_of_word_suffix="</w>")
    t.train_from_iterator(lines, trainer=trainer)
    t.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", t.token_to_id("<s>")), ("</s>", t.token_to_id("</s>"))])
    t.save(out)


def unigram(lines, out):
    t = Tokenizer(models.Unigram())
    t.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first")
    trainer = trainers.UnigramTrainer(vocab_size=VOCAB, unk_token="<unk>",
                                      special_tokens=["<pad>", "<unk>", "<s>", "</s>"])
    t.train_from_iterator(lines, trainer=trainer)
    t.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True)])
    t.add_tokens([AddedToken("tfenc", single_word=True), AddedToken("Error:", rstrip=True, normalized=False)])
    t.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", t.token_to_id("<s>")), ("</s>", t.token_to_id("</s>"))])
    t.save(out)


def sentencepiece_model(lines, prefix, model_type, **options):
    import sentencepiece as spm
    text = prefix + ".txt"
    with open(text, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")
    spm.SentencePieceTrainer.train(input=text, model_prefix=prefix, vocab_size=VOCAB,
                                   model_type=model_type, character_coverage=0.9995,
                                   num_threads=1, minloglevel=2, **options)
    return prefix + ".model"


def spm_unigram(lines, out):
    from transformers import XLMRobertaTokenizer
    from transformers.convert_slow_tokenizer import convert_slow_tokenizer
    path = sentencepiece_model(lines, out[:-5], "unigram")
    convert_slow_tokenizer(XLMRobertaTokenizer(vocab_file=path)).save(out)


def spm_deberta(lines, out):
    from transformers import DebertaV2TokenizerFast
    path = sentencepiece_model(lines, out[:-5], "unigram", pad_id=0, pad_piece="[PAD]",
                               bos_id=1, bos_piece="[CLS]", eos_id=2, eos_piece="[SEP]",
                               unk_id=3, unk_piece="[UNK]")
    DebertaV2TokenizerFast(vocab_file=path)._tokenizer.save(out)


def spm_bpe(lines, out):
    from transformers import LlamaTokenizer
    from transformers.convert_slow_tokenizer import convert_slow_tokenizer
    path = sentencepiece_model(lines, out[:-5], "bpe", byte_fallback=True)
    convert_slow_tokenizer(LlamaTokenizer(vocab_file=path, legacy=True)).save(out)


def gemma_bpe(lines, out):
    import gemma_style
    gemma_style.build(lines).save(out)


def main():
    text, output = sys.argv[1:3]
    lines = [line.rstrip("\n") for line in open(text, encoding="utf-8")]
    os.makedirs(output, exist_ok=True)
    for name, make in [("wordpiece", wordpiece), ("wordpiece-nfd", wordpiece_nfd),
                       ("bpe-bytelevel", bpe_bytelevel), ("bpe-split", bpe_split),
                       ("bpe-char", bpe_char), ("unigram", unigram),
                       ("spm-unigram", spm_unigram), ("spm-deberta", spm_deberta),
                       ("spm-bpe", spm_bpe), ("gemma-bpe", gemma_bpe)]:
        make(lines, os.path.join(output, name + ".json"))


if __name__ == "__main__":
    main()
