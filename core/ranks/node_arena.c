/* The node arena: a shared-memory window with a small table of named
 * blocks at its start, guarded by a process-shared mutex. */
#include "ranks/node_arena.h"

#include "base/context.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Names a node's ranks can share: a model's tensors and their packed
 * copies (BERT-base has about 400 of both). */
#define TABLE_SIZE 8192
#define NAME_BYTES (TFENC_NODE_ARENA_NAME_MAX + 1)
#define ALIGNMENT 64

enum { BLOCK_FILLING = 0, BLOCK_READY = 1, BLOCK_ABANDONED = 2 };

typedef struct arena_entry {
    uint64_t hash; /* 0: free */
    size_t offset; /* from the start of the window */
    size_t bytes;
    atomic_int state;
    char name[NAME_BYTES];
} arena_entry;

typedef struct arena_header {
    pthread_mutex_t lock;
    size_t capacity;
    size_t used;
    arena_entry entries[TABLE_SIZE];
} arena_header;

struct tfenc_node_arena {
    MPI_Comm node;
    MPI_Win window;
    arena_header *header; /* the node's window, as this process maps it */
    int node_ranks;
};

static uint64_t name_hash(const char *name)
{
    uint64_t hash = 1469598103934665603ull; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p != '\0'; p++)
        hash = (hash ^ *p) * 1099511628211ull;
    return hash != 0 ? hash : 1;
}

int tfenc_node_arena_create(tfenc_context *ctx, MPI_Comm world, size_t capacity,
                            tfenc_node_arena **arena_out)
{
    *arena_out = NULL;
    tfenc_node_arena *arena = calloc(1, sizeof *arena);
    int ok = arena != NULL, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, world);
    if (!all_ok) {
        free(arena);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "out of memory for the node's weights");
    }
    int rank = 0;
    MPI_Comm_rank(world, &rank);
    MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &arena->node);
    int node_rank = 0;
    MPI_Comm_rank(arena->node, &node_rank);
    MPI_Comm_size(arena->node, &arena->node_ranks);
    size_t total = sizeof(arena_header) + capacity;
    void *base = NULL;
    /* One contiguous segment, all of it node rank 0's: every rank reaches
     * it through MPI_Win_shared_query. */
    int failed = MPI_Win_allocate_shared(node_rank == 0 ? (MPI_Aint)total : 0, 1, MPI_INFO_NULL,
                                         arena->node, &base, &arena->window) != MPI_SUCCESS;
    MPI_Aint size = 0;
    int unit = 1;
    if (!failed)
        failed = MPI_Win_shared_query(arena->window, 0, &size, &unit, &base) != MPI_SUCCESS;
    int any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, world);
    if (any_failed) {
        MPI_Comm_free(&arena->node);
        free(arena);
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "cannot make a %zu-byte shared window for "
                           "the node's weights", total);
    }
    arena->header = base;
    if (node_rank == 0) {
        memset(arena->header, 0, sizeof *arena->header);
        pthread_mutexattr_t attributes;
        pthread_mutexattr_init(&attributes);
        pthread_mutexattr_setpshared(&attributes, PTHREAD_PROCESS_SHARED);
        pthread_mutex_init(&arena->header->lock, &attributes);
        pthread_mutexattr_destroy(&attributes);
        arena->header->capacity = total;
        /* Blocks start after the table, aligned. */
        arena->header->used = (sizeof(arena_header) + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT;
    }
    /* The header is written before any rank looks at it. */
    MPI_Win_sync(arena->window);
    MPI_Barrier(arena->node);
    MPI_Win_sync(arena->window);
    *arena_out = arena;
    return TFENC_OK;
}

static void wait_a_little(void)
{
    struct timespec pause = {.tv_sec = 0, .tv_nsec = 200000};
    nanosleep(&pause, NULL);
}

int tfenc_node_arena_claim(tfenc_context *ctx, tfenc_node_arena *arena, const char *name,
                           size_t bytes, void **block, int *fill)
{
    *block = NULL;
    *fill = 0;
    if (strlen(name) >= NAME_BYTES)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "node arena: name too long: %s", name);
    arena_header *h = arena->header;
    const uint64_t hash = name_hash(name);
    arena_entry *entry = NULL;
    int status = TFENC_OK;
    pthread_mutex_lock(&h->lock);
    for (size_t probe = 0; probe < TABLE_SIZE; probe++) {
        arena_entry *e = &h->entries[(hash + probe) % TABLE_SIZE];
        if (e->hash == hash && strcmp(e->name, name) == 0) {
            entry = e;
            break;
        }
        if (e->hash != 0)
            continue;
        /* Not there: this rank makes it, if it fits. */
        size_t offset = h->used, end = offset + (bytes + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT;
        if (end > h->capacity) {
            status = TFENC_ERR_NOT_FOUND;
            break;
        }
        h->used = end;
        e->offset = offset;
        e->bytes = bytes;
        atomic_store(&e->state, BLOCK_FILLING);
        strcpy(e->name, name);
        e->hash = hash;
        entry = e;
        *fill = 1;
        break;
    }
    pthread_mutex_unlock(&h->lock);
    if (status != TFENC_OK || entry == NULL)
        return TFENC_ERR_NOT_FOUND; /* full: the caller keeps a private copy */
    if (entry->bytes != bytes)
        return tfenc_error(ctx, TFENC_ERR_INTERNAL, "node arena: %s asked for %zu bytes, "
                           "another rank made it %zu", name, bytes, entry->bytes);
    *block = (char *)h + entry->offset;
    if (*fill)
        return TFENC_OK;
    int state;
    while ((state = atomic_load(&entry->state)) == BLOCK_FILLING)
        wait_a_little();
    if (state == BLOCK_ABANDONED)
        return tfenc_error(ctx, TFENC_ERR_MPI, "%s: another rank of this node failed to "
                           "load it", name);
    return TFENC_OK;
}

static arena_entry *entry_of(tfenc_node_arena *arena, void *block)
{
    size_t offset = (size_t)((char *)block - (char *)arena->header);
    for (size_t i = 0; i < TABLE_SIZE; i++)
        if (arena->header->entries[i].hash != 0 && arena->header->entries[i].offset == offset)
            return &arena->header->entries[i];
    return NULL;
}

void tfenc_node_arena_publish(tfenc_node_arena *arena, void *block)
{
    arena_entry *entry = entry_of(arena, block);
    if (entry != NULL)
        atomic_store(&entry->state, BLOCK_READY);
}

void tfenc_node_arena_abandon(tfenc_node_arena *arena, void *block)
{
    arena_entry *entry = entry_of(arena, block);
    if (entry != NULL)
        atomic_store(&entry->state, BLOCK_ABANDONED);
}

size_t tfenc_node_arena_used(const tfenc_node_arena *arena)
{
    return arena->header->used;
}

int tfenc_node_arena_ranks(const tfenc_node_arena *arena)
{
    return arena->node_ranks;
}

void tfenc_node_arena_destroy(tfenc_node_arena *arena)
{
    if (arena == NULL)
        return;
    MPI_Win_free(&arena->window);
    MPI_Comm_free(&arena->node);
    free(arena);
}
