#!/usr/bin/env python3
"""A jina-embeddings-v3-shaped checkpoint on random weights, and what tfenc
must reproduce from it once a task's adapter is merged.

usage: jina_v3.py make SENTENCES.txt OUT_DIR
  OUT_DIR/model/: config.json (model_type xlm-roberta, position_embedding_type
  rotary, rotary_emb_base 20000, five lora_adaptations of rank 4 with
  lora_alpha 1, their task_instructions, matryoshka_dimensions),
  model.safetensors with every linear and embedding layer stored as
  modeling_lora.py's parametrizations save them (weight.original, and each
  task's non-zero lora_A and lora_B stacked), a pooler tfenc leaves out, an
  XLM-R tokenizer (a SentencePiece Unigram trained on SENTENCES, converted
  as transformers converts XLM-R's) and sentence-transformers' Pooling
  (mean) and Normalize;
  OUT_DIR/reference-TASK.h5 for TASK retrieval.query and text-matching:
  `embeddings [N, d]` (each sentence alone, the task's instruction before
  it, mean-pooled and normalised) and `lengths [N]` (its tokens);
  OUT_DIR/bad-rank/, OUT_DIR/missing-lora/: the model with one layer's
  adapters of rank 3, and with one lora_B left out;
  OUT_DIR/interleaved/: a model of the same shape without adapters whose
  rotary.py turns interleaved pairs (rotary_emb_interleaved), with mean
  pooling and Normalize, and OUT_DIR/reference-interleaved.h5 (each
  sentence alone);
  OUT_DIR/classifier/: an XLMRobertaForSequenceClassification of the
  implementation (its XLMRobertaClassificationHead: classifier.dense,
  tanh, classifier.out_proj on the first token; roberta.'s pooler left
  out, add_pooling_layer = False) without adapters, 3 labels, and
  OUT_DIR/reference-classifier.h5 `logits [N, 3]`.

The reference is written from the published modeling code
(jinaai/xlm-roberta-flash-implementation: modeling_lora.py,
modeling_xlm_roberta.py, mha.py, mlp.py, rotary.py, embedding.py), read and
not copied: post-norm layers with a fused Wqkv whose Q and K turn by
rotary.py's non-interleaved RoPE, exact GELU, and the adapters applied
unmerged, x W^T + scale (x A^T) B^T per linear layer and W[ids] + scale
A[ids] B per embedding, scale = lora_alpha / lora_rank; tfenc merges them
into the weights, so that the comparison checks the merge too."""
import json
import os
import shutil
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_models import rotary_self_attention  # noqa: E402

LABELS = 3

D, HEADS, LAYERS, FFN = 64, 4, 2, 128
TASKS = ["retrieval.query", "retrieval.passage", "separation", "classification",
         "text-matching"]
INSTRUCTIONS = {"retrieval.query": "Represent the query for retrieving evidence documents: ",
                "retrieval.passage": "Represent the document for retrieval: ",
                "separation": "", "classification": "", "text-matching": ""}
RANK, ALPHA, BASE = 4, 1, 20000.0
CHECKED = ["retrieval.query", "text-matching"]


def make_tokenizer(sentences, directory):
    """An XLM-R tokenizer of the real kind (SentencePiece Unigram, <s> $A
    </s>), trained on the test's own sentences: the real one has 250,002
    pieces, 5 MB that no package offline carries."""
    import sentencepiece as spm
    from transformers import XLMRobertaTokenizerFast
    prefix = os.path.join(directory, "spm")
    spm.SentencePieceTrainer.train(input=sentences, model_prefix=prefix, vocab_size=1000,
                                   model_type="unigram", character_coverage=0.9995,
                                   num_threads=1, minloglevel=2, hard_vocab_limit=False)
    tokenizer = XLMRobertaTokenizerFast(vocab_file=prefix + ".model", model_max_length=8194)
    tokenizer.save_pretrained(directory)
    for suffix in (".model", ".vocab"):
        os.remove(prefix + suffix)
    return tokenizer


