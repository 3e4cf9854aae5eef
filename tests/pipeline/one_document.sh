#!/bin/sh
# One document, one vector: a document's row is bitwise the same whether it
# is encoded alone, among a few others, or inside the whole corpus, at any
# batch_tokens, window_documents, thread count and rank count, at fp32 (on
# OpenBLAS and, [model] fp32_products = onednn, on oneDNN) and bf16
# (core/matrix/matrix.c: every product of a linear map runs over
# blocks of one size, each on one thread; attention and the per-row steps
# see only their own sequence). The corpus is the bert-text example's
# sentences six times over, shuffled (make_inputs.py), so that documents
# meet other companions in each run. int8 adds a calibration, which is the
# corpus's own unless [model] calibration names a file: not tested here.
set -u
. "$(cd "$(dirname "$0")" && pwd)/common.sh"
work=$builddir/tests/data/generated/pipeline/one_document
failed=0

prepare_example bert-text "$work" || { echo "one_document: FAIL: cannot make the bert-text model"; exit 1; }
"$python" "$here/make_inputs.py" text "$work/corpus.txt" "$work/big.txt" 6 || exit 1
# A few documents of the corpus, alone and in a small file of their own:
# lines 1, 17, 100, 250 (1-based) of big.txt.
picked="1 17 100 250"
for line in $picked; do
  sed -n "${line}p" "$work/big.txt" > "$work/alone-$line.txt"
done
for line in $picked; do sed -n "${line}p" "$work/big.txt"; done > "$work/few.txt"

encode() { # encode RANKS OUTPUT INPUT SETTINGS...
  ranks=$1 out=$2 input=$3
  shift 3
  rm -f "$work/$out"
  (cd "$work" && timeout 300 "$mpiexec" -n "$ranks" "$driver" --quiet --set job.resume=false \
     --set "job.input=$input" --set "job.output=$out" "$@" job.ini) > "$work/run.err" 2>&1
}

# same_rows WHAT FILE ROWS OTHER OTHER_ROWS: rows ROWS (0-based, space
# separated) of FILE bitwise equal to rows OTHER_ROWS of OTHER.
same_rows() {
  if result=$("$python" - "$work/$2" "$3" "$work/$4" "$5" <<'PY'
import sys, h5py, numpy
a = h5py.File(sys.argv[1], "r")["embeddings"][...]
b = h5py.File(sys.argv[3], "r")["embeddings"][...]
rows_a = [int(r) for r in sys.argv[2].split()]
rows_b = [int(r) for r in sys.argv[4].split()]
differ = [(i, j) for i, j in zip(rows_a, rows_b) if not numpy.array_equal(a[i], b[j])]
if differ:
    i, j = differ[0]
    print("%d of %d rows differ (row %d against %d: largest difference %.3g)"
          % (len(differ), len(rows_a), i, j, float(numpy.abs(a[i] - b[j]).max())))
    sys.exit(1)
print("%d rows bitwise equal" % len(rows_a))
PY
  ); then
    echo "one_document: ok   $1: $result"
  else
    echo "one_document: FAIL $1: $result"
    failed=$((failed + 1))
  fi
}

zero_based=""
for line in $picked; do zero_based="$zero_based $((line - 1))"; done
for precision in fp32 fp32-onednn bf16; do
  if [ "$precision" = bf16 ] && ! encode 1 probe.h5 few.txt --set model.precision=bf16; then
    echo "one_document: FAIL bf16 job: $(head -n 1 "$work/run.err")"
    failed=$((failed + 1))
    continue
  fi
  if [ "$precision" = bf16 ] && grep -q 'fp32 runs instead' "$work/run.err"; then
    echo "one_document: ok   bf16 does not run on this CPU: its fp32 stands in, as tested above"
    continue
  fi
  p="--set model.precision=$precision"
  [ "$precision" = fp32-onednn ] && p="--set model.precision=fp32 --set model.fp32_products=onednn"
  # shellcheck disable=SC2086 # $p is two or four words
  encode 1 whole-$precision.h5 big.txt $p || { echo "one_document: FAIL $precision whole corpus: $(head -n 1 "$work/run.err")"; failed=$((failed + 1)); continue; }
  # shellcheck disable=SC2086
  if encode 1 few-$precision.h5 few.txt $p --set job.threads=1; then
    same_rows "$precision: the few documents in a file of their own, 1 thread" \
      whole-$precision.h5 "$zero_based" few-$precision.h5 "0 1 2 3"
  else
    echo "one_document: FAIL $precision few: $(head -n 1 "$work/run.err")"
    failed=$((failed + 1))
  fi
  for line in $picked; do
    # shellcheck disable=SC2086
    if encode 1 alone-$line-$precision.h5 alone-$line.txt $p --set job.threads=2; then
      same_rows "$precision: line $line alone, 2 threads" whole-$precision.h5 "$((line - 1))" \
        alone-$line-$precision.h5 0
    else
      echo "one_document: FAIL $precision line $line alone: $(head -n 1 "$work/run.err")"
      failed=$((failed + 1))
    fi
  done
  all=$(seq 0 $(( $(wc -l < "$work/big.txt") - 1 )) | tr '\n' ' ')
  # Other microbatches and windows, at 2 ranks with a thread each, and 1
  # rank with 2 threads (RANKS THREADS BATCH_TOKENS WINDOW): every row.
  for run in "2 1 64 37" "1 2 4096 1000"; do
    set -- $run
    what="batch_tokens $3, window_documents $4, $1 ranks x $2 threads"
    # shellcheck disable=SC2086
    if encode "$1" batches-$3-$precision.h5 big.txt $p --set job.batch_tokens="$3" \
         --set job.window_documents="$4" --set job.threads="$2"; then
      same_rows "$precision: $what" whole-$precision.h5 "$all" batches-$3-$precision.h5 "$all"
    else
      echo "one_document: FAIL $precision, $what: $(head -n 1 "$work/run.err")"
      failed=$((failed + 1))
    fi
  done
done

if [ "$failed" -eq 0 ]; then
  echo "one_document: every row its own"
else
  echo "one_document: $failed checks failed"
  exit 1
fi
