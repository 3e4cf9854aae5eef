#!/bin/sh
# Paths chosen by measurement (core/run/path_choice.h), end to end: the
# dry run times the attention's two paths and prints the choice; a job's
# file records it (attribute path_choices) and --status shows it; a job
# killed part-way and resumed takes the recorded choice, never measuring
# again, even when the measurement would now choose the other path
# (TFENC_PATH_FAVOUR forces the outcome, whatever this machine's speeds),
# and ends bitwise equal to an uninterrupted run on that path; a key that
# contradicts the file is one error line; [model] paths = FILE takes an
# earlier file's choices; 2 ranks run rank 0's choice (their rows equal
# 1 rank's, bitwise). Nothing here assumes which path is faster here.
set -u
. "$(cd "$(dirname "$0")" && pwd)/common.sh"
work=$builddir/tests/data/generated/path_choice
failed=0
# The suite's environment takes the defaults unmeasured; this test measures.
unset TFENC_PATHS TFENC_PATH_FAVOUR
prepare_example bert-text "$work" || { echo "path_choice: FAIL: cannot make a model"; exit 1; }
"$python" "$srcdir/tests/pipeline/make_inputs.py" text "$work/corpus.txt" "$work/big.txt" 10 || exit 1
# The test plugin's pause layer makes each microbatch take a while, so
# that a kill lands part-way (tests/resume/kill_resume.sh).
TFENC_PLUGIN_PATH="$TFENC_PLUGIN_PATH:$builddir/tests/plugins/.libs"
export TFENC_PLUGIN_PATH
printf '\n[pause]\ntype = pause\nmilliseconds = 150\n' >> "$work/job.ini"
attention=encoder.attention.kernel

fail() {
  echo "path_choice: FAIL $*"
  failed=$((failed + 1))
}

# batch NAME SETTINGS...: one rank, stderr in $work/NAME.err.
batch() {
  name=$1
  shift
  (cd "$work" && "$mpiexec" -n 1 "$driver" --set job.input=big.txt "$@" job.ini) \
    > "$work/$name.out" 2> "$work/$name.err"
}

# expect NAME PATTERN: NAME's stderr has exactly one paths line, matching
# PATTERN (and so has a dry run's plan, on stdout).
expect() {
  lines=$(grep -c "paths: " "$work/$1.err")
  if grep -q "^corpus: " "$work/$1.out"; then
    grep -Eq "^$2" "$work/$1.out" || lines=0
  fi
  if [ "$lines" -eq 1 ] && grep -Eq "$2" "$work/$1.err"; then
    echo "path_choice: ok   $1: $(grep 'paths: ' "$work/$1.err")"
  else
    fail "$1: expected one paths line matching '$2' in:"
    cat "$work/$1.err" "$work/$1.out"
  fi
}

recorded() { # recorded FILE: the file's path_choices attribute
  "$python" -c 'import sys, h5py; print(h5py.File(sys.argv[1], "r").attrs["path_choices"])' "$1" \
    2>/dev/null | tr -d '\n'
}

compare() { # compare BASELINE OTHER WHAT
  result=$("$python" "$srcdir/tests/pipeline/compare_layouts.py" "$1" "$2") \
    || fail "$3: $result"
}

# The dry run measures and prints; the measurement's outcome is forced
# either way (the other path is not assumed slower or faster here).
batch dry --dry-run || fail "the dry run failed"
expect dry "paths: $attention=(fused|products) \(measured on [0-9]+ sample tokens: fused .* us CPU \(.* wall\), products .* us CPU \(.* wall\) per token"
for path in fused products; do
  TFENC_PATH_FAVOUR=$attention=$path batch "dry-$path" --dry-run || fail "the dry run ($path) failed"
  expect "dry-$path" "paths: $attention=$path \(measured"
done

# Uninterrupted runs on each path, pinned by the key: the file records it.
for path in fused products; do
  batch "whole-$path" --set job.output="whole-$path.h5" --set job.resume=false \
    --set "$attention=$path" || fail "the $path run failed: $(tail -1 "$work/whole-$path.err")"
  expect "whole-$path" "paths: $attention=$path \(the job's key\)"
  [ "$(recorded "$work/whole-$path.h5")" = "$attention=$path" ] \
    || fail "whole-$path.h5 records '$(recorded "$work/whole-$path.h5")', not $attention=$path"
