/* CUnit tests of the torch.save reader's pickle machine: the pickle of a
 * state dict as torch.save writes it gives its tensors, and every pickle
 * that would run code, or that does not describe tensors inside their
 * storages, is refused naming the opcode and its byte. (Whole files, zip
 * included, against transformers: tests/import/checkpoints.sh.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <CUnit/CUnit.h>

#include "harness/cunit_main.h"
#include "base/context.h"
#include "model/torch_checkpoint.h"

/* A pickle assembled opcode by opcode. */
typedef struct pickle {
    unsigned char bytes[2048];
    size_t n;
} pickle;

static void put(pickle *p, const void *data, size_t n)
{
    CU_ASSERT_FATAL(p->n + n <= sizeof p->bytes);
    memcpy(p->bytes + p->n, data, n);
    p->n += n;
}

static void op(pickle *p, unsigned char code)
{
    put(p, &code, 1);
}

static void text(pickle *p, const char *s)
{
    unsigned char length[4] = {(unsigned char)strlen(s), 0, 0, 0};
    op(p, 'X'); /* BINUNICODE */
    put(p, length, 4);
    put(p, s, strlen(s));
}

static void global(pickle *p, const char *module, const char *name)
{
    op(p, 'c');
    put(p, module, strlen(module));
    op(p, '\n');
    put(p, name, strlen(name));
    op(p, '\n');
}

static void int1(pickle *p, int value)
{
    op(p, 'K');
    op(p, (unsigned char)value);
}

static void start(pickle *p)
{
    p->n = 0;
    op(p, 0x80); /* PROTO 2 */
    op(p, 2);
    global(p, "collections", "OrderedDict");
    op(p, 'q'); /* BINPUT 0: OrderedDict */
    op(p, 0);
    op(p, ')');
    op(p, 'R'); /* OrderedDict() */
    op(p, '(');
}

/* name: _rebuild_tensor_v2(storage(type, key, numel), offset, size, stride,
 * False, OrderedDict()), as torch.save pickles a tensor. */
static void tensor(pickle *p, const char *name, const char *storage_type, const char *key,
                   int numel, int offset, int rank, const int *size, const int *stride)
{
    text(p, name);
    global(p, "torch._utils", "_rebuild_tensor_v2");
    op(p, '(');
    op(p, '(');
    text(p, "storage");
    global(p, "torch", storage_type);
    text(p, key);
    text(p, "cpu");
    int1(p, numel);
    op(p, 't');
    op(p, 'Q'); /* BINPERSID */
    int1(p, offset);
    op(p, '(');
    for (int i = 0; i < rank; i++)
        int1(p, size[i]);
    op(p, 't');
    op(p, '(');
    for (int i = 0; i < rank; i++)
        int1(p, stride[i]);
    op(p, 't');
    op(p, 0x89); /* False */
    op(p, 'h');  /* BINGET 0: OrderedDict */
    op(p, 0);
    op(p, ')');
    op(p, 'R');
    op(p, 't');
    op(p, 'R');
}

static void finish(pickle *p)
{
    op(p, 'u'); /* SETITEMS */
    op(p, '.');
}

static int parse(tfenc_context *ctx, const pickle *p, tfenc_torch_file **file)
{
    tfenc_context_init(ctx);
    int status = tfenc_torch_parse_pickle(ctx, "test.bin", p->bytes, p->n, file);
    CU_ASSERT((status == TFENC_OK) == (*file != NULL));
    return status;
}

static void expect_refused(const pickle *p, const char *phrase, const char *second)
{
    tfenc_context ctx;
    tfenc_torch_file *file = NULL;
    CU_ASSERT_EQUAL(parse(&ctx, p, &file), TFENC_ERR_WEIGHTS);
    tfenc_torch_close(file);
    const char *message = tfenc_context_message(&ctx);
    CU_ASSERT_PTR_NOT_NULL(strstr(message, "test.bin"));
    if (strstr(message, phrase) == NULL || (second != NULL && strstr(message, second) == NULL)) {
        printf("\n  message '%s' lacks '%s' or '%s'", message, phrase, second ? second : "");
        CU_FAIL("message lacks the expected phrase");
    }
}

