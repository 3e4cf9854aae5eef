"""Damaged copies of real tfenc outputs, one damage each, for
tests/inspect/damaged.sh: index datasets whose contents break their rules
and attributes outside their domains (core/output/output_*_checks.c).

usage: damage.py DIRECTORY
DIRECTORY holds the clean outputs pooled.h5, tokens.h5, scores.h5,
sparse.h5, vectors.h5, int8.h5 and chunks.h5 (chunk_pooling = none over a
corpus of two files). Writes DIRECTORY/damaged/NAME.h5 for each case and
prints one line per case: NAME|EXIT|PATTERN, the exit status --status must
give and the pattern (an extended regular expression) its one line on
stderr must match after "tfenc-batch: FILE: " (no pattern for exit 3).
"""

import os
import shutil
import sys

import h5py
import numpy as np

directory = sys.argv[1]
damaged = os.path.join(directory, "damaged")
shutil.rmtree(damaged, ignore_errors=True)
os.mkdir(damaged)


def case(name, source, damage, pattern, status=1):
    path = os.path.join(damaged, name + ".h5")
    shutil.copy(os.path.join(directory, source + ".h5"), path)
    with h5py.File(path, "r+") as f:
        damage(f)
    print(f"{name}|{status}|{pattern}")


def set_attribute(name, value):
    def damage(f):
        if isinstance(value, str):
            # as tfenc writes it: a variable-length UTF-8 string
            f.attrs.create(name, value, dtype=h5py.string_dtype())
        else:
            f.attrs[name] = value
    return damage


def set_element(dataset, index, value):
    def damage(f):
        f[dataset][index] = value
    return damage


def replace(dataset, data):
    def damage(f):
        if dataset in f:
            del f[dataset]
        f[dataset] = data
    return damage


def delete(name):
    def damage(f):
        del f[name]
    return damage


def both(*damages):
    def damage(f):
        for d in damages:
            d(f)
    return damage


with h5py.File(os.path.join(directory, "tokens.h5"), "r") as f:
    token_offsets = f["offsets"][:]
    n_tokens = int(f.attrs["n_tokens"])
with h5py.File(os.path.join(directory, "sparse.h5"), "r") as f:
    indptr = f["sparse_indptr"][:]
    entries = len(f["sparse_values"])
with h5py.File(os.path.join(directory, "vectors.h5"), "r") as f:
    vector_offsets = f["offsets"][:]
with h5py.File(os.path.join(directory, "chunks.h5"), "r") as f:
    chunk_offsets = f["chunk_offsets"][:]
    shards = f["corpus_shards"][:]
    n_documents = int(f.attrs["n_documents"])
with h5py.File(os.path.join(directory, "int8.h5"), "r") as f:
    ranges = f["quantization_ranges"][:]
    minimum = f.attrs["quantization_min"]

# --- attributes outside their domains
case("d_model-negative", "pooled", set_attribute("d_model", np.int64(-5)),
     "attribute 'd_model' is -5, expected 1 to 2147483647")
case("d_model-wide", "pooled", set_attribute("d_model", np.int64(100000)),
     "attribute 'd_model' is 100000, expected 1 to 65536 for output_kind 'pooled'")
case("n_documents-negative", "pooled", set_attribute("n_documents", np.int64(-3)),
     "attribute 'n_documents' is -3, expected at least 0")
case("output_kind-banana", "pooled", set_attribute("output_kind", "banana"),
     "attribute 'output_kind' is 'banana', expected one of 'pooled', 'tokens', 'scores', "
     "'sparse', 'vectors'$")
case("dtype-unknown", "pooled", set_attribute("dtype", "float64"),
     "attribute 'dtype' is 'float64', expected one of 'float32'")
case("compression-unknown", "pooled", set_attribute("compression", "lz4"),
     "attribute 'compression' is 'lz4', expected one of 'none', 'gzip'$")
