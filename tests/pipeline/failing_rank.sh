#!/bin/sh
# A layer that fails on one rank (the `fail` test
# plugin, tripping on a token only the corpus's last document holds, so on
# whichever replica takes the last window) must end the whole job promptly
# at every layout, with a non-zero exit and that rank's message naming the
# rank, and leave no rank hanging. The trap sits first in the model (the first stage fails) or last
# (the last stage fails, while earlier stages may be blocked sending to it).
set -u
. "$(cd "$(dirname "$0")" && pwd)/common.sh"
work=$builddir/tests/data/generated/pipeline/failing
TFENC_PLUGIN_PATH="$TFENC_PLUGIN_PATH:$builddir/tests/plugins/.libs"
export TFENC_PLUGIN_PATH
failed=0
trap_id=999

prepare_example original-postnorm "$work" || { echo "failing_rank: FAIL: cannot make the model"; exit 1; }
"$python" "$here/make_inputs.py" hdf5 "$work/trap.h5" 200 1000 128 3 "$trap_id" || exit 1

# The trap before the first layer, and after the last one.
trap_section="[trap]
type = fail
on_token = $trap_id
"
awk -v trap="$trap_section" '/^\[embeddings\]/ { printf "%s\n", trap } { print }' \
  "$work/job.ini" > "$work/trap-first.ini"
{ cat "$work/job.ini"; printf '\n%s' "$trap_section"; } > "$work/trap-last.ini"

for where in first last; do
  job=trap-$where.ini
  for layout in $layouts; do
    ranks=${layout%:*} stages=${layout#*:}
    replicas=$((ranks / stages))
    # The trap's stage, from the layout the dry run prints.
    stage=$(cd "$work" && "$mpiexec" -n "$ranks" "$driver" --dry-run --set job.input=trap.h5 \
              --set job.pipeline_stages="$stages" "$job" \
            | awk '/^  stage [0-9]+:/ { s = $2; sub(":", "", s) } / trap +fail / { print (s == "" ? 0 : s) }')
    # Replicas take windows as they become free: any replica's rank at the
    # trap's stage may be the one.
    stage=${stage:-0}
    rm -f "$work/out.h5"
    start=$(date +%s)
    (cd "$work" && timeout 120 "$mpiexec" -n "$ranks" "$driver" --quiet --set job.input=trap.h5 \
       --set job.batch_tokens=128 --set job.pipeline_stages="$stages" --set job.output=out.h5 \
       "$job") > "$work/stdout" 2> "$work/stderr"
    status=$?
    seconds=$(( $(date +%s) - start ))
    what="trap $where at $ranks ranks x $stages stages (expect a rank of stage $stage)"
    message=$(grep -m 1 'failing as asked' "$work/stderr")
    rank=$(printf '%s\n' "$message" | sed -n 's/^tfenc-batch: rank \([0-9]*\): .*/\1/p')
    if [ "$status" -eq 124 ]; then
      echo "failing_rank: FAIL $what: still running after 120 s (a rank hangs)"
      failed=$((failed + 1))
    elif [ "$status" -eq 0 ]; then
      echo "failing_rank: FAIL $what: exit status 0"
      failed=$((failed + 1))
    elif [ "$ranks" -gt 1 ] && { [ -z "$rank" ] || [ $((rank % stages)) -ne "$stage" ] ||
         ! printf '%s\n' "$message" | grep -q "layer trap (fail): token $trap_id seen"; }; then
      echo "failing_rank: FAIL $what: no message from that rank; stderr was:"
      sed 's/^/    /' "$work/stderr" | head -n 8
      failed=$((failed + 1))
    elif [ "$ranks" -eq 1 ] && ! printf '%s\n' "$message" | grep -q "^tfenc-batch: layer trap (fail): token $trap_id seen"; then
      echo "failing_rank: FAIL $what: unexpected message: $(head -n 3 "$work/stderr")"
      failed=$((failed + 1))
    else
      echo "failing_rank: ok   $what: exit $status in ${seconds} s: $message"
    fi
  done
done

if [ "$failed" -ne 0 ]; then
  echo "failing_rank: FAIL ($failed)"
  exit 1
fi
echo "failing_rank: every layout ended promptly with the failing rank's message"
