#!/bin/sh
# output_dtype = int8, uint8, binary and ubinary over the
# bert-text example's model and 300 lines of its text. Each must be, bit for
# bit, what sentence-transformers' quantize_embeddings returns for the
# float32 output of the same job (int8 and uint8 with the file's ranges,
# which must be the min/max of the documents the file says it calibrated
# on); the same at layouts 2x1 and 1x2 and after a resume at another layout;
# given ranges (.npy float32/float64, .h5) must give the calibrated file
# again, and so must the same ranges written as two lists in the job. With
# long_documents = chunk the int8 rows are the buckets of each document's
# chunk mean scaled back to unit length (the model normalises): the float32
# means must be normalize(mean(chunk vectors)) and the int8 file their
# quantize_embeddings. Bad input (no calibration sample, binary with d not a multiple of
# 8, per-token output, ranges of the wrong shape or for the wrong dtype):
# one line, a non-zero exit, and no file.
set -u
. "$(cd "$(dirname "$0")/../pipeline" && pwd)/common.sh"
work=$builddir/tests/data/generated/compact
: "${TFENC_VENV_PYTHON:=${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python}"
compare="$here/compare_quantized.py"
failed=0

fail() {
  echo "compact: FAIL $*"
  failed=$((failed + 1))
}

if ! "$TFENC_VENV_PYTHON" -c "import sentence_transformers.quantization" 2>/dev/null; then
  echo "compact: FAIL: $TFENC_VENV_PYTHON cannot import sentence_transformers (run tests/setup-python-venv)"
  exit 1
fi
prepare_example bert-text "$work/text" || { echo "compact: FAIL: cannot make the bert-text model"; exit 1; }
prepare_example original-postnorm "$work/tokens" || { echo "compact: FAIL: cannot make the postnorm model"; exit 1; }
"$python" "$srcdir/tests/pipeline/make_inputs.py" text "$work/text/corpus.txt" "$work/text/big.txt" 6 || exit 1

# encode RANKS STAGES OUTPUT SETTINGS...: the job over big.txt, small windows
# so that the replicas share the work.
encode() {
  ranks=$1 stages=$2 out=$3
  shift 3
  rm -f "$work/text/$out"
  (cd "$work/text" && timeout 300 "$mpiexec" -n "$ranks" "$driver" --quiet \
     --set job.input=big.txt --set job.window_documents=40 --set job.batch_tokens=128 \
     --set job.pipeline_stages="$stages" --set job.output="$out" "$@" job.ini)
}

encode 1 1 float32.h5 || fail "the float32 job failed"
# The compact files and their labels, checked in one process.
set --
for dtype in int8 uint8 binary ubinary; do
  if encode 1 1 "$dtype-1-1.h5" --set job.output_dtype=$dtype; then
    set -- "$@" "$work/text/$dtype-1-1.h5" "compact: $dtype"
  else
    fail "$dtype: the job failed"
  fi
