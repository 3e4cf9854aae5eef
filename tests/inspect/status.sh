#!/bin/sh
# tfenc-batch --status OUT.h5 (core/output/inspect.c, drivers/batch/status.c) on
# the files a user meets, written by 1- and 2-rank jobs:
#   - a file being written by a running job: read without a lock conflict
#     (a lone writer holds HDF5's exclusive lock), unfinished, its count of
#     finished documents at least what an independent h5py reader saw
#     before, and the job still finishes;
#   - that job's complete file: exit 0, every fact of the report checked
#     against the job (documents, weights checksum, precision, layout, job
#     file, settings), no resume command;
#   - a file left by a job killed with SIGKILL: exit 3, the finished count
#     equal to h5py's, and the printed resume command, run as printed, ends
#     with the file the uninterrupted run wrote (bitwise: same layout);
#     at 2 ranks the job ran with resume = false, which the command undoes;
#   - the same files as older tfenc versions wrote them (without this
#     version's attributes, and before job_settings existed): each says
#     what it cannot tell, and precision falls back to the job settings;
#   - a job stopped by SIGTERM and resumed: one run summary per run (stopped,
#     then finished), their tokens adding up to the file's lengths;
#   - --status --json on the complete, killed and resumed files: one JSON
#     object whose every field is what h5py reads (status_json.py);
#   - a foreign HDF5 file, a text file and a missing file: exit 1, one line
#     (with --json too); --json without --status refused.
# The status runs themselves run alone and under mpiexec -n 2 (one report).
set -u
. "$(cd "$(dirname "$0")/../pipeline" && pwd)/common.sh"
work=$builddir/tests/data/generated/inspect
failed=0
fail() {
  echo "status: FAIL $*"
  failed=$((failed + 1))
}
ok() { echo "status: ok   $*"; }

prepare_example bert-text "$work/job" || { echo "status: FAIL: cannot make a model"; exit 1; }
"$python" "$srcdir/tests/pipeline/make_inputs.py" text "$work/job/corpus.txt" "$work/job/big.txt" 60 \
  || exit 1
# The test plugin's `pause` layer (it leaves the activations alone) makes
# each microbatch last a while, so that a job runs for seconds and the
# status can be asked part-way.
TFENC_PLUGIN_PATH="$TFENC_PLUGIN_PATH:$builddir/tests/plugins/.libs"
export TFENC_PLUGIN_PATH
printf '\n[pause]\ntype = pause\nmilliseconds = 40\n' >> "$work/job/job.ini"
weights_sha256=$(sha256sum "$work/job/model.h5" | cut -d' ' -f1)
directory=$(cd "$work/job" && pwd -P)
job_path=$directory/job.ini

# The resume command names tfenc-batch and mpirun as a user types them.
mkdir -p "$work/bin"
ln -sf "$driver" "$work/bin/tfenc-batch"
cat > "$work/bin/mpirun" <<EOF
#!/bin/sh
exec "$mpiexec" "\$@"
EOF
chmod +x "$work/bin/mpirun"
PATH=$work/bin:$PATH
export PATH

# status FILE [RANKS]: runs --status (under mpiexec -n RANKS when given);
# sets $code and $report.
status() {
  if [ -n "${2:-}" ]; then
    report=$("$mpiexec" -n "$2" "$driver" --status "$1" 2>&1)
  else
    report=$("$driver" --status "$1" 2>&1)
  fi
  code=$?
}
expect() { # expect WHAT PATTERN: the report has a line matching PATTERN
  if printf '%s\n' "$report" | grep -Eq -- "$2"; then ok "$1"; else fail "$1: no line matching '$2' in:"; printf '%s\n' "$report"; fi
}
expect_code() { # expect_code STATUS WHAT: --status exited with STATUS
  if [ "$code" -eq "$1" ]; then ok "$2: exit status $1"; else fail "$2: exit status $code, expected $1: $report"; fi
}
refuse() { # refuse WHAT PATTERN: no line of the report matches PATTERN
  if printf '%s\n' "$report" | grep -Eq -- "$2"; then fail "$1: a line matches '$2' in:"; printf '%s\n' "$report"; else ok "$1"; fi
}
# json_status FILE RUNS CODE WHAT [killed]: --status --json FILE exits with
# CODE, prints one JSON object and nothing on stderr, and each of its
# fields equals what h5py reads (tests/inspect/status_json.py), with RUNS
# entries in run_summaries ("none": no summary); "killed": an earlier run
# was killed and left none, so the runs do not add up to the file.
json_status() {
  "$driver" --status --json "$1" > "$1.json" 2> "$1.json.err"
  json_code=$?
  if [ "$json_code" -ne "$3" ] || [ -s "$1.json.err" ]; then
    fail "$4: --status --json: exit status $json_code (expected $3), stderr: $(cat "$1.json.err")"
  elif "$python" "$srcdir/tests/inspect/status_json.py" "$1.json" "$1" "$2" ${5:-}; then
    ok "$4: --status --json: one object, every field as h5py reads it, $2 run summaries"
  else
    fail "$4: --status --json differs from the file: $(cat "$1.json")"
  fi
}
count() { "$python" "$srcdir/tests/resume/progress.py" count "$1"; }
# start_job OUTPUT: the job at $ranks ranks in the background; sets $pid.
start_job() {
  rm -f "$1"
  # shellcheck disable=SC2086
  "$mpiexec" -n "$ranks" "$driver" --quiet $settings --set job.output="$1" job.ini > "$1.out" 2>&1 &
  pid=$!
}
# one_report FILE WHAT: under a launcher only the first rank reports; sets $code.
one_report() {
  status "$1" 2
  if [ "$(printf '%s\n' "$report" | grep -c '^file: ')" -eq 1 ]; then
    ok "$2: mpiexec -n 2 tfenc-batch --status: one report"
  else
    fail "$2: mpiexec -n 2 tfenc-batch --status: exit status $code, report: $report"
  fi
}

