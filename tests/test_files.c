/* CUnit suite for core/base/files (the checks every reader applies, file
 * identity, the output's file system) and core/plugin/shared_object (a plugin file
 * examined without loading it, truncated at every size). */
#include "base/context.h"
#include "base/files.h"
#include "base/growth.h"
#include "harness/checks.h"
#include "harness/cunit_main.h"
#include "plugin/shared_object.h"

#include <CUnit/CUnit.h>
#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static tfenc_context ctx;
static char work[512]; /* a scratch directory */

static const char *in_work(const char *name)
{
    static char path[4][1024];
    static int next;
    next = (next + 1) % 4;
    snprintf(path[next], sizeof path[next], "%s/%s", work, name);
    return path[next];
}

static void write_file(const char *path, const char *text)
{
    FILE *file = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(file);
    fputs(text, file);
    fclose(file);
}

static int suite_init(void)
{
    snprintf(work, sizeof work, "%s/tests/data/generated/test_files", build_dir());
    char command[1200];
    snprintf(command, sizeof command, "rm -rf '%s' && mkdir -p '%s'", work, work);
    if (system(command) != 0)
        return 1;
    /* A reader that blocks would hang the suite: fail it instead. */
    alarm(60);
    return 0;
}

/* Expects the regular-file check to refuse `path` with `kind` in the message. */
static void expect_refused(const char *path, const char *kind)
{
    tfenc_context_init(&ctx);
    FILE *file = NULL;
    CU_ASSERT_EQUAL(tfenc_file_open_regular(&ctx, "[job] input", path, &file), TFENC_ERR_IO);
    CU_ASSERT_PTR_NULL(file);
    char expected[1200];
    snprintf(expected, sizeof expected, "[job] input %s: %s", path, kind);
    CU_ASSERT(contains(tfenc_context_message(&ctx), expected));
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_file_check_regular(&ctx, "[job] input", path), TFENC_ERR_IO);
    CU_ASSERT(contains(tfenc_context_message(&ctx), expected));
}

static void test_special_files_are_refused_without_blocking(void)
{
    const char *fifo = in_work("fifo");
    CU_ASSERT_EQUAL_FATAL(mkfifo(fifo, 0600), 0);
    expect_refused(fifo, "is a FIFO or pipe");
    expect_refused(work, "is a directory");
    expect_refused("/dev/zero", "is a character device");
    const char *socket_path = in_work("socket");
    int listener = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    snprintf(address.sun_path, sizeof address.sun_path, "%s", socket_path);
    if (strlen(socket_path) < sizeof address.sun_path &&
        bind(listener, (struct sockaddr *)&address, sizeof address) == 0)
        expect_refused(socket_path, "is a socket");
    close(listener);
    tfenc_context_init(&ctx);
    FILE *file = NULL;
    CU_ASSERT_EQUAL(tfenc_file_open_regular(&ctx, "job file", in_work("absent"), &file),
                    TFENC_ERR_IO);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "absent: cannot open: No such file or directory"));
}

static void test_regular_files_and_aliases_are_read(void)
{
    const char *path = in_work("text.txt");
    write_file(path, "hello\n");
    const char *link = in_work("link.txt");
    CU_ASSERT_EQUAL(symlink(path, link), 0);
    const char *paths[] = {path, link};
    for (int i = 0; i < 2; i++) {
        tfenc_context_init(&ctx);
        FILE *file = NULL;
        CU_ASSERT_EQUAL_FATAL(tfenc_file_open_regular(&ctx, "x", paths[i], &file), TFENC_OK);
        char line[16] = "";
        CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof line, file)); /* blocking reads work */
        CU_ASSERT_STRING_EQUAL(line, "hello\n");
        CU_ASSERT_EQUAL(fcntl(fileno(file), F_GETFL) & O_NONBLOCK, 0);
        fclose(file);
        CU_ASSERT_EQUAL(tfenc_file_check_regular(&ctx, "x", paths[i]), TFENC_OK);
    }
    /* /dev/stdin is what stdin is: a regular file here. */
    int saved = dup(0);
    int descriptor = open(path, O_RDONLY);
    CU_ASSERT_FATAL(saved >= 0 && descriptor >= 0 && dup2(descriptor, 0) == 0);
    close(descriptor);
    tfenc_context_init(&ctx);
    FILE *file = NULL;
    CU_ASSERT_EQUAL(tfenc_file_open_regular(&ctx, "x", "/dev/stdin", &file), TFENC_OK);
    if (file != NULL)
        fclose(file);
    CU_ASSERT(tfenc_file_same("/dev/stdin", path));
    /* ... and a pipe when stdin is one. */
    int ends[2];
    CU_ASSERT_FATAL(pipe(ends) == 0 && dup2(ends[0], 0) == 0);
    expect_refused("/dev/stdin", "is a FIFO or pipe");
    close(ends[0]);
    close(ends[1]);
    dup2(saved, 0);
    close(saved);
}

