/* Helpers every C unit test may use (tests/harness/checks.c). */
#ifndef TFENC_TESTS_CHECKS_H
#define TFENC_TESTS_CHECKS_H

#include "base/precision.h"

/* 1 when `needle` is in `haystack`; otherwise 0, and both go to stderr so
 * that a failed CU_ASSERT(contains(...)) shows the message it got. */
int contains(const char *haystack, const char *needle);

/* The build tree ($abs_top_builddir, set by the test harness; "." when a
 * test runs by hand from the build tree). */
const char *build_dir(void);

/* 1 when `precision`'s products run on this CPU (fp32 always does).
 * Otherwise 0, after checking what a job meets there instead (CUnit
 * assertions): the refusal names the precision and the instruction set
 * oneDNN runs, and a job's notice says fp32 runs instead. A CPU without
 * AVX-512 (AVX2 only) has no bf16 products: a test of bf16's accuracy
 * then checks the fallback, and says on stderr that the accuracy itself
 * is measured on machines that have them. */
int precision_runs_here(tfenc_precision precision);

#endif
