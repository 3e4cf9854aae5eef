/* CUnit tests of tfenc-import's table of Hugging Face names
 * (drivers/import/tensor_names.c): no architecture's or head's name maps to
 * two canonical tensors, no entry of the table is unreachable, and the
 * check that says so catches each kind of mistake in a table made to have
 * it. */
#include <stdio.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "harness/cunit_main.h"
#include "import/tensor_names.h"

static int check(const canonical_tensor *tensors, int n_tensors, const unsigned *chosen,
                 char *problem, size_t size)
{
    problem[0] = '\0';
    return import_check_tensor_names(tensors, n_tensors, chosen, problem, size);
}

static void test_table_is_consistent(void)
{
    unsigned chosen[TENSOR_COUNT];
    char problem[256];
    import_chosen_tensors(chosen);
    int status = check(import_canonical_tensors, TENSOR_COUNT, chosen, problem, sizeof problem);
    if (status != 0)
        printf("\n  %s", problem);
    CU_ASSERT_EQUAL(status, 0);
}

/* Every architecture lists each tensor once, begins with one once per
 * model (its name locates the prefix), and every head's tensors are once
 * per model. */
static void test_lists_are_well_formed(void)
{
    for (int kind = ARCH_BERT; kind < ARCH_STATIC; kind++) {
        const architecture_tensors *tensors = import_architecture_tensors((architecture)kind);
        CU_ASSERT_PTR_NOT_NULL_FATAL(tensors);
        CU_ASSERT_PTR_NULL(strstr(import_canonical_tensors[tensors->tensors[0]].target, "%d"));
        CU_ASSERT_STRING_EQUAL(tensors->prefixes[0], "");
        for (int i = 0; tensors->tensors[i] != TENSOR_END; i++)
            for (int j = i + 1; tensors->tensors[j] != TENSOR_END; j++)
                CU_ASSERT_NOT_EQUAL(tensors->tensors[i], tensors->tensors[j]);
    }
    CU_ASSERT_PTR_NULL(import_architecture_tensors(ARCH_STATIC));
    for (int kind = HEAD_NONE; kind <= HEAD_MLM_MODERNBERT; kind++) {
        const tensor_id *ids = import_head_tensors((head_kind)kind);
        CU_ASSERT_EQUAL(ids[0] == TENSOR_END, kind == HEAD_NONE);
        for (int i = 0; ids[i] != TENSOR_END; i++)
            CU_ASSERT_PTR_NULL(strstr(import_canonical_tensors[ids[i]].target, "%d"));
    }
}

#define BERT NAMES_OF_ARCHITECTURE(ARCH_BERT)
#define QWEN2 NAMES_OF_ARCHITECTURE(ARCH_QWEN2)
#define GEMMA3 NAMES_OF_ARCHITECTURE(ARCH_GEMMA3)

static void expect_problem(const canonical_tensor *tensors, int n, const unsigned *chosen,
                           const char *phrase)
{
    char problem[256];
    CU_ASSERT_EQUAL(check(tensors, n, chosen, problem, sizeof problem), -1);
    if (strstr(problem, phrase) == NULL) {
        printf("\n  problem '%s' lacks '%s'", problem, phrase);
        CU_FAIL("the problem is not named");
    }
}

/* One name read by one reader as two tensors, or twice as one, is refused;
 * the same name read by different readers (Qwen2's and Gemma3's
 * post_attention_layernorm), or as the two halves of one tensor, is not. */
