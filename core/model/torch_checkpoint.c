/* torch.save's zip format read without Python: a restricted pickle machine
 * (the opcodes and globals of a state dict, nothing that calls code) over
 * data.pkl, and the storages read through libzip by offset. */
#include "model/torch_checkpoint.h"
#include "base/context.h"
#include "base/files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zip.h>

/* A hostile pickle of a few bytes per opcode could otherwise ask for
 * gigabytes of values: a real state dict makes ~10 values per tensor. */
#define MAX_VALUES (1 << 23)

/* The storage types a state dict's persistent ids name, and the dtype
 * (safetensors' spelling) of their elements. */
static const struct {
    const char *global;
    const char *dtype;
    int size;
} storage_types[] = {
    {"torch.FloatStorage", "F32", 4}, {"torch.HalfStorage", "F16", 2},
    {"torch.BFloat16Storage", "BF16", 2}, {"torch.DoubleStorage", "F64", 8},
    {"torch.LongStorage", "I64", 8}, {"torch.IntStorage", "I32", 4},
    {"torch.ShortStorage", "I16", 2}, {"torch.CharStorage", "I8", 1},
    {"torch.ByteStorage", "U8", 1}, {"torch.BoolStorage", "BOOL", 1},
};
#define N_STORAGE_TYPES ((int)(sizeof storage_types / sizeof storage_types[0]))

/* Every opcode of pickle protocols 0 to 5 by name, for the message that
 * refuses one. */
static const struct {
    unsigned char code;
    const char *name;
} opcode_names[] = {
    {'(', "MARK"}, {'.', "STOP"}, {'0', "POP"}, {'1', "POP_MARK"}, {'2', "DUP"},
    {'F', "FLOAT"}, {'I', "INT"}, {'J', "BININT"}, {'K', "BININT1"}, {'L', "LONG"},
    {'M', "BININT2"}, {'N', "NONE"}, {'P', "PERSID"}, {'Q', "BINPERSID"}, {'R', "REDUCE"},
    {'S', "STRING"}, {'T', "BINSTRING"}, {'U', "SHORT_BINSTRING"}, {'V', "UNICODE"},
    {'X', "BINUNICODE"}, {'a', "APPEND"}, {'b', "BUILD"}, {'c', "GLOBAL"}, {'d', "DICT"},
    {'}', "EMPTY_DICT"}, {'e', "APPENDS"}, {'g', "GET"}, {'h', "BINGET"}, {'i', "INST"},
    {'j', "LONG_BINGET"}, {'l', "LIST"}, {']', "EMPTY_LIST"}, {'o', "OBJ"}, {'p', "PUT"},
    {'q', "BINPUT"}, {'r', "LONG_BINPUT"}, {'s', "SETITEM"}, {'t', "TUPLE"},
    {')', "EMPTY_TUPLE"}, {'u', "SETITEMS"}, {'G', "BINFLOAT"}, {0x80, "PROTO"},
    {0x81, "NEWOBJ"}, {0x82, "EXT1"}, {0x83, "EXT2"}, {0x84, "EXT4"}, {0x85, "TUPLE1"},
    {0x86, "TUPLE2"}, {0x87, "TUPLE3"}, {0x88, "NEWTRUE"}, {0x89, "NEWFALSE"},
    {0x8a, "LONG1"}, {0x8b, "LONG4"}, {'B', "BINBYTES"}, {'C', "SHORT_BINBYTES"},
    {0x8c, "SHORT_BINUNICODE"}, {0x8d, "BINUNICODE8"}, {0x8e, "BINBYTES8"},
    {0x8f, "EMPTY_SET"}, {0x90, "ADDITEMS"}, {0x91, "FROZENSET"}, {0x92, "NEWOBJ_EX"},
    {0x93, "STACK_GLOBAL"}, {0x94, "MEMOIZE"}, {0x95, "FRAME"}, {0x96, "BYTEARRAY8"},
    {0x97, "NEXT_BUFFER"}, {0x98, "READONLY_BUFFER"},
};

static const char *opcode_name(unsigned char code)
{
    for (size_t i = 0; i < sizeof opcode_names / sizeof opcode_names[0]; i++)
        if (opcode_names[i].code == code)
            return opcode_names[i].name;
    return "unknown";
}

typedef enum value_kind {
    VALUE_NONE,
    VALUE_BOOL,
    VALUE_INT,
    VALUE_STRING,
    VALUE_TUPLE,
    VALUE_LIST,
    VALUE_DICT,
    VALUE_GLOBAL,
    VALUE_STORAGE,
    VALUE_TENSOR
} value_kind;

static const char *const value_kind_names[] = {"None", "a bool", "an int", "a string",
                                               "a tuple", "a list", "a dict", "a global",
                                               "a storage", "a tensor"};

/* What the allowed globals stand for. */
typedef enum global_kind {
    GLOBAL_ORDERED_DICT,
    GLOBAL_REBUILD_TENSOR,
    GLOBAL_REBUILD_PARAMETER,
    GLOBAL_STORAGE
} global_kind;

/* One object of the pickle. Values are never freed one by one: the
 * machine chains them all and frees them together, so that the memo and
 * containers may share them freely. */
typedef struct value {
    value_kind kind;
    int64_t integer;          /* BOOL, INT */
    const char *text;         /* STRING: bytes in the pickle, not NUL-terminated */
    size_t length;
    struct value **items;     /* TUPLE, LIST: the items; DICT: keys and values in turn */
    size_t count, capacity;
    global_kind global;       /* GLOBAL */
    int storage_type;         /* GLOBAL of a storage type, STORAGE: in storage_types */
    struct value *key;        /* STORAGE: its key, a STRING */
    int64_t elements;         /* STORAGE: its size in elements */
    struct value *storage;    /* TENSOR: its STORAGE */
    int64_t offset;           /* TENSOR: its first element in the storage */
    struct value *size, *stride; /* TENSOR: tuples of INT */
    struct value *next;       /* the machine's chain */
} value;

/* The pickle machine: the stack, the marks into it, and the memo. */
typedef struct machine {
    tfenc_context *ctx;
    const char *name; /* for messages */
    const unsigned char *pickle;
    size_t length, position, opcode_at;
    value **stack;
    size_t depth, stack_capacity;
    size_t *marks;
    size_t n_marks, marks_capacity;
    value **memo;
    size_t memo_capacity, memo_count; /* memo_count: entries stored (MEMOIZE's next index) */
    value *values; /* chain of every value made */
    size_t n_values;
} machine;

