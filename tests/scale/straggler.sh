#!/bin/sh
# The straggler benchmark (prints figures, asserts no time): two
# ranks, one of them slowed to half speed, encode one corpus.
#   - dynamic windows (the default): replicas take the next window when free;
#   - static shares, for comparison, as tfenc's shares were before: each
#     replica encodes one half, so the job takes the slowed rank's time alone
#     over 2 (computed from that run: the pause layer's work is exact, and
#     windows now taper, so no window size reproduces two fixed halves).
# The ideal is total work / sum of the ranks' speeds, from each rank's time
# alone: 1 / (1/T_fast + 1/T_slow). Static shares make it about 1.5x that
# (the slow rank's half takes T_slow / 2 = T_fast); dynamic windows should
# come within a window's time of it (the target: <= 1.15x).
#
# The work is the test plugin's `pause` layer, which sleeps in proportion
# to the tokens of each microbatch (TFENC_TEST_SLOWDOWN=2 doubles it for the
# rank the launcher gives it to), so the speeds are known exactly and the
# figures do not depend on what else the machine is doing.
#
# usage: sh tests/scale/straggler.sh [BUILD_DIR] [DOCUMENTS]
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
documents=${2:-3000}
abs_top_builddir=$build abs_top_srcdir=$top
export abs_top_builddir abs_top_srcdir
. "$top/tests/pipeline/common.sh"
TFENC_PLUGIN_PATH="$build/plugins/.libs:$build/tests/plugins/.libs"
export TFENC_PLUGIN_PATH
out=$build/bench-scale/straggler
prepare_example bert-text "$out" >/dev/null
cd "$out"
"$python" "$top/tests/pipeline/make_inputs.py" text corpus.txt big.txt \
  $(( (documents + $(wc -l < corpus.txt) - 1) / $(wc -l < corpus.txt) ))
printf '\n[pause]\ntype = pause\nmilliseconds = 0\nmicroseconds_per_token = 500\n' >> job.ini

# seconds COMMAND...: the encoding time of one run, from its summary.
seconds() {
  rm -f out.h5
  "$@" 2> run.log
  sed -n 's/.*s in all, \([0-9.]*\) s encoding.*/\1/p' run.log
}
job="--set job.input=big.txt --set job.output=out.h5 --set job.resume=false job.ini"
# shellcheck disable=SC2086
fast=$(seconds "$driver" $job)
# shellcheck disable=SC2086
slow=$(TFENC_TEST_SLOWDOWN=2 seconds "$driver" $job)
both() { # both WINDOW_DOCUMENTS: the slow rank first, then the normal one
  # shellcheck disable=SC2086
  seconds "$mpiexec" -n 1 env TFENC_TEST_SLOWDOWN=2 "$driver" --set job.window_documents="$1" $job : \
    -n 1 "$driver" --set job.window_documents="$1" $job
}
dynamic=$(both 128)
per_rank=$(grep 'rank [01] (replica' run.log | sed 's/^tfenc-batch:  */  /')
static=$(awk -v s="$slow" 'BEGIN { printf "%.3f", s / 2 }')
awk -v f="$fast" -v s="$slow" -v d="$dynamic" -v st="$static" -v n="$documents" 'BEGIN {
  ideal = 1 / (1 / f + 1 / s)
  printf "straggler: %d documents; one rank alone %.2f s, the slowed rank alone %.2f s (%.2fx)\n", n, f, s, s / f
  printf "straggler: ideal (total work / sum of speeds)      %7.2f s\n", ideal
  printf "straggler: dynamic windows of 128 documents        %7.2f s  = %.2fx ideal (target <= 1.15)\n", d, d / ideal
  printf "straggler: static halves (slowed rank alone / 2)    %7.2f s  = %.2fx ideal\n", st, st / ideal
}'
echo "straggler: per rank with dynamic windows:"
echo "$per_rank"
