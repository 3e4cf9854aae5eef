#!/bin/sh
# An int8 job's calibration, recorded and taken again ([model] calibration
# = FILE), over the bert-text example's model:
#  - corpus A at int8 records its calibration (group int8_calibration);
#  - corpus B, which holds 40 of A's documents among others, encoded with
#    calibration = A.h5 at 1 rank, 2 ranks, 2 threads and 2 pipeline
#    stages (and checked by a dry run): the shared
#    documents' rows are bitwise A's, and B records A's calibration (its
#    digest) and where it came from; without the key B calibrates on its
#    own corpus (how many shared rows then differ is printed, not checked);
#  - a resume continues with the calibration the file records, also
#    without the key (it says so); a file begun with one calibration is
#    not continued with another (the same path, other content), nor at
#    another precision (bf16 begun, resumed where only fp32 runs);
#  - bad inputs, each one line naming the file and a non-zero exit, no
#    output: the calibration of other weights, of another plan, of an fp32
#    job, a missing file, a FIFO, a damaged group (a map deleted, a range
#    changed, a map of another shape), the key at precision = fp32.
set -u
. "$(cd "$(dirname "$0")/../pipeline" && pwd)/common.sh"
name=calibration
. "$srcdir/tests/resume/fixture.sh"

ok() {
  echo "calibration: ok   $*"
}

# A: 200 documents. B: 160, every fourth one of A's documents 40..79, the
# others long lines in capitals with numbers (other activations, so that
# B's own calibration is not A's). shared.map: "A-index B-index".
"$python" - <<'PY' || exit 1
lines = open("big.txt", encoding="utf-8").read().splitlines()
a = lines[:200]
open("a.txt", "w", encoding="utf-8").write("\n".join(a) + "\n")
b, pairs, shared = [], [], 40
for j in range(160):
    if j % 4 == 0:
        pairs.append((shared, j))
        b.append(a[shared])
        shared += 1
    else:
        words = " ".join(lines[(200 + j + k) % len(lines)] for k in range(3)).upper().split()
        b.append(" ".join(f"{w} {len(w) * 37 + j}" for w in words))
open("b.txt", "w", encoding="utf-8").write("\n".join(b) + "\n")
open("shared.map", "w").write("".join(f"{i} {j}\n" for i, j in pairs))
for name, n in (("a", len(a)), ("b", len(b))):
    open(f"{name}-identity.map", "w").write("".join(f"{i} {i}\n" for i in range(n)))
PY

# encode RANKS OUTPUT INPUT ARGS...: an int8 job, small windows and batches.
encode() {
  ranks=$1 out=$2 input=$3
  shift 3
  rm -f "$out"
  run "$ranks" --set job.input="$input" --set job.output="$out" --set job.resume=false \
    --set job.window_documents=20 --set job.batch_tokens=256 --set model.precision=int8 \
    "$@" job.ini
  [ "$status" -eq 0 ] || { fail "$out: the job failed: $(last_line)"; return 1; }
}

# refused_alone WHAT PATTERN OUTPUT ARGS...: the job at 1 rank must fail
# with one line (besides the instruction sets' notice) matching PATTERN
# and leave no OUTPUT.
refused_alone() {
  what=$1 pattern=$2 out=$3
  shift 3
  rm -f "$out"
  run 1 --set job.output="$out" --set job.resume=false --set model.precision=int8 "$@" job.ini
  message=$(grep '^tfenc-batch: ' run.err | grep -v 'this CPU lacks')
  lines=$(printf '%s\n' "$message" | grep -c .)
  if [ "$status" -eq 0 ] || [ "$status" -ge 124 ] || [ "$lines" -ne 1 ] \
     || ! printf '%s\n' "$message" | grep -q -- "$pattern"; then
    fail "$what: status $status, message: $message"
  elif [ -e "$out" ]; then
    fail "$what: refused, but $out was made"
  else
    ok "$what: $message"
  fi
}

