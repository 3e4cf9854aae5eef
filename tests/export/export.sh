#!/bin/sh
# tfenc-export (drivers/export/): real outputs of every kind, made by the
# bert-text example's encoder over a corpus of three JSON Lines shards with
# ids (tests/export/make_outputs.py adds random heads: a classifier, a
# SPLADE head, a multi-vector projection), exported as Parquet and checked
# by tests/export/check_parquet.py against the HDF5 datasets read with h5py:
# every column of every row, the metadata, the split at several
# --rows-per-file values, and the directory read by pandas, Polars and
# DuckDB. Pooled rows in every output_dtype (float32, float16, bfloat16,
# int8 and uint8 with their ranges, binary, ubinary), chunked documents
# (chunk_pooling none and mean), per-token states and multi-vector rows
# with their token ids, scores with their labels, sparse rows with their
# vocabulary; 2-rank files; files larger than the export's memory, read and
# written a row group at a time; files of jobs SIGKILLed part-way (only their
# finished documents, and of multi-vector files only those whose end the
# file records, the others counted in one line). Bad input (a file of an
# unknown kind, not a tfenc output, missing, not HDF5, cut short, a
# directory, an unfinished sparse file; a DIR that exists and is not empty,
# or is a file; bad arguments): one line naming the file, a non-zero exit,
# and nothing written. A build without Arrow: the one line saying so.
set -u
. "$(cd "$(dirname "$0")/../pipeline" && pwd)/common.sh"
work=$builddir/tests/data/generated/export
export_program=$builddir/drivers/tfenc-export
: "${TFENC_VENV_PYTHON:=${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python}"
check="$here/check_parquet.py"
failed=0
ok() { echo "export: ok   $*"; }
fail() {
  echo "export: FAIL $*"
  failed=$((failed + 1))
}
finish() {
  if [ "$failed" -ne 0 ]; then
    echo "export: FAIL ($failed)"
    exit 1
  fi
  echo "export: PASS"
  exit 0
}
rm -rf "$work" && mkdir -p "$work" || exit 1

# A build without Apache Arrow: the program is there and says so.
if ! grep -q '^#define HAVE_PARQUET 1' "$builddir/config.h"; then
  "$export_program" "$work/any.h5" --parquet "$work/out" > "$work/none.out" 2> "$work/none.err"
  status=$?
  if [ "$status" -ne 0 ] && [ "$(wc -l < "$work/none.err")" -eq 1 ] && [ ! -s "$work/none.out" ] \
      && grep -q "built without Apache Arrow" "$work/none.err" && [ ! -e "$work/out" ]; then
    ok "without Arrow: one line, exit $status: $(cat "$work/none.err")"
  else
    fail "without Arrow: exit $status, '$(cat "$work/none.err")'"
  fi
  finish
fi

if ! "$TFENC_VENV_PYTHON" -c "import pyarrow, pandas, polars, duckdb" 2>/dev/null; then
  echo "export: FAIL: $TFENC_VENV_PYTHON cannot import pyarrow, pandas, polars and duckdb (run tests/setup-python-venv)"
  exit 1
fi
models=$work/model
prepare_example bert-text "$models" || { echo "export: FAIL: cannot make the bert-text model"; exit 1; }
"$python" "$here/make_outputs.py" "$models" 4 || { echo "export: FAIL: cannot make the inputs"; exit 1; }

# encode RANKS JOB OUTPUT [--set ...]: the job over the shards, with ids.
encode() {
  run_ranks=$1 run_job=$2 run_out=$3
  shift 3
  rm -f "$models/$run_out"
  (cd "$models" && timeout 300 "$mpiexec" -n "$run_ranks" "$driver" --quiet --set job.input=corpus \
     --set job.id_field=id --set job.window_documents=40 --set job.batch_tokens=256 \
     --set "job.output=$run_out" "$@" "$run_job")
}

# exported FILE ROWS_PER_FILE LABEL [--readers]: exports FILE (in $models)
# into a new directory and checks it.
exported() {
  out=$work/parquet-$3
  if "$export_program" "$models/$1" --parquet "$out" --rows-per-file "$2" \
      > "$work/$3.out" 2> "$work/$3.err"; then
    "$TFENC_VENV_PYTHON" "$check" "$models/$1" "$out" "$2" "$3" ${4:+"$4"} || failed=$((failed + 1))
  else
    fail "$3: tfenc-export failed: $(cat "$work/$3.err")"
  fi
}

# Every kind, complete, at 1 rank; pandas, Polars and DuckDB read each.
encode 1 pooled.ini pooled.h5 && exported pooled.h5 70 pooled --readers \
  || fail "the pooled job failed"
encode 1 tokens.ini tokens.h5 --set job.output_ids=true && exported tokens.h5 64 tokens --readers \
  || fail "the tokens job failed"
