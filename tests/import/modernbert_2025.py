#!/usr/bin/env python3
"""The ModernBERT checkpoints of 2025 on random weights of their families'
structure, and what tfenc must reproduce from them.

usage: modernbert_2025.py make SENTENCES.txt OUT_DIR
  OUT_DIR/FAMILY/ for each family below: config.json as the family's
  (scaled down: widths, layer counts, windows; the keys and the values
  that change the numbers as published), model.safetensors, tokenizer.json
  and tokenizer_config.json (model_max_length 8192), modules.json with
  sentence-transformers' Pooling (and Normalize);
  OUT_DIR/reference-FAMILY.h5: `embeddings [N, d]`, each sentence alone
  through Hugging Face's `tokenizers` and the reference model, pooled
  (and normalised) as the family's sentence-transformers modules do, and
  `lengths [N]`, its tokens;
  OUT_DIR/bad-*/: folders tfenc-import must refuse (tests/import/
  modernbert_2025.sh names them).

The families, as their config.json files are published:
  mmbert   jhu-clsp/mmBERT-base/small: ModernBertForMaskedLM (tensors
           under model., the head and the decoder's bias beside them),
           transformers 4.48's keys, local and global RoPE base 160000,
           Gemma 2's tokenizer (tests/tokenizer/gemma_style.py: 256,000
           pieces, byte fallback, <bos> $A <eos>; pad 0), mean pooling;
  ettin    jhu-clsp/ettin-encoder-*: as transformers 5 re-saves them:
           layer_types and rope_parameters (both bases 160000) beside the
           older keys, an odd layer count (17m's 7), ModernBERT's OLMo
           byte-level BPE ([CLS] $A [SEP], [MASK] with lstrip, vocab_size
           padded to a multiple of 64), mean pooling;
  granite  ibm-granite/granite-embedding-(small-)english-r2: ModernBertModel
           (no prefix), global base 80000 and local 10000, 12 layers as the
           small one's, the OLMo tokenizer, CLS pooling and Normalize.

The reference is tests/import/reference_models.ModernBert (written from
transformers 4.48's modeling_modernbert.py, with transformers 5's
layer_types and rope_parameters: transformers 4.40 in the test venv has
no ModernBERT, and no newer one installs with its torch)."""
import json
import os
import shutil
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "tokenizer"))
import gemma_style  # noqa: E402
import reference_models  # noqa: E402
from architectures import sharpen  # noqa: E402

FAMILIES = ["mmbert", "ettin", "granite"]


def olmo_tokenizer(lines):
    """ModernBERT's tokenizer, as Ettin and granite r2 ship it: NFC,
    byte-level pre-tokenizer without a prefix space, byte-level BPE, the
    specials after the pieces ([MASK] strips the space before it), the
    template [CLS] $A [SEP]."""
    from tokenizers import (AddedToken, Tokenizer, decoders, models, normalizers,
                            pre_tokenizers, processors, trainers)
    t = Tokenizer(models.BPE())
    t.normalizer = normalizers.NFC()
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2000, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    t.train_from_iterator(lines, trainer=trainer)
    t.add_special_tokens([AddedToken(s, normalized=False, special=True)
                          for s in ("[UNK]", "[CLS]", "[SEP]", "[PAD]")])
    t.add_special_tokens([AddedToken("[MASK]", lstrip=True, normalized=False, special=True)])
    t.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", t.token_to_id("[CLS]")), ("[SEP]", t.token_to_id("[SEP]"))])
    return t


