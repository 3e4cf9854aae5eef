"""The inputs of tests/export/export.sh, in the copy of jobs/bert-text it
made: a corpus of three JSON Lines shards (one gzip) with ids, some not
ASCII, so that the outputs have ids, document_source and corpus_shards;
heads.h5, the example's weights with random heads beside the encoder
(a classifier of three labels, a SPLADE head over the 512-token
vocabulary, a multi-vector projection to 16 values), and a job file for
each output kind:

  pooled.ini   the example's job (mean pooling, normalized)
  tokens.ini   no pooling: per-token states
  scores.ini   the classifier head (softmax over 3 labels)
  sparse.ini   the splade head
  vectors.ini  the multivector head, punctuation left out (so that a
               document's vectors are fewer than its tokens)

usage: make_outputs.py DIR COPIES
"""
import gzip
import json
import shutil
import sys

import h5py
import numpy as np

LABELS = {"0": "négatif", "1": "neutral", "2": "positive"}


def corpus(directory, copies):
    lines = open(f"{directory}/corpus.txt", encoding="utf-8").read().splitlines()
    documents = []
    for copy in range(copies):
        for i, line in enumerate(lines):
            # Rotated words, so that the copies are other documents.
            words = line.split()
            k = (copy + i) % max(1, len(words))
            documents.append(" ".join(words[k:] + words[:k]))
    shards = [documents[: len(documents) // 3], documents[len(documents) // 3: 2 * len(documents) // 3],
              documents[2 * len(documents) // 3:]]
    names = ["shard-0.jsonl", "shard-1.jsonl.gz", "shard-2.jsonl"]
    import os
    os.makedirs(f"{directory}/corpus", exist_ok=True)
    number = 0
    for name, texts in zip(names, shards):
        opener = gzip.open if name.endswith(".gz") else open
        with opener(f"{directory}/corpus/{name}", "wt", encoding="utf-8") as out:
            for text in texts:
                # ids of several lengths, some with a character outside ASCII
                identifier = f"doc-{number}" + ("-é" if number % 7 == 0 else "")
                out.write(json.dumps({"id": identifier, "text": text}, ensure_ascii=False) + "\n")
                number += 1


def heads(directory):
    shutil.copy(f"{directory}/model.h5", f"{directory}/heads.h5")
    rng = np.random.default_rng(44)
    d, vocabulary = 64, 512

    def normal(*shape, scale=0.1):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    with h5py.File(f"{directory}/heads.h5", "a") as f:
        f["classifier/dense_weight"] = normal(d, d)
        f["classifier/dense_bias"] = normal(d)
        f["classifier/out_weight"] = normal(3, d, scale=1.0)
        f["classifier/out_bias"] = normal(3)
        f["splade/transform_weight"] = normal(d, d)
        f["splade/transform_bias"] = normal(d)
        f["splade/norm_weight"] = 1 + normal(d)
        f["splade/norm_bias"] = normal(d)
        f["splade/decoder_weight"] = normal(vocabulary, d, scale=0.5)
        f["splade/decoder_bias"] = normal(vocabulary) - 0.5
        f["colbert/weight"] = normal(16, d, scale=1.0)


def jobs(directory):
    job = open(f"{directory}/job.ini", encoding="utf-8").read()
    job = job.replace("weights = model.h5", "weights = heads.h5")
    encoder = job.split("[pooling]")[0]
    labels = json.dumps(LABELS, ensure_ascii=False)
    files = {
        "pooled.ini": job,
        "tokens.ini": encoder,
        "scores.ini": encoder + f"[classifier]\ntype = classifier\nscores = softmax\nlabels = {labels}\n",
        "sparse.ini": encoder + "[splade]\ntype = splade\n",
        "vectors.ini": encoder + "[colbert]\ntype = multivector\n",
    }
    for name, text in files.items():
        with open(f"{directory}/{name}", "w", encoding="utf-8") as out:
            out.write(text)


if __name__ == "__main__":
    corpus(sys.argv[1], int(sys.argv[2]))
    heads(sys.argv[1])
    jobs(sys.argv[1])
