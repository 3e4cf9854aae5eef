#!/bin/sh
# Node memory (prints figures, asserts no time): the real
# all-mpnet-base-v2 (BERT-base size, 418 MiB of float32 weights) over real
# text, 1 rank and 4 ranks of one node, fp32. A sampler adds up the
# proportional set sizes (Pss: a page mapped by n processes counts 1/n in
# each) of every tfenc-batch process every 0.1 s; the peak of that sum is
# what the node holds. The target: node <= one copy of the weights + 4 x
# (activations + 64 MiB), where a rank's activations are what the 1-rank
# run holds besides its weights.
#
# usage: sh tests/scale/node_memory.sh [BUILD_DIR] [DOCUMENTS] [PRECISION]
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
documents=${2:-400}
precision=${3:-fp32}
out=$build/bench-scale/node-memory
mkdir -p "$out"
export TFENC_PLUGIN_PATH="${TFENC_PLUGIN_PATH:-$build/plugins/.libs}"
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
model_dir=$(sh "$top/tests/import/fetch_mpnet.sh") \
  || { echo "node_memory: cannot fetch all-mpnet-base-v2 (sh tests/setup-python-venv first)" >&2; exit 1; }
[ -f "$out/mpnet.h5" ] || "$build/drivers/tfenc-import" "$model_dir" -o "$out/mpnet.h5" --job "$out/mpnet.ini" >/dev/null
sentences=$(wc -l < "$top/tests/import/sentences.txt")
/usr/bin/python3 "$top/tests/pipeline/make_inputs.py" text "$top/tests/import/sentences.txt" \
  "$out/corpus.txt" $(( (documents + sentences - 1) / sentences ))

# The sampler: peak of the summed Pss (MiB) of the tfenc-batch processes,
# written to $1 when the file $2 appears.
sample() {
  /usr/bin/python3 - "$1" "$2" <<'EOF'
import os, sys, time
result, stop = sys.argv[1], sys.argv[2]
peak = 0.0
while not os.path.exists(stop):
    total = 0.0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() != "tfenc-batch":
                    continue
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) / 1024.0
                        break
        except OSError:
            pass
    peak = max(peak, total)
    time.sleep(0.1)
with open(result, "w") as f:
    f.write(f"{peak:.1f}\n")
EOF
}

run() { # run RANKS: prints the peak node Pss in MiB
  rm -f "$out/out.h5" "$out/stop" "$out/peak"
  sample "$out/peak" "$out/stop" &
  sampler=$!
  mpiexec --oversubscribe -n "$1" "$build/drivers/tfenc-batch" --set job.input="$out/corpus.txt" \
    --set job.output="$out/out.h5" --set job.threads=1 --set model.precision="$precision" \
    "$out/mpnet.ini" 2> "$out/run-$1.log" >/dev/null
  touch "$out/stop"
  wait "$sampler"
  cat "$out/peak"
}
one=$(run 1)
four=$(run 4)
weights=$(du -m "$out/mpnet.h5" | cut -f1)
shared=$(sed -n 's/.*of which weights kept once for the node \([0-9.]*\) MiB.*/\1/p' "$out/run-4.log")
flags=$(grep -m1 -o -w -E 'avx512_bf16|avx512_vnni|avx512f|avx2|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')
echo "node_memory: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc --all) cores ($flags), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "node_memory: all-mpnet-base-v2 ($weights MiB weights file), $(wc -l < "$out/corpus.txt") real sentences, precision $precision"
grep -h "node memory" "$out/run-4.log" | sed 's/^/node_memory: 4 ranks, tfenc-batch says: /' || true
echo "$one $four ${shared:-0} $weights" | awk '{
  one = $1; four = $2; shared = $3; file = $4
  # A rank besides its weights: the 1-rank run minus its one copy.
  copy = shared > 0 ? shared : file
  activations = one - copy
  target = copy + 4 * (activations + 64)
  printf "node_memory: 1 rank:  peak node Pss %7.1f MiB (weights %.1f + the rest %.1f)\n", one, copy, activations
  printf "node_memory: 4 ranks: peak node Pss %7.1f MiB; 4 private copies would be about %.1f MiB\n", four, 4 * one
  printf "node_memory: target: <= 1 copy + 4 x (activations + 64 MiB) = %.1f MiB: %s\n", target, four <= target ? "met" : "NOT met"
}'
