#!/bin/sh
# The sparse rows' logs (OUTPUT.sparse-*) and the end of a sparse job
# (core/output/sparse.c, the finish in core/run/run.c), on the random-weight
# BertForMaskedLM of tests/sparse/sparse.py at 1 and 2 ranks:
# - a disk that fills up as the CSR is written (a small tmpfs in a private
#   mount namespace, as tests/resume/disk_full.sh): one line naming the file
#   and the reason, a non-zero exit on every rank, no crash at
#   MPI_Finalize, the file left incomplete (complete = 0) and resumable;
#   with room again, the resume completes it bit for bit as an
#   uninterrupted run, also when the logs were removed or damaged
#   meanwhile;
# - a killed run whose log is damaged (64 bytes XORed in the middle of a
#   log, or over its start): the resume drops the damaged rows, says
#   which log and byte, encodes their documents again, and ends with the
#   uninterrupted run's file;
# - a job whose output is another output's log (running or killed) is
#   refused in one line and the log survives;
# - a sparse head that hands over an infinity or a NaN stops the job in one
#   line naming the layer and the document, as the dense rows' check does.
set -u
. "$(cd "$(dirname "$0")/../pipeline" && pwd)/common.sh"
. "$here/checkpoints.sh"
work=$builddir/tests/data/generated/sparse-logs
failed=0

fail() {
  echo "logs: FAIL $*"
  failed=$((failed + 1))
}

# The same checkpoints as tests/sparse/sparse.sh.
make_checkpoints logs "$work" || exit 1
corpus=$work/sentences.txt
model=$work/bert
"$import" "$model" -o "$model/model.h5" --job "$model/job.ini" --sparse > "$work/import.out" 2>&1 \
  || { echo "logs: FAIL: tfenc-import --sparse: $(cat "$work/import.out")"; exit 1; }
TFENC_PLUGIN_PATH="$TFENC_PLUGIN_PATH:$builddir/tests/plugins/.libs"
export TFENC_PLUGIN_PATH

# run RANKS JOB OUTPUT [--set ...]: the job on the 40 sentences, one
# thread a rank, in windows of 8 (several microbatches, so that a kill
# lands between them).
run() {
  run_ranks=$1 run_job=$2 run_out=$3
  shift 3
  (cd "$model" && exec timeout 300 "$mpiexec" -n "$run_ranks" "$driver" --quiet \
     --set "job.input=$corpus" --set job.window_documents=8 --set job.batch_tokens=512 \
     --set job.threads=1 --set "job.output=$run_out" "$@" "$run_job")
}

# What a failed job said, without mpiexec's own words (its boxed report of
# a rank that exited non-zero, its "[host:pid] ..." log lines, and the
# "[warn] Epoll ..." of the event library inside Open MPI's runtime when a
# rank's connection closes as the job ends, which a loaded machine adds):
# the lines left must be the one error line.
said() {
  awk '/^--------------------+$/ { boxed = !boxed; next }
       /^\[[^]]*:[0-9]+\] / { next }
       /^\[warn\] Epoll / { next }
       !boxed && NF' "$1"
}

one_line() { # one_line LABEL STDERR EXPECTED...: exactly one line, holding each EXPECTED
  label=$1 file=$2
  shift 2
  lines=$(said "$file")
  if [ "$(printf '%s\n' "$lines" | grep -c .)" -ne 1 ]; then
    fail "$label: not one line: $(printf '%s' "$lines" | head -n 5 | tr '\n' '|')"
    return 1
  fi
  for expected in "$@"; do
    case $lines in
      *"$expected"*) ;;
      *) fail "$label: the line does not say '$expected': $lines"; return 1 ;;
    esac
  done
  echo "logs: ok   $label: $lines" | cut -c1-300
}

# xor_bytes FILE OFFSET: 64 bytes of FILE from OFFSET turned into others.
xor_bytes() {
  "$python" - "$1" "$2" <<'EOF'
import sys
path, offset = sys.argv[1], int(sys.argv[2])
with open(path, "r+b") as f:
    f.seek(offset)
    data = bytearray(f.read(64))
    f.seek(offset)
    f.write(bytes(b ^ 0x5A for b in data))
EOF
}

# The largest log beside OUTPUT.
largest_log() {
  ls -S "$1".sparse-* 2>/dev/null | head -n 1
}

run 1 job.ini baseline.h5 > "$work/baseline.out" 2>&1 \
  || { echo "logs: FAIL: the uninterrupted run failed: $(cat "$work/baseline.out")"; exit 1; }
baseline=$model/baseline.h5

