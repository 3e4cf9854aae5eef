/* Owning an output file (core/output/ownership): one job at a time holds
 * an output's lock, a second is refused naming the holder, a release gives
 * the file back and removes the lock file, a lock file that is a symbolic
 * link or someone else's file is never written through; and an output is
 * never an input under another name (symbolic or hard link), nor a
 * directory; the files kept beside an output (its lock file, its sparse
 * rows' logs) are the output's: never another job's output, whatever
 * their name, and never an input. */
#include "base/context.h"
#include "harness/checks.h"
#include "harness/cunit_main.h"
#include "output/ownership.h"
#include "output/sparse.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static tfenc_context ctx;
static char work[512]; /* a scratch directory of this test's own */

static const char *in_work(const char *name)
{
    static char paths[4][1024];
    static int next;
    char *path = paths[next++ % 4];
    snprintf(path, sizeof paths[0], "%s/%s", work, name);
    return path;
}

static void write_file(const char *path, const char *text)
{
    FILE *file = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(file);
    fputs(text, file);
    fclose(file);
}

static int exists(const char *path)
{
    struct stat info;
    return lstat(path, &info) == 0;
}

static int suite_init(void)
{
    snprintf(work, sizeof work, "%s/tests/data/generated/test_ownership-XXXXXX", build_dir());
    char parents[600];
    snprintf(parents, sizeof parents, "mkdir -p '%s/tests/data/generated'", build_dir());
    return system(parents) != 0 || mkdtemp(work) == NULL;
}

static int suite_clean(void)
{
    /* The files stay for inspection when something failed. */
    if (CU_get_number_of_failures() != 0)
        return 0;
    char command[600];
    snprintf(command, sizeof command, "rm -rf '%s'", work);
    return system(command) != 0;
}

static void test_one_holder_at_a_time(void)
{
    const char *output = in_work("out.h5");
    char lock_file[1100];
    snprintf(lock_file, sizeof lock_file, "%s.lock", output);
    tfenc_context_init(&ctx);
    tfenc_output_lock *first = NULL, *second = NULL;
    CU_ASSERT_EQUAL_FATAL(tfenc_output_lock_take(&ctx, output, &first), TFENC_OK);
    CU_ASSERT_PTR_NOT_NULL(first);
    CU_ASSERT(exists(lock_file));

    /* Anyone can see who holds it. */
    char holder[256] = "", mine[64];
    snprintf(mine, sizeof mine, "pid %ld, since ", (long)getpid());
    CU_ASSERT_EQUAL(tfenc_output_lock_held(output, holder, sizeof holder), 1);
    CU_ASSERT(contains(holder, "host "));
    CU_ASSERT(contains(holder, mine));

    /* A second taker is refused in one line naming the holder (the locks
     * belong to open files, so a second open in one process conflicts as a
     * second job would). */
    CU_ASSERT_EQUAL(tfenc_output_lock_take(&ctx, output, &second), TFENC_ERR_CONFIG);
    CU_ASSERT_PTR_NULL(second);
    const char *message = tfenc_context_message(&ctx);
    CU_ASSERT(contains(message, "out.h5: in use by another tfenc-batch job (host "));
    CU_ASSERT(contains(message, mine));
    CU_ASSERT_PTR_NULL(strchr(message, '\n'));

    /* Released: the lock file is gone and the next job takes it. */
    tfenc_output_lock_release(first);
    CU_ASSERT(!exists(lock_file));
    CU_ASSERT_EQUAL(tfenc_output_lock_held(output, NULL, 0), 0);
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_output_lock_take(&ctx, output, &second), TFENC_OK);
    tfenc_output_lock_release(second);
    tfenc_output_lock_release(NULL);
}

static void test_lock_file_never_written_through(void)
{
    tfenc_output_lock *lock = NULL;
    /* A killed job's lock file (the kernel dropped its lock) is taken over. */
    const char *stale = in_work("stale.h5");
    write_file(in_work("stale.h5.lock"), "tfenc-batch lock\nhost gone, pid 1, since then\n");
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_output_lock_take(&ctx, stale, &lock), TFENC_OK);
    tfenc_output_lock_release(lock);

    /* Someone else's file under the lock file's name is not overwritten. */
    const char *foreign = in_work("foreign.h5");
    write_file(in_work("foreign.h5.lock"), "my notes\n");
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_output_lock_take(&ctx, foreign, &lock), TFENC_ERR_CONFIG);
    CU_ASSERT(contains(tfenc_context_message(&ctx),
                       "foreign.h5.lock exists and is not a tfenc lock file; refusing to overwrite it"));
    FILE *notes = fopen(in_work("foreign.h5.lock"), "r");
    char line[64] = "";
    CU_ASSERT_PTR_NOT_NULL_FATAL(notes);
    CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof line, notes));
    fclose(notes);
    CU_ASSERT_STRING_EQUAL(line, "my notes\n");

    /* A symbolic link planted as the lock file is refused, not followed. */
    const char *linked = in_work("linked.h5");
    write_file(in_work("target.txt"), "precious\n");
    CU_ASSERT_EQUAL_FATAL(symlink(in_work("target.txt"), in_work("linked.h5.lock")), 0);
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_output_lock_take(&ctx, linked, &lock), TFENC_ERR_IO);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "cannot create the lock file"));
    notes = fopen(in_work("target.txt"), "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(notes);
    CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof line, notes));
    fclose(notes);
    CU_ASSERT_STRING_EQUAL(line, "precious\n");

    /* A directory that does not exist: an I/O error naming the lock file. */
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_output_lock_take(&ctx, in_work("absent/out.h5"), &lock), TFENC_ERR_IO);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "absent/out.h5.lock"));
}

