"""Checks a compact output of tfenc against sentence-transformers'
quantize_embeddings, bit for bit, over the float32 output of the same job.

usage: compare_quantized.py FLOAT32.h5 COMPACT.h5 LABEL [COMPACT.h5 LABEL ...]
       compare_quantized.py same BASELINE.h5 OTHER.h5 [OTHER.h5 ...]

Several compact files of one float32 output are checked in one process:
importing sentence-transformers costs more than a check. The exit status
is the number of files that fail.

For int8 and uint8 the ranges are the compact file's quantization_ranges
(what tfenc calibrated or was given): the reference quantizes the float32
rows with exactly those ranges. When the file says which documents it
calibrated on (quantization_sample), the ranges must also be the
per-dimension minimum and maximum of the float32 rows of those documents
(with chunk_pooling = none, every chunk's row: chunk_offsets), within 1e-6: the calibration sample is encoded in batches of its own, whose
float32 sums may differ from the job's in the last bits.
"""

import sys

import h5py
import numpy as np


def same(baseline_path, others):
    """Every dataset of each OTHER equal to BASELINE's, bit for bit, and
    complete = 1: compact files at other layouts or after a resume."""
    def load(path):
        with h5py.File(path, "r") as f:
            data = {}
            f.visititems(lambda name, item: data.__setitem__(name, item[...])
                         if isinstance(item, h5py.Dataset) else None)
            return (data, int(f.attrs["complete"]),
                    {k: f.attrs[k] for k in ("quantization_min", "quantization_max") if k in f.attrs})
    baseline, _, base_attrs = load(baseline_path)
    failed = 0
    for path in others:
        data, complete, attrs = load(path)
        problems = [] if complete == 1 else ["not marked complete"]
        if sorted(data) != sorted(baseline):
            problems.append(f"datasets {sorted(data)} != {sorted(baseline)}")
        for name in baseline:
            if name in data and not (data[name].dtype == baseline[name].dtype
                                     and np.array_equal(data[name], baseline[name])):
                problems.append(f"{name} differs")
        for name in base_attrs:
            if not np.array_equal(attrs.get(name), base_attrs[name]):
                problems.append(f"attribute {name} differs")
        if problems:
            failed += 1
            print(f"FAIL {path}: " + "; ".join(problems))
        else:
            print(f"ok   {path}: every dataset bitwise equal to {baseline_path}")
    return 1 if failed else 0


def main():
    if sys.argv[1] == "same":
        return same(sys.argv[2], sys.argv[3:])
    # Here only: `same` runs under the system Python, without the venv.
    from sentence_transformers.quantization import quantize_embeddings

    float_path, pairs = sys.argv[1], sys.argv[2:]
    if not pairs or len(pairs) % 2:
        sys.exit(__doc__)
    with h5py.File(float_path, "r") as f:
        embeddings = f["embeddings"][...]
        offsets = f["chunk_offsets"][...] if "chunk_offsets" in f else None
        assert f.attrs["complete"] == 1, "float32 file incomplete"
    return sum(check(quantize_embeddings, embeddings, offsets, pairs[i], pairs[i + 1])
               for i in range(0, len(pairs), 2))


def check(quantize_embeddings, embeddings, offsets, compact_path, label):
    """1 when the compact file is not quantize_embeddings' result."""
    with h5py.File(compact_path, "r") as f:
        dtype = f.attrs["dtype"]
        dtype = dtype.decode() if isinstance(dtype, bytes) else dtype
        stored = f["embeddings"][...]
        complete = f.attrs["complete"]
        ranges = f["quantization_ranges"][...] if "quantization_ranges" in f else None
        attrs_min = f.attrs.get("quantization_min")
        attrs_max = f.attrs.get("quantization_max")
        sample = f["quantization_sample"][...] if "quantization_sample" in f else None
    assert complete == 1, f"{label}: compact file incomplete"
    problems = []
    if dtype in ("int8", "uint8"):
        if ranges is None:
            problems.append("no quantization_ranges dataset")
        else:
            if not (np.array_equal(attrs_min, ranges[0]) and np.array_equal(attrs_max, ranges[1])):
                problems.append("attributes quantization_min/max differ from the dataset")
            if sample is not None:
                rows = (embeddings[sample] if offsets is None else
                        np.concatenate([embeddings[offsets[i]:offsets[i + 1]] for i in sample]))
                expected = np.vstack((rows.min(axis=0), rows.max(axis=0)))
                error = float(np.abs(expected - ranges).max())
                print(f"{label}: ranges from {len(sample)} documents, within {error:g} of "
                      "their float32 rows' min/max")
                if error > 1e-6:
                    problems.append(f"ranges differ from the sample's min/max by {error:g}")
        reference = quantize_embeddings(embeddings, dtype, ranges=ranges)
    else:
        reference = quantize_embeddings(embeddings, dtype)
    if reference.dtype != stored.dtype or reference.shape != stored.shape:
        problems.append(f"stored {stored.dtype} {stored.shape}, reference "
                        f"{reference.dtype} {reference.shape}")
    else:
        differ = int((reference != stored).sum())
        if differ:
            problems.append(f"{differ} of {stored.size} values differ from quantize_embeddings")
    if dtype in ("int8", "uint8") and ranges is not None:
        outside = int(((embeddings < ranges[0]) | (embeddings > ranges[1])).sum())
        print(f"{label}: {outside} of {embeddings.size} values outside the ranges")
    if problems:
        print(f"{label}: FAIL: " + "; ".join(problems))
        return 1
    print(f"{label}: OK ({dtype} {stored.shape}, bit for bit)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