static void test_identity(void)
{
    const char *a = in_work("a.txt"), *b = in_work("b.txt");
    write_file(a, "same text\n");
    write_file(b, "same text\n");
    const char *hard = in_work("hard.txt"), *soft = in_work("soft.txt");
    CU_ASSERT_EQUAL(link(a, hard), 0);
    CU_ASSERT_EQUAL(symlink("a.txt", soft), 0); /* relative to its directory */
    char dotted[1100];
    snprintf(dotted, sizeof dotted, "%s/./../%s/a.txt", work, strrchr(work, '/') + 1);
    CU_ASSERT(tfenc_file_same(a, a));
    CU_ASSERT(tfenc_file_same(a, dotted));
    CU_ASSERT(tfenc_file_same(a, hard));
    CU_ASSERT(tfenc_file_same(a, soft));
    CU_ASSERT(!tfenc_file_same(a, b)); /* equal contents, another file */
    CU_ASSERT(!tfenc_file_same(a, in_work("absent")));
    CU_ASSERT(!tfenc_file_same(in_work("absent"), in_work("absent")));
    tfenc_file_id id;
    CU_ASSERT_EQUAL(tfenc_file_identity(in_work("absent"), &id), TFENC_ERR_NOT_FOUND);
}

/* A located path is one string however the path is spelled, and keeps a
 * link's own name. */
static void test_located_path(void)
{
    char real[1024], expected[1100], spelled[1200];
    CU_ASSERT_PTR_NOT_NULL_FATAL(realpath(work, real));
    CU_ASSERT_EQUAL(mkdir(in_work("sub"), 0755), 0);
    CU_ASSERT_EQUAL(symlink("sub", in_work("via")), 0);
    write_file(in_work("sub/x.jsonl"), "{}\n");
    CU_ASSERT_EQUAL(symlink("x.jsonl", in_work("sub/link.jsonl")), 0);
    snprintf(expected, sizeof expected, "%s/sub/x.jsonl", real);
    const char *spellings[] = {"sub/x.jsonl", "./sub/x.jsonl", "sub/../sub/x.jsonl",
                               "via/x.jsonl", "via/./x.jsonl"};
    for (size_t i = 0; i < sizeof spellings / sizeof *spellings; i++) {
        snprintf(spelled, sizeof spelled, "%s/%s", work, spellings[i]);
        char *located = tfenc_file_located_path(spelled);
        CU_ASSERT_PTR_NOT_NULL_FATAL(located);
        CU_ASSERT_STRING_EQUAL(located, expected);
        free(located);
    }
    /* Relative to the working directory, the same. */
    char here[1024];
    CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(here, sizeof here));
    CU_ASSERT_EQUAL_FATAL(chdir(in_work("via")), 0);
    char *located = tfenc_file_located_path("x.jsonl");
    CU_ASSERT_EQUAL(chdir(here), 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(located);
    CU_ASSERT_STRING_EQUAL(located, expected);
    free(located);
    /* A link keeps its own name; an unresolvable directory leaves the path. */
    located = tfenc_file_located_path(in_work("via/link.jsonl"));
    snprintf(expected, sizeof expected, "%s/sub/link.jsonl", real);
    CU_ASSERT_STRING_EQUAL(located, expected);
    free(located);
    located = tfenc_file_located_path("no/such/dir/x.jsonl");
    CU_ASSERT_STRING_EQUAL(located, "no/such/dir/x.jsonl");
    free(located);
}