static void test_output_is_never_an_input(void)
{
    /* in_work() reuses its buffers: the inputs keep copies. */
    char corpus[1024], weights[1024];
    snprintf(corpus, sizeof corpus, "%s", in_work("corpus.txt"));
    snprintf(weights, sizeof weights, "%s", in_work("weights.h5"));
    write_file(corpus, "one document\n");
    write_file(weights, "not really HDF5\n");
    CU_ASSERT_EQUAL_FATAL(symlink(corpus, in_work("corpus-link.h5")), 0);
    CU_ASSERT_EQUAL_FATAL(link(corpus, in_work("corpus-hard.h5")), 0);
    tfenc_input_file inputs[3] = {
        {"the weights", weights}, {"the tokenizer", NULL}, {"the corpus", corpus}};

    /* A new file, and a regular file that is no input, are fine. */
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_output_check_not_input(&ctx, in_work("new.h5"), inputs, 3), TFENC_OK);
    write_file(in_work("old.h5"), "an earlier output\n");
    CU_ASSERT_EQUAL(tfenc_output_check_not_input(&ctx, in_work("old.h5"), inputs, 3), TFENC_OK);

    /* The corpus under other names: a symbolic link, a hard link. */
    static const char *const aliases[] = {"corpus-link.h5", "corpus-hard.h5"};
    for (int i = 0; i < 2; i++) {
        tfenc_context_init(&ctx);
        CU_ASSERT_EQUAL(tfenc_output_check_not_input(&ctx, in_work(aliases[i]), inputs, 3),
                        TFENC_ERR_CONFIG);
        char expected[1200];
        snprintf(expected, sizeof expected, "%s: the output is the same file as the corpus %s",
                 in_work(aliases[i]), corpus);
        CU_ASSERT(contains(tfenc_context_message(&ctx), expected));
    }

    /* An output whose lock file would be an input. */
    tfenc_context_init(&ctx);
    char doomed_lock[1024];
    snprintf(doomed_lock, sizeof doomed_lock, "%s", in_work("doomed.h5.lock"));
    tfenc_input_file lock_named[1] = {{"the corpus", doomed_lock}};
    write_file(doomed_lock, "text\n");
    CU_ASSERT_EQUAL(tfenc_output_check_not_input(&ctx, in_work("doomed.h5"), lock_named, 1),
                    TFENC_ERR_CONFIG);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "its lock file is the same file as the corpus"));

    /* A directory is never an output. */
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_output_check_not_input(&ctx, work, inputs, 3), TFENC_ERR_CONFIG);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "the output must be a new or a regular file"));
}

/* Records the first sparse log found. */
static int first_log(const char *path, void *user)
{
    snprintf(user, 1024, "%s", path);
    return 1;
}

static void test_side_files_are_the_output_s(void)
{
    /* A lock file, taken by a job writing other.h5, as another output. */
    tfenc_context_init(&ctx);
    tfenc_output_lock *lock = NULL;
    CU_ASSERT_EQUAL_FATAL(tfenc_output_lock_take(&ctx, in_work("other.h5"), &lock), TFENC_OK);
    CU_ASSERT_EQUAL(tfenc_output_check_not_input(&ctx, in_work("other.h5.lock"), NULL, 0),
                    TFENC_ERR_CONFIG);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "is the lock file of an output"));
    tfenc_output_lock_release(lock);

    /* A sparse rows' log, under its name and under another (a hard link). */
    tfenc_context_init(&ctx);
    tfenc_sparse_settings settings = {.path = in_work("sparse.h5"), .n_documents = 3,
                                      .width = 10};
    tfenc_sparse_log *log = NULL;
    CU_ASSERT_EQUAL_FATAL(tfenc_sparse_log_open(&ctx, &settings, MPI_COMM_NULL, 0, &log),
                          TFENC_OK);
    char log_path[1024] = "", innocent[1024];
    CU_ASSERT_EQUAL(tfenc_sparse_each_log(in_work("sparse.h5"), first_log, log_path), 1);
    snprintf(innocent, sizeof innocent, "%s", in_work("innocent.h5"));
    CU_ASSERT_EQUAL_FATAL(link(log_path, innocent), 0);
    const char *const outputs[] = {log_path, innocent};
    for (int i = 0; i < 2; i++) {
        tfenc_context_init(&ctx);
        CU_ASSERT_EQUAL(tfenc_output_check_not_input(&ctx, outputs[i], NULL, 0),
                        TFENC_ERR_CONFIG);
        CU_ASSERT(contains(tfenc_context_message(&ctx), "is the sparse rows' log of an output"));
    }

    /* The output's own log as an input: a new job would remove it. */
    tfenc_context_init(&ctx);
    tfenc_input_file corpus[1] = {{"the corpus", innocent}};
    CU_ASSERT_EQUAL(tfenc_output_check_not_input(&ctx, in_work("sparse.h5"), corpus, 1),
                    TFENC_ERR_CONFIG);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "its sparse rows' log"));
    CU_ASSERT(contains(tfenc_context_message(&ctx), "is the same file as the corpus"));
    tfenc_sparse_log_close(log);
}

static const test_case ownership_cases[] = {
    {"one holder at a time", test_one_holder_at_a_time},
    {"lock files never written through", test_lock_file_never_written_through},
    {"an output is never an input", test_output_is_never_an_input},
    {"side files belong to their output", test_side_files_are_the_output_s},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"ownership", suite_init, suite_clean, ownership_cases},
    {NULL, NULL, NULL, NULL}};