rows() { "$python" "$here/shared_rows.py" "$@"; }
# The run's last line: the error of a refused job, after any notice.
last_line() { grep '^tfenc-batch: ' run.err | tail -1; }

# --- A records its calibration ---------------------------------------------
encode 1 A.h5 a.txt || { echo "calibration: FAIL: cannot encode A"; exit 1; }
if grep -q "precision = int8: this CPU lacks.*runs instead" run.err; then
  # (a build without oneDNN: int8 runs on every x86-64 CPU with it)
  if [ "${CI:-}" = true ]; then
    echo "calibration: FAIL: int8 does not run here, and CI must: $(grep -m 1 'this CPU lacks' run.err)"
    exit 1
  fi
  echo "calibration: SKIP: int8 does not run here: $(grep -m 1 'this CPU lacks' run.err)"
  exit 77
fi
if "$python" - A.h5 <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    g = f["int8_calibration"]
    maps = []
    g.visititems(lambda name, o: maps.append(name) if isinstance(o, h5py.Dataset) else None)
    assert maps and all(":" in m and g[m].dtype == np.float32 and g[m].ndim == 1 for m in maps), maps
    assert all(np.all(g[m][...] >= 0) and np.all(np.isfinite(g[m][...])) for m in maps)
    a = g.attrs
    steps = a["precision_steps"]
    assert steps == f.attrs["precision_steps"] and len(steps.splitlines()) > 2, steps
    assert a["weights_sha256"] == f.attrs["weights_sha256"]
    assert a["sample_documents"] > 0 and 0.99 < a["sample_min_cosine"] <= 1, dict(a)
    assert a["sample_min_cosine"] == f.attrs["precision_sample_min_cosine"]
    assert a["min_cosine"] == 0.999 and len(a["sha256"]) == 64, dict(a)
    assert a["source"].startswith("calibrated: the accuracy gate on a sample of"), a["source"]
    print(f"{len(maps)} maps, e.g. {maps[0]}; {a['source']}")
PY
then ok "A records its calibration"; else fail "A's group int8_calibration is not as documented"; fi

# --- B with A's calibration: the shared rows are A's -----------------------
for layout in "1 1 1" "2 1 1" "1 2 1" "2 1 2"; do
  set -- $layout
  ranks=$1 threads=$2 stages=$3
  out=B-$ranks-$threads-$stages.h5
  encode "$ranks" "$out" b.txt --set model.calibration=A.h5 --set job.threads="$threads" \
    --set job.pipeline_stages="$stages" || continue
  if grep -q "precision = int8: the calibration of $work/A.h5 (min cosine .* on its sample of [0-9]* documents), no accuracy gate run" run.err; then
    ok "$out: says where its calibration comes from"
  else
    fail "$out: no notice of the calibration taken: $(grep '^tfenc-batch: precision' run.err)"
  fi
  if rows equal A.h5 "$out" shared.map; then
    ok "$out ($ranks rank(s), $threads thread(s), $stages stage(s)): the shared documents' rows are A's, bit for bit"
  else
    fail "$out ($ranks rank(s), $threads thread(s), $stages stage(s)): shared rows differ from A's"
  fi
  rows calibration A.h5 "$out" > digests.out || fail "$out: does not record A's calibration: $(cat digests.out)"
done
if "$python" - B-1-1-1.h5 "$work/A.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    source = f["int8_calibration"].attrs["source"]
    assert source == f"given: {sys.argv[2]} ([model] calibration)", source
PY
then ok "B records where its calibration came from"; else fail "B's int8_calibration/source"; fi

# A dry run takes the calibration too (and checks it), found beside the
# job file wherever the job is started from.
mkdir -p elsewhere
(cd elsewhere && timeout 120 "$driver" --dry-run --set job.input=b.txt --set model.precision=int8 \
   --set model.calibration=A.h5 ../job.ini > ../run.out 2> ../run.err)
