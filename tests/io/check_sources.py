#!/usr/bin/python3
"""Checks an output whose corpus left records out (null_text = skip)
against the output of the same documents as one file without them.

usage: check_sources.py BASELINE.h5 OTHER.h5 EXPECTED.json SKIPPED.json [ROW_BASE]

OTHER must hold the baseline's rows bitwise (embeddings, lengths,
truncated, ids), trace each row to its shard and line (document_source
equals EXPECTED.json's [shard, line] pairs; ROW_BASE 0 for Parquet, whose
places are 0-based rows, else 1-based lines), and say in corpus_shards how
many records each shard left out (SKIPPED.json). Prints what differs and
exits 1.
"""

import json
import sys

import h5py
import numpy as np


def main():
    baseline, other = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
    expected = np.array(json.load(open(sys.argv[3])), dtype=np.int64)
    skipped = json.load(open(sys.argv[4]))
    row_base = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    problems = []
    if int(other.attrs["complete"]) != 1:
        problems.append("not complete")
    for name in ("embeddings", "lengths", "truncated", "ids"):
        if name in baseline and not np.array_equal(baseline[name][()], other[name][()]):
            problems.append(f"{name} differs from the single file's")
    if "document_source" not in other:
        problems.append("no document_source")
    else:
        source = other["document_source"][()]
        found = np.stack([source["shard"].astype(np.int64), source["line"]], axis=1)
        wanted = expected.copy()
        wanted[:, 1] -= 1 - row_base
        if found.shape != wanted.shape or not np.array_equal(found, wanted):
            bad = [i for i in range(min(len(found), len(wanted)))
                   if not np.array_equal(found[i], wanted[i])]
            problems.append(f"document_source differs first at row {bad[:1]}: "
                            f"{found[bad[0]].tolist() if bad else found.shape} != "
                            f"{wanted[bad[0]].tolist() if bad else wanted.shape}")
    left_out = [int(n) for n in other["corpus_shards"]["skipped"]]
    if left_out != skipped:
        problems.append(f"corpus_shards' skipped column {left_out} != {skipped}")
    if problems:
        print("; ".join(problems))
        return 1
    print(f"{len(expected)} rows equal, traced to their lines, {sum(skipped)} records left out")
    return 0


if __name__ == "__main__":
    sys.exit(main())
