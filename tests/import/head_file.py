#!/usr/bin/env python3
"""A head in a weights file of its own ([head] weights_file), and what tfenc
must compute with it.

usage: head_file.py make OUT_DIR DOCUMENT
         OUT_DIR/encoder/: a random-weight BertForSequenceClassification
         (5 labels) saved by transformers' save_pretrained, for tfenc-import
         to make the encoder's model.h5 and job.ini. OUT_DIR/ids.h5: a
         token-id corpus. OUT_DIR/head_b.h5 and head_c.h5: two other 5-label
         heads (dense map, tanh, out map) over the same encoder, written by
         DOCUMENT's (docs/scores.md's) recipe for a PyTorch head, the python
         block marked for this test.
         OUT_DIR/reference.h5: `b [N, 5]`, the softmax of head b over the
         encoder's [CLS] vector of each sequence alone, in PyTorch.
         OUT_DIR/wide.h5: a head of a model of another hidden size;
         OUT_DIR/no_out.h5: head b without its out map.
       head_file.py compare REFERENCE.h5 DATASET TFENC.h5 LABEL
         as heads.py compare (1e-4)."""
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import heads  # noqa: E402

LABELS = 5


MARKER = "<!-- readme-test: covered by tests/import/head_file.sh -->"


def recipe_of(document):
    """The python block of DOCUMENT (docs/scores.md) marked for this test:
    the recipe users are shown, which writes topics.h5 from `dense` and
    `out`, is the one that writes the heads here."""
    text = open(document, encoding="utf-8").read()
    if MARKER not in text:
        sys.exit(f"head_file.py: {document} has no block marked {MARKER}")
    block = text.split(MARKER, 1)[1].split("```python\n", 1)[1]
    return block.split("```", 1)[0]


def write_head(recipe, path, dense, out):
    """Runs the recipe in a directory of its own and keeps its topics.h5 as
    PATH (a classifier head's tensors in /head, as plugins/classifier.c
    reads them)."""
    import shutil
    import tempfile
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as directory:
        os.chdir(directory)
        try:
            exec(recipe, {"dense": dense, "out": out})
        finally:
            os.chdir(here)
        shutil.move(os.path.join(directory, "topics.h5"), path)


def random_head(torch, d, generator):
    """Unit-gain weights: a head whose scores move with every tensor."""
    dense, out = torch.nn.Linear(d, d), torch.nn.Linear(d, LABELS)
    with torch.no_grad():
        for layer in (dense, out):
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=generator) / d ** 0.5)
            layer.bias.copy_(0.1 * torch.randn(layer.bias.shape, generator=generator))
    return dense, out


def make(out_dir, document):
    import transformers as t
    recipe = recipe_of(document)
    heads.import_generators()
    torch, D = heads.torch, heads.D
    generator = torch.Generator().manual_seed(44)
    model = t.BertForSequenceClassification(t.BertConfig(
        hidden_size=D, num_attention_heads=heads.HEADS, num_hidden_layers=heads.LAYERS,
        intermediate_size=heads.FFN, vocab_size=heads.VOCAB, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, max_position_embeddings=160, num_labels=LABELS))
    heads.sharpen(model, generator)
    model.save_pretrained(os.path.join(out_dir, "encoder"), safe_serialization=True)
    model.eval()
    head_b, head_c = random_head(torch, D, generator), random_head(torch, D, generator)
    write_head(recipe, os.path.join(out_dir, "head_b.h5"), *head_b)
    write_head(recipe, os.path.join(out_dir, "head_c.h5"), *head_c)
    write_head(recipe, os.path.join(out_dir, "wide.h5"), *random_head(torch, D + 16, generator))
    with h5py.File(os.path.join(out_dir, "no_out.h5"), "w") as f:
        f["/head/dense_weight"] = head_b[0].weight.detach().numpy()
        f["/head/dense_bias"] = head_b[0].bias.detach().numpy()
    lengths = [1, 2, 7, 16, 33, 64, 97, 129, 150, 5, 41, 12, 3, 77, 20, 9]
    rows = [torch.randint(3, heads.VOCAB, (n,), generator=generator) for n in lengths]
    dense, out = head_b
    with torch.no_grad():
        scores = []
        for ids in rows:
            pooled = model.bert(input_ids=ids[None]).last_hidden_state[0, 0]
            scores.append(torch.softmax(out(torch.tanh(dense(pooled))), dim=-1))
    with h5py.File(os.path.join(out_dir, "ids.h5"), "w") as f:
        f["tokens"] = torch.cat(rows).numpy().astype(np.int32)
        f["offsets"] = np.cumsum([0] + lengths).astype(np.int64)
    with h5py.File(os.path.join(out_dir, "reference.h5"), "w") as f:
        f["b"] = torch.stack(scores).numpy()
    print(f"head_file: {len(rows)} sequences, heads of {LABELS} labels over d = {D}")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 6 and sys.argv[1] == "compare":
        sys.exit(heads.compare(*sys.argv[2:]))
    else:
        sys.exit(__doc__)
