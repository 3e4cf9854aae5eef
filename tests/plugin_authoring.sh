#!/bin/sh
# What a plugin author meets, at one rank: declared ranges checked by the
# host before create() (one line naming file, line, section, key, value and
# range); a plugin built against ABI 1.1 (shorter parameter entries) still
# listed and run; a create() that ignores a getter's failure refused; a
# misspelt layer type answered with "did you mean"; a plugin_path directory
# that does not exist warned about; --dry-run showing block norms on lines
# of their own; [job] output_ids writing each per-token row's id; and
# docs/layers.md's key tables agreeing with --list-plugins.
set -u
: "${top_builddir:=.}" "${top_srcdir:=.}" "${REFERENCE_PYTHON:=/usr/bin/python3}"
builddir=$(cd "$top_builddir" && pwd)
srcdir=$(cd "$top_srcdir" && pwd)
batch=$builddir/drivers/tfenc-batch
work=$builddir/tests/data/generated/plugin-authoring
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
unset TFENC_PLUGIN_PATH
failed=0
ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; sed 's/^/     stderr: /' stderr.txt 2>/dev/null | head -n 5; failed=$((failed + 1)); }

generate=$srcdir/tests/harness/generate
"$generate" post "$REFERENCE_PYTHON" "$srcdir/tests/reference/make_reference.py" postnorm_relu post \
  >/dev/null || exit 1
"$generate" pre "$REFERENCE_PYTHON" "$srcdir/tests/reference/make_reference.py" prenorm_gelu pre \
  >/dev/null || exit 1
mkdir plugins-minor1 plugins-hostile
cp "$builddir/tests/plugins/.libs/minor1_params.so" plugins-minor1/ || exit 1
cp "$builddir/tests/plugins/hostile/.libs/undeclared_key.so" plugins-hostile/ || exit 1

# run NAME JOB [ARGS...]: tfenc-batch --quiet, stdout and stderr kept.
run() {
  name=$1
  shift
  timeout 120 "$batch" --quiet "$@" > stdout.txt 2> stderr.txt
  code=$?
}
# refused NAME PATTERN: the last run failed with one stderr line matching PATTERN.
refused() {
  if [ "$code" -ne 0 ] && [ "$(wc -l < stderr.txt)" -eq 1 ] &&
     grep -qE -- "^tfenc-batch: .*$2" stderr.txt; then
    ok "$1: $(cat stderr.txt)"
  else
    fail "$1: exit $code, expected one line matching '$2'"
  fi
}
# job BASE EDIT: a copy of BASE's job.ini changed by the sed script EDIT.
job() { sed "$2" "$1/job.ini" > "$1/edited.ini"; echo "$1/edited.ini"; }

# --- declared ranges, checked by the host before create()
run eps "$(job pre 's/^eps = 1e-05$/eps = -1e-3/')"
refused "layernorm eps below its declared range" \
  "edited.ini:[0-9]+: \[encoder.attention.norm\] eps = '-1e-3': expected a number in >=0 \(the range layer type layernorm declares\)"
run heads "$(job pre 's/^n_heads = 4$/n_heads = 70000/')"
refused "mha n_heads above its declared range" \
  "\[encoder.attention\] n_heads = '70000': expected an integer in 1..65536 \(the range layer type mha declares\)"
run base "$(job post 's/^\[positions\]$/[positions]\nbase = 0/')"
refused "sinusoidal base at its exclusive minimum" "\[positions\] base = '0': expected a number in >0"

# --- a plugin built against ABI 1.1 still loads, lists and runs
TFENC_PLUGIN_PATH=$PWD/plugins-minor1 "$batch" --list-plugins > stdout.txt 2> stderr.txt
if grep -qE '^ +factor +float +2 +- +multiplies x$' stdout.txt &&
   grep -qE '^ +times +int +1 +- +how many times, 0..8$' stdout.txt &&
   ! grep -q "minor1_params.so" stderr.txt && ! grep -q "^refused" stdout.txt; then
  ok "an ABI 1.1 plugin's declared keys are listed (read with the 1.1 entry size)"
else
  fail "ABI 1.1 plugin not listed as declared: $(grep -A3 minor1 stdout.txt | tr '\n' ' ')"
fi
cp "$(job pre 's#^\[model\]$#[model]\nplugin_path = ../plugins-minor1#; s#^output = .*#output = scaled.h5#')" pre/minor1.ini
printf '[scaled]\ntype = minor1_scale\nfactor = 0.5\ntimes = 3\n' >> pre/minor1.ini
run minor1 pre/minor1.ini
if [ "$code" -eq 0 ] && "$REFERENCE_PYTHON" - <<'PY'
import h5py, numpy as np, sys
scaled = h5py.File("pre/scaled.h5", "r")["embeddings"][:]
expected = h5py.File("pre/expected.h5", "r")["expected_embeddings"][:]
# mean pooling is linear: scaling after it scales the reference by 0.5^3
sys.exit(0 if np.allclose(scaled, expected * 0.125, rtol=1e-4, atol=1e-5) else 1)
PY
then
  ok "an ABI 1.1 plugin runs with its keys (factor 0.5, times 3 scale the reference by 1/8)"
else
  fail "an ABI 1.1 plugin in a job: exit $code or a wrong result"
fi

