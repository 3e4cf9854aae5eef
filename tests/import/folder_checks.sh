# Checks shared by the tests of one imported model folder (jina_v3.sh,
# nomic_moe.sh, modernbert_2025.sh), sourced after tests/environment.sh and
# once the caller has made $work. They count into `checks` and `failures`
# (set here, with fail()) and use $python, $here and $mpiexec.
: "${TFENC_VENV_PYTHON:=${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python}"
import="$builddir/drivers/tfenc-import"
batch=$driver
sentences="$here/sentences.txt"
failures=0
checks=0
fail() { failures=$((failures + 1)); echo "FAIL: $*"; }

# Two ranks in windows of 8 documents: the 1x1 file bit for bit.
ranks_bitwise() { # LABEL JOB INPUT
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

# The job at [model] precision bf16 and int8 on the float32 weights, each
# against the reference at its bar, and the output's precision attributes.
precisions() { # LABEL JOB INPUT REFERENCE BF16-BAR INT8-BAR
  label=$1 job_file=$2 input=$3 reference_file=$4
  shift 4
  for precision in bf16 int8; do
    bar=$1
    shift
    checks=$((checks + 1))
    if "$batch" --quiet --set "job.input=$input" --set "job.output=$work/$label-$precision.h5" \
         --set job.threads=2 --set "model.precision=$precision" "$job_file" \
         2>"$work/notice-$precision.txt"; then
      "$python" "$here/compare_embeddings.py" "$reference_file" "$work/$label-$precision.h5" \
        "$label precision $precision" "$bar" 1 || failures=$((failures + 1))
      runs=$precision
      ! grep -q "fp32 runs instead" "$work/notice-$precision.txt" || runs=fp32
      "$python" "$here/check_precision_attributes.py" "$work/$label-$precision.h5" "$precision" \
        "$bar" "$runs" || failures=$((failures + 1))
    else
      fail "$label: the precision = $precision job failed: $(cat "$work/notice-$precision.txt")"
    fi
  done
}

# tfenc-import refuses FOLDER in one line holding EXPECTED-TEXT, exits
# non-zero and writes nothing.
refused() { # LABEL FOLDER EXPECTED-TEXT [ARGUMENT...]
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