static void test_state_dict(void)
{
    pickle p;
    start(&p);
    tensor(&p, "encoder.weight", "FloatStorage", "0", 6, 0, 2, (int[]){2, 3}, (int[]){3, 1});
    /* A view one element into a storage, and a size-1 dimension whose stride
     * is anything (torch keeps whatever the view had). */
    tensor(&p, "encoder.bias", "HalfStorage", "1", 4, 1, 2, (int[]){1, 3}, (int[]){7, 1});
    tensor(&p, "position_ids", "LongStorage", "2", 5, 0, 1, (int[]){5}, (int[]){1});
    finish(&p);
    tfenc_context ctx;
    tfenc_torch_file *file = NULL;
    CU_ASSERT_EQUAL_FATAL(parse(&ctx, &p, &file), TFENC_OK);
    CU_ASSERT_EQUAL(tfenc_torch_count(file), 3);
    const tfenc_torch_tensor *w = tfenc_torch_tensor_at(file, 0);
    const tfenc_torch_tensor *b = tfenc_torch_tensor_at(file, 1);
    const tfenc_torch_tensor *ids = tfenc_torch_tensor_at(file, 2);
    CU_ASSERT_STRING_EQUAL(w->name, "encoder.weight");
    CU_ASSERT_STRING_EQUAL(w->dtype, "F32");
    CU_ASSERT_EQUAL(w->rank, 2);
    CU_ASSERT_EQUAL(w->dims[0], 2);
    CU_ASSERT_EQUAL(w->dims[1], 3);
    CU_ASSERT_EQUAL(w->n_elements, 6);
    CU_ASSERT_STRING_EQUAL(w->storage, "0");
    CU_ASSERT_STRING_EQUAL(b->dtype, "F16");
    CU_ASSERT_EQUAL(b->element_size, 2);
    CU_ASSERT_EQUAL(b->offset, 1);
    CU_ASSERT_EQUAL(b->storage_elements, 4);
    CU_ASSERT_STRING_EQUAL(ids->dtype, "I64");
    CU_ASSERT_PTR_NULL(tfenc_torch_tensor_at(file, 3));
    /* No archive behind a pickle parsed from memory. */
    float out[6];
    CU_ASSERT_EQUAL(tfenc_torch_read_float32(&ctx, file, w, out), TFENC_ERR_INTERNAL);
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_torch_read_float32(&ctx, file, ids, out), TFENC_ERR_WEIGHTS);
    tfenc_torch_close(file);
}

/* What a malicious file holds: GLOBAL os.system, then REDUCE calls it. */
static void test_code_refused(void)
{
    pickle p = {.n = 0};
    op(&p, 0x80);
    op(&p, 2);
    global(&p, "os", "system");
    text(&p, "touch /tmp/tfenc-test-pwned");
    op(&p, 0x85);
    op(&p, 'R');
    op(&p, '.');
    expect_refused(&p, "GLOBAL (0x63) at byte 2", "'os.system'");

    /* The same through protocol 4's STACK_GLOBAL. */
    p.n = 0;
    op(&p, 0x80);
    op(&p, 4);
    text(&p, "builtins");
    text(&p, "eval");
    op(&p, 0x93);
    expect_refused(&p, "STACK_GLOBAL (0x93) at byte 24", "'builtins.eval'");

    /* Opcodes a state dict never uses: INST, OBJ, NEWOBJ, EXT1. */
    const unsigned char refused[] = {'i', 'o', 0x81, 0x82, 'P', 'I', 0x8f};
    const char *names[] = {"INST", "OBJ", "NEWOBJ", "EXT1", "PERSID", "INT", "EMPTY_SET"};
    for (size_t i = 0; i < sizeof refused; i++) {
        p.n = 0;
        op(&p, 0x80);
        op(&p, 2);
        op(&p, refused[i]);
        char expected[64];
        snprintf(expected, sizeof expected, "%s (0x%02x) at byte 2", names[i], refused[i]);
        expect_refused(&p, expected, "nothing run");
    }

    /* An allowed global used for what it is not: a storage type called. */
    p.n = 0;
    op(&p, 0x80);
    op(&p, 2);
    global(&p, "torch", "FloatStorage");
    op(&p, ')');
    op(&p, 'R');
    op(&p, '.');
    expect_refused(&p, "REDUCE", "calls something other than");

    /* A persistent id that is not a storage's. */
    p.n = 0;
    op(&p, 0x80);
    op(&p, 2);
    text(&p, "module");
    op(&p, 0x85);
    op(&p, 'Q');
    op(&p, '.');
    expect_refused(&p, "BINPERSID", "persistent id other than a storage's");
}

