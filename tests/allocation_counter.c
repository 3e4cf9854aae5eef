/* The counting allocator of tests/allocation_counter.h. Counters are atomic:
 * OpenMP threads allocate too. */
#include "allocation_counter.h"

#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

static atomic_int counting;
static atomic_long calls;
static atomic_llong live_bytes;
static atomic_size_t largest;

static void note_allocation(size_t requested, size_t usable)
{
    if (!atomic_load_explicit(&counting, memory_order_relaxed))
        return;
    atomic_fetch_add(&calls, 1);
    atomic_fetch_add(&live_bytes, (long long)usable);
    size_t seen = atomic_load(&largest);
    while (requested > seen && !atomic_compare_exchange_weak(&largest, &seen, requested))
        ;
}

static void note_free(size_t usable)
{
    if (atomic_load_explicit(&counting, memory_order_relaxed))
        atomic_fetch_sub(&live_bytes, (long long)usable);
}

#if defined(__SANITIZE_ADDRESS__)
/* ASan owns malloc: it calls these hooks on every allocation and free.
 * Declared here rather than through <sanitizer/allocator_interface.h>,
 * which only clang installs; GCC's libasan exports the same functions. */
size_t __sanitizer_get_allocated_size(const volatile void *pointer);
int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void *, size_t),
                                              void (*free_hook)(const volatile void *));

static void malloc_hook(const volatile void *pointer, size_t size)
{
    note_allocation(size, size);
}

static void free_hook(const volatile void *pointer)
{
    note_free(__sanitizer_get_allocated_size((const void *)pointer));
}

static int hooks_installed;

static void install_hooks(void)
{
    if (!hooks_installed)
        hooks_installed = __sanitizer_install_malloc_and_free_hooks(malloc_hook, free_hook) != 0;
}
#else
/* glibc's own allocator under its exported internal names. */
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);
extern void __libc_free(void *pointer);

static void install_hooks(void)
{
}

void *malloc(size_t size)
{
    void *pointer = __libc_malloc(size);
    if (pointer != NULL)
        note_allocation(size, malloc_usable_size(pointer));
    return pointer;
}

void *calloc(size_t count, size_t size)
{
    void *pointer = __libc_calloc(count, size);
    if (pointer != NULL)
        note_allocation(count * size, malloc_usable_size(pointer));
    return pointer;
}

void *realloc(void *pointer, size_t size)
{
    size_t before = pointer != NULL ? malloc_usable_size(pointer) : 0;
    void *moved = __libc_realloc(pointer, size);
    if (moved != NULL || size == 0) {
        note_free(before);
        if (moved != NULL)
            note_allocation(size, malloc_usable_size(moved));
    }
    return moved;
}

void free(void *pointer)
{
    if (pointer != NULL)
        note_free(malloc_usable_size(pointer));
    __libc_free(pointer);
}

void *memalign(size_t alignment, size_t size)
{
    void *pointer = __libc_memalign(alignment, size);
    if (pointer != NULL)
        note_allocation(size, malloc_usable_size(pointer));
    return pointer;
}

void *aligned_alloc(size_t alignment, size_t size)
{
    return memalign(alignment, size);
}

int posix_memalign(void **result, size_t alignment, size_t size)
{
    if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0)
        return EINVAL;
    void *pointer = memalign(alignment, size);
    if (pointer == NULL)
        return ENOMEM;
    *result = pointer;
    return 0;
}

void *valloc(size_t size)
{
    return memalign(4096, size);
}

void *pvalloc(size_t size)
{
    return memalign(4096, (size + 4095) / 4096 * 4096);
}
#endif

int allocation_counter_works(void)
{
    install_hooks();
    allocation_counter_start();
    void *volatile probe = malloc(100);
    allocation_counts counts = allocation_counter_stop();
    free(probe);
    return counts.calls == 1;
}

void allocation_counter_start(void)
{
    install_hooks();
    atomic_store(&calls, 0);
    atomic_store(&live_bytes, 0);
    atomic_store(&largest, 0);
    atomic_store(&counting, 1);
}

allocation_counts allocation_counter_stop(void)
{
    atomic_store(&counting, 0);
    return (allocation_counts){.calls = atomic_load(&calls),
                               .live_bytes = atomic_load(&live_bytes),
                               .largest = atomic_load(&largest)};
}
