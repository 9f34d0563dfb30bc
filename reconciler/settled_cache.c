/* A bounded LRU cache of settled entries, and the bloom filter of those it evicted. */
#include "reconciler/settled_cache.h"

#include <stdlib.h>
#include <string.h>

altar__settled_entry_t *altar__settled_entry_new(const char *key, size_t klen, const char *run, size_t rlen,
                                                 uint64_t seq, double ts) {
  altar__settled_entry_t *e = malloc(sizeof *e + klen + rlen + 2);
  if (!e) return NULL;
  e->prev = e->next = NULL;
  e->seq = seq;
  e->ts = ts;
  e->hash = altar__hash(key, klen);
  e->klen = klen;
  e->rlen = rlen;
  memcpy(e->data, key, klen);
  e->data[klen] = 0;
  memcpy(e->data + klen + 1, run, rlen);
  e->data[klen + 1 + rlen] = 0;
  return e;
}

static void unlink_entry(altar__settled_cache_t *c, altar__settled_entry_t *e) {
  if (e->prev) e->prev->next = e->next;
  else c->head = e->next;
  if (e->next) e->next->prev = e->prev;
  else c->tail = e->prev;
  e->prev = e->next = NULL;
}

static void push_front(altar__settled_cache_t *c, altar__settled_entry_t *e) {
  e->prev = NULL;
  e->next = c->head;
  if (c->head) c->head->prev = e;
  c->head = e;
  if (!c->tail) c->tail = e;
}

/* Four probes from the key's 64-bit hash, all in one 512-bit block (one
 * cache line): its low bits pick the block, its high bits the four bits in
 * it. A filter of 4 MiB misses the CPU cache on nearly every probe, and a
 * replay probes once or twice per event and once per member it notes. */
#define BLOOM_PROBES 4
#define BLOOM_BLOCK_BITS 512

static size_t probe(uint64_t hash, unsigned i) {
  size_t block = (size_t)(hash & (ALTAR__SETTLED_BLOOM_BITS / BLOOM_BLOCK_BITS - 1));
  return block * BLOOM_BLOCK_BITS + (size_t)((hash >> (28 + 9 * i)) & (BLOOM_BLOCK_BITS - 1));
}

void altar__settled_cache_remember(altar__settled_cache_t *c, uint64_t hash) {
  if (c->bloom_lost) return;
  if (!c->bloom && !(c->bloom = calloc(ALTAR__SETTLED_BLOOM_BITS / 64, sizeof *c->bloom))) {
    c->bloom_lost = true;
    return;
  }
  for (unsigned i = 0; i < BLOOM_PROBES; i++) {
    size_t b = probe(hash, i);
    c->bloom[b / 64] |= (uint64_t)1 << (b % 64);
  }
}

bool altar__settled_cache_maybe_evicted(const altar__settled_cache_t *c, uint64_t hash) {
  if (c->bloom_lost) return true;
  if (!c->bloom) return false;
  for (unsigned i = 0; i < BLOOM_PROBES; i++) {
    size_t b = probe(hash, i);
    if (!(c->bloom[b / 64] & ((uint64_t)1 << (b % 64)))) return false;
  }
  return true;
}

const altar__settled_entry_t *altar__settled_cache_get(altar__settled_cache_t *c, const char *key, size_t klen,
                                                       uint64_t hash) {
  altar__settled_entry_t *e = c->map.n ? altar__hmap_get_h(&c->map, key, klen, hash) : NULL;
  if (e && e != c->head) {
    unlink_entry(c, e);
    push_front(c, e);
  }
  return e;
}

void altar__settled_cache_put(altar__settled_cache_t *c, altar__settled_entry_t *e) {
  void *old = NULL;
  if (altar__hmap_put_h(&c->map, e->data, e->klen, e->hash, e, &old)) {
    free(e);
    return;
  }
  if (old) {
    unlink_entry(c, old);
    free(old);
  }
  push_front(c, e);
  while (c->cap && c->map.n > c->cap && c->tail != e) {
    altar__settled_entry_t *t = c->tail;
    unlink_entry(c, t);
    altar__hmap_del_h(&c->map, t->data, t->klen, t->hash);
    if (c->track_evicted) altar__settled_cache_remember(c, t->hash);
    c->evicted++;
    free(t);
  }
}

void altar__settled_cache_drop(altar__settled_cache_t *c, const char *key, size_t klen, uint64_t hash, uint64_t seq) {
  altar__settled_entry_t *e = c->map.n ? altar__hmap_get_h(&c->map, key, klen, hash) : NULL;
  if (!e || e->seq != seq) return;
  unlink_entry(c, e);
  altar__hmap_del_h(&c->map, key, klen, hash);
  free(e);
}

size_t altar__settled_cache_size(const altar__settled_cache_t *c) { return c->map.n; }

void altar__settled_cache_free(altar__settled_cache_t *c) {
  for (altar__settled_entry_t *e = c->head, *n; e; e = n) {
    n = e->next;
    free(e);
  }
  altar__hmap_free(&c->map);
  free(c->bloom);
  memset(c, 0, sizeof *c);
}