struct tfenc_torch_file {
    char *name;
    zip_t *archive;    /* the zip format; NULL for the legacy one or a pickle in memory */
    int fd;            /* the legacy format: the file, read by offset; else -1 */
    char *prefix;      /* ARCHIVE/: the folder every entry sits in */
    tfenc_torch_tensor *tensors;
    zip_int64_t *entries; /* zip: [n_tensors], each tensor's storage entry */
    uint64_t *storage_starts; /* legacy: [n_tensors], the file offset of each tensor's
                               * storage's first byte */
    int n_tensors;
    char *strings;     /* names and storage keys, NUL-separated */
};

static int refuse(machine *m, const char *what)
{
    unsigned char code = m->pickle[m->opcode_at];
    return tfenc_error(m->ctx, TFENC_ERR_WEIGHTS, "%s: pickle opcode %s (0x%02x) at byte %zu: "
                       "%s; refused, nothing run (tfenc-import reads only what a state dict "
                       "holds, as torch.load(weights_only=True))", m->name, opcode_name(code),
                       code, m->opcode_at, what);
}

static value *make_value(machine *m, value_kind kind)
{
    if (m->n_values >= MAX_VALUES) {
        refuse(m, "more objects than a state dict makes");
        return NULL;
    }
    value *result = calloc(1, sizeof *result);
    if (result == NULL) {
        tfenc_error(m->ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", m->name);
        return NULL;
    }
    result->kind = kind;
    result->next = m->values;
    m->values = result;
    m->n_values++;
    return result;
}

static int grow(machine *m, void **array, size_t *capacity, size_t needed, size_t item_size)
{
    if (needed <= *capacity)
        return TFENC_OK;
    size_t wanted = *capacity > 0 ? *capacity : 16;
    while (wanted < needed)
        wanted *= 2;
    void *bigger = realloc(*array, wanted * item_size);
    if (bigger == NULL)
        return tfenc_error(m->ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", m->name);
    *array = bigger;
    *capacity = wanted;
    return TFENC_OK;
}

static int push(machine *m, value *v)
{
    if (v == NULL)
        return m->ctx->status != TFENC_OK ? m->ctx->status : TFENC_ERR_NO_MEMORY;
    int status = grow(m, (void **)&m->stack, &m->stack_capacity, m->depth + 1, sizeof *m->stack);
    if (status == TFENC_OK)
        m->stack[m->depth++] = v;
    return status;
}

static int add_item(machine *m, value *container, value *item)
{
    int status = grow(m, (void **)&container->items, &container->capacity, container->count + 1,
                      sizeof *container->items);
    if (status == TFENC_OK)
        container->items[container->count++] = item;
    return status;
}

/* The stack above the last mark must hold at least `n` values. */
static int need(machine *m, size_t n)
{
    size_t floor = m->n_marks > 0 ? m->marks[m->n_marks - 1] : 0;
    return m->depth - floor >= n ? TFENC_OK : refuse(m, "the stack holds too few objects");
}

/* The bytes of an opcode's argument, which must lie inside the pickle. */
static const unsigned char *take(machine *m, size_t n)
{
    if (n > m->length - m->position)
        return NULL;
    const unsigned char *bytes = m->pickle + m->position;
    m->position += n;
    return bytes;
}

static uint64_t little_endian(const unsigned char *bytes, int n)
{
    uint64_t result = 0;
    for (int i = n - 1; i >= 0; i--)
        result = result << 8 | bytes[i];
    return result;
}

/* Pops the values above the last mark (and the mark): *items points at
 * them, still in the stack's storage until the next push. */
static int pop_mark(machine *m, value ***items, size_t *count)
{
    if (m->n_marks == 0)
        return refuse(m, "no MARK before it");
    size_t mark = m->marks[--m->n_marks];
    *items = m->stack != NULL ? m->stack + mark : NULL; /* NULL: a MARK before any push */
    *count = m->depth - mark;
    m->depth = mark;
    return TFENC_OK;
}

static int is_string(const value *v, const char *text)
{
    return v->kind == VALUE_STRING && v->length == strlen(text)
           && memcmp(v->text, text, v->length) == 0;
}

/* GLOBAL and STACK_GLOBAL: only the callables a state dict names. */
static int push_global(machine *m, const char *module, size_t module_length, const char *name,
                       size_t name_length)
{
    char full[160];
    if (module_length + name_length + 2 > sizeof full)
        return refuse(m, "it names a global longer than any a state dict uses");
    memcpy(full, module, module_length);
    full[module_length] = '.';
    memcpy(full + module_length + 1, name, name_length);
    full[module_length + 1 + name_length] = '\0';
    value *v = make_value(m, VALUE_GLOBAL);
    if (v == NULL)
        return m->ctx->status;
    v->storage_type = -1;
    if (strcmp(full, "collections.OrderedDict") == 0) {
        v->global = GLOBAL_ORDERED_DICT;
    } else if (strcmp(full, "torch._utils._rebuild_tensor_v2") == 0) {
        v->global = GLOBAL_REBUILD_TENSOR;
    } else if (strcmp(full, "torch._utils._rebuild_parameter") == 0) {
        v->global = GLOBAL_REBUILD_PARAMETER;
    } else {
        for (int i = 0; i < N_STORAGE_TYPES && v->storage_type < 0; i++)
            if (strcmp(full, storage_types[i].global) == 0)
                v->storage_type = i;
        if (v->storage_type < 0) {
            /* Make the name printable: it came from the file. */
            for (char *c = full; *c != '\0'; c++)
                if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
                    *c = '?';
            char what[400];
            snprintf(what, sizeof what, "it names the global '%s', which is not a state "
                     "dict's (allowed: collections.OrderedDict, torch._utils._rebuild_tensor_v2 "
                     "and _rebuild_parameter, the torch.*Storage types)", full);
            return refuse(m, what);
        }
        v->global = GLOBAL_STORAGE;
    }
    return push(m, v);
}

/* GLOBAL's two arguments are lines of text. */
static int read_line(machine *m, const char **text, size_t *length)
{
    const unsigned char *start = m->pickle + m->position;
    const unsigned char *end = memchr(start, '\n', m->length - m->position);
    if (end == NULL)
        return refuse(m, "the pickle ends inside it");
    *text = (const char *)start;
    *length = (size_t)(end - start);
    m->position += *length + 1;
    return TFENC_OK;
}

static int tuple_of_ints(const value *v, int max_rank)
{
    if (v->kind != VALUE_TUPLE || v->count > (size_t)max_rank)
        return 0;
    for (size_t i = 0; i < v->count; i++)
        if (v->items[i]->kind != VALUE_INT)
            return 0;
    return 1;
}

/* REDUCE: applies an allowed global to its argument tuple, by
 * interpretation: OrderedDict() makes an empty dict, the rebuild functions
 * make a tensor of a storage. Nothing is ever called. */
static int reduce(machine *m)
{
    int status = need(m, 2);
    if (status != TFENC_OK)
        return status;
    value *arguments = m->stack[--m->depth];
    value *callable = m->stack[m->depth - 1];
    if (callable->kind != VALUE_GLOBAL || callable->global == GLOBAL_STORAGE)
        return refuse(m, "it calls something other than OrderedDict or a tensor rebuild "
                         "function");
    if (arguments->kind != VALUE_TUPLE)
        return refuse(m, "its arguments are not a tuple");
    value **a = arguments->items;
    value *result;
    switch (callable->global) {
    case GLOBAL_ORDERED_DICT:
        if (arguments->count != 0)
            return refuse(m, "OrderedDict with arguments (a state dict's is built empty, "
                             "then filled)");
        result = make_value(m, VALUE_DICT);
        break;
    case GLOBAL_REBUILD_PARAMETER:
        /* (data, requires_grad, backward_hooks): the data is the tensor. */
        if (arguments->count != 3 || a[0]->kind != VALUE_TENSOR)
            return refuse(m, "_rebuild_parameter without a tensor");
        result = a[0];
        break;
    default:
        /* (storage, storage_offset, size, stride, requires_grad,
         * backward_hooks[, metadata]) */
        if (arguments->count < 6 || arguments->count > 7 || a[0]->kind != VALUE_STORAGE
            || a[1]->kind != VALUE_INT || a[1]->integer < 0
            || !tuple_of_ints(a[2], TFENC_SAFETENSORS_MAX_RANK)
            || !tuple_of_ints(a[3], TFENC_SAFETENSORS_MAX_RANK) || a[2]->count != a[3]->count)
            return refuse(m, "_rebuild_tensor_v2 without (storage, offset, size, stride, ...)");
        result = make_value(m, VALUE_TENSOR);
        if (result != NULL) {
            result->storage = a[0];
            result->offset = a[1]->integer;
            result->size = a[2];
            result->stride = a[3];
        }
        break;
    }
    if (result == NULL)
        return m->ctx->status;
    m->stack[m->depth - 1] = result;
    return TFENC_OK;
}

/* BINPERSID: the persistent id of a storage, ('storage', type, key,
 * location, elements), and a sixth item (None) in the legacy format. */
static int persistent_load(machine *m)
{
    int status = need(m, 1);
    if (status != TFENC_OK)
        return status;
    value *id = m->stack[m->depth - 1];
    if (id->kind != VALUE_TUPLE || id->count < 5 || id->count > 6
        || !is_string(id->items[0], "storage") || id->items[1]->kind != VALUE_GLOBAL
        || id->items[1]->global != GLOBAL_STORAGE || id->items[2]->kind != VALUE_STRING
        || id->items[3]->kind != VALUE_STRING || id->items[4]->kind != VALUE_INT
        || id->items[4]->integer < 0 || (id->count == 6 && id->items[5]->kind != VALUE_NONE))
        return refuse(m, "a persistent id other than a storage's ('storage', type, key, "
                         "location, size)");
    value *storage = make_value(m, VALUE_STORAGE);
    if (storage == NULL)
        return m->ctx->status;
    storage->storage_type = id->items[1]->storage_type;
    storage->key = id->items[2];
    storage->elements = id->items[4]->integer;
    m->stack[m->depth - 1] = storage;
    return TFENC_OK;
}

static int memo_put(machine *m, uint64_t index)
{
    int status = need(m, 1);
    if (status != TFENC_OK)
        return status;
    /* Picklers number the memo from 0, one entry per PUT of a few bytes. */
    if (index >= MAX_VALUES || index > m->length)
        return refuse(m, "a memo index larger than the pickle could fill");
    size_t old = m->memo_capacity;
    status = grow(m, (void **)&m->memo, &m->memo_capacity, (size_t)index + 1, sizeof *m->memo);
    if (status != TFENC_OK)
        return status;
    memset(m->memo + old, 0, (m->memo_capacity - old) * sizeof *m->memo);
    if (m->memo[index] == NULL)
        m->memo_count++;
    m->memo[index] = m->stack[m->depth - 1];
    return TFENC_OK;
}

static int memo_get(machine *m, uint64_t index)
{
    if (index >= m->memo_capacity || m->memo[index] == NULL)
        return refuse(m, "a memo entry that was never stored");
    return push(m, m->memo[index]);
}

static int set_items(machine *m, value *dict, value **items, size_t count)
{
    if (dict->kind != VALUE_DICT)
        return refuse(m, "it sets items of something other than a dict");
    if (count % 2 != 0)
        return refuse(m, "a key without a value");
    int status = TFENC_OK;
    for (size_t i = 0; i < count && status == TFENC_OK; i++)
        status = add_item(m, dict, items[i]);
    return status;
}

static int make_tuple(machine *m, value **items, size_t count, value **tuple)
{
    *tuple = make_value(m, VALUE_TUPLE);
    int status = *tuple == NULL ? m->ctx->status : TFENC_OK;
    for (size_t i = 0; i < count && status == TFENC_OK; i++)
        status = add_item(m, *tuple, items[i]);
    return status;
}

/* Strings: BINUNICODE, SHORT_BINUNICODE, SHORT_BINSTRING (the legacy
 * format's Python 2 strings). */
static int push_string(machine *m, size_t length_bytes)
{
    const unsigned char *length = take(m, length_bytes);
    const unsigned char *text = length == NULL ? NULL
                                : take(m, (size_t)little_endian(length, (int)length_bytes));
    if (text == NULL)
        return refuse(m, "the pickle ends inside it");
    value *v = make_value(m, VALUE_STRING);
    if (v == NULL)
        return m->ctx->status;
    v->text = (const char *)text;
    v->length = (size_t)little_endian(length, (int)length_bytes);
    return push(m, v);
}

static int push_int(machine *m, int64_t integer, value_kind kind)
{
    value *v = make_value(m, kind);
    if (v == NULL)
        return m->ctx->status;
    v->integer = integer;
    return push(m, v);
}

/* One opcode. *stop is set by STOP, which leaves the result on the stack. */
static int step(machine *m, int *stop)
{
    m->opcode_at = m->position;
    unsigned char code = m->pickle[m->position++];
    const unsigned char *bytes;
    value **items = NULL;
    size_t count = 0;
    value *v;
    int status;
    switch (code) {
    case 0x80: /* PROTO */
        if ((bytes = take(m, 1)) == NULL || bytes[0] > 5)
            return refuse(m, "a pickle protocol above 5");
        return TFENC_OK;
    case 0x95: /* FRAME: a length hint, no object */
        return take(m, 8) != NULL ? TFENC_OK : refuse(m, "the pickle ends inside it");
    case '.': /* STOP */
        if ((status = need(m, 1)) != TFENC_OK)
            return status;
        *stop = 1;
        return TFENC_OK;
    case '(': /* MARK */
        status = grow(m, (void **)&m->marks, &m->marks_capacity, m->n_marks + 1,
                      sizeof *m->marks);
        if (status == TFENC_OK)
            m->marks[m->n_marks++] = m->depth;
        return status;
    case 'N': return push(m, make_value(m, VALUE_NONE));
    case 0x88: return push_int(m, 1, VALUE_BOOL);
    case 0x89: return push_int(m, 0, VALUE_BOOL);
    case 'K': /* BININT1 */
    case 'M': /* BININT2 */
    case 'J': /* BININT, signed */
        if ((bytes = take(m, code == 'K' ? 1 : code == 'M' ? 2 : 4)) == NULL)
            return refuse(m, "the pickle ends inside it");
        return push_int(m, code == 'K'   ? bytes[0]
                           : code == 'M' ? (int64_t)little_endian(bytes, 2)
                                         : (int64_t)(int32_t)(uint32_t)little_endian(bytes, 4),
                        VALUE_INT);
    case 0x8a: { /* LONG1: two's complement, little-endian, up to 8 bytes here */
        const unsigned char *n = take(m, 1);
        if (n == NULL || n[0] > 8 || (bytes = take(m, n[0])) == NULL)
            return refuse(m, n != NULL && n[0] > 8 ? "an integer wider than 64 bits"
                                                   : "the pickle ends inside it");
        uint64_t bits = little_endian(bytes, n[0]);
        if (n[0] > 0 && n[0] < 8 && bytes[n[0] - 1] & 0x80)
            bits |= ~UINT64_C(0) << (8 * n[0]); /* sign-extend */
        return push_int(m, (int64_t)bits, VALUE_INT);
    }
    case 'X': return push_string(m, 4);
    case 0x8c: return push_string(m, 1);
    case 'U': return push_string(m, 1);
    case ')': return push(m, make_value(m, VALUE_TUPLE));
    case ']': return push(m, make_value(m, VALUE_LIST));
    case '}': return push(m, make_value(m, VALUE_DICT));
    case 't': /* TUPLE */
        if ((status = pop_mark(m, &items, &count)) != TFENC_OK
            || (status = make_tuple(m, items, count, &v)) != TFENC_OK)
            return status;
        return push(m, v);
    case 0x85: /* TUPLE1 */
    case 0x86: /* TUPLE2 */
    case 0x87: /* TUPLE3 */
        count = (size_t)(code - 0x84);
        if ((status = need(m, count)) != TFENC_OK)
            return status;
        m->depth -= count;
        if ((status = make_tuple(m, m->stack + m->depth, count, &v)) != TFENC_OK)
            return status;
        return push(m, v);
    case 'a': /* APPEND */
        if ((status = need(m, 2)) != TFENC_OK)
            return status;
        v = m->stack[--m->depth];
        if (m->stack[m->depth - 1]->kind != VALUE_LIST)
            return refuse(m, "it appends to something other than a list");
        return add_item(m, m->stack[m->depth - 1], v);
    case 'e': /* APPENDS */
        if ((status = pop_mark(m, &items, &count)) != TFENC_OK || (status = need(m, 1)))
            return status;
        if (m->stack[m->depth - 1]->kind != VALUE_LIST)
            return refuse(m, "it appends to something other than a list");
        for (size_t i = 0; i < count && status == TFENC_OK; i++)
            status = add_item(m, m->stack[m->depth - 1], items[i]);
        return status;
    case 's': /* SETITEM */
        if ((status = need(m, 3)) != TFENC_OK)
            return status;
        m->depth -= 2;
        return set_items(m, m->stack[m->depth - 1], m->stack + m->depth, 2);
    case 'u': /* SETITEMS */
        if ((status = pop_mark(m, &items, &count)) != TFENC_OK || (status = need(m, 1)))
            return status;
        return set_items(m, m->stack[m->depth - 1], items, count);
    case 'b': /* BUILD: an OrderedDict's attributes (_metadata), which tfenc leaves out */
        if ((status = need(m, 2)) != TFENC_OK)
            return status;
        v = m->stack[--m->depth];
        if (m->stack[m->depth - 1]->kind != VALUE_DICT || v->kind != VALUE_DICT)
            return refuse(m, "it sets the state of something other than an OrderedDict");
        return TFENC_OK;
    case 'c': { /* GLOBAL: "module\nname\n" */
        const char *module, *name;
        size_t module_length, name_length;
        if ((status = read_line(m, &module, &module_length)) != TFENC_OK
            || (status = read_line(m, &name, &name_length)) != TFENC_OK)
            return status;
        return push_global(m, module, module_length, name, name_length);
    }
    case 0x93: /* STACK_GLOBAL: module and name from the stack */
        if ((status = need(m, 2)) != TFENC_OK)
            return status;
        m->depth -= 2;
        if (m->stack[m->depth]->kind != VALUE_STRING || m->stack[m->depth + 1]->kind
                                                            != VALUE_STRING)
            return refuse(m, "its module and name are not strings");
        return push_global(m, m->stack[m->depth]->text, m->stack[m->depth]->length,
                           m->stack[m->depth + 1]->text, m->stack[m->depth + 1]->length);
    case 'R': return reduce(m);
    case 'Q': return persistent_load(m);
    case 'q': /* BINPUT */
    case 'r': /* LONG_BINPUT */
        if ((bytes = take(m, code == 'q' ? 1 : 4)) == NULL)
            return refuse(m, "the pickle ends inside it");
        return memo_put(m, little_endian(bytes, code == 'q' ? 1 : 4));
    case 0x94: /* MEMOIZE: the next index */
        return memo_put(m, m->memo_count);
    case 'h': /* BINGET */
    case 'j': /* LONG_BINGET */
        if ((bytes = take(m, code == 'h' ? 1 : 4)) == NULL)
            return refuse(m, "the pickle ends inside it");
        return memo_get(m, little_endian(bytes, code == 'h' ? 1 : 4));
    default:
        return refuse(m, "not an opcode a state dict uses");
    }
}

static void machine_free(machine *m)
{
    while (m->values != NULL) {
        value *next = m->values->next;
        free(m->values->items);
        free(m->values);
        m->values = next;
    }
    free(m->stack);
    free(m->marks);
    free(m->memo);
}

/* Runs the pickle that starts at m->position to its STOP: *result is the
 * object it builds (owned by the machine). */
static int run_pickle(machine *m, value **result)
{
    int stop = 0, status = TFENC_OK;
    while (!stop && status == TFENC_OK) {
        if (m->position >= m->length)
            return tfenc_error(m->ctx, TFENC_ERR_WEIGHTS, "%s: the pickle ends at byte %zu "
                               "without its STOP opcode (truncated file?)", m->name,
                               m->position);
        status = step(m, &stop);
    }
    if (status == TFENC_OK)
        *result = m->stack[--m->depth];
    return status;
}

/* A new pickle of the same file (the legacy format holds five in a row):
 * each has a memo of its own. */
static void next_pickle(machine *m)
{
    if (m->memo != NULL)
        memset(m->memo, 0, m->memo_capacity * sizeof *m->memo);
    m->memo_count = 0;
    m->depth = 0;
    m->n_marks = 0;
}

static int weights_error(tfenc_context *ctx, const char *name, const char *key, const char *what)
{
    return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: tensor '%s' %s", name, key, what);
}

/* The tensor `v` under key `key` of the state dict, checked: contiguous
 * (torch.save keeps a view's strides; a state dict's parameters have
 * row-major ones) and inside its storage. */
static int describe_tensor(tfenc_context *ctx, const char *name, const char *key, const value *v,
                           tfenc_torch_tensor *tensor)
{
    if (v->kind != VALUE_TENSOR) {
        char what[96];
        snprintf(what, sizeof what, "is %s, not a tensor (tfenc-import reads a state dict of "
                 "tensors)", value_kind_names[v->kind]);
        return weights_error(ctx, name, key, what);
    }
    const value *storage = v->storage;
    tensor->dtype = storage_types[storage->storage_type].dtype;
    tensor->element_size = storage_types[storage->storage_type].size;
    tensor->storage_elements = storage->elements;
    tensor->offset = v->offset;
    tensor->rank = (int)v->size->count;
    int64_t n = 1;
    for (int i = 0; i < tensor->rank; i++) {
        int64_t size = v->size->items[i]->integer;
        if (size < 0 || (size != 0 && n > INT64_MAX / size))
            return weights_error(ctx, name, key, "has a negative or too large shape");
        tensor->dims[i] = size;
        n *= size;
    }
    tensor->n_elements = n;
    /* Row-major strides, where a dimension of size 1 may have any. */
    int64_t expected = 1;
    for (int i = tensor->rank - 1; i >= 0 && n > 0; i--) {
        if (tensor->dims[i] != 1 && v->stride->items[i]->integer != expected)
            return weights_error(ctx, name, key, "is stored with strides that are not "
                                 "row-major (a view saved as it was): tfenc-import reads "
                                 "contiguous tensors; save the state dict with "
                                 "{k: v.contiguous() for k, v in state_dict.items()}");
        expected *= tensor->dims[i];
    }
    if (tensor->offset > storage->elements || n > storage->elements - tensor->offset
        || (uint64_t)storage->elements > UINT64_MAX / (uint64_t)tensor->element_size)
        return weights_error(ctx, name, key, "reaches past the end of its storage");
    return TFENC_OK;
}

/* Copies the names and storage keys into one block the file owns. */
static int copy_strings(tfenc_context *ctx, tfenc_torch_file *file, const value *dict)
{
    size_t total = 0;
    for (size_t i = 0; i + 1 < dict->count; i += 2)
        total += dict->items[i]->length + dict->items[i + 1]->storage->key->length + 2;
    file->strings = malloc(total + 1);
    if (file->strings == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", file->name);
    char *at = file->strings;
    for (size_t i = 0; i + 1 < dict->count; i += 2) {
        const value *key = dict->items[i], *storage_key = dict->items[i + 1]->storage->key;
        tfenc_torch_tensor *tensor = &file->tensors[i / 2];
        memcpy(at, key->text, key->length);
        at[key->length] = '\0';
        tensor->name = at;
        at += key->length + 1;
        memcpy(at, storage_key->text, storage_key->length);
        at[storage_key->length] = '\0';
        tensor->storage = at;
        at += storage_key->length + 1;
    }
    return TFENC_OK;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp((*(const tfenc_torch_tensor *const *)a)->name,
                  (*(const tfenc_torch_tensor *const *)b)->name);
}

/* A key twice (a pickle's dict may set one again) would let two entries
 * disagree about one tensor. */
static int check_unique_names(tfenc_context *ctx, const char *name, tfenc_torch_file *file)
{
    const tfenc_torch_tensor **sorted = malloc(((size_t)file->n_tensors + 1) * sizeof *sorted);
    if (sorted == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", name);
    for (int i = 0; i < file->n_tensors; i++)
        sorted[i] = &file->tensors[i];
    qsort(sorted, (size_t)file->n_tensors, sizeof *sorted, compare_names);
    int status = TFENC_OK;
    for (int i = 1; i < file->n_tensors && status == TFENC_OK; i++)
        if (strcmp(sorted[i - 1]->name, sorted[i]->name) == 0)
            status = weights_error(ctx, name, sorted[i]->name, "appears twice in the state "
                                   "dict");
    free(sorted);
    return status;
}

/* The state dict the pickle built, as the file's tensors. */
static int collect_tensors(machine *m, tfenc_torch_file *file, const value *dict)
{
    tfenc_context *ctx = m->ctx;
    if (dict->kind != VALUE_DICT)
        return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: the pickle holds %s, not a state dict",
                           m->name, value_kind_names[dict->kind]);
    file->n_tensors = (int)(dict->count / 2);
    file->tensors = calloc((size_t)file->n_tensors + 1, sizeof *file->tensors);
    if (file->tensors == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", m->name);
    for (size_t i = 0; i + 1 < dict->count; i += 2) {
        const value *key = dict->items[i];
        char printable[128];
        if (key->kind != VALUE_STRING)
            return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: a key of the state dict is %s, "
                               "not a string", m->name, value_kind_names[key->kind]);
        snprintf(printable, sizeof printable, "%.*s", (int)(key->length < 120 ? key->length
                                                                               : 120), key->text);
        if (memchr(key->text, '\0', key->length) != NULL)
            return weights_error(ctx, m->name, printable, "has a NUL byte in its name");
        int status = describe_tensor(ctx, m->name, printable, dict->items[i + 1],
                                     &file->tensors[i / 2]);
        if (status != TFENC_OK)
            return status;
    }
    int status = copy_strings(ctx, file, dict);
    if (status == TFENC_OK)
        status = check_unique_names(ctx, m->name, file);
    return status;
}

static int parse(tfenc_context *ctx, tfenc_torch_file *file, const unsigned char *pickle,
                 size_t length)
{
    machine m = {.ctx = ctx, .name = file->name, .pickle = pickle, .length = length};
    value *result = NULL;
    int status = run_pickle(&m, &result);
    if (status == TFENC_OK)
        status = collect_tensors(&m, file, result);
    machine_free(&m);
    return status;
}

static tfenc_torch_file *new_file(tfenc_context *ctx, const char *name)
{
    tfenc_torch_file *file = calloc(1, sizeof *file);
    if (file == NULL || (file->name = strdup(name)) == NULL) {
        free(file);
        tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", name);
        return NULL;
    }
    file->fd = -1;
    return file;
}

int tfenc_torch_parse_pickle(tfenc_context *ctx, const char *name, const unsigned char *pickle,
                             size_t length, tfenc_torch_file **file)
{
    *file = new_file(ctx, name);
    if (*file == NULL)
        return TFENC_ERR_NO_MEMORY;
    int status = parse(ctx, *file, pickle, length);
    if (status != TFENC_OK) {
        tfenc_torch_close(*file);
        *file = NULL;
    }
    return status;
}

static int zip_failure(tfenc_context *ctx, const char *path, const char *what, zip_error_t *error)
{
    return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: %s (libzip: %s)", path, what,
                       zip_error_strerror(error));
}

/* Reads `size` bytes of entry `index` from byte `offset` into `out`. */
static int read_entry(tfenc_context *ctx, const tfenc_torch_file *file, zip_int64_t index,
                      uint64_t offset, void *out, size_t size, const char *what)
{
    zip_file_t *entry = zip_fopen_index(file->archive, (zip_uint64_t)index, 0);
    if (entry == NULL)
        return zip_failure(ctx, file->name, what, zip_get_error(file->archive));
    int status = TFENC_OK;
    /* torch.save stores its entries uncompressed, where libzip can seek;
     * a compressed entry is read up to the offset instead. */
    if (offset > 0 && zip_fseek(entry, (zip_int64_t)offset, SEEK_SET) != 0) {
        unsigned char skip[65536];
        for (uint64_t left = offset; left > 0 && status == TFENC_OK;) {
            size_t chunk = left < sizeof skip ? (size_t)left : sizeof skip;
            zip_int64_t n = zip_fread(entry, skip, chunk);
            if (n <= 0)
                status = zip_failure(ctx, file->name, what, zip_file_get_error(entry));
            else
                left -= (uint64_t)n;
        }
    }
    for (unsigned char *at = out; size > 0 && status == TFENC_OK;) {
        zip_int64_t n = zip_fread(entry, at, size);
        if (n <= 0) {
            status = n < 0 ? zip_failure(ctx, file->name, what, zip_file_get_error(entry))
                           : tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: %s: the entry ends "
                                         "early (truncated file?)", file->name, what);
        } else {
            at += n;
            size -= (size_t)n;
        }
    }
    zip_fclose(entry);
    return status;
}

/* torch.save puts every entry in one folder named after the file
 * (ARCHIVE/data.pkl, ARCHIVE/data/0, ...): finds data.pkl and that folder. */
static int find_pickle(tfenc_context *ctx, tfenc_torch_file *file, zip_int64_t *pickle)
{
    zip_int64_t n = zip_get_num_entries(file->archive, 0);
    for (zip_int64_t i = 0; i < n; i++) {
        const char *entry = zip_get_name(file->archive, (zip_uint64_t)i, 0);
        const char *slash = entry != NULL ? strchr(entry, '/') : NULL;
        if (slash != NULL && strcmp(slash, "/data.pkl") == 0) {
            file->prefix = strndup(entry, (size_t)(slash - entry) + 1);
            if (file->prefix == NULL)
                return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", file->name);
            *pickle = i;
            return TFENC_OK;
        }
    }
    return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: a zip archive without ARCHIVE/data.pkl, "
                       "so not one torch.save wrote", file->name);
}

