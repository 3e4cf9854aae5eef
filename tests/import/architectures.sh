#!/bin/sh
# Every architecture tfenc-import maps (NomicBERT also with its RoPE on
# interleaved pairs), on random weights: a checkpoint saved
# by transformers' own classes (or, for NomicBERT, ModernBERT, JinaBERT v2,
# Qwen3 and Gemma3, which transformers 4.40 lacks, by references written
# from their published code: tests/import/reference_models.py), imported,
# run by tfenc-batch on token ids, and compared per token with the model's
# forward pass and pooled with sentence-transformers' Pooling (Dense, for
# EmbeddingGemma's pair) and Normalize modules. The bert kind is also pooled
# in every sentence-transformers pooling mode; Gemma3, Qwen2 and ModernBERT
# also with the RoPE keys transformers 5 writes; Qwen3 and Gemma3 are also cut
# to a Matryoshka width, their jobs carry the models' prompts, and their
# files are the same bit for bit at layouts 2x1, 1x2, 2x2 and after a
# SIGKILL and a resume.
set -eu

. "$(cd "$(dirname "$0")/../.." && pwd)/tests/environment.sh"
: "${TFENC_VENV_PYTHON:=${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python}"
export TFENC_VENV_PYTHON
import="$builddir/drivers/tfenc-import"
batch=$driver
work=$(mktemp -d "${TMPDIR:-/tmp}/tfenc-architectures.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
checks=0

HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$generate" "$work" "$TFENC_VENV_PYTHON" "$here/architectures.py" make "$work"

compare() { # REFERENCE DATASET OUTPUT LABEL
  checks=$((checks + 1))
  "$python" "$here/architectures.py" compare "$@" || failures=$((failures + 1))
}

run() { # JOB OUTPUT [--set ...]: tfenc-batch on the kind's token ids
  job=$1 output=$2
  shift 2
  "$batch" --quiet --set "job.input=$dir/ids.h5" --set job.input_format=hdf5 \
    --set "job.output=$output" "$@" "$job"
}

for kind in bert roberta xlm-roberta electra distilbert mpnet qwen2 nomic_bert modernbert \
    jina_bert qwen3 gemma3_text nomic_bert-interleaved; do
  dir="$work/$kind"
  if ! "$import" "$dir" -o "$dir/model.h5" --job "$dir/job.ini" >"$dir/import.log" 2>&1; then
    checks=$((checks + 1))
    failures=$((failures + 1))
    echo "FAIL: $kind: tfenc-import: $(cat "$dir/import.log")"
    continue
  fi
  # The same job without its [pooling] section gives the hidden states.
  sed '/^\[pooling\]/,$d' "$dir/job.ini" >"$dir/tokens.ini"
  run "$dir/tokens.ini" "$dir/tokens.h5"
  compare "$dir/reference.h5" hidden "$dir/tokens.h5" "$kind per token"
  run "$dir/job.ini" "$dir/pooled.h5"
  compare "$dir/reference.h5" embeddings "$dir/pooled.h5" "$kind pooled"
done

# Windows of 2 documents in microbatches of at most 320 tokens, so that
# the 12 sequences make several of each.
spread() { # RANKS STAGES OUTPUT JOB: the kind's token ids at that layout
  "$mpiexec" -n "$1" "$batch" --quiet --set "job.input=$dir/ids.h5" \
    --set job.input_format=hdf5 --set "job.output=$3" --set "job.pipeline_stages=$2" \
    --set job.window_documents=2 --set job.batch_tokens=320 --set job.max_seq_len=160 \
    --set job.threads=1 "$4"
}
same() { # A B LABEL: the embeddings bit for bit
  checks=$((checks + 1))
  "$python" -c "import h5py, sys
a, b = (h5py.File(p, 'r') for p in sys.argv[1:3])
sys.exit(not (a.attrs['complete'] == b.attrs['complete'] == 1
              and a['embeddings'][()].tobytes() == b['embeddings'][()].tobytes()))" "$1" "$2" \
    && echo "$3: bitwise equal to 1x1" || { failures=$((failures + 1)); echo "FAIL: $3 differs"; }
}
# Layouts 2x1, 1x2, 2x2 and a SIGKILL with a resume at another layout: the
# 1x1 file bit for bit (grouped-query attention, q/k norms, the sliding
# window and the last-token pooling split across stages and replicas).
layouts_and_resume() { # KIND
  spread 1 1 "$dir/base.h5" "$dir/job.ini" || { failures=$((failures + 1)); return; }
  for layout in 2:1 1:2 2:2; do
    replicas=${layout%:*} stages=${layout#*:}
    if spread $((replicas * stages)) "$stages" "$dir/layout-$replicas-$stages.h5" "$dir/job.ini"
    then
      same "$dir/base.h5" "$dir/layout-$replicas-$stages.h5" "$1 at $replicas x $stages"
    else
      failures=$((failures + 1))
      echo "FAIL: $1 at $replicas x $stages: the job failed"
    fi
  done
  # The test plugin's pause layer before the pooling makes each microbatch
  # take a while, so that the kill lands part-way.
  sed 's/^\[pooling\]$/[pause]\ntype = pause\nmilliseconds = 1000\n\n[pooling]/' "$dir/job.ini" \
    >"$dir/paused.ini"
  rm -f "$dir/killed.h5"
  # mpiexec itself in the background, so that its children are the ranks.
  "$mpiexec" -n 2 "$batch" --quiet --set "job.input=$dir/ids.h5" --set job.input_format=hdf5 \
    --set "job.output=$dir/killed.h5" --set job.window_documents=2 --set job.batch_tokens=320 \
    --set job.max_seq_len=160 --set job.threads=1 "$dir/paused.ini" >"$dir/killed.out" 2>&1 &
  pid=$!
  kill_part_way "$pid" "$dir/killed.h5" 0.2
  left=$("$python" "$srcdir/tests/resume/progress.py" count "$dir/killed.h5")
  case "$left" in
    "12 12 1"|"0 0 0")
      checks=$((checks + 1)) failures=$((failures + 1))
      echo "FAIL: $1: the kill did not land part-way ($left)" ;;
    *)
      if spread 1 1 "$dir/killed.h5" "$dir/paused.ini" >"$dir/resumed.out" 2>&1; then
        same "$dir/base.h5" "$dir/killed.h5" "$1 killed at $left (done, total, complete), resumed"
      else
        failures=$((failures + 1))
        echo "FAIL: $1: the resume failed: $(tail -n 1 "$dir/resumed.out")"
      fi ;;
  esac
}

