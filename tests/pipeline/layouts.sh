#!/bin/sh
# The layout matrix: the same job under mpiexec -n 1, 2,
# 3, 4, 5 and 8 ranks, with 1 and 2 pipeline stages where the rank count
# allows (and 2 x 4), must give the single-rank output bit for bit
# (compare_layouts.py says why it can), for a pooled job over a text corpus
# and a per-token job over an HDF5 token-id corpus; and a corpus smaller than
# the number of replicas (some replicas get no window) must work too. Small
# windows (window_documents) make many more windows than replicas, so the
# replicas really share the work out dynamically. (Under the sanitizers,
# one layout of each kind: see below.)
set -u
. "$(cd "$(dirname "$0")" && pwd)/common.sh"
work=$builddir/tests/data/generated/pipeline/layouts
failed=0

prepare_example bert-text "$work/pooled" || { echo "layouts: FAIL: cannot make the bert-text model"; exit 1; }
prepare_example original-postnorm "$work/tokens" || { echo "layouts: FAIL: cannot make the postnorm model"; exit 1; }
"$python" "$here/make_inputs.py" text "$work/pooled/corpus.txt" "$work/pooled/big.txt" 6 || exit 1
head -n 3 "$work/pooled/corpus.txt" > "$work/pooled/tiny.txt"
"$python" "$here/make_inputs.py" hdf5 "$work/tokens/big.h5" 300 1000 128 7 || exit 1

# run_matrix NAME DIR SETTINGS...: every layout, then the comparison.
run_matrix() {
  name=$1 dir=$2
  shift 2
  outputs=""
  for layout in $layouts; do
    ranks=${layout%:*} stages=${layout#*:}
    out=$name-$ranks-$stages.h5
    rm -f "$dir/$out"
    if ! (cd "$dir" && timeout 300 "$mpiexec" -n "$ranks" "$driver" --quiet "$@" \
            --set job.pipeline_stages="$stages" --set job.output="$out" job.ini); then
      echo "layouts: FAIL $name at $ranks ranks x $stages stages: tfenc-batch failed"
      failed=$((failed + 1))
      continue
    fi
    outputs="$outputs $dir/$out"
  done
  echo "layouts: $name (baseline: 1 rank):"
  # shellcheck disable=SC2086
  "$python" "$here/compare_layouts.py" $outputs || failed=$((failed + 1))
}

# The dry run times every step on a sample of the corpus; its wall-time
# estimate is the slowest stage's measured time per token times a
# replica's tokens. No timing is asserted: that the figures it prints add
# up, and that each step was timed.
(cd "$work/pooled" && "$mpiexec" -n 8 "$driver" --dry-run --set job.input=big.txt \
   --set job.pipeline_stages=4 job.ini) >"$work/dry-run-2x4.txt"
sed 's/^/layouts: dry-run 2x4: /' "$work/dry-run-2x4.txt" | head -n 12
"$python" - "$work/dry-run-2x4.txt" <<'PY' || failed=$((failed + 1))
import re
import sys

text = open(sys.argv[1]).read()
problems = []
stages = [[]]
for line in text.splitlines():
    if re.match(r"\s+stage \d+: steps", line):
        stages.append([])
    step = re.search(r"step\s+\d+\s+\S+\s+\S+\s+[0-9.]+ MFLOP/token(\s+([0-9.]+) us/token)?", line)
    if step:
        if step.group(2) is None:
            problems.append(f"a step without its measured time: {line.strip()}")
        else:
            stages[-1].append(float(step.group(2)) * 1e-6)
stages = [s for s in stages if s]
tokens = int(re.search(r"(\d+) tokens to encode", text).group(1))
replicas = int(re.search(r"= (\d+) data-parallel replica", text).group(1))
wall = re.search(r"estimated wall time: ([0-9.]+) s for the encoding \(each step timed on "
                 r"(\d+) tokens sampled", text)
if len(stages) != 4:
    problems.append(f"{len(stages)} stages of timed steps, expected 4")
if wall is None:
    problems.append("no measured wall-time estimate")
elif stages:
    expected = tokens / replicas * max(sum(s) for s in stages)
    if not 0 < int(wall.group(2)) <= tokens:
        problems.append(f"timed on {wall.group(2)} tokens of {tokens}")
    # us/token printed to 1e-3 and the estimate to 3 digits: 1% covers both
    if not abs(float(wall.group(1)) - expected) <= 0.01 * expected + 1e-4:
        problems.append(f"estimate {wall.group(1)} s, the printed steps give {expected:.2f} s")
print("layouts: dry-run 2x4: " + ("; ".join(problems) if problems else
      f"every step timed, the estimate is the slowest stage's ({wall.group(1)} s)"))
sys.exit(1 if problems else 0)
PY

# Threads that outnumber a node's cores make the job slower than the dry
# run's estimate (rank 0's steps timed alone): it warns with the node's
# figures. Two unbound ranks with more threads each than the machine has
# CPUs must draw the warning on any machine; one rank of one thread never.
cpus=$(getconf _NPROCESSORS_ONLN)
threads=$((cpus + 1))
warning=$(cd "$work/pooled" && "$mpiexec" -n 2 --bind-to none "$driver" --dry-run \
            --set job.input=big.txt --set job.threads=$threads job.ini | grep '^warning: ')
case $warning in
  "warning: 2 ranks of one node run $((2 * threads)) threads on the "*" cores they may use: "*)
    echo "layouts: dry run, 2 ranks x $threads threads: $warning" ;;
  *) echo "layouts: FAIL 2 ranks x $threads threads on $cpus CPUs: no oversubscription warning" \
       "from the dry run (${warning:-none})"
     failed=$((failed + 1)) ;;
