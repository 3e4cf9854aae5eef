# The checks an imported embedder's script runs on its job on the test
# sentences (sourced by tests/import/jina_v3.sh and modernbert_2025.sh,
# after tests/environment.sh and with "$work" made): each counts in
# `checks` and `failures`, writes under "$work" and reports through fail().
: "${TFENC_VENV_PYTHON:=${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python}"
import="$builddir/drivers/tfenc-import"
batch=$driver
sentences="$here/sentences.txt"
failures=0
checks=0
fail() { failures=$((failures + 1)); echo "FAIL: $*"; }

# ranks_bitwise LABEL JOB INPUT: the job at 2 ranks, in windows of 8
# documents, gives the 1x1 file bit for bit.
ranks_bitwise() {
  for ranks in 1 2; do
    "$mpiexec" -n "$ranks" "$batch" --quiet --set "job.input=$3" \
      --set "job.output=$work/$1-ranks-$ranks.h5" --set job.window_documents=8 \
      --set job.threads=1 "$2"
  done
  checks=$((checks + 1))
  "$python" -c "import h5py, sys
a, b = (h5py.File(p, 'r') for p in sys.argv[1:3])
sys.exit(not (a.attrs['complete'] == b.attrs['complete'] == 1
              and a['embeddings'][()].tobytes() == b['embeddings'][()].tobytes()))" \
    "$work/$1-ranks-1.h5" "$work/$1-ranks-2.h5" && echo "$1 at 2 x 1: bitwise equal to 1x1" \
    || fail "$1 at 2 x 1 differs from 1x1"
}

# precisions LABEL JOB INPUT REFERENCE: [model] precision bf16 and int8 on
# the float32 weights, within parity.sh's bars (min cosine 0.9999 and
# 0.999), and the output's precision attributes.
precisions() {
  for case in "bf16 0.9999" "int8 0.999"; do
    set -- "$1" "$2" "$3" "$4" $case
    checks=$((checks + 1))
    if "$batch" --quiet --set "job.input=$3" --set "job.output=$work/$1-$5.h5" \
         --set job.threads=2 --set "model.precision=$5" "$2" 2>"$work/notice-$5.txt"; then
      "$python" "$here/compare_embeddings.py" "$4" "$work/$1-$5.h5" "$1 precision $5" "$6" 1 \
        || failures=$((failures + 1))
      runs=$5
      ! grep -q "fp32 runs instead" "$work/notice-$5.txt" || runs=fp32
      "$python" "$here/check_precision_attributes.py" "$work/$1-$5.h5" "$5" "$6" "$runs" \
        || failures=$((failures + 1))
    else
      fail "$1: the precision = $5 job failed: $(cat "$work/notice-$5.txt")"
    fi
  done
}

# refused LABEL FOLDER EXPECTED-TEXT [ARGUMENT...]: tfenc-import refuses
# FOLDER in one line holding EXPECTED-TEXT, non-zero, with no output.
refused() {
  label=$1 folder=$2 expected=$3
  shift 3
  checks=$((checks + 1))
  rm -f "$work/refused.h5" "$work/refused.ini"
  if "$import" "$folder" -o "$work/refused.h5" --job "$work/refused.ini" "$@" \
      >"$work/refused.log" 2>&1; then
    fail "$label: tfenc-import accepted it"
  elif [ "$(wc -l <"$work/refused.log")" -ne 1 ] || ! grep -qF "$expected" "$work/refused.log" \
      || [ -e "$work/refused.h5" ] || [ -e "$work/refused.ini" ]; then
    fail "$label: expected one line with '$expected' and no output, got: $(cat "$work/refused.log")"
  else
    echo "$label: refused: $(cat "$work/refused.log")"
  fi
}
