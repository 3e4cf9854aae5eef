#!/usr/bin/env python3
"""Writes the WordPiece tokenizer.json (Hugging Face's format, BERT's
normalizer, pre-tokenizer and [CLS] ... [SEP]) of a vocab.txt, with the
standard library only. Usage: wordpiece_json.py VOCAB_TXT TOKENIZER_JSON"""
import json, sys
vocab = [line.rstrip("\n") for line in open(sys.argv[1], encoding="utf-8")]
ids = {token: i for i, token in enumerate(vocab)}
special = [{"id": ids[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True} for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]") if t in ids]
json.dump({"version": "1.0", "truncation": None, "padding": None, "added_tokens": special,
           "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                          "strip_accents": None, "lowercase": True},
           "pre_tokenizer": {"type": "BertPreTokenizer"},
           "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", ids["[SEP]"]],
                              "cls": ["[CLS]", ids["[CLS]"]]},
           "decoder": None,
           "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                     "max_input_chars_per_word": 100, "vocab": ids}}, open(sys.argv[2], "w"))
