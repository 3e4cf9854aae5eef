#!/bin/sh
# What a run says about its work, against what it does:
#  - --dry-run counts the tokens the job will encode: with
#    long_documents = truncate each document after truncation, with
#    long_documents = chunk every chunk of a long document (its overlap and
#    special tokens included), with late_chunk every window of a document
#    longer than max_seq_len. The count must equal the tokens the real
#    job encodes (its summary, and the sum of the output's `lengths`), at
#    1 and 2 ranks, for truncate, chunk_pooling = mean and = none, and
#    late_chunk.
#  - the progress line counts finished documents (rows whose metadata the
#    writers have flushed, summed over every replica) with a percentage and
#    an ETA from that finished work: read while the job runs, every line's
#    count is at most what the file holds finished at that moment (read
#    after the line), the counts never go down, and the last line says N/N
#    (100%) with the tokens the summary reports. At 1 rank, 2 replicas, and
#    1 replica of 2 stages (rank 0 then writes nothing: the counts come from
#    the other rank), and after a SIGKILL, resumed (the count starts from
#    what the killed run finished). No timing is asserted.
set -u
. "$(cd "$(dirname "$0")" && pwd)/common.sh"
work=$builddir/tests/data/generated/pipeline/progress
failed=0

fail() {
  echo "progress: FAIL $*"
  failed=$((failed + 1))
}

prepare_example bert-text "$work" || { echo "progress: FAIL: cannot make the bert-text model"; exit 1; }
# Every fourth document joins 14 lines (about 150 tokens: three or four
# chunks of 64 with an overlap of 8); the others are single lines.
"$python" - "$work/corpus.txt" "$work/long.txt" <<'PY'
import sys
lines = [l.strip() for l in open(sys.argv[1], encoding="utf-8") if l.strip()]
with open(sys.argv[2], "w", encoding="utf-8") as out:
    for i in range(120):
        if i % 4 == 0:
            out.write(" ".join(lines[(i + k) % len(lines)] for k in range(14)) + "\n")
        else:
            out.write(lines[i % len(lines)] + "\n")
PY

# ---------------------------------------------------------------- dry run
# dry_run_case NAME SETTINGS...: the dry run's tokens at 1 and 2 ranks
# against the job's summary and the sum of its lengths.
dry_run_case() {
  name=$1
  shift
  for ranks in 1 2; do
    if ! (cd "$work" && "$mpiexec" -n "$ranks" "$driver" --dry-run --set job.input=long.txt \
            "$@" job.ini) > "$work/dry.out" 2> "$work/dry.err"; then
      fail "$name: the dry run at $ranks ranks failed: $(head -n 1 "$work/dry.err")"
      continue
    fi
    rm -f "$work/$name.h5"
    if ! (cd "$work" && "$mpiexec" -n "$ranks" "$driver" --set job.input=long.txt "$@" \
            --set job.output="$name.h5" job.ini) > "$work/run.out" 2> "$work/run.err"; then
      fail "$name: the job at $ranks ranks failed: $(head -n 1 "$work/run.err")"
      continue
    fi
    "$python" - "$work/dry.out" "$work/run.err" "$work/$name.h5" "$name at $ranks rank(s)" <<'PY' \
      || failed=$((failed + 1))
import re
import sys
import h5py
dry, summary, name = open(sys.argv[1]).read(), open(sys.argv[2]).read(), sys.argv[4]
counted = re.search(r"(\d+) tokens (?:to encode|after truncation)", dry)
wrote = re.search(r"wrote .*: (\d+) documents \(\d+ truncated\), (\d+) tokens;", summary)
with h5py.File(sys.argv[3], "r") as f:
    lengths = int(f["lengths"][:].sum())
problems = []
if counted is None or wrote is None:
    problems.append(f"no token count in the dry run or no summary: {dry!r} {summary!r}")
else:
    counted, encoded = int(counted.group(1)), int(wrote.group(2))
    if not counted == encoded == lengths:
        problems.append(f"the dry run counts {counted} tokens, the job encoded {encoded} "
                        f"(summary) and its lengths sum to {lengths}")
print(f"progress: dry run, {name}: " + ("; ".join(problems) if problems else
      f"{counted} tokens counted, encoded and in lengths"))
sys.exit(1 if problems else 0)
PY
  done
}
dry_run_case truncate
dry_run_case chunk-mean --set job.long_documents=chunk --set job.chunk_overlap=8
dry_run_case chunk-each --set job.long_documents=chunk --set job.chunk_overlap=8 \
  --set job.chunk_pooling=none
dry_run_case late-chunk --set job.long_documents=late_chunk --set job.chunk_tokens=20 \
  --set job.chunk_overlap=4 --set job.chunk_pooling=none

# A resume re-encodes the finished documents that share a microbatch with
# unfinished ones (chunks of long documents spread over several): they
# must not count twice. The whole chunked file with five documents marked
# unfinished again, as a killed run leaves them.
cp "$work/chunk-mean.h5" "$work/rewritten.h5"
"$python" - "$work/rewritten.h5" <<'PY'
import sys
import h5py
with h5py.File(sys.argv[1], "r+") as f:
    for i in (0, 4, 5, 57, 119):
        f["lengths"][i] = -1
        f["chunks"][i] = 0
        f["embeddings"][i] = 0
    f.attrs["complete"] = 0