/* Each tensor's storage entry, ARCHIVE/data/KEY, holds exactly the bytes
 * the pickle declares; and the archive is little-endian (torch.save writes
 * ARCHIVE/byteorder since PyTorch 2.1; before, it wrote the host's order,
 * little-endian on every platform tfenc runs on). */
static int check_storages(tfenc_context *ctx, tfenc_torch_file *file)
{
    char *entry_name = NULL;
    int status = TFENC_OK;
    file->entries = calloc((size_t)file->n_tensors + 1, sizeof *file->entries);
    if (file->entries == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", file->name);
    if (asprintf(&entry_name, "%sbyteorder", file->prefix) < 0)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", file->name);
    zip_int64_t byteorder = zip_name_locate(file->archive, entry_name, 0);
    free(entry_name);
    if (byteorder >= 0) {
        char order[8] = "";
        zip_stat_t info;
        if (zip_stat_index(file->archive, (zip_uint64_t)byteorder, 0, &info) == 0
            && info.size < sizeof order)
            status = read_entry(ctx, file, byteorder, 0, order, (size_t)info.size, "byteorder");
        if (status == TFENC_OK && strcmp(order, "little") != 0)
            return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: byteorder is not \"little\": "
                               "tfenc-import reads little-endian storages", file->name);
    }
    for (int i = 0; i < file->n_tensors && status == TFENC_OK; i++) {
        tfenc_torch_tensor *tensor = &file->tensors[i];
        if (asprintf(&entry_name, "%sdata/%s", file->prefix, tensor->storage) < 0)
            return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", file->name);
        zip_stat_t info;
        file->entries[i] = zip_name_locate(file->archive, entry_name, 0);
        uint64_t bytes = (uint64_t)tensor->storage_elements * (uint64_t)tensor->element_size;
        if (file->entries[i] < 0)
            status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: tensor '%s': its storage %s is "
                                 "not in the archive", file->name, tensor->name, entry_name);
        else if (zip_stat_index(file->archive, (zip_uint64_t)file->entries[i], 0, &info) != 0
                 || !(info.valid & ZIP_STAT_SIZE) || info.size != bytes)
            status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: tensor '%s': its storage %s "
                                 "holds %llu bytes, the pickle declares %lld elements of %d "
                                 "bytes", file->name, tensor->name, entry_name,
                                 (unsigned long long)info.size,
                                 (long long)tensor->storage_elements, tensor->element_size);
        free(entry_name);
    }
    return status;
}

