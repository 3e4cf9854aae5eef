/* The one CUnit runner every C unit test links (tests/harness/cunit_main.c):
 * a test program names its suites in a table instead of writing main().
 *
 *   static const test_case jobfile_cases[] = {
 *       {"errors name the line", test_jobfile_errors_name_line},
 *       {NULL, NULL}};
 *   const test_suite test_suites[] = {
 *       {"jobfile", NULL, NULL, jobfile_cases},
 *       {NULL, NULL, NULL, NULL}};
 *
 * The program then runs every suite, or only those named on its command
 * line (`tests/test_model "memory promises"`), and `--list` prints the
 * suites and their tests. It exits 0 when every test passed and no suite's
 * set-up failed, else 1. */
#ifndef TFENC_TESTS_CUNIT_MAIN_H
#define TFENC_TESTS_CUNIT_MAIN_H

#include <CUnit/CUnit.h>

typedef struct test_case {
    const char *name; /* NULL ends a suite's table */
    CU_TestFunc run;
} test_case;

typedef struct test_suite {
    const char *name;         /* NULL ends the program's table */
    CU_InitializeFunc init;   /* NULL: none; non-zero return fails the suite */
    CU_CleanupFunc cleanup;   /* NULL: none; runs after the suite's last test */
    const test_case *cases;
} test_suite;

/* Defined by each test program. */
extern const test_suite test_suites[];

#endif