esac
warning=$(cd "$work/pooled" && "$driver" --dry-run --set job.input=big.txt --set job.threads=1 \
            job.ini | grep '^warning: ')
if [ -n "$warning" ]; then
  echo "layouts: FAIL one rank of one thread: $warning"
  failed=$((failed + 1))
fi

# Under the sanitizers, which look for memory errors rather than unequal
# bits, one layout of each kind: one rank, replicas alone (2:1, and an odd
# count 3:1), stages alone (2:2), both (4:2) and the most stages (8:4); 8
# ASan-built ranks a launch made this test the sanitizer suite's costliest.
all_layouts="1:1 2:1 2:2 3:1 4:1 4:2 5:1 8:1 8:2 8:4"
precision_layouts="1:1 2:1 3:1 4:2"
tiny_layouts="1:1 8:2 8:4"
if [ -n "${TFENC_SANITIZER_BUILD:-}" ]; then
  all_layouts="1:1 2:1 2:2 3:1 4:2 8:4"
  precision_layouts="1:1 4:2"
  tiny_layouts="1:1 8:4"
elif [ -n "${TFENC_ONLY_UNSANITIZED_CASES:-}" ]; then
  # The sanitizer build runs the layouts above (tests/run-all.sh
  # --sanitizers): the rest, each against its one-rank file.
  all_layouts="1:1 4:1 5:1 8:1 8:2"
  precision_layouts="1:1 2:1 3:1"
  tiny_layouts="1:1 8:2"
fi
layouts=$all_layouts
run_matrix pooled "$work/pooled" --set job.input=big.txt --set job.batch_tokens=64 \
  --set job.window_documents=40
run_matrix tokens "$work/tokens" --set job.input=big.h5 --set job.batch_tokens=128 \
  --set job.window_documents=16
# bf16 and int8 run on oneDNN (or fall back to what this CPU runs), with
# the weights' packed copies shared by the ranks of the node, while the
# single-rank baseline keeps its own: the same rule holds. The int8 gate's
# bar is low enough for the random test model.
layouts=$precision_layouts
for precision in bf16 int8; do
  run_matrix "pooled-$precision" "$work/pooled" --set job.input=big.txt \
    --set job.batch_tokens=64 --set job.window_documents=40 \
    --set model.precision=$precision --set model.min_cosine=0.99
done
# The same weights as 2 heads of 32: on a CPU with AVX512_BF16, bf16 and
# int8 attention then run the fused kernel on bf16 operands (head_dim a
# multiple of 32), whose packing of keys and values per group of
# sequences must not depend on the layout either.
for precision in bf16 int8; do
  run_matrix "pooled-$precision-heads32" "$work/pooled" --set job.input=big.txt \
    --set job.batch_tokens=64 --set job.window_documents=40 \
    --set model.precision=$precision --set model.min_cosine=0.99 \
    --set encoder.attention.n_heads=2
done
# [job] share_weights = false: every rank its own copy (as the dry run
# says), the same vectors.
for share in true false; do
  line=$(cd "$work/pooled" && "$mpiexec" -n 2 "$driver" --dry-run --set job.input=big.txt \
           --set job.share_weights=$share job.ini | grep '^memory: ')
  case "$share:$line" in
    "true:"*"one copy per node ("*"shared by rank 0's node's 2 ranks)"*) ;;
    "false:"*"a copy per rank;"*) ;;
    *) echo "layouts: FAIL share_weights = $share, the dry run says: $line"
       failed=$((failed + 1)) ;;
  esac
done
layouts="1:1 3:1 2:2"
run_matrix pooled-unshared "$work/pooled" --set job.input=big.txt --set job.batch_tokens=64 \
  --set job.window_documents=40 --set model.precision=bf16 --set job.share_weights=false
layouts=$tiny_layouts
run_matrix tiny "$work/pooled" --set job.input=tiny.txt --set job.batch_tokens=64

if [ "$failed" -ne 0 ]; then
  echo "layouts: FAIL ($failed)"
  exit 1
fi
echo "layouts: every layout matches the single-rank output"