def make_weights(vocab, generator):
    """The state dict as XLMRobertaLoRA saves it: unit-gain linear maps,
    unit-variance embeddings, norms near (1, 0), and adapters whose product
    is as large as the weight it adapts, so that a wrong task, scale or
    orientation shows."""
    def normal(*shape, std=1.0):
        return torch.randn(*shape, generator=generator) * std

    weights = {}

    def adapted_linear(name, rows, columns, bias=True):
        weights[f"{name}.parametrizations.weight.original"] = normal(rows, columns,
                                                                     std=columns ** -0.5)
        weights[f"{name}.parametrizations.weight.0.lora_A"] = normal(len(TASKS), RANK, columns,
                                                                     std=columns ** -0.5)
        weights[f"{name}.parametrizations.weight.0.lora_B"] = normal(len(TASKS), rows, RANK)
        if bias:
            weights[f"{name}.bias"] = normal(rows, std=0.1)

    def adapted_embedding(name, rows):
        weights[f"{name}.parametrizations.weight.original"] = normal(rows, D)
        weights[f"{name}.parametrizations.weight.0.lora_A"] = normal(len(TASKS), rows, RANK)
        weights[f"{name}.parametrizations.weight.0.lora_B"] = normal(len(TASKS), RANK, D,
                                                                     std=0.5)

    def norm(name):
        weights[f"{name}.weight"] = 1 + normal(D, std=0.1)
        weights[f"{name}.bias"] = normal(D, std=0.1)

    adapted_embedding("roberta.embeddings.word_embeddings", vocab)
    adapted_embedding("roberta.embeddings.token_type_embeddings", 1)
    norm("roberta.emb_ln")
    for layer in range(LAYERS):
        prefix = f"roberta.encoder.layers.{layer}"
        adapted_linear(f"{prefix}.mixer.Wqkv", 3 * D, D)
        adapted_linear(f"{prefix}.mixer.out_proj", D, D)
        norm(f"{prefix}.norm1")
        adapted_linear(f"{prefix}.mlp.fc1", FFN, D)
        adapted_linear(f"{prefix}.mlp.fc2", D, FFN)
        norm(f"{prefix}.norm2")
    adapted_linear("roberta.pooler.dense", D, D)
    return weights


class Reference:
    """XLMRobertaLoRA's forward for one unpadded sequence with one task's
    adapters (adapter_mask of that task), the adapters kept apart."""

    def __init__(self, weights, task, interleaved=False):
        self.w = weights
        self.task = TASKS.index(task)
        self.scale = ALPHA / RANK
        self.interleaved = interleaved

    def linear(self, name, x):
        w = self.w
        lora_a = w[f"{name}.parametrizations.weight.0.lora_A"][self.task]
        lora_b = w[f"{name}.parametrizations.weight.0.lora_B"][self.task]
        out = F.linear(x, w[f"{name}.parametrizations.weight.original"], w[f"{name}.bias"])
        return out + self.scale * F.linear(F.linear(x, lora_a), lora_b)

    def embedding(self, name, ids):
        w = self.w
        lora_a = w[f"{name}.parametrizations.weight.0.lora_A"][self.task]
        lora_b = w[f"{name}.parametrizations.weight.0.lora_B"][self.task]
        table = w[f"{name}.parametrizations.weight.original"]
        return table[ids] + self.scale * (lora_a[ids] @ lora_b)

    def norm(self, name, x):
        return F.layer_norm(x, (D,), self.w[f"{name}.weight"], self.w[f"{name}.bias"], 1e-5)

    def forward(self, ids):
        h = (self.embedding("roberta.embeddings.word_embeddings", ids)
             + self.embedding("roberta.embeddings.token_type_embeddings",
                              torch.zeros_like(ids)))
        h = self.norm("roberta.emb_ln", h)[None]
        for layer in range(LAYERS):
            prefix = f"roberta.encoder.layers.{layer}"
            context = rotary_self_attention(self.linear(f"{prefix}.mixer.Wqkv", h), HEADS, BASE,
                                            self.interleaved)
            h = self.norm(f"{prefix}.norm1", h + self.linear(f"{prefix}.mixer.out_proj", context))
            inner = F.gelu(self.linear(f"{prefix}.mlp.fc1", h))
            h = self.norm(f"{prefix}.norm2", h + self.linear(f"{prefix}.mlp.fc2", inner))
        return h[0]


class PlainReference(Reference):
    """XLMRobertaModel's forward without adapters."""

    def __init__(self, weights, interleaved=False):
        self.w = weights
        self.interleaved = interleaved

    def linear(self, name, x):
        return F.linear(x, self.w[f"{name}.weight"], self.w[f"{name}.bias"])

    def embedding(self, name, ids):
        return self.w[f"{name}.weight"][ids]


def plain_weights(weights):
    """The adapted weights as a model without adapters saves them: each
    original weight under its own name, no lora tensors, no pooler."""
    plain = {}
    for name, tensor in weights.items():
        if ".lora_" in name or name.startswith("roberta.pooler."):
            continue
        plain[name.replace(".parametrizations.weight.original", ".weight")] = tensor
    return plain


