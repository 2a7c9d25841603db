/*  common/arena.h: a bump allocator for decoding many records at once.

    Deciding a batch's winners decodes every task record of the batch and
    its receipt (100,000 of each at the batch limit) and frees them all
    together a moment later.  From an arena each block is a pointer bump
    and everything goes in one unmap, back to the system (malloc's heap kept
    it).  Touching fresh pages costs about what malloc and free did (a perf
    profile of the pass, Run 5 in docs/benchmarks.md): what made the passes
    shorter was decoding fewer fields.
    ak_arena_pb gives a protobuf-c allocator whose free does nothing:
    messages decoded with it are never freed one by one (not with
    free_unpacked and a NULL allocator either), only with their arena. */
#ifndef AK_ARENA_H
#define AK_ARENA_H
#include <stddef.h>
#include <protobuf-c/protobuf-c.h>

typedef struct ak_arena ak_arena_t;

ak_arena_t *ak_arena_new (void);
void ak_arena_destroy (ak_arena_t **self_p);
/* size bytes aligned to 16; never NULL (aborts when memory is out, as
   ak_malloc does). */
void *ak_arena_alloc (ak_arena_t *self, size_t size);
/* The protobuf-c allocator of the arena (lives as long as the arena). */
ProtobufCAllocator *ak_arena_pb (ak_arena_t *self);
/* Bytes handed out so far. */
size_t ak_arena_used (const ak_arena_t *self);

#endif
