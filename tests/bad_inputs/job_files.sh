#!/bin/sh
# Bad command lines and job files: missing, special and oversized job files,
# INI syntax, unknown and duplicate keys, wrong types and ranges, missing
# sections; and small cases that once passed silently (inline comments,
# long lines, fewer layers than the weights hold).
# The rules every case is held to are in common.sh.
set -u
. "$(dirname "$0")/common.sh"

# --- command line and job files
error "missing job file"        "job file nope.ini: cannot open: No such file" "" nope.ini
error "job file is a directory" "job file a-directory: is a directory, not a regular file" "" a-directory
error "job file is /dev/zero"   "job file /dev/zero: is a character device" "" /dev/zero
error "job file is a FIFO"      "job file a-fifo: is a FIFO or pipe" "" a-fifo
error "job file is a socket"    "job file a-socket: is a socket" "" a-socket
error "job file too large"      "big.ini: larger than 1 MiB: not a job file" "" big.ini
error "unknown option"          "unknown option '--frobnicate'" "" --frobnicate job.ini
error "malformed --set"         "--set 'batch_tokens=5': expected section.key=value" "" --set batch_tokens=5 job.ini
error "not INI syntax"          "job.ini:2: not INI syntax" '2i this line is not ini' job.ini
error "key outside a section"   "job.ini:2: key 'stray' is outside any \[section\]" '2i stray = 1' job.ini
error "section twice"           "section \[encoder.ffn\] appears twice \(first at line [0-9]+\)" '$a [encoder.ffn]\ntype = ffn' job.ini
error "NUL byte in job file"    "job.ini: job file contains a NUL byte" 's/^\[job\]/[job]\x00/' job.ini
error "unknown [job] key"       "job.ini:8: \[job\] unknown key 'batch_size'" 's/^batch_tokens = /batch_size = /' job.ini
error "wrong type"              "\[job\] batch_tokens = 'lots': expected an integer" 's/^batch_tokens = .*/batch_tokens = lots/' job.ini
error "bad choice"              "output_dtype = 'float64': expected one of float32, float16, bfloat16" 's/^\[job\]/[job]\noutput_dtype = float64/' job.ini
error "duplicate key"           "key 'output' is set twice" 's/^\[job\]/[job]\noutput = a.h5/' job.ini
error "missing input key"       "\[job\] requires key 'input'" '/^input = /d' job.ini
error "missing weights key"     "\[model\] requires key 'weights'" '/^weights = /d' job.ini
error "missing [model]"         "job.ini: missing section \[model\]" 's/^\[model\]/[modle]/' job.ini
error "d_model out of range"    "\[model\] d_model = '0': expected an integer in 1..65536" 's/^d_model = .*/d_model = 0/' job.ini
error "max_seq_len too long"    "\[job\] max_seq_len: must be in 2..\[model\] max_positions" 's/^max_seq_len = .*/max_seq_len = 4096/' job.ini
error "batch smaller than doc"  "\[job\] batch_tokens: must be at least max_seq_len" 's/^batch_tokens = .*/batch_tokens = 16/' job.ini
error "pipeline_stages zero"    "\[job\] pipeline_stages = '0': expected an integer in 1..2147483647" 's/^\[job\]/[job]\npipeline_stages = 0/' job.ini
error "unknown layer type"      "no plugin provides layer type 'transformer_magic'" 's/^type = mha/type = transformer_magic/' job.ini
error "unknown plugin key"      "unknown key 'dropout' \(not a parameter of layer type mha\)" 's/^n_heads = 4/n_heads = 4\ndropout = 0.1/' job.ini
error "heads do not divide d"   "n_heads" 's/^n_heads = 4/n_heads = 5/' job.ini
error "section without type"    "section \[extra\] has no 'type' key" '$a [extra]\nfoo = 1' job.ini
error "orphan sublayer"         "no block \(a section with 'repeat'\) precedes it" '$a [nowhere.ffn]\ntype = ffn' job.ini
error "pooled from token model" "output_kind = pooled but the model does not pool" 's/^\[job\]/[job]\noutput_kind = pooled/' job.ini
error "unwritable output"       "/nonexistent-dir/out.h5" 's#^output = .*#output = /nonexistent-dir/out.h5#' job.ini
error "output is the input"     "the output is the same file as the corpus" 's#^output = .*#output = good/input.h5#' job.ini

# --- small cases that once passed silently
error "repeat below the weights' layers" \
  "\[encoder\] repeat = 5, but weights good/model.h5 hold group /encoder/5 too.*extra_layers = ignore" \
  's/^repeat = .*/repeat = 5/' job.ini
odd "repeat below the weights' layers, on purpose" "f['hidden'].shape[0] > 0" \
  's/^repeat = .*/repeat = 5\nextra_layers = ignore/' job.ini
rm -f 'out.h5   # a note' 'out.h5 ; a note'
odd "inline # comment"          "f['hidden'].shape[0] > 0" 's/^output = .*/output = out.h5   # a note/' job.ini
[ ! -e 'out.h5   # a note' ] || { failed=$((failed + 1)); echo "FAIL inline # comment: a file named with the comment exists"; }
odd "inline ; comment"          "f['hidden'].shape[0] > 0" 's/^output = .*/output = out.h5 ; a note/' job.ini
cp good/input.h5 'in#put.h5'
odd "# inside a value (no space before it)" "f['hidden'].shape[0] > 0" 's|^input = .*|input = in#put.h5|' job.ini
# No line cap: a 20,000-character line is read whole.
odd "20,000-character line"     "f['hidden'].shape[0] > 0" "\$a ; $(head -c 20000 /dev/zero | tr '\0' x)" job.ini

finish
