/* Canaries, guard pages and the running-call marker that contain and name
 * a plugin's memory errors (plugin_guard.h). */
#include "base/plugin_guard.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/aligned.h"

/* Protected ranges a crash report can name; more than this are still
 * protected, only not named. */
#define GUARD_SLOTS 32

typedef struct protected_range {
    atomic_int used;
    _Atomic uintptr_t start, end; /* [start, end), 0 while being set */
    const char *_Atomic text;     /* "on the guard page after the workspace" */
} protected_range;

static protected_range ranges[GUARD_SLOTS];
static _Atomic(const tfenc_plugin_call *) running;

/* The canary: bytes no float or index a plugin writes is likely to
 * repeat, each position its own. */
static unsigned char canary[TFENC_CANARY_BYTES];
static atomic_int canary_made;

static void make_canary(void)
{
    if (atomic_load(&canary_made))
        return;
    for (size_t i = 0; i < sizeof canary; i++)
        canary[i] = (unsigned char)(0xa5u ^ (i * 37u) ^ (i >> 8));
    atomic_store(&canary_made, 1);
}

int tfenc_plugin_checks_enabled(void)
{
    const char *value = getenv("TFENC_CHECK_PLUGINS");
    return value != NULL && value[0] != '\0' && strcmp(value, "0") != 0;
}

static size_t page_size(void)
{
    long size = sysconf(_SC_PAGESIZE);
    return size > 0 ? (size_t)size : 4096;
}

/* Bytes a block may take: all of it with a guard page, else what the
 * canary leaves. */
static size_t block_capacity(const tfenc_guarded_buffer *buffer)
{
    return buffer->mapped > 0 ? buffer->size : buffer->size - TFENC_CANARY_BYTES;
}

/* *slot: the range's entry plus one, 0 for none. */
static void forget_range(int *slot)
{
    if (*slot == 0)
        return;
    protected_range *range = &ranges[*slot - 1];
    atomic_store(&range->start, 0);
    atomic_store(&range->end, 0);
    atomic_store(&range->used, 0);
    *slot = 0;
}

static void remember_range(int *slot, const void *start, size_t length, const char *text)
{
    forget_range(slot);
    for (int i = 0; i < GUARD_SLOTS; i++) {
        int unused = 0;
        if (atomic_compare_exchange_strong(&ranges[i].used, &unused, 1)) {
            atomic_store(&ranges[i].text, text);
            atomic_store(&ranges[i].end, (uintptr_t)start + length);
            atomic_store(&ranges[i].start, (uintptr_t)start);
            *slot = i + 1;
            return;
        }
    }
}

void tfenc_guarded_release(tfenc_guarded_buffer *buffer)
{
    forget_range(&buffer->guard_slot);
    forget_range(&buffer->read_only_slot);
    if (buffer->mapped > 0)
        munmap(buffer->start, buffer->mapped);
    else
        tfenc_aligned_free(buffer->start);
    buffer->start = NULL;
    buffer->size = buffer->mapped = 0;
}

int tfenc_guarded_reserve(tfenc_guarded_buffer *buffer, const char *what, size_t bytes)
{
    make_canary();
    const int guard = tfenc_plugin_checks_enabled();
    if (buffer->start != NULL && bytes <= block_capacity(buffer) && guard == (buffer->mapped > 0))
        return 0;
    tfenc_guarded_release(buffer);
    buffer->what = what;
    if (!guard) {
        if (bytes > SIZE_MAX - TFENC_CANARY_BYTES)
            return -1;
        buffer->start = tfenc_aligned_alloc(bytes + TFENC_CANARY_BYTES);
        buffer->size = bytes + TFENC_CANARY_BYTES;
        return buffer->start != NULL ? 0 : -1;
    }
    const size_t page = page_size();
    if (bytes > SIZE_MAX - 2 * page)
        return -1;
    const size_t usable = (bytes + page - 1) / page * page;
    void *mapping = mmap(NULL, usable + page, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapping == MAP_FAILED)
        return -1;
    unsigned char *fence = (unsigned char *)mapping + usable;
    if (mprotect(fence, page, PROT_NONE) != 0) {
        munmap(mapping, usable + page);
        return -1;
    }
    buffer->start = mapping;
    buffer->mapped = usable + page;
    buffer->size = usable;
    snprintf(buffer->guard_text, sizeof buffer->guard_text, "on the guard page after %s", what);
    snprintf(buffer->read_only_text, sizeof buffer->read_only_text,
             "in %s, which plugins may only read", what);
    remember_range(&buffer->guard_slot, fence, page, buffer->guard_text);
    return 0;
}

int tfenc_guarded_protect(tfenc_guarded_buffer *buffer, int read_only)
{
    if (buffer->mapped == 0)
        return 0;
    if (mprotect(buffer->start, buffer->size, read_only ? PROT_READ : PROT_READ | PROT_WRITE) != 0)
        return -1;
    if (read_only)
        remember_range(&buffer->read_only_slot, buffer->start, buffer->size,
                       buffer->read_only_text);
    else
        forget_range(&buffer->read_only_slot);
    return 0;
}

void *tfenc_guarded_place(const tfenc_guarded_buffer *buffer, size_t bytes)
{
    if (buffer->mapped == 0)
        return buffer->start;
    uintptr_t end = (uintptr_t)buffer->start + buffer->size;
    return (void *)((end - bytes) / TFENC_ALIGNMENT * TFENC_ALIGNMENT);
}

/* The canary's extent after a block: up to TFENC_CANARY_BYTES, and never
 * past the buffer. */
static size_t canary_length(const tfenc_guarded_buffer *buffer, const unsigned char *after)
{
    size_t room = (size_t)(buffer->start + buffer->size - after);
    return room < TFENC_CANARY_BYTES ? room : TFENC_CANARY_BYTES;
}

void tfenc_guarded_arm(const tfenc_guarded_buffer *buffer, const void *block, size_t bytes)
{
    unsigned char *after = (unsigned char *)block + bytes;
    memcpy(after, canary, canary_length(buffer, after));
}

size_t tfenc_guarded_overwritten(const tfenc_guarded_buffer *buffer, const void *block,
                                 size_t bytes, size_t *checked)
{
    const unsigned char *after = (const unsigned char *)block + bytes;
    const size_t length = canary_length(buffer, after);
    *checked = length;
    if (memcmp(after, canary, length) == 0)
        return 0;
    size_t last = length;
    while (last > 0 && after[last - 1] == canary[last - 1])
        last--;
    return last;
}

void tfenc_plugin_call_begin(const tfenc_plugin_call *call)
{
    atomic_store(&running, call);
}

void tfenc_plugin_call_end(void)
{
    atomic_store(&running, NULL);
}

const tfenc_plugin_call *tfenc_plugin_call_current(void)
{
    return atomic_load(&running);
}

const char *tfenc_guard_describe(const void *address)
{
    const uintptr_t at = (uintptr_t)address;
    for (int i = 0; i < GUARD_SLOTS; i++) {
        uintptr_t start = atomic_load(&ranges[i].start);
        if (start != 0 && at >= start && at < atomic_load(&ranges[i].end))
            return atomic_load(&ranges[i].text);
    }
    return NULL;
}