# ----------------------------------------------------------- a full disk
# The disk holds the job's rows and logs but not the CSR at the end: half
# the finished file's size on top of it (the CSR and the vocabulary are
# nearly all of the file, the logs as large as the CSR).
size_kib=$(( $(du -k --apparent-size "$baseline" | cut -f1) * 3 / 2 ))
room_kib=$(( size_kib * 4 ))
if ! in_private_mounts true 2>/dev/null; then
  fail "cannot make a private mount namespace (unshare --mount as root, else unshare -rm); as a user, enable user namespaces (sysctl kernel.unprivileged_userns_clone=1) to run this test"
else
  for ranks in 1 2; do
    disk=$work/disk-$ranks
    mkdir -p "$disk"
    export work model corpus driver mpiexec python srcdir size_kib room_kib disk ranks
    in_private_mounts sh -u > "$work/disk-$ranks.out" 2>&1 <<'INNER'
mount -t tmpfs -o size=${size_kib}k tfenc-test "$disk" || exit 1
cd "$model"
encode() {
  timeout 300 "$mpiexec" -n "$ranks" "$driver" --quiet --set "job.input=$corpus" \
    --set job.window_documents=8 --set job.batch_tokens=512 --set job.threads=1 \
    --set "job.output=$disk/out.h5" job.ini
}
encode 2> "$work/full-$ranks.err"
echo "status: $?"
"$python" "$srcdir/tests/resume/progress.py" count "$disk/out.h5" | sed 's/^/left: /'
ls "$disk" | sed 's/^/file: /'
# Room again: the same command resumes. Meanwhile, with 1 rank the logs
# are removed (every document is encoded again), with 2 a log is damaged
# (the middle of the largest: its documents are encoded again).
mount -o remount,size=${room_kib}k "$disk" || exit 1
if [ "$ranks" -eq 1 ]; then
  rm -f "$disk"/out.h5.sparse-*
else
  log=$(ls -S "$disk"/out.h5.sparse-* | head -n 1)
  "$python" -c "
import sys
path = sys.argv[1]
with open(path, 'r+b') as f:
    f.seek(0, 2)
    offset = f.tell() // 2
    f.seek(offset)
    data = bytearray(f.read(64))
    f.seek(offset)
    f.write(bytes(b ^ 0x5A for b in data))" "$log"
fi
encode 2> "$work/room-$ranks.err"
echo "resumed: $?"
cp "$disk/out.h5" "$work/disk-$ranks.h5"
ls "$disk" | sed 's/^/after: /'
INNER
    out=$work/disk-$ranks.out
    status=$(sed -n 's/^status: //p' "$out")
    if [ -z "$status" ]; then
      fail "$ranks ranks: the disk could not be made: $(cat "$out")"
      continue
    fi
    [ "$status" -ne 0 ] || fail "$ranks ranks, full disk: exit status 0"
    one_line "$ranks ranks, full disk" "$work/full-$ranks.err" "out.h5" "No space left on device"
    left=$(sed -n 's/^left: //p' "$out")
    [ "$left" = "40 40 0" ] \
      || fail "$ranks ranks, full disk: expected every document finished and complete = 0, found '$left'"
    grep -q "^file: out.h5.sparse-" "$out" || fail "$ranks ranks, full disk: the logs are gone"
    resumed=$(sed -n 's/^resumed: //p' "$out")
    if [ "$resumed" != 0 ]; then
      fail "$ranks ranks: the resume with room again failed: $(cat "$work/room-$ranks.err")"
      continue
    fi
    if [ "$ranks" -eq 2 ]; then
      grep -q "out.h5.sparse-.*: damaged at byte [0-9]*.*encoded again" "$work/room-$ranks.err" \
        || fail "2 ranks: the resume does not name the damaged log: $(cat "$work/room-$ranks.err")"
    fi
    grep -q "^after: out.h5.sparse-" "$out" && fail "$ranks ranks: the logs stay beside the completed file"
    "$TFENC_VENV_PYTHON" "$script" same "$baseline" "$work/disk-$ranks.h5" > "$work/same.out" 2>&1 \
      && echo "logs: ok   $ranks ranks: the resumed file is the uninterrupted run's" \
      || fail "$ranks ranks, full disk then resumed: $(cat "$work/same.out")"
  done
fi

# ---------------------------------------------- a killed run's damaged log
# The test plugin's pause layer before the head makes each microbatch last,
# so that the kill lands part-way: windows of 2 documents, 20 pauses of a
# second, because the job refused in between (a sanitizer build on a
# loaded machine takes seconds to start) must not outlast the killed one.
sed 's/^\[head\]$/[pause]\ntype = pause\nmilliseconds = 1000\n\n[head]/' "$model/job.ini" \
  > "$model/paused.ini"