/* The first bytes of torch.save's legacy format: the pickled magic number
 * 0x1950a86a20f9469cfc6c (PROTO 2, LONG1 of 10 bytes). */
static const unsigned char legacy_magic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46,
                                             0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

/* The zip archive's first local header. */
static const unsigned char zip_magic[] = {'P', 'K', 0x03, 0x04};

static int starts_with(int fd, const unsigned char *magic, size_t length)
{
    unsigned char start[sizeof legacy_magic];
    return pread(fd, start, length, 0) == (ssize_t)length && memcmp(start, magic, length) == 0;
}

int tfenc_torch_recognize(const char *path)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int torch = starts_with(fd, zip_magic, sizeof zip_magic)
                || starts_with(fd, legacy_magic, sizeof legacy_magic);
    close(fd);
    return torch;
}

/* The value of `key` in a pickled dict, or NULL. */
static const value *dict_get(const value *dict, const char *key)
{
    for (size_t i = 0; i + 1 < dict->count; i += 2)
        if (is_string(dict->items[i], key))
            return dict->items[i + 1];
    return NULL;
}

static int legacy_error(tfenc_context *ctx, const char *path, const char *what)
{
    return tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: torch.save's legacy format: %s", path, what);
}

/* After the pickles, each storage the last one lists, in its order: its
 * size in elements (8 bytes, little-endian), then its bytes. Gives each
 * tensor the offset of its storage's first byte. */
