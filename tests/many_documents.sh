#!/bin/sh
# More documents than fit one read-ahead window (2048) and far more than
# batch_tokens: encoding must not depend on the batch size or the window
# boundaries (per-token output compared with a run in one large batch).
set -u
: "${top_builddir:=.}" "${top_srcdir:=.}" "${REFERENCE_PYTHON:=/usr/bin/python3}"
batch=$(cd "$top_builddir/drivers" && pwd)/tfenc-batch
srcdir=$(cd "$top_srcdir" && pwd)
work="$top_builddir/tests/data/generated/many-documents"
rm -rf "$work"
mkdir -p "$work"
cd "$work" || exit 1
"$REFERENCE_PYTHON" "$srcdir/tests/reference/make_reference.py" postnorm_relu model >/dev/null || exit 1
"$REFERENCE_PYTHON" - <<'PY' || exit 1
import h5py, numpy as np
rng = np.random.default_rng(5)
lengths = rng.integers(1, 12, size=3000)
with h5py.File("input.h5", "w") as f:
    f["tokens"] = rng.integers(0, 1000, size=int(lengths.sum())).astype(np.int32)
    f["offsets"] = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
PY
run() {
  "$batch" --quiet --set job.input=../input.h5 --set job.output="../$1" \
    --set job.batch_tokens="$2" --set job.max_seq_len=12 model/job.ini || exit 1
}
run small.h5 12
run large.h5 40000
"$REFERENCE_PYTHON" - <<'PY'
import h5py, numpy as np, sys
small, large = h5py.File("small.h5", "r"), h5py.File("large.h5", "r")
ok = small.attrs["complete"] == 1 and large.attrs["complete"] == 1
ok = ok and (small["offsets"][:] == large["offsets"][:]).all() and (small["lengths"][:] == large["lengths"][:]).all()
# Different microbatch shapes change OpenBLAS's summation order only.
diff = float(np.abs(small["hidden"][:] - large["hidden"][:]).max())
print(f"3000 documents, batch_tokens 12 vs 40000: max |diff| {diff:.3g} (bar 1e-5)")
sys.exit(0 if ok and diff <= 1e-5 else 1)
PY