for case in "2 middle 1" "1 start 2"; do
  set -- $case
  ranks=$1 where=$2 resume_ranks=$3
  out=killed-$ranks.h5
  rm -f "$model/$out" "$model/$out".sparse-*
  # exec: $pid's children are the ranks (tests/sparse/sparse.sh).
  (cd "$model" && exec "$mpiexec" -n "$ranks" "$driver" --quiet --set "job.input=$corpus" \
     --set job.window_documents=2 --set job.batch_tokens=512 --set job.threads=1 \
     --set "job.output=$out" paused.ini) > "$work/killed.out" 2>&1 &
  pid=$!
  "$python" "$srcdir/tests/resume/progress.py" wait "$model/$out" 0.1 "$pid"
  # Another job whose output is this running job's log: refused, the log kept.
  log=$(largest_log "$model/$out")
  if [ -n "$log" ]; then
    run 1 job.ini "$log" --set job.resume=false > /dev/null 2> "$work/alias.err" \
      && fail "$ranks ranks: a job whose output is a running job's log was accepted"
    one_line "$ranks ranks: output = a running job's log" "$work/alias.err" "sparse rows' log" \
      "refusing to overwrite it"
  else
    fail "$ranks ranks: no log beside the running job's file"
  fi
  kill_part_way "$pid" "$model/$out" 0.3
  left=$("$python" "$srcdir/tests/resume/progress.py" count "$model/$out")
  case "$left" in
    "40 40 1"|"0 0 0"|"40 40 0") fail "$ranks ranks: the kill did not land part-way ($left)"; continue ;;
  esac
  # The same refusal once the job is gone (the log waits for a resume).
  log=$(largest_log "$model/$out")
  run 1 job.ini "$log" > /dev/null 2> "$work/alias.err" \
    && fail "$ranks ranks: a job whose output is a killed job's log was accepted"
  one_line "$ranks ranks: output = a killed job's log" "$work/alias.err" "$log" "sparse rows' log"
  size=$(wc -c < "$log")
  if [ "$where" = middle ]; then
    xor_bytes "$log" $((size / 2))
  else
    xor_bytes "$log" 0
  fi
  echo "logs: killed at $ranks ranks with $left (finished, total, complete); 64 bytes of $(basename "$log") ($size bytes) XORed at its $where"
  if run "$resume_ranks" paused.ini "$out" --set job.window_documents=2 \
      > "$work/resumed.out" 2>&1; then
    grep -q "$(basename "$log"): damaged at byte [0-9]* (.*encoded again" "$work/resumed.out" \
      || fail "$ranks ranks: the resume does not name the damaged log and byte: $(cat "$work/resumed.out")"
    "$TFENC_VENV_PYTHON" "$script" same "$baseline" "$model/$out" > "$work/same.out" 2>&1 \
      && echo "logs: ok   killed at $ranks ranks, damaged, resumed at $resume_ranks: the uninterrupted run's file" \
      || fail "$ranks ranks, damaged log, resumed at $resume_ranks ranks: $(cat "$work/same.out")"
  else
    fail "$ranks ranks: the resume after the damage failed: $(tail -n 3 "$work/resumed.out")"
  fi
done

# ------------------------------------------- non-finite sparse values
# The test plugin's sparse_overflow head (tests/plugins/arithmetic.c): 1.0
# at each token of a document, and an infinity (or a NaN) at the token
# "zebra", which only the corpus's document 3 holds.
zebra=$(($(grep -n -x zebra "$model/vocab.txt" | cut -d: -f1) - 1))
{ head -n 3 "$corpus"; echo "A zebra grazes by the river."; sed -n 4,9p "$corpus"; } > "$work/zebra.txt"
for value in infinity NaN; do
  nan=false
  [ "$value" = NaN ] && nan=true
  awk -v zebra="$zebra" -v nan="$nan" '
    /^\[head\]$/ { print; print "type = sparse_overflow"; print "on_token = " zebra; print "nan = " nan; head = 1; next }
    /^\[/ { head = 0 }
    !head { print }' "$model/job.ini" > "$model/overflow.ini"
  for ranks in 1 2; do
    rm -f "$work/overflow.h5"
    (cd "$model" && timeout 300 "$mpiexec" -n "$ranks" "$driver" --quiet \
       --set "job.input=$work/zebra.txt" --set job.threads=1 --set job.batch_tokens=512 \
       --set "job.output=$work/overflow.h5" overflow.ini) > /dev/null 2> "$work/overflow.err" \
      && fail "$ranks ranks: a sparse $value was written with exit status 0"
    one_line "$ranks ranks: a sparse $value" "$work/overflow.err" "document 3 (0-based)" \
      "layer head (sparse_overflow) made a non-finite sparse value ($value at column $zebra)" \
      "stopped before writing it"
  done
done

if [ "$failed" -eq 0 ]; then
  echo "logs: all checks passed"
  exit 0
fi
exit 1