static int locate_storages(tfenc_context *ctx, tfenc_torch_file *file, const value *keys,
                           uint64_t at, uint64_t file_size)
{
    const char *path = file->name;
    file->storage_starts = calloc((size_t)file->n_tensors + 1, sizeof *file->storage_starts);
    if (file->storage_starts == NULL)
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", path);
    for (size_t k = 0; k < keys->count; k++) {
        const value *key = keys->items[k];
        if (key->kind != VALUE_STRING)
            return legacy_error(ctx, path, "a storage key that is not a string");
        unsigned char size_bytes[8];
        if (at > file_size - 8 || tfenc_file_read_at(file->fd, size_bytes, 8, at) != 0)
            return legacy_error(ctx, path, "the file ends before its storages (truncated?)");
        uint64_t elements = little_endian(size_bytes, 8);
        int element_size = 0;
        for (int i = 0; i < file->n_tensors; i++) {
            tfenc_torch_tensor *tensor = &file->tensors[i];
            if (strlen(tensor->storage) != key->length
                || memcmp(tensor->storage, key->text, key->length) != 0)
                continue;
            if ((uint64_t)tensor->storage_elements != elements
                || (element_size != 0 && tensor->element_size != element_size))
                return weights_error(ctx, path, tensor->name, "disagrees with its storage's "
                                     "size or type");
            element_size = tensor->element_size;
            file->storage_starts[i] = at + 8;
        }
        if (element_size == 0)
            return legacy_error(ctx, path, "a storage that no tensor uses");
        if (elements > (file_size - at - 8) / (uint64_t)element_size)
            return legacy_error(ctx, path, "a storage reaches past the end of the file "
                                "(truncated?)");
        at += 8 + elements * (uint64_t)element_size;
    }
    for (int i = 0; i < file->n_tensors; i++)
        if (file->storage_starts[i] == 0)
            return weights_error(ctx, path, file->tensors[i].name, "has a storage the file "
                                 "does not hold");
    return TFENC_OK;
}