encode 1 scores.ini scores.h5 && exported scores.h5 1000 scores --readers \
  || fail "the scores job failed"
encode 1 sparse.ini sparse.h5 && exported sparse.h5 99 sparse --readers \
  || fail "the sparse job failed"
encode 1 vectors.ini vectors.h5 --set job.output_ids=true --set job.skip_punctuation=true \
  && exported vectors.h5 33 vectors --readers || fail "the vectors job failed"
for pooling in none mean; do
  encode 1 pooled.ini "chunks-$pooling.h5" --set job.max_seq_len=16 --set job.long_documents=chunk \
    --set "job.chunk_pooling=$pooling" && exported "chunks-$pooling.h5" 50 "chunks-$pooling" --readers \
    || fail "the chunk_pooling = $pooling job failed"
done
for dtype in float16 bfloat16 int8 uint8 binary ubinary; do
  encode 1 pooled.ini "$dtype.h5" --set "job.output_dtype=$dtype" && exported "$dtype.h5" 64 "$dtype" \
    || fail "the $dtype job failed"
done
# 2 ranks write the same file, exported the same.
encode 2 vectors.ini vectors-2.h5 --set job.output_ids=true --set job.skip_punctuation=true \
  && exported vectors-2.h5 1000 vectors-2-ranks || fail "the 2-rank vectors job failed"
# Rows per file: one document each, a prime, exactly the corpus, the default.
for rows in 1 7 200 1000000; do
  exported pooled.h5 "$rows" "rows-per-file-$rows"
done
if [ "$(ls "$work/parquet-rows-per-file-1" | wc -l)" -eq 200 ] \
    && grep -q "wrote 200 of 200 documents of .*pooled.h5 (pooled) to 200 files in" "$work/rows-per-file-1.out"; then
  ok "--rows-per-file 1: 200 files, and the summary says so"
else
  fail "--rows-per-file 1: $(ls "$work/parquet-rows-per-file-1" | wc -l) files: $(cat "$work/rows-per-file-1.out")"
fi

