#!/bin/sh
# The tokenizer through the weights file, end to end: tfenc-import stores a
# tokenizer.json (a RoBERTa checkpoint without vocab.txt) and a vocab.txt
# (a BERT checkpoint) under /tokenizer with tfenc_tokenizer_store, and
# tfenc-batch, with no [tokenizer] section, reads them back with
# tfenc_tokenizer_load and tokenizes text: the token count of every document
# must be HF tokenizers' (ids themselves are compared by test-json.sh).
set -eu

: "${REFERENCE_PYTHON:=/usr/bin/python3}" "${top_srcdir:=.}" "${top_builddir:=.}"
venv_python=${TFENC_VENV_PYTHON:-}
if [ -z "$venv_python" ] || [ ! -x "$venv_python" ] || ! "$venv_python" -c 'import tokenizers' 2>/dev/null; then
  echo "test-weights: FAIL: no venv python with tokenizers (TFENC_VENV_PYTHON='$venv_python'); run tests/setup-python-venv" >&2
  exit 1
fi
top_srcdir=$(cd "$top_srcdir" && pwd)
top_builddir=$(cd "$top_builddir" && pwd)
. "$top_srcdir/tests/environment.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/tfenc-tokenizer-weights.XXXXXX")
trap 'rm -rf "$work"' EXIT
failed=0

# RoBERTa with a tokenizer.json.
"$generate" "$work/roberta" \
  "$REFERENCE_PYTHON" "$top_srcdir/tests/import/make_checkpoint.py" roberta "$work/roberta" >/dev/null
"$venv_python" "$top_srcdir/tests/tokenizer/small_tokenizer.py" "$work/roberta" "$work/corpus.txt" \
  > "$work/expected.txt"
"$top_builddir/drivers/tfenc-import" "$work/roberta" -o "$work/roberta.h5" --job "$work/roberta.ini" >/dev/null
if ! h5ls "$work/roberta.h5/tokenizer" | grep -q '^json '; then
  echo "test-weights: FAIL: tfenc-import stored no /tokenizer/json"
  failed=1
fi
"$driver" --set job.input="$work/corpus.txt" --set job.output="$work/roberta-out.h5" \
  --set job.max_seq_len=64 "$work/roberta.ini" > "$work/run.log" 2>&1 || { cat "$work/run.log"; exit 1; }
"$venv_python" -c 'import h5py, sys; print("\n".join(str(min(int(n), 64)) for n in h5py.File(sys.argv[1])["lengths"][:]))' \
  "$work/roberta-out.h5" > "$work/tfenc.txt"
# HF's counts, cut at 64 as the job cuts them.
awk '{ print ($1 > 64 ? 64 : $1) }' "$work/expected.txt" > "$work/expected-cut.txt"
if cmp -s "$work/expected-cut.txt" "$work/tfenc.txt"; then
  echo "tokenizer.json through the weights file: $(wc -l < "$work/tfenc.txt") documents, token counts equal HF's"
else
  echo "test-weights: FAIL: token counts differ (HF, then tfenc):"
  paste "$work/expected-cut.txt" "$work/tfenc.txt"
  failed=1
fi

# BERT with a vocab.txt: stored in tfenc 0.1's layout, read back.
"$REFERENCE_PYTHON" "$top_srcdir/tests/import/make_checkpoint.py" bert "$work/bert" >/dev/null
"$top_builddir/drivers/tfenc-import" "$work/bert" -o "$work/bert.h5" --job "$work/bert.ini" >/dev/null
if ! h5ls "$work/bert.h5/tokenizer" | grep -q '^vocab '; then
  echo "test-weights: FAIL: tfenc-import stored no /tokenizer/vocab for a vocab.txt"
  failed=1
fi
vocab=$(find "$work/bert" -name vocab.txt | head -n 1)
"$driver" --set job.input="$work/corpus.txt" --set job.output="$work/bert-out.h5" "$work/bert.ini" \
  > "$work/run.log" 2>&1 || { cat "$work/run.log"; exit 1; }
"$venv_python" - "$vocab" "$work/corpus.txt" "$work/bert-out.h5" <<'PY' || failed=1
import sys
import h5py
from tokenizers import BertWordPieceTokenizer
vocab, corpus, output = sys.argv[1:4]
reference = BertWordPieceTokenizer(vocab, lowercase=True)
texts = open(corpus, encoding="utf-8").read().splitlines()
expected = [len(reference.encode(text).ids) for text in texts]
found = [int(n) for n in h5py.File(output)["lengths"][:]]
if expected != found:
    sys.exit("test-weights: FAIL: vocab.txt token counts: HF %s, tfenc %s" % (expected, found))
print("vocab.txt through the weights file: %d documents, token counts equal HF's" % len(texts))
PY
exit $failed
