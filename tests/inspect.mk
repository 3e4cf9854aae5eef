# Asking an output file what it is: tfenc-batch --status (core/output/inspect.c) on
# running, complete, killed, older-version and foreign files, written by 1-
# and 2-rank jobs.
dist_check_SCRIPTS += tests/inspect/status.sh
TESTS += tests/inspect/status.sh

# --status on damaged outputs of every kind (core/output/output_*_checks.c):
# index datasets that break their rules and attributes outside their
# domains, each refused in one line naming the dataset or attribute and
# the index; outputs written by 1 and 2 ranks, asked alone and under
# mpiexec -n 2.
dist_check_SCRIPTS += tests/inspect/damaged.sh
TESTS += tests/inspect/damaged.sh
EXTRA_DIST += tests/inspect/damage.py
EXTRA_DIST += tests/inspect/status_json.py