case("chunks-unknown", "pooled", set_attribute("chunks", "sometimes"),
     "attribute 'chunks' is 'sometimes', expected one of 'off', 'mean', 'each', 'max', 'first'$")
case("precision-unknown", "pooled", set_attribute("precision", "fp64"),
     "attribute 'precision' is 'fp64', expected one of 'fp32', 'bf16', 'int8'$")
case("cosine-nan", "pooled", set_attribute("precision_sample_min_cosine", np.nan),
     "attribute 'precision_sample_min_cosine' is nan, expected a finite value from -1 to 1")
case("weights-digest", "pooled", set_attribute("weights_sha256", "not a digest"),
     "attribute 'weights_sha256' is 'not a digest', expected a SHA-256 of 64 hex digits")
case("plugins-digests", "pooled", set_attribute("plugins_sha256", "layers.so\n"),
     "attribute 'plugins_sha256' is 'layers.so\\?', expected lines 'FILE SHA256'")
case("layout-garbage", "pooled", set_attribute("layout", "banana"),
     "attribute 'layout' is 'banana', expected 'ranks=R data_parallel=D pipeline_stages=S'")
case("layout-no-ranks", "pooled", set_attribute("layout", "ranks=0 data_parallel=1"),
     "attribute 'layout' is 'ranks=0 data_parallel=1'")
case("job_settings-integer", "pooled", set_attribute("job_settings", np.int64(7)),
     "attribute 'job_settings' is a scalar of int64, expected one string")
case("output_kind-array", "pooled",
     set_attribute("output_kind", np.array([b"pooled", b"tokens"])),
     r"attribute 'output_kind' is \[2\] of string, expected one string")
case("compact-tokens", "tokens", set_attribute("dtype", "int8"),
     "attribute 'dtype' is 'int8', but only pooled outputs are compact \\(output_kind 'tokens'\\)")
case("chunked-tokens", "tokens", set_attribute("chunks", "each"),
     "attribute 'chunks' is 'each', but only pooled outputs and scores are chunked \\(output_kind 'tokens'\\)")
case("binary-width", "pooled", both(set_attribute("dtype", "binary"),
                                  set_attribute("d_model", np.int64(60))),
     "attribute 'd_model' is 60, but dtype 'binary' packs 8 dimensions a byte")
case("id2label-not-json", "scores", set_attribute("id2label", "not json"),
     "attribute 'id2label' is not a JSON object of label names: ")
case("id2label-count", "scores", set_attribute("id2label", '{"0": "a"}'),
     "attribute 'id2label' names 1 labels, but d_model is 3")
case("id2label-gap", "scores", set_attribute("id2label", '{"0": "a", "1": "b", "7": "c"}'),
     "attribute 'id2label' has no name for label \"2\" of 3")
case("id2label-list", "scores", set_attribute("id2label", '["a", "b", "c"]'),
     "attribute 'id2label' is not a JSON object of label names: another JSON value")
case("top_k-negative", "sparse", set_attribute("sparse_top_k", np.int64(-3)),
     "attribute 'sparse_top_k' is -3, expected 0 to 2147483647")
case("threshold-nan", "sparse", set_attribute("sparse_threshold", np.nan),
     "attribute 'sparse_threshold' is nan, expected a finite value >= 0")
case("multivector-mode", "vectors", set_attribute("multivector_mode", "banana"),
     "attribute 'multivector_mode' is 'banana', expected one of 'document', 'query'$")
case("multivector-padding", "vectors", set_attribute("multivector_query_padding", "often"),
     "attribute 'multivector_query_padding' is 'often', expected one of '', 'attended', 'masked'")
case("multivector-skiplist", "vectors", set_attribute("multivector_skiplist", "a, b"),
     "attribute 'multivector_skiplist' is 'a, b', expected token ids separated by spaces")
case("quantization_min-nan", "int8",
     set_attribute("quantization_min", np.where(np.arange(len(minimum)) == 2, np.nan, minimum)),
     "attribute 'quantization_min' holds nan at index 2, expected finite values")
