#!/bin/sh
# The real all-mpnet-base-v2 (MPNet: relative position buckets, positions
# from padding_idx + 1, <s> and </s> around the text) imported with
# tfenc-import and run by tfenc-batch over tests/import/sentences.txt must
# reproduce sentence-transformers' normalised embeddings, and the token count
# of every line must be the same, twice:
#   from text: every line, tfenc's tokenizer included;
#   from the token ids sentence-transformers' own tokenizer gives: the
#     first 100 lines, the weights and the layers alone (the same on every
#     line), so that a tokenizer difference cannot hide a layer's.
# One import and one reference serve both (BERT-base size: each costs more
# than a run).
set -eu

. "$(cd "$(dirname "$0")/../.." && pwd)/tests/environment.sh"
: "${TFENC_VENV_PYTHON:=${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python}"
export TFENC_VENV_PYTHON
import="$builddir/drivers/tfenc-import"
batch=$driver
sentences="$here/sentences.txt"
work=$(mktemp -d "${TMPDIR:-/tmp}/tfenc-parity-mpnet.XXXXXX")
trap 'rm -rf "$work"' EXIT

if ! "$TFENC_VENV_PYTHON" -c "import sentence_transformers" 2>"$work/venv.err"; then
  echo "FAIL: $TFENC_VENV_PYTHON cannot import sentence_transformers:"
  tail -n 3 "$work/venv.err"
  echo "Run tests/setup-python-venv (it installs tests/python-requirements.txt)."
  exit 1
fi
model=$("$here/fetch_mpnet.sh")

"$import" "$model" -o "$work/mpnet.h5" --job "$work/mpnet.ini"
# Offline: the reference must come from the fetched files, never the hub.
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# Same bar as the MiniLM parity test (parity.sh): float32 summation order
# leaves ~1e-7 per layer; a wrong bucket, position or token moves cosines by
# more than 1e-3.
"$generate" "$work/st" "$TFENC_VENV_PYTHON" "$here/st_reference.py" "$model" "$sentences" \
  "$work/st" >/dev/null
mv "$work/st/reference.h5" "$work/st/ids.h5" "$work/"
"$batch" --quiet --set "job.input=$sentences" --set "job.output=$work/out-text.h5" \
  "$work/mpnet.ini"
# The first 100 documents of the ids and of the reference.
"$python" - "$work" 100 <<'PY'
import sys

import h5py

work, count = sys.argv[1], int(sys.argv[2])
with h5py.File(f"{work}/ids.h5", "r") as f, h5py.File(f"{work}/ids-first.h5", "w") as out:
    offsets = f["offsets"][: count + 1]
    out["offsets"] = offsets
    out["tokens"] = f["tokens"][: offsets[-1]]
with h5py.File(f"{work}/reference.h5", "r") as f, \
        h5py.File(f"{work}/reference-first.h5", "w") as out:
    for name in ("embeddings", "lengths"):
        out[name] = f[name][:count]
PY
"$batch" --quiet --set "job.input=$work/ids-first.h5" --set job.input_format=hdf5 \
  --set "job.output=$work/out-ids.h5" "$work/mpnet.ini"
failures=0
"$python" "$here/compare_embeddings.py" "$work/reference.h5" "$work/out-text.h5" \
  "mpnet from text" 0.99999 1e-4 || failures=$((failures + 1))
"$python" "$here/compare_embeddings.py" "$work/reference-first.h5" "$work/out-ids.h5" \
  "mpnet from ids" 0.99999 1e-4 || failures=$((failures + 1))
echo "parity_mpnet.sh: $((2 - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