static void test_free_space(void)
{
    double bytes = -1;
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_file_free_space(&ctx, "[job] output", in_work("out.h5"), &bytes), TFENC_OK);
    CU_ASSERT(bytes > 0);
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_file_free_space(&ctx, "[job] output", "/proc/x.h5", &bytes), TFENC_ERR_IO);
    CU_ASSERT(contains(tfenc_context_message(&ctx), "[job] output /proc/x.h5: /proc is on a file system that cannot hold files"));
    /* A directory that cannot be examined: unknown, left to the create. */
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_file_free_space(&ctx, "[job] output", "/nonexistent-dir/x.h5", &bytes), TFENC_OK);
    CU_ASSERT(bytes < 0);
    CU_ASSERT_EQUAL(ctx.status, TFENC_OK);
}

/* Examines the first `size` bytes of `data` as a file. */
static int examine_prefix(const char *data, size_t size, tfenc_shared_object *object, char *why,
                          size_t why_size)
{
    const char *path = in_work("prefix.so");
    FILE *file = fopen(path, "wb");
    if (file == NULL || fwrite(data, 1, size, file) != size) {
        if (file != NULL)
            fclose(file);
        return -100;
    }
    fclose(file);
    int descriptor = open(path, O_RDONLY);
    int result = tfenc_shared_object_examine(descriptor, (off_t)size, object, why, why_size);
    close(descriptor);
    return result;
}

static char *slurp(const char *path, size_t *size)
{
    FILE *file = fopen(path, "rb");
    if (file == NULL)
        return NULL;
    fseek(file, 0, SEEK_END);
    *size = (size_t)ftell(file);
    rewind(file);
    char *data = malloc(*size);
    if (data != NULL && fread(data, 1, *size, file) != *size) {
        free(data);
        data = NULL;
    }
    fclose(file);
    return data;
}