# Streaming: files larger than the export's memory (tests/export/enlarge.py
# repeats a file's documents): a million pooled rows in row groups of at
# most 65,536 documents, several to a file, with a peak resident set far
# below the file's size; 40,000 documents of per-token states (about 200
# MB) in row groups cut by bytes, not by documents.
if [ -x /usr/bin/time ]; then
  "$python" "$here/enlarge.py" "$models/pooled.h5" "$models/large-pooled.h5" 5000 \
    && "$python" "$here/enlarge.py" "$models/tokens.h5" "$models/large-tokens.h5" 200 \
    || fail "cannot make the large files"
  for kind in pooled tokens; do
    out=$work/parquet-large-$kind
    if /usr/bin/time -f '%M' -o "$work/large-$kind.rss" "$export_program" "$models/large-$kind.h5" \
        --parquet "$out" --rows-per-file 400000 > "$work/large-$kind.out" 2>&1; then
      "$TFENC_VENV_PYTHON" "$check" "$models/large-$kind.h5" "$out" 400000 "large-$kind" \
        || failed=$((failed + 1))
      groups=$("$TFENC_VENV_PYTHON" -c "
import glob, sys, pyarrow.parquet as pq
files = [pq.ParquetFile(p).metadata for p in sorted(glob.glob(sys.argv[1] + '/*.parquet'))]
print(sum(m.num_row_groups for m in files), max(m.row_group(g).num_rows for m in files for g in range(m.num_row_groups)))
" "$out")
      rss=$(tail -n 1 "$work/large-$kind.rss")
      bytes=$(wc -c < "$models/large-$kind.h5")
      echo "export: large $kind: $((bytes >> 20)) MiB file, peak resident set $((rss >> 10)) MiB, (row groups, most rows in one): $groups"
    else
      fail "large $kind: $(cat "$work/large-$kind.out")"
      continue
    fi
    if [ "$kind" = pooled ]; then
      # 1,000,000 rows: 16 row groups of 65,536 rows at most, in 3 files.
      [ "${groups%% *}" -ge 16 ] && [ "${groups##* }" -eq 65536 ] \
        && ok "large pooled: row groups of 65,536 documents, several a file" \
        || fail "large pooled: row groups (count, largest) $groups"
      # The memory bound in the normal build: AddressSanitizer's shadow
      # memory and quarantine of freed blocks inflate the resident set
      # (417 MiB here), so the sanitizer build streams the file and checks
      # its columns, and leaves the bound to the normal build's run.
      if [ -n "${TFENC_SANITIZER_BUILD:-}" ]; then
        :
      elif [ "$rss" -lt $((bytes / 1024 * 3 / 4)) ]; then
        ok "large pooled: the export's peak resident set ($((rss >> 10)) MiB) is well below the file's $((bytes >> 20)) MiB"
      else
        fail "large pooled: peak resident set $((rss >> 10)) MiB for a file of $((bytes >> 20)) MiB"
      fi
    else
      # About 32 MiB of rows a group: far fewer than 65,536 documents.
      [ "${groups%% *}" -ge 5 ] && [ "${groups##* }" -lt 20000 ] \
        && ok "large tokens: row groups cut by bytes" \
        || fail "large tokens: row groups (count, largest) $groups"
    fi
    rm -rf "$out" "$models/large-$kind.h5"
  done
fi

# Jobs SIGKILLed part-way by 2 ranks (whose finished documents are then not
# one run): only the finished documents, each one whole. The test plugin's
# pause layer makes each microbatch take a while; it goes before the head,
# which ends the model.
TFENC_PLUGIN_PATH="$TFENC_PLUGIN_PATH:$builddir/tests/plugins/.libs"
export TFENC_PLUGIN_PATH
# (chunks: each chunk's vector, whose runs end where the chunk counts say)
for kind in pooled tokens vectors chunks; do
  job=$kind file_kind=$kind settings=""
  [ "$kind" = vectors ] && settings="--set job.skip_punctuation=true"
  [ "$kind" = chunks ] && job=pooled file_kind=pooled \
    settings="--set job.max_seq_len=16 --set job.long_documents=chunk --set job.chunk_pooling=none"
  sed 's/^\[\(pooling\|colbert\)\]$/[pause]\ntype = pause\nmilliseconds = 120\n\n[\1]/' \
    "$models/$job.ini" > "$models/paused-$kind.ini"
  [ "$kind" = tokens ] && printf '\n[pause]\ntype = pause\nmilliseconds = 120\n' >> "$models/paused-$kind.ini"
  rm -f "$models/killed-$kind.h5"
  # shellcheck disable=SC2086 # the settings are words
  (cd "$models" && exec "$mpiexec" -n 2 "$driver" --quiet --set job.input=corpus --set job.id_field=id \
     --set job.window_documents=20 --set job.batch_tokens=128 --set "job.output=killed-$kind.h5" \
     $settings "paused-$kind.ini") > "$work/killed-$kind.log" 2>&1 &
  pid=$!
  kill_part_way "$pid" "$models/killed-$kind.h5" 0.4
  left=$("$python" "$srcdir/tests/resume/progress.py" count "$models/killed-$kind.h5")
  case "$left" in
    "200 200 1"|"0 0 0") fail "$kind: the kill did not land part-way ($left)"; continue ;;
  esac
  echo "export: $kind killed with $left (finished, total, complete) in the file"
  exported "killed-$kind.h5" 25 "killed-$kind" --readers
  if grep -q "wrote .* of 200 documents of .*killed-$kind.h5 ($file_kind, unfinished)" "$work/killed-$kind.out"; then
    ok "$kind: the summary says the file is unfinished: $(cat "$work/killed-$kind.out")"
  else
    fail "$kind: the summary of an unfinished file: $(cat "$work/killed-$kind.out")"
  fi
  if [ "$kind" = vectors ] && [ -s "$work/killed-$kind.err" ]; then
    if [ "$(wc -l < "$work/killed-$kind.err")" -eq 1 ] \
        && grep -q "killed-vectors.h5: [0-9]* finished documents left out" "$work/killed-$kind.err"; then
      ok "vectors: the finished documents without a recorded end are named in one line"
    else
      fail "vectors: $(cat "$work/killed-$kind.err")"
    fi
  fi
done

# Bad input: one line naming the file, exit 1, stdout empty, and no
# directory left behind.
refused() { # LABEL EXPECTED-PATTERN ARGUMENTS...
  label=$1 pattern=$2
  shift 2
  "$export_program" "$@" > "$work/refused.out" 2> "$work/refused.err"
  status=$?
  if [ "$status" -eq 0 ]; then
    fail "$label: accepted"
  elif [ "$(wc -l < "$work/refused.err")" -ne 1 ] || [ -s "$work/refused.out" ]; then
    fail "$label: not one line: $(cat "$work/refused.err" "$work/refused.out")"
  elif ! grep -q -- "$pattern" "$work/refused.err"; then
    fail "$label: '$(cat "$work/refused.err")' does not match '$pattern'"
  else
    ok "$label: exit $status: $(cat "$work/refused.err")"
  fi
}
nothing_left() { # LABEL DIR
  if [ -e "$2" ]; then fail "$1: $2 was made"; else ok "$1: nothing written"; fi
}
bad=$work/bad
mkdir -p "$bad"
# another_kind SOURCE COPY KIND: a copy of SOURCE whose output_kind says KIND.
another_kind() {
  cp "$1" "$2" && "$python" -c "
import sys, h5py
with h5py.File(sys.argv[1], 'a') as f:
    f.attrs['output_kind'] = sys.argv[2]
" "$2" "$3"
}
another_kind "$models/pooled.h5" "$bad/unknown-kind.h5" late_chunks
refused "unknown output kind" "unknown-kind.h5: inconsistent: attribute 'output_kind' is 'late_chunks', expected one of" \
  "$bad/unknown-kind.h5" --parquet "$bad/out"
