#!/usr/bin/python3
"""Checks a tfenc-batch output file against the PyTorch reference of the same model.

usage: compare.py OUTPUT.h5 EXPECTED.h5 [--label TEXT]

EXPECTED.h5 is written by make_reference.py. Prints one line per check (ok or
FAIL) and exits 1 when any fails:
  - the datasets: `hidden [T, d]` float32 + `offsets [N+1]` int64 for per-token
    models, `embeddings [N, d]` float32 for pooled ones; `lengths [N]` and
    `truncated [N]` int32 holding the reference's values
  - the root attributes: job, weights_sha256 (the SHA-256 of the model file
    the reference was made with), tfenc_version, layout, created (ISO-8601),
    d_model, n_documents, complete = 1
  - the values over every real (non-pad) token: max |diff| <= 1e-4 and
    relative Frobenius error ||out - ref|| / ||ref|| <= 1e-5
"""

import argparse
import datetime
import hashlib
import os
import re
import sys

import h5py
import numpy as np

# Float32 through six layers in a different summation order than PyTorch's
# (OpenBLAS GEMM blocking, packed attention) differs by ~1e-6 relative; the
# reference's own fast and slow paths differ by as much. A wrong weight, mask,
# eps or activation gives 1e-2..1e-1, so these bars separate the two by 100x.
MAX_ABS_TOLERANCE = 1e-4
REL_FROBENIUS_TOLERANCE = 1e-5


class Checker:
    def __init__(self, label):
        self.label = label
        self.failures = 0
        self.count = 0

    def check(self, ok, what):
        self.count += 1
        if not ok:
            self.failures += 1
        print(f"{self.label}: {'ok  ' if ok else 'FAIL'} {what}")
        return ok


def text_of(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, np.ndarray) and value.shape == ():
        return text_of(value[()])
    return value if isinstance(value, str) else None


def scalar_int(value):
    array = np.asarray(value)
    if array.size != 1 or not np.issubdtype(array.dtype, np.integer):
        return None
    return int(array.reshape(()))


def describe_type(dataset):
    """'float32', 'int64', ... from the HDF5 file type itself (h5py reads a
    bfloat16 dataset as float32, so its dtype alone would not tell)."""
    file_type = dataset.id.get_type()
    size = file_type.get_size()
    if file_type.get_class() == h5py.h5t.FLOAT:
        return f"float{size * 8}" if file_type.get_fields()[2] != 8 or size != 2 else "bfloat16"
    if file_type.get_class() == h5py.h5t.INTEGER:
        signed = file_type.get_sign() == h5py.h5t.SGN_2
        return f"{'int' if signed else 'uint'}{size * 8}"
    return f"HDF5 class {file_type.get_class()}"


def check_dataset(checker, out, name, shape, type_name):
    if not checker.check(name in out and isinstance(out[name], h5py.Dataset),
                         f"dataset {name} present"):
        return None
    dataset = out[name]
    found = describe_type(dataset)
    ok = dataset.shape == shape and found == type_name
    checker.check(ok, f"dataset {name}: shape {dataset.shape} {found} "
                      f"(expected {shape} {type_name})")
    return dataset[...] if ok else None


