#!/bin/sh
# Task heads: a *ForSequenceClassification checkpoint written by
# transformers' own save_pretrained must not import as its bare encoder (the
# classifier's tensors would be dropped without a word): refused with one
# line naming a head tensor, nothing written. A pretraining checkpoint
# (masked-LM and next-sentence heads, which sentence-transformers drops too)
# still imports as its encoder.
set -eu

. "$(cd "$(dirname "$0")/../.." && pwd)/tests/environment.sh"
: "${TFENC_VENV_PYTHON:=${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python}"
import="$builddir/drivers/tfenc-import"
work=$(mktemp -d "${TMPDIR:-/tmp}/tfenc-heads.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
checks=0

HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$TFENC_VENV_PYTHON" "$here/heads.py" make "$work"

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# Every kind's head has tensors named classifier.* beside the encoder.
for kind in bert roberta xlm-roberta electra distilbert; do
  checks=$((checks + 1))
  out="$work/$kind.h5" job="$work/$kind.ini"
  if "$import" "$work/$kind" -o "$out" --job "$job" >"$work/stdout" 2>"$work/stderr"; then
    fail "$kind: a sequence classifier imported as its bare encoder"
    continue
  fi
  before=$failures
  lines=$(wc -l <"$work/stderr")
  [ "$lines" -eq 1 ] || fail "$kind: $lines lines on stderr: $(cat "$work/stderr")"
  grep -qF "tensor 'classifier." "$work/stderr" \
    || fail "$kind: message names no classifier tensor: $(cat "$work/stderr")"
  for leftover in "$out" "$out.tmp" "$job" "$job.tmp"; do
    [ ! -e "$leftover" ] || fail "$kind: left $leftover behind"
  done
  [ "$failures" -ne "$before" ] || echo "ok: $kind: $(cat "$work/stderr")"
done

checks=$((checks + 1))
if "$import" "$work/pretraining" -o "$work/pretraining.h5" --job "$work/pretraining.ini" \
    >/dev/null 2>"$work/stderr"; then
  echo "ok: pretraining heads left out"
else
  fail "pretraining: $(cat "$work/stderr")"
fi

echo "heads.sh: $((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
