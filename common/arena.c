/*  common/arena.c: a bump allocator (arena.h).

    Chunks are mapped (2 MiB each) and unmapped when the arena goes, so
    that the memory goes back to the system: a batch's records took
    hundreds of MiB (570 MiB for 100,000 full task records and receipts),
    which malloc's heap kept after they were freed.  (Aligning the chunks
    and marking them for transparent huge pages made the first load twice
    as slow here: the kernel compacts memory to find them.) */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include "arena.h"
#include "util.h"

#define S_CHUNK   (2u << 20)        /* bytes per chunk */
#define S_ALIGN   16

typedef struct s_chunk {
    struct s_chunk *next;
    size_t          size;           /* usable bytes after the header */
    size_t          used;
    size_t          mapped;         /* bytes mapped, header included */
} s_chunk_t;

struct ak_arena {
    s_chunk_t         *head;        /* the chunk being filled, then older ones */
    size_t             used;
    ProtobufCAllocator pb;
};

/* the header takes a multiple of the alignment */
#define S_HEADER  ((sizeof (s_chunk_t) + S_ALIGN - 1) & ~(size_t) (S_ALIGN - 1))

/* A mapped chunk of at least `size` usable bytes (a multiple of S_CHUNK
   mapped). */
static s_chunk_t *s_chunk_new (size_t size)
{
    size_t want = S_HEADER + size;
    size_t mapped = (want + S_CHUNK - 1) & ~(size_t) (S_CHUNK - 1);
    if (mapped < want)
        abort ();
    void *raw = mmap (NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        ak_oom (mapped);
    s_chunk_t *c = raw;
    c->next = NULL;
    c->size = mapped - S_HEADER;
    c->used = 0;
    c->mapped = mapped;
    return c;
}

static void *s_pb_alloc (void *data, size_t size)
{
    return ak_arena_alloc (data, size);
}

static void s_pb_free (void *data, void *ptr)
{
    (void) data;
    (void) ptr;                     /* freed with the arena */
}

ak_arena_t *ak_arena_new (void)
{
    ak_arena_t *self = ak_calloc (1, sizeof *self);
    self->pb = (ProtobufCAllocator) { s_pb_alloc, s_pb_free, self };
    return self;
}

void ak_arena_destroy (ak_arena_t **self_p)
{
    if (self_p && *self_p) {
        s_chunk_t *c = (*self_p)->head;
        while (c) {
            s_chunk_t *next = c->next;
            if (munmap (c, c->mapped) != 0)
                abort ();
            c = next;
        }
        free (*self_p);
        *self_p = NULL;
    }
}

void *ak_arena_alloc (ak_arena_t *self, size_t size)
{
    size_t need = (size + S_ALIGN - 1) & ~(size_t) (S_ALIGN - 1);
    if (need < size)
        abort ();                   /* overflow: no such allocation */
    s_chunk_t *c = self->head;
    if (!c || c->size - c->used < need) {
        if (need > S_CHUNK / 4) {
            /* a large block gets a chunk of its own, behind the current one */
            s_chunk_t *big = s_chunk_new (need);
            big->used = big->size;
            if (c) {
                big->next = c->next;
                c->next = big;
            }
            else {
                big->next = NULL;
                self->head = big;
            }
            self->used += need;
            return (uint8_t *) big + S_HEADER;
        }
        c = s_chunk_new (S_CHUNK - S_HEADER);
        c->next = self->head;
        self->head = c;
    }
    void *p = (uint8_t *) c + S_HEADER + c->used;
    c->used += need;
    self->used += need;
    return p;
}

ProtobufCAllocator *ak_arena_pb (ak_arena_t *self)
{
    return &self->pb;
}

size_t ak_arena_used (const ak_arena_t *self)
{
    return self->used;
}
