/* Open-addressing hash map with linear probing; a delete shifts the rest of
 * its run back, so no tombstones build up under steady put/delete traffic. */
#include "core/hmap.h"

#include "altar/error.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Multiply-fold mixing, eight bytes a step: keys are 20-60 bytes, and a
 * byte-at-a-time hash (FNV) spent more time than the probing itself. */
static inline uint64_t fold_mul(uint64_t a, uint64_t b) {
  unsigned __int128 m = (unsigned __int128)a * b;
  return (uint64_t)m ^ (uint64_t)(m >> 64);
}

uint64_t altar__hash(const void *key, size_t len) {
  const unsigned char *p = key;
  uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)len, w;
  for (; len >= 8; p += 8, len -= 8) {
    memcpy(&w, p, 8);
    h = fold_mul(h ^ w, 0xbf58476d1ce4e5b9ull);
  }
  /* The last 1-7 bytes without a byte loop: two overlapping 4-byte reads,
   * or first, middle and last byte; either covers every byte of the tail. */
  w = 0;
  if (len >= 4) {
    uint32_t a, b;
    memcpy(&a, p, 4);
    memcpy(&b, p + len - 4, 4);
    w = (uint64_t)a << 32 | b;
  } else if (len) {
    w = (uint64_t)p[0] << 16 | (uint64_t)p[len >> 1] << 8 | p[len - 1];
  }
  return fold_mul(h ^ w ^ 0x2545f4914f6cdd1dull, 0x94d049bb133111ebull);
}

static uint8_t tag_of(uint64_t h) { return (uint8_t)(0x80 | (h >> 57)); }

static altar__hslot_t *find(const altar__hmap_t *m, const char *key, size_t len, uint64_t h) {
  if (!m->cap) return NULL;
  size_t mask = m->cap - 1;
  uint8_t tag = tag_of(h);
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    uint8_t c = m->ctrl[i];
    if (!c) return NULL;
    if (c != tag) continue;
    altar__hslot_t *s = &m->slots[i];
    if (s->hash == h && s->len == len && !memcmp(s->key, key, len)) return s;
  }
}

void *altar__hmap_get_h(const altar__hmap_t *m, const char *key, size_t len, uint64_t hash) {
  altar__hslot_t *s = find(m, key, len, hash);
  return s ? s->val : NULL;
}

const altar__hslot_t *altar__hmap_slot_h(const altar__hmap_t *m, const char *key, size_t len, uint64_t hash) {
  return find(m, key, len, hash);
}

void *altar__hmap_get(const altar__hmap_t *m, const char *key, size_t len) {
  return altar__hmap_get_h(m, key, len, altar__hash(key, len));
}

/* Slots and control bytes of cap entries in one zeroed allocation. */
static altar__hslot_t *table_new(size_t cap) { return calloc(cap, sizeof(altar__hslot_t) + 1); }

static void place(altar__hmap_t *m, const altar__hslot_t *e) {
  size_t mask = m->cap - 1, i = e->hash & mask;
  while (m->ctrl[i]) i = (i + 1) & mask;
  m->slots[i] = *e;
  m->ctrl[i] = tag_of(e->hash);
}

/* Moves every entry into a new table of cap slots (a power of two). */
static int rehash(altar__hmap_t *m, size_t cap) {
  altar__hmap_t old = *m;
  altar__hslot_t *slots = table_new(cap);
  if (!slots) return ALTAR_ENOMEM;
  m->slots = slots;
  m->ctrl = (uint8_t *)(slots + cap);
  m->cap = cap;
  for (size_t i = 0; i < old.cap; i++)
    if (old.ctrl[i]) place(m, &old.slots[i]);
  free(old.slots);
  return ALTAR_OK;
}

static int grow(altar__hmap_t *m) { return rehash(m, m->cap ? m->cap * 2 : 16); }

int altar__hmap_reserve(altar__hmap_t *m, size_t more) {
  size_t cap = m->cap ? m->cap : 16;
  while ((m->n + more) * 2 > cap) cap *= 2;
  return cap > m->cap ? rehash(m, cap) : ALTAR_OK;
}

int altar__hmap_put_h(altar__hmap_t *m, const char *key, size_t len, uint64_t hash, void *val, void **pold) {
  altar__hslot_t *s = find(m, key, len, hash);
  if (pold) *pold = s ? s->val : NULL;
  if (s) {
    s->key = key;
    s->val = val;
    return ALTAR_OK;
  }
  /* Linear probing stays short below half full. */
  if ((m->n + 1) * 2 > m->cap && grow(m)) return ALTAR_ENOMEM;
  place(m, &(altar__hslot_t){key, len, hash, val});
  m->n++;
  return ALTAR_OK;
}

int altar__hmap_put(altar__hmap_t *m, const char *key, size_t len, void *val) {
  return altar__hmap_put_h(m, key, len, altar__hash(key, len), val, NULL);
}

void *altar__hmap_del(altar__hmap_t *m, const char *key, size_t len) {
  return altar__hmap_del_h(m, key, len, altar__hash(key, len));
}

void *altar__hmap_del_h(altar__hmap_t *m, const char *key, size_t len, uint64_t hash) {
  altar__hslot_t *s = find(m, key, len, hash);
  if (!s) return NULL;
  void *v = s->val;
  /* Close the hole: move back each later entry of the run that would no
   * longer be reachable from its home slot across the gap. */
  size_t mask = m->cap - 1, hole = (size_t)(s - m->slots);
  for (size_t j = (hole + 1) & mask; m->ctrl[j]; j = (j + 1) & mask) {
    size_t home = m->slots[j].hash & mask;
    /* j's entry may stay when its home lies cyclically in (hole, j]. */
    bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    m->slots[hole] = m->slots[j];
    m->ctrl[hole] = m->ctrl[j];
    hole = j;
  }
  m->slots[hole] = (altar__hslot_t){0};
  m->ctrl[hole] = 0;
  m->n--;
  return v;
}

/* Above this size (2 MiB) clear keeps a table only while it is well used:
 * one wide batch must not leave every later, small one zeroing (and the
 * process holding) a table its size, while a steady run of large batches
 * (a rebuild) keeps its table rather than growing it again each time. */
#define KEEP_SLOTS (1u << 16)

void altar__hmap_clear(altar__hmap_t *m) {
  if (m->cap > KEEP_SLOTS && m->n * 8 < m->cap) {
    altar__hmap_free(m);
    return;
  }
  if (m->cap) memset(m->slots, 0, m->cap * (sizeof *m->slots + 1));
  m->n = 0;
}

void altar__hmap_free(altar__hmap_t *m) {
  free(m->slots);
  memset(m, 0, sizeof *m);
}