status=$?
if [ "$status" -eq 0 ] && grep -q "the calibration of $work/A.h5 .*no accuracy gate run" run.err; then
  ok "a dry run from another directory takes the calibration beside the job file"
else
  fail "dry run with the calibration: status $status: $(last_line)"
fi

# Without the key B calibrates on its own corpus: not A's model.
encode 1 B-own.h5 b.txt || true
echo "calibration: without the key, $(rows count A.h5 B-own.h5 shared.map)"
if rows calibration A.h5 B-own.h5 > digests.out; then
  echo "calibration: note: B's own calibration equals A's ($(cat digests.out))"
fi

# --- resume ------------------------------------------------------------------
# B begun with A's calibration and killed after document 90: resumed with
# the key, at 2 ranks, it is B again.
cp B-1-1-1.h5 resumed.h5
"$python" "$srcdir/tests/compact/unfinish.py" resumed.h5 90
run 2 --set job.input=b.txt --set job.output=resumed.h5 --set job.window_documents=20 \
  --set job.batch_tokens=256 --set model.precision=int8 --set model.calibration=A.h5 job.ini
if [ "$status" -eq 0 ] && rows equal B-1-1-1.h5 resumed.h5 b-identity.map; then
  ok "a resume with the key continues with A's calibration"
else
  fail "resume with the key: status $status: $(last_line)"
fi
# A killed after document 100: resumed without the key, it takes the
# calibration the file records, says so, and gives A again.
cp A.h5 a-resumed.h5
"$python" "$srcdir/tests/compact/unfinish.py" a-resumed.h5 100
run 1 --set job.input=a.txt --set job.output=a-resumed.h5 --set job.window_documents=20 \
  --set job.batch_tokens=256 --set model.precision=int8 --set job.threads=2 job.ini
if [ "$status" -eq 0 ] && grep -q "the calibration of $work/a-resumed.h5, the file this run resumes" run.err \
   && rows equal A.h5 a-resumed.h5 a-identity.map; then
  ok "a resume without the key continues with the calibration its file records"
else
  fail "resume without the key: status $status: $(grep '^tfenc-batch: ' run.err | head -3)"
fi
# The same path with another calibration in it: refused.
cp B-1-1-1.h5 other.h5
"$python" "$srcdir/tests/compact/unfinish.py" other.h5 90
cp A.h5 A-saved.h5
cp B-own.h5 A.h5
run 1 --set job.input=b.txt --set job.output=other.h5 --set job.window_documents=20 \
  --set job.batch_tokens=256 --set model.precision=int8 --set model.calibration=A.h5 job.ini
message=$(last_line)
if [ "$status" -ne 0 ] && printf '%s\n' "$message" | grep -q "other.h5: was begun with another int8 calibration"; then
  ok "a file begun with one calibration is not continued with another: $message"
else
  fail "resume with another calibration: status $status: $message"
fi
mv A-saved.h5 A.h5
# bf16 begun where bf16 runs, resumed where only fp32 does (oneDNN capped
# at AVX2): refused, where the rows of two precisions would otherwise mix.
if encode 1 bf16.h5 a.txt --set model.precision=bf16 && ! grep -q "fp32 runs instead" run.err; then
  "$python" "$srcdir/tests/compact/unfinish.py" bf16.h5 100
  ONEDNN_MAX_CPU_ISA=AVX2 run 1 --set job.input=a.txt --set job.output=bf16.h5 \
    --set job.window_documents=20 --set job.batch_tokens=256 --set model.precision=bf16 job.ini
  message=$(last_line)
  if [ "$status" -ne 0 ] && printf '%s\n' "$message" | grep -q "bf16.h5: was begun at precision 'bf16' and this run runs precision = fp32"; then
    ok "a file begun at bf16 is not continued at fp32: $message"
  else
    fail "bf16 file resumed at fp32: status $status: $message"
  fi