for ranks in 1 2; do
  cd "$work/job" || exit 1
  settings="--set job.input=big.txt --set job.batch_tokens=256"
  [ "$ranks" -eq 2 ] && settings="$settings --set job.resume=false"

  # --- A running job, asked part-way; it must still finish.
  start_job "running-$ranks.h5"
  "$python" "$srcdir/tests/resume/progress.py" wait "running-$ranks.h5" 0.3 "$pid"
  read -r seen total complete <<EOF
$(count "running-$ranks.h5")
EOF
  status "running-$ranks.h5"
  still_running=0
  kill -0 "$pid" 2>/dev/null && still_running=1
  what="$ranks-rank job, asked while it runs"
  if [ "$still_running" -eq 0 ]; then
    fail "$what: the job ended before --status ran (make its pause longer)"
  elif [ "$code" -ne 3 ]; then
    fail "$what: exit status $code, expected 3 (unfinished): $report"
  else
    ok "$what: exit status 3, no lock conflict"
    finished=$(printf '%s\n' "$report" | sed -n 's/^documents: \([0-9]*\) of \([0-9]*\) finished.*/\1 \2/p')
    set -- $finished
    if [ $# -eq 2 ] && [ "$1" -ge "$seen" ] && [ "$1" -lt "$2" ] && [ "$2" -eq "$total" ]; then
      ok "$what: $1 of $2 documents finished (h5py saw $seen just before)"
    else
      fail "$what: documents '$finished', h5py saw $seen of $total just before"
    fi
    # A lone writer holds HDF5's lock, which --status sees; MPI-IO takes none.
    if [ "$ranks" -eq 1 ]; then
      expect "$what: says a process is writing it" '^state: unfinished, and a process is writing it now$'
    fi
  fi
  wait "$pid"
  job_status=$?
  if [ "$job_status" -eq 0 ]; then ok "$ranks-rank job: finished after being asked"; else fail "$ranks-rank job: exit status $job_status: $(tail -n 3 "running-$ranks.h5.out")"; fi

  # --- The complete file.
  what="$ranks-rank job's complete file"
  status "running-$ranks.h5"
  expect_code 0 "$what"
  expect "$what: complete" '^state: complete'
  expect "$what: every document finished" "^documents: $total of $total finished \\(100.0%\\), [0-9]+ of them truncated$"
  expect "$what: the weights checksum" "^model: weights sha256 $weights_sha256$"
  expect "$what: the precision, recorded" '^precision: fp32$'
  expect "$what: the layout" "^layout: ranks=$ranks data_parallel=$ranks pipeline_stages=1 "
  expect "$what: the job file" "^job file: $job_path \\(run in $directory\\)$"
  expect "$what: the overrides" "^overrides: --set job.input=big.txt --set job.batch_tokens=256"
  expect "$what: a job setting" '^  job.batch_tokens = 256$'
  expect "$what: the pause layer in the settings" '^  pause.milliseconds = 40$'
  refuse "$what: no resume command" '^resume'
  refuse "$what: nothing unrecorded" '^not recorded'
  expect "$what: its one run's summary" '^runs: 1 \(attribute run_summaries\)$'
  expect "$what: the run finished, with each rank's rate" "^  1: finished, $total documents, [0-9]+ tokens in [0-9.]+ s; rank 0 [0-9]+ tokens/s"
  json_status "running-$ranks.h5" 1 0 "$what"
  one_report "running-$ranks.h5" "$what"
  [ "$code" -eq 0 ] || fail "$what: mpiexec -n 2 tfenc-batch --status: exit status $code"

  # --- A killed job's file, and its resume command run as printed.
  start_job "killed-$ranks.h5"
  kill_part_way "$pid" "killed-$ranks.h5" 0.4
  read -r done total complete <<EOF
$(count "killed-$ranks.h5")
EOF
  what="$ranks-rank job killed with $done of $total documents finished"
  [ "$done" -gt 0 ] && [ "$done" -lt "$total" ] || fail "$what: the kill did not leave a partly finished file"
  cp "killed-$ranks.h5" "old-killed-$ranks.h5"
  one_report "killed-$ranks.h5" "$what"
  [ "$code" -ne 0 ] || fail "$what: mpiexec -n 2 tfenc-batch --status: exit status 0 for an unfinished file"
  status "killed-$ranks.h5"
  expect_code 3 "$what"
  expect "$what: unfinished" '^state: unfinished \(complete = 0\)$'
  expect "$what: its finished count" "^documents: $done of $total finished "
  expect "$what: a killed run leaves no summary" '^runs: \(not recorded\)$'
  json_status "killed-$ranks.h5" none 3 "$what"
  resume=$(printf '%s\n' "$report" | sed -n '/^resume with:$/{n;s/^  //;p;}')
  launcher="tfenc-batch"
  [ "$ranks" -eq 2 ] && launcher="mpirun -n 2 tfenc-batch"
  case $resume in
    "cd $directory && $launcher --set job.input=big.txt --set job.batch_tokens=256"*" $job_path")
      ok "$what: resume command: $resume" ;;
    *) fail "$what: resume command '$resume'" ;;
  esac
  if [ "$ranks" -eq 2 ]; then
    case $resume in
      *"--set job.resume=false --set job.output=killed-2.h5 --set job.resume=true $job_path")
        ok "$what: the job had resume = false: the command sets it true" ;;
      *) fail "$what: the job had resume = false, the command does not undo it: $resume" ;;
    esac
  fi
  # Run from elsewhere, as printed: it changes to the job's directory itself.
  if (cd / && sh -c "$resume") > "resume-$ranks.out" 2>&1; then
    ok "$what: the resume command ran"
    grep -q 'resuming' "resume-$ranks.out" || fail "$what: the resume command did not resume: $(head -n 3 "resume-$ranks.out")"
  else
    fail "$what: the resume command failed: $(tail -n 3 "resume-$ranks.out")"
  fi
  result=$("$python" "$srcdir/tests/pipeline/compare_layouts.py" "running-$ranks.h5" "killed-$ranks.h5")
  case $result in
    *"bitwise equal"*) ok "$what: resumed to the uninterrupted run's file, bitwise" ;;
    *) fail "$what: the resumed file differs from the uninterrupted run's: $result" ;;
  esac
  status "killed-$ranks.h5"
  [ "$code" -eq 0 ] && ok "$what: complete once resumed" || fail "$what: resumed file: exit status $code"
  json_status "killed-$ranks.h5" 1 0 "$what, resumed" killed

  # --- A job stopped by SIGTERM (to its ranks, as Slurm sends it), then
  # resumed: one summary per run, their tokens the file's lengths.
  start_job "stopped-$ranks.h5"
  "$python" "$srcdir/tests/resume/progress.py" wait "stopped-$ranks.h5" 0.3 "$pid"
  pkill -TERM -P "$pid" 2>/dev/null
  wait "$pid"
  job_status=$?
  what="$ranks-rank job stopped by SIGTERM"
  [ "$job_status" -eq 75 ] || fail "$what: exit status $job_status, expected 75: $(tail -n 3 "stopped-$ranks.h5.out")"
  json_status "stopped-$ranks.h5" 1 3 "$what"
  status "stopped-$ranks.h5"
  expect "$what: the stopped run's summary" '^  1: stopped, [0-9]+ documents'
  # shellcheck disable=SC2086
  if "$mpiexec" -n "$ranks" "$driver" --quiet $settings --set job.resume=true \
       --set job.output="stopped-$ranks.h5" job.ini > "stopped-$ranks.h5.out" 2>&1; then
    json_status "stopped-$ranks.h5" 2 0 "$what, resumed"
    status "stopped-$ranks.h5"
    expect "$what, resumed: two runs" '^runs: 2 \(attribute run_summaries\)$'
    expect "$what, resumed: the second finished" '^  2: finished, [0-9]+ documents'
  else
    fail "$what: the resumed run failed: $(tail -n 3 "stopped-$ranks.h5.out")"
  fi

  # --- As older tfenc versions wrote them.
  "$python" - "running-$ranks.h5" "old-complete-$ranks.h5" "old-killed-$ranks.h5" <<'PY' || fail "making older files"
