"""A large tfenc output made from a small one, for the test that
tfenc-export streams: the documents of SOURCE repeated COPIES times, every
per-document dataset tiled, the rows (embeddings, or hidden with its
offsets and token ids) repeated after each other, the attributes copied
(n_documents and n_tokens grown), `lengths` with tfenc's -1 fill, written a
copy at a time so that this helper holds one copy in memory. The corpus is
the source's repeated: corpus_shards lists its files once per copy (each
copy's rows after the last's), and document_source points each copy's
rows at that copy's files, as a file of the repeated corpus would.

usage: enlarge.py SOURCE.h5 OUT.h5 COPIES
"""
import sys

import h5py
import numpy as np


def main(source_path, out_path, copies):
    with h5py.File(source_path, "r") as source, h5py.File(out_path, "w") as out:
        n = source["lengths"].shape[0]
        runs = "offsets" in source
        rows_name = "hidden" if "hidden" in source else "embeddings"
        t = source[rows_name].shape[0] if runs else n
        for key, value in source.attrs.items():
            out.attrs[key] = value
        out.attrs["n_documents"] = n * copies
        if runs:
            out.attrs["n_tokens"] = t * copies
        per_row = [rows_name] + (["token_ids"] if "token_ids" in source else [])
        shards = source["corpus_shards"][:] if "corpus_shards" in source else None
        for name, dataset in source.items():
            if name == "corpus_shards":
                tiled = np.concatenate([shards] * copies)
                for copy in range(copies):
                    tiled["first_document"][copy * len(shards):(copy + 1) * len(shards)] += copy * n
                out.create_dataset(name, data=tiled)
                continue
            if name == "offsets":
                continue
            length = t if name in per_row else n
            if dataset.shape[0] != length:
                source.copy(dataset, out)
                continue
            shape = (length * copies,) + dataset.shape[1:]
            chunk = (max(1, min(shape[0], (1 << 20) // max(1, dataset.dtype.itemsize
                                                            * int(np.prod(shape[1:]))))),) + shape[1:]
            extra = {"fillvalue": -1} if name == "lengths" else {}
            target = out.create_dataset(name, shape=shape, dtype=dataset.dtype, chunks=chunk, **extra)
            values = dataset[:]
            for copy in range(copies):
                if name == "document_source" and shards is not None:
                    moved = values.copy()
                    moved["shard"] += copy * len(shards)
                    target[copy * length:(copy + 1) * length] = moved
                else:
                    target[copy * length:(copy + 1) * length] = values
        if runs:
            offsets = source["offsets"][:]
            target = out.create_dataset("offsets", shape=(n * copies + 1,), dtype=np.int64)
            for copy in range(copies):
                target[copy * n:(copy + 1) * n] = offsets[:-1] + copy * t
            target[n * copies] = t * copies


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
