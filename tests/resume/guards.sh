#!/bin/sh
# The ways an output could silently lose data
# or be wrong while marked complete, each tried at 1 and 2 ranks.
#  1. the output is an input under another spelling (absolute path, ./,
#     a symbolic link, a hard link) or the job file, weights, vocabulary:
#     refused, and the input is unchanged;
#  2. two jobs writing one output at once: the second is refused naming the
#     first (host, pid), and the file holds the first job's rows only;
#  3. a resume whose corpus or vocabulary changed, with the same line
#     count: refused naming the file;
#  4. a layer that overflows float32 on one document: the job stops naming
#     the layer and the document, and no non-finite row is marked finished;
#  7. an output that is a device (/dev/null), a directory or a FIFO:
#     refused in one line, no crash;
#  9. a JSON Lines id longer than max_id_bytes: refused with its line;
# 10. an unfinished file damaged since it was begun (offsets decreasing in
#     its finished part, `truncated` stored as floats, `hidden` one value
#     narrower): the resume is refused in one line naming the file and the
#     dataset, and nothing is appended (output/output_layout.h);
#  and tfenc-import's outputs (-o, --job) that are files of the model
#  folder it reads, under any name, are refused before anything is written.
set -u
. "$(cd "$(dirname "$0")/../pipeline" && pwd)/common.sh"
name=guards
. "$srcdir/tests/resume/fixture.sh"

for ranks in 1 2; do
  # 1. The output under another name than the input's.
  cp corpus.txt v.txt
  before=$(sha256sum v.txt)
  refused "output = the input, absolute" "the output is the same file as the corpus" \
    "$ranks" --set job.input=v.txt --set job.output="$work/v.txt" --set job.resume=false job.ini
  refused "output = ./input" "the output is the same file as the corpus" \
    "$ranks" --set job.input=v.txt --set job.output=./v.txt job.ini
  ln -sf v.txt link.h5
  refused "output = a symlink to the input" "the output is the same file as the corpus" \
    "$ranks" --set job.input=v.txt --set job.output=link.h5 job.ini
  ln -f v.txt hard.h5
  refused "output = a hard link to the input" "the output is the same file as the corpus" \
    "$ranks" --set job.input=v.txt --set job.output=hard.h5 job.ini
  refused "output = the job file" "the output is the same file as the job file" \
    "$ranks" --set job.output=job.ini job.ini
  refused "output = the weights" "the output is the same file as the weights" \
    "$ranks" --set job.output=model.h5 job.ini
  refused "output = the vocabulary" "the output is the same file as the vocabulary" \
    "$ranks" --set job.output=vocab.txt job.ini
  [ "$(sha256sum v.txt)" = "$before" ] || fail "the input changed although every run was refused"

  # 7. Outputs that are not files.
  refused "output = /dev/null" "/dev/null: exists and is a character device" \
    "$ranks" --set job.output=/dev/null job.ini
  mkdir -p a-directory.h5
  refused "output = a directory" "a-directory.h5: exists and is a directory" \
    "$ranks" --set job.output=a-directory.h5 job.ini
  rm -f fifo.h5 && mkfifo fifo.h5
  refused "output = a FIFO" "fifo.h5: exists and is a FIFO" \
    "$ranks" --set job.output=fifo.h5 job.ini

  # 9. A huge JSON Lines id.
  "$python" -c "
import json
with open('ids.jsonl', 'w') as f:
    f.write(json.dumps({'id': 'short', 'text': 'a short one'}) + '\n')
    f.write(json.dumps({'id': 'x' * 2000000, 'text': 'a long id'}) + '\n')"
  refused "a 2 MB id" "ids.jsonl: line 2: id field 'id' is 2000000 bytes long, more than \[job\] max_id_bytes = 1024" \
    "$ranks" --set job.input=ids.jsonl --set job.id_field=id --set job.output=ids.h5 job.ini

  # 4. A layer overflowing on the documents that hold token `library`.
  library=$(grep -n '^library$' vocab.txt | cut -d: -f1)
  awk -v id=$((library - 1)) '/^\[pooling\]/ { printf "[poison]\ntype = overflow\non_token = %d\n\n", id } { print }' \
    job.ini > poison.ini
  # Only the corpus's last document holds it: windows before it finish.
  { grep -v -w library big.txt; echo "The library opens at nine."; } > poison.txt
  last=$(($(wc -l < poison.txt) - 1))
  rm -f poison.h5
  refused "a layer overflows" "poison.txt: document $last (0-based): layer poison (overflow) made a non-finite value" \
    "$ranks" --set job.input=poison.txt --set job.output=poison.h5 --set job.window_documents=64 poison.ini
  "$python" - poison.h5 <<'PY' || fail "overflow [$ranks]: a non-finite row is marked finished, or the file is complete"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    done = f["lengths"][:] >= 0
    assert int(f.attrs["complete"]) == 0
    assert not done[-1], "the overflowing document is marked finished"
    assert np.isfinite(f["embeddings"][:][done]).all()
PY

  # 10. Damaged unfinished files: a per-token output (the encoder without
  # its pooling) whose last documents are unfinished, damaged one way each.
  awk '/^\[pooling\]/ { exit } { print }' job.ini > tokens.ini
  for damage in offsets dtype width; do
    rm -f damaged.h5
    run "$ranks" --set job.input=big.txt --set job.output=damaged.h5 tokens.ini
    [ "$status" -eq 0 ] || fail "damaged $damage [$ranks]: the first run failed: $message"
    "$python" - damaged.h5 "$damage" <<'PY' || fail "damaged $damage [$ranks]: cannot damage the file"
