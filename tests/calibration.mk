# tests fragment: see Makefile.am
# An int8 job's calibration recorded in its output and taken again
# ([model] calibration = FILE): the rows of documents two corpora share are
# bitwise equal at 1 and 2 ranks and threads, a resume keeps its file's
# calibration, and the bad inputs (other weights or plan, an fp32 job's
# file, missing, a FIFO, a damaged group) are refused in one line.
dist_check_SCRIPTS += tests/calibration/calibration.sh
TESTS += tests/calibration/calibration.sh
EXTRA_DIST += tests/calibration/shared_rows.py