def write_plain_folder(model_dir, directory, weights, changes):
    """The model's folder without adapters, config.json changed by `changes`."""
    from safetensors.torch import save_file
    shutil.copytree(model_dir, directory, dirs_exist_ok=True)
    path = os.path.join(directory, "config.json")
    with open(path) as f:
        config = json.load(f)
    for key in ("lora_adaptations", "task_instructions", "lora_rank", "lora_alpha",
                "lora_dropout_p", "load_trained_adapters"):
        config.pop(key)
    config.update(changes)
    with open(path, "w") as f:
        json.dump(config, f, indent=2)
    save_file({name: tensor.contiguous() for name, tensor in weights.items()},
              os.path.join(directory, "model.safetensors"))
    with open(os.path.join(directory, "config_sentence_transformers.json"), "w") as f:
        json.dump({"prompts": {}, "default_prompt_name": None}, f)


def make_plain_models(model_dir, out_dir, tokenizer, weights, lines, generator):
    """The interleaved-rotary model and the classifier (OUT_DIR/interleaved,
    OUT_DIR/classifier), and their references."""
    plain = plain_weights(weights)
    write_plain_folder(model_dir, os.path.join(out_dir, "interleaved"), plain,
                       {"architectures": ["XLMRobertaModel"], "rotary_emb_interleaved": True})
    head = dict(plain)
    head["classifier.dense.weight"] = torch.randn(D, D, generator=generator) * D ** -0.5
    head["classifier.dense.bias"] = torch.randn(D, generator=generator) * 0.1
    head["classifier.out_proj.weight"] = torch.randn(LABELS, D, generator=generator) * D ** -0.5
    head["classifier.out_proj.bias"] = torch.randn(LABELS, generator=generator) * 0.1
    classifier_dir = os.path.join(out_dir, "classifier")
    write_plain_folder(model_dir, classifier_dir, head,
                       {"architectures": ["XLMRobertaForSequenceClassification"],
                        "id2label": {str(i): f"LABEL_{i}" for i in range(LABELS)},
                        "label2id": {f"LABEL_{i}": i for i in range(LABELS)}})
    for name in ("modules.json", "config_sentence_transformers.json"):
        os.remove(os.path.join(classifier_dir, name))
    shutil.rmtree(os.path.join(classifier_dir, "1_Pooling"))
    interleaved, halves, logits, lengths = [], [], [], []
    for line in lines:
        ids = tokenizer(line, return_tensors="pt")["input_ids"][0]
        interleaved.append(F.normalize(PlainReference(plain, True).forward(ids).mean(0), dim=0))
        hidden = PlainReference(plain).forward(ids)
        halves.append(F.normalize(hidden.mean(0), dim=0))
        first = torch.tanh(F.linear(hidden[0], head["classifier.dense.weight"],
                                    head["classifier.dense.bias"]))
        logits.append(F.linear(first, head["classifier.out_proj.weight"],
                               head["classifier.out_proj.bias"]))
        lengths.append(len(ids))
    # Interleaved pairs must give other vectors than halves by far more
    # than the comparison's bar (min cosine 0.99999), or the test could not
    # tell the mha's two rope_styles apart.
    cosine = (torch.stack(interleaved) * torch.stack(halves)).sum(1)
    assert cosine.min() < 0.9999, f"interleaved and half RoPE too close ({cosine.min()})"
    with h5py.File(os.path.join(out_dir, "reference-interleaved.h5"), "w") as f:
        f["embeddings"] = torch.stack(interleaved).numpy().astype(np.float32)
        f["lengths"] = np.array(lengths, dtype=np.int64)
    with h5py.File(os.path.join(out_dir, "reference-classifier.h5"), "w") as f:
        f["logits"] = torch.stack(logits).numpy().astype(np.float32)


def write_mean_pooling(directory, transformer_type, width):
    """sentence-transformers' modules: the transformer, mean Pooling and
    Normalize."""
    modules = [{"idx": 0, "name": "transformer", "path": "", "type": transformer_type},
               {"idx": 1, "name": "pooler", "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling"},
               {"idx": 2, "name": "normalizer", "path": "2_Normalize",
                "type": "sentence_transformers.models.Normalize"}]
    with open(os.path.join(directory, "modules.json"), "w") as f:
        json.dump(modules, f)
    os.makedirs(os.path.join(directory, "1_Pooling"), exist_ok=True)
    with open(os.path.join(directory, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": width, "pooling_mode_mean_tokens": True,
                   "pooling_mode_cls_token": False, "pooling_mode_max_tokens": False}, f)


