#!/usr/bin/env python3
"""Random-weight checkpoints of every architecture tfenc-import maps, and
what tfenc must reproduce from them.

usage: architectures.py make OUT_DIR
         For each kind writes OUT_DIR/KIND/: the checkpoint (config.json and
         model.safetensors from transformers' own save_pretrained, or from the
         references of tests/import/reference_models.py for the models
         transformers 4.40 lacks), a sentence-transformers head (modules.json,
         1_Pooling, for gemma3_text two Dense modules, Normalize, and the
         prompts of config_sentence_transformers.json), ids.h5 (a token-id corpus for tfenc) and
         reference.h5: `hidden [T, d]` per token (each sequence alone,
         unpadded) and `embeddings [N, d]` pooled by sentence-transformers'
         own Pooling and Normalize modules over one padded batch; for the bert
         kind also `pooled_MODE` for every pooling mode, unnormalised.
       architectures.py compare REFERENCE.h5 DATASET TFENC.h5 LABEL
         Largest absolute difference of tfenc's output (`hidden` per token, or
         `embeddings`) from reference DATASET; fails above 1e-4. DATASET
         `embeddings:N` is the reference cut to N values and renormalised
         (sentence-transformers' truncate_dim with normalize_embeddings).
       architectures.py prompts JOB MODEL_DIR
         Fails unless the job's [prompts] decode to the prompts of
         MODEL_DIR/config_sentence_transformers.json.

The bar, 1e-4 absolute on activations of order 1: float32 in a different
summation order leaves ~1e-6 after a few layers; a wrong tensor, position,
bucket, mask or pooling moves values by far more than 1e-2."""
import json
import os
import sys

import h5py
import numpy as np

# compare, run once per check by architectures.sh, needs no torch, whose
# import costs a second and a half of CPU; nor do the checks of the scripts
# that import this module for its sizes and sharpen (which imports torch
# itself).
if __name__ == "__main__" and sys.argv[1:2] != ["compare"]:
    import torch

TOLERANCE = 1e-4
D, HEADS, LAYERS, FFN, VOCAB = 32, 4, 2, 48, 120

KINDS = ["bert", "roberta", "xlm-roberta", "electra", "distilbert", "mpnet", "qwen2",
         "nomic_bert", "modernbert", "jina_bert", "qwen3", "gemma3_text",
         "nomic_bert-interleaved"]
# Written from published code (tests/import/reference_models.py).
REFERENCE_KINDS = ("nomic_bert", "modernbert", "jina_bert", "qwen3", "gemma3_text",
                   "nomic_bert-interleaved")
# Ids that end in the tokenizer's EOS, which last-token pooling reads.
DECODERS = ("qwen2", "qwen3")

# The prompts of the real models' config_sentence_transformers.json (the
# first lines of each), which the job must carry.
PROMPTS = {
    "qwen3": {"query": "Instruct: Given a web search query, retrieve relevant passages that "
                       "answer the query\nQuery:", "document": ""},
    "gemma3_text": {"query": "task: search result | query: ",
                    "document": "title: none | text: ",
                    "Retrieval-query": "task: search result | query: ",
                    "STS": "task: sentence similarity | query: "},
}

# Pooling of each kind's sentence-transformers head: the modes its real
# models use (lasttoken for the decoder).
POOLING = {"bert": "cls", "mpnet": "mean", "qwen2": "lasttoken", "nomic_bert": "mean",
           "nomic_bert-interleaved": "mean",
           "modernbert": "mean", "jina_bert": "mean", "qwen3": "lasttoken",
           "gemma3_text": "mean"}
# EmbeddingGemma's Dense modules after the pooling: d -> DENSE -> d, no
# bias, Identity activation (its real ones are 768 -> 3072 -> 768).
DENSE = 96
ALL_MODES = ["cls", "mean", "max", "mean_sqrt_len", "weightedmean", "lasttoken"]