def check_attributes(checker, out, expected, expected_dir):
    attrs = out.attrs
    job = text_of(attrs.get("job"))
    checker.check(job is not None and "[model]" in job,
                  "attribute job holds the job file text"
                  + ("" if job is not None else " (absent or not a string)"))

    sha = text_of(attrs.get("weights_sha256"))
    want = text_of(expected.attrs.get("weights_sha256"))
    weights_file = text_of(expected.attrs.get("weights_file"))
    if weights_file is not None:
        path = os.path.join(expected_dir, weights_file)
        if os.path.exists(path):
            digest = hashlib.sha256()
            with open(path, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            want = digest.hexdigest()
    checker.check(sha is not None and sha == want,
                  f"attribute weights_sha256 = {sha} (SHA-256 of the model file: {want})")

    version = text_of(attrs.get("tfenc_version"))
    checker.check(bool(version) and re.match(r"^\d+\.\d+", version) is not None,
                  f"attribute tfenc_version = {version!r}")
    layout = text_of(attrs.get("layout"))
    checker.check(bool(layout), f"attribute layout = {layout!r}")

    created = text_of(attrs.get("created"))
    try:
        stamp = datetime.datetime.fromisoformat(created.replace("Z", "+00:00"))
        age = datetime.datetime.now(datetime.timezone.utc) - (
            stamp if stamp.tzinfo else stamp.replace(tzinfo=datetime.timezone.utc))
        created_ok = datetime.timedelta(hours=-1) < age < datetime.timedelta(days=1)
    except (AttributeError, TypeError, ValueError):
        created_ok = False
    checker.check(created_ok, f"attribute created = {created!r} (ISO-8601 UTC, recent)")

    for key in ("d_model", "n_documents"):
        got = scalar_int(attrs.get(key)) if key in attrs else None
        want_value = int(expected.attrs[key])
        checker.check(got == want_value, f"attribute {key} = {got} (expected {want_value})")
    complete = scalar_int(attrs.get("complete")) if "complete" in attrs else None
    checker.check(complete == 1, f"attribute complete = {complete} (expected 1)")

    # Written by tfenc's output module; checked when present, since the
    # attributes every output must carry do not include them.
    kind = text_of(attrs.get("output_kind"))
    if kind is not None:
        want_kind = text_of(expected.attrs["output_kind"])
        checker.check(kind == want_kind, f"attribute output_kind = {kind!r} (expected {want_kind!r})")
    dtype = text_of(attrs.get("dtype"))
    if dtype is not None:
        checker.check(dtype == "float32", f"attribute dtype = {dtype!r} (expected 'float32')")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output")
    parser.add_argument("expected")
    parser.add_argument("--label", default=None, help="prefix of every line (default: OUTPUT)")
    args = parser.parse_args()
    checker = Checker(args.label or args.output)

    try:
        out = h5py.File(args.output, "r")
    except OSError as error:
        checker.check(False, f"{args.output} opens as HDF5 ({error})")
        print(f"{checker.label}: {checker.count - checker.failures} passed, "
              f"{checker.failures} failed")
        return 1
    with out, h5py.File(args.expected, "r") as expected:
        pooled = "expected_embeddings" in expected
        reference = expected["expected_embeddings" if pooled else "expected_hidden"][...]
        n_documents = int(expected.attrs["n_documents"])
        d_model = int(expected.attrs["d_model"])
        offsets = expected["offsets"][...]
        print(f"{checker.label}: datasets in output: {', '.join(sorted(out.keys()))}")

        if pooled:
            values = check_dataset(checker, out, "embeddings", (n_documents, d_model), "float32")
            checker.check("hidden" not in out, "no per-token dataset hidden in a pooled output")
        else:
            values = check_dataset(checker, out, "hidden", (int(offsets[-1]), d_model), "float32")
            found_offsets = check_dataset(checker, out, "offsets", (n_documents + 1,), "int64")
            if found_offsets is not None:
                checker.check(np.array_equal(found_offsets, offsets),
                              "offsets equal the reference's document boundaries")
            checker.check("embeddings" not in out, "no pooled dataset embeddings in a per-token output")
        for name in ("lengths", "truncated"):
            found = check_dataset(checker, out, name, (n_documents,), "int32")
            if found is not None:
                want = expected[name][...]
                bad = np.flatnonzero(found != want)
                checker.check(bad.size == 0,
                              f"{name} equal the reference's" + (
                                  "" if bad.size == 0 else
                                  f" (first difference: document {bad[0]}: {found[bad[0]]} "
                                  f"instead of {want[bad[0]]}; {bad.size} documents differ)"))

        check_attributes(checker, out, expected, os.path.dirname(os.path.abspath(args.expected)))

        if values is not None:
            difference = values.astype(np.float64) - reference.astype(np.float64)
            finite = bool(np.all(np.isfinite(values)))
            max_abs = float(np.max(np.abs(difference))) if finite else float("inf")
            rel = (float(np.linalg.norm(difference) / np.linalg.norm(reference.astype(np.float64)))
                   if finite else float("inf"))
            where = np.unravel_index(np.argmax(np.abs(difference)), difference.shape) if finite else None
            rows = "documents" if pooled else "real tokens"
            checker.check(max_abs <= MAX_ABS_TOLERANCE,
                          f"max |diff| {max_abs:.3g} over {values.shape[0]} {rows} "
                          f"(bar {MAX_ABS_TOLERANCE:g}; largest at row {where[0] if where else '-'})")
            checker.check(rel <= REL_FROBENIUS_TOLERANCE,
                          f"relative Frobenius error {rel:.3g} (bar {REL_FROBENIUS_TOLERANCE:g})")

    print(f"{checker.label}: {checker.count - checker.failures} passed, {checker.failures} failed")
    return 1 if checker.failures else 0


if __name__ == "__main__":
    sys.exit(main())
