#!/usr/bin/python3
"""What a tfenc-batch output file says about a job's progress, for the tests
that stop jobs part-way.

usage: progress.py count FILE
         prints "DONE TOTAL COMPLETE": documents finished (length written),
         documents in all, and the complete attribute; "0 0 0" when the
         file is missing or not yet readable
       progress.py wait FILE FRACTION PID
         returns once at least FRACTION of the documents (and at least one)
         are finished in FILE, or once process PID has ended

Lengths are written after the rows they describe, so a finished count is
what a resumed run will see. Reading while the job writes is safe: the
file's structure is written and flushed at creation and only raw data
changes later; file locking is off because a single writer holds the lock.
"""

import math
import os
import sys
import time

os.environ["HDF5_USE_FILE_LOCKING"] = "FALSE"
import h5py  # noqa: E402  (reads the variable at import)


def count(path):
    try:
        with h5py.File(path, "r") as f:
            lengths = f["lengths"][()]
            return int((lengths >= 0).sum()), len(lengths), int(f.attrs["complete"])
    except Exception:  # no file yet, or killed before it was readable
        return 0, 0, 0


def wait(path, fraction, pid):
    while True:
        try:
            os.kill(pid, 0)
        except OSError:
            return
        done, total, _ = count(path)
        if total > 0 and done >= max(1, math.ceil(fraction * total)):
            return
        time.sleep(0.02)


if __name__ == "__main__":
    if sys.argv[1] == "count":
        print(*count(sys.argv[2]))
    else:
        wait(sys.argv[2], float(sys.argv[3]), int(sys.argv[4]))