static void test_name_mapping_to_two_tensors(void)
{
    const canonical_tensor tensors[] = {
        {"/a/%d", "d", {{"layers.%d.norm.weight", QWEN2, "", 0, 0},
                        {"layers.%d.fused.weight", BERT, "", '1', 0}}},
        {"/b/%d", "d", {{"layers.%d.norm.weight", GEMMA3, "", 0, 0},
                        {"layers.%d.fused.weight", BERT, "", '2', 0}}},
    };
    const unsigned chosen[] = {QWEN2 | BERT, GEMMA3 | BERT};
    char problem[256];
    CU_ASSERT_EQUAL(check(tensors, 2, chosen, problem, sizeof problem), 0);

    const canonical_tensor clash[] = {
        {"/a/%d", "d", {{"layers.%d.norm.weight", QWEN2 | BERT, "", 0, 0}}},
        {"/b/%d", "d", {{"layers.%d.norm.weight", GEMMA3 | BERT, "", 0, 0}}},
    };
    const unsigned clash_chosen[] = {QWEN2 | BERT, GEMMA3 | BERT};
    expect_problem(clash, 2, clash_chosen, "'layers.%d.norm.weight' of reader 0 maps to /a/%d "
                   "and /b/%d");

    const canonical_tensor twice[] = {
        {"/a/%d", "d", {{"layers.%d.norm.weight", QWEN2, "", 0, 0},
                        {"layers.%d.norm.weight", QWEN2 | BERT, "i", 0, 0}}},
    };
    const unsigned twice_chosen[] = {QWEN2 | BERT};
    expect_problem(twice, 1, twice_chosen, "maps to /a/%d and /a/%d");
}

static void test_unreachable_entries(void)
{
    const canonical_tensor tensors[] = {
        {"/a", "d", {{"a.weight", BERT, "", 0, 0}}},
        {"/b", "d", {{"b.weight", BERT | QWEN2, "", 0, 0}}},
    };
    const unsigned nobody[] = {BERT, 0};
    expect_problem(tensors, 2, nobody, "/b: no architecture or head has this tensor");
    /* Qwen2's name for /b, where Qwen2's list lacks /b. */
    const unsigned bert_only[] = {BERT, BERT};
    char expected[64];
    snprintf(expected, sizeof expected, "'b.weight' is listed for reader %d", ARCH_QWEN2);
    expect_problem(tensors, 2, bert_only, expected);
    /* Gemma3 lists /a, which has no name of Gemma3's. */
    const unsigned unnamed[] = {BERT | GEMMA3, BERT | QWEN2};
    snprintf(expected, sizeof expected, "/a: reader %d has this tensor but no name", ARCH_GEMMA3);
    expect_problem(tensors, 2, unnamed, expected);
}

/* The real table with one mistake of each kind put in. */
static void test_real_table_with_mistakes(void)
{
    static canonical_tensor table[TENSOR_COUNT];
    unsigned chosen[TENSOR_COUNT];
    import_chosen_tensors(chosen);

    memcpy(table, import_canonical_tensors, sizeof table);
    table[TENSOR_Q_BIAS].names[0].pattern = "encoder.layer.%d.attention.self.query.weight";
    expect_problem(table, TENSOR_COUNT, chosen, "maps to /encoder/%d/attention/q_weight and "
                   "/encoder/%d/attention/q_bias");

    memcpy(table, import_canonical_tensors, sizeof table);
    table[TENSOR_FFN_OUTPUT_NORM].names[0].readers |= QWEN2;
    expect_problem(table, TENSOR_COUNT, chosen, "/encoder/%d/ffn/output_norm/weight: name "
                   "'layers.%d.post_feedforward_layernorm.weight' is listed for reader");

    memcpy(table, import_canonical_tensors, sizeof table);
    chosen[TENSOR_ATTENTION_OUTPUT_NORM] |= QWEN2;
    expect_problem(table, TENSOR_COUNT, chosen, "has this tensor but no name");
}

static const test_case tensor_names_cases[] = {
    {"the table is consistent", test_table_is_consistent},
    {"the lists are well formed", test_lists_are_well_formed},
    {"a name mapping to two tensors is refused", test_name_mapping_to_two_tensors},
    {"unreachable entries are refused", test_unreachable_entries},
    {"the real table with mistakes is refused", test_real_table_with_mistakes},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"tensor names", NULL, NULL, tensor_names_cases},
    {NULL, NULL, NULL, NULL}};