static void test_malformed(void)
{
    pickle p;
    /* A tensor whose strides make it a transposed view. */
    start(&p);
    tensor(&p, "w", "FloatStorage", "0", 6, 0, 2, (int[]){2, 3}, (int[]){1, 2});
    finish(&p);
    expect_refused(&p, "tensor 'w'", "not row-major");

    /* A tensor past the end of its storage. */
    start(&p);
    tensor(&p, "w", "FloatStorage", "0", 6, 1, 2, (int[]){2, 3}, (int[]){3, 1});
    finish(&p);
    expect_refused(&p, "tensor 'w'", "past the end of its storage");

    /* A key twice. */
    start(&p);
    tensor(&p, "w", "FloatStorage", "0", 6, 0, 1, (int[]){6}, (int[]){1});
    tensor(&p, "w", "FloatStorage", "1", 6, 0, 1, (int[]){6}, (int[]){1});
    finish(&p);
    expect_refused(&p, "tensor 'w'", "appears twice");

    /* A value that is not a tensor. */
    start(&p);
    text(&p, "step");
    int1(&p, 3);
    finish(&p);
    expect_refused(&p, "tensor 'step'", "is an int, not a tensor");

    /* Not a dict at all. */
    p.n = 0;
    op(&p, 0x80);
    op(&p, 2);
    op(&p, ']');
    op(&p, '.');
    expect_refused(&p, "holds a list, not a state dict", NULL);

    /* Cut before STOP. */
    start(&p);
    tensor(&p, "w", "FloatStorage", "0", 6, 0, 1, (int[]){6}, (int[]){1});
    expect_refused(&p, "without its STOP", NULL);

    /* A string longer than the pickle. */
    p.n = 0;
    op(&p, 0x80);
    op(&p, 2);
    op(&p, 'X');
    put(&p, "\xff\xff\xff\x7f", 4);
    expect_refused(&p, "BINUNICODE", "ends inside it");

    /* The memo: read before written, and an index no pickle could fill. */
    p.n = 0;
    op(&p, 0x80);
    op(&p, 2);
    op(&p, 'h');
    op(&p, 7);
    expect_refused(&p, "BINGET", "never stored");
    p.n = 0;
    op(&p, 0x80);
    op(&p, 2);
    op(&p, 'N');
    op(&p, 'r');
    put(&p, "\xff\xff\xff\xff", 4);
    expect_refused(&p, "LONG_BINPUT", "memo index larger");

    /* Items set on a list, popped from an empty stack, an integer too wide. */
    p.n = 0;
    op(&p, 0x80);
    op(&p, 2);
    op(&p, ']');
    op(&p, 'N');
    op(&p, 'N');
    op(&p, 's');
    expect_refused(&p, "SETITEM", "other than a dict");
    p.n = 0;
    op(&p, 0x80);
    op(&p, 2);
    op(&p, '(');
    op(&p, 'R');
    expect_refused(&p, "REDUCE", "too few objects");
    p.n = 0;
    op(&p, 0x80);
    op(&p, 2);
    op(&p, 0x8a);
    op(&p, 9);
    expect_refused(&p, "LONG1", "wider than 64 bits");
}

static void test_bad_files(void)
{
    tfenc_context ctx;
    tfenc_torch_file *file = NULL;
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_torch_open(&ctx, "/nonexistent/pytorch_model.bin", &file), TFENC_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(&ctx), "/nonexistent/pytorch_model.bin"));

    /* Not a zip: refused naming the file. */
    char path[] = "/tmp/test_torch_checkpoint.XXXXXX";
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    CU_ASSERT(write(fd, "PK\x03\x04 not really", 16) == 16);
    close(fd);
    tfenc_context_init(&ctx);
    CU_ASSERT_EQUAL(tfenc_torch_open(&ctx, path, &file), TFENC_ERR_WEIGHTS);
    CU_ASSERT_PTR_NULL(file);
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(&ctx), path));
    CU_ASSERT_PTR_NOT_NULL(strstr(tfenc_context_message(&ctx), "not a zip archive"));
    unlink(path);
}

static const test_case torch_cases[] = {
    {"state dict", test_state_dict},
    {"code refused", test_code_refused},
    {"malformed pickles", test_malformed},
    {"bad files", test_bad_files},
    {NULL, NULL}};

const test_suite test_suites[] = {
    {"torch checkpoint", NULL, NULL, torch_cases},
    {NULL, NULL, NULL, NULL}};
