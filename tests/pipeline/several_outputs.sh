#!/bin/sh
# Several outputs in one pass (docs/job-file.md, "Several outputs in one
# pass"): the bert-text example's encoder ending in three heads, mean-pooled
# unit vectors (head embeddings, the root's datasets), a classifier's
# scores (head scores, group /outputs/scores) and a SPLADE head's sparse
# rows (head sparse, its CSR in /outputs/sparse), written by one job into
# one file. The reference is the same encoder run as three jobs of one head
# each: the root's rows must be the embedding job's, /outputs/scores/scores
# the scores job's and /outputs/sparse's CSR the sparse job's, bitwise (the
# trunk's rows are copied, not recomputed; each sparse row goes to the
# output of the head that made it, with its microbatch);
# layouts 1x1, 2x1 and 1x2 give the same file; a job killed with SIGKILL
# part-way and run again ends with the uninterrupted file; --status (text
# and --json) and tfenc-export --output name each head. At int8 the
# accuracy gate judges every head: the file holds each head within its
# kind's bar of the fp32 file (compare_heads.py), 2x1, 1x2, a resume after
# SIGKILL and [model] calibration = that file give its bits, and a
# calibration that judged the first head alone is refused. Bad job files
# and files are refused in one line naming the section, head or group.
set -u
. "$(cd "$(dirname "$0")" && pwd)/common.sh"
work=$builddir/tests/data/generated/several_outputs
failed=0
fail() {
  echo "several_outputs: FAIL $*"
  failed=$((failed + 1))
}
ok() {
  echo "several_outputs: ok   $*"
}
TFENC_PLUGIN_PATH="$TFENC_PLUGIN_PATH:$builddir/tests/plugins/.libs"
export TFENC_PLUGIN_PATH

prepare_example bert-text "$work" || { echo "several_outputs: FAIL: cannot make a model"; exit 1; }
cd "$work" || exit 1
"$python" "$srcdir/tests/pipeline/make_inputs.py" text corpus.txt big.txt 12 || exit 1
# A random classifier of 3 labels and a SPLADE head beside the encoder.
"$python" "$srcdir/tests/pipeline/make_inputs.py" heads model.h5 heads.h5 || exit 1
encoder=$(sed 's/^weights = model.h5/weights = heads.h5/' job.ini | awk '/^\[pooling\]/ { exit } { print }')
pooling='[pooling]\ntype = pooling\nmode = mean\nnormalize = true\n'
classifier='[scores]\ntype = classifier\nlabels = {"0": "a", "1": "b", "2": "c"}\n'
printf "%s\n$pooling" "$encoder" > embeddings.ini
splade='[splade]\ntype = splade\n'
printf "%s\n$classifier" "$encoder" > scores.ini
printf "%s\n$splade" "$encoder" > sparse.ini
heads="${pooling}head = embeddings\n\n${classifier}head = scores\n\n${splade}head = sparse\n"
printf "%s\n$heads" "$encoder" > both.ini

# run RANKS OUTPUT JOB [--set ...]: sets $status and $message (the first error line).
run() {
  ranks=$1 output=$2 job=$3
  shift 3
  rm -f "$output"
  if [ "$ranks" -eq 1 ]; then
    timeout 300 "$driver" --quiet --set "job.output=$output" "$@" "$job" > run.out 2> run.err
  else
    timeout 300 "$mpiexec" -n "$ranks" "$driver" --quiet --set "job.output=$output" "$@" "$job" \
      > run.out 2> run.err
  fi
  status=$?
  message=$(grep -m 1 '^tfenc-batch: ' run.err)
}
written() { # WHAT RANKS OUTPUT JOB [--set ...]
  what=$1
  shift
  run "$@"
  if [ "$status" -eq 0 ]; then ok "$what"; else fail "$what: status $status: $(cat run.err)"; fi
}
refused() { # WHAT PATTERN RANKS OUTPUT JOB [--set ...]: one line of error
  what=$1 pattern=$2
  shift 2
  run "$@"
  # (besides the notice an int8 job prints on a CPU without AMX)
  message=$(grep -v '^tfenc-batch: precision = int8: this CPU' run.err)
  if [ "$status" -eq 0 ] || [ "$status" -ge 124 ] ||
     ! printf '%s\n' "$message" | grep -q -- "$pattern" || [ "$(printf '%s\n' "$message" | grep -c .)" -ne 1 ]; then
    fail "$what: status $status, stderr: $(cat run.err)"
  else
    ok "$what: $message"
  fi
}

