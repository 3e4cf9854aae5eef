#!/bin/sh
# Plugins and the files a job names: files that are not tfenc plugins, the
# loading policy (core/plugin/plugin_loader.h: truncated, writable by
# others, duplicate types, a plugin that ends the process, declared keys
# that disagree with the code, files the job must never load), callbacks
# that fail or answer nonsense without a word, plugin memory errors
# (core/base/plugin_guard.h: canaries, guard pages with TFENC_CHECK_PLUGINS,
# a crash named before the process dies), and every path key against
# FIFOs, sockets, directories, devices and links.
# The rules every case is held to are in common.sh.
set -u
. "$(dirname "$0")/common.sh"

# --- plugins that are not tfenc plugins (the job needs the type they would give)
error "plugin not a shared object" "no plugin provides layer type 'fake_layer'.*refused [^ ]*plugins-fake/fake_layer.so: not an ELF shared object" \
  's#^\[model\]#[model]\nplugin_path = plugins-fake#; s/^type = mha/type = fake_layer/' job.ini
error "plugin of an older ABI"  "layer type 'old_layer': plugin [^ ]*plugins-old/old_layer.so: built for plugin ABI 0.9" \
  's#^\[model\]#[model]\nplugin_path = plugins-old#; s/^type = mha/type = old_layer/' job.ini
error "plugin without entry"    "plugin [^ ]*plugins-no-entry/some_layer.so: not a tfenc plugin: .*tfenc_plugin_descriptor" \
  's#^\[model\]#[model]\nplugin_path = plugins-no-entry#; s/^type = mha/type = some_layer/' job.ini

# --- the loading policy (core/plugin/plugin_loader.h): each of these crashed, hung,
# ran foreign code or passed silently before it
with_plugins() { # DIRECTORY [MORE SED]: plugin_path = DIRECTORY, then MORE
  printf '%s' "s#^\[model\]#[model]\nplugin_path = $1#${2:+; $2}"
}
add_layer() { # TYPE: one more layer at the end of the model
  printf '%s' "\$a [extra]\ntype = $1"
}
for size in 2048 10240 30720; do
  error "truncated plugin ($size bytes)" \
    "no plugin provides layer type 'truncated_$size'.*refused [^ ]*plugins-truncated/truncated_$size.so: .*(truncated|too short)" \
    "$(with_plugins plugins-truncated "$(add_layer truncated_$size)")" job.ini
done
listing "truncated plugins" "plugins-truncated/truncated_2048.so: .*truncated" "$PWD/plugins-truncated"
odd "a truncated plugin the job does not need" "f['hidden'].shape[0] > 0" \
  "$(with_plugins plugins-unused-truncated)" job.ini
error "world-writable plugin directory" \
  "no plugin provides layer type 'scale'.*refused [^ ]*plugins-world: search directory writable by every user" \
  "$(with_plugins plugins-world "$(add_layer scale)")" job.ini
error "group-writable plugin directory" \
  "no plugin provides layer type 'scale'.*refused [^ ]*plugins-group: search directory writable by its group" \
  "$(with_plugins plugins-group "$(add_layer scale)")" job.ini
error "world-writable plugin file" \
  "no plugin provides layer type 'scale'.*refused [^ ]*plugins-file-mode/arithmetic.so: writable by every user" \
  "$(with_plugins plugins-file-mode "$(add_layer scale)")" job.ini
if [ -f plugins-owner/arithmetic.so ]; then
  error "plugin of another user" \
    "no plugin provides layer type 'scale'.*refused [^ ]*plugins-owner/arithmetic.so: owned by uid 65534" \
    "$(with_plugins plugins-owner "$(add_layer scale)")" job.ini
else
  echo "note plugin of another user: not run (making a file of another user needs root)"
fi
error "a second pooling (declared)" \
  "layer type 'pooling' is provided by both [^ ]*plugins-shadow/shadow.so and [^ ]*layers.so" \
  "$(with_plugins plugins-shadow "$(add_layer pooling)")" job.ini
error "a second pooling (by name)" \
  "layer type 'pooling' is provided by both [^ ]*plugins-named-pooling/pooling.so and [^ ]*layers.so" \
  "$(with_plugins plugins-named-pooling "$(add_layer pooling)")" job.ini
error "constructor calls _exit(0)" \
  "plugin [^ ]*plugins-exit/exit_layer.so: ends the process while loading, with exit status 0" \
  "$(with_plugins plugins-exit "$(add_layer exit_layer)")" job.ini