TFENC_PLUGIN_PATH="$TFENC_PLUGIN_PATH:$builddir/tests/plugins/.libs"
export TFENC_PLUGIN_PATH
for kind in qwen3 gemma3_text; do
  dir="$work/$kind"
  [ -f "$dir/job.ini" ] || continue
  run "$dir/job.ini" "$dir/cut.h5" --set job.output_dim=16
  compare "$dir/reference.h5" embeddings:16 "$dir/cut.h5" "$kind output_dim 16"
  # bf16 runs attention's products on the host, with Q wider than d_model
  # (head_dim): within bf16's bar of cosine 0.9999.
  checks=$((checks + 1))
  run "$dir/job.ini" "$dir/bf16.h5" --set model.precision=bf16
  "$python" "$here/compare_embeddings.py" "$dir/reference.h5" "$dir/bf16.h5" "$kind bf16" \
    0.9999 1e-2 || failures=$((failures + 1))
  checks=$((checks + 1))
  "$python" "$here/architectures.py" prompts "$dir/job.ini" "$dir" || failures=$((failures + 1))
  # The sanitizer build (memory errors, not arithmetic) splits one of the
  # two: gemma3_text, whose sliding window and norms are the more code.
  [ -n "${TFENC_SANITIZER_BUILD:-}" ] && [ "$kind" != gemma3_text ] || layouts_and_resume "$kind"
done

