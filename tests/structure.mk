# tests fragment: see Makefile.am
# The architecture as a check: each subsystem of core/ states in its
# fragment's header which subsystems it may use ("# may use: base job"),
# and tests/structure.sh fails when a file includes or calls upward, when a
# plugin includes more of core than the SDK, or when source files call each
# other round a loop (read from the built objects with nm).
dist_check_SCRIPTS += tests/structure.sh
TESTS += tests/structure.sh
EXTRA_DIST += tests/structure.py