done
if [ -f "$work/text/float32.h5" ] && [ $# -gt 0 ]; then
  "$TFENC_VENV_PYTHON" "$compare" "$work/text/float32.h5" "$@" \
    || fail "$? of the compact files are not quantize_embeddings' result"
fi

# Layouts and a resume: every dataset (rows, ranges, sample) bitwise equal.
for dtype in int8 binary; do
  others=""
  for layout in 2:1 2:2; do
    ranks=${layout%:*} stages=${layout#*:}
    if encode "$ranks" "$stages" "$dtype-$ranks-$stages.h5" --set job.output_dtype=$dtype; then
      others="$others $work/text/$dtype-$ranks-$stages.h5"
    else
      fail "$dtype at $ranks ranks x $stages stages: the job failed"
    fi
  done
  # A run killed after document 120, resumed by 2 replicas.
  cp "$work/text/$dtype-1-1.h5" "$work/text/$dtype-resumed.h5"
  "$python" "$here/unfinish.py" "$work/text/$dtype-resumed.h5" 120
  if (cd "$work/text" && "$mpiexec" -n 2 "$driver" --quiet --set job.input=big.txt \
        --set job.window_documents=40 --set job.batch_tokens=128 \
        --set job.output_dtype=$dtype --set job.output="$dtype-resumed.h5" job.ini); then
    others="$others $work/text/$dtype-resumed.h5"
  else
    fail "$dtype: the resume failed"
  fi
  # shellcheck disable=SC2086
  "$python" "$compare" same "$work/text/$dtype-1-1.h5" $others > "$work/same.out" 2>&1 \
    || fail "$dtype: layouts or resume differ"
  sed 's/^/compact: /' "$work/same.out"
done

# --status says what the compact rows are and where the ranges came from.
"$driver" --status "$work/text/int8-1-1.h5" | grep -q "^compact: embeddings are int8 buckets.*calibrated: .* over [0-9]* documents" \
  || fail "--status does not describe int8 output"
"$driver" --status "$work/text/ubinary-1-1.h5" | grep -q "^compact: .*packed 8 per byte" \
  || fail "--status does not describe ubinary output"

# Chunk means, compact: buckets of the unit-length means. 300 documents,
# every fourth about 150 tokens (three or four chunks of 64).
"$python" - "$work/text/corpus.txt" "$work/text/long.txt" <<'PY'
import sys
lines = [l.strip() for l in open(sys.argv[1], encoding="utf-8") if l.strip()]
with open(sys.argv[2], "w", encoding="utf-8") as out:
    for i in range(300):
        words = (" ".join(lines[(i + k) % len(lines)] for k in range(14)) if i % 4 == 0
                 else lines[i % len(lines)])
        out.write(words + "\n")
PY
set --
for pooling in mean none; do
  for dtype in float32 int8; do
    encode 1 1 "chunks-$pooling-$dtype.h5" --set job.input=long.txt --set job.long_documents=chunk \
      --set job.chunk_pooling=$pooling --set job.output_dtype=$dtype \
      || fail "chunk_pooling = $pooling, $dtype: the job failed"
  done
  # The ranges are the sample documents' rows as written: means, or every chunk.
  "$TFENC_VENV_PYTHON" "$compare" "$work/text/chunks-$pooling-float32.h5" \
    "$work/text/chunks-$pooling-int8.h5" "compact: int8, chunk_pooling = $pooling" \
    || fail "int8, chunk_pooling = $pooling: not quantize_embeddings of the float32 rows"
done
"$python" "$srcdir/tests/import/unit_means.py" "$work/text/chunks-none-float32.h5" \
  "$work/text/chunks-mean-float32.h5" "compact: float32 chunk means" \
  || fail "chunk means: not the unit-length means"
"$python" -c "import h5py, sys; a, b = (h5py.File(p, 'r') for p in sys.argv[1:3]); \
assert a.attrs['unit_norm'] == 1 and b.attrs['unit_norm'] == 0" \
  "$work/text/chunks-mean-float32.h5" "$work/text/chunks-mean-int8.h5" \
  || fail "chunk means: unit_norm is not 1 for float32 and 0 for int8 codes"

# SIGKILL part-way and run again (at another rank count): the same file as
# the uninterrupted run. The test plugin's `pause` layer makes each
# microbatch take a while so that the kill lands part-way.
TFENC_PLUGIN_PATH="$TFENC_PLUGIN_PATH:$builddir/tests/plugins/.libs"
export TFENC_PLUGIN_PATH
cp "$work/text/job.ini" "$work/text/paused.ini"
printf '\n[pause]\ntype = pause\nmilliseconds = 150\n' >> "$work/text/paused.ini"
paused() { # paused RANKS: runs paused.ini into int8-killed.h5
  (cd "$work/text" && exec "$mpiexec" -n "$1" "$driver" --quiet --set job.input=big.txt \
     --set job.window_documents=40 --set job.batch_tokens=128 --set job.output_dtype=int8 \
     --set job.output=int8-killed.h5 paused.ini)
}
rm -f "$work/text/int8-killed.h5"
paused 2 > "$work/killed.out" 2>&1 &
pid=$!
kill_part_way "$pid" "$work/text/int8-killed.h5" 0.3
left=$("$python" "$srcdir/tests/resume/progress.py" count "$work/text/int8-killed.h5")
echo "compact: killed with $left (finished, total, complete) in the file"
case "$left" in
  "300 300 1"|"0 0 0") fail "the kill did not land part-way ($left)" ;;
esac
if paused 1 > "$work/resumed.out" 2>&1; then
  "$python" "$compare" same "$work/text/int8-1-1.h5" "$work/text/int8-killed.h5" \
    > "$work/same.out" 2>&1 || fail "int8: killed and resumed, the file differs"
  sed 's/^/compact: /' "$work/same.out"
else
  fail "int8: the resume after SIGKILL failed: $(tail -n 1 "$work/resumed.out")"
fi

# Given ranges: the calibrated file's, as numpy.save writes them and as the
# file itself, must reproduce its rows.
"$python" -c "
import h5py, json, numpy as np, sys
r = h5py.File(sys.argv[1], 'r')['quantization_ranges'][...]
np.save(sys.argv[2], r)
np.save(sys.argv[3], r.astype(np.float64))
np.save(sys.argv[4], r[:, :10])
open(sys.argv[5], 'w').write(json.dumps(r.tolist()))" "$work/text/int8-1-1.h5" "$work/text/ranges.npy" \
  "$work/text/ranges64.npy" "$work/text/narrow.npy" "$work/text/ranges.json"
lists=$(cat "$work/text/ranges.json")
for given in ranges.npy ranges64.npy int8-1-1.h5 "$lists"; do
  encode 1 1 given.h5 --set job.output_dtype=int8 --set "job.output_ranges=$given" \
    || { fail "output_ranges = $(echo "$given" | cut -c1-40): the job failed"; continue; }
  "$python" -c "
import h5py, numpy as np, sys
a, b = h5py.File(sys.argv[1], 'r'), h5py.File(sys.argv[2], 'r')
assert np.array_equal(a['embeddings'][...], b['embeddings'][...]), 'rows differ'
assert np.array_equal(a['quantization_ranges'][...], b['quantization_ranges'][...]), 'ranges differ'
assert 'quantization_sample' not in b, 'a sample for given ranges'
assert b.attrs['quantization_ranges_source'].startswith('given: '), b.attrs['quantization_ranges_source']
" "$work/text/int8-1-1.h5" "$work/text/given.h5" \
    || fail "output_ranges = $(echo "$given" | cut -c1-40): not the calibrated file's rows"
done

# refused NAME DIR PATTERN SETTINGS...: exit non-zero, one line matching
# PATTERN on stderr, and no output file.
refused() {
  name=$1 dir=$2 pattern=$3
  shift 3
  rm -f "$dir/refused.h5"
  if (cd "$dir" && "$driver" --quiet --set job.output=refused.h5 "$@" job.ini) \
       > "$work/refused.out" 2> "$work/refused.err"; then
    fail "$name: accepted"
  elif [ "$(wc -l < "$work/refused.err")" -ne 1 ] || ! grep -q -- "$pattern" "$work/refused.err"; then
    fail "$name: wanted one line matching '$pattern', got:"
    cat "$work/refused.err"
  elif [ -e "$dir/refused.h5" ]; then
    fail "$name: an output file was written"
  else
    echo "compact: $name: $(cat "$work/refused.err")"
  fi
}
refused "int8 without a calibration sample" "$work/text" \
  "output_dtype = int8 needs ranges: the corpus gives a calibration sample of 50 documents" \
  --set job.output_dtype=int8
refused "binary with d = 20" "$work/text" "binary packs 8 dimensions per byte but the vectors have 20" \
  --set job.output_dtype=binary --set job.output_dim=20
refused "per-token int8" "$work/tokens" "output_dtype = int8 applies to pooled vectors" \
  --set job.output_dtype=int8
refused "per-token ubinary" "$work/tokens" "output_dtype = ubinary applies to pooled vectors" \
  --set job.output_dtype=ubinary
refused "ranges of the wrong shape" "$work/text" "output_ranges: .*narrow.npy: has shape (2, 10)" \
  --set job.input=big.txt --set job.output_dtype=uint8 --set job.output_ranges=narrow.npy
refused "ranges as one list" "$work/text" "output_ranges: two lists of 64 numbers" \
  --set job.input=big.txt --set job.output_dtype=int8 --set "job.output_ranges=[[0.5, 1]]"
refused "ranges for binary" "$work/text" "output_ranges: applies to output_dtype = int8 or uint8, not binary" \
  --set job.output_dtype=binary --set job.output_ranges=ranges.npy

if [ "$failed" -ne 0 ]; then
  echo "compact: FAIL ($failed)"
  exit 1
fi
echo "compact: PASS"
