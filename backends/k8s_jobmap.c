/* Open addressing with linear probing. Removal shifts the entries of the
 * probe run after the hole back (backward-shift deletion), so no tombstone
 * slots accumulate and a lookup never walks past a removed key. */
#include "k8s_jobmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* The slot holding name (hash h), or the empty one that ends its run. */
static size_t slot_of(const altar__k8s_jobent_t *slots, size_t cap, const char *name, uint64_t h) {
  size_t i = (size_t)h & (cap - 1);
  while (slots[i].name && (slots[i].hash != h || strcmp(slots[i].name, name))) i = (i + 1) & (cap - 1);
  return i;
}

altar__k8s_jobent_t *altar__k8s_jobmap_get(const altar__k8s_jobmap_t *m, const char *name) {
  if (!m->cap || !name) return NULL;
  size_t i = slot_of(m->slots, m->cap, name, hash(name));
  return m->slots[i].name ? &m->slots[i] : NULL;
}

/* Doubles the table (a power of two, at most 70% full). */
static int grow(altar__k8s_jobmap_t *m) {
  size_t cap = m->cap ? m->cap * 2 : 64;
  if (cap < m->cap || cap > SIZE_MAX / sizeof *m->slots) return -1;
  altar__k8s_jobent_t *slots = calloc(cap, sizeof *slots);
  if (!slots) return -1;
  for (size_t i = 0; i < m->cap; i++)
    if (m->slots[i].name) slots[slot_of(slots, cap, m->slots[i].name, m->slots[i].hash)] = m->slots[i];
  free(m->slots);
  m->slots = slots;
  m->cap = cap;
  return 0;
}

altar__k8s_jobent_t *altar__k8s_jobmap_put(altar__k8s_jobmap_t *m, const char *name) {
  altar__k8s_jobent_t *e = altar__k8s_jobmap_get(m, name);
  if (e) return e;
  if ((m->n + 1) * 10 > m->cap * 7 && grow(m)) return NULL;
  uint64_t h = hash(name);
  e = &m->slots[slot_of(m->slots, m->cap, name, h)];
  memset(e, 0, sizeof *e);
  if (!(e->name = strdup(name))) return NULL;
  e->hash = h;
  m->n++;
  return e;
}

bool altar__k8s_jobmap_remove(altar__k8s_jobmap_t *m, const char *name) {
  altar__k8s_jobent_t *e = altar__k8s_jobmap_get(m, name);
  if (!e) return false;
  size_t mask = m->cap - 1, hole = (size_t)(e - m->slots);
  free(e->name);
  /* Walk the run after the hole; an entry whose home slot is not cyclically
   * within (hole, j] would be unreachable past the hole, so it moves in. */
  for (size_t j = (hole + 1) & mask; m->slots[j].name; j = (j + 1) & mask) {
    size_t home = (size_t)m->slots[j].hash & mask;
    bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    m->slots[hole] = m->slots[j];
    hole = j;
  }
  memset(&m->slots[hole], 0, sizeof m->slots[hole]);
  m->n--;
  return true;
}

void altar__k8s_jobmap_clear(altar__k8s_jobmap_t *m) {
  for (size_t i = 0; i < m->cap; i++) free(m->slots[i].name);
  free(m->slots);
  memset(m, 0, sizeof *m);
}
