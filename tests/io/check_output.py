"""Checks an output file written by tests/io/mpi_output against values
computed here independently (numpy float32 products, numpy's float16
rounding, a bfloat16 round-to-nearest-even written for this check), and
against the same file written by a single rank.

usage: check_output.py PARALLEL.h5 SERIAL.h5 pooled|tokens DTYPE
"""
import sys

import h5py
import numpy as np

N, D = 1000, 12


def length(g):
    return (g * 37) % 9 + 1


def values(g, token):
    k = (g * 131 + token * 17 + np.arange(D) * 3) % 100003 - 50000
    return k.astype(np.float32) * np.float32(0.0137)


def bfloat16_as_float32(x):
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return (rounded << 16).astype(np.uint32).view(np.float32)


def stored(x, dtype):
    if dtype == "float32":
        return x.astype(np.float32)
    if dtype == "float16":
        return x.astype(np.float16).astype(np.float32)
    return bfloat16_as_float32(x)


def check_expected(f, kind, dtype):
    assert f.attrs["complete"] == 1, "complete is not 1"
    assert f.attrs["output_kind"] == kind and f.attrs["dtype"] == dtype
    assert f.attrs["n_documents"] == N and f.attrs["d_model"] == D
    assert f.attrs["job"] == "[job]\ninput = corpus.txt\n"
    assert f.attrs["weights_sha256"] == "0123abcd" * 8
    lengths = np.array([length(g) for g in range(N)], dtype=np.int32)
    assert f["lengths"].dtype == np.int32
    assert np.array_equal(f["lengths"][:], lengths)
    assert np.array_equal(f["truncated"][:], np.arange(N, dtype=np.int32) % 4)
    ids = [("doc-%d%s" % (g, "-tenth" if g % 10 == 0 else "")).encode() for g in range(N)]
    assert list(f["ids"][:]) == ids, "ids differ"
    if kind == "pooled":
        expected = np.stack([values(g, 0) for g in range(N)])
        data = f["embeddings"]
    else:
        offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
        assert f["offsets"].dtype == np.int64
        assert np.array_equal(f["offsets"][:], offsets), "offsets differ"
        expected = np.concatenate(
            [values(g, t)[None, :] for g in range(N) for t in range(length(g))])
        data = f["hidden"]
    if dtype == "float16":
        assert data.dtype == np.float16, "float16 is read by h5py as %s" % data.dtype
    got = data.astype(np.float32)[:]
    want = stored(expected, dtype)
    assert got.shape == want.shape, "shape %s, expected %s" % (got.shape, want.shape)
    # Bit-exact: both sides round the same float32 values to nearest even.
    mismatches = int(np.sum(got.view(np.uint32) != want.view(np.uint32)))
    assert mismatches == 0, "%d values differ from the reference" % mismatches


def check_same(parallel, serial):
    for name in serial:
        a, b = parallel[name], serial[name]
        assert a.shape == b.shape and a.dtype == b.dtype, name
        assert a.chunks == b.chunks, name
        if a.dtype.kind == "f":
            same = np.array_equal(a[:].view(np.uint8), b[:].view(np.uint8))
        else:
            same = np.array_equal(a[:], b[:])
        assert same, "dataset %s differs between the parallel and serial files" % name
    assert set(parallel) == set(serial)
    ignored = {"created", "layout", "compression"}
    for name in set(serial.attrs) | set(parallel.attrs):
        if name not in ignored:
            assert parallel.attrs[name] == serial.attrs[name], "attribute " + name


def main():
    parallel_path, serial_path, kind, dtype = sys.argv[1:5]
    with h5py.File(parallel_path, "r") as parallel, h5py.File(serial_path, "r") as serial:
        check_expected(parallel, kind, dtype)
        check_expected(serial, kind, dtype)
        check_same(parallel, serial)
        assert parallel.attrs["layout"].startswith("ranks=3")
    print("ok: %s %s: parallel file equals the serial file and the reference" % (kind, dtype))


if __name__ == "__main__":
    main()
