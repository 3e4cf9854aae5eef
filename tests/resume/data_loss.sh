#!/bin/sh
# The ways a job could still lose or corrupt data
# without a word, each tried at 1 and 2 ranks (under the sanitizers at 2).
#  1. the output is an input under another name (a hard or a symbolic
#     link), for every path key the job reads ([job] input, [model]
#     weights, [tokenizer] vocab and json), the job file and the plugins:
#     refused, naming the input, which is unchanged;
#  2. a second job writing a running job's output through a symbolic or a
#     hard link (resume on or off): refused before anything is truncated,
#     naming the running job's output; the first job's file is complete
#     and holds its rows alone;
#  3. a resume with a plugin file of other content than the run that began
#     the output loaded: refused naming the plugin; with the same content
#     it resumes;
#  4. (a) an HDF5 corpus truncated while the job reads it: the job stops
#     naming the file, no window is finished from zeros, and a resume over
#     the restored corpus gives the uninterrupted run's file; (b) the
#     weights truncated while the layers load them: refused naming the file,
#     no output marked complete; (c) the vocabulary changed after the
#     tokenizer read it and before its fingerprint is taken, and a text
#     corpus changed mid-run: refused naming the file, not complete.
set -u
. "$(cd "$(dirname "$0")/../pipeline" && pwd)/common.sh"
name=data_loss
# Under the sanitizers each case runs once, at 2 ranks: they look for memory
# errors on the refusal paths, which a run at 2 ranks takes as one at 1
# does; the normal build tries both counts.
rank_counts="1 2"
[ -z "${TFENC_SANITIZER_BUILD:-}" ] || rank_counts=2
# Where the sanitizer build runs its share (tests/run-all.sh --sanitizers):
# the other count.
[ -z "${TFENC_ONLY_UNSANITIZED_CASES:-}" ] || rank_counts=1
. "$srcdir/tests/resume/fixture.sh"
"$python" "$srcdir/tests/resume/wordpiece_json.py" vocab.txt tokenizer.json || exit 1
# The same job with the tokenizer.json (which sets its own normalizer).
sed 's/^vocab = vocab.txt/json = tokenizer.json/; /^lowercase = /d' job.ini > json.ini

# A job that loads a plugin of the tests (type scale, from arithmetic.so).
printf '\n[scaled]\ntype = scale\nfactor = 1\n' | cat job.ini - > plugin.ini
plugin=$builddir/tests/plugins/.libs/arithmetic.so
for ranks in $rank_counts; do
  # 1. Every input, under a hard and a symbolic link, with resume off
  # (the run would truncate the output).
  for input in job.ini corpus.txt model.h5 vocab.txt tokenizer.json "$plugin"; do
    case $input in
      job.ini) named="the job file"; job=job.ini ;;
      corpus.txt) named="the corpus (\[job\] input)"; job=job.ini ;;
      model.h5) named="the weights (\[model\] weights)"; job=job.ini ;;
      vocab.txt) named="the vocabulary (\[tokenizer\] vocab)"; job=job.ini ;;
      tokenizer.json) named="the tokenizer (\[tokenizer\] json)"; job=json.ini ;;
      *) named="the plugin (scale)"; job=plugin.ini ;;
    esac
    before=$(sha256sum < "$input")
    for link in hard symbolic; do
      rm -f alias.h5
      if [ $link = hard ]; then ln "$input" alias.h5; else ln -s "$input" alias.h5; fi
      refused "output = a $link link to $(basename "$input")" \
        "alias.h5: the output is the same file as $named" \
        "$ranks" --set job.output=alias.h5 --set job.resume=false $job
      [ "$(sha256sum < "$input")" = "$before" ] || fail "$input changed although the run was refused"
    done
  done

  # 3. The plugin rebuilt between a run and its resume (here: its bytes
  # changed), taken from the job's plugin_path alone.
  rm -rf myplugins plug.h5 && mkdir myplugins && cp "$plugin" myplugins/
  all_plugins=$TFENC_PLUGIN_PATH
  TFENC_PLUGIN_PATH=$builddir/plugins/.libs
  run "$ranks" --set model.plugin_path=myplugins --set job.output=plug.h5 plugin.ini
  [ "$status" -eq 0 ] || fail "plugin [$ranks]: the first run failed: $message"
  printf 'rebuilt' >> myplugins/arithmetic.so
  refused "a resume with a rebuilt plugin" \
    "plug.h5: the plugin .*myplugins/arithmetic.so is not the one the run that began this file loaded" \
    "$ranks" --set model.plugin_path=myplugins --set job.output=plug.h5 plugin.ini
  cp "$plugin" myplugins/
  run "$ranks" --set model.plugin_path=myplugins --set job.output=plug.h5 plugin.ini
  [ "$status" -eq 0 ] || fail "plugin [$ranks]: the resume with the same plugin failed: $message"
  TFENC_PLUGIN_PATH=$all_plugins