def family_config(family, tokenizer):
    """config.json of the family, scaled down."""
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    common = {"model_type": "modernbert", "attention_bias": False, "attention_dropout": 0.0,
              "classifier_activation": "gelu", "classifier_bias": False,
              "classifier_dropout": 0.0, "classifier_pooling": "mean", "decoder_bias": True,
              "deterministic_flash_attn": False, "embedding_dropout": 0.0,
              "hidden_activation": "gelu", "initializer_cutoff_factor": 2.0,
              "initializer_range": 0.02, "layer_norm_eps": 1e-05, "mlp_bias": False,
              "mlp_dropout": 0.0, "norm_bias": False, "norm_eps": 1e-05,
              "max_position_embeddings": 8192, "sparse_pred_ignore_index": -100,
              "sparse_prediction": False, "torch_dtype": "float32"}
    if family == "mmbert":
        return dict(common, architectures=["ModernBertForMaskedLM"], hidden_size=32,
                    num_attention_heads=4, num_hidden_layers=4, intermediate_size=48,
                    vocab_size=size, global_attn_every_n_layers=3, global_rope_theta=160000,
                    local_rope_theta=160000, local_attention=16, pad_token_id=0,
                    bos_token_id=2, eos_token_id=1, cls_token_id=1, sep_token_id=1,
                    position_embedding_type="sans_pos", transformers_version="4.48.0")
    olmo = {"pad_token_id": tokenizer.token_to_id("[PAD]"),
            "cls_token_id": tokenizer.token_to_id("[CLS]"),
            "bos_token_id": tokenizer.token_to_id("[CLS]"),
            "sep_token_id": tokenizer.token_to_id("[SEP]"),
            "eos_token_id": tokenizer.token_to_id("[SEP]"),
            "vocab_size": (size + 63) // 64 * 64 + 64}
    if family == "ettin":
        layers = 7
        return dict(common, **olmo, architectures=["ModernBertForMaskedLM"], hidden_size=32,
                    num_attention_heads=4, num_hidden_layers=layers, intermediate_size=48,
                    global_attn_every_n_layers=3, local_attention=8,
                    layer_types=["full_attention" if i % 3 == 0 else "sliding_attention"
                                 for i in range(layers)],
                    rope_parameters={"full_attention": {"rope_type": "default",
                                                        "rope_theta": 160000.0},
                                     "sliding_attention": {"rope_type": "default",
                                                           "rope_theta": 160000.0}},
                    tie_word_embeddings=True, transformers_version="5.0.0")
    return dict(common, **olmo, architectures=["ModernBertModel"], hidden_size=48,
                num_attention_heads=4, num_hidden_layers=12, intermediate_size=96,
                global_attn_every_n_layers=3, global_rope_theta=80000.0,
                local_rope_theta=10000.0, local_attention=12, transformers_version="4.48.0")


POOLING = {"mmbert": "mean", "ettin": "mean", "granite": "cls"}


def state_dict(family, config, generator):
    """The weights as the family's class saves them: a masked-LM's encoder
    under model. with its head and decoder bias (the decoder weight tied to
    the embeddings, saved once), or the bare ModernBertModel."""
    encoder = reference_models.ModernBert(config)
    sharpen(encoder, generator)
    # The maps into the residual stream at 1/sqrt(2 layers) of the others'
    # gain, as ModernBERT's own initialisation scales them ("out" layers):
    # at unit gain 12 layers amplify bf16's rounding beyond any trained
    # model's (granite's min cosine 0.9993), while the RoPE bases still
    # move the outputs 10 times the bar (asserted in make()).
    with torch.no_grad():
        for layer in encoder.layers:
            layer.attn.Wo.weight.mul_((2 * config["num_hidden_layers"]) ** -0.5)
            layer.mlp.Wo.weight.mul_((2 * config["num_hidden_layers"]) ** -0.5)
    weights = {name: tensor.detach().clone() for name, tensor in encoder.state_dict().items()}
    if config["architectures"] == ["ModernBertForMaskedLM"]:
        d = config["hidden_size"]
        weights = {"model." + name: tensor for name, tensor in weights.items()}
        weights["head.dense.weight"] = torch.randn(d, d, generator=generator) / d ** 0.5
        weights["head.norm.weight"] = 1 + 0.1 * torch.randn(d, generator=generator)
        weights["decoder.bias"] = 0.1 * torch.randn(config["vocab_size"], generator=generator)
    return encoder, weights


def write_folder(family, directory, config, tokenizer, weights):
    from safetensors.torch import save_file
    os.makedirs(os.path.join(directory, "1_Pooling"), exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    save_file({name: tensor.contiguous() for name, tensor in weights.items()},
              os.path.join(directory, "model.safetensors"))
    tokenizer.save(os.path.join(directory, "tokenizer.json"))
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"model_max_length": 8192, "clean_up_tokenization_spaces": False,
                   "tokenizer_class": "PreTrainedTokenizerFast"}, f)
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling"},
               {"idx": 2, "name": "2", "path": "2_Normalize",
                "type": "sentence_transformers.models.Normalize"}]
    with open(os.path.join(directory, "modules.json"), "w") as f:
        json.dump(modules, f)
    with open(os.path.join(directory, "sentence_bert_config.json"), "w") as f:
        json.dump({"max_seq_length": 8192, "do_lower_case": False}, f)
    mode = POOLING[family]
    with open(os.path.join(directory, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": config["hidden_size"],
                   "pooling_mode_cls_token": mode == "cls",
                   "pooling_mode_mean_tokens": mode == "mean",
                   "pooling_mode_max_tokens": False,
                   "pooling_mode_mean_sqrt_len_tokens": False}, f)