import shutil, sys, h5py
complete, old_complete, old_killed = sys.argv[1:]
shutil.copy(complete, old_complete)
# tfenc before --status: no record of how the job was run.
for path in (old_complete, old_killed):
    with h5py.File(path, "r+") as f:
        for name in ("job_path", "working_directory", "job_overrides", "precision"):
            del f.attrs[name]
# tfenc before resuming existed: no job_settings either.
with h5py.File(old_killed, "r+") as f:
    del f.attrs["job_settings"]
PY
  what="$ranks-rank complete file of an older tfenc"
  status "old-complete-$ranks.h5"
  expect_code 0 "$what"
  expect "$what: precision from the settings" '^precision: fp32 \(not recorded; from the job settings or the default\)$'
  expect "$what: says what it lacks" '^not recorded \(written by an older tfenc\): job_path, working_directory, job_overrides, precision$'
  expect "$what: the job file is not recorded" '^job file: \(not recorded'
  what="$ranks-rank killed file of a tfenc before resuming"
  status "old-killed-$ranks.h5"
  expect_code 3 "$what"
  expect "$what: its finished count" "^documents: $done of $total finished "
  expect "$what: cannot tell the resume command" '^resume with: \(cannot be told'
  expect "$what: cannot tell the precision" '^precision: \(not recorded\)$'
  expect "$what: says what it lacks" '^not recorded \(written by an older tfenc\): job_settings, job_path, working_directory, job_overrides, precision$'
