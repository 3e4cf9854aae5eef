#!/bin/sh
# A disk that fills up in the middle of a job. The job must stop
# with one line naming the output file and the system's reason ("No space
# left on device"), a non-zero exit, and the documents it finished kept in
# the file; once space is freed, running it again resumes and ends with the
# uninterrupted run's file. A small tmpfs is the disk: mounted in a private
# mount namespace (unshare), so the test needs no privileges beyond a user
# namespace and leaves nothing mounted. A disk too small from the start is
# refused before any work.
set -u
. "$(cd "$(dirname "$0")/../pipeline" && pwd)/common.sh"
work=$builddir/tests/data/generated/resume/disk-full

prepare_example original-postnorm "$work" || { echo "disk_full: FAIL: cannot make the model"; exit 1; }
# At least 10 ms per microbatch (the test plugin's `pause` layer), so the
# disk fills while the job still has seconds of work left.
TFENC_PLUGIN_PATH="$TFENC_PLUGIN_PATH:$builddir/tests/plugins/.libs"
export TFENC_PLUGIN_PATH
printf '\n[pause]\ntype = pause\nmilliseconds = 10\n' >> "$work/job.ini"
# 3000 documents: their per-token output (~50 MB) fills the disk in well
# under the job's remaining seconds, and the test encodes the corpus twice
# (the baseline, then the stopped run and its resume). The sanitizer build
# encodes 5-10 times slower: 1000 documents last as long there.
documents=3000
[ -z "${TFENC_SANITIZER_BUILD:-}" ] || documents=1000
"$python" "$srcdir/tests/pipeline/make_inputs.py" hdf5 "$work/big.h5" "$documents" 1000 128 5 || exit 1
(cd "$work" && "$driver" --quiet --set job.input=big.h5 --set job.output=baseline.h5 job.ini) \
  || { echo "disk_full: FAIL: the uninterrupted run failed"; exit 1; }
size_kib=$(( $(du -k --apparent-size "$work/baseline.h5" | cut -f1) + 4096 ))

if ! in_private_mounts true 2>/dev/null; then
  echo "disk_full: FAIL: cannot make a private mount namespace (unshare --mount as root, else unshare -rm); as a user, enable user namespaces (sysctl kernel.unprivileged_userns_clone=1) to run this test"
  exit 1
fi

export work driver python size_kib srcdir TFENC_PLUGIN_PATH
in_private_mounts sh -eu <<'INNER'
disk=$work/disk
mkdir -p "$disk"
mount -t tmpfs -o size=${size_kib}k tfenc-test "$disk"
cd "$work"

# Too small from the start: refused before any work.
dd if=/dev/zero of="$disk/filler" bs=1024 count=$((size_kib - 1024)) 2>/dev/null || true
status=0
"$driver" --quiet --set job.input=big.h5 --set job.output="$disk/out.h5" job.ini 2> small.err || status=$?
if [ $status -eq 0 ] || ! grep -q "out.h5: the output needs .* MiB but its file system has .* MiB free" small.err; then
  echo "disk_full: FAIL: a disk too small was not refused up front: $(cat small.err)"
  exit 1
fi
echo "disk_full: ok   refused up front: $(cat small.err)"
rm -f "$disk/filler" "$disk/out.h5"

# Full in the middle: fill the disk once the first documents are finished.
"$driver" --quiet --set job.input=big.h5 --set job.output="$disk/out.h5" job.ini 2> full.err &
pid=$!
"$python" "$srcdir/tests/resume/progress.py" wait "$disk/out.h5" 0 "$pid"
dd if=/dev/zero of="$disk/filler" bs=65536 2>/dev/null || true
status=0
wait $pid || status=$?
message=$(cat full.err)
if [ $status -eq 0 ]; then
  echo "disk_full: FAIL: the job finished although the disk filled (it was too fast: status 0)"
  exit 1
fi
case $message in
  *out.h5*"No space left on device"*) echo "disk_full: ok   stopped with status $status: $message" | cut -c1-400 ;;
  *) echo "disk_full: FAIL: the message does not name the file and the reason: $message"; exit 1 ;;
esac
[ "$(printf '%s\n' "$message" | wc -l)" -eq 1 ] || { echo "disk_full: FAIL: more than one line"; exit 1; }
done=$("$python" "$srcdir/tests/resume/progress.py" count "$disk/out.h5")
echo "disk_full: finished documents kept, of all, complete: $done"
case $done in 0\ *|*\ 1) echo "disk_full: FAIL: expected finished documents kept and complete = 0"; exit 1 ;; esac

# Space again: the same command resumes and completes.
rm -f "$disk/filler"
"$driver" --quiet --set job.input=big.h5 --set job.output="$disk/out.h5" job.ini 2> resume.err \
  || { echo "disk_full: FAIL: resuming failed: $(cat resume.err)"; exit 1; }
cp "$disk/out.h5" resumed.h5
INNER
status=$?
[ $status -eq 0 ] || { echo "disk_full: FAIL"; exit 1; }
"$python" "$srcdir/tests/pipeline/compare_layouts.py" "$work/baseline.h5" "$work/resumed.h5" | sed 's/^/disk_full: /'
result=$("$python" "$srcdir/tests/pipeline/compare_layouts.py" "$work/baseline.h5" "$work/resumed.h5")
case $result in
  *"bitwise equal"*) echo "disk_full: the resumed file is the uninterrupted run's" ;;
  *) echo "disk_full: FAIL: the resumed file differs"; exit 1 ;;
esac