done

# 2. A 2-rank job writing out/shared.h5, slowed by the pause layer; second
# jobs reach the same file through other names meanwhile.
printf '\n[pause]\ntype = pause\nmilliseconds = 300\n' | cat job.ini - > pause.ini
tac big.txt > other.txt
rm -rf out elsewhere && mkdir out elsewhere
(exec "$mpiexec" -n 2 "$driver" --quiet --set job.input=big.txt --set job.output=out/shared.h5 \
   pause.ini > first.out 2> first.err) &
first=$!
for _ in $(seq 1 300); do
  grep -q 'host' out/shared.h5.lock 2>/dev/null && break
  sleep 0.1
done
# Its ranks stopped (SIGSTOP) while the second jobs try: its pauses alone
# ran out before they were done on a loaded machine. A stopped job still
# holds its lock; it goes on (SIGCONT) once they are done.
first_ranks=$(ps -o pid= --ppid "$first")
kill -STOP $first_ranks
ln -s ../out/shared.h5 elsewhere/symbolic.h5
ln out/shared.h5 elsewhere/hard.h5
for ranks in $rank_counts; do
  for link in symbolic hard; do
    for resume in true false; do
      refused "a second job through a $link link, resume = $resume" \
        "elsewhere/$link.h5: in use by another tfenc-batch job (host .*, pid [0-9]*, since .*, writing $work/out/shared.h5)" \
        "$ranks" --set job.input=other.txt --set job.output=elsewhere/$link.h5 --set job.resume=$resume job.ini
    done
  done
done
kill -0 "$first" 2>/dev/null || fail "the first job ended before the second jobs were tried: make its pause longer"
kill -CONT $first_ranks
wait "$first" || fail "the first job failed: $(head -n 2 first.err)"
[ "$(complete_of out/shared.h5)" = 1 ] || fail "the first job's file is not complete"
rm -f alone.h5
run 1 --set job.input=big.txt --set job.output=alone.h5 job.ini
"$python" "$srcdir/tests/pipeline/compare_layouts.py" alone.h5 out/shared.h5 \
  || fail "the held output's rows are not the first job's alone"

# 4a. An HDF5 token-id corpus cut to half its size once the job has
# finished some documents (the pause layer keeps it running meanwhile).
"$python" "$srcdir/tests/pipeline/make_inputs.py" hdf5 ids.h5 3000 512 60 7 || exit 1
cp ids.h5 ids-intact.h5
sed 's/^\[tokenizer\]$/[unused]/; /^vocab = /d; /^lowercase = /d; /^\[unused\]$/d' job.ini \
  > ids.ini
