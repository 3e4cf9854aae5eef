/* main() of every C unit test: registers the program's suites from its
 * test_suites table and runs them with CUnit's basic interface. One runner,
 * so that selecting a suite, listing tests and counting failures behave the
 * same in every test program. */
#include "cunit_main.h"

#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>

/* 1 when `name` is wanted: no names given, or one of them. */
static int wanted(const char *name, int n_names, char **names)
{
    if (n_names == 0)
        return 1;
    for (int i = 0; i < n_names; i++)
        if (strcmp(names[i], name) == 0)
            return 1;
    return 0;
}

static void list(void)
{
    for (const test_suite *suite = test_suites; suite->name != NULL; suite++) {
        printf("%s\n", suite->name);
        for (const test_case *test = suite->cases; test->name != NULL; test++)
            printf("  %s\n", test->name);
    }
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        list();
        return 0;
    }
    int n_names = argc - 1;
    char **names = argv + 1;
    /* A name that matches no suite is a typing error, not a pass. */
    for (int i = 0; i < n_names; i++) {
        int known = 0;
        for (const test_suite *suite = test_suites; suite->name != NULL; suite++)
            known |= strcmp(suite->name, names[i]) == 0;
        if (!known) {
            fprintf(stderr, "%s: no suite named '%s' (--list shows them)\n", argv[0], names[i]);
            return 1;
        }
    }
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    for (const test_suite *suite = test_suites; suite->name != NULL; suite++) {
        if (!wanted(suite->name, n_names, names))
            continue;
        CU_pSuite registered = CU_add_suite(suite->name, suite->init, suite->cleanup);
        for (const test_case *test = suite->cases; registered != NULL && test->name != NULL; test++)
            if (CU_add_test(registered, test->name, test->run) == NULL)
                registered = NULL;
        if (registered == NULL) {
            fprintf(stderr, "%s: cannot register suite '%s': %s\n", argv[0], suite->name,
                    CU_get_error_msg());
            CU_cleanup_registry();
            return 1;
        }
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    int failed = CU_get_number_of_failures() != 0 || CU_get_number_of_tests_failed() != 0 ||
                 CU_get_number_of_suites_failed() != 0;
    CU_cleanup_registry();
    return failed;
}