# --- a create() that ignores a getter's failure is refused
cp "$(job pre 's#^\[model\]$#[model]\nplugin_path = ../plugins-hostile#')" pre/ignores.ini
printf '[extra]\ntype = ignores_status\n' >> pre/ignores.ini
run ignores pre/ignores.ini
refused "create() ignores the getter's failure" \
  "layer extra \(ignores_status\): layer type ignores_status reads key 'alpha', which its declared parameter table lacks"

# --- an unknown layer type gets a suggestion
run misspelt "$(job pre 's/^type = layernorm$/type = layrnorm/')"
refused "misspelt layer type" "no plugin provides layer type 'layrnorm' \(did you mean 'layernorm'\?\)"
run unlike "$(job pre 's/^type = pooling$/type = zzzzzz/')"
if [ "$code" -ne 0 ] && ! grep -q "did you mean" stderr.txt; then
  ok "no suggestion for a name like none of the types"
else
  fail "a suggestion for 'zzzzzz', or exit 0"
fi

# --- a plugin_path directory that does not exist is warned about
run missing "$(job pre 's#^\[model\]$#[model]\nplugin_path = no-such-plugins#; s#^output = .*#output = warned.h5#')"
if [ "$code" -eq 0 ] &&
   grep -qE "^tfenc-batch: warning: plugin directory (.*/)?pre/no-such-plugins \(\[model\] plugin_path\) does not exist$" stderr.txt; then
  ok "missing plugin_path directory: $(cat stderr.txt)"
else
  fail "missing plugin_path directory: exit $code, no warning line"
fi
TFENC_PLUGIN_PATH=$PWD/nowhere "$batch" --list-plugins > stdout.txt 2> stderr.txt
if grep -q "warning: plugin directory $PWD/nowhere (\$TFENC_PLUGIN_PATH) does not exist" stderr.txt; then
  ok "--list-plugins warns about a missing \$TFENC_PLUGIN_PATH directory"
else
  fail "--list-plugins: no warning for \$TFENC_PLUGIN_PATH=$PWD/nowhere"
fi

# --- --dry-run: where each block norm runs
"$batch" --dry-run pre/job.ini > pre-plan.txt 2> stderr.txt
"$batch" --dry-run post/job.ini > post-plan.txt 2>> stderr.txt
if grep -A1 -E "step +1 +encoder.0.attention.norm +layernorm +pre-norm" pre-plan.txt |
     grep -qE "step +1 +encoder.0.attention +mha" &&
   grep -A1 -E "step +2 +encoder.0.attention +mha" post-plan.txt |
     grep -qE "step +2 +encoder.0.attention.norm +layernorm +post-norm: after encoder.0.attention and the residual"; then
  ok "--dry-run lists pre-norms before and post-norms after their sublayer"
else
  fail "--dry-run does not show the block norms"; sed -n '5,9p' pre-plan.txt post-plan.txt
fi

# --- [job] output_ids: the token id of every per-token row
run ids "$(job post 's/^\[job\]$/[job]\noutput_ids = true/; s#^output = .*#output = ids.h5#')"
if [ "$code" -eq 0 ] && "$REFERENCE_PYTHON" - <<'PY'
import h5py, numpy as np, sys
out = h5py.File("post/ids.h5", "r")
given = h5py.File("post/input.h5", "r")
sys.exit(0 if out["token_ids"].dtype == np.int32
         and np.array_equal(out["token_ids"][:], given["tokens"][:])
         and np.array_equal(out["offsets"][:], given["offsets"][:])
         and out["token_ids"].shape[0] == out["hidden"].shape[0] else 1)
PY
then
  ok "output_ids = true: token_ids [T] int32 equals the corpus's ids under the same offsets"
else
  fail "output_ids = true: exit $code or token_ids differ from the corpus"
fi
# The same over two data-parallel writers (parallel HDF5) and over two
# pipeline stages (the ids travel with the microbatch): the same file.
for layout in "2 1" "2 2"; do
  set -- $layout
  rm -f post/ids-$1-$2.h5
  timeout 120 ${MPIEXEC:-mpiexec} -n "$1" "$batch" --quiet --set job.pipeline_stages="$2" \
    --set job.output=ids-$1-$2.h5 post/edited.ini > stdout.txt 2> stderr.txt
  code=$?
  if [ "$code" -eq 0 ] && "$REFERENCE_PYTHON" - "post/ids-$1-$2.h5" <<'PY'
import h5py, numpy as np, sys
one, other = h5py.File("post/ids.h5", "r"), h5py.File(sys.argv[1], "r")
sys.exit(0 if all(np.array_equal(one[k][:], other[k][:])
                  for k in ("token_ids", "offsets", "hidden")) else 1)
PY
  then
    ok "output_ids at $1 ranks, $2 stage(s): token_ids, offsets and hidden equal the 1-rank file"
  else
    fail "output_ids at $1 ranks, $2 stage(s): exit $code or a different file"
  fi
done
run pooled_ids "$(job pre 's/^\[job\]$/[job]\noutput_ids = true/')"
refused "output_ids with a pooled model" "\[job\] output_ids writes a token id beside each per-token row, but the model pools its output"

# --- docs/layers.md agrees with --list-plugins
if "$REFERENCE_PYTHON" "$srcdir/tests/layers_doc.py" "$batch" "$srcdir/docs/layers.md" > layers.txt 2>&1; then
  ok "$(tail -n 1 layers.txt)"
else
  cat layers.txt
  fail "docs/layers.md disagrees with tfenc-batch --list-plugins"
fi

[ "$failed" -eq 0 ] || { echo "plugin_authoring.sh: $failed failed"; exit 1; }