case("quantization_min-short", "int8", set_attribute("quantization_min", minimum[:10]),
     r"attribute 'quantization_min' is \[10\] of float32, expected d_model \(64\) floating-point values")
case("quantization_min-differs", "int8",
     set_attribute("quantization_min", minimum + np.float32(0.5) * (np.arange(len(minimum)) == 2)),
     r"attribute 'quantization_min' holds [-0-9.e]+ at index 2, but dataset 'quantization_ranges' \[0, 2\] holds")

# --- the corpus's files and each row's
def shard_field(row, field, value):
    def damage(f):
        table = f["corpus_shards"][:]
        table[row][field] = value
        f["corpus_shards"][...] = table
    return damage


def legacy_shards(text):
    """An older file's table: the tab-separated attribute, no dataset."""
    def damage(f):
        del f["corpus_shards"]
        f.attrs.create("corpus_shards", text, dtype=h5py.string_dtype())
    return damage


case("corpus_shards-first", "chunks", shard_field(1, "first_document", 21),
     "dataset 'corpus_shards', row 1 does not begin where the file before it ends")
case("corpus_shards-documents", "chunks", shard_field(1, "documents", int(shards[1]["documents"]) - 1),
     "corpus_shards lists 49 documents, but n_documents is 50")
case("corpus_shards-bytes", "chunks", shard_field(1, "bytes", -7),
     "dataset 'corpus_shards', row 1 has a negative size or count")
case("corpus_shards-fingerprint", "chunks", shard_field(1, "fingerprint", b"xyz"),
     "dataset 'corpus_shards', row 1 has a fingerprint that is not 64 hex digits")
case("corpus_shards-not-a-table", "chunks", replace("corpus_shards", np.arange(2, dtype=np.int64)),
     "dataset 'corpus_shards' .*: not the table of the corpus's files tfenc writes")
case("corpus_shards-legacy-garbage", "chunks", legacy_shards("garbage\n"),
     "attribute 'corpus_shards', row 0 has a fingerprint that is not 64 hex digits")


def source(index, shard=None, line=None):
    def damage(f):
        entry = f["document_source"][index]
        if shard is not None:
            entry["shard"] = shard
        if line is not None:
            entry["line"] = line
        f["document_source"][index] = entry
    return damage


case("document_source-999", "chunks", source(4, shard=999),
     "dataset 'document_source' names file 999 at index 4, but corpus_shards lists 2 files")
case("document_source-negative", "chunks", source(4, shard=-1),
     "dataset 'document_source' names file -1 at index 4")
case("document_source-other-file", "chunks", source(25, shard=0),
     "dataset 'document_source' names file 0 at index 25, but corpus_shards gives that file rows 0 to 19")
case("document_source-line", "chunks", source(3, line=-5),
     "dataset 'document_source' holds line -5 at index 3, expected >= 0")

# --- per-document datasets
case("lengths-negative", "pooled", set_element("lengths", 3, -7),
     "dataset 'lengths' holds -7 at index 3, expected -1 \\(not written yet\\) or a token count >= 1")
case("truncated-negative", "pooled", set_element("truncated", 2, -1),
     "dataset 'truncated' holds -1 at index 2, expected >= 0")
case("chunks-zero", "chunks", set_element("chunks", 3, 0),
     "dataset 'chunks' holds 0 at index 3, expected >= 1")

# --- offsets: from 0, never decreasing, ending at the rows, runs = lengths
case("offsets-end-1e12", "tokens", set_element("offsets", len(token_offsets) - 1, 10**12),
     f"dataset 'offsets' holds 1000000000000 at index {len(token_offsets) - 1}, outside 0 to n_tokens {n_tokens}")
case("offsets-decreasing", "tokens", set_element("offsets", 6, token_offsets[5] - 1),
     f"dataset 'offsets' decreases at index 5 \\({token_offsets[5]}, then {token_offsets[5] - 1}\\)")
