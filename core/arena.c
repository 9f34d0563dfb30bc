/* The bump allocator of include/altar/arena.h. */
#include "altar/arena.h"

#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

struct altar_arena_chunk {
  altar_arena_chunk_t *next;
  size_t used, cap;
  alignas(max_align_t) char data[];
};

/* Emptied chunks kept by a reset: allocating and freeing large blocks per
 * batch made glibc consolidate its free lists every time. */
#define ARENA_KEEP 32

void *altar_arena_alloc(altar_arena_t *a, size_t n) {
  n = (n + alignof(max_align_t) - 1) & ~(alignof(max_align_t) - 1);
  altar_arena_chunk_t *c = a->head;
  if (!c || c->cap - c->used < n) {
    if (n <= ALTAR_ARENA_CHUNK && a->spare) {
      c = a->spare;
      a->spare = c->next;
      a->n_spare--;
    } else {
      size_t cap = n > ALTAR_ARENA_CHUNK ? n : ALTAR_ARENA_CHUNK;
      if (!(c = malloc(sizeof *c + cap))) return NULL;
      c->cap = cap;
    }
    c->used = 0;
    c->next = a->head;
    a->head = c;
  }
  void *p = c->data + c->used;
  c->used += n;
  return p;
}

char *altar_arena_strndup(altar_arena_t *a, const char *s, size_t n) {
  char *d = altar_arena_alloc(a, n + 1);
  if (!d) return NULL;
  if (n) memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

/* Keeps c for reuse when it is a standard chunk and there is room, else frees it. */
static void retire(altar_arena_t *a, altar_arena_chunk_t *c) {
  if (c->cap == ALTAR_ARENA_CHUNK && a->n_spare < ARENA_KEEP) {
    c->next = a->spare;
    a->spare = c;
    a->n_spare++;
  } else {
    free(c);
  }
}

altar_arena_mark_t altar_arena_mark(const altar_arena_t *a) {
  return (altar_arena_mark_t){a->head, a->head ? a->head->used : 0};
}

void altar_arena_rewind(altar_arena_t *a, altar_arena_mark_t m) {
  while (a->head && a->head != m.head) {
    altar_arena_chunk_t *next = a->head->next;
    retire(a, a->head);
    a->head = next;
  }
  if (a->head) a->head->used = m.used;
}

void altar_arena_reset(altar_arena_t *a) {
  altar_arena_chunk_t *c = a->head;
  while (c) {
    altar_arena_chunk_t *next = c->next;
    retire(a, c);
    c = next;
  }
  a->head = NULL;
}

void altar_arena_free(altar_arena_t *a) {
  altar_arena_reset(a);
  altar_arena_chunk_t *c;
  while ((c = a->spare)) {
    a->spare = c->next;
    free(c);
  }
  a->n_spare = 0;
}
