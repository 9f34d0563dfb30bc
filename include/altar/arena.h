/* altar — a bump allocator: many small pieces, all freed at once.
 * A rebuild decodes a batch of events into one arena and drops the whole
 * batch with a reset; the RocksDB ledger stages a write batch in another. */
#ifndef ALTAR_ARENA_H
#define ALTAR_ARENA_H

#include "altar/export.h"
ALTAR_API_BEGIN

#include <stddef.h>

typedef struct altar_arena_chunk altar_arena_chunk_t;

typedef struct altar_arena {
  altar_arena_chunk_t *head;  /* chunks in use, newest first */
  altar_arena_chunk_t *spare; /* emptied standard chunks kept for reuse */
  size_t n_spare;
} altar_arena_t;

/* A zeroed struct is an empty arena. */
#define ALTAR_ARENA_CHUNK (256u << 10)

/* n bytes aligned for any type, valid until the next reset; NULL without memory. */
void *altar_arena_alloc(altar_arena_t *a, size_t n);
/* A NUL-terminated copy of s[0..n). */
char *altar_arena_strndup(altar_arena_t *a, const char *s, size_t n);
/* A point to go back to: what was allocated after it can be given back
 * at once (a decoder that gives up mid-message). */
typedef struct altar_arena_mark {
  altar_arena_chunk_t *head;
  size_t used;
} altar_arena_mark_t;
altar_arena_mark_t altar_arena_mark(const altar_arena_t *a);
void altar_arena_rewind(altar_arena_t *a, altar_arena_mark_t m);
/* Frees every piece at once; keeps some chunks for reuse. */
void altar_arena_reset(altar_arena_t *a);
/* Frees everything, leaving an empty arena. */
void altar_arena_free(altar_arena_t *a);

ALTAR_API_END

#endif