case("offsets-start", "tokens", set_element("offsets", 0, 3),
     "dataset 'offsets' starts at 3, expected 0")
case("offsets-run", "tokens", set_element("offsets", 10, token_offsets[10] + 1),
     "dataset 'offsets' gives document 9 [0-9]+ rows \\(index 9 to 10\\), but 'lengths' gives it [0-9]+ tokens")
case("offsets-last", "tokens",
     both(set_element("offsets", len(token_offsets) - 1, n_tokens - 1),
          set_element("lengths", len(token_offsets) - 2,
                      token_offsets[-1] - 1 - token_offsets[-2])),
     f"dataset 'offsets' ends at {n_tokens - 1} \\(index {len(token_offsets) - 1}\\), expected n_tokens {n_tokens}")
case("offsets-negative", "tokens", set_element("offsets", 7, -2),
     "dataset 'offsets' decreases at index 6 \\([0-9]+, then -2\\)")
case("offsets-float", "tokens", replace("offsets", token_offsets.astype(np.float64)),
     r"dataset 'offsets' holds \[51\] float64 values, expected \[n_documents \+ 1 = 51\] integer")
case("offsets-missing", "tokens", delete("offsets"),
     "no dataset 'offsets', which every tokens output has")
case("n_tokens-off", "tokens", set_attribute("n_tokens", np.int64(n_tokens + 1)),
     rf"dataset 'hidden' holds \[{n_tokens}, 64\] float32 values, expected \[n_tokens {n_tokens + 1}, d_model 64\]")
case("token_ids-negative", "tokens", set_element("token_ids", 0, -4),
     "dataset 'token_ids' holds -4 at index 0 \\(document 0\\), expected >= 0")
case("vectors-offsets-1e12", "vectors", set_element("offsets", len(vector_offsets) - 1, 10**12),
     "dataset 'offsets' holds 1000000000000 at index 50, outside 0 to n_tokens")
case("vectors-run-too-long", "vectors", set_element("lengths", 3, 1),
     "dataset 'offsets' gives document 3 [0-9]+ rows \\(index 3 to 4\\), more than its 1 tokens in 'lengths'")
case("chunk_offsets-decreasing", "chunks", set_element("chunk_offsets", 8, chunk_offsets[7] - 1),
     "dataset 'chunk_offsets' decreases at index 7")
case("chunk_offsets-run", "chunks", set_element("chunks", 3, 9),
     "dataset 'chunk_offsets' gives document 3 [0-9]+ rows \\(index 3 to 4\\), but 'chunks' gives it 9")
case("chunk_starts-negative", "chunks", set_element("chunk_starts", 5, -1),
     "dataset 'chunk_starts' holds -1 at index 5 \\(document [0-9]+\\), expected >= 0")
case("n_chunks-off", "chunks", set_attribute("n_chunks", np.int64(chunk_offsets[-1] - 1)),
     "dataset 'embeddings' holds .* expected \\[n_chunks")

# --- the CSR
case("indptr-decreasing", "sparse", set_element("sparse_indptr", 5, indptr[4] - 1),
     f"dataset 'sparse_indptr' decreases at index 4 \\({indptr[4]}, then {indptr[4] - 1}\\)")
case("indptr-end", "sparse", set_element("sparse_indptr", len(indptr) - 1, entries + 5),
     f"dataset 'sparse_indptr' holds {entries + 5} at index 50, outside 0 to {entries}, as sparse_values")
case("indptr-start", "sparse", set_element("sparse_indptr", 0, 1),
     "dataset 'sparse_indptr' starts at 1, expected 0")
case("indices-outside", "sparse", set_element("sparse_indices", indptr[7] + 2, 600),
     f"dataset 'sparse_indices' holds 600 at index {indptr[7] + 2} \\(document 7\\), outside the columns 0 to d_model - 1 = 511")
case("indices-negative", "sparse", set_element("sparse_indices", indptr[1], -1),
     f"dataset 'sparse_indices' holds -1 at index {indptr[1]} \\(document 1\\), outside the columns")