nothing_left "unknown output kind" "$bad/out"
"$python" -c "
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], 'w') as f:
    f['embeddings'] = np.zeros((3, 4), np.float32)
" "$bad/foreign.h5"
refused "not a tfenc output" "foreign.h5: not a tfenc output: it has no attribute 'tfenc_version'" \
  "$bad/foreign.h5" --parquet "$bad/out"
nothing_left "not a tfenc output" "$bad/out"
refused "a missing file" "missing.h5: No such file or directory" "$bad/missing.h5" --parquet "$bad/out"
echo "not HDF5" > "$bad/text.h5"
refused "a text file" "text.h5: not an HDF5 file" "$bad/text.h5" --parquet "$bad/out"
refused "a directory" "$bad: is a directory" "$bad" --parquet "$bad/out"
head -c 20000 "$models/pooled.h5" > "$bad/cut.h5"
refused "a file cut short" "cut.h5: " "$bad/cut.h5" --parquet "$bad/out"
nothing_left "a file cut short" "$bad/out"
if [ "$(id -u)" -ne 0 ]; then
  cp "$models/pooled.h5" "$bad/unreadable.h5" && chmod 000 "$bad/unreadable.h5"
  refused "an unreadable file" "unreadable.h5: Permission denied" "$bad/unreadable.h5" --parquet "$bad/out"
fi
another_kind "$models/killed-pooled.h5" "$bad/unfinished-sparse.h5" sparse
refused "an unfinished sparse file" "unfinished-sparse.h5: a sparse output's rows reach the file when its job completes" \
  "$bad/unfinished-sparse.h5" --parquet "$bad/out"
# A corpus file whose name is not UTF-8 (a file name may hold any byte):
# Parquet's strings cannot hold its path.
mkdir -p "$models/latin1" && cp "$models/corpus/shard-0.jsonl" "$models/latin1/" \
  && cp "$models/corpus/shard-2.jsonl" "$models/latin1/caf$(printf '\351').jsonl"
if encode 1 pooled.ini latin1.h5 --set job.input=latin1; then
  refused "a corpus path that is not UTF-8" "latin1.h5: file 0 of corpus_shards has a path that is not UTF-8 text" \
    "$models/latin1.h5" --parquet "$bad/out"
  nothing_left "a corpus path that is not UTF-8" "$bad/out"
else
  fail "the job over a file name that is not UTF-8 failed"
fi
# A directory that holds something is never written into, nor emptied.
mkdir -p "$bad/full" && echo "keep me" > "$bad/full/notes.txt"
refused "a DIR that is not empty" "full: exists and is not empty (it holds notes.txt)" \
  "$models/pooled.h5" --parquet "$bad/full"
if [ "$(ls "$bad/full")" = notes.txt ] && [ "$(cat "$bad/full/notes.txt")" = "keep me" ]; then
  ok "a DIR that is not empty: left as it was"
else
  fail "a DIR that is not empty: now holds $(ls -a "$bad/full")"
fi
mkdir -p "$bad/hidden" && touch "$bad/hidden/.part-00000.parquet.partial"
refused "a DIR holding a hidden file" "hidden: exists and is not empty" "$models/pooled.h5" \
  --parquet "$bad/hidden"
echo "a file" > "$bad/plain"
refused "a DIR that is a file" "plain: exists and is not a directory" "$models/pooled.h5" \
  --parquet "$bad/plain"
mkdir -p "$bad/empty"
if "$export_program" "$models/pooled.h5" --parquet "$bad/empty" > /dev/null 2>&1 \
    && [ "$(ls "$bad/empty")" = part-00000.parquet ]; then
  ok "an empty DIR is written into"
else
  fail "an empty DIR: $(ls -a "$bad/empty")"
fi
refused "--rows-per-file 0" "--rows-per-file '0' is not a whole number of documents" \
  "$models/pooled.h5" --parquet "$bad/out" --rows-per-file 0
refused "--rows-per-file 1.5" "--rows-per-file '1.5' is not a whole number" \
  "$models/pooled.h5" --parquet "$bad/out" --rows-per-file 1.5
refused "no --parquet" "no --parquet DIR given" "$models/pooled.h5" --rows-per-file 2
nothing_left "bad arguments" "$bad/out"

finish