error "create() calls exit(0)"  "the process was ended by exit\(\) from inside a plugin" \
  "$(with_plugins plugins-exit "$(add_layer exit_create)")" job.ini
error "plugin reads an undeclared key" \
  "layer type reads_undeclared reads key 'alpha', which its declared parameter table lacks" \
  "$(with_plugins plugins-tables "$(add_layer reads_undeclared)")" job.ini
error "plugin ignores a declared key" \
  "layer type ignores_declared declares key 'gamma' but its create\(\) never reads it" \
  "$(with_plugins plugins-tables "$(add_layer ignores_declared)")" job.ini
error "type described, not declared" "no plugin provides layer type 'undeclared_type'" \
  "$(with_plugins plugins-tables "$(add_layer undeclared_type)")" job.ini
listing "type described, not declared" \
  "undeclared_key.so: describes layer type 'undeclared_type' but does not declare it" "$PWD/plugins-tables"
error "FIFO named like a plugin" \
  "no plugin provides layer type 'fifo_layer'.*refused [^ ]*plugins-fifo/fifo_layer.so: is a FIFO" \
  "$(with_plugins plugins-fifo "$(add_layer fifo_layer)")" job.ini
listing "hostile plugins" "plugins-exit/exit_layer.so: ends the process while loading" \
  "$PWD/plugins-exit:$PWD/plugins-fifo:$PWD/plugins-truncated:$PWD/plugins-world"
# marker.so's constructor creates $TFENC_TEST_MARKER; the job needs only
# `scale` from that directory, so marker.so must never be loaded.
rm -f marker-trace
TFENC_TEST_MARKER=$PWD/marker-trace
export TFENC_TEST_MARKER
odd "only the plugin files the job needs" "f['hidden'].shape[0] > 0" \
  "$(with_plugins plugins-marker "$(add_layer scale)")" job.ini
if [ -e marker-trace ]; then
  failed=$((failed + 1))
  echo "FAIL only the plugin files the job needs: marker.so was loaded (its constructor ran)"
else
  passed=$((passed + 1))
  echo "ok   only the plugin files the job needs: marker.so never loaded"
fi
unset TFENC_TEST_MARKER
# plugin_path = . is the job file's directory, not where tfenc-batch runs.
odd "plugin_path = . beside the job file" "f['hidden'].shape[0] > 0" "" jobdir/job.ini

# --- plugin callbacks that fail or answer nonsense without a word: the
# host names the layer and the callback (issue 46 item 12)
error "output() fails without a message" \
  "layer extra \(silent_output\): output\(\) failed without a message \(plugin error\)" \
  "$(with_plugins plugins-silent "$(add_layer silent_output)")" job.ini
error "flops_per_token() returns NaN" \
  "layer extra \(nan_flops\): flops_per_token\(\) returned nan for sequences of mean length [0-9.]+ \(expected a finite count >= 0\)" \
  "$(with_plugins plugins-silent "$(add_layer nan_flops)")" job.ini
error "workspace_size() asks for 2^62 bytes" \
  "layer extra \(huge_workspace\): workspace_size\(\) asks for 4611686018427387904 bytes, more than this node's memory \([0-9]+ bytes\)" \
  "$(with_plugins plugins-silent "$(add_layer huge_workspace)")" job.ini
error "forward() records an error and returns TFENC_OK" \
  "layer extra \(quiet_success\): recorded, then forgotten \(forward\(\) returned TFENC_OK after recording it\)" \
  "$(with_plugins plugins-silent "$(add_layer quiet_success)")" job.ini

# --- plugin memory errors, contained and named (issue 46 item 13): a
# canary after the workspace and after the batch's rows, checked after
# every forward(); a crash inside forward() named before the process dies;
# with TFENC_CHECK_PLUGINS=1 a guard page right after each
memory="plugin [^ ]*plugins-memory/memory_errors.so"
error "forward() writes 8 KiB into a 64-byte workspace" \
  "layer extra \(workspace_overrun\), $memory: forward\(\) wrote past the end of its workspace \(64 bytes, workspace_size\(\)\): [0-9]+ bytes after it overwritten" \
  "$(with_plugins plugins-memory "$(add_layer workspace_overrun)")" job.ini
error "forward() writes 256 bytes past the batch's rows" \
  "layer extra \(rows_overrun\), $memory: forward\(\) wrote past the end of the batch's rows \(batch->x, [0-9]+ x [0-9]+ values\): 256 bytes after it overwritten" \
  "$(with_plugins plugins-memory "$(add_layer rows_overrun)")" job.ini