# What tfenc cannot run as EmbeddingGemma runs it: one line naming the file
# and the key, and no output.
refused() { # LABEL EXPECTED-TEXT PYTHON-EDIT: the edit applied to a copy of gemma3_text
  checks=$((checks + 1))
  bad="$work/bad-$1"
  rm -rf "$bad"
  cp -r "$work/gemma3_text" "$bad"
  rm -f "$bad/model.h5" "$bad/job.ini"
  (cd "$bad" && "$TFENC_VENV_PYTHON" -c "import json
def edit(path, **changes):
    with open(path) as f: d = json.load(f)
    d.update(changes)
    with open(path, 'w') as f: json.dump(d, f)
$3")
  if "$import" "$bad" -o "$bad/model.h5" --job "$bad/job.ini" >"$bad/log" 2>&1; then
    failures=$((failures + 1))
    echo "FAIL: $1: tfenc-import accepted it"
  elif [ "$(wc -l <"$bad/log")" -ne 1 ] || ! grep -q "$2" "$bad/log" || [ -e "$bad/model.h5" ]; then
    failures=$((failures + 1))
    echo "FAIL: $1: expected one line with '$2' and no output, got: $(cat "$bad/log")"
  else
    echo "$1: refused: $(cat "$bad/log")"
  fi
}
if [ -f "$work/gemma3_text/job.ini" ]; then
  refused causal-gemma "config.json: use_bidirectional_attention" \
    "edit('config.json', use_bidirectional_attention=False)"
  refused dense-tanh "2_Dense/config.json: activation_function" \
    "edit('2_Dense/config.json', activation_function='torch.nn.modules.activation.Tanh')"
  refused one-dense "two Dense modules" \
    "m = json.load(open('modules.json')); del m[3]; m[3]['path'] = '4_Normalize'
json.dump(m, open('modules.json', 'w'))"
  refused dense-extra-tensor "3_Dense/model.safetensors: tensor 'extra'" \
    "import torch, safetensors.torch as s
w = s.load_file('3_Dense/model.safetensors'); w['extra'] = torch.zeros(2)
s.save_file(w, '3_Dense/model.safetensors')"
fi
# transformers 5 writes the RoPE bases as rope_parameters (per layer type
# where layers differ): the same job as the older keys give.
same_job_as_v5() { # KIND PYTHON-EDIT: the edit applied to d, the kind's config.json
  [ -f "$work/$1/job.ini" ] || return 0
  checks=$((checks + 1))
  v5="$work/$1-v5"
  rm -rf "$v5"
  cp -r "$work/$1" "$v5"
  rm -f "$v5/model.h5" "$v5/job.ini"
  (cd "$v5" && "$python" -c "import json
d = json.load(open('config.json'))
$2
json.dump(d, open('config.json', 'w'))")
  grep -v '^;' "$work/$1/job.ini" >"$v5/expected.ini"
  if ! "$import" "$v5" -o "$v5/model.h5" --job "$v5/job.ini" >"$v5/log" 2>&1 ||
      ! grep -v '^;' "$v5/job.ini" | cmp -s - "$v5/expected.ini"; then
    failures=$((failures + 1))
    echo "FAIL: $1 with rope_parameters: $(cat "$v5/log"), or a different job"
  else
    echo "$1 with rope_parameters: the same job"
  fi
}
same_job_as_v5 gemma3_text "d['rope_parameters'] = {
    'full_attention': {'rope_type': 'default', 'rope_theta': d.pop('rope_theta')},
    'sliding_attention': {'rope_type': 'default', 'rope_theta': d.pop('rope_local_base_freq')}}"
same_job_as_v5 qwen2 "d['rope_parameters'] = {'rope_type': 'default', 'rope_theta': d.pop('rope_theta')}"
same_job_as_v5 modernbert "d['rope_parameters'] = {
    'full_attention': {'rope_type': 'default', 'rope_theta': d.pop('global_rope_theta')},
    'sliding_attention': {'rope_type': 'default', 'rope_theta': d.pop('local_rope_theta')}}
every = d.pop('global_attn_every_n_layers')
d['layer_types'] = ['sliding_attention' if i % every else 'full_attention'
                    for i in range(d['num_hidden_layers'])]"

dir="$work/bert"
for mode in cls mean max mean_sqrt_len weightedmean lasttoken; do
  run "$dir/job.ini" "$dir/pooled-$mode.h5" --set "pooling.mode=$mode" \
    --set pooling.normalize=false
  compare "$dir/reference.h5" "pooled_$mode" "$dir/pooled-$mode.h5" "bert pooling $mode"
done

echo "architectures.sh: $((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