def write_folder(directory, tokenizer, weights):
    from safetensors.torch import save_file
    config = {"model_type": "xlm-roberta", "architectures": ["XLMRobertaLoRA"],
              "hidden_size": D, "num_attention_heads": HEADS, "num_hidden_layers": LAYERS,
              "intermediate_size": FFN, "vocab_size": len(tokenizer), "hidden_act": "gelu",
              "max_position_embeddings": 8194, "type_vocab_size": 1, "layer_norm_eps": 1e-5,
              "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
              "position_embedding_type": "rotary", "rotary_emb_base": BASE,
              "lora_adaptations": TASKS, "task_instructions": INSTRUCTIONS,
              "lora_rank": RANK, "lora_alpha": ALPHA, "lora_dropout_p": 0.0,
              "load_trained_adapters": True, "use_flash_attn": True, "emb_pooler": None,
              "matryoshka_dimensions": [16, 32, 64], "truncate_dim": None}
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    save_file({name: tensor.contiguous() for name, tensor in weights.items()},
              os.path.join(directory, "model.safetensors"))
    write_mean_pooling(directory, "custom_st.Transformer", D)
    with open(os.path.join(directory, "config_sentence_transformers.json"), "w") as f:
        json.dump({"prompts": INSTRUCTIONS, "default_prompt_name": None}, f)


def make(sentences_path, out_dir):
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(47)
    model_dir = os.path.join(out_dir, "model")
    os.makedirs(model_dir, exist_ok=True)
    tokenizer = make_tokenizer(sentences_path, model_dir)
    weights = make_weights(len(tokenizer), generator)
    write_folder(model_dir, tokenizer, weights)
    with open(sentences_path, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    pooled = {}
    with torch.no_grad():
        for task in CHECKED:
            reference = Reference(weights, task)
            rows, lengths = [], []
            for line in lines:
                ids = tokenizer(INSTRUCTIONS[task] + line, return_tensors="pt")["input_ids"][0]
                rows.append(F.normalize(reference.forward(ids).mean(0), dim=0).numpy())
                lengths.append(len(ids))
            pooled[task] = np.stack(rows).astype(np.float32)
            with h5py.File(os.path.join(out_dir, f"reference-{task}.h5"), "w") as f:
                f["embeddings"] = pooled[task]
                f["lengths"] = np.array(lengths, dtype=np.int64)
    # The adapters must matter: the two tasks' vectors far apart, or the
    # comparison could not tell one task's merge from another's.
    cosine = (pooled[CHECKED[0]] * pooled[CHECKED[1]]).sum(1)
    assert cosine.max() < 0.99, f"the tasks' embeddings are too close ({cosine.max()})"
    bad_folder(model_dir, os.path.join(out_dir, "bad-rank"), weights, rank_of_fc2=3)
    bad_folder(model_dir, os.path.join(out_dir, "missing-lora"), weights, drop=(
        "roberta.encoder.layers.0.mixer.out_proj.parametrizations.weight.0.lora_B"))
    with torch.no_grad():
        make_plain_models(model_dir, out_dir, tokenizer, weights, lines, generator)
    print(f"jina_v3: {len(lines)} sentences, tasks {', '.join(CHECKED)}, cosine between them "
          f"at most {cosine.max():.3f}")


def bad_folder(model_dir, directory, weights, rank_of_fc2=None, drop=None):
    """The model with layer 1's fc2 adapters of another rank, or without one
    tensor."""
    from safetensors.torch import save_file
    shutil.copytree(model_dir, directory, dirs_exist_ok=True)
    changed = dict(weights)
    if rank_of_fc2 is not None:
        name = "roberta.encoder.layers.1.mlp.fc2.parametrizations.weight.0"
        changed[f"{name}.lora_A"] = changed[f"{name}.lora_A"][:, :rank_of_fc2].clone()
        changed[f"{name}.lora_B"] = changed[f"{name}.lora_B"][:, :, :rank_of_fc2].clone()
    if drop is not None:
        del changed[drop]
    save_file({name: tensor.contiguous() for name, tensor in changed.items()},
              os.path.join(directory, "model.safetensors"))


if __name__ == "__main__":
    if sys.argv[1:2] != ["make"] or len(sys.argv) != 4:
        sys.exit(__doc__)
    make(sys.argv[2], sys.argv[3])