def sharpen(model, generator):
    """Weights that make every part matter: transformers initialises with
    std 0.02, under which attention is almost uniform and a wrong position
    term would hardly show. Linear maps get unit gain, embeddings and
    position tables unit variance, norms weight ~1 and bias ~0.1."""
    import torch
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            shape = parameter.shape
            if name.endswith("bias"):
                parameter.copy_(0.1 * torch.randn(shape, generator=generator))
            elif len(shape) == 1:
                parameter.copy_(1 + 0.1 * torch.randn(shape, generator=generator))
            elif "embed" in name or "relative_attention_bias" in name:
                parameter.copy_(torch.randn(shape, generator=generator))
            else:
                parameter.copy_(torch.randn(shape, generator=generator) / shape[-1] ** 0.5)


def transformers_model(kind):
    """(model, config dict extras) for the kinds transformers 4.40 has."""
    import transformers as t
    common = dict(hidden_size=D, num_attention_heads=HEADS, num_hidden_layers=LAYERS,
                  intermediate_size=FFN, vocab_size=VOCAB, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0)
    if kind == "bert":
        return t.BertModel(t.BertConfig(max_position_embeddings=160, **common),
                           add_pooling_layer=False)
    if kind == "roberta":
        return t.RobertaModel(t.RobertaConfig(max_position_embeddings=162, type_vocab_size=1,
                                              layer_norm_eps=1e-5, **common),
                              add_pooling_layer=False)
    if kind == "xlm-roberta":
        return t.XLMRobertaModel(t.XLMRobertaConfig(max_position_embeddings=162,
                                                    type_vocab_size=1, hidden_act="gelu_new",
                                                    **common), add_pooling_layer=False)
    if kind == "electra":
        return t.ElectraModel(t.ElectraConfig(embedding_size=D, max_position_embeddings=160,
                                              **common))
    if kind == "distilbert":
        return t.DistilBertModel(t.DistilBertConfig(
            dim=D, n_heads=HEADS, n_layers=LAYERS, hidden_dim=FFN, vocab_size=VOCAB,
            max_position_embeddings=160, dropout=0.0, attention_dropout=0.0))
    if kind == "mpnet":
        # Sequences up to 150 tokens reach every bucket, the clamped ones too.
        return t.MPNetModel(t.MPNetConfig(max_position_embeddings=162, layer_norm_eps=1e-5,
                                          **common), add_pooling_layer=False)
    if kind == "qwen2":
        # Grouped-query: 4 query heads share 2 key/value heads.
        return t.Qwen2Model(t.Qwen2Config(
            hidden_size=D, num_attention_heads=HEADS, num_key_value_heads=2,
            num_hidden_layers=LAYERS, intermediate_size=FFN, vocab_size=VOCAB,
            max_position_embeddings=512, rope_theta=1000.0, rms_norm_eps=1e-6,
            attn_implementation="eager"))
    raise KeyError(kind)


