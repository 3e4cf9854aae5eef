/* Helpers every C unit test may use (tests/harness/checks.c). */
#ifndef TFENC_TESTS_CHECKS_H
#define TFENC_TESTS_CHECKS_H

/* 1 when `needle` is in `haystack`; otherwise 0, and both go to stderr so
 * that a failed CU_ASSERT(contains(...)) shows the message it got. */
int contains(const char *haystack, const char *needle);

/* The build tree ($abs_top_builddir, set by the test harness; "." when a
 * test runs by hand from the build tree). */
const char *build_dir(void);

#endif
