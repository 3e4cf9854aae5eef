#!/bin/sh
# What a run says about its work, against what it does:
#  - --dry-run counts the tokens the job will encode: with
#    long_documents = truncate each document after truncation, with
#    long_documents = chunk every chunk of a long document (its overlap and
#    special tokens included). The count must equal the tokens the real
#    job encodes (its summary, and the sum of the output's `lengths`), at
#    1 and 2 ranks, for truncate, chunk_pooling = mean and = none.
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

[ "$failed" -eq 0 ] && echo "progress: the dry run counts what the job encodes"
exit "$failed"