def reference(family, encoder, tokenizer, lines, out_path):
    rows, lengths = [], []
    with torch.no_grad():
        for line in lines:
            ids = torch.tensor([tokenizer.encode(line).ids])
            hidden = encoder(ids)[0]
            pooled = hidden[0] if POOLING[family] == "cls" else hidden.mean(0)
            rows.append(F.normalize(pooled, dim=0).numpy())
            lengths.append(ids.shape[1])
    with h5py.File(out_path, "w") as f:
        f["embeddings"] = np.stack(rows).astype(np.float32)
        f["lengths"] = np.array(lengths, dtype=np.int64)
    return np.stack(rows)


def edited_copy(source, directory, config_changes=None, drop=None, tokenizer_from=None):
    """A bad folder: `source` with config.json changed, one tensor left out,
    or another folder's tokenizer; what it does not change is a relative
    link to `source`'s (mmBERT's weights are 33 MB)."""
    os.makedirs(directory, exist_ok=True)
    changed = {"config.json": config_changes, "model.safetensors": drop,
               "tokenizer.json": tokenizer_from}
    for name in os.listdir(source):
        if not changed.get(name):
            os.symlink(os.path.join("..", os.path.basename(source), name),
                       os.path.join(directory, name))
    if config_changes:
        with open(os.path.join(source, "config.json")) as f:
            config = json.load(f)
        config.update(config_changes)
        with open(os.path.join(directory, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
    if drop:
        from safetensors.torch import load_file, save_file
        weights = load_file(os.path.join(source, "model.safetensors"))
        del weights[drop]
        save_file(weights, os.path.join(directory, "model.safetensors"))
    if tokenizer_from:
        shutil.copy(os.path.join(tokenizer_from, "tokenizer.json"), directory)


def make(sentences_path, out_dir):
    torch.manual_seed(0)
    with open(sentences_path, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    olmo = olmo_tokenizer(lines)
    gemma = gemma_style.build(lines)
    pooled = {}
    for number, family in enumerate(FAMILIES):
        generator = torch.Generator().manual_seed(2025 + number)
        tokenizer = gemma if family == "mmbert" else olmo
        config = family_config(family, tokenizer)
        encoder, weights = state_dict(family, config, generator)
        directory = os.path.join(out_dir, family)
        write_folder(family, directory, config, tokenizer, weights)
        pooled[family] = reference(family, encoder, tokenizer, lines,
                                   os.path.join(out_dir, f"reference-{family}.h5"))
        # What tfenc would compute if it read the family's keys as the
        # older ModernBERT defaults (local base 10000, every third layer
        # global): ten times the bar (cosine 0.99999) from the reference,
        # or the test could not tell.
        if family in ("mmbert", "ettin"):
            older = {k: v for k, v in config.items()
                     if k not in ("layer_types", "rope_parameters", "local_rope_theta")}
            encoder.c = older
            wrong = reference(family, encoder, tokenizer, lines[:50], os.devnull)
            cosine = (wrong * pooled[family][:50]).sum(1).min()
            assert cosine < 0.9999, f"{family}: the RoPE bases hardly matter ({cosine})"
    mmbert = os.path.join(out_dir, "mmbert")
    ettin = os.path.join(out_dir, "ettin")
    edited_copy(mmbert, os.path.join(out_dir, "bad-vocab"), tokenizer_from=ettin)
    edited_copy(ettin, os.path.join(out_dir, "bad-missing"), drop="model.layers.2.mlp.Wo.weight")
    edited_copy(mmbert, os.path.join(out_dir, "bad-yarn"), config_changes={
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                         "original_max_position_embeddings": 8192}})
    edited_copy(ettin, os.path.join(out_dir, "bad-rope-type"), config_changes={
        "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 160000.0},
                            "sliding_attention": {"rope_type": "linear", "factor": 2.0,
                                                  "rope_theta": 160000.0}}})
    edited_copy(ettin, os.path.join(out_dir, "bad-layer-types"), config_changes={
        "layer_types": ["full_attention", "sliding_attention"]})
    print(f"modernbert_2025: {len(lines)} sentences, families {', '.join(FAMILIES)}")


if __name__ == "__main__":
    if sys.argv[1:2] != ["make"] or len(sys.argv) != 4:
        sys.exit(__doc__)
    make(sys.argv[2], sys.argv[3])
