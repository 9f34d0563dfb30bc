/* The settled set's memory: a bounded cache of entries (task key or group
 * marker → the run that settled it, its record's seq and ts) in front of
 * the ledger's index, evicting the least recently used entry beyond its
 * capacity. Entries it evicted are remembered in a bloom filter when asked
 * (track_evicted), so that a reconciler whose ledger held no settled entry
 * before it started can answer "never settled" without a ledger read. The
 * cache is only a cache: correctness never depends on it holding an entry.
 * Internal to reconciler/. */
#ifndef ALTAR_RECONCILER_SETTLED_CACHE_H
#define ALTAR_RECONCILER_SETTLED_CACHE_H

#include "core/hmap.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct altar__settled_entry {
  struct altar__settled_entry *prev, *next; /* recency, newest first */
  uint64_t seq;                             /* of the record that settled it */
  double ts;                                /* that record's event time */
  uint64_t hash;                            /* altar__hash of the key */
  size_t klen, rlen;
  char data[]; /* the key, a NUL, the run ("backend\x1fexternal_id", empty for a group), a NUL */
} altar__settled_entry_t;

static inline const char *altar__settled_entry_run(const altar__settled_entry_t *e) { return e->data + e->klen + 1; }

/* NULL when out of memory; free with free() unless a cache took it. */
altar__settled_entry_t *altar__settled_entry_new(const char *key, size_t klen, const char *run, size_t rlen,
                                                 uint64_t seq, double ts);

/* Bits of the bloom filter of evicted keys: 4 MiB, about 7 % false
 * positives at 6 million evicted keys (more only cost ledger reads). */
#define ALTAR__SETTLED_BLOOM_BITS ((size_t)1 << 25)

typedef struct altar__settled_cache {
  altar__hmap_t map;
  altar__settled_entry_t *head, *tail;
  size_t cap;         /* entries kept; 0: unbounded */
  bool track_evicted; /* fill the bloom filter as entries go */
  uint64_t *bloom;    /* allocated at the first eviction */
  bool bloom_lost;    /* it could not be allocated: every key may have been evicted */
  uint64_t evicted;
} altar__settled_cache_t;

/* The entry of key, made the most recent, or NULL. Valid until the next put. */
const altar__settled_entry_t *altar__settled_cache_get(altar__settled_cache_t *c, const char *key, size_t klen,
                                                       uint64_t hash);
/* Takes e (replacing the entry of its key, which is freed) and evicts the
 * least recent entries beyond the capacity. Out of memory, e is freed and
 * the cache is as before: it only costs a ledger read later. */
void altar__settled_cache_put(altar__settled_cache_t *c, altar__settled_entry_t *e);
/* Drops key's entry when the record seq settled it (pruning). */
void altar__settled_cache_drop(altar__settled_cache_t *c, const char *key, size_t klen, uint64_t hash, uint64_t seq);
/* Notes a key as held by the ledger but not by the cache, as an eviction
 * would (without track_evicted too). */
void altar__settled_cache_remember(altar__settled_cache_t *c, uint64_t hash);
/* False when key was certainly never evicted (nor remembered). */
bool altar__settled_cache_maybe_evicted(const altar__settled_cache_t *c, uint64_t hash);
size_t altar__settled_cache_size(const altar__settled_cache_t *c);
void altar__settled_cache_free(altar__settled_cache_t *c);

#endif