def reference_model(kind):
    """(model, config dict) for the kinds written from published code."""
    import reference_models as r
    if kind in ("nomic_bert", "nomic_bert-interleaved"):
        # The second turns the pairs 2i, 2i + 1 (rotary_emb_interleaved).
        config = {"model_type": "nomic_bert", "architectures": ["NomicBertModel"],
                  "n_embd": D, "n_head": HEADS, "n_layer": LAYERS, "n_inner": FFN,
                  "vocab_size": VOCAB, "type_vocab_size": 2, "max_trained_positions": 2048,
                  "n_positions": 2048, "layer_norm_epsilon": 1e-12,
                  "activation_function": "swiglu", "rotary_emb_fraction": 1.0,
                  "rotary_emb_base": 1000,
                  "rotary_emb_interleaved": kind == "nomic_bert-interleaved",
                  "rotary_scaling_factor": None, "qkv_proj_bias": False,
                  "mlp_fc1_bias": False, "mlp_fc2_bias": False, "prenorm": False,
                  "use_rms_norm": False, "causal": False, "pad_vocab_size_multiple": 1}
        return r.NomicBert(config), config
    if kind == "modernbert":
        config = {"model_type": "modernbert", "architectures": ["ModernBertModel"],
                  "hidden_size": D, "num_attention_heads": HEADS, "num_hidden_layers": 4,
                  "intermediate_size": FFN, "vocab_size": VOCAB,
                  "max_position_embeddings": 8192, "norm_eps": 1e-5, "norm_bias": False,
                  "attention_bias": False, "mlp_bias": False, "global_rope_theta": 160000.0,
                  "local_rope_theta": 10000.0, "local_attention": 8,
                  "global_attn_every_n_layers": 3, "hidden_activation": "gelu",
                  "pad_token_id": 0}
        return r.ModernBert(config), config
    if kind == "jina_bert":
        config = {"model_type": "bert", "architectures": ["JinaBertForMaskedLM"],
                  "hidden_size": D, "num_attention_heads": 3 * 2, "num_hidden_layers": LAYERS,
                  "intermediate_size": FFN, "vocab_size": VOCAB, "type_vocab_size": 2,
                  "max_position_embeddings": 8192, "layer_norm_eps": 1e-12,
                  "position_embedding_type": "alibi", "feed_forward_type": "geglu",
                  "hidden_act": "gelu", "pad_token_id": 0}
        config["hidden_size"] = 36  # 6 heads of 6: a head count that is not a power of two
        return r.JinaBert(config), config
    if kind == "qwen3":
        # head_dim 32 with 4 heads: Q is 128 wide on a 64-wide model, as
        # Qwen3-Embedding-0.6B's Q (16 x 128) is on its 1024.
        config = {"model_type": "qwen3", "architectures": ["Qwen3Model"], "hidden_size": 64,
                  "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
                  "num_hidden_layers": LAYERS, "intermediate_size": 96, "vocab_size": VOCAB,
                  "max_position_embeddings": 512, "rope_theta": 1000.0, "rms_norm_eps": 1e-6,
                  "attention_bias": False, "hidden_act": "silu", "use_sliding_window": False,
                  "rope_scaling": None, "tie_word_embeddings": True}
        return r.Qwen3(config), config
    if kind == "gemma3_text":
        # A window of 16 on sequences up to 150, sliding layers with another
        # RoPE base than the full one, query_pre_attn_scalar unlike head_dim.
        config = {"model_type": "gemma3_text", "architectures": ["Gemma3TextModel"],
                  "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
                  "head_dim": 32, "num_hidden_layers": 4, "intermediate_size": 96,
                  "vocab_size": VOCAB, "max_position_embeddings": 2048, "rms_norm_eps": 1e-6,
                  "rope_theta": 100000.0, "rope_local_base_freq": 1000.0,
                  "query_pre_attn_scalar": 24, "sliding_window": 16,
                  "layer_types": ["sliding_attention", "sliding_attention", "full_attention",
                                  "sliding_attention"],
                  "use_bidirectional_attention": True, "attention_bias": False,
                  "hidden_activation": "gelu_pytorch_tanh", "attn_logit_softcapping": None,
                  "final_logit_softcapping": None, "rope_scaling": None, "pad_token_id": 0}
        return r.Gemma3Text(config), config
    raise KeyError(kind)


def save_checkpoint(kind, directory, generator):
    """Writes the checkpoint and returns (model, hidden width, pad id)."""
    from safetensors.torch import save_file
    if kind in REFERENCE_KINDS:
        model, config = reference_model(kind)
        sharpen(model, generator)
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
        state = {name: tensor.contiguous() for name, tensor in model.state_dict().items()}
        save_file(state, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})
        width = config.get("n_embd", config.get("hidden_size"))
        return model.eval(), width, 0
    model = transformers_model(kind)
    sharpen(model, generator)
    model.save_pretrained(directory, safe_serialization=True)
    return model.eval(), model.config.hidden_size, getattr(model.config, "pad_token_id", 0) or 0


