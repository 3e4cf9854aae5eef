#!/bin/sh
# Every integer key over its whole range, beyond int and long: each value
# must be refused naming the key, never wrapped to a small int.
# The rules every case is held to are in common.sh.
set -u
. "$(dirname "$0")/common.sh"

# --- integers: every integer key over its whole range, beyond int and long.
# Each value must be refused naming the key (no wrap to a small int).
for value in -1 2147483648 4294967297 9223372036854775808 -9223372036854775809; do
  for key in d_model vocab_size max_positions; do
    error_at 1 "[model] $key = $value" "$key.*'?$value'?.*(expected an integer|must)" \
      "s/^\[model\]/[model]\n$key = $value/; /^$key = [0-9]*\$/d" job.ini
  done
  # (at 4 ranks too for one value: the stage count decides the layout)
  layouts=1
  [ "$value" != 4294967297 ] || layouts="1 4"
  for key in max_seq_len batch_tokens window_documents max_id_bytes chunk_overlap output_dim \
      pipeline_stages threads; do
    error_at "$layouts" "[job] $key = $value" "$key.*'?$value'?.*(expected an integer|must)" \
      "/^$key = /d; s/^\[job\]/[job]\n$key = $value/" job.ini
  done
  error_at 1 "[encoder] repeat = $value" "repeat.*'?$value'?.*expected an integer" "s/^repeat = .*/repeat = $value/" job.ini
  error_at 1 "mha n_heads = $value" "n_heads.*$value" "s/^n_heads = .*/n_heads = $value/" job.ini
  error_at 1 "mha rope_dims = $value" "rope_dims.*$value" "s/^n_heads = .*/n_heads = 4\nrope_dims = $value/" job.ini
  error_at 1 "embedding position_offset = $value" "position_offset.*$value" \
    "s/^scale_by_sqrt_d = .*/scale_by_sqrt_d = true\nposition_offset = $value/" job.ini
done
error "threads above the range" "\[job\] threads = '4097': expected an integer in 0..4096" \
  's/^\[job\]/[job]\nthreads = 4097/' job.ini
error "vocab_size beyond int32" "\[model\] vocab_size = '2147483648': expected an integer in 0..2147483647" \
  's/^vocab_size = .*/vocab_size = 2147483648/' job.ini

finish