written "the embedding job alone" 1 embeddings.h5 embeddings.ini
written "the scores job alone" 1 scores.h5 scores.ini
written "the sparse job alone" 1 sparse.h5 sparse.ini
written "three heads in one pass, 1x1" 1 both-1x1.h5 both.ini
written "three heads in one pass, 2x1" 2 both-2x1.h5 both.ini
written "three heads in one pass, 1x2" 2 both-1x2.h5 both.ini --set job.pipeline_stages=2
if ls ./*.sparse-* > /dev/null 2>&1; then fail "sparse logs left behind: $(ls ./*.sparse-*)"; fi
# Two sparse heads, the first and one named sparse-x (whose logs the
# first's would take for its own, were they PATH.sparse-x.sparse-*): the
# same weights, so the same CSR in both, at 2 writers.
printf "%s\n${splade}head = first\n\n[again]\ntype = splade\nweights = /splade\nhead = sparse-x\n" \
  "$encoder" > two_sparse.ini
written "two sparse heads, 2x1" 2 two_sparse.h5 two_sparse.ini
if "$python" -c "
import h5py, numpy as np, sys
f = h5py.File('two_sparse.h5', 'r')
sys.exit(0 if all(np.array_equal(f[n][()], f['outputs/sparse-x/' + n][()])
                  for n in ('sparse_indptr', 'sparse_indices', 'sparse_values')) else 1)"; then
  ok "two sparse heads: each CSR from its own logs"
else
  fail "two sparse heads: the CSRs differ"
fi

if "$python" - <<'PY'; then ok "each head's rows are its one-head job's, bitwise"; else fail "rows of the heads"; fi
import h5py, numpy as np, sys
both, embeddings, scores, sparse = (h5py.File(p, "r") for p in
                                    ("both-1x1.h5", "embeddings.h5", "scores.h5", "sparse.h5"))
bad = []
for name in ("embeddings", "lengths", "truncated"):
    if not np.array_equal(both[name][()], embeddings[name][()]):
        bad.append(name)
if not np.array_equal(both["outputs/scores/scores"][()], scores["scores"][()]):
    bad.append("outputs/scores/scores")
for name in ("sparse_indptr", "sparse_indices", "sparse_values"):
    if not np.array_equal(both["outputs/sparse/" + name][()], sparse[name][()]):
        bad.append("outputs/sparse/" + name)
if both["outputs/sparse"].attrs.get("output_kind") != "sparse":
    bad.append("/outputs/sparse's output_kind")
group = both["outputs/scores"].attrs
expected = {"output_kind": "scores", "dtype": "float32", "d_model": 3,
            "id2label": '{"0": "a", "1": "b", "2": "c"}', "unit_norm": 0}
for key, value in expected.items():
    if group.get(key) != value:
        bad.append(f"/outputs/scores attribute {key} = {group.get(key)!r}")
if both.attrs.get("head") != "embeddings" or both.attrs.get("output_kind") != "pooled":
    bad.append(f"root attributes head {both.attrs.get('head')!r}, "
               f"output_kind {both.attrs.get('output_kind')!r}")
if sorted(both) != sorted(list(embeddings) + ["outputs"]):
    bad.append(f"datasets {sorted(both)} against {sorted(embeddings)}")
print("several_outputs:  ", "; ".join(bad) if bad else "same bits")
sys.exit(1 if bad else 0)
PY
if "$python" "$srcdir/tests/pipeline/compare_layouts.py" both-1x1.h5 both-2x1.h5 both-1x2.h5; then
  ok "layouts 2x1 and 1x2 write 1x1's file, every head bitwise"
else
  fail "the layouts' files differ"
fi

# int8: the accuracy gate judges each head's output against fp32's by its
# kind's bar (pooled and sparse rows by their cosine, scores by their error
# relative to their spread), and each head of the file is within it
# against the fp32 file, here the gate's whole sample (50 documents):
# min cosine 0.999, scores 4.47% (docs/scores.md). Its notice names each
# head; the file records them (int8_calibration/heads).
int8=yes
run 1 int8-1x1.h5 both.ini --set model.precision=int8
if [ "$status" -ne 0 ] && grep -q "not available\|does not offer\|no oneDNN" run.err; then
  echo "several_outputs: (this build or CPU has no int8 products: $(tail -n 1 run.err))"
  int8=no
elif [ "$status" -ne 0 ]; then
  fail "three heads at int8: status $status: $(cat run.err)"
  int8=no
elif grep -q "^tfenc-batch: precision = int8: on a sample of 50 documents, head embeddings: min cosine [0-9.]* to fp32; head scores: scores off fp32's by at most [0-9.]*% of their spread ([0-9.]*% allowed); head sparse: min cosine [0-9.]* to fp32 (min_cosine 0.999000)" run.err; then
  ok "three heads at int8, 1x1: $(grep 'precision = int8' run.err)"
else
  fail "three heads at int8: the notice does not name each head: $(cat run.err)"
fi
if [ "$int8" = yes ]; then
  if "$python" "$srcdir/tests/pipeline/compare_heads.py" both-1x1.h5 int8-1x1.h5 0.999 &&
     [ "$("$python" -c "import h5py; print(h5py.File('int8-1x1.h5', 'r')['int8_calibration'].attrs['heads'])")" = "embeddings,scores,sparse" ]; then
    ok "int8 against fp32: each head within its bar, the heads judged recorded"
  else
    fail "int8 against fp32: a head beyond its bar, or int8_calibration/heads"
  fi
  written "three heads at int8, 2x1" 2 int8-2x1.h5 both.ini --set model.precision=int8
  written "three heads at int8, 1x2" 2 int8-1x2.h5 both.ini --set model.precision=int8 \
    --set job.pipeline_stages=2
  written "three heads at int8, [model] calibration = the 1x1 file" 1 int8-given.h5 both.ini \
    --set model.precision=int8 --set model.calibration=int8-1x1.h5
  grep -q "the calibration of .*int8-1x1.h5 .*no accuracy gate run" run.err ||
    fail "[model] calibration: the gate ran: $(cat run.err)"
  if "$python" "$srcdir/tests/pipeline/compare_layouts.py" int8-1x1.h5 int8-2x1.h5 \
       int8-1x2.h5 int8-given.h5; then
    ok "int8: 2x1, 1x2 and [model] calibration write 1x1's file, every head bitwise"
  else
    fail "int8: the files differ"
  fi
  # The embedding job alone judges its one head: its calibration leaves the
  # scores head off by more than its bar here (6.5% of their spread against
  # 4.47%), so a job of several heads refuses it.
  run 1 embeddings-int8.h5 embeddings.ini --set model.precision=int8
  [ "$status" -eq 0 ] || fail "the embedding job at int8: $(cat run.err)"
  refused "a calibration that judged the first head alone" \
    "calibration embeddings-int8.h5: its accuracy gate judged the output of head embeddings only, not this job's head scores" \
    1 bad.h5 both.ini --set model.precision=int8 --set model.calibration=embeddings-int8.h5
fi

# The plan names each head; --status names each head, as text and as JSON.
"$driver" --dry-run both.ini > plan.txt 2>&1
if grep -q '^heads: embeddings (the output above, the root.s datasets), scores (group /outputs/scores), sparse (group /outputs/sparse)' plan.txt; then
  ok "--dry-run lists each head"
else
  fail "--dry-run: $(cat plan.txt)"
fi
"$driver" --status both-1x1.h5 > status.txt 2>&1
if grep -q '^heads: 3; the output above is head embeddings' status.txt &&
   grep -q '^output scores (group /outputs/scores): scores \[50 documents, 3 labels\], float32' status.txt &&
   grep -q '^output sparse (group /outputs/sparse): sparse \[50 documents, 512 columns\]' status.txt; then
  ok "--status lists each head"
else
  fail "--status: $(cat status.txt)"
fi
"$driver" --status --json both-1x1.h5 > status.json 2>&1
if "$python" - <<'PY'; then ok "--status --json lists each head"; else fail "--status --json: $(cat status.json)"; fi
import json, sys
output = json.load(open("status.json"))["output"]
head = output["heads"][0]
sys.exit(0 if output["head"] == "embeddings" and len(output["heads"]) == 2
         and (head["name"], head["group"], head["kind"], head["d_model"])
         == ("scores", "/outputs/scores", "scores", 3)
         and output["heads"][1]["kind"] == "sparse" else 1)
PY

# tfenc-export --output NAME: the further head's scores; an unknown name in one line.
export_tool=$builddir/drivers/tfenc-export
if "$export_tool" --version | grep -q 'without Apache Arrow'; then
  echo "several_outputs: (tfenc-export built without Arrow: --output not exported)"
else
  rm -rf exported
  if "$export_tool" both-1x1.h5 --parquet exported --output scores > export.out 2>&1 &&
     "${TFENC_VENV_PYTHON:-$python}" - <<'PY'; then
import h5py, numpy as np, pyarrow.parquet as pq, sys
table = pq.read_table("exported")
scores = np.array(table.column("scores").to_pylist(), dtype=np.float32)
same = np.array_equal(scores, h5py.File("both-1x1.h5", "r")["outputs/scores/scores"][()])
sys.exit(0 if same and table.schema.metadata[b"tfenc.output_kind"] == b"scores" else 1)
PY
    ok "tfenc-export --output scores writes the head's scores"
  else
    fail "tfenc-export --output scores: $(cat export.out)"
  fi
  rm -rf unknown
  if "$export_tool" both-1x1.h5 --parquet unknown --output nope > export.out 2>&1; then
    fail "tfenc-export --output nope succeeded"
  elif [ "$(wc -l < export.out)" -eq 1 ] && grep -q "no output of that name (its outputs: embeddings, scores, sparse)" export.out; then
    ok "tfenc-export --output nope: $(cat export.out)"
  else
    fail "tfenc-export --output nope: $(cat export.out)"
  fi
fi

# SIGKILL part-way, then the same command: the uninterrupted file. A pause
# in the trunk makes the run last a few seconds.
printf "%s\n[pause]\ntype = pause\nmilliseconds = 60\n\n$heads" "$encoder" > slow.ini
written "the slow job, uninterrupted" 1 slow-whole.h5 slow.ini --set job.input=big.txt \
  --set job.window_documents=64 --set job.batch_tokens=256
# kill_part_way OUTPUT: the slow job ($slow, slow.ini unless said)
# started, SIGKILLed once 30% of the documents are finished, checked to
# have stopped part-way.
slow=slow.ini
kill_part_way() {
  rm -f "$1"
  "$driver" --quiet --set "job.output=$1" --set job.input=big.txt \
    --set job.window_documents=64 --set job.batch_tokens=256 "$slow" > run.out 2> run.err &
  pid=$!
  "$python" "$srcdir/tests/resume/progress.py" wait "$1" 0.3 "$pid"
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  left=$("$python" "$srcdir/tests/resume/progress.py" count "$1")
  echo "several_outputs:   $1 killed with $left (finished, documents, complete)"
  set -- $left
  if [ "$1" -gt 0 ] && [ "$1" -lt "$2" ]; then ok "killed part-way"; else fail "the kill left $left"; fi
}
# resumed WHAT OUTPUT [WHOLE]: the same command again must end with the
# uninterrupted file (WHOLE, slow-whole.h5 unless said).
resumed() {
  "$driver" --quiet --set "job.output=$2" --set job.input=big.txt \
    --set job.window_documents=64 --set job.batch_tokens=256 "$slow" > run.out 2> run.err ||
    fail "$1: the resume: $(cat run.err)"
  if "$python" "$srcdir/tests/pipeline/compare_layouts.py" "${3:-slow-whole.h5}" "$2" &&
     ! ls "./$2".sparse-* "./$2".head-* > /dev/null 2>&1; then
    ok "$1: the uninterrupted file, every head bitwise, no log left"
  else
    fail "$1: the resumed file differs"
  fi
}
kill_part_way slow-killed.h5
resumed "resumed after SIGKILL" slow-killed.h5
# The sparse head's logs lost after the kill: the documents whose rows
# they held are encoded again, not left out of the head's CSR.
kill_part_way slow-lost.h5
ls slow-lost.h5.head-sparse.sparse-* > /dev/null 2>&1 || fail "no log of the sparse head"
rm -f slow-lost.h5.head-sparse.sparse-*
resumed "resumed after SIGKILL with the sparse head's logs lost" slow-lost.h5
# int8: the resume takes the calibration the file records (no gate run)
# and ends with the uninterrupted int8 file.
if [ "$int8" = yes ]; then
  sed 's/^\[model\]$/[model]\nprecision = int8/' slow.ini > slow_int8.ini
  slow=slow_int8.ini
  written "the slow job at int8, uninterrupted" 1 slow-int8-whole.h5 slow_int8.ini \
    --set job.input=big.txt --set job.window_documents=64 --set job.batch_tokens=256
  kill_part_way slow-int8-killed.h5
  resumed "int8, resumed after SIGKILL" slow-int8-killed.h5 slow-int8-whole.h5
  grep -q "the file this run resumes .*no accuracy gate run" run.err ||
    fail "int8 resumed: not with the file's calibration: $(cat run.err)"
  slow=slow.ini
fi

# Bad job files: one line each, naming the section and the head.
printf "%s\n${pooling}head = embeddings\n\n${classifier}head = scores\n\n[again]\ntype = pooling\nmode = cls\nhead = embeddings\n" \
  "$encoder" > split.ini
refused "a head's layers apart" "\[again\] head = embeddings, but that head's layers ended" \
  1 bad.h5 split.ini
printf "%s\n${pooling}head = embeddings\n\n${classifier}\n" "$encoder" > trunk_after.ini
refused "a layer without a head after the heads" "\[scores\] has no 'head' key but follows the layers of head embeddings" \
  1 bad.h5 trunk_after.ini
printf "%s\n${pooling}head = embeddings\n\n[tokens]\ntype = pause\nmilliseconds = 0\nhead = tokens\n" \
  "$encoder" > tokens.ini
refused "a further head of per-token rows" "head tokens writes tokens rows, but a head after the first writes one row per document" \
  1 bad.h5 tokens.ini
refused "a further head of per-token rows, at int8 (before the accuracy gate runs it)" \
  "head tokens writes tokens rows, but a head after the first writes one row per document" \
  1 bad.h5 tokens.ini --set model.precision=int8
refused "several heads with long_documents = chunk" "both.ini: \[job\] long_documents = chunk pools the first head's chunks, but head scores would get a row per chunk" \
  1 bad.h5 both.ini --set job.long_documents=chunk --set job.max_seq_len=16
refused "several heads with long_documents = late_chunk" "both.ini: \[job\] long_documents = late_chunk pools the first head's chunks, but head scores would get a row per chunk" \
  1 bad.h5 both.ini --set job.long_documents=late_chunk --set job.max_seq_len=16
printf "%s\n${pooling}head = embeddings\n\n${classifier}head = scores/x\n" "$encoder" > name.ini
refused "a head name that is no group name" "\[scores\] head = scores/x: a head's name" 1 bad.h5 name.ini

# A file whose head group is gone is not resumed.
cp both-1x1.h5 damaged.h5
"$python" -c "
import h5py
with h5py.File('damaged.h5', 'a') as f:
    del f['outputs/scores']
    f.attrs['complete'] = 0" || exit 1
cp damaged.h5 resumed.h5
timeout 120 "$driver" --quiet --set job.output=resumed.h5 both.ini > run.out 2> run.err
status=$?
if [ "$status" -ne 0 ] && [ "$(grep -c . run.err)" -eq 1 ] &&
   grep -q "resumed.h5: has no group /outputs/scores for this job's head" run.err &&
   "$python" -c "
import h5py, numpy as np, sys
a, b = h5py.File('damaged.h5', 'r'), h5py.File('resumed.h5', 'r')
sys.exit(0 if all(np.array_equal(a[n][()], b[n][()]) for n in ('embeddings', 'lengths')) else 1)"; then
  ok "a resume of a file without the head's group: $(cat run.err), its rows kept"
else
  fail "a resume of a file without the head's group: status $status, $(cat run.err)"
fi
# A head's group keeps the root's rules (the one description,
# core/output/output_description.c): rows of the wrong shape in
# /outputs/scores, and a decreasing sparse_indptr and a column outside the
# vocabulary in /outputs/sparse, each refused in one line.
for damage in "rows:del f['outputs/scores/scores']; f['outputs/scores/scores'] = np.zeros((49, 3), np.float32):dataset '/outputs/scores/scores' holds [49, 3] float32 values, expected [n_documents 50, d_model 3]" \
              "indptr:f['outputs/sparse/sparse_indptr'][3] = f['outputs/sparse/sparse_indptr'][2] - 1:dataset '/outputs/sparse/sparse_indptr' decreases at index 2" \
              "column:f['outputs/sparse/sparse_indices'][0] = 512:dataset '/outputs/sparse/sparse_indices' holds 512 at index 0 (document 0), outside the columns 0 to d_model - 1 = 511"; do
  name=${damage%%:*} rest=${damage#*:}
  code=${rest%%:*} expected=${rest#*:}
  cp both-1x1.h5 "damaged-$name.h5"
  "$python" -c "
import h5py, numpy as np
with h5py.File('damaged-$name.h5', 'a') as f:
    $code" || exit 1
  "$driver" --status "damaged-$name.h5" > status.txt 2> status.err
  status=$?
  if [ "$status" -eq 1 ] && [ "$(grep -c . status.err)" -eq 1 ] &&
     grep -qF "damaged-$name.h5: inconsistent: $expected" status.err; then
    ok "--status of a head's damaged $name: $(cat status.err)"
  else
    fail "--status of a head's damaged $name: status $status, $(cat status.err)"
  fi
done

[ "$failed" -eq 0 ] || exit 1
echo "several_outputs: all passed"
