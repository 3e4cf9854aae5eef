/* Helpers every C unit test may use. */
#include "checks.h"

#include "base/context.h"
#include "matrix/matrix.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int contains(const char *haystack, const char *needle)
{
    if (strstr(haystack, needle) != NULL)
        return 1;
    fprintf(stderr, "\n  expected \"%s\" in: %s\n", needle, haystack);
    return 0;
}

const char *build_dir(void)
{
    const char *dir = getenv("abs_top_builddir");
    return dir != NULL ? dir : ".";
}

int precision_runs_here(tfenc_precision precision)
{
    tfenc_context ctx;
    tfenc_context_init(&ctx);
    if (tfenc_matrix_check_precision(&ctx, precision) == TFENC_OK)
        return 1;
    const char *name = tfenc_precision_names[precision];
    char expected[64];
    snprintf(expected, sizeof expected, "precision = %s: ", name);
    CU_ASSERT(contains(tfenc_context_message(&ctx), expected));
    CU_ASSERT(contains(tfenc_context_message(&ctx), "instruction set"));
    tfenc_precision runs = precision;
    char notice[256];
    tfenc_matrix_describe(precision, &runs, notice, sizeof notice);
    CU_ASSERT_EQUAL(runs, TFENC_PRECISION_FP32);
    CU_ASSERT(contains(notice, "fp32 runs instead"));
    fprintf(stderr, "\n  %s does not run on this CPU: checked its fallback (%s); its accuracy is "
            "measured on CPUs that run it ", name, notice);
    return 0;
}
