#!/bin/sh
# A head beside its encoder: [head] weights_file names a small HDF5 file
# that holds the head's group, so that a head is swapped without copying the
# encoder's model.h5. On a random BertForSequenceClassification imported by
# tfenc-import (tests/import/head_file.py): the encoder's own head copied
# out with h5copy gives the bytes of the whole model; another head, written
# by docs/scores.md's h5py recipe (its python block marked
# `readme-test: covered by` this test, which head_file.py runs), gives
# PyTorch's softmax of that head over the encoder's [CLS] vector within
# 1e-4, the same bytes at 1x1 and 2x1 and from another directory (relative
# to the job file, which --dry-run names), as the further head of a job of
# two heads (docs/job-file.md, "Several outputs"), and after a SIGKILL and a
# resume; a head file whose content changed between the kill and the
# resume is refused, and so is an int8 calibration made with another head.
# Bad input, one line naming the file, layer or tensor, nothing written: a
# weights_file that is missing, a head of a model of another hidden size, a
# head without its out map, weights_file in a block.
set -eu

. "$(cd "$(dirname "$0")/../.." && pwd)/tests/environment.sh"
: "${TFENC_VENV_PYTHON:=${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python}"
work=$(mktemp -d "${TMPDIR:-/tmp}/tfenc-head-file.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
checks=0

HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$generate" "$work" "$TFENC_VENV_PYTHON" \
  "$here/head_file.py" make "$work" "$srcdir/docs/scores.md"
"$builddir/drivers/tfenc-import" "$work/encoder" -o "$work/model.h5" --job "$work/job.ini" \
  >/dev/null 2>&1

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# Windows of 2 documents in microbatches of at most 320 tokens, so that
# both ranks of 2x1 get work. One rank without mpiexec, whose own lines
# would follow a failure's one line.
run() { # RANKS OUTPUT JOB [--set ...]
  ranks=$1 output=$2 job=$3
  shift 3
  launch=
  [ "$ranks" -eq 1 ] || launch="$mpiexec -n $ranks"
  $launch "$driver" --quiet --set "job.input=$work/ids.h5" \
    --set "job.output=$output" --set job.window_documents=2 --set job.batch_tokens=320 \
    --set job.threads=1 "$@" "$job"
}

same() { # A B LABEL: scores bit for bit, both files complete
  checks=$((checks + 1))
  "$python" -c "import h5py, sys
a, b = (h5py.File(p, 'r') for p in sys.argv[1:3])
sys.exit(not (a.attrs['complete'] == b.attrs['complete'] == 1
              and a['scores'][()].tobytes() == b['scores'][()].tobytes()))" "$1" "$2" \
    && echo "ok: $3" || fail "$3: the scores differ"
}

# The encoder's own head, copied out of model.h5 by the HDF5 tools' h5copy:
# the same bytes as the whole model's.
checks=$((checks + 1))
h5copy -i "$work/model.h5" -o "$work/head_a.h5" -s /head -d /head
if run 1 "$work/whole.h5" "$work/job.ini" && run 1 "$work/a.h5" "$work/job.ini" \
    --set head.weights_file=head_a.h5; then
  checks=$((checks - 1))
  same "$work/whole.h5" "$work/a.h5" "the encoder's head by h5copy: the whole model's scores"
else
  fail "the encoder's head by h5copy: tfenc-batch failed"
fi

# Another head over the same encoder, against PyTorch; then 2x1, and the job
# run from another directory (weights_file is relative to the job file).
printf 'weights_file = head_b.h5\n' >>"$work/job.ini" # [head] is the job's last section
checks=$((checks + 1))
if run 1 "$work/b.h5" "$work/job.ini"; then
  "$python" "$here/head_file.py" compare "$work/reference.h5" b "$work/b.h5" \
    "head b beside the encoder, against PyTorch" || failures=$((failures + 1))
  checks=$((checks + 1))
  if run 2 "$work/b-2x1.h5" "$work/job.ini"; then
    checks=$((checks - 1))
    same "$work/b.h5" "$work/b-2x1.h5" "head b at 2x1: bitwise equal to 1x1"
  else
    fail "head b at 2x1: tfenc-batch failed"
  fi
  checks=$((checks + 1))
  (cd / && run 1 "$work/dry.h5" "$work/job.ini" --dry-run) >"$work/dry-run.txt"
  grep -qxF "  layer head: weights $work/head_b.h5 (its weights_file)" "$work/dry-run.txt" \
    && echo "ok: --dry-run names the head's file" \
    || fail "--dry-run does not name the head's file: $(grep weights "$work/dry-run.txt")"
  checks=$((checks + 1))
  if (cd / && run 1 "$work/b-elsewhere.h5" "$work/job.ini"); then
    checks=$((checks - 1))
    same "$work/b.h5" "$work/b-elsewhere.h5" "head b, run from /: bitwise equal"
  else
    fail "head b run from /: tfenc-batch failed"
  fi
else
  fail "head b: tfenc-batch failed"
fi

# The same head file as a further head of a job of two (mean-pooled
# vectors first, the scores in /outputs/scores): its scores are head b's
# alone, bitwise, at 1x1 and 2x1; and the file's identity names the further
# head's file, so that a resume with another head in it is refused.
sed 's/^\[head\]$/[vectors]\ntype = pooling\nmode = mean\nnormalize = true\nhead = vectors\n\n[head]\nhead = scores/' \
  "$work/job.ini" >"$work/two_heads.ini"
checks=$((checks + 1))
if run 1 "$work/two.h5" "$work/two_heads.ini" && run 2 "$work/two-2x1.h5" "$work/two_heads.ini"; then
  if "$python" -c "import h5py, sys
b, one, two = (h5py.File(p, 'r') for p in sys.argv[1:4])
same = all(f['outputs/scores/scores'][()].tobytes() == b['scores'][()].tobytes() for f in (one, two))
sys.exit(not (same and one['embeddings'][()].tobytes() == two['embeddings'][()].tobytes()
              and 'head.weights_file sha256 = ' in one.attrs['job_settings']))" \
      "$work/b.h5" "$work/two.h5" "$work/two-2x1.h5"; then
    echo "ok: head b as the further head of two: its scores bitwise, 1x1 and 2x1"
  else
    fail "head b as the further head of two: the scores differ from head b's alone"
  fi
else
  fail "head b as the further head of two: tfenc-batch failed"
fi

# An int8 calibration is of the weights it was made with, the head's file
# included (the input ranges of the head's out map follow its dense map):
# one made with head b is taken again with head b, refused with head c.
checks=$((checks + 1))
if ! run 1 "$work/int8-b.h5" "$work/job.ini" --set model.precision=int8 2>"$work/int8.err"; then
  fail "int8 with head b: tfenc-batch failed: $(tail -n 1 "$work/int8.err")"
elif grep -q "precision = int8: this CPU lacks.*runs instead" "$work/int8.err"; then
  # (a build without oneDNN; calibration/calibration.sh does the same)
  if [ "${CI:-}" = true ]; then
    fail "int8 does not run here, and CI must: $(grep -m 1 'this CPU lacks' "$work/int8.err")"
  else
    checks=$((checks - 1))
    echo "head_file: int8 does not run here, the calibration case is left out:" \
      "$(grep -m 1 'this CPU lacks' "$work/int8.err")"
  fi
elif ! run 1 "$work/int8-b-again.h5" "$work/job.ini" --set model.precision=int8 \
    --set model.calibration=int8-b.h5 2>"$work/int8.err"; then
  fail "head b's calibration refused for head b: $(tail -n 1 "$work/int8.err")"
elif run 1 "$work/int8-c.h5" "$work/job.ini" --set model.precision=int8 \
    --set head.weights_file=head_c.h5 --set model.calibration=int8-b.h5 2>"$work/int8.err"; then
  fail "head b's int8 calibration taken for head c"
elif tail -n 1 "$work/int8.err" | grep -qF "int8-b.h5: is of other weights" \
    && tail -n 1 "$work/int8.err" | grep -qF "with its layers' weights_files is" \
    && [ ! -e "$work/int8-c.h5" ]; then
  echo "ok: head b's int8 calibration refused for head c: $(tail -n 1 "$work/int8.err")"
else
  fail "head b's calibration for head c: not the line expected: $(cat "$work/int8.err")"
fi

# A SIGKILL part-way (the test plugin's pause layer before the head makes
# each microbatch take a while), then a resume with head b changed to head
# c under the same name: refused; with head b back: the 1x1 bytes.
TFENC_PLUGIN_PATH="$TFENC_PLUGIN_PATH:$builddir/tests/plugins/.libs"
export TFENC_PLUGIN_PATH
sed 's/^\[head\]$/[pause]\ntype = pause\nmilliseconds = 1000\n\n[head]/' "$work/job.ini" \
  >"$work/paused.ini"
cp "$work/head_b.h5" "$work/head_b.kept"
# mpiexec itself in the background, so that its children are the ranks.
run 2 "$work/killed.h5" "$work/paused.ini" >"$work/killed.out" 2>&1 &
pid=$!
kill_part_way "$pid" "$work/killed.h5" 0.2
left=$("$python" "$srcdir/tests/resume/progress.py" count "$work/killed.h5")
checks=$((checks + 2))
case "$left" in
  "16 16 1"|"0 0 0") fail "the kill did not land part-way ($left)" ;;
  *)
    cp "$work/head_c.h5" "$work/head_b.h5"
    if run 1 "$work/killed.h5" "$work/paused.ini" >"$work/changed.out" 2>&1; then
      fail "a resume with another head in head_b.h5 succeeded"
    elif [ "$(wc -l <"$work/changed.out")" -eq 1 ] \
        && grep -qF "attribute 'job_settings' is 'head.weights_file sha256 = " "$work/changed.out"
    then
      checks=$((checks - 1))
      echo "ok: another head in head_b.h5 refused: $(cat "$work/changed.out")"
    else
      fail "another head in head_b.h5: not the one line expected: $(cat "$work/changed.out")"
    fi
    cp "$work/head_b.kept" "$work/head_b.h5"
    if run 1 "$work/killed.h5" "$work/paused.ini" >"$work/resumed.out" 2>&1; then
      checks=$((checks - 1))
      same "$work/b.h5" "$work/killed.h5" "head b killed at $left (done, total, complete), resumed"
    else
      fail "the resume failed: $(tail -n 1 "$work/resumed.out")"
    fi ;;
