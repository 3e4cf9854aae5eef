#!/usr/bin/env python3
"""Random-weight *ForSequenceClassification checkpoints, written by
transformers' own save_pretrained, for the tests of task heads.

usage: heads.py make OUT_DIR
         For each kind writes OUT_DIR/KIND/ (config.json, model.safetensors)
         with weights drawn by architectures.sharpen, so that the head's
         tensors are as large as the encoder's; and OUT_DIR/pretraining/, a
         BertForPreTraining checkpoint whose masked-LM and next-sentence
         heads an encoder import leaves out as sentence-transformers does."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from architectures import D, FFN, HEADS, LAYERS, VOCAB, sharpen  # noqa: E402

KINDS = ["bert", "roberta", "xlm-roberta", "electra", "distilbert"]
LABELS = 3


def classifier(kind):
    import transformers as t
    common = dict(hidden_size=D, num_attention_heads=HEADS, num_hidden_layers=LAYERS,
                  intermediate_size=FFN, vocab_size=VOCAB, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0, num_labels=LABELS)
    if kind == "bert":
        return t.BertForSequenceClassification(t.BertConfig(max_position_embeddings=160,
                                                            **common))
    if kind == "roberta":
        return t.RobertaForSequenceClassification(t.RobertaConfig(
            max_position_embeddings=162, type_vocab_size=1, layer_norm_eps=1e-5, **common))
    if kind == "xlm-roberta":
        return t.XLMRobertaForSequenceClassification(t.XLMRobertaConfig(
            max_position_embeddings=162, type_vocab_size=1, **common))
    if kind == "electra":
        return t.ElectraForSequenceClassification(t.ElectraConfig(
            embedding_size=D, max_position_embeddings=160, **common))
    if kind == "distilbert":
        return t.DistilBertForSequenceClassification(t.DistilBertConfig(
            dim=D, n_heads=HEADS, n_layers=LAYERS, hidden_dim=FFN, vocab_size=VOCAB,
            max_position_embeddings=160, dropout=0.0, attention_dropout=0.0,
            seq_classif_dropout=0.0, num_labels=LABELS))
    raise KeyError(kind)


def make(out_dir):
    import transformers as t
    torch.manual_seed(0)
    for number, kind in enumerate(KINDS):
        model = classifier(kind)
        sharpen(model, torch.Generator().manual_seed(300 + number))
        model.save_pretrained(os.path.join(out_dir, kind), safe_serialization=True)
    pretraining = t.BertForPreTraining(t.BertConfig(
        hidden_size=D, num_attention_heads=HEADS, num_hidden_layers=LAYERS,
        intermediate_size=FFN, vocab_size=VOCAB, max_position_embeddings=160))
    pretraining.save_pretrained(os.path.join(out_dir, "pretraining"), safe_serialization=True)


if __name__ == "__main__":
    make(sys.argv[2])
