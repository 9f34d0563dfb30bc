/* altar — a small open-addressing hash map from borrowed byte keys to
 * pointers. The map never copies or frees keys: each key must live inside
 * (or as long as) its value. Internal to reconciler/. */
#ifndef ALTAR_RECONCILER_HMAP_H
#define ALTAR_RECONCILER_HMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct altar__hslot {
  const char *key; /* NULL in an empty slot (the control byte decides) */
  size_t len;
  uint64_t hash;
  void *val;
} altar__hslot_t;

typedef struct altar__hmap {
  altar__hslot_t *slots;
  /* One byte per slot, in the same allocation: 0 for empty, else 0x80 and
   * the hash's top seven bits. A probe reads these first, so most misses
   * end without touching a slot (a large map's slots do not stay cached). */
  uint8_t *ctrl;
  size_t cap; /* power of two, or 0 */
  size_t n;   /* entries */
} altar__hmap_t;

uint64_t altar__hash(const void *key, size_t len);
void *altar__hmap_get(const altar__hmap_t *m, const char *key, size_t len);
/* The same with the key's altar__hash already known. */
void *altar__hmap_get_h(const altar__hmap_t *m, const char *key, size_t len, uint64_t hash);
/* The slot holding key (the key pointer it was put with, and its value),
 * or NULL; valid until the next put or delete. */
const altar__hslot_t *altar__hmap_slot_h(const altar__hmap_t *m, const char *key, size_t len, uint64_t hash);
/* Inserts or replaces; 0 or ALTAR_ENOMEM. */
int altar__hmap_put(altar__hmap_t *m, const char *key, size_t len, void *val);
/* Inserts or replaces with the hash known; *pold (may be NULL) gets the
 * value replaced, or NULL. 0 or ALTAR_ENOMEM. */
int altar__hmap_put_h(altar__hmap_t *m, const char *key, size_t len, uint64_t hash, void *val, void **pold);
/* Removes key; returns its value or NULL. May move other entries between
 * slots, so do not delete while walking the slots. */
void *altar__hmap_del(altar__hmap_t *m, const char *key, size_t len);
void *altar__hmap_del_h(altar__hmap_t *m, const char *key, size_t len, uint64_t hash);
/* Room for `more` entries beyond those in the map, made at once (no
 * doubling step by step while they are put). 0 or ALTAR_ENOMEM. */
int altar__hmap_reserve(altar__hmap_t *m, size_t more);
/* Empties the map and keeps its table for reuse, up to 65,536 slots; a
 * larger one is freed (the next put starts small). */
void altar__hmap_clear(altar__hmap_t *m);
void altar__hmap_free(altar__hmap_t *m);

#endif