/* torch.save before PyTorch 1.6 (and with _use_new_zipfile_serialization
 * False): five pickles in a row, the magic number, the protocol version
 * (1001), the system's description (little_endian), the state dict and
 * the list of storage keys, then the storages. The pickles are read
 * through a read-only mapping of the file, so that only their pages are
 * loaded: the storages are read later by offset, one tensor at a time. */
static int open_legacy(tfenc_context *ctx, tfenc_torch_file *file, uint64_t file_size)
{
    const char *path = file->name;
    void *map = mmap(NULL, (size_t)file_size, PROT_READ, MAP_PRIVATE, file->fd, 0);
    if (map == MAP_FAILED)
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot map the file: %s", path,
                           strerror(errno));
    /* The magic number's pickle: its bytes (checked by the caller) and STOP. */
    machine m = {.ctx = ctx, .name = path, .pickle = map, .length = (size_t)file_size,
                 .position = sizeof legacy_magic + 1};
    value *version = NULL, *system = NULL, *state = NULL, *keys = NULL;
    int status = file_size > sizeof legacy_magic && m.pickle[sizeof legacy_magic] == '.'
                     ? TFENC_OK
                     : legacy_error(ctx, path, "no STOP after the magic number");
    if (status == TFENC_OK && (status = run_pickle(&m, &version)) == TFENC_OK
        && (version->kind != VALUE_INT || version->integer != 1001))
        status = legacy_error(ctx, path, "protocol version other than 1001");
    next_pickle(&m);
    if (status == TFENC_OK && (status = run_pickle(&m, &system)) == TFENC_OK) {
        const value *little = system->kind == VALUE_DICT ? dict_get(system, "little_endian")
                                                         : NULL;
        if (little == NULL || little->kind != VALUE_BOOL || little->integer != 1)
            status = legacy_error(ctx, path, "not written on a little-endian machine");
    }
    next_pickle(&m);
    if (status == TFENC_OK && (status = run_pickle(&m, &state)) == TFENC_OK)
        status = collect_tensors(&m, file, state);
    next_pickle(&m);
    if (status == TFENC_OK && (status = run_pickle(&m, &keys)) == TFENC_OK
        && keys->kind != VALUE_LIST)
        status = legacy_error(ctx, path, "no list of storage keys after the state dict");
    if (status == TFENC_OK)
        status = locate_storages(ctx, file, keys, m.position, file_size);
    machine_free(&m);
    munmap(map, (size_t)file_size);
    return status;
}

