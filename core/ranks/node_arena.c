/* The node arena: a shared-memory window with a small table of named
 * blocks at its start, guarded by a process-shared mutex. */
#include "ranks/node_arena.h"

#include "base/context.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>
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

/* Open MPI backs a shared window with a file in this directory (its MCA
 * parameter osc_sm_backing_directory, read through the MPI tool interface);
 * 0 when the MPI library has no such parameter. */
static int backing_directory(char *directory, size_t size)
{
    int provided = 0, index = 0, count = 0, found = 0;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS)
        return 0;
    MPI_T_cvar_handle handle;
    if (MPI_T_cvar_get_index("osc_sm_backing_directory", &index) == MPI_SUCCESS &&
        MPI_T_cvar_handle_alloc(index, NULL, &handle, &count) == MPI_SUCCESS) {
        char *value = calloc((size_t)count + 1, 1);
        if (value != NULL && MPI_T_cvar_read(handle, value) == MPI_SUCCESS && value[0] != '\0' &&
            strlen(value) < size) {
            strcpy(directory, value);
            found = 1;
        }
        free(value);
        MPI_T_cvar_handle_free(&handle);
    }
    MPI_T_finalize();
    return found;
}

/* Node rank 0's look at the backing directory before asking for the window.
 * Open MPI 4.1 cannot fail there gracefully: when node rank 0 cannot make
 * the backing file (no room, no such directory, not writable, past the
 * file-size limit) it prints a page of help text and, with the default
 * error handler, ends the job with MPI_ERR_INTERN; with MPI_ERRORS_RETURN
 * it returns alone while the node's other ranks wait in a broadcast of
 * the segment forever (seen on a 4 MiB tmpfs). So those causes are found
 * here, where every rank can still agree to keep a copy each. Writes the
 * reason into `why`; 1 when there is room or nothing can be told. */
static int backing_has_room(size_t total, char *why, size_t why_size)
{
    char directory[4096];
    if (!backing_directory(directory, sizeof directory))
        return 1;
    struct statvfs space;
    struct rlimit file_size;
    const double mib = 1024.0 * 1024.0;
    if (access(directory, W_OK | X_OK) != 0 || statvfs(directory, &space) != 0) {
        snprintf(why, why_size,
                 "Open MPI's shared-memory directory %s (osc_sm_backing_directory): %s",
                 directory, strerror(errno));
        return 0;
    }
    const double available = (double)space.f_bavail * (double)space.f_frsize;
    if (available < (double)total) {
        snprintf(why, why_size,
                 "Open MPI's shared-memory directory %s (osc_sm_backing_directory) has %.1f "
                 "MiB free, the window needs %.1f MiB",
                 directory, available / mib, (double)total / mib);
        return 0;
    }
    if (getrlimit(RLIMIT_FSIZE, &file_size) == 0 && file_size.rlim_cur != RLIM_INFINITY &&
        (double)file_size.rlim_cur < (double)total) {
        snprintf(why, why_size,
                 "the file-size limit (ulimit -f, %.1f MiB) is below the window's %.1f MiB "
                 "backing file", (double)file_size.rlim_cur / mib, (double)total / mib);
        return 0;
    }
    return 1;
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
    char why[512] = "";
    int room = node_rank != 0 || backing_has_room(total, why, sizeof why), all_room = 0;
    MPI_Allreduce(&room, &all_room, 1, MPI_INT, MPI_MIN, world);
    void *base = NULL;
    int failed = !all_room, code = MPI_SUCCESS;
    /* One contiguous segment, all of it node rank 0's: every rank reaches
     * it through MPI_Win_shared_query. */
    /* The node communicator keeps the fatal error handler for this call:
     * a failure that backing_has_room did not foresee ends the job with
     * Open MPI's message, where MPI_ERRORS_RETURN could leave ranks
     * waiting forever (see there). */
    if (!failed) {
        code = MPI_Win_allocate_shared(node_rank == 0 ? (MPI_Aint)total : 0, 1, MPI_INFO_NULL,
                                       arena->node, &base, &arena->window);
        failed = code != MPI_SUCCESS;
    }
    int made = !failed;
    MPI_Aint size = 0;
    int unit = 1;
    if (!failed && (code = MPI_Win_shared_query(arena->window, 0, &size, &unit, &base)) != MPI_SUCCESS)
        failed = 1;
    if (failed && why[0] == '\0' && code != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING];
        int length = 0;
        MPI_Error_string(code, text, &length);
        snprintf(why, sizeof why, "MPI: %s", text);
    }
    int any_failed = 0, node_all_made = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, world);
    MPI_Allreduce(&made, &node_all_made, 1, MPI_INT, MPI_MIN, arena->node);
    if (any_failed) {
        /* Freeing is collective over the node: only where every rank has
         * the window (a window some ranks lack is left, not waited on). */
        if (made && node_all_made)
            MPI_Win_free(&arena->window);
        MPI_Comm_free(&arena->node);
        free(arena);
        /* The reason as the first rank that has one tells it. */
        char reason[512] = "";
        int has = why[0] != '\0', first = has ? rank : INT_MAX, chosen = INT_MAX;
        MPI_Allreduce(&first, &chosen, 1, MPI_INT, MPI_MIN, world);
        if (chosen != INT_MAX) {
            if (rank == chosen)
                memcpy(reason, why, sizeof reason);
            MPI_Bcast(reason, sizeof reason, MPI_CHAR, chosen, world);
        }
        return tfenc_error(ctx, TFENC_ERR_NO_MEMORY, "cannot make a %.1f MiB shared window for "
                           "the node's weights%s%s", (double)total / (1024.0 * 1024.0),
                           reason[0] != '\0' ? ": " : "", reason);
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
