/* One copy per node of what every rank would otherwise hold alone: the
 * model's weights (as read, and as the matrix backend packs them). The ranks
 * of a node (MPI_Comm_split_type SHARED) map one MPI-3 shared-memory window
 * (MPI_Win_allocate_shared); inside it, blocks are named ("/encoder/3/ffn/
 * in_weight fp32", ...). The first rank to ask for a name gets to fill the
 * block; every other rank of the node that asks for it waits until it is
 * filled and then reads the same memory. Ranks ask in any order and for any
 * subset of the names (pipeline stages load different layers), so nothing
 * here is collective except creating and freeing the arena.
 *
 * Pages of the window are only backed by memory once written, so the
 * capacity can be generous; a request that no longer fits is refused
 * (TFENC_ERR_NOT_FOUND) and the caller keeps a private copy instead. */
#ifndef TFENC_NODE_ARENA_H
#define TFENC_NODE_ARENA_H

#include <mpi.h>
#include <stddef.h>

#include "tfenc/plugin.h"

typedef struct tfenc_node_arena tfenc_node_arena;

/* The longest block name. */
#define TFENC_NODE_ARENA_NAME_MAX 191

/* Collective over `world`: each node's ranks share an arena of `capacity`
 * bytes (node rank 0 allocates it). */
int tfenc_node_arena_create(tfenc_context *ctx, MPI_Comm world, size_t capacity,
                            tfenc_node_arena **arena);

/* The block called `name`, of `bytes` bytes, 64-byte aligned. *fill is 1
 * when this rank must fill it and then call tfenc_node_arena_publish(); 0
 * when another rank of the node has filled it (the call waited for that).
 * TFENC_ERR_NOT_FOUND (no message) when the arena is full; a name asked for
 * again with another size is TFENC_ERR_INTERNAL. */
int tfenc_node_arena_claim(tfenc_context *ctx, tfenc_node_arena *arena, const char *name,
                           size_t bytes, void **block, int *fill);

/* The block claimed with *fill = 1 is ready for the node's other ranks. */
void tfenc_node_arena_publish(tfenc_node_arena *arena, void *block);

/* A block this rank filled could not be filled after all: ranks waiting for
 * it fail instead of waiting forever, with TFENC_ERR_MPI (another rank
 * failed first, and says why) and a line naming the block. */
void tfenc_node_arena_abandon(tfenc_node_arena *arena, void *block);

/* Bytes of the arena in use on this node (blocks claimed so far). */
size_t tfenc_node_arena_used(const tfenc_node_arena *arena);

/* Ranks sharing this arena (1: no other rank on the node). */
int tfenc_node_arena_ranks(const tfenc_node_arena *arena);

/* Collective over the `world` it was made with. NULL is allowed (on every
 * rank alike). */
void tfenc_node_arena_destroy(tfenc_node_arena *arena);

#endif