int tfenc_torch_open(tfenc_context *ctx, const char *path, tfenc_torch_file **file)
{
    *file = NULL;
    /* A regular file only (core/base/files.h), as for safetensors. */
    struct stat info;
    char why[256];
    int fd = tfenc_file_open_regular_descriptor(path, &info, why, sizeof why);
    if (fd < 0)
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: %s", path, why);
    tfenc_torch_file *result = new_file(ctx, path);
    if (result == NULL) {
        close(fd);
        return TFENC_ERR_NO_MEMORY;
    }
    int status;
    if (starts_with(fd, legacy_magic, sizeof legacy_magic)) {
        result->fd = fd;
        status = open_legacy(ctx, result, (uint64_t)info.st_size);
        if (status != TFENC_OK) {
            tfenc_torch_close(result);
            return status;
        }
        *file = result;
        return TFENC_OK;
    }
    unsigned char *pickle = NULL;
    char *pickle_name = NULL, *file_name;
    zip_int64_t entry = -1;
    zip_stat_t entry_info;
    int zip_status;
    /* ZIP_CHECKCONS: the central directory must agree with the entries'
     * own headers, which a truncated or spliced file breaks. */
    result->archive = zip_fdopen(fd, ZIP_RDONLY | ZIP_CHECKCONS, &zip_status);
    if (result->archive == NULL) {
        close(fd);
        zip_error_t error;
        zip_error_init_with_code(&error, zip_status);
        status = zip_failure(ctx, path, "not a zip archive that torch.save wrote (truncated or "
                             "damaged file?)", &error);
        zip_error_fini(&error);
        goto fail;
    }
    if ((status = find_pickle(ctx, result, &entry)) != TFENC_OK)
        goto fail;
    if (zip_stat_index(result->archive, (zip_uint64_t)entry, 0, &entry_info) != 0
        || !(entry_info.valid & ZIP_STAT_SIZE) || entry_info.size > TFENC_TORCH_MAX_PICKLE) {
        status = tfenc_error(ctx, TFENC_ERR_WEIGHTS, "%s: %sdata.pkl is larger than %u bytes, "
                             "more than a state dict's pickle", path, result->prefix,
                             TFENC_TORCH_MAX_PICKLE);
        goto fail;
    }
    pickle = malloc((size_t)entry_info.size + 1);
    if (pickle == NULL) {
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", path);
        goto fail;
    }
    if ((status = read_entry(ctx, result, entry, 0, pickle, (size_t)entry_info.size,
                             "data.pkl")) != TFENC_OK)
        goto fail;
    /* Messages name the pickle inside the file. */
    if (asprintf(&pickle_name, "%s (%sdata.pkl)", path, result->prefix) < 0) {
        status = tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "%s: out of memory", path);
        goto fail;
    }
    file_name = result->name;
    result->name = pickle_name;
    status = parse(ctx, result, pickle, (size_t)entry_info.size);
    result->name = file_name;
    free(pickle_name);
    if (status == TFENC_OK)
        status = check_storages(ctx, result);
    if (status != TFENC_OK)
        goto fail;
    free(pickle);
    *file = result;
    return TFENC_OK;