def swap_first_entries(f):
    first = f["sparse_indices"][0:2]
    f["sparse_indices"][0:2] = first[::-1]


case("indices-order", "sparse", swap_first_entries,
     "dataset 'sparse_indices' is not ascending within document 0: [0-9]+ at index 1 follows [0-9]+")
case("values-nan", "sparse", set_element("sparse_values", indptr[2], np.nan),
     f"dataset 'sparse_values' holds nan at index {indptr[2]} \\(document 2\\), expected a finite value above sparse_threshold 0")
case("values-inf", "sparse", set_element("sparse_values", indptr[2], np.inf),
     f"dataset 'sparse_values' holds inf at index {indptr[2]} \\(document 2\\)")
case("values-negative", "sparse", set_element("sparse_values", 3, -0.5),
     "dataset 'sparse_values' holds -0.5 at index 3 \\(document 0\\)")
case("values-below-threshold", "sparse", set_attribute("sparse_threshold", 1e9),
     "dataset 'sparse_values' holds [-0-9.e+]+ at index 0 \\(document 0\\), expected a finite value above sparse_threshold 1e\\+09")
case("top_k-exceeded", "sparse", set_attribute("sparse_top_k", np.int64(2)),
     "dataset 'sparse_indptr' gives document 0 [0-9]+ entries \\(index 0 to 1\\), more than sparse_top_k 2")
case("vocabulary-short", "sparse", replace("vocabulary", np.array([b"a"] * 10)),
     r"dataset 'vocabulary' holds \[10\] string values, expected \[d_model 512\] string")
case("indptr-missing", "sparse", delete("sparse_indptr"),
     "complete = 1 but no dataset 'sparse_indptr'")
case("values-missing", "sparse", delete("sparse_values"),
     "complete = 1 but no dataset 'sparse_values'")

# --- the compact dtypes' ranges
case("ranges-missing", "int8", delete("quantization_ranges"),
     "no dataset 'quantization_ranges', which every output of dtype 'int8' has")
case("ranges-nan", "int8", set_element("quantization_ranges", (0, 3), np.nan),
     r"dataset 'quantization_ranges' holds nan at \[0, 3\], expected finite values")
case("ranges-order", "int8", set_element("quantization_ranges", (0, 5), ranges[1, 5] + 1),
     "dataset 'quantization_ranges': dimension 5 has minimum [-0-9.e]+ above its maximum")
case("ranges-shape", "int8", replace("quantization_ranges", ranges[:, :10]),
     r"dataset 'quantization_ranges' holds \[2, 10\] float32 values, expected \[2, d_model 64\] floating-point")
case("sample-outside", "int8", replace("quantization_sample", np.array([3, 999], np.int64)),
     "dataset 'quantization_sample' holds 999 at index 1, outside the documents 0 to 49")

# --- unfinished files: only the finished documents' entries count
def unfinish(first, dataset=None, garbage=None):
    def damage(f):
        f["lengths"][first:] = -1
        f.attrs["complete"] = 0
        if dataset is not None:
            f[dataset][first + 1:first + 1 + len(garbage)] = garbage
    return damage


case("unfinished-tokens", "tokens", unfinish(30, "offsets", np.array([0, 10**12, 5, -3])), "",
     status=3)
case("unfinished-sources", "chunks",
     unfinish(30, "document_source", np.array([(999, -1)] * 3, dtype=[("shard", "<i4"), ("line", "<i8")])),
     "", status=3)
case("unfinished-damaged", "tokens",
     both(unfinish(30), set_element("offsets", 10, token_offsets[10] + 1)),
     "dataset 'offsets' gives document 9 [0-9]+ rows \\(index 9 to 10\\), but 'lengths' gives it")
case("unfinished-end", "tokens", both(unfinish(30), set_element("offsets", 50, 7)),
     f"dataset 'offsets' ends at 7 \\(index 50\\), expected n_tokens {n_tokens}")
