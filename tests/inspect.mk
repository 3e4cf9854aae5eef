# Asking an output file what it is: tfenc-batch --status (core/output/inspect.c) on
# running, complete, killed, older-version and foreign files, written by 1-
# and 2-rank jobs.
dist_check_SCRIPTS += tests/inspect/status.sh
TESTS += tests/inspect/status.sh