printf '\n[pause]\ntype = pause\nmilliseconds = 60\n' >> ids.ini
rm -f alone-ids.h5
run 1 --set job.input=ids-intact.h5 --set job.output=alone-ids.h5 --set job.window_documents=64 ids.ini
[ "$status" -eq 0 ] || fail "truncated corpus: the uninterrupted run failed: $message"
for ranks in $rank_counts; do
  cp ids-intact.h5 ids.h5
  rm -f cut.h5
  (if [ "$ranks" -eq 1 ]; then exec timeout 300 "$driver" --quiet --set job.input=ids.h5 \
     --set job.output=cut.h5 --set job.window_documents=64 ids.ini
   else exec timeout 300 "$mpiexec" -n "$ranks" "$driver" --quiet --set job.input=ids.h5 \
     --set job.output=cut.h5 --set job.window_documents=64 ids.ini; fi > cut.out 2> cut.err) &
  job=$!
  for _ in $(seq 1 600); do
    "$driver" --status cut.h5 2>/dev/null | grep -q '^documents: [1-9]' && break
    sleep 0.1
  done
  "$python" -c "import os, sys; os.truncate(sys.argv[1], os.path.getsize(sys.argv[1]) // 2)" ids.h5
  wait "$job"
  status=$?
  message=$(grep -m 1 '^tfenc-batch: ' cut.err)
  if [ "$status" -eq 0 ] || [ "$status" -ge 124 ] || \
     ! printf '%s\n' "$message" | grep -q "ids.h5: the file is [0-9]* bytes now, shorter than the [0-9]* its HDF5 structure needs: it was truncated while this job read"; then
    fail "a corpus truncated mid-run [$ranks]: status $status, message: $message"
  else
    echo "data_loss: ok   a corpus truncated mid-run [$ranks]: $message"
  fi
  cp ids-intact.h5 ids.h5
  run "$ranks" --set job.input=ids.h5 --set job.output=cut.h5 --set job.window_documents=64 ids.ini
  [ "$status" -eq 0 ] || fail "truncated corpus [$ranks]: the resume failed: $message"
  "$python" "$srcdir/tests/pipeline/compare_layouts.py" alone-ids.h5 cut.h5 \
    || fail "truncated corpus [$ranks]: the resumed file is not the uninterrupted run's"
done

# wait_open FILE COUNT: until COUNT processes hold FILE (in the work
# directory) open, at most 60 s: the ranks are inside the model's loading.
# A fixed pause lost that race on a loaded machine (the file cut before a
# rank had opened it is another case, which says "cannot open it").
wait_open() {
  for _ in $(seq 1 600); do
    [ "$(find /proc/[0-9]*/fd -lname "$work/$1" 2>/dev/null | cut -d/ -f3 | sort -u | wc -l)" \
      -ge "$2" ] && return 0
    sleep 0.1
  done
}

# 4b. The weights cut to half their size while the model loads: a pause
# between the embeddings and the encoder blocks holds the loading open.
awk '/^\[encoder\]$/ { printf "[hold]\ntype = pause\nmilliseconds = 0\ncreate_milliseconds = 4000\n\n" } { print }' \
  job.ini > hold.ini
for ranks in $rank_counts; do
  cp model.h5 shrinking.h5
  rm -f shrunk.h5
  (if [ "$ranks" -eq 1 ]; then exec timeout 300 "$driver" --quiet --set model.weights=shrinking.h5 \
     --set job.output=shrunk.h5 hold.ini
   else exec timeout 300 "$mpiexec" -n "$ranks" "$driver" --quiet --set model.weights=shrinking.h5 \
     --set job.output=shrunk.h5 hold.ini; fi > shrunk.out 2> shrunk.err) &
  job=$!
  wait_open shrinking.h5 "$ranks"
  "$python" -c "import os, sys; os.truncate(sys.argv[1], os.path.getsize(sys.argv[1]) // 2)" shrinking.h5
  wait "$job"
  status=$?
  message=$(grep -m 1 '^tfenc-batch: ' shrunk.err)
  if [ "$status" -eq 0 ] || [ "$status" -ge 124 ] || \
     ! printf '%s\n' "$message" | grep -q "shrinking.h5.*\(truncated while this job read\|changed while this job read it\|truncated file\)"; then
    fail "weights truncated while loading [$ranks]: status $status, message: $message"
  else
    echo "data_loss: ok   weights truncated while loading [$ranks]: $message"
  fi
  [ "$(complete_of shrunk.h5)" != 1 ] || fail "weights truncated while loading [$ranks]: the output is marked complete"