static void test_plugin_files_examined_at_every_size(void)
{
    char path[1024], why[768];
    snprintf(path, sizeof path, "%s/plugins/.libs/layers.so", build_dir());
    size_t size = 0;
    char *data = slurp(path, &size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(data);
    tfenc_shared_object object;
    /* The whole file: valid, with its declaration. */
    CU_ASSERT_EQUAL_FATAL(examine_prefix(data, size, &object, why, sizeof why), 0);
    CU_ASSERT_EQUAL(object.declares_types, 1);
    CU_ASSERT_EQUAL(object.uses_private_symbols, 0);
    /* One declaration per source file, concatenated by the linker. */
    const char *expected[] = {"embedding", "sinusoidal", "ffn",         "layernorm",
                              "rmsnorm",   "pooling",    "classifier",  "splade",
                              "multivector", "static_embedding", "moe", "lexical_weights"};
    const int n_expected = (int)(sizeof expected / sizeof expected[0]);
    CU_ASSERT_EQUAL(object.n_types, n_expected);
    for (int e = 0; e < n_expected; e++) {
        int found = 0;
        for (int i = 0; i < object.n_types; i++)
            found |= strcmp(object.types[i], expected[e]) == 0;
        CU_ASSERT(found);
    }
    tfenc_shared_object_free(&object);
    /* Every shorter copy is refused (the section table is at the end), in a
     * line that says so, and never crashes: each step a few hundred bytes. */
    int refused = 0, tried = 0;
    for (size_t cut = 0; cut < size; cut += 389, tried++) {
        if (examine_prefix(data, cut, &object, why, sizeof why) != 0)
            refused += strstr(why, "truncated") != NULL || strstr(why, "too short") != NULL;
        else
            tfenc_shared_object_free(&object);
    }
    CU_ASSERT_EQUAL(refused, tried);
    /* 2 kB keep the program headers but cut the first loadable segment,
     * which dlopen would map and touch (SIGBUS): named as such. */
    CU_ASSERT_EQUAL(examine_prefix(data, 2048, &object, why, sizeof why), -1);
    CU_ASSERT(contains(why, "segment") && contains(why, "but the file has only 2048 bytes"));
    CU_ASSERT_EQUAL(examine_prefix(data, size - 1, &object, why, sizeof why), -1);
    /* Not ELF at all; a plugin without a declaration. */
    CU_ASSERT_EQUAL(examine_prefix("#!/bin/sh\necho not a plugin, just long enough to have a header\n",
                                   64, &object, why, sizeof why), -1);
    CU_ASSERT(contains(why, "not an ELF shared object"));
    free(data);
    snprintf(path, sizeof path, "%s/tests/plugins/.libs/old_abi.so", build_dir());
    data = slurp(path, &size);
    CU_ASSERT_PTR_NOT_NULL_FATAL(data);
    CU_ASSERT_EQUAL(examine_prefix(data, size, &object, why, sizeof why), 0);
    CU_ASSERT_EQUAL(object.declares_types, 0);
    CU_ASSERT_EQUAL(object.n_types, 0);
    tfenc_shared_object_free(&object);
    free(data);
}


/* Doubling from the first capacity, never past the index type's limit,
 * and every failure leaving the old block (and `ok` at 0) so a group of
 * arrays stays consistent with its unchanged capacity. */
static void test_growth(void)
{
    CU_ASSERT_EQUAL(tfenc_grown_capacity(0, 1, 256, INT32_MAX), 256);
    CU_ASSERT_EQUAL(tfenc_grown_capacity(0, 257, 256, INT32_MAX), 512);
    CU_ASSERT_EQUAL(tfenc_grown_capacity(300, 301, 256, INT32_MAX), 600);
    CU_ASSERT_EQUAL(tfenc_grown_capacity(300, 300, 256, INT32_MAX), 300);
    /* Near the limit: the limit itself when it holds `needed`, else -1. */
    CU_ASSERT_EQUAL(tfenc_grown_capacity((int64_t)1 << 30, ((int64_t)1 << 30) + 5, 256, INT32_MAX),
                    INT32_MAX);
    CU_ASSERT_EQUAL(tfenc_grown_capacity(256, (int64_t)INT32_MAX + 1, 256, INT32_MAX), -1);
    CU_ASSERT_EQUAL(tfenc_grown_capacity((int64_t)1 << 62, INT64_MAX, 1, INT64_MAX), INT64_MAX);

    int32_t *small = malloc(4 * sizeof *small);
    double *other = malloc(4 * sizeof *other);
    CU_ASSERT_PTR_NOT_NULL_FATAL(small);
    CU_ASSERT_PTR_NOT_NULL_FATAL(other);
    small[3] = 7;
    int ok = 1;
    TFENC_GROW_ARRAY(small, 1024, ok);
    TFENC_GROW_ARRAY(other, 1024, ok);
    CU_ASSERT_EQUAL(ok, 1);
    CU_ASSERT_EQUAL(small[3], 7);
    small[1023] = 9;
    int32_t *before = small;
    TFENC_GROW_ARRAY(small, -1, ok); /* tfenc_grown_capacity's "too many" */
    CU_ASSERT_EQUAL(ok, 0);
    CU_ASSERT_PTR_EQUAL(small, before);
    ok = 1;
    TFENC_GROW_ARRAY(other, INT64_MAX / 2, ok); /* its bytes overflow size_t */
    CU_ASSERT_EQUAL(ok, 0);
    CU_ASSERT_EQUAL(small[1023], 9);
    free(small);
    free(other);
}

static const test_case files_cases[] = {
    {"special files refused without blocking", test_special_files_are_refused_without_blocking},
    {"regular files and aliases read", test_regular_files_and_aliases_are_read},
    {"identity by device and inode", test_identity},
    {"located paths: one string for every spelling", test_located_path},
    {"free space and file systems without blocks", test_free_space},
    {"plugin files examined at every size", test_plugin_files_examined_at_every_size},
    {"arrays grown by doubling", test_growth},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"files", suite_init, NULL, files_cases},
    {NULL, NULL, NULL, NULL}};