def write_dense(directory, width, generator):
    """EmbeddingGemma's Dense modules, as sentence-transformers 3 saves them
    (config.json, model.safetensors); returns them."""
    from safetensors.torch import save_file
    from sentence_transformers import models
    modules = []
    for number, (into, out) in enumerate(((width, DENSE), (DENSE, width))):
        dense = models.Dense(into, out, bias=False, activation_function=torch.nn.Identity())
        with torch.no_grad():
            dense.linear.weight.copy_(torch.randn(out, into, generator=generator) / into ** 0.5)
        path = os.path.join(directory, f"{2 + number}_Dense")
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(dense.get_config_dict(), f)
        save_file({"linear.weight": dense.linear.weight.detach().contiguous()},
                  os.path.join(path, "model.safetensors"))
        modules.append(dense.eval())
    return modules


def write_head(directory, width, mode, dense=0, prompts=None):
    """sentence-transformers' files: Transformer, Pooling, `dense` Dense
    modules, Normalize, and the prompts."""
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    for number in range(dense):
        modules.append({"idx": 2 + number, "name": str(2 + number),
                        "path": f"{2 + number}_Dense", "type": "sentence_transformers.models.Dense"})
    modules.append({"idx": len(modules), "name": str(len(modules)),
                    "path": f"{len(modules)}_Normalize",
                    "type": "sentence_transformers.models.Normalize"})
    if prompts is not None:
        with open(os.path.join(directory, "config_sentence_transformers.json"), "w") as f:
            json.dump({"prompts": prompts, "default_prompt_name": None}, f)
    with open(os.path.join(directory, "modules.json"), "w") as f:
        json.dump(modules, f)
    os.makedirs(os.path.join(directory, "1_Pooling"), exist_ok=True)
    pooling = {"word_embedding_dimension": width, "include_prompt": True}
    keys = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens",
            "max": "pooling_mode_max_tokens", "mean_sqrt_len": "pooling_mode_mean_sqrt_len_tokens",
            "weightedmean": "pooling_mode_weightedmean_tokens", "lasttoken": "pooling_mode_lasttoken"}
    for name, key in keys.items():
        pooling[key] = name == mode
    with open(os.path.join(directory, "1_Pooling", "config.json"), "w") as f:
        json.dump(pooling, f)
    with open(os.path.join(directory, "sentence_bert_config.json"), "w") as f:
        json.dump({"max_seq_length": 150, "do_lower_case": False}, f)


def sequences(kind, generator):
    """Token ids of varied lengths (1 to 150), never the padding id (a real
    tokenizer puts none inside a text, and RoBERTa-style position ids skip
    it); the decoder's end with its EOS, which last-token pooling reads."""
    lengths = [1, 2, 7, 16, 33, 64, 97, 129, 150, 5, 41, 12]
    rows = []
    for length in lengths:
        ids = torch.randint(3, VOCAB, (length,), generator=generator)
        if kind in DECODERS:
            ids[-1] = 2  # EOS appended by the tokenizer
        rows.append(ids)
    return rows


def st_pool(hidden_padded, mask, width, mode, normalize, dense=()):
    """sentence-transformers' own Pooling (Dense modules and Normalize) over
    a padded batch."""
    from sentence_transformers import models
    # sentence-transformers spells one mode differently in its argument.
    pooling = models.Pooling(width, pooling_mode="mean_sqrt_len_tokens"
                             if mode == "mean_sqrt_len" else mode)
    features = pooling({"token_embeddings": hidden_padded, "attention_mask": mask})
    for module in dense:
        features = module(features)
    if normalize:
        features = models.Normalize()(features)
    return features["sentence_embedding"]


