#!/bin/sh
# tfenc-batch --status on damaged outputs (core/output/output_*_checks.c): real
# outputs of every kind, made by small generated models (jobs/bert-text
# with random heads): pooled, per-token hidden states with token ids,
# scores with id2label, sparse CSR, multi-vector vectors, int8 with its
# ranges, and every chunk's vector over a corpus of two files (chunk
# offsets, document_source, corpus_shards); the per-token, sparse and
# chunked ones written by 2 ranks. tests/inspect/damage.py damages copies
# of them one way each: index datasets that break their rules (offsets not
# from 0, decreasing, ending at 1e12, runs that disagree with lengths; CSR
# pointers, columns outside the vocabulary or out of order, NaN values;
# document_source naming file 999 or another file's row; ranges NaN or
# inverted) and attributes outside their domains (d_model = -5,
# output_kind = banana, id2label not JSON, corpus_shards garbage, an int8
# file without ranges, ...). Each must end with exit status 1 and one
# line "tfenc-batch: FILE: inconsistent: ..." naming the dataset or
# attribute and the index, never "state: complete"; the clean files say
# complete (0), and unfinished files whose unfinished documents hold
# garbage stay unfinished (3). Some cases run under mpiexec -n 2 too
# (one line, from the first rank).
set -u
. "$(cd "$(dirname "$0")/../pipeline" && pwd)/common.sh"
work=$builddir/tests/data/generated/inspect-damaged
failed=0
passed=0
fail() {
  echo "damaged: FAIL $*"
  failed=$((failed + 1))
}
ok() {
  echo "damaged: ok   $*"
  passed=$((passed + 1))
}

prepare_example bert-text "$work" || { echo "damaged: FAIL: cannot make a model"; exit 1; }
cd "$work" || exit 1
# Random heads over the example's encoder: a classifier of 3 labels, a
# SPLADE head over its 512-token vocabulary, a ColBERT projection to 16.
"$python" "$srcdir/tests/pipeline/make_inputs.py" heads model.h5 heads.h5 || exit 1
encoder=$(sed 's/^weights = model.h5/weights = heads.h5/' job.ini | awk '/^\[pooling\]/ { exit } { print }')
printf '%s\n' "$encoder" > tokens.ini
printf '%s\n[scores]\ntype = classifier\nlabels = {"0": "a", "1": "b", "2": "c"}\n' "$encoder" > scores.ini
printf '%s\n[splade]\ntype = splade\n' "$encoder" > sparse.ini
printf '%s\n[colbert]\ntype = multivector\n' "$encoder" > vectors.ini
mkdir -p shards
head -n 20 corpus.txt > shards/a.txt
tail -n 30 corpus.txt > shards/b.txt
encode() { # RANKS OUTPUT JOB [--set ...]
  ranks=$1 output=$2 job=$3
  shift 3
  rm -f "$output"
  if "$mpiexec" -n "$ranks" "$driver" --quiet --set "job.output=$output" "$@" "$job" > "$output.log" 2>&1; then
    ok "$output written by $ranks rank(s)"
  else
    fail "$output: the job failed: $(tail -n 3 "$output.log")"
  fi
}
encode 1 pooled.h5 job.ini
encode 2 tokens.h5 tokens.ini --set job.output_ids=true
encode 1 scores.h5 scores.ini
encode 2 sparse.h5 sparse.ini
encode 1 vectors.h5 vectors.ini --set job.skip_punctuation=true
"$python" -c "
import h5py, numpy as np
e = h5py.File('pooled.h5', 'r')['embeddings'][:]
np.save('ranges.npy', np.vstack((e.min(axis=0), e.max(axis=0))))" || fail "ranges from pooled.h5"
encode 1 int8.h5 job.ini --set job.output_dtype=int8 --set job.output_ranges=ranges.npy
encode 2 chunks.h5 job.ini --set job.input=shards --set job.long_documents=chunk \
  --set job.chunk_pooling=none --set job.max_seq_len=8

# status FILE [RANKS]: sets $code, $out (stdout) and $err (tfenc's stderr lines).
status() {
  if [ -n "${2:-}" ]; then
    "$mpiexec" -n "$2" "$driver" --status "$1" > status.out 2> status.err < /dev/null
  else
    "$driver" --status "$1" > status.out 2> status.err < /dev/null
  fi
  code=$?
  out=$(cat status.out)
  # (mpiexec adds its own lines about the failed ranks.)
  err=$(grep -v '^--------' status.err | grep -v '^\[' | grep '^tfenc-batch: ' || true)
  all_err=$(cat status.err)
}

for kind in pooled tokens scores sparse vectors int8 chunks; do
  status "$kind.h5"
  if [ "$code" -eq 0 ] && printf '%s\n' "$out" | grep -q '^state: complete' && [ -z "$all_err" ]; then
    ok "$kind.h5 as written: complete, exit status 0"
  else
    fail "$kind.h5 as written: exit status $code: $all_err $out"
  fi
done

"$python" "$srcdir/tests/inspect/damage.py" "$work" > cases.txt || { fail "damage.py"; exit 1; }
# Under mpiexec -n 2 too: one of each family.
under_mpi=" d_model-negative offsets-end-1e12 document_source-999 indices-order ranges-missing "
while IFS='|' read -r name expected pattern; do
  file=$work/damaged/$name.h5
  for ranks in "" 2; do
    if [ -n "$ranks" ]; then
      case $under_mpi in *" $name "*) ;; *) continue ;; esac
    fi
    status "$file" $ranks
    what="$name${ranks:+ (under mpiexec -n $ranks)}"
    if [ "$expected" -eq 3 ]; then
      if [ "$code" -eq 3 ] && [ -z "$all_err" ] && printf '%s\n' "$out" | grep -q '^state: unfinished'; then
        ok "$what: unfinished, exit status 3"
      else
        fail "$what: exit status $code, expected 3 (unfinished): $all_err"
      fi
      continue
    fi
    lines=$(printf '%s\n' "$err" | grep -c .)
    if [ "$code" -ne 1 ]; then
      fail "$what: exit status $code, expected 1: $(printf '%s\n' "$out" | head -n 2) $all_err"
    elif printf '%s\n' "$out" | grep -q '^state:'; then
      fail "$what: a report was printed: $(printf '%s\n' "$out" | head -n 2)"
    elif [ "$lines" -ne 1 ]; then
      fail "$what: $lines lines of tfenc-batch on stderr: $all_err"
    elif ! printf '%s\n' "$err" | grep -Eq -- "^tfenc-batch: $file: inconsistent: $pattern"; then
      fail "$what: the line '$err' does not match 'inconsistent: $pattern'"
    elif [ -z "$ranks" ] && [ "$err" != "$all_err" ]; then
      fail "$what: more on stderr than the one line: $all_err"
    else
      ok "$what: exit status 1: ${err#tfenc-batch: $file: }"
    fi
  done
done < cases.txt

echo "damaged: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
