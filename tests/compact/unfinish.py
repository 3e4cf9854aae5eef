"""Makes a finished output look like a killed run's: documents FROM.. are
marked unwritten (lengths -1), their rows zeroed, complete = 0, so that a
resume must encode them again with the file's own ranges.

usage: unfinish.py FILE.h5 FROM
"""

import sys

import h5py

path, first = sys.argv[1], int(sys.argv[2])
with h5py.File(path, "r+") as f:
    f["lengths"][first:] = -1
    f["embeddings"][first:] = 0
    f.attrs["complete"] = 0