fi

# --- bad inputs --------------------------------------------------------------
# Other weights: one value changed.
cp model.h5 other-model.h5
"$python" - <<'PY' || exit 1
import h5py
with h5py.File("other-model.h5", "r+") as f:
    f["/encoder/0/ffn/in_weight"][0, 0] += 0.5
PY
encode 1 other-weights.h5 a.txt --set model.weights=other-model.h5 || true
refused_alone "the calibration of other weights" "\[model\] calibration .*other-weights.h5: is of other weights" \
  bad.h5 --set job.input=b.txt --set model.calibration=other-weights.h5
refused_alone "the calibration of another plan" "\[model\] calibration .*A.h5: is of another plan: [0-9]* steps, this job's model has [0-9]*" \
  bad.h5 --set job.input=b.txt --set model.calibration=A.h5 --set encoder.repeat=5 \
  --set encoder.extra_layers=ignore
encode 1 fp32.h5 a.txt --set model.precision=fp32 || true
refused_alone "the output of an fp32 job" "\[model\] calibration .*fp32.h5: holds no int8 calibration: it was written by a precision = fp32 job" \
  bad.h5 --set job.input=b.txt --set model.calibration=fp32.h5
refused_alone "a missing file" "\[model\] calibration .*missing.h5: cannot open" \
  bad.h5 --set job.input=b.txt --set model.calibration=missing.h5
rm -f fifo.h5 && mkfifo fifo.h5
refused_alone "a FIFO" "\[model\] calibration .*fifo.h5: is a FIFO" \
  bad.h5 --set job.input=b.txt --set model.calibration=fifo.h5
refused_alone "calibration at precision = fp32" "\[model\] calibration is an int8 job's calibration, and this job runs precision = fp32" \
  bad.h5 --set job.input=b.txt --set model.calibration=A.h5 --set model.precision=fp32
before=$(sha256sum < A.h5)
run 1 --set job.input=b.txt --set job.output=A.h5 --set model.precision=int8 \
  --set model.calibration=A.h5 job.ini
message=$(last_line)
if [ "$status" -ne 0 ] && [ "$(sha256sum < A.h5)" = "$before" ] \
   && printf '%s\n' "$message" | grep -q "the output is the same file as the int8 calibration"; then
  ok "the calibration file as the output: $message"
else
  echo "calibration: FAIL the calibration file as the output: status $status: $message"
  exit 1
fi
# Damaged groups.
for damage in deleted changed reshaped digest steps; do
  cp A.h5 damaged.h5
  "$python" - damaged.h5 "$damage" <<'PY' || exit 1
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    g = f["int8_calibration"]
    maps = []
    g.visititems(lambda name, o: maps.append(name) if isinstance(o, h5py.Dataset) else None)
    if sys.argv[2] == "deleted":
        del g[maps[0]]
    elif sys.argv[2] == "changed":
        g[maps[0]][0] = g[maps[0]][0] * 2 + 1
    elif sys.argv[2] == "reshaped":
        values = g[maps[0]][...]
        del g[maps[0]]
        g[maps[0]] = np.stack([values, values])
    elif sys.argv[2] == "digest":
        del g.attrs["sha256"]
    else:
        g.attrs["precision_steps"] = "embeddings int7\n"
PY
  case $damage in
    reshaped) pattern="its int8 calibration is damaged: dataset 'int8_calibration/.*' is not float \[1\.\." ;;
    steps) pattern="its int8 calibration is damaged: attribute 'int8_calibration/precision_steps'" ;;
    *) pattern="its int8 calibration is damaged: its maps and steps do not match their digest" ;;
  esac
  refused_alone "a damaged group ($damage)" "\[model\] calibration .*damaged.h5: $pattern" \
    bad.h5 --set job.input=b.txt --set model.calibration=damaged.h5
done

echo "calibration.sh: $failed failed"
[ "$failed" -eq 0 ]
