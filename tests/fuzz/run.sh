#!/bin/sh
# Builds the libFuzzer targets (tests/fuzz/build.sh) and runs each until it
# has executed 100000 inputs or run 60 s, whichever comes first (fast targets
# stop early, slow ones still get a minute), starting from its seed corpus
# in tests/fuzz/corpus/TARGET/ (every input that once found a defect is
# there, so each run replays them all before it explores).
# --budget SECONDS instead gives all the targets together that much time
# (CI's way, tests/run-all.sh --fuzz): each target gets an equal share of
# what is left, so time a fast target did not need goes to the next.
# Fails if any target finds a crash, a leak, a timeout or a broken
# invariant; the input that triggered it is kept (path printed).
#
#   tests/fuzz/run.sh [--time SECONDS | --budget SECONDS] [--runs N] [--seed N]
#                     [--only TARGET] [--raw-hdf5] [CONFIGURED_BUILD_DIR]
#
# Defaults: 60 s, 100000 runs (--runs 0: no limit, fuzz for --time), seed 1
# (reproducible in CI; --seed 0 picks a random one), every target, the
# build/ tree of tests/run-all.sh.
# --raw-hdf5 also feeds raw bytes to HDF5 as corpus files: it finds crashes
# inside HDF5 1.10.8 itself, so it is for exploring, not for CI.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
seconds=60
budget=0
runs=100000
seed=1
only=""
while [ $# -gt 0 ]; do
  case $1 in
    --time) seconds=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --raw-hdf5) TFENC_FUZZ_RAW_HDF5=1; export TFENC_FUZZ_RAW_HDF5; shift ;;
    -*) echo "fuzz/run.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
configured=$(cd "${1:-$top/build}" && pwd) || exit 2
out="$configured/tests/fuzz"
sh "$top/tests/fuzz/build.sh" "$out" "$configured" || exit 1

# New inputs found during the run go to a scratch directory (the committed
# seeds stay as they are); findings go to $out/findings.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT INT TERM
mkdir -p "$out/findings" "$out/logs"
export LSAN_OPTIONS="suppressions=$top/tests/fuzz/lsan.supp:print_suppressions=0"
# UBSan findings must stop the run with a stack trace, as ASan's do.
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

passed=0
failed=0
targets=""
for seeds in "$top"/tests/fuzz/corpus/*/; do
  target=$(basename "$seeds")
  [ -z "$only" ] || [ "$only" = "$target" ] || continue
  targets="$targets $target"
done
budget_started=$(date +%s)
left=$(echo $targets | wc -w)
for target in $targets; do
  seeds="$top/tests/fuzz/corpus/$target/"
  if [ "$budget" -gt 0 ]; then
    # An equal share of the budget that is left, and at least a second.
    spent=$(( $(date +%s) - budget_started ))
    seconds=$(( (budget - spent) / left ))
    [ "$seconds" -ge 1 ] || seconds=1
  fi
  left=$((left - 1))
  mkdir -p "$scratch/$target"
  log="$out/logs/$target.log"
  # -timeout: one input taking 10 s is a hang. -rss_limit_mb: a runaway
  # allocation is a finding, not a swapped machine.
  started=$(date +%s)
  limit=""
  [ "$runs" -eq 0 ] || limit="-runs=$runs"
  "$out/fuzz_$target" -max_total_time="$seconds" $limit -seed="$seed" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$out/findings/$target-" \
    "$scratch/$target" "$seeds" > "$log" 2>&1
  code=$?
  took=$(( $(date +%s) - started ))
  executed=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  found=$(sed -n "s/^artifact_prefix=.*Test unit written to //p" "$log")
  # A target that stopped before either bound did not really fuzz.
  enough=0
  if [ -n "$executed" ] && { [ "$runs" -gt 0 ] && [ "$executed" -ge "$runs" ] || [ "$took" -ge "$seconds" ]; }; then
    enough=1
  fi
  if [ "$code" -eq 0 ] && [ -z "$found" ] && [ "$enough" -eq 1 ]; then
    passed=$((passed + 1))
    echo "ok   fuzz_$target: $executed executions in $took s, no finding ($(ls "$scratch/$target" | wc -l) new corpus inputs)"
  else
    failed=$((failed + 1))
    echo "FAIL fuzz_$target: exit $code after ${executed:-?} executions in $took s; input kept in ${found:-(none)}"
    grep -E 'ERROR|invariant broken|SUMMARY|^    #[0-9]+ ' "$log" | head -n 30 | sed 's/^/     /'
    echo "     full log: $log"
  fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