import sys, h5py, numpy as np
path, damage = sys.argv[1], sys.argv[2]
with h5py.File(path, "r+") as f:
    f.attrs["complete"] = np.int32(0)
    f["lengths"][-5:] = -1  # the last five documents unfinished: a resume is due
    if damage == "offsets":
        offsets = f["offsets"]
        offsets[3], offsets[4] = int(offsets[4]), int(offsets[3])
    elif damage == "dtype":
        truncated = f["truncated"][:]
        del f["truncated"]
        f["truncated"] = truncated.astype(np.float32)
    else:
        hidden = f["hidden"][:]
        del f["hidden"]
        f["hidden"] = hidden[:, 1:]
PY
    before=$(sha256sum damaged.h5)
    refused "a resume over $damage damaged" "damaged.h5: .*dataset '\(offsets\|truncated\|hidden\)'" \
      "$ranks" --set job.input=big.txt --set job.output=damaged.h5 tokens.ini
    [ "$(grep -c '^tfenc-batch: ' run.err)" -eq 1 ] || fail "damaged $damage [$ranks]: not one line: $(cat run.err)"
    [ "$(sha256sum damaged.h5)" = "$before" ] || fail "damaged $damage [$ranks]: the refused resume changed the file"
  done

  # 3. A corpus edited in place (same line count), then swapped for
  # another of the same length, between a run and its resume.
  cp big.txt edited.txt
  rm -f edited.h5
  run "$ranks" --set job.input=edited.txt --set job.output=edited.h5 job.ini
  [ "$status" -eq 0 ] || fail "corpus changed [$ranks]: the first run failed: $message"
  sed -i '3s/^/edited: /' edited.txt
  refused "a corpus edited since" "edited.h5: the corpus .*edited.txt is not the one the run that began this file read" \
    "$ranks" --set job.input=edited.txt --set job.output=edited.h5 job.ini
  cp vocab.txt vocab-copy.txt
  rm -f vocab.h5
  run "$ranks" --set tokenizer.vocab=vocab-copy.txt --set job.output=vocab.h5 job.ini
  [ "$status" -eq 0 ] || fail "vocabulary changed [$ranks]: the first run failed: $message"
  sed -i '500s/.*/changedtoken/' vocab-copy.txt
  refused "a vocabulary edited since" "vocab.h5: the vocabulary .*vocab-copy.txt is not the one" \
    "$ranks" --set tokenizer.vocab=vocab-copy.txt --set job.output=vocab.h5 job.ini
done

# 2. Two 2-rank jobs on one output at once, started until they overlap
# (the first is slowed by the pause layer so the second starts inside it).
printf '\n[pause]\ntype = pause\nmilliseconds = 40\n' >> job.ini
tac big.txt > other.txt
rm -f shared.h5
(exec "$mpiexec" -n 2 "$driver" --quiet --set job.input=big.txt --set job.output=shared.h5 job.ini \
   > first.out 2> first.err) &
first=$!
# Until the first job holds the output (its lock file names it).
for _ in $(seq 1 200); do
  grep -q 'host' shared.h5.lock 2>/dev/null && break
  sleep 0.1
done
refused "a second job on a held output" "shared.h5: in use by another tfenc-batch job (host .*, pid [0-9]*, since" \
  2 --set job.input=other.txt --set job.output=shared.h5 job.ini
wait "$first" || fail "the first job failed: $(head -n 2 first.err)"
[ "$(complete_of shared.h5)" = 1 ] || fail "the first job's file is not complete"
[ ! -e shared.h5.lock ] || fail "the lock file is left after the job"
# Its rows must be the first corpus's alone: equal to a run by itself.
rm -f alone.h5
run 1 --set job.input=big.txt --set job.output=alone.h5 job.ini
"$python" "$srcdir/tests/pipeline/compare_layouts.py" alone.h5 shared.h5 \
  || fail "the held output's rows are not the first job's alone"

# tfenc-import over its own checkpoint.
"$generate" checkpoint "$python" "$srcdir/tests/import/make_checkpoint.py" bert checkpoint \
  >/dev/null || exit 1
before=$(cat checkpoint/* 2>/dev/null | sha256sum)
import_refused() { # import_refused WHAT PATTERN ARGS...
  what=$1 pattern=$2
  shift 2
  if "$builddir/drivers/tfenc-import" checkpoint "$@" > import.out 2> import.err; then
    fail "tfenc-import $what: accepted"
  elif ! grep -q -- "$pattern" import.err; then
    fail "tfenc-import $what: $(cat import.err)"
  else
    echo "guards: ok   tfenc-import $what: $(cat import.err)"
  fi
}
import_refused "-o its own safetensors" "the output is the same file as a file of the model folder" \
  -o checkpoint/model.safetensors
ln -sf checkpoint/config.json alias.h5
import_refused "-o a link to its config.json" "the output is the same file as a file of the model folder" \
  -o alias.h5
import_refused "--job over its vocabulary" "the output is the same file as a file of the model folder" \
  -o new.h5 --job ./checkpoint/../checkpoint/vocab.txt
import_refused "-o and --job alike" "-o and --job name the same file" -o same.h5 --job same.h5
[ "$(cat checkpoint/* 2>/dev/null | sha256sum)" = "$before" ] || fail "the checkpoint changed"

if [ "$failed" -ne 0 ]; then
  echo "guards: FAIL ($failed)"
  exit 1
fi
echo "guards: every guard held"