done

# 4c. The vocabulary rewritten while the model loads (after the tokenizer
# read it), and a text corpus appended to while the job encodes it.
for ranks in $rank_counts; do
  cp vocab.txt moving-vocab.txt
  rm -f moved.h5
  rm -f created.txt
  (TFENC_TEST_CREATE_MARKER=$work/created.txt
   export TFENC_TEST_CREATE_MARKER
   if [ "$ranks" -eq 1 ]; then exec timeout 300 "$driver" --quiet --set tokenizer.vocab=moving-vocab.txt \
     --set job.output=moved.h5 hold.ini
   else exec timeout 300 "$mpiexec" -n "$ranks" "$driver" --quiet --set tokenizer.vocab=moving-vocab.txt \
     --set job.output=moved.h5 hold.ini; fi > moved.out 2> moved.err) &
  job=$!
  # Every rank inside the hold layer's pause: each has read the vocabulary
  # (the tokenizer comes before the model; the weights file, which the
  # ranks open before either, told nothing: seen changing the vocabulary
  # before the second rank had read it).
  for _ in $(seq 1 600); do
    [ "$(sort -u created.txt 2>/dev/null | wc -l)" -ge "$ranks" ] && break
    sleep 0.1
  done
  echo "addedtoken" >> moving-vocab.txt
  wait "$job"
  status=$?
  message=$(grep -m 1 '^tfenc-batch: ' moved.err)
  if [ "$status" -eq 0 ] || [ "$status" -ge 124 ] || \
     ! printf '%s\n' "$message" | grep -q "moving-vocab.txt: the vocabulary (\[tokenizer\] vocab) changed while this job read it"; then
    fail "vocabulary changed while loading [$ranks]: status $status, message: $message"
  else
    echo "data_loss: ok   vocabulary changed while loading [$ranks]: $message"
  fi
  [ "$(complete_of moved.h5)" != 1 ] || fail "vocabulary changed while loading [$ranks]: the output is marked complete"

  cp big.txt growing.txt
  rm -f grown.h5
  (if [ "$ranks" -eq 1 ]; then exec timeout 300 "$driver" --quiet --set job.input=growing.txt \
     --set job.output=grown.h5 --set job.window_documents=64 pause.ini
   else exec timeout 300 "$mpiexec" -n "$ranks" "$driver" --quiet --set job.input=growing.txt \
     --set job.output=grown.h5 --set job.window_documents=64 pause.ini; fi > grown.out 2> grown.err) &
  job=$!
  for _ in $(seq 1 600); do
    "$driver" --status grown.h5 2>/dev/null | grep -q '^documents: [1-9]' && break
    sleep 0.1
  done
  echo "a line added while the job runs" >> growing.txt
  wait "$job"
  status=$?
  message=$(grep -m 1 '^tfenc-batch: ' grown.err)
  if [ "$status" -eq 0 ] || [ "$status" -ge 124 ] || \
     ! printf '%s\n' "$message" | grep -q "growing.txt: the corpus (\[job\] input) changed while this job read it"; then
    fail "corpus changed mid-run [$ranks]: status $status, message: $message"
  else
    echo "data_loss: ok   corpus changed mid-run [$ranks]: $message"
  fi
  [ "$(complete_of grown.h5)" != 1 ] || fail "corpus changed mid-run [$ranks]: the output is marked complete"
done

if [ "$failed" -ne 0 ]; then
  echo "data_loss: FAIL ($failed)"
  exit 1
fi
echo "data_loss: every guard held"