error "forward() points batch->x elsewhere" \
  "layer extra \(moves_x\), $memory: forward\(\) changed batch->x \(only batch->rows may change\)" \
  "$(with_plugins plugins-memory "$(add_layer moves_x)")" job.ini
crash "forward() writes to address 64" \
  "layer extra \(crash_forward\), $memory: crashed in forward\(\): Segmentation fault$" \
  "$(with_plugins plugins-memory "$(add_layer crash_forward)")" job.ini
# Past the canary, without touching it: only a guard page sees it.
TFENC_CHECK_PLUGINS=1
export TFENC_CHECK_PLUGINS
crash "TFENC_CHECK_PLUGINS=1: a write 1 KiB past the batch's rows" \
  "layer extra \(rows_overrun\), $memory: crashed in forward\(\): Segmentation fault, on the guard page after the batch's rows \(batch->x\)$" \
  "$(with_plugins plugins-memory "\$a [extra]\ntype = rows_overrun\noffset = 1024\nbytes = 4")" job.ini
crash "TFENC_CHECK_PLUGINS=1: 8 KiB into a 64-byte workspace" \
  "layer extra \(workspace_overrun\), $memory: crashed in forward\(\): Segmentation fault, on the guard page after the workspace$" \
  "$(with_plugins plugins-memory "$(add_layer workspace_overrun)")" job.ini
crash "TFENC_CHECK_PLUGINS=1: forward() writes into batch->token_ids" \
  "layer extra \(writes_token_ids\), $memory: crashed in forward\(\): Segmentation fault, in the batch's token arrays, which plugins may only read$" \
  "$(with_plugins plugins-memory "$(add_layer writes_token_ids)")" job.ini
unset TFENC_CHECK_PLUGINS

# --- every path key the job reads against special files: refused in one
# line naming the key, never a wait (60 s is a failure)
for pair in "a-fifo|is a FIFO or pipe" "a-socket|is a socket" "a-directory|is a directory" "/dev/zero|is a character device"; do
  file=${pair%%|*} what=${pair#*|}
  # A directory is a corpus of its files ; this one has none.
  corpus_what=$what
  [ "$file" = a-directory ] && corpus_what="the directory holds no file"
  error "HDF5 corpus is $file"  "\[job\] input $file: $corpus_what" "$(hdf5_input "$file")" job.ini
  error "text corpus is $file"  "\[job\] input $file: $corpus_what" "$(text_input "$file")" job.ini
  error "weights are $file"     "\[model\] weights $file: $what" "$(weights "$file")" job.ini
  error "vocabulary is $file"   "vocabulary $file: $what" "$(text_input text.txt)" --set "tokenizer.vocab=$file" job.ini
  error "tokenizer.json is $file" "tokenizer $file: $what" "$(json_tokenizer "$file")" job.ini
done
error "plugin_path is a FIFO" "no plugin provides layer type 'scale'.*refused a-fifo: search directory is not a directory" \
  "$(with_plugins a-fifo "$(add_layer scale)")" job.ini
# /dev/stdin names whatever stdin is: a regular file works (one rank: under
# mpirun only rank 0 has the shell's stdin), a pipe is refused like a FIFO.
stdin=text.txt
odd_at 1 "corpus /dev/stdin from a file" "list(f['lengths'][:]) == [4]" "$(text_input /dev/stdin)" job.ini
rm -f pipe-fifo
mkfifo pipe-fifo
(sleep 5 > pipe-fifo &) # a writer that keeps the pipe open, as `cat x |` would
stdin=pipe-fifo
error_at 1 "corpus /dev/stdin from a pipe" "\[job\] input /dev/stdin: is a FIFO or pipe" "$(text_input /dev/stdin)" job.ini
stdin=
# A symbolic link and a hard link to the corpus are the corpus.
ln -sf good/input.h5 input-link.h5
ln -f good/input.h5 input-hardlink.h5
odd "corpus through a symbolic link" "f['hidden'].shape[0] > 0" "$(hdf5_input input-link.h5)" job.ini
odd "corpus through a hard link" "f['hidden'].shape[0] > 0" "$(hdf5_input input-hardlink.h5)" job.ini
error "output on /proc"         "\[job\] output /proc/x.h5: /proc is on a file system that cannot hold files" \
  's#^output = .*#output = /proc/x.h5#' job.ini

finish
