# Robustness checks beyond the unit tests: valgrind and the fuzzers.
# valgrind memcheck over an end-to-end job: in the normal build only, as
# valgrind cannot run AddressSanitizer binaries.
dist_check_SCRIPTS += tests/valgrind.sh
NORMAL_BUILD_ONLY_TESTS += tests/valgrind.sh
# The libFuzzer targets build with clang outside automake (they need clang's
# -fsanitize=fuzzer over the core sources): tests/fuzz/run.sh, which
# tests/run-all.sh --fuzz runs. Their seed corpora ship with the sources.
EXTRA_DIST += tests/valgrind.supp tests/fuzz