PY
if (cd "$work" && "$mpiexec" -n 2 "$driver" --set job.input=long.txt --set job.long_documents=chunk       --set job.chunk_overlap=8 --set job.progress_interval=0.01 --set job.output=rewritten.h5       job.ini) > "$work/rewritten.out" 2> "$work/rewritten.err"; then
  last=$(grep "documents finished" "$work/rewritten.err" | tail -n 1)
  case $last in
    *" 120/120 documents finished (100.0%), "*) echo "progress: five documents resumed: $last" ;;
    *) fail "five documents resumed: the last line is '$last'" ;;
  esac
  if grep "documents finished" "$work/rewritten.err" | grep -qv " 11[5-9]/120 \| 120/120 "; then
    fail "five documents resumed: $(grep "documents finished" "$work/rewritten.err" | head -n 3)"
  fi
else
  fail "five documents resumed: $(head -n 1 "$work/rewritten.err")"
fi


# --------------------------------------------------------------- progress
# The test plugin's `pause` layer makes each microbatch last 40 ms whatever
# the machine's speed, so that a run of 2,500 short documents lasts a few
# seconds: the writers flush (and so finish documents) about once a second.
"$python" "$srcdir/tests/pipeline/make_inputs.py" text "$work/corpus.txt" "$work/many.txt" 50 || exit 1
TFENC_PLUGIN_PATH="$TFENC_PLUGIN_PATH:$builddir/tests/plugins/.libs"
export TFENC_PLUGIN_PATH
printf '\n[pause]\ntype = pause\nmilliseconds = 40\n' >> "$work/job.ini"

# watch NAME OUTPUT ERRFILE PID: follows the job's stderr while it runs;
# checks each progress line against the file as it is when the line is read.
watch() {
  "$python" - "$srcdir/tests/resume" "$@" <<'PY' || failed=$((failed + 1))
import os
import re
import sys
import time
sys.path.insert(0, sys.argv[1])
from progress import count  # noqa: E402  (reads the file as --status does)

name, output, errors, pid = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
line_pattern = re.compile(r"(\d+)/(\d+) documents(?: finished \(([0-9.]+)%\))?")


def running():
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


problems, seen, at = [], [], 0
while True:
    alive = running()
    with open(errors, encoding="utf-8", errors="replace") as f:
        f.seek(at)
        text = f.read()
    complete = text[:text.rfind("\n") + 1]
    at += len(complete.encode("utf-8"))
    for line in complete.splitlines():
        match = line_pattern.search(line)
        if match is None:
            continue
        done, total = int(match.group(1)), int(match.group(2))
        percent = float(match.group(3)) if match.group(3) is not None else None
        finished, _, _ = count(output)  # after the line was printed
        seen.append((done, total, percent, line))
        if done > finished:
            problems.append(f"'{line}' while the file held {finished} finished")
    if not alive:
        break
    time.sleep(0.01)
summary = re.search(r"wrote .*: \d+ documents \(\d+ truncated\), (\d+) tokens;",
                    open(errors).read())
if len(seen) < 2:
    problems.append(f"{len(seen)} progress lines: {open(errors).read()[-600:]!r}")
else:
    counts = [s[0] for s in seen]
    if any(b < a for a, b in zip(counts, counts[1:])):
        problems.append(f"the counts go down: {counts}")
    done, total, percent, last = seen[-1]
    if done != total or percent != 100.0:
        problems.append(f"the last line is '{last}'")
    tokens = re.search(r"documents finished \([0-9.]+%\), (\d+) tokens,", last)
    if summary is None or tokens is None or tokens.group(1) != summary.group(1):
        problems.append(f"the last line's tokens ({last}) are not the summary's "
                        f"({summary.group(1) if summary else 'no summary'})")
print(f"progress: {name}: " + ("; ".join(problems[:3]) if problems else
      f"{len(seen)} lines, each at most the file's finished count, the last "
      f"'{seen[-1][3].split(': ', 1)[-1]}'"))
sys.exit(1 if problems else 0)
PY
}

# progress_case NAME RANKS STAGES [OUTPUT]: a run watched from start to end.
progress_case() {
  name=$1 ranks=$2 stages=$3 out=${4:-$1.h5}
  [ $# -ge 4 ] || rm -f "$work/$out"
  (cd "$work" && exec "$mpiexec" -n "$ranks" "$driver" --set job.input=many.txt \
     --set job.progress_interval=0.05 --set job.window_documents=128 \
     --set job.pipeline_stages="$stages" --set job.output="$out" job.ini) \
    > "$work/$name.out" 2> "$work/$name.err" &
  pid=$!
  watch "$name" "$work/$out" "$work/$name.err" "$pid"
  wait "$pid" || fail "$name: exit status $?: $(grep -v documents "$work/$name.err" | head -n 2)"
}
progress_case one-rank 1 1
progress_case two-replicas 2 1
progress_case two-stages 2 2

# Killed part-way, then resumed: the count starts where the file stands.
rm -f "$work/killed.h5"
(cd "$work" && exec "$mpiexec" -n 2 "$driver" --quiet --set job.input=many.txt \
   --set job.window_documents=128 --set job.output=killed.h5 job.ini) \
  > "$work/killed.out" 2> "$work/killed.err" &
kill_part_way $! "$work/killed.h5" 0.3
read -r done total complete <<EOF
$("$python" "$srcdir/tests/resume/progress.py" count "$work/killed.h5")
EOF
if [ "$complete" = 1 ] || [ "$done" -eq 0 ]; then
  fail "the killed run left $done of $total documents finished (complete = $complete)"
else
  progress_case resumed 2 1 killed.h5
  first=$(sed -n 's/.*[: ]\([0-9]*\)\/[0-9]* documents.*/\1/p' "$work/resumed.err" | head -n 1)
  if [ -z "$first" ] || [ "$first" -lt "$done" ]; then
    fail "resumed from $done finished documents, the first progress line says ${first:-nothing}"
  fi
fi

[ "$failed" -eq 0 ] && echo "progress: the dry run counts what the job encodes; the progress line counts finished documents"
exit "$failed"