done

# --- Files that are not tfenc outputs, asked alone and under 2 ranks.
"$python" -c "
import h5py, numpy as np
with h5py.File('$work/foreign.h5', 'w') as f:
    f['embeddings'] = np.zeros((3, 4), np.float32)
    f.attrs['complete'] = 1
" || fail "making a foreign HDF5 file"
printf 'not HDF5\n' > "$work/text.h5"
rm -f "$work/missing.h5"
# --status --json of a bad file: the same one line on stderr, nothing on stdout.
for case in "foreign.h5:not a tfenc output: it has no attribute 'tfenc_version'" \
            "text.h5:not an HDF5 file" "missing.h5:No such file or directory"; do
  file=${case%%:*} message=${case#*:}
  out=$("$driver" --status --json "$work/$file" 2> "$work/json.err")
  code=$?
  if [ "$code" -eq 1 ] && [ -z "$out" ] && [ "$(cat "$work/json.err")" = "tfenc-batch: $work/$file: $message" ]; then
    ok "$file: --status --json: exit status 1, one line on stderr"
  else
    fail "$file: --status --json: exit status $code, stdout '$out', stderr: $(cat "$work/json.err")"
  fi
done
report=$("$driver" --json "$work/foreign.h5" 2>&1)
code=$?
if [ "$code" -eq 2 ] && [ "$report" = "tfenc-batch: --json goes with --status FILE (try --help)" ]; then
  ok "--json without --status: refused in one line"
else
  fail "--json without --status: exit status $code: $report"
fi
for ranks in "" 2; do
  for case in "foreign.h5:not a tfenc output: it has no attribute 'tfenc_version'" \
              "text.h5:not an HDF5 file" "missing.h5:No such file or directory"; do
    file=${case%%:*} message=${case#*:}
    status "$work/$file" $ranks
    what="$file${ranks:+ (under mpiexec -n $ranks)}"
    # (mpiexec adds its own lines about the failed ranks.)
    line=$(printf '%s\n' "$report" | grep '^tfenc-batch: ')
    if [ "$code" -eq 1 ] && [ "$line" = "tfenc-batch: $work/$file: $message" ] \
       && { [ -n "$ranks" ] || [ "$report" = "$line" ]; }; then
      ok "$what: exit status 1, one line: $line"
    else
      fail "$what: exit status $code, expected 1 and the one line '$message': $report"
    fi
  done
done

if [ "$failed" -ne 0 ]; then
  echo "status: FAIL ($failed)"
  exit 1
fi
echo "status: every check passed"