esac

# --- Bad input: one line naming the file, layer or tensor; no output.
expect_error() { # NAME WEIGHTS_FILE-SETTING PATTERN...
  name=$1 setting=$2
  shift 2
  checks=$((checks + 1))
  out="$work/bad-$name.h5"
  if run 1 "$out" "$work/job.ini" --set "$setting" >"$work/stdout" 2>"$work/stderr"; then
    fail "$name: succeeded"
    return
  fi
  before=$failures
  lines=$(wc -l <"$work/stderr")
  [ "$lines" -eq 1 ] || fail "$name: $lines lines on stderr: $(cat "$work/stderr")"
  for pattern in "$@"; do
    grep -qF -- "$pattern" "$work/stderr" || fail "$name: message lacks '$pattern': $(cat "$work/stderr")"
  done
  [ ! -e "$out" ] || fail "$name: left $out behind"
  [ "$failures" -ne "$before" ] || echo "ok: $name: $(cat "$work/stderr")"
}
expect_error missing head.weights_file=missing.h5 \
  "job.ini:" "[head] weights_file $work/missing.h5: cannot open"
expect_error "another model's head" head.weights_file=wide.h5 "layer head (classifier)" \
  "weights $work/wide.h5: dataset /head/dense_weight: expected shape [?, 32], found [48, 48]"
expect_error "no out map" head.weights_file=no_out.h5 "layer head (classifier)" \
  "weights $work/no_out.h5: dataset /head/out_weight not found"
expect_error "in a block" encoder.ffn.weights_file=head_b.h5 \
  "[encoder.ffn] weights_file: only a layer outside blocks (a head)"

echo "head_file: $((checks - failures)) of $checks checks passed"
[ "$failures" -eq 0 ]