fail:
    free(pickle);
    tfenc_torch_close(result);
    return status;
}

int tfenc_torch_count(const tfenc_torch_file *file)
{
    return file->n_tensors;
}

const tfenc_torch_tensor *tfenc_torch_tensor_at(const tfenc_torch_file *file, int index)
{
    if (index < 0 || index >= file->n_tensors)
        return NULL;
    return &file->tensors[index];
}

/* A tensor of the legacy format: its bytes at its storage's offset. */
static int read_legacy(tfenc_context *ctx, const tfenc_torch_file *file,
                       const tfenc_torch_tensor *tensor, float *out)
{
    size_t n = (size_t)tensor->n_elements;
    unsigned char *raw = tfenc_float_bytes_destination(out, tensor->dtype, n);
    uint64_t at = file->storage_starts[tensor - file->tensors]
                  + (uint64_t)tensor->offset * (uint64_t)tensor->element_size;
    int read_errno = tfenc_file_read_at(file->fd, raw, n * (size_t)tensor->element_size, at);
    if (read_errno != 0)
        return tfenc_error(ctx, TFENC_ERR_IO, "%s: cannot read tensor '%s': %s", file->name,
                           tensor->name, read_errno == EIO ? "the file ends early"
                                                           : strerror(read_errno));
    tfenc_float_bytes_widen(out, tensor->dtype, n);
    return TFENC_OK;
}

const char *tfenc_torch_name(const tfenc_torch_file *file)
{
    return file->name;
}

int tfenc_torch_read_float32(tfenc_context *ctx, const tfenc_torch_file *file,
                             const tfenc_torch_tensor *tensor, float *out)
{
    int status = tfenc_float_dtype_check(ctx, file->name, tensor->name, tensor->dtype);
    if (status != TFENC_OK)
        return status;
    if (file->archive == NULL && file->fd < 0)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL,
                           "%s: pickle parsed from memory has no data to read", file->name);
    size_t n = (size_t)tensor->n_elements;
    if (file->archive == NULL)
        return read_legacy(ctx, file, tensor, out);
    char what[256];
    snprintf(what, sizeof what, "tensor '%s'", tensor->name);
    status = read_entry(ctx, file, file->entries[tensor - file->tensors],
                        (uint64_t)tensor->offset * (uint64_t)tensor->element_size,
                        tfenc_float_bytes_destination(out, tensor->dtype, n),
                        n * (size_t)tensor->element_size, what);
    if (status == TFENC_OK)
        tfenc_float_bytes_widen(out, tensor->dtype, n);
    return status;
}

void tfenc_torch_close(tfenc_torch_file *file)
{
    if (file == NULL)
        return;
    if (file->archive != NULL)
        zip_discard(file->archive); /* read-only: nothing to write back */
    if (file->fd >= 0)
        close(file->fd);
    free(file->storage_starts);
    free(file->tensors);
    free(file->entries);
    free(file->strings);
    free(file->prefix);
    free(file->name);
    free(file);
}