def make(out_dir):
    torch.manual_seed(0)
    for number, kind in enumerate(KINDS):
        generator = torch.Generator().manual_seed(100 + number)
        directory = os.path.join(out_dir, kind)
        model, width, _ = save_checkpoint(kind, directory, generator)
        mode = POOLING.get(kind, "mean")
        dense = write_dense(directory, width, generator) if kind == "gemma3_text" else []
        write_head(directory, width, mode, len(dense), PROMPTS.get(kind))
        rows = sequences(kind, generator)
        with torch.no_grad():
            # Per token: each sequence alone, without padding.
            hidden = [model(ids[None])[0] if kind in REFERENCE_KINDS
                      else model(input_ids=ids[None]).last_hidden_state[0] for ids in rows]
            hidden = [h[0] if h.dim() == 3 else h for h in hidden]
            # Pooled: the sequences padded into one batch, as
            # sentence-transformers batches them, masked by attention_mask.
            longest = max(len(ids) for ids in rows)
            padded = torch.zeros(len(rows), longest, width)
            mask = torch.zeros(len(rows), longest, dtype=torch.long)
            for i, h in enumerate(hidden):
                padded[i, :len(h)] = h
                mask[i, :len(h)] = 1
            embeddings = st_pool(padded, mask, width, mode, True, dense)
            extra = {}
            if kind == "bert":
                for other in ALL_MODES:
                    extra["pooled_" + other] = st_pool(padded, mask, width, other, False)
        with h5py.File(os.path.join(directory, "ids.h5"), "w") as f:
            f["tokens"] = torch.cat(rows).numpy().astype(np.int32)
            f["offsets"] = np.cumsum([0] + [len(ids) for ids in rows]).astype(np.int64)
        with h5py.File(os.path.join(directory, "reference.h5"), "w") as f:
            f["hidden"] = torch.cat(hidden).numpy()
            f["embeddings"] = embeddings.numpy()
            for name, values in extra.items():
                f[name] = values.numpy()
        print(f"architectures: {kind}: {len(rows)} sequences, d {width}, pooling {mode}")


def compare(reference_path, dataset, tfenc_path, label):
    dataset, _, width = dataset.partition(":")
    with h5py.File(reference_path, "r") as f:
        want = f[dataset][()].astype(np.float64)
    if width:
        # sentence-transformers' truncate_dim cuts the normalised vector,
        # and normalize_embeddings normalises the cut one again.
        want = want[:, :int(width)]
        want /= np.maximum(np.linalg.norm(want, axis=1, keepdims=True), 1e-12)
    with h5py.File(tfenc_path, "r") as f:
        got = f["hidden" if dataset == "hidden" else "embeddings"][()].astype(np.float64)
    if got.shape != want.shape:
        print(f"FAIL: {label}: tfenc shape {got.shape}, reference {want.shape}")
        return 1
    worst = float(np.max(np.abs(got - want)))
    print(f"{label}: max |diff| {worst:.2e} over {want.shape[0]} rows")
    if not worst <= TOLERANCE:
        print(f"FAIL: {label}: max |diff| {worst:.3e} > {TOLERANCE}")
        return 1
    return 0


def prompts(job_path, model_dir):
    import configparser
    job = configparser.ConfigParser(interpolation=None, comment_prefixes=(";", "#"))
    job.optionxform = str
    job.read(job_path)
    got = {name: json.loads(text) for name, text in job["prompts"].items()}
    with open(os.path.join(model_dir, "config_sentence_transformers.json")) as f:
        want = json.load(f)["prompts"]
    if got != want:
        print(f"FAIL: {job_path}: [prompts] {got}, the model's {want}")
        return 1
    print(f"{job_path}: {len(got)} prompts as the model's")
    return 0


def main():
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    if sys.argv[1] == "make":
        make(sys.argv[2])
        return 0
    if sys.argv[1] == "prompts":
        return prompts(sys.argv[2], sys.argv[3])
    return compare(*sys.argv[2:6])


if __name__ == "__main__":
    sys.exit(main())