done
# The paths differ in their bits here (else the pinning below proves nothing).
if "$python" "$srcdir/tests/pipeline/compare_layouts.py" "$work/whole-fused.h5" \
     "$work/whole-products.h5" >/dev/null 2>&1; then
  fail "the fused and products paths gave the same bits: nothing to pin"
fi
(cd "$work" && "$driver" --status job.ini --set job.output=whole-products.h5) > "$work/status.out" 2>&1
grep -q "^paths: $attention=products (a file's bits follow them" "$work/status.out" \
  || { fail "--status does not show the file's paths:"; cat "$work/status.out"; }

# A job measured into products, killed part-way at 2 ranks, resumed at 2
# ranks with the measurement forced to fused: it keeps products and ends
# bitwise equal to the 1-rank products run (so both ranks ran products).
rm -f "$work/killed.h5"
(cd "$work" && TFENC_PATH_FAVOUR=$attention=products exec "$mpiexec" -n 2 "$driver" \
   --set job.input=big.txt --set job.output=killed.h5 job.ini) > "$work/killed.out" 2> "$work/killed.err" &
pid=$!
kill_part_way "$pid" "$work/killed.h5" 0.3
done_total=$("$python" "$srcdir/tests/resume/progress.py" count "$work/killed.h5")
case $done_total in
  *" 1") fail "the kill came after the run completed ($done_total): nothing resumed" ;;
esac
expect killed "paths: $attention=products \(measured"
[ "$(recorded "$work/killed.h5")" = "$attention=products" ] \
  || fail "killed.h5 records '$(recorded "$work/killed.h5")'"
(cd "$work" && TFENC_PATH_FAVOUR=$attention=fused "$mpiexec" -n 2 "$driver" \
   --set job.input=big.txt --set job.output=killed.h5 job.ini) > "$work/resumed.out" 2> "$work/resumed.err" \
  || fail "the resume failed: $(tail -1 "$work/resumed.err")"
expect resumed "paths: $attention=products \(as recorded in the file this run resumes"
compare "$work/whole-products.h5" "$work/killed.h5" "resumed at 2 ranks against 1 rank's products"

# A key against the file's record: one line, non-zero, the file untouched.
before=$(sha256sum < "$work/killed.h5")
if batch contradiction --set job.output=killed.h5 --set "$attention=fused"; then
  fail "a key against the file's record was accepted"
fi
grep -q "kernel = fused contradicts the file this run resumes (killed.h5), which records $attention=products" \
  "$work/contradiction.err" || { fail "no contradiction line:"; cat "$work/contradiction.err"; }
[ "$(grep -c "^tfenc-batch: " "$work/contradiction.err")" -eq 1 ] \
  || fail "the contradiction took more than one line"
[ "$(sha256sum < "$work/killed.h5")" = "$before" ] || fail "the refused run changed killed.h5"

# Another job takes the file's choices: [model] paths = FILE.
TFENC_PATH_FAVOUR=$attention=fused batch given --set job.output=given.h5 --set job.resume=false \
  --set model.paths=whole-products.h5 || fail "the [model] paths run failed: $(tail -1 "$work/given.err")"
expect given "paths: $attention=products \(as recorded in \[model\] paths whole-products.h5\)"
compare "$work/whole-products.h5" "$work/given.h5" "[model] paths"

# TFENC_PATHS=default: the default, unmeasured, shown by the plan only.
TFENC_PATHS=default TFENC_PATH_FAVOUR=$attention=products batch unmeasured --dry-run \
  || fail "the unmeasured dry run failed"
grep -Eq "^paths: $attention=(fused|products) \(the default: TFENC_PATHS=default\)" \
  "$work/unmeasured.out" || { fail "unmeasured: no default in the plan:"; cat "$work/unmeasured.out"; }
! grep -q "paths: " "$work/unmeasured.err" || fail "unmeasured: a paths line on stderr"

[ "$failed" -eq 0 ] && rm -rf "$work"
echo "path_choice.sh: $failed failed"
[ "$failed" -eq 0 ]
